"""How well a real model follows cm_gym's prompts, read from a run's response cache: the measure
the small-model prompts (`cm_gym.llm.prompts_small`) are adapted by — never a policy's score.

    python bench/local_model_rates.py RUN_CACHE.sqlite --benchmark SpiderSQL [--model qwen2.5-coder-1.5b]

Per template, over the replies of `--model` (all local models when omitted):

* DRAFT_ACTION — share whose reply holds a parseable action (`Domain.parse_problem` is None);
* REVISE_WITH_RECORD — share parseable, and share whose action differs from the draft shown
  (`Domain.action_changed`: the record changed the draft), and share equal to the record's a⁺
  pattern applied (not measured here: that needs the contrast);
* GENERATE_LOCAL_ALTERNATIVES — share of replies with at least one valid local edit, and mean
  valid edits per reply (`parse_alternatives`, K asked);
* DISTIL_RECORD — share with both a SITUATION and a CONDITION line, and share whose condition
  parses in the domain's condition grammar;
* REFLECT — share non-empty.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.base import (
    DISTIL_RECORD,
    DRAFT_ACTION,
    GENERATE_LOCAL_ALTERNATIVES,
    REFLECT,
    REVISE_WITH_RECORD,
)
from cm_gym.llm.cache import ResponseCache, decode_request
from cm_gym.llm.parsers import parse_alternatives, parse_distil
from cm_gym.llm.prompts import parse_rendered


def rates(cache_file: Path, benchmark: str, model: str | None = None) -> dict[str, dict[str, Any]]:
    domain = get_domain(get_benchmark(benchmark).domain_name)
    tally: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    with ResponseCache(cache_file, "ro") as cache:
        for _key, template, raw, _created, blob in cache.rows():
            if blob is None:
                continue
            request = decode_request(blob)[1]
            identity = request.get("identity", {})
            if identity.get("backend") != "local" or (model and identity.get("model") != model):
                continue
            text = json.loads(raw)["text"]
            try:
                _, fields = parse_rendered(request["messages"])
            except Exception:  # noqa: BLE001 - a request of another cm_gym version
                continue
            t = tally[template]
            t["replies"] += 1
            if template in (DRAFT_ACTION, REVISE_WITH_RECORD):
                ok = domain.parse_problem(text) is None
                t["parseable"] += ok
                if template == REVISE_WITH_RECORD and ok:
                    t["changed_draft"] += domain.action_changed(
                        fields.get("draft", ""), domain.parse_action(text)
                    )
            elif template == GENERATE_LOCAL_ALTERNATIVES:
                edits = parse_alternatives(text, fields.get("action", ""))
                t["with_valid_edit"] += bool(edits)
                t["valid_edits"] += len(edits)
            elif template == DISTIL_RECORD:
                situation, condition = parse_distil(text)
                t["both_lines"] += bool(situation) and "CONDITION" in text.upper()
                t["condition_parses"] += _condition_ok(domain, condition)
            elif template == REFLECT:
                t["non_empty"] += bool(text.strip())
    return {
        template: {k: (v if k == "replies" else round(v / t["replies"], 3)) for k, v in t.items()}
        for template, t in sorted(tally.items())
    }


def _condition_ok(domain: Any, condition: str) -> bool:
    if not condition:
        return True  # "none": always applicable, a valid answer of the grammar
    try:
        from cm_gym.domains.conditions import parse_condition

        parse_condition(condition, domain.condition_predicates())
        return True
    except Exception:  # noqa: BLE001 - any refusal of the grammar
        return False


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("cache", type=Path)
    parser.add_argument("--benchmark", default="SpiderSQL")
    parser.add_argument("--model", default=None)
    args = parser.parse_args()
    for template, row in rates(args.cache, args.benchmark, args.model).items():
        print(f"{template:28} " + "  ".join(f"{k} {v}" for k, v in row.items()))


if __name__ == "__main__":
    main()
