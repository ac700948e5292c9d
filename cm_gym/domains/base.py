"""The Domain contract: everything a benchmark family plugs into cm_gym.

A domain is one package under `cm_gym/domains/<name>/` (or a third-party package) that implements
`Domain` and calls `cm_gym.domains.registry.register_benchmark(...)` once per benchmark. Nothing outside
the package knows its insides: the env, the store, the selector and the simulated LLM reach it
only through this contract. A domain imports only `cm_gym.core.types`, `cm_gym.llm.base`, this
module and `cm_gym.domains.reply` (reading actions out of real replies, which it configures).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import os
import re
import sys
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, ClassVar

import numpy as np

from cm_gym.core.types import Evaluator, Task
from cm_gym.domains.environment import EnvironmentHooks
from cm_gym.domains.reply import ActionReading

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
    user should see (an allowance calibrated); `unverified` lists instances served although the
    world model could not check their reference while loading (its wall-clock hang guard stopped
    the check twice: a busy machine, not the instance; ``data check`` fails until a quieter run
    verifies them). Without a report, a loader raises one error listing every refused file and
    logs what it dropped. Entries are ``(file or task id, reason)``; `family_of` maps a dropped
    entry to its family where the loader knows it.
    """

    refused: list[tuple[str, str]] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)
    disagreements: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)
    family_of: dict[str, str] = field(default_factory=dict)
    unverified: list[tuple[str, str]] = field(default_factory=list)


def refused_message(refused: list[tuple[str, str]], what: str, shown: int = 20) -> str:
    """One message listing every refused file of a folder (the first `shown`, then a count)."""
    lines = [f"  {reason}" for _path, reason in refused[:shown]]
    more = f"\n  ... and {len(refused) - shown} more" if len(refused) > shown else ""
    return f"{len(refused)} {what} file(s) cannot be loaded (fix or remove them):\n" + "\n".join(lines) + more


@dataclass(frozen=True)
class Edit:
    """A local alternative: the whole edited action, with exactly one decision unit changed.

    `kind` and `contrast_key` are what `Domain.edit_kind` / `Domain.contrast_key` say of
    (action → text), carried by an operator that knows them from the change it made (SQL's base
    grammar), so that the simulated revision need not re-derive them by parsing and diffing both
    texts; None (the default): `Domain._kinded_edits` derives them. Not compared."""

    text: str
    unit: str
    description: str = ""
    kind: str | None = field(default=None, compare=False)
    contrast_key: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Distillation:
    """A record's situation q and its applicability condition c in the condition grammar of
    `cm_gym.domains.conditions` (``kind("arg", ...) AND kind(...)``; "" or "none" = always)."""

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


#: How close a shown record is to the draft it revises (`Domain.record_closeness`): "match" — the
#: record's a⁻ pattern occurs in the draft; "analogous" — it does not, but the same kind of edit has
#: another site or operator there; "unrelated" — neither.
CLOSENESS: tuple[str, ...] = ("match", "analogous", "unrelated")
#: What a revision does with the shown record (`RevisionRates.branch`).
REVISION_BRANCHES: tuple[str, ...] = ("apply", "overapply", "disturb", "unchanged")


