"""Typed argument parsing shared by the sub-commands.

`add_dataclass_args` turns a dataclass (`ProtocolConfig`) into options: one ``--field-name`` per
field, with the help text, choices and validating type of `OPTIONS` (a field without an entry
still works, with a bare "(default …)" help; a test requires every `ProtocolConfig` field to have
one). Validating types turn bad values into argparse's one-line errors (``--seeds -1``,
``--total-decisions 0``, an unknown benchmark). Shared option groups (`add_output_options`) make a
flag common to several commands one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def nonneg_int(text: str) -> int:
    """argparse type: an integer >= 0 (seeds)."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def pos_int(text: str) -> int:
    """argparse type: an integer >= 1 (sizes, counts)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def pos_float(text: str) -> float:
    """argparse type: a finite number > 0 (seconds)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def slots(text: str) -> int:
    """argparse type: k, the number of retrieved records (0..4)."""
    value = _int(text)
    if not 0 <= value <= 4:
        raise argparse.ArgumentTypeError(f"must be in 0..4 (the selector has 4 slots), got {value}")
    return value


def existing_file(text: str) -> Path:
    """argparse type: a file that exists."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    return path


def benchmark_name(text: str) -> str:
    """argparse type: a registered benchmark (name or Gymnasium id), returned as its name."""
    from cm_gym.domains.registry import RegistryError, get_benchmark

    try:
        return get_benchmark(text).name
    except RegistryError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def llm_spec(text: str) -> str:
    """argparse type: "simulated", "openai", "openai:<model>", "recorded:<system>[+cascade]" or
    "local:<model>" (a pinned model of `cm_gym.llm.gguf_models.MODELS`)."""
    kind, _, rest = text.partition(":")
    if kind not in ("simulated", "openai", "recorded", "local") or (
        kind in ("recorded", "local") and not rest.strip()
    ):
        raise argparse.ArgumentTypeError(
            f"expected simulated, openai, openai:<model>, recorded:<system> or local:<model>, got {text!r}"
        )
    if kind == "local":
        from cm_gym.llm.gguf_models import MODELS

        if rest not in MODELS:
            raise argparse.ArgumentTypeError(f"unknown local model {rest!r}; known: {', '.join(MODELS)}")
    return text


def split_name(text: str) -> str:
    """argparse type: a split name (`cm_gym.core.splits.SPLIT_NAMES`: tasks, databases, ...)."""
    from cm_gym.core.splits import split_kind

    try:
        split_kind(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text.strip().lower()


def _choices(module: str, name: str) -> Callable[[], Sequence[str]]:
    def get() -> Sequence[str]:
        import importlib

        return tuple(getattr(importlib.import_module(module), name))

    return get


@dataclass(frozen=True)
class Opt:
    """How one dataclass field appears on the command line."""

    help: str
    type: Callable[[str], Any] | None = None
    choices: Callable[[], Sequence[str]] | None = None
    metavar: str | None = None
    aliases: tuple[str, ...] = ()


#: Help, validating type and choices of every `ProtocolConfig` field.
OPTIONS: dict[str, Opt] = {
    "benchmark": Opt("registered benchmark (see `cm-gym benchmarks`), e.g. SQL", benchmark_name, metavar="NAME"),
    "out_dir": Opt("output folder (default runs/<benchmark>)", Path, metavar="DIR"),
    "data": Opt("a data folder in the benchmark's layout (default: its own data)", Path, metavar="DIR"),
    "seeds": Opt("selector seeds, each trained and evaluated", nonneg_int, metavar="SEED"),
    "total_decisions": Opt("decisions of selector training per seed", pos_int, metavar="N"),
    "checkpoint_every": Opt("decisions between validation checkpoints", pos_int, metavar="N"),
    "agent": Opt("base agent loop", choices=_choices("cm_gym.agent", "AGENT_KINDS")),
    "llm": Opt("LLM: simulated | openai | openai:<model> | recorded:<system> (real published drafts; the same system when retried) | recorded:<system>+cascade (later drafts from stronger published systems: the 'cascade' row)", llm_spec, metavar="SPEC"),
    "llm_seed": Opt("seed of the (simulated) LLM", nonneg_int, metavar="SEED"),
    "llm_cache": Opt("LLM response cache file (default: under $CM_GYM_CACHE)", Path, metavar="FILE"),
    "llm_cache_mode": Opt("rw, ro (replay only: a miss is an error) or off", choices=_choices("cm_gym.llm.factory", "CACHE_MODES")),
    "concurrency": Opt("LLM calls in flight at most, where calls are independent (real LLMs; default $CM_GYM_LLM_CONCURRENCY, else 8)", pos_int, metavar="N", aliases=("--llm-concurrency",)),
    "llm_timeout": Opt("seconds a real LLM call may take before it fails, never re-sent; must exceed the server's latency (default $CM_GYM_LLM_TIMEOUT, else 60)", pos_float, metavar="S"),
    "llm_max_tokens": Opt("reply length limit of a real LLM, part of the cache key (default $CM_GYM_LLM_MAX_TOKENS, else 1024)", pos_int, metavar="N"),
    "llm_retries": Opt("re-sends of a failed real LLM call (never of a timed-out one; default $CM_GYM_LLM_RETRIES, else 4)", nonneg_int, metavar="N"),
    "split_seed": Opt("seed of the build / train / eval split", nonneg_int, metavar="SEED"),
    "admit_a_minus": Opt("which failed actions a⁻ construction stores: auto (only real model text when the drafts are real, e.g. recorded:<system>) | real | any (simulated revisions of real drafts too)", choices=lambda: ("auto", "real", "any")),
    "split_by": Opt("how to split: tasks (paper App. D.2: sampled by seed, shared ids removed; SpiderSQL's default) | databases (environments apart: the 'new environment' condition) | shuffled (default: the benchmark's own)", split_name, metavar="NAME"),
    "split_seeds": Opt("rotate the split (SpiderSQL: the eval databases) over these seeds, one run each, pooled (cm-gym run)", nonneg_int, metavar="SEED"),
    "max_decisions": Opt("decision budget per task", pos_int, metavar="N"),
    "k": Opt("records retrieved per decision (0..4)", slots, metavar="K"),
    "use_conditions": Opt("condition switch: filter retrieval and render records with their condition"),
    "retrieval": Opt("retrieval mode", choices=_choices("cm_gym.envs._loading", "RETRIEVAL_MODES")),
    "retention": Opt("retention policy at capacity", choices=_choices("cm_gym.memory.retention", "RETENTION_POLICIES")),
    "store": Opt("a frozen snapshot to use instead of building memory", existing_file, metavar="SNAPSHOT"),
    "n_build": Opt("use only the first N build tasks", pos_int, metavar="N"),
    "n_train": Opt("use only the first N training tasks", pos_int, metavar="N"),
    "n_eval": Opt("evaluate on the first N held-out tasks", pos_int, metavar="N"),
    "policies": Opt("built-in policies to evaluate (the learned memrl, memq, linucb, thompson, memento-clf train on T_train first)", choices=_choices("cm_gym.protocol", "KNOWN_POLICIES")),
    "on_masked": Opt("a policy picking masked actions: warn (they run as skip) or error", choices=lambda: ("warn", "error")),
    "tensorboard": Opt("write TensorBoard logs to <out-dir>/tensorboard"),
    "progress": Opt("progress bars on stderr"),
    "revision_rates": Opt("the simulated LLM's revision rates (a file from `cm-gym calibrate`)", existing_file, metavar="FILE"),
    "obs_layouts": Opt("observation layouts to train a selector on: paper (98 dims) and/or extended (106, beyond the paper)", choices=_choices("cm_gym.envs.features", "OBS_LAYOUTS")),
    "obs_layout": Opt("observation layout: paper (98 dims) or extended (106, beyond the paper)", choices=_choices("cm_gym.envs.features", "OBS_LAYOUTS")),
    "validation_fraction": Opt("share of T_train used to choose the checkpoint (default 0.5)", float, metavar="F"),
    "train_selector": Opt("also train the masked DQN and place it between random and the oracle"),
    "fit": Opt("fit the revision rates to the paper's rates and write them to --out"),
    "out": Opt("where to write the fitted rates (default <out-dir>/revision_rates.json)", Path, metavar="FILE"),
    "min_count": Opt("with --llm-cache: entries a closeness bin needs before its rates are fitted; thinner bins keep the simulator's rates, and none fitted writes nothing", pos_int, metavar="N"),
    "n_tasks": Opt("use only the first N training tasks", pos_int, metavar="N"),
    "rescued_broken": Opt("also count rescued / broken tasks of top-1 against skip on T_eval"),
    "algo": Opt("selector learner: masked-dqn (SB3), rllib-ppo or rllib-dqn (RLlib; pip install 'cm-gym[ray]')", choices=_choices("cm_gym.protocol", "ALGOS")),
    "env_runners": Opt("RLlib env-runner processes collecting decisions (--algo rllib-*)", nonneg_int, metavar="N"),
    "ray_address": Opt("RLlib on an existing Ray cluster (auto, HOST:6379, ray://HOST:10001); default a local instance", metavar="ADDRESS"),
}  # fmt: skip


def _base_type(tp: Any) -> tuple[Any, bool]:
    """(element type, is_tuple) of a field annotation, dropping Optional."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _base_type(args[0])
    if origin is tuple:
        return typing.get_args(tp)[0], True
    return tp, False


