"""The simulated LLM: a seeded, domain-aware simulator of a frozen LLM.

**This is not a language model.** It is a simulator for developing and testing memory selectors
without a network or a GPU: it answers the cm_gym prompt templates by rule, from the domain's
error model (`Domain.error_model()`), reached through `cm_gym.domains.registry.get_domain(task.domain)`.

Behaviour, per template:

* DRAFT_ACTION — drafts from the task's hidden reference with *persistent slips*: for each error
  operator, in order, one draw from ``rng(seed, "slips", task_id)`` below ``op.probability(task)``
  makes the slip active for this task. Each failed attempt in the state fixes each still-active
  slip independently with probability ``error_model.fix_prob[agent]`` (ReAct vs Reflexion; draws
  from ``rng(seed, "fix", task_id, op, i)``, so a fixed slip stays fixed). The draft is the
  reference with the remaining slips applied in order (a slip that does not fit is skipped); the
  rng an operator gets is ``rng(seed, "apply", task_id, op)``, so an unfixed slip reads the same
  at every decision. Because slips depend on task features, errors are systematic across look-alike tasks.
  The error model is the domain's own, or a fitted profile's (``profile=``, ``llm="simulated:<name>"``:
  `cm_gym.llm.profiles`, slips and rates fitted to a real system's published outputs).
* REVISE_WITH_RECORD — a model of how an LLM treats one shown record (`cm_gym.llm.revision`). The
  record's *closeness* to the draft (`Domain.record_closeness`) is "match" (its a⁻ pattern occurs
  in the draft), "analogous" (it does not, but the same kind of edit has another site or operator
  there) or "unrelated". One seeded draw picks what the revision does, with the domain's
  `RevisionRates` (`ErrorModel.revision`, or a rates file): apply the contrast where it matches
  (`Domain.apply_contrast`, whether or not that is right for this task), over-apply it by analogy
  (`Domain.analogous_edits`), disturb an unrelated part of the draft (`Domain.disturbances`), or
  leave the draft unchanged (ignore the record). Where the defaults come from: `RevisionRates`'
  defaults (used by every built-in domain) are one least-squares fit, pooled over the SQL, SAT and
  SMT benchmarks (`cm-gym calibrate --fit`, ``bench/bench_calibration.py``), to the paper's
  figures — Fig. 4d (matched retrieval: 0.29 action changes and 0.03 harmful changes per
  retrieved record; shuffled: 0.21 and 0.17) and Appendix E.3 (harmful use per selected use 4.2%
  ordinary / 11.8% look-alike with conditions, 6.1% / 34.2% without), Fig. 4d then counted as
  what each retrieved record would do if shown (`RevisionRates` says what they give under the
  paper's counting, which `calibrate` now uses); ``SimulatedLLM(revision_rates=PATH)`` loads rates fitted to a cached run of a real model
  (`cm-gym calibrate --llm-cache FILE`). The revision never reads the reference: the domain gets
  the task with it blanked.
* REVISE_WITH_RECORDS (beyond the paper: two records at one decision) — each record in the order
  shown is treated as REVISE_WITH_RECORD treats one, on the draft the previous one left, with the
  same rates (`cm_gym.llm.revision.choose_sequence`; the independence of the two is an assumption,
  stated there: the paper measures one record per decision only).
* GENERATE_LOCAL_ALTERNATIVES — up to min(2, k) of the domain's edit operators, in seeded order,
  written in the edit grammar.
* DISTIL_RECORD — `Domain.distil` as ``SITUATION: …`` / ``CONDITION: …`` ("none" when empty).
* REFLECT — one deterministic sentence from the feedback. BEST_OF_N_JUDGE — a seeded ``CHOICE: n``.
* The memory-mechanism baselines' templates — `simulated_mechanisms.py` (dispatched from
  `complete`); their guidance revises drafts through the REVISE_WITH_RECORD model above.

Determinism: every other random draw comes from an rng seeded by a blake2b hash of (seed,
template, the fully rendered messages), so the same prompt gives the same text in-process and via
the HTTP server. Token counts are estimated on the same rendered messages the real client sends.
Server-side (string fields only) the Task is resolved by ``<task_id>`` through `task_lookup`, and
the failed-attempt count is read from the rendered ``<failed_attempts>`` field.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.base import Domain, ErrorModel, ErrorOperator, RevisionRates
from cm_gym.llm import draft_memo
from cm_gym.llm.base import (
    BEST_OF_N_JUDGE,
    DISTIL_RECORD,
    DRAFT_ACTION,
    GENERATE_LOCAL_ALTERNATIVES,
    REFLECT,
    REVISE_WITH_RECORD,
    REVISE_WITH_RECORDS,
    Completion,
    estimate_tokens,
)
from cm_gym.llm.errors import LLMError
from cm_gym.llm.fence import fenced
from cm_gym.llm.parsers import edit_fragment, format_alternatives
from cm_gym.llm.profiles import Profile, load_profile
from cm_gym.llm.prompts import Rendered, render
from cm_gym.llm.revision import (
    CandidateCache,
    choose,
    choose_sequence,
    kept_across_processes,
    load_revision_rates,
)
from cm_gym.llm.simulated_mechanisms import NEEDS_TASK as _MECHANISM_NEEDS_TASK
from cm_gym.llm.simulated_mechanisms import REPLIES as _MECHANISM_REPLIES  # the baselines' templates

logger = logging.getLogger(__name__)

SIMULATOR_VERSION = "2"
TaskLookup = Callable[[str], "Task | None"] | Mapping[str, Task]
_DRAFT_MEMO_SIZE = 50_000
_REVISION_MEMO_SIZE = 8192  # REVISE_WITH_RECORD replies (keyed by their rendered prompt, a few KiB)
_NEEDS_TASK = {
    DRAFT_ACTION,
    REVISE_WITH_RECORD,
    REVISE_WITH_RECORDS,
    GENERATE_LOCAL_ALTERNATIVES,
    DISTIL_RECORD,
} | _MECHANISM_NEEDS_TASK


def stable_rng(*parts: Any) -> np.random.Generator:
    """A numpy Generator seeded by a blake2b hash of `parts` (never Python's salted hash()).

    The seed is the digest read as a big-endian integer; it is handed to numpy as the 32-bit words
    `numpy.random.SeedSequence` would split that integer into (`_seed_words`): the same entropy,
    so the same stream, without numpy's Python-level integer split (a third of the cost of a
    generator, made about 1,600 times per 2,000 SQL-v0 decisions)."""
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        h.update(str(part).encode("utf-8"))
        h.update(b"\x1f")
    return np.random.default_rng(_seed_words(h.digest()))


def _seed_words(digest: bytes) -> np.ndarray:
    """The four uint32 words, least significant first, of the big-endian 128-bit integer `digest`:
    what `SeedSequence` makes of ``int.from_bytes(digest, "big")`` (it drops an integer's high
    zero words, then pads its entropy with zeros to its pool of four words: the same four words)."""
    return np.frombuffer(digest[::-1], dtype="<u4").astype(np.uint32)


def _int(text: str, default: int) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        logger.warning("expected an integer prompt field, got %r; using %d", text, default)
        return default


class SimulatedLLM:
    """A seeded simulator of a frozen LLM for developing and testing selectors — not a language
    model. See the module docstring for exactly what it does per template."""

    #: Every reply is a pure function of (template, fields): no I/O, no counter, no state that a
    #: later reply reads (its memos only save work). Callers may memoise what they derive from
    #: its replies (the selection env memoises each task's first decision, `envs._observation`).
    pure_replies: ClassVar[bool] = True

    def __init__(
        self,
        seed: int = 0,
        name: str = "simulated",
        task_lookup: TaskLookup | None = None,
        revision_rates: str | Path | Mapping[str, Any] | None = None,
        profile: str | Profile | None = None,
    ) -> None:
        self.seed = int(seed)
        self.name = name
        #: a fitted error-model profile (`cm_gym.llm.profiles`); None: each domain's own model
        self.profile = load_profile(profile) if isinstance(profile, str) or profile is None else profile
        self._lookup = task_lookup
        self._error_models: dict[str, ErrorModel] = {}
        self._drafts: dict[tuple[str, str, str, tuple[str, ...]], str] = {}
        self._task_drafts: dict[tuple[int, int, str], tuple[Task, str]] = {}  # (id(task), attempts, agent)
        self._slips: dict[tuple[int, int, float], tuple[Task, tuple[ErrorOperator, ...]]] = {}
        self._revision_overrides = load_revision_rates(revision_rates) if revision_rates is not None else {}
        self._candidates = CandidateCache()
        self._revisions: dict[tuple[str, str, str], str] = {}
        self._draws: dict[tuple[Any, ...], tuple[float, ...]] = {}
        self._blinds: dict[int, tuple[Task, Task]] = {}  # id(task) -> (task, its copy without reference)

    def cache_identity(self) -> dict[str, Any]:
        """What distinguishes this backend's replies in a response-cache key."""
        identity: dict[str, Any] = {"backend": "simulated", "version": SIMULATOR_VERSION, "seed": self.seed}
        if self._revision_overrides:
            identity["revision_rates"] = {k: v.as_dict() for k, v in sorted(self._revision_overrides.items())}
        if self.profile is not None:  # the default stays keyless: its cached replies stay valid
            identity["profile"] = {"name": self.profile.name, "digest": self.profile.digest()}
        return identity

    def revision_rates(self, domain_name: str) -> RevisionRates:
        """The revision rates used for `domain_name` (a loaded rates file wins over the domain's)."""
        found = self._revision_overrides.get(domain_name)
        return found if found is not None else self._error_model(domain_name).revision

    # -- protocol -------------------------------------------------------------------------------
    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        """Answer `template` from `fields`; the reply depends only on the seed, the rendered
        messages and the task the rendered ``<task_id>`` names."""
        rendered = render(template, fields)
        task = self._task(rendered, fields) if template in _NEEDS_TASK else None
        handler = _MECHANISM_REPLIES.get(template)
        reply = handler(self, rendered, task) if handler is not None else self._reply(rendered, task)
        return Completion(reply, estimate_tokens(rendered.joined()), estimate_tokens(reply))

    # -- the draft model ------------------------------------------------------------------------
    def active_slips(self, task: Task) -> list[ErrorOperator]:
        """The slips this task's first draft makes (one seeded draw per operator, in order)."""
        operators = self._error_model(task.domain).operators
        draws = self._uniforms(len(operators), "slips", task.task_id)
        return [op for op, u in zip(operators, draws, strict=True) if u < op.probability(task)]

    def _uniforms(self, n: int, *parts: Any) -> tuple[float, ...]:
        """The first `n` draws of ``stable_rng(self.seed, *parts).random()``, memoised: a pure
        function of the parts, and the draft model asks for the same ones at every decision."""
        key = (n, *parts)
        hit = self._draws.get(key)
        if hit is None:
            rng = stable_rng(self.seed, *parts)
            hit = tuple(rng.random() for _ in range(n))
            if len(self._draws) >= _DRAFT_MEMO_SIZE:
                self._draws.clear()
            self._draws[key] = hit
        return hit

    def remaining_slips(
        self, task: Task, failed_attempts: int = 0, agent: str = "react"
    ) -> list[ErrorOperator]:
        """The active slips still unfixed after `failed_attempts` failed, fed-back attempts."""
        model = self._error_model(task.domain)
        fix_p = model.fix_prob.get(agent)
        if fix_p is None:
            logger.warning("error model has no fix probability for agent %r; using react's", agent)
            fix_p = model.fix_prob.get("react", 0.0)
        # memoised per task *object* (kept alive by the memo, so its id is not reused): the slips
        # are a pure function of (seed, task, failed attempts, fix probability), and drawing them
        # seeds one generator per operator and attempt at every decision
        key = (id(task), int(failed_attempts), fix_p)
        hit = self._slips.get(key)
        if hit is not None and hit[0] is task:
            return list(hit[1])
        out = [op for op in self.active_slips(task) if not self._fixed(task, op, failed_attempts, fix_p)]
        if len(self._slips) >= _DRAFT_MEMO_SIZE:
            self._slips.clear()
        self._slips[key] = (task, tuple(out))
        return out

    def _fixed(self, task: Task, op: ErrorOperator, failed_attempts: int, fix_p: float) -> bool:
        return any(
            self._uniforms(1, "fix", task.task_id, op.name, i)[0] < fix_p
            for i in range(1, failed_attempts + 1)
        )

    def draft_action(self, task: Task, failed_attempts: int = 0, agent: str = "react") -> str:
        """The draft: the reference with the remaining slips applied in order. Memoised per task
        object, in the work memo (`draft_memo`) and on (task, remaining slips): RL training
        drafts the same tasks thousands of times, and a domain's operators may parse the action."""
        key = (id(task), int(failed_attempts), agent)
        hit = self._task_drafts.get(key)
        if hit is not None and hit[0] is task:
            return hit[1]
        if self.profile is None and kept_across_processes(self._domain(task.domain), task):
            action = draft_memo.draft_work().cached(
                draft_memo.draft_key(self.seed, task, failed_attempts, agent),
                lambda: self._make_draft(task, failed_attempts, agent),
                str,
                draft_memo.decode_draft,
            )
        else:
            action = self._make_draft(task, failed_attempts, agent)
        if len(self._task_drafts) >= _DRAFT_MEMO_SIZE:
            self._task_drafts.clear()
        self._task_drafts[key] = (task, action)
        return action

    def _make_draft(self, task: Task, failed_attempts: int, agent: str) -> str:
        remaining = self.remaining_slips(task, failed_attempts, agent)
        key = (task.domain, task.task_id, task.reference, tuple(op.name for op in remaining))
        cached = self._drafts.get(key)
        if cached is not None:
            return cached
        action = task.reference
        for op in remaining:
            slipped = op.apply(task, action, stable_rng(self.seed, "apply", task.task_id, op.name))
            if slipped is not None:
                action = slipped
        if len(self._drafts) >= _DRAFT_MEMO_SIZE:
            self._drafts.clear()
        self._drafts[key] = action
        return action

    # -- internals ------------------------------------------------------------------------------
    def _domain(self, name: str) -> Domain:
        from cm_gym.domains.registry import get_domain  # lazy: the registry loads every domain plugin

        return get_domain(name)

    def _error_model(self, domain_name: str) -> ErrorModel:
        if domain_name not in self._error_models:
            self._error_models[domain_name] = (
                self.profile.error_model(domain_name)
                if self.profile is not None
                else self._domain(domain_name).error_model()
            )
        return self._error_models[domain_name]

    def _task(self, rendered: Rendered, fields: Mapping[str, Any]) -> Task:
        task_id = rendered.fields.get("task_id", "")
        given = fields.get("task")
        if isinstance(given, Task):
            return given
        found: Task | None = None
        if self._lookup is not None and task_id:
            try:
                found = (
                    self._lookup.get(task_id) if isinstance(self._lookup, Mapping) else self._lookup(task_id)
                )
            except KeyError:
                found = None
        if found is None:
            raise LLMError(
                f"the simulated LLM cannot answer {rendered.template} for task {task_id!r}: no Task object "
                "in the fields and the task lookup does not know it (start the server with --benchmark)"
            )
        return found

    def _blind(self, task: Task) -> Task:
        """`task` with its reference blanked, one copy per task object (kept with the object, so
        its id is not reused): the candidate memo keys its task text on that copy's identity."""
        hit = self._blinds.get(id(task))
        if hit is not None and hit[0] is task:
            return hit[1]
        if len(self._blinds) >= _DRAFT_MEMO_SIZE:
            self._blinds.clear()
        blind = dataclasses.replace(task, reference="")
        self._blinds[id(task)] = (task, blind)
        return blind

    def _reply(self, rendered: Rendered, task: Task | None) -> str:
        f, name = rendered.fields, rendered.template
        if name == DRAFT_ACTION:
            assert task is not None
            return fenced(self.draft_action(task, _int(f["failed_attempts"], 0), f["agent"]))
        if name == REFLECT:
            return self._reflection(f)
        if name == REVISE_WITH_RECORD:
            assert task is not None
            return self._revision(rendered, task)
        rng = stable_rng(self.seed, name, rendered.joined())
        if name == BEST_OF_N_JUDGE:
            return f"CHOICE: {int(rng.integers(1, max(1, _int(f['n'], 1)) + 1))}"
        assert task is not None
        domain = self._domain(task.domain)
        blind = self._blind(task)  # revising/editing/distilling never sees the reference
        if name == REVISE_WITH_RECORDS:
            contrasts = [(f[f"record_{i}_a_minus"], f[f"record_{i}_a_plus"]) for i in (1, 2)]
            revised, _ = choose_sequence(
                self._candidates, domain, blind, f["draft"], contrasts, self.revision_rates(task.domain), rng
            )
            return fenced(revised)
        if name == GENERATE_LOCAL_ALTERNATIVES:
            return self._alternatives(domain, blind, f["action"], _int(f["k"], 4), rng)
        if name == DISTIL_RECORD:
            d = domain.distil(blind, f["a_minus"], f["a_plus"])
            return f"SITUATION: {' '.join(d.situation.split())}\nCONDITION: {d.condition.strip() or 'none'}"
        raise LLMError(f"the simulated LLM does not answer template {name}")  # pragma: no cover

    def _revision(self, rendered: Rendered, task: Task) -> str:
        """REVISE_WITH_RECORD's reply, memoised on (domain, task id, rendered messages): all it
        depends on (its generator is seeded by the messages; the candidates are keyed by task
        id, as in `CandidateCache`). RL training shows the same record to the same draft and
        state many times; a hit skips seeding a generator and the seeded choice."""
        joined = rendered.joined()
        key = (task.domain, task.task_id, joined)
        hit = self._revisions.get(key)
        if hit is not None:
            return hit
        f = rendered.fields
        draft = f["draft"]
        blind = self._blind(task)  # revising never sees the reference
        cands = self._candidates.get(
            self._domain(task.domain), blind, draft, f["record_a_minus"], f["record_a_plus"]
        )
        rng = stable_rng(self.seed, REVISE_WITH_RECORD, joined)
        revised, _ = choose(cands, self.revision_rates(task.domain), draft, rng)
        reply = fenced(revised)
        if len(self._revisions) >= _REVISION_MEMO_SIZE:
            self._revisions.clear()
        self._revisions[key] = reply
        return reply

    def _alternatives(self, domain: Domain, task: Task, action: str, k: int, rng: np.random.Generator) -> str:
        texts: list[str] = []
        for edit in domain.edit_operators(task, action):
            if edit.text != action and edit.text not in texts:
                texts.append(edit.text)
        chosen: list[str] = []
        for index in rng.permutation(len(texts)):
            if len(chosen) >= min(2, k):
                break
            if edit_fragment(action, texts[int(index)]) is not None:
                chosen.append(texts[int(index)])
        return format_alternatives(action, chosen)

    @staticmethod
    def _reflection(f: Mapping[str, str]) -> str:
        feedback = " ".join(f.get("feedback", "").split())
        summary = feedback.split(". ")[0].rstrip(".")[:160] or "no feedback was given"
        kind = f.get("action_kind") or "action"
        return (
            f"My last {kind} failed ({summary}), so next time I will fix the part of it that this "
            "feedback points to and keep the parts that were right."
        )