@dataclass(frozen=True)
class RevisionRates:
    """How a frozen LLM revises its draft when shown one record, by closeness (`CLOSENESS`).

    * match: applies the record's contrast with probability `apply`, rewrites an unrelated part
      instead with `match_disturb`, otherwise returns the draft unchanged (ignores the record);
    * analogous: over-applies the advice by analogy — the same kind of edit at another site or
      operator (`Domain.analogous_edits`) — with `overapply`, disturbs an unrelated part with
      `analogous_disturb`, otherwise leaves the draft alone;
    * unrelated: disturbs an unrelated part (`Domain.disturbances`) with `unrelated_disturb`,
      otherwise leaves the draft alone.

    Where the defaults come from: one least-squares fit, pooled over the generated SQL, SAT and SMT
    benchmarks with equal weight (`cm-gym calibrate --fit` per benchmark, then
    ``bench/bench_calibration.py``), to the paper's published rates — Fig. 4d (matched retrieval:
    0.29 action changes and 0.03 harmful changes per retrieved record; shuffled: 0.21 and 0.17)
    and Appendix E.3 (harmful use per selected use 4.2% ordinary / 11.8% look-alike with
    conditions, 6.1% / 34.2% without). The paper reports these over all its domains, so one LLM
    behaviour is fitted and every built-in domain uses it; a domain's own structure decides how
    often that behaviour changes or harms an action. They were never tuned to a selector's score.
    That fit counted Fig. 4d as what *each* retrieved record would do if shown; `calibrate` now
    counts it as the paper does (changes made by the one shown record ÷ all retrieved records,
    App. D.4, as the `ablations` study does), under which these rates give 0.086 / 0.013 matched
    and 0.055 / 0.019 shuffled on SQL — no refit was made (a measurement fix, not a new model).
    `cm-gym calibrate --llm-cache FILE` measures them, per domain, for a real model.
    """

    apply: float = 0.665  # applies a matching record's contrast (else ignores it)
    match_disturb: float = 0.0  # fitted to 0: a matching record is applied or ignored
    overapply: float = 0.205  # makes the record's kind of edit at another site or operator
    analogous_disturb: float = 0.0  # fitted to 0
    unrelated_disturb: float = 0.094  # rewrites an unrelated part when the record does not fit

    def __post_init__(self) -> None:
        values = dataclasses.asdict(self)
        if any(not 0.0 <= float(v) <= 1.0 for v in values.values()):
            raise ValueError(f"revision rates must lie in [0, 1], got {values}")
        if (
            self.apply + self.match_disturb > 1.0 + 1e-9
            or self.overapply + self.analogous_disturb > 1.0 + 1e-9
        ):
            raise ValueError(f"the rates of one closeness bin must sum to at most 1, got {values}")

    def probabilities(self, closeness: str) -> dict[str, float]:
        """P(branch | closeness) over `REVISION_BRANCHES` (they sum to 1)."""
        if closeness == "match":
            p = {"apply": self.apply, "overapply": 0.0, "disturb": self.match_disturb}
        elif closeness == "analogous":
            p = {"apply": 0.0, "overapply": self.overapply, "disturb": self.analogous_disturb}
        elif closeness == "unrelated":
            p = {"apply": 0.0, "overapply": 0.0, "disturb": self.unrelated_disturb}
        else:
            raise ValueError(f"closeness must be one of {CLOSENESS}, got {closeness!r}")
        p["unchanged"] = max(0.0, 1.0 - sum(p.values()))
        return p

    def branch(self, closeness: str, u: float) -> str:
        """The branch a uniform draw `u` ∈ [0, 1) selects (cumulative in `REVISION_BRANCHES` order)."""
        acc = 0.0
        for name, p in self.probabilities(closeness).items():
            acc += p
            if u < acc:
                return name
        return "unchanged"

    def as_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in dataclasses.asdict(self).items()}


@dataclass(frozen=True)
class ErrorModel:
    """The domain's model of how a frozen LLM errs, read by `cm_gym.llm.simulated`.

    `fix_prob[agent]` is the chance that one failed, fed-back attempt fixes each remaining slip
    (ReAct vs Reflexion); `revision` is how a revision treats a shown record (`RevisionRates`).
    """

    operators: tuple[ErrorOperator, ...]
    fix_prob: Mapping[str, float] = field(default_factory=lambda: {"react": 0.30, "reflexion": 0.45})
    revision: RevisionRates = field(default_factory=RevisionRates)


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


