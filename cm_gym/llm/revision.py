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

import json
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from cm_gym.core import boundedjson
from cm_gym.core.types import Task
from cm_gym.domains.base import Domain, RevisionRates
from cm_gym.llm.errors import LLMError

logger = logging.getLogger(__name__)

RATES_FORMAT = "cm_gym.revision_rates"
RATES_VERSION = 1
_MEMO_SIZE = 20_000
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
    same drafts with the same records thousands of times and a domain's edits may parse (SQL)."""

    def __init__(self, size: int = _MEMO_SIZE) -> None:
        self.size = size
        self._memo: OrderedDict[tuple[str, str, str, str, str], Candidates] = OrderedDict()

    def get(self, domain: Domain, task: Task, draft: str, a_minus: str, a_plus: str) -> Candidates:
        key = (domain.name, task.task_id, draft, a_minus, a_plus)
        found = self._memo.get(key)
        if found is not None:
            self._memo.move_to_end(key)
            return found
        made = candidates(domain, task, draft, a_minus, a_plus)
        self._memo[key] = made
        if len(self._memo) > self.size:
            self._memo.popitem(last=False)
        return made


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
