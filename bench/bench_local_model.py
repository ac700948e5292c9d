"""Speed of the real local models on cm_gym's own calls: one llama.cpp engine, 1 thread.

    python bench/bench_local_model.py [--models qwen2.5-coder-0.5b qwen2.5-coder-1.5b] [--tasks 12]

For each model: the engine's load time (start to ready), then a SpiderSQL stream in the order a
run makes it (tasks grouped by database): per task a DRAFT_ACTION, a REVISE_WITH_RECORD showing a
verified correction from another task of the same database, and, for every third task, a
GENERATE_LOCAL_ALTERNATIVES and a DISTIL_RECORD. Printed per template: calls, CPU seconds of the
engine process per call (``/proc``), prompt and generated tokens per call, prompt tokens reused
from the previous call's KV cache (llama.cpp's "prefix-match hit" lines), and overall prompt and
generation tokens per second of the engine's one thread (llama.cpp's own timings, wall clock:
CPU seconds only on an idle core; the load average is printed beside them) and calls per hour on 2 cores (two
engines, one per core, at the measured CPU cost per call of the DRAFT/REVISE mix). The engine
build is measured once by ``cm-gym setup-local-model`` and printed from its record when present.
Needs `cm-gym setup-local-model NAME` and the Spider data (CM_GYM_DATA). The responses are not
cached: every call is live.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
from collections import defaultdict
from pathlib import Path

from cm_gym.core.paths import cache_root
from cm_gym.core.types import AgentState
from cm_gym.domains.registry import get_benchmark
from cm_gym.llm.base import DISTIL_RECORD, DRAFT_ACTION, GENERATE_LOCAL_ALTERNATIVES, REVISE_WITH_RECORD
from cm_gym.llm.fields import render_record
from cm_gym.llm.gguf_models import model_path
from cm_gym.llm.llama_engine import Engine
from cm_gym.llm.local_llm import LocalLLM
from cm_gym.memory.alternatives import prompt_fields

_PREFIX = re.compile(r"(\d+) prefix-match hit, remaining (\d+) prompt tokens")
_PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_EVAL = re.compile(r"^\S*\s*eval time =\s*([\d.]+) ms /\s*(\d+) runs", re.M)


def _calls(tasks: list, n: int, domain: object) -> list[tuple[str, dict]]:
    by_db: dict[str, list] = defaultdict(list)
    for t in tasks:
        by_db[t.env_id].append(t)
    stream: list[tuple[str, dict]] = []
    picked = [t for db in sorted(by_db, key=lambda d: -len(by_db[d]))[:3] for t in by_db[db][: (n + 2) // 3]][
        :n
    ]
    for i, task in enumerate(picked):
        other = next((t for t in by_db[task.env_id] if t is not task), task)
        gold, other_gold = task.reference, other.reference
        fields = prompt_fields(domain, AgentState(task), "react")  # type: ignore[arg-type]
        stream.append((DRAFT_ACTION, fields))
        wrong = other_gold.replace("SELECT", "SELECT DISTINCT", 1) if other_gold else "SELECT 1"
        record = render_record(
            {"situation": "a verified correction", "condition": "", "a_minus": wrong, "a_plus": other_gold,
             "evidence": {"score_minus": 0.0, "score_plus": 1.0}}
        )  # fmt: skip
        stream.append(
            (REVISE_WITH_RECORD, {**fields, "draft": gold or "SELECT 1", "record": record,
                                  "record_a_minus": wrong, "record_a_plus": other_gold, "record_id": "r"})
        )  # fmt: skip
        if i % 3 == 0:
            failed = gold.replace("SELECT", "SELECT DISTINCT", 1) if gold else "SELECT 1"
            stream.append(
                (GENERATE_LOCAL_ALTERNATIVES, {**fields, "action": failed, "feedback": "wrong result", "k": 4,
                                               "decision_units": failed})
            )  # fmt: skip
            stream.append(
                (DISTIL_RECORD, {**fields, "a_minus": failed, "a_plus": gold, "predicate_kinds": "mentions_any",
                                 "evidence": "score 0 -> 1"})
            )  # fmt: skip
    return stream


def bench(model: str, n_tasks: int) -> dict:
    spec = get_benchmark("SpiderSQL")
    domain = spec.domain()
    tasks = spec.load()
    llm = LocalLLM(model, engines=1)
    engine = Engine(model_path(model), model, verbose=True)
    started = time.perf_counter()
    engine.start()
    load_s = time.perf_counter() - started
    llm._engines = [engine]
    llm._clients = [llm._make_clients(engine.base_url)]
    llm._free, llm._last_prefix = [True], [""]
    per: dict[str, list[tuple[float, int, int]]] = defaultdict(list)
    try:
        for template, fields in _calls(tasks, n_tasks, domain):
            cpu0 = engine.cpu_seconds()
            c = llm.complete(template, fields)
            per[template].append((engine.cpu_seconds() - cpu0, c.prompt_tokens, c.completion_tokens))
        time.sleep(0.5)
        log = engine.log_path.read_text(errors="replace") if engine.log_path else ""
    finally:
        engine.stop()
    reused = [int(a) for a, _ in _PREFIX.findall(log)]
    pe = [(float(ms), int(n)) for ms, n in _PROMPT_EVAL.findall(log)]
    ev = [(float(ms), int(n)) for ms, n in _EVAL.findall(log)]
    mix = [cpu for t in (DRAFT_ACTION, REVISE_WITH_RECORD) for cpu, _, _ in per[t]]
    return {
        "model": model,
        "load_s": load_s,
        "templates": {
            t: {
                "calls": len(v),
                "cpu_s_per_call": statistics.mean(x[0] for x in v),
                "prompt_tokens": statistics.mean(x[1] for x in v),
                "completion_tokens": statistics.mean(x[2] for x in v),
            }
            for t, v in per.items()
        },
        "prefix_tokens_reused_per_call": statistics.mean(reused) if reused else 0.0,
        "prompt_tokens_per_cpu_s": sum(n for _, n in pe) / max(1e-9, sum(ms for ms, _ in pe) / 1000),
        "generated_tokens_per_cpu_s": sum(n for _, n in ev) / max(1e-9, sum(ms for ms, _ in ev) / 1000),
        "calls_per_hour_2_cores": 2 * 3600 / statistics.mean(mix) if mix else 0.0,
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", default=["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"])
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    build = cache_root() / "engines" / "build.json"
    if build.is_file():
        b = json.loads(build.read_text())
        print(f"engine build (cm-gym setup-local-model): {b['wall_s']:.0f} s wall, {b['cpu_s']:.0f} CPU-s")
    results = [bench(m, args.tasks) for m in args.models]
    for r in results:
        print(f"\n{r['model']}: ready in {r['load_s']:.1f} s (1 thread)")
        print(f"  {'template':28} {'calls':>5} {'CPU-s/call':>10} {'prompt tok':>10} {'reply tok':>9}")
        for t, v in r["templates"].items():
            print(
                f"  {t:28} {v['calls']:5d} {v['cpu_s_per_call']:10.2f} {v['prompt_tokens']:10.0f} "
                f"{v['completion_tokens']:9.0f}"
            )
        print(
            f"  prefix tokens reused per call {r['prefix_tokens_reused_per_call']:.0f}; llama.cpp's own "
            f"timings: prompt {r['prompt_tokens_per_cpu_s']:.0f} and generated "
            f"{r['generated_tokens_per_cpu_s']:.1f} tokens per second of its 1 thread (wall: CPU-s only on "
            f"an idle core); {r['calls_per_hour_2_cores']:.0f} DRAFT/REVISE calls per hour on 2 cores "
            f"(load average {r['load']:.1f})"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