def add_dataclass_args(parser: argparse.ArgumentParser, cls: type, skip: tuple[str, ...] = ()) -> None:
    """One ``--field-name`` option per dataclass field (bools get ``--x/--no-x``), described by
    `OPTIONS`; unset options stay None, so the dataclass default (or a base config) applies."""
    hints = typing.get_type_hints(cls)
    group = parser.add_argument_group("protocol options")
    for f in dataclasses.fields(cls):
        if f.name in skip or typing.get_origin(hints[f.name]) is dict:
            continue
        tp, many = _base_type(hints[f.name])
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else None
        if isinstance(default, tuple):
            default = " ".join(map(str, default))
        opt = OPTIONS.get(f.name, Opt(""))
        shown = "" if default is None or "default" in opt.help else f" (default {default})"
        help_text = f"{opt.help}{shown}".strip()
        if tp is bool:
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=help_text)
            continue
        kwargs: dict[str, Any] = {"type": opt.type or (Path if tp is Path else tp), "default": None}
        if opt.choices is not None:
            kwargs["choices"] = opt.choices()
        if opt.metavar and opt.choices is None:
            kwargs["metavar"] = opt.metavar
        group.add_argument(flag, *opt.aliases, nargs="+" if many else None, help=help_text, **kwargs)


def add_llm_limit_options(parser: argparse.ArgumentParser, *, concurrency: bool = True) -> None:
    """``--llm-timeout``, ``--llm-max-tokens``, ``--llm-retries`` (and ``--llm-concurrency``) for
    a command with its own ``--llm`` option (the protocol commands get them from `OPTIONS`)."""
    group = parser.add_argument_group("LLM client limits (real endpoints; cm_gym.llm.limits)")
    names = ["llm_timeout", "llm_max_tokens", "llm_retries"] + (["concurrency"] if concurrency else [])
    for name in names:
        opt = OPTIONS[name]
        flag = "--llm-concurrency" if name == "concurrency" else "--" + name.replace("_", "-")
        group.add_argument(flag, dest=name, type=opt.type, default=None, metavar=opt.metavar, help=opt.help)


