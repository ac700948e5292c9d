"""The SQL base grammar's edits carry their edit kind and contrast key (issue 35 item 1): they
must be exactly what `SQLDomain.edit_kind` / `contrast_key` re-derive by parsing both queries, on
the drafts the simulated LLM makes — otherwise the simulated revision's branches would change."""

from __future__ import annotations

import dataclasses

from cm_gym.domains.base import Domain
from cm_gym.domains.catalog import get_benchmark
from cm_gym.domains.registry import get_domain
from cm_gym.llm.simulated import SimulatedLLM


def test_carried_kinds_equal_rederived_on_simulator_drafts() -> None:
    domain = get_domain("sql")
    tasks = list(get_benchmark("SQL").load_tasks("train"))[:80]
    sim = SimulatedLLM(seed=0)
    checked = 0
    for task in tasks:
        blind = dataclasses.replace(task, reference="")
        for draft in {sim.draft_action(task, failed) for failed in (0, 1, 2)}:
            for edit in domain.edit_operators(blind, draft):
                assert edit.kind is not None and edit.contrast_key is not None
                # the base class's derivation, by parse and diff of (draft, edit)
                assert edit.kind == domain.edit_kind(draft, edit.text), (draft, edit)
                assert edit.contrast_key == domain.contrast_key(draft, edit.text), (draft, edit)
                checked += 1
    assert checked > 150


def test_edits_without_carried_kinds_are_derived() -> None:
    """An operator that carries nothing (other domains, SQL's extended grammar) keeps the
    derivation: `_kinded_edits` falls back to `edit_kind` / `contrast_key`."""
    domain = get_domain("sql")
    task = next(iter(get_benchmark("SQL").load_tasks("train")))
    draft = SimulatedLLM(seed=0).draft_action(task)
    carried = Domain._kinded_edits(domain, task, draft)
    domain.__dict__.pop("_kinded_memo", None)
    stripped = dataclasses.replace
    original = domain.edit_operators
    try:
        domain.edit_operators = lambda t, a: [  # type: ignore[method-assign]
            stripped(e, kind=None, contrast_key=None) for e in original(t, a)
        ]
        derived = Domain._kinded_edits(domain, task, draft)
    finally:
        del domain.edit_operators
        domain.__dict__.pop("_kinded_memo", None)
    assert carried == derived and carried
