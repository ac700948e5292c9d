"""The recorded LLM (``llm="recorded:<system>"``): a real system's published outputs as the drafts.

The texts come from `cm_gym.llm.recordings` (``<data root>/llm-outputs``): the final answers of
published GPT-4 / Codex Spider systems, DafnyBench models and HumanEval runs. A domain says which
published output answers a task (`Domain.recording_key`) and what reply it stands for
(`Domain.recorded_reply`: HumanEval's ``prompt + completion``). What happens per template:

* **DRAFT_ACTION, first decision** (no failed attempt yet): the system's own published output for
  the task, verbatim, marked ``real:<system>``. The agent extracts the action with the domain's own
  parser (`Domain.parse_action`), as for any real reply.
* **DRAFT_ACTION after n failed attempts** (``recorded:<system>``, the default): the *same*
  system's published output again. A frozen model asked once more gives its published answer
  again; a memory-free agent ("None") is that one system, as for Dafny, whose published outputs
  already are answers after up to 10 rounds of verifier feedback.
* **DRAFT_ACTION after n failed attempts, cascade** (``recorded:<system>+cascade``, named and
  reported apart, never as "None"): rung n of the system's *ladder* (`LADDERS`), a documented
  "more effort" sequence of real systems on the same task: Spider GPT-4 zero-shot → few-shot →
  DIN-SQL (decomposition + self-correction) → DAIL-SQL → DAIL-SQL + self-consistency; Codex
  few-shot → DIN-SQL; HumanEval GPT-4 → GPT-4 + Reflexion. The reply is that system's published
  output, verbatim, marked ``real:<that system>``; it never saw the agent's feedback (the world
  model's check only decides when to move on), so a memory-free cascade is a cascade of stronger
  systems, not one model retried. Past the top rung the top rung's output is given again; a rung
  with no output for the task falls back to the rung below it; a system on no ladder repeats
  itself.
* **Every other template** (REVISE_WITH_RECORD, GENERATE_LOCAL_ALTERNATIVES, DISTIL_RECORD,
  REFLECT, BEST_OF_N_JUDGE, the memory mechanisms' templates): no real reply exists, so the
  simulator answers (`SimulatedLLM`, same seed and revision rates; its revision is the calibrated
  model of `cm_gym.llm.revision`), on the real draft and never from the reference. Marked
  ``simulated``.
* **A task without a published output** of the system: `RecordingMissingError`, never a simulated
  draft. `recorded_task_ids` says which tasks a system covers (the protocol restricts its splits
  to them and reports how many it left out).

Every reply is counted by provenance (`replies`, `cm_gym.llm.replies`); the response cache keeps the
mark with a cached reply, and its key names the cascade and the ladder (`cache_identity`), so a
cascade's later drafts are never replayed to the plain configuration or the other way round.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cm_gym.core.types import Task
from cm_gym.llm.base import DRAFT_ACTION, Completion, estimate_tokens
from cm_gym.llm.errors import LLMError
from cm_gym.llm.prompts import Rendered, render
from cm_gym.llm.recordings import KINDS, RecordedOutput, Recordings, RecordingsError, load_recordings
from cm_gym.llm.replies import SIMULATED, ReplyCounts, real

logger = logging.getLogger(__name__)

#: "2": later drafts repeat the system unless the spec asks for the cascade (the key says which)
RECORDED_VERSION = "2"
#: The spec suffix that asks for the ladder of stronger systems at later drafts.
CASCADE_SUFFIX = "+cascade"
#: Systems of the shared data folder and the file that holds their outputs (others are searched).
SYSTEM_KINDS: Mapping[str, str] = {
    **dict.fromkeys(
        (
            "gpt-4-zero-shot",
            "gpt-4-few-shot",
            "gpt-4-din-sql",
            "gpt-4-dail-sql",
            "gpt-4-dail-sql-sc",
            "codex-few-shot",
            "codex-din-sql",
        ),
        "spider",
    ),
    **dict.fromkeys(("gpt-4o", "gpt-4-turbo", "gpt-3.5-turbo", "claude-3-opus", "codellama-7b"), "dafny"),
    **dict.fromkeys(("gpt-4", "gpt-4-reflexion"), "humaneval"),
}
#: "More effort" sequences of real systems: with ``+cascade``, a later draft is the next rung's
#: published output.
LADDERS: tuple[tuple[str, ...], ...] = (
    ("gpt-4-zero-shot", "gpt-4-few-shot", "gpt-4-din-sql", "gpt-4-dail-sql", "gpt-4-dail-sql-sc"),
    ("codex-few-shot", "codex-din-sql"),
    ("gpt-4", "gpt-4-reflexion"),
)


class RecordingMissingError(LLMError):
    """The recorded system published no output for this task: it is refused, never simulated."""


def split_cascade(spec: str) -> tuple[str, bool]:
    """``(spec without the cascade suffix, whether it asked for the cascade)`` of the part after
    ``recorded:`` (``"gpt-4-zero-shot+cascade"`` → ``("gpt-4-zero-shot", True)``)."""
    spec = spec.strip()
    if spec.endswith(CASCADE_SUFFIX):
        return spec[: -len(CASCADE_SUFFIX)].strip(), True
    return spec, False


def is_cascade(llm_spec: str) -> bool:
    """Whether an LLM spec is a recorded cascade (``recorded:<system>+cascade``)."""
    return llm_spec.startswith("recorded:") and split_cascade(llm_spec.split(":", 1)[1])[1]


def parse_system(spec: str) -> tuple[str | None, str]:
    """``(kind or None, system)`` of ``"<system>"`` or ``"<kind>/<system>"`` (the part after
    ``recorded:``; a ``+cascade`` suffix is ignored here)."""
    spec = split_cascade(spec)[0]
    kind, sep, system = spec.partition("/")
    if sep and kind in KINDS:
        return kind, system
    return None, spec


def resolve_system(spec: str, root: str | Path | None = None) -> Recordings:
    """The recordings holding `spec`'s outputs (`parse_system`); one clear error when the file is
    missing or no file knows the system."""
    kind, system = parse_system(spec)
    if not system:
        raise LLMError("recorded:<system> needs a system name, e.g. recorded:gpt-4-zero-shot")
    kind = kind or SYSTEM_KINDS.get(system)
    kinds = (kind,) if kind else KINDS
    known: list[str] = []
    unreadable: list[str] = []
    for name in kinds:
        try:
            found = load_recordings(name, root)
        except RecordingsError as exc:
            if kind:
                raise
            unreadable.append(str(exc))
            continue
        if system in found.systems:
            return found
        known += [f"{name}/{s}" for s in found.systems]
    why = f"; unreadable: {' | '.join(unreadable)}" if unreadable else ""
    raise RecordingsError(
        f"no recorded outputs of system {system!r}; known: {', '.join(sorted(known)) or 'none'}{why}"
    )


def ladder_of(system: str, available: Sequence[str] = ()) -> tuple[str, ...]:
    """The rungs from `system` up its ladder (just `system` when it is on none), keeping those
    in `available` (all when empty)."""
    for ladder in LADDERS:
        if system in ladder:
            rungs = ladder[ladder.index(system) :]
            return tuple(r for r in rungs if not available or r in available or r == system)
    return (system,)


def _failed_attempts(rendered: Rendered) -> int:
    try:
        return max(0, int(str(rendered.fields.get("failed_attempts", "0")).strip() or 0))
    except ValueError:
        logger.warning("unreadable failed_attempts %r; treating as 0", rendered.fields.get("failed_attempts"))
        return 0


class RecordedLLM:
    """Real published outputs as drafts (the same system at every decision, or with `cascade` a
    ladder of stronger real systems at later ones), and the simulator where no real reply exists
    (see the module docstring). `cascade` may also come as the spec suffix ``+cascade``."""

    def __init__(
        self,
        system: str,
        seed: int = 0,
        task_lookup: Any = None,
        revision_rates: str | Path | Mapping[str, Any] | None = None,
        root: str | Path | None = None,
        cascade: bool = False,
    ) -> None:
        from cm_gym.llm.simulated import SimulatedLLM

        self.recordings = resolve_system(system, root)
        self.kind = self.recordings.kind
        self.system = parse_system(system)[1]
        self.cascade = bool(cascade) or split_cascade(system)[1]
        self.ladder = ladder_of(self.system, self.recordings.systems) if self.cascade else (self.system,)
        self.name = f"recorded:{self.system}" + (CASCADE_SUFFIX if self.cascade else "")
        self.seed = int(seed)
        self.simulator = SimulatedLLM(seed=seed, task_lookup=task_lookup, revision_rates=revision_rates)
        self.replies = ReplyCounts()

    def cache_identity(self) -> dict[str, Any]:
        """What distinguishes this backend's replies in a response-cache key."""
        return {
            "backend": "recorded",
            "version": RECORDED_VERSION,
            "system": self.system,
            "cascade": self.cascade,
            "ladder": list(self.ladder),
            "simulator": self.simulator.cache_identity(),
        }

    # -- which tasks are answered ------------------------------------------------------------------
    def key_of(self, task: Task) -> str | None:
        """The task's recording key (`Domain.recording_key`), None when its domain has none."""
        return key_of(task)

    def output_for(self, task: Task, failed_attempts: int = 0) -> RecordedOutput:
        """The published output that is the draft after `failed_attempts` failures: the system's
        own, or with the cascade its ladder's rung (see the module docstring);
        `RecordingMissingError` when the system itself published none for `task`."""
        key = self.key_of(task)
        own = self.recordings.get(key, self.system) if key is not None else None
        if own is None:
            raise RecordingMissingError(
                f"recorded:{self.system} has no published output for task {task.task_id!r} "
                f"(key {key!r} in {self.recordings.path}): tasks without a recording are refused, "
                "not simulated; restrict the tasks to those it covers (cm_gym.llm.recorded.recorded_task_ids; "
                "`cm-gym run` does so and reports how many it left out)"
            )
        assert key is not None
        rung = min(failed_attempts, len(self.ladder) - 1)
        for system in reversed(self.ladder[: rung + 1]):
            found = self.recordings.get(key, system)
            if found is not None:
                return found
        return own  # pragma: no cover - the own system is rung 0

    def covers(self, task: Task) -> bool:
        """Whether the system published an output for `task`."""
        key = key_of(task)
        return key is not None and self.recordings.get(key, self.system) is not None

    # -- the LLM protocol ------------------------------------------------------------------------
    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        """A real published output for DRAFT_ACTION, the simulator's reply otherwise."""
        if template == DRAFT_ACTION:
            completion = self._draft(render(template, fields), fields)
        else:
            completion = dataclasses.replace(self.simulator.complete(template, fields), provenance=SIMULATED)
        self.replies.add(template, completion)
        return completion

    def _draft(self, rendered: Rendered, fields: Mapping[str, Any]) -> Completion:
        from cm_gym.domains.registry import get_domain

        task = self._task(rendered, fields)
        out = self.output_for(task, _failed_attempts(rendered))
        reply = get_domain(task.domain).recorded_reply(task, out.text)
        return Completion(
            reply, estimate_tokens(rendered.joined()), estimate_tokens(out.text), provenance=real(out.system)
        )

    def _task(self, rendered: Rendered, fields: Mapping[str, Any]) -> Task:
        """The task of a call: the Task in the fields, else the rendered task id through the
        lookup (the simulator's resolution, shared)."""
        return self.simulator._task(rendered, fields)


def key_of(task: Task) -> str | None:
    """A task's recording key (`Domain.recording_key`), None when its domain has none."""
    from cm_gym.domains.registry import get_domain  # lazy: the registry loads every domain plugin

    return get_domain(task.domain).recording_key(task)


def recorded_task_ids(
    spec: str, tasks: Sequence[Task], root: str | Path | None = None
) -> tuple[list[str], list[str]]:
    """``(covered, missing)`` task ids of `tasks` for a ``recorded:<system>`` spec (or a bare
    system): which of them the system published an output for."""
    system = spec.split(":", 1)[1] if spec.startswith("recorded:") else spec
    recordings = resolve_system(system, root)
    name = parse_system(system)[1]
    covered, missing = [], []
    for task in tasks:
        key = key_of(task)
        found = key is not None and recordings.get(key, name) is not None
        (covered if found else missing).append(task.task_id)
    return covered, missing
