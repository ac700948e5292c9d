"""`cm-gym serve-llm`: serve the simulated LLM over an OpenAI-compatible HTTP API (loopback by
default), so the `openai` client path can be tried and tested without a GPU."""

from __future__ import annotations

import argparse
import logging
import threading

from cm_gym.types import Task

logger = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve-llm",
        help="serve the simulated LLM on an OpenAI-compatible HTTP endpoint",
        description="Serve the simulated LLM (a simulator of a frozen LLM, not a language model) at "
        "/v1/chat/completions and /v1/models. Prompts must be rendered by cm_gym templates.",
    )
    p.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    p.add_argument("--port", type=int, default=8000, help="port (0 = any free port)")
    p.add_argument(
        "--benchmark",
        action="append",
        default=None,
        help="benchmark whose tasks the server can resolve by task id (repeatable; default: all registered)",
    )
    p.add_argument("--seed", type=int, default=0, help="simulator seed")
    p.add_argument("--model-name", default="cm-gym-simulated", help="model id reported by /v1/models")
    p.set_defaults(func=run)


class BenchmarkTaskLookup:
    """Resolves task ids over the named benchmarks' tasks, loading each benchmark on first need."""

    def __init__(self, benchmarks: list[str]) -> None:
        self._pending = list(benchmarks)
        self._tasks: dict[str, Task] = {}
        self._lock = threading.Lock()  # the server answers from several threads

    def __call__(self, task_id: str) -> Task | None:
        from cm_gym.registry import get_benchmark

        with self._lock:
            while task_id not in self._tasks and self._pending:
                name = self._pending.pop(0)
                tasks = get_benchmark(name).load_tasks()
                self._tasks.update((t.task_id, t) for t in tasks)
                logger.info("task lookup: loaded %d tasks of %s", len(tasks), name)
            return self._tasks.get(task_id)


def run(args: argparse.Namespace) -> int:
    from cm_gym.llm.errors import LLMError
    from cm_gym.llm.server import make_server
    from cm_gym.llm.simulated import SimulatedLLM
    from cm_gym.registry import get_benchmark, list_benchmarks

    names = args.benchmark or [spec.name for spec in list_benchmarks()]
    for name in names:
        get_benchmark(name)  # fail fast on an unknown name
    lookup = BenchmarkTaskLookup(names)
    llm = SimulatedLLM(seed=args.seed, task_lookup=lookup)
    try:
        server = make_server(llm, args.host, args.port, args.model_name)
    except OSError as exc:
        raise LLMError(f"cannot serve on {args.host}:{args.port}: {exc}") from exc
    print(
        f"serving the simulated LLM (seed {args.seed}) at {server.base_url} for {', '.join(names) or 'no benchmarks'}"
    )
    print(f"  export OPENAI_BASE_URL={server.base_url} CM_GYM_MODEL={args.model_name}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
