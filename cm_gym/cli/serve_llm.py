"""`cm-gym serve-llm`: serve the simulated LLM over an OpenAI-compatible HTTP API (loopback by
default), so the `openai` client path can be tried and tested without a GPU — or, with
``--llm openai``, a caching proxy in front of a real endpoint (every reply kept in the response
cache, so several clients share one bill)."""

from __future__ import annotations

import argparse
import logging
import threading
from pathlib import Path
from typing import Any

from cm_gym.cli._args import add_llm_limit_options, llm_limit_kwargs, llm_spec
from cm_gym.cli.serve_local import add_local_model_options, serve_local_model
from cm_gym.core.types import Task

logger = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve-llm",
        help="serve the simulated LLM on an OpenAI-compatible HTTP endpoint",
        description="Serve the simulated LLM (a simulator of a frozen LLM, not a language model) at "
        "/v1/chat/completions and /v1/models. It answers only prompts rendered by cm_gym's templates "
        "(cm_gym's own clients send them); any other chat request, e.g. from a generic chat client, "
        "gets HTTP 400. --model / --gguf serve a real model, which answers any chat messages.",
    )
    p.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    p.add_argument("--port", type=int, default=8000, help="port (0 = any free port)")
    p.add_argument(
        "--benchmark",
        action="append",
        default=None,
        help="benchmark whose tasks the server can resolve by task id (repeatable; default: all registered)",
    )
    p.add_argument(
        "--data",
        type=Path,
        default=None,
        help="data folder for the (one) --benchmark, in its layout (default: its own data)",
    )
    p.add_argument("--seed", type=int, default=0, help="simulator seed (the sampling seed with --llm openai)")
    p.add_argument(
        "--model-name",
        default=None,
        help="model id reported by /v1/models (default cm-gym-simulated, or the --model / --gguf name)",
    )
    p.add_argument(
        "--llm",
        default="simulated",
        type=llm_spec,
        help="backend: simulated (default), openai[:model] (a caching proxy; OPENAI_BASE_URL etc.) or "
        "recorded:<system> (real published drafts, the simulator elsewhere)",
    )
    p.add_argument("--llm-cache", default=None, help="response cache file (default for openai: user cache)")
    p.add_argument("--llm-cache-mode", choices=("rw", "ro", "off"), default="rw", help="response cache mode")
    p.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="artificial latency added to every completion (models a real model, for benchmarks)",
    )
    p.add_argument(
        "--workers", type=int, default=None, help="backend worker threads (default min(32, 4*CPUs))"
    )
    key = p.add_mutually_exclusive_group()
    key.add_argument(
        "--api-key-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="require 'Authorization: Bearer KEY' with KEY read from FILE (default: $CM_GYM_API_KEY; "
        "neither: no authentication)",
    )
    key.add_argument(
        "--api-key",
        default=None,
        help="the key on the command line (works, but every local user can read it in the process "
        "list: prefer --api-key-file or $CM_GYM_API_KEY)",
    )
    add_llm_limit_options(p, concurrency=False)  # the client of --llm openai (a caching proxy)
    add_local_model_options(p)
    p.set_defaults(func=run)


class BenchmarkTaskLookup:
    """Resolves task ids over the named benchmarks' tasks, loading each benchmark on first need."""

    def __init__(self, benchmarks: list[str], data: Path | None = None) -> None:
        self._pending = list(benchmarks)
        self._data = data
        self._tasks: dict[str, Task] = {}
        self._lock = threading.Lock()  # the server answers from several threads

    def __call__(self, task_id: str) -> Task | None:
        from cm_gym.domains.registry import get_benchmark

        with self._lock:
            while task_id not in self._tasks and self._pending:
                name = self._pending.pop(0)
                tasks = get_benchmark(name).load(self._data)
                self._tasks.update((t.task_id, t) for t in tasks)
                logger.info("task lookup: loaded %d tasks of %s", len(tasks), name)
            return self._tasks.get(task_id)


def run(args: argparse.Namespace) -> int:
    from cm_gym.llm.apikey import resolve_key

    api_key = resolve_key(args.api_key, args.api_key_file)  # refused before anything is loaded
    from cm_gym.domains.registry import RegistryError, get_benchmark, list_benchmarks
    from cm_gym.llm.errors import LLMError
    from cm_gym.llm.factory import make_llm
    from cm_gym.llm.server import make_server

    names = args.benchmark or [spec.name for spec in list_benchmarks()]
    for name in names:
        get_benchmark(name)  # fail fast on an unknown name
    if args.data is not None and len(names) != 1:
        raise RegistryError("--data needs exactly one --benchmark (the one whose layout the folder has)")
    lookup = BenchmarkTaskLookup(names, args.data)
    local = serve_local_model(args)  # --gguf / --model: a real model on the CPU
    llm = local or make_llm(
        args.llm,
        seed=args.seed,
        task_lookup=lookup,
        cache_path=args.llm_cache,
        cache_mode=args.llm_cache_mode,
        **llm_limit_kwargs(args),
    )
    args.model_name = args.model_name or (local.name if local else "cm-gym-simulated")
    options: dict[str, Any] = {"latency_s": args.latency_ms / 1000.0, "api_key": api_key}
    if args.workers is not None:
        options["workers"] = args.workers
    try:
        server = make_server(llm, args.host, args.port, args.model_name, **options)
    except OSError as exc:
        raise LLMError(f"cannot serve on {args.host}:{args.port}: {exc}") from exc
    what = (
        f"{getattr(local, 'path', None) and local.path.name or local.name} on the CPU (seed {args.seed})"
        if local
        else f"the simulated LLM (seed {args.seed})"
        if args.llm == "simulated"
        else f"{args.llm} (real published drafts; simulated elsewhere)"
        if args.llm.startswith("recorded:")
        else f"{args.llm} (cached proxy)"
    )
    print(f"serving {what} at {server.base_url} for {', '.join(names) or 'no benchmarks'}", flush=True)
    print(f"  export OPENAI_BASE_URL={server.base_url} CM_GYM_MODEL={args.model_name}")
    if args.latency_ms:
        print(f"  artificial latency {args.latency_ms:g} ms per completion")
    # The server runs in a daemon thread and this (main) thread waits for Ctrl-C, so that stopping
    # is bounded: `shutdown` waits at most 10 s for the event loop, and a connection a client keeps
    # open cannot hold the process at exit.
    thread = threading.Thread(target=server.serve_forever, name="cm-gym-llm-server", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
        if local is not None and hasattr(local, "close"):
            local.close()
    return 0