def llm_limit_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The `make_llm` keywords of the limits given on the command line (unset ones omitted)."""
    given = {
        "timeout": getattr(args, "llm_timeout", None),
        "max_tokens": getattr(args, "llm_max_tokens", None),
        "retries": getattr(args, "llm_retries", None),
        "concurrency": getattr(args, "concurrency", None),
    }
    return {k: v for k, v in given.items() if v is not None}


def add_output_options(parser: argparse.ArgumentParser, *, table: bool = True) -> None:
    """``--overwrite`` (replace the outputs of an earlier run in --out-dir) and, for commands that
    print the results table, ``--format``."""
    group = parser.add_argument_group("output")
    group.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the outputs an earlier run left in --out-dir (refused otherwise)",
    )
    if table:
        group.add_argument(
            "--format",
            choices=("text", "markdown", "json"),
            default="text",
            help="results table as text (fits 100 columns), a Markdown table, or JSON (default text)",
        )


def dataclass_from_args(cls: type[T], args: argparse.Namespace, base: T | None = None) -> T:
    """A `cls` instance from parsed options; options left unset keep `base`'s (or the default)."""
    values = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        value = getattr(args, f.name, None)
        if value is not None:
            values[f.name] = tuple(value) if isinstance(value, list) else value
    return dataclasses.replace(base, **values) if base is not None else cls(**values)  # type: ignore[type-var]


def dataclass_from_json(cls: type[T], data: dict[str, Any]) -> T:
    """A `cls` instance from its JSON form (``asdict`` + json): lists become tuples, strings
    become Paths where the field is a Path; unknown keys and dict-typed fields are ignored."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name not in data or typing.get_origin(hints[f.name]) is dict:
            continue
        value, (tp, many) = data[f.name], _base_type(hints[f.name])
        if value is not None and many:
            value = tuple(value)
        elif value is not None and tp is Path:
            value = Path(value)
        values[f.name] = value
    return cls(**values)
