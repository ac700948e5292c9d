"""The simulated revision with one record: closeness, the candidate revisions of each branch, the
seeded choice among them, and the rates file that `cm-gym calibrate` writes.

A revision's *closeness* (`Domain.record_closeness`) decides which branches are possible: a
"match" record can be applied (`Domain.apply_contrast`), an "analogous" one can be over-applied by
analogy (`Domain.analogous_edits`), and any record can make the LLM disturb an unrelated part of
the draft (`Domain.disturbances`) or leave the draft alone. `RevisionRates` gives the branch
probabilities per closeness; a branch whose candidate list is empty returns the draft unchanged.
Everything here is reference-free: the task handed in has its reference blanked.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from cm_gym.core import boundedjson, workmemo
from cm_gym.core.types import Task, task_text
from cm_gym.core.workmemo import WorkMemo
from cm_gym.domains.base import CLOSENESS, Domain, RevisionRates
from cm_gym.llm.errors import LLMError

logger = logging.getLogger(__name__)

RATES_FORMAT = "cm_gym.revision_rates"
RATES_VERSION = 1
_MEMO_SIZE = 20_000
#: one draft's stored candidates (a few KiB: one text per edit of the draft)
MAX_CANDIDATES_BYTES = 16 * 1024 * 1024
#: a revision-rates file (a few KiB per domain)
MAX_RATES_BYTES = 16 * 1024 * 1024


class RevisionRatesError(LLMError):
    """A revision-rates file is missing, unreadable or not in the format `cm-gym calibrate` writes."""


@dataclass(frozen=True)
class Candidates:
    """What a revision could return, per branch (each a list of whole actions)."""

    closeness: str
    apply: tuple[str, ...]
    overapply: tuple[str, ...]
    disturb: tuple[str, ...]

    def of(self, branch: str) -> tuple[str, ...]:
        return {"apply": self.apply, "overapply": self.overapply, "disturb": self.disturb}.get(branch, ())


class CandidateCache:
    """`candidates(...)` memoised on (domain, task id, draft, a⁻, a⁺): RL training revises the
    same drafts with the same records thousands of times and a domain's edits may parse (SQL).

    Behind the in-process memo, the candidates of cm_gym's own domains are kept in the
    persistent work memo (`cm_gym.core.workmemo`, file ``revision-candidates``) by (domain, the
    task's reference-free content, draft, a⁻, a⁺): they are a pure function of those (module
    doc), and a fresh process revises the same first drafts with the same records again — the
    closeness, the transfer and the analogous edits were a fifth of a warm SQL-v0 process's CPU
    over its first 2,000 decisions. A plugin domain's candidates stay in this process (nothing
    says its methods are pure), and so do those of a task whose edits read a file it names
    (`Domain.edits_from_task_alone`)."""

    def __init__(self, size: int = _MEMO_SIZE) -> None:
        self.size = size
        self._memo: OrderedDict[tuple[str, str, str, str, str], Candidates] = OrderedDict()

    def __getstate__(self) -> dict[str, Any]:  # a pickled cache starts empty
        return {"size": self.size, "_memo": OrderedDict()}

    def get(self, domain: Domain, task: Task, draft: str, a_minus: str, a_plus: str) -> Candidates:
        key = (domain.name, task.task_id, draft, a_minus, a_plus)
        found = self._memo.get(key)
        if found is not None:
            self._memo.move_to_end(key)
            return found
        if kept_across_processes(domain, task):
            made = _candidate_work().cached(
                workmemo.memo_key("candidates", domain.name, task_text(task), draft, a_minus, a_plus),
                lambda: candidates(domain, task, draft, a_minus, a_plus),
                encode_candidates,
                decode_candidates,
            )
        else:
            made = candidates(domain, task, draft, a_minus, a_plus)
        self._memo[key] = made
        if len(self._memo) > self.size:
            self._memo.popitem(last=False)
        return made


def encode_candidates(cands: Candidates) -> str:
    """`Candidates` as JSON (what the work memo keeps)."""
    return json.dumps([cands.closeness, cands.apply, cands.overapply, cands.disturb], ensure_ascii=False)


def decode_candidates(data: bytes | str) -> Candidates:
    """The inverse of `encode_candidates`; anything else raises ValueError (a work-memo miss)."""
    value = boundedjson.loads(data, max_bytes=MAX_CANDIDATES_BYTES, what="stored candidates", expect=list)
    if (
        len(value) != 4
        or value[0] not in CLOSENESS
        or not all(isinstance(part, list) and all(isinstance(t, str) for t in part) for part in value[1:])
    ):
        raise ValueError("not encoded candidates")
    return Candidates(value[0], tuple(value[1]), tuple(value[2]), tuple(value[3]))


def kept_across_processes(domain: Domain, task: Task) -> bool:
    """Whether work on `task` that is a pure function of its content may go into the work memo:
    only for cm_gym's own domains (their methods are pure, SPEC §3; a plugin's are not known to
    be), only when the task's edits read nothing but the task (`Domain.edits_from_task_alone`),
    and only while the memo is on. The candidates here and the drafts (`draft_memo`) share it."""
    return (
        type(domain).__module__.startswith("cm_gym.domains.")
        and domain.edits_from_task_alone(task)
        and workmemo.enabled()
    )


@functools.lru_cache(maxsize=1)
def _candidate_work() -> WorkMemo:
    """The memo (one per process). Its version: the digests of the domains package (the edits
    and closeness) and of this file (`candidates`), and the versions of the libraries the
    domains parse and render with."""
    from cm_gym.domains.base import source_digest

    here = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    libraries = workmemo.library_versions("sqlglot", "python-sat", "z3-solver")
    return WorkMemo("revision-candidates", f"{source_digest(Domain)}-{here}-{libraries}")


def candidates(domain: Domain, task: Task, draft: str, a_minus: str, a_plus: str) -> Candidates:
    """The closeness of the record to `draft` and every branch's candidate revisions."""
    closeness = domain.record_closeness(task, draft, a_minus, a_plus)
    applied = domain.apply_contrast(task, draft, a_minus, a_plus) if closeness == "match" else None
    over = domain.analogous_edits(task, draft, a_minus, a_plus) if closeness == "analogous" else []
    disturb = domain.disturbances(task, draft, a_minus, a_plus)
    return Candidates(
        closeness,
        (applied,) if applied is not None and applied != draft else (),
        tuple(t for t in over if t != draft),
        tuple(t for t in disturb if t != draft),
    )


