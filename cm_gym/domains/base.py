"""The Domain contract: everything a benchmark family plugs into cm_gym.

A domain is one package under `cm_gym/domains/<name>/` (or a third-party package) that implements
`Domain` and calls `cm_gym.registry.register_benchmark(...)` once per benchmark. Nothing outside
the package knows its insides: the env, the store, the selector and the simulated LLM reach it
only through this contract. A domain imports only `cm_gym.types`, `cm_gym.llm.base` and this
module.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from cm_gym.types import Evaluator, Task

#: A condition predicate: ``fn(task, args) -> bool``. Must be decidable without an LLM and must
#: not read ``task.reference``. Registered per domain under a kind name, e.g. ``"sql_mentions_inclusive"``.
PredicateFn = Callable[[Task, tuple[str, ...]], bool]


def described(fn: PredicateFn, text: str) -> PredicateFn:
    """Attach the one-line description that the DISTIL_RECORD prompt lists for a predicate kind."""
    wrapped = functools.partial(fn)
    wrapped.__doc__ = text  # type: ignore[attr-defined]
    return wrapped


@dataclass
class LoadReport:
    """What a loader saw in a data folder besides the tasks it returns (filled when passed in).

    A loader that accepts ``report=`` records here instead of raising: `refused` lists files it
    could not read as tasks (malformed, unreadable, not a regular file) with the reason; `dropped`
    lists well-formed instances it chose not to serve (e.g. no reference decides them within the
    allowance); `disagreements` lists labels that contradict each other or a proof (a folder
    label against a header status, a header against the solver); `notes` carries other facts a
    user should see (an allowance calibrated). Without a report, a loader raises one error listing
    every refused file and logs what it dropped. Entries are ``(file or task id, reason)``;
    `family_of` maps a dropped entry to its family where the loader knows it.
    """

    refused: list[tuple[str, str]] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)
    disagreements: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)
    family_of: dict[str, str] = field(default_factory=dict)


def refused_message(refused: list[tuple[str, str]], what: str, shown: int = 20) -> str:
    """One message listing every refused file of a folder (the first `shown`, then a count)."""
    lines = [f"  {reason}" for _path, reason in refused[:shown]]
    more = f"\n  ... and {len(refused) - shown} more" if len(refused) > shown else ""
    return f"{len(refused)} {what} file(s) cannot be loaded (fix or remove them):\n" + "\n".join(lines) + more


@dataclass(frozen=True)
class Edit:
    """A local alternative: the whole edited action, with exactly one decision unit changed."""

    text: str
    unit: str
    description: str = ""


@dataclass(frozen=True)
class Distillation:
    """A record's situation q and its applicability condition c in the condition grammar of
    `cm_gym.memory.conditions` (``kind("arg", ...) AND kind(...)``; "" or "none" = always)."""

    situation: str
    condition: str


@dataclass(frozen=True)
class ErrorOperator:
    """One systematic slip of the simulated frozen LLM.

    `probability(task)` is the chance the slip is in the first draft (0 when it cannot apply);
    `apply(task, action, rng)` returns the action with the slip, or None when it does not fit.
    """

    name: str
    probability: Callable[[Task], float]
    apply: Callable[[Task, str, np.random.Generator], str | None]


@dataclass(frozen=True)
class ErrorModel:
    """The domain's model of how a frozen LLM errs, read by `cm_gym.llm.simulated`.

    `fix_prob[agent]` is the chance that one failed, fed-back attempt fixes each remaining slip
    (ReAct vs Reflexion); `ignore_record_prob` is the chance a revision ignores the shown record.
    """

    operators: tuple[ErrorOperator, ...]
    fix_prob: Mapping[str, float] = field(default_factory=lambda: {"react": 0.30, "reflexion": 0.45})
    ignore_record_prob: float = 0.1


_TOKEN = re.compile(r"\w+|[^\w\s]+")


def tokens(text: str) -> list[str]:
    """Split an action into word and operator tokens (shared default for diffs and keys)."""
    return _TOKEN.findall(text)


def token_diff(a_minus: str, a_plus: str) -> list[tuple[str, str]]:
    """The (removed, added) token runs that turn `a_minus` into `a_plus`."""
    ta, tb = tokens(a_minus), tokens(a_plus)
    out: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=ta, b=tb, autojunk=False).get_opcodes():
        if op != "equal":
            out.append((" ".join(ta[i1:i2]), " ".join(tb[j1:j2])))
    return out


class Domain(ABC):
    """A benchmark family's world model, edit grammar, conditions and simulated-LLM error model."""

    #: short, unique, lower-case name stored in every Task and Record ("sql", "sat", ...)
    name: ClassVar[str]
    #: what an action is, for prompts ("SQLite query", "SMT-LIB v2 script", "unified diff")
    action_kind: ClassVar[str]
    #: how the LLM must format its action, for prompts
    action_format: ClassVar[str] = "Return only the action, in one fenced code block."
    #: version of the domain's behaviour, part of every cache key built from it (default stores):
    #: bump it to invalidate. None (default): a hash of the domain package's files, so any edit
    #: of the domain's code or shipped data rebuilds its cached stores (`code_version`).
    version: ClassVar[str | None] = None

    def code_version(self) -> str:
        """`version` if declared, else ``"src-<sha256 of the package's files>"``."""
        return str(self.version) if self.version is not None else "src-" + source_digest(type(self))

    # -- world model -------------------------------------------------------------------------
    @abstractmethod
    def make_evaluator(self, **kwargs: Any) -> Evaluator:
        """Build the executable checker H for this domain's tasks (budgets as kwargs)."""

    # -- Module I: local alternatives -----------------------------------------------------------
    @abstractmethod
    def edit_operators(self, task: Task, action: str) -> list[Edit]:
        """Rule-based local edits of `action`, each changing one decision unit. Must not read
        `task.reference`. Deterministic order; the caller picks and deduplicates."""

    def decision_units(self, action: str) -> list[str]:
        """The action split into decision units, for the GENERATE_LOCAL_ALTERNATIVES prompt."""
        return [line for line in action.splitlines() if line.strip()] or [action]

    # -- Module II: records -------------------------------------------------------------------
    @abstractmethod
    def condition_predicates(self) -> Mapping[str, PredicateFn]:
        """Domain-specific predicate kinds usable in conditions (generic kinds are built in)."""

    @abstractmethod
    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        """Rule-based DISTIL_RECORD (used by the simulated LLM): situation q and a condition that
        can be false on a look-alike task. Must not read `task.reference`."""

    def contrast_key(self, a_minus: str, a_plus: str) -> str:
        """A short canonical description of *what changed*, used for redundancy (same key) and
        conflict (inverse key) at admission. Default: the token diff."""
        return "; ".join(f"{rm or '∅'} -> {ad or '∅'}" for rm, ad in token_diff(a_minus, a_plus))

    def inverse_contrast_key(self, a_minus: str, a_plus: str) -> str:
        """The key of the opposite advice (a⁺ → a⁻): a stored record with it conflicts."""
        return self.contrast_key(a_plus, a_minus)

    # -- simulated LLM ------------------------------------------------------------------------
    @abstractmethod
    def error_model(self) -> ErrorModel:
        """Systematic, feature-dependent slips of a frozen LLM in this domain."""

    def apply_contrast(self, task: Task, draft: str, a_minus: str, a_plus: str) -> str | None:
        """Revise `draft` by the record's a⁻ → a⁺ contrast where its pattern matches (whether or
        not that is right for this task). The task passed in has its reference blanked.
        Returns None when the pattern does not occur in the draft. Default: replace each removed
        token run by the added one where the removed run occurs in the draft."""
        out = draft
        changed = False
        for removed, added in token_diff(a_minus, a_plus):
            if not removed:
                continue
            body = r"\s*".join(re.escape(t) for t in removed.split(" "))
            # match whole tokens only: a record ">" -> ">=" must not turn a draft's ">=" into ">=="
            left = r"\b" if removed[0].isalnum() or removed[0] == "_" else r"(?<![^\w\s])"
            right = r"\b" if removed[-1].isalnum() or removed[-1] == "_" else r"(?![^\w\s])"
            pattern = left + body + right
            new, n = re.subn(pattern, added, out, count=1)
            if n:
                out, changed = new, True
        return out if changed else None

    def parse_action(self, text: str) -> str:
        """Extract the action from a free-form LLM reply (fenced block or ACTION: prefix)."""
        fence = re.search(r"```[\w+-]*\n(.*?)```", text, flags=re.S)
        if fence:
            return fence.group(1).strip()
        m = re.search(r"ACTION:\s*(.*)", text, flags=re.S)
        return (m.group(1) if m else text).strip()


_SKIP_DIRS = frozenset({"__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


@functools.lru_cache(maxsize=64)
def _folder_digest(folder: str) -> str:
    h = hashlib.sha256()
    root = Path(folder)
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or path.suffix in (".pyc", ".pyo") or _SKIP_DIRS & set(rel.parts):
            continue
        h.update(rel.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def source_digest(cls: type) -> str:
    """A hash of the files of the package that defines `cls` (recursively; a class defined in a
    top-level module: that file). Cached per process."""
    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    if not file:
        return "unknown"
    path = Path(file).resolve()
    package = getattr(module, "__package__", "") or ""
    if not package:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return _folder_digest(str(path.parent))