class Domain(ActionReading, EnvironmentHooks, ABC):
    """A benchmark family's world model, edit grammar, conditions and simulated-LLM error model;
    reading actions out of replies and comparing them comes from `ActionReading`, content versions
    and change families from `EnvironmentHooks` (`cm_gym.domains.environment`)."""

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

    # -- Module III: retrieval ---------------------------------------------------------------
    def retrieval_text(self, task: Task, draft: str, state_text: str = "") -> str:
        """What retrieval embeds as φ(s) to rank records by their situation q: the decision's
        question and the memory-free draft — what a record's situation describes — never the
        environment context (a schema or a file listing would rank records by where they come
        from). Default: the task prompt, then the draft. `state_text` is there for domains whose
        feedback says which part failed."""
        return f"{task.prompt}\n{draft}" if draft else task.prompt

    # -- real recorded outputs (the recorded LLM, `cm_gym.llm.recorded`) ------------------------
    def recording_key(self, task: Task) -> str | None:
        """The key under which published outputs of real systems answering `task` are filed
        (`cm_gym.llm.recordings`: a Spider question, a DafnyBench file, a HumanEval problem), or
        None when no published output answers this kind of task (the default). Reference-free."""
        return None

    def recorded_reply(self, task: Task, output: str) -> str:
        """The reply a published output stands for on `task`. Default: `output` verbatim. A
        completion-style benchmark whose program is the prompt followed by the output (HumanEval)
        returns that concatenation, the real text unchanged."""
        return output

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

    def transform_of(self, task: Task, a_minus: str, a_plus: str) -> str:
        """The executable transform of a generic contrast, as text the record stores (issue 32
        item 5): what `apply_transform` needs to make the same kind of edit in another draft with
        no LLM and no name of the source environment. "" (the default) when the contrast is bound
        to its source (or the domain has no such transforms). Reference-free."""
        return ""

    def apply_transform(self, task: Task, draft: str, transform: str) -> str | None:
        """`draft` with a stored transform (`transform_of`) applied, or None when the draft has no
        site for it or the transform is "" / unknown (the default). No LLM call."""
        return None

    def edit_kind(self, a_minus: str, a_plus: str) -> str:
        """What *kind* of edit a⁻ → a⁺ is, without its site ("cmp:include-boundary" rather than
        "`age > 18` → `age >= 18`"): an edit of another draft with the same kind is an analogous
        edit. Default: each part of the contrast key up to its first ":" (a token-diff key such
        as "> -> >=" is already site-free)."""
        parts = self.contrast_key(a_minus, a_plus).split("; ")
        return "; ".join(sorted({part.split(":", 1)[0].strip() for part in parts if part.strip()}))

    def analogous_edits(self, task: Task, draft: str, a_minus: str, a_plus: str) -> list[str]:
        """Over-applications by analogy: local edits of `draft` of the record's kind
        (`edit_kind`) at another site or operator — never the record's own transfer
        (`apply_contrast`) nor its opposite advice. Reference-free. Default: the domain's
        `edit_operators` filtered by kind."""
        kind = self.edit_kind(a_minus, a_plus)
        inverse = self.inverse_contrast_key(a_minus, a_plus)
        own = self.apply_contrast(task, draft, a_minus, a_plus)
        return [
            text
            for text, edit_kind, key in self._kinded_edits(task, draft)
            if edit_kind == kind and key != inverse and text != own
        ]

    def disturbances(self, task: Task, draft: str, a_minus: str, a_plus: str) -> list[str]:
        """Unrelated rewrites a revision may make instead of using the record: local edits of
        `draft` of another kind than the record's. Reference-free. Default: the domain's
        `edit_operators` minus the record's kind."""
        kind = self.edit_kind(a_minus, a_plus)
        return [text for text, edit_kind, _ in self._kinded_edits(task, draft) if edit_kind != kind]

    def _kinded_edits(self, task: Task, draft: str) -> tuple[tuple[str, str, str], ...]:
        """(text, edit kind, contrast key) of each distinct local edit of `draft`, memoised per
        (task, draft): a revision asks for them several times and edits may parse (SQL)."""
        memo: OrderedDict[tuple[str, str], tuple[tuple[str, str, str], ...]] = self.__dict__.setdefault(
            "_kinded_memo", OrderedDict()
        )
        key = (task.task_id, draft)
        found = memo.get(key)
        if found is None:
            seen: dict[str, tuple[str, str, str]] = {}
            for edit in self.edit_operators(task, draft):
                if edit.text != draft and edit.text not in seen:
                    seen[edit.text] = (
                        edit.text,
                        edit.kind if edit.kind is not None else self.edit_kind(draft, edit.text),
                        edit.contrast_key
                        if edit.contrast_key is not None
                        else self.contrast_key(draft, edit.text),
                    )
            found = memo[key] = tuple(seen.values())
            if len(memo) > 4096:
                memo.popitem(last=False)
        return found

    def edits_from_task_alone(self, task: Task) -> bool:
        """Whether the reference-free work on `task` (its edits, a record's transfer, closeness,
        analogous edits, disturbances) is a function of the task's content and the texts alone,
        never of a file the task names: then a fresh process may reuse what another computed
        (`cm_gym.llm.revision.CandidateCache`). Default True."""
        return True

    def record_closeness(self, task: Task, draft: str, a_minus: str, a_plus: str) -> str:
        """ "match", "analogous" or "unrelated" (`CLOSENESS`); read by the simulated revision and
        by `cm-gym calibrate`."""
        if self.record_applies(task, draft, a_minus, a_plus):
            return "match"
        return "analogous" if self.analogous_edits(task, draft, a_minus, a_plus) else "unrelated"

    def record_applies(self, task: Task, draft: str, a_minus: str, a_plus: str) -> bool:
        """Whether the record's a⁻ → a⁺ edit has a site in `draft` (its a⁻ pattern occurs there):
        reference-free and without an LLM call, so a deployed selector may read it (the extended
        observation does). Default: `apply_contrast` finds a site."""
        return self.apply_contrast(task, draft, a_minus, a_plus) is not None


_SKIP_DIRS = frozenset({"__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


@functools.lru_cache(maxsize=64)
def _folder_digest(folder: str) -> str:
    """sha256 of every file under `folder` (but bytecode and tool folders) with its relative
    path, in path order (the order of the paths' parts). `os.walk` and plain strings, not
    `Path.rglob` and path objects: 10 ms for the domains package (14 with path objects, 24
    with `rglob`), paid by every process's first decision."""
    h = hashlib.sha256()
    entries: list[tuple[tuple[str, ...], str]] = []
    for here, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        rel = os.path.relpath(here, folder)
        parts = () if rel == os.curdir else tuple(PurePath(rel).parts)
        for name in files:
            full = os.path.join(here, name)
            if not name.endswith((".pyc", ".pyo")) and os.path.isfile(full):
                entries.append(((*parts, name), full))
    entries.sort()
    for parts, full in entries:
        with open(full, "rb") as fh:
            h.update("/".join(parts).encode() + b"\0" + fh.read() + b"\0")
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