def choose(cands: Candidates, rates: RevisionRates, draft: str, rng: np.random.Generator) -> tuple[str, str]:
    """(revised action, branch): one uniform draw picks the branch, a second the candidate."""
    branch = rates.branch(cands.closeness, float(rng.random()))
    options = cands.of(branch)
    if not options:
        return draft, "unchanged"
    return options[int(rng.integers(len(options)))], branch


def choose_sequence(
    cache: CandidateCache,
    domain: Domain,
    task: Task,
    draft: str,
    contrasts: list[tuple[str, str]],
    rates: RevisionRates,
    rng: np.random.Generator,
) -> tuple[str, list[str]]:
    """REVISE_WITH_RECORDS: (revised action, one branch per record) for records shown together.

    Derived from the one-record model with no new number: each record, in the order shown, is
    treated exactly as REVISE_WITH_RECORD treats one record (`candidates`, then `choose` with the
    same `RevisionRates`), on the draft as the previous record left it, with its own draws from
    the same seeded generator. *Assumption* (the paper measures one record per decision only, so
    nothing bounds it): an LLM shown two records handles them independently — the chance it
    applies, over-applies or ignores record 2 does not depend on what it did with record 1. Two
    records that fix different parts of a draft are then both applied with probability
    ``apply²`` (0.665² ≈ 0.44 with the default rates)."""
    action, branches = draft, []
    for a_minus, a_plus in contrasts:
        action, branch = choose(cache.get(domain, task, action, a_minus, a_plus), rates, action, rng)
        branches.append(branch)
    return action, branches


# -- rates files ---------------------------------------------------------------------------------
def rates_from_mapping(data: Mapping[str, Any], where: str = "rates") -> RevisionRates:
    """A `RevisionRates` from a mapping of its field names (unknown keys refused)."""
    names = {f.name for f in fields(RevisionRates)}
    unknown = set(data) - names
    if unknown:
        raise RevisionRatesError(
            f"{where}: unknown revision rate(s) {sorted(unknown)}; known: {sorted(names)}"
        )
    try:
        return RevisionRates(**{k: float(v) for k, v in data.items()})
    except (TypeError, ValueError) as exc:
        raise RevisionRatesError(f"{where}: {exc}") from exc


def load_revision_rates(source: str | Path | Mapping[str, Any]) -> dict[str, RevisionRates]:
    """Per-domain rates from a file written by `cm-gym calibrate` (or the same dict). Domains the
    file does not name keep their error model's defaults."""
    if isinstance(source, Mapping):
        data: Any = source
        where = "revision rates"
    else:
        path = Path(source)
        where = str(path)
        try:
            if not path.exists():
                raise FileNotFoundError(path)
            data = boundedjson.load_file(path, max_bytes=MAX_RATES_BYTES)
        except FileNotFoundError:
            raise RevisionRatesError(
                f"revision-rates file {path} does not exist (write one with `cm-gym calibrate`)"
            ) from None
        except (OSError, ValueError) as exc:
            raise RevisionRatesError(f"{path} is not a readable revision-rates JSON file: {exc}") from exc
    if not isinstance(data, Mapping) or data.get("format") != RATES_FORMAT:
        raise RevisionRatesError(f"{where} is not a cm_gym revision-rates file (format {RATES_FORMAT!r})")
    domains = data.get("domains")
    if not isinstance(domains, Mapping) or not domains:
        raise RevisionRatesError(f"{where} names no domains")
    return {str(name): rates_from_mapping(values, f"{where} [{name}]") for name, values in domains.items()}


def save_revision_rates(path: str | Path, rates: Mapping[str, RevisionRates], **provenance: Any) -> Path:
    """Write per-domain rates (plus how they were obtained) in the format `load_revision_rates` reads."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": RATES_FORMAT,
        "version": RATES_VERSION,
        "domains": {name: r.as_dict() for name, r in sorted(rates.items())},
        **provenance,
    }
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    tmp.replace(out)
    return out
