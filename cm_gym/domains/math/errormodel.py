"""The simulated LLM's slips on proof scripts, tied to statement features.

Each slip turns the reference (a verified portfolio proof) into a plausible wrong draft. Where the
rates come from — honestly:

- ``wrong_procedure`` (the last decision procedure replaced by one that often does not fit the
  goal: ``lia`` on reals, ``lra`` on a non-linear goal, ``lia`` for ``nia`` …). Its probability for
  a statement of class (domain, linear/non-linear) is **measured**: the portfolio probe records,
  for every proved statement, which of the basic procedures of its domain close it; the share
  that do *not*, averaged over the class, is the chance that a procedure picked blindly fails
  (stored with the proof table under ``rates``). A model picks better than blindly, so the slip
  rate is half that share — the factor 0.5 is a design choice, not a measurement.
- ``missing_intros`` 0.15 (statements with binders), ``missing_require`` 0.20, ``lean_tactic``
  0.10 (``linarith``/``nlinarith``/``omega`` for ``lra``/``nra``/``lia``: models trained on Lean's
  miniF2F write them), ``missing_case_split``
  0.30 (absolute values or conjunctions), ``wrong_lemma_name`` 0.30 (Mathlib's name for a Coq
  lemma or tactic, e.g. ``split_abs`` for ``split_Rabs``): design choices — no measured source
  exists for a frozen LLM writing Coq; they are set so that most first drafts of this benchmark
  fail for one or two of these reasons, and they never change to make a policy look better.

A slip that does not fit the reference (nothing to drop, no procedure) is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.base import ErrorModel, ErrorOperator
from cm_gym.domains.math.lines import (
    LEAN_LEMMAS,
    LEAN_TO_COQ,
    procedure_of,
    split_lines,
    with_body,
    with_selector,
)

#: what a model writes instead of the right procedure (by the right one)
CONFUSIONS = {
    "lra": ("lia", "nra"),
    "nra": ("lra", "lia"),
    "field": ("lra", "ring"),
    "ring": ("lra", "field"),
    "lia": ("lra", "nia"),
    "nia": ("lia", "lra"),
    "reflexivity": ("lia", "auto"),
    "auto": ("lia", "lra"),
}
_COQ_TO_LEAN = {"lra": "linarith", "nra": "nlinarith", "lia": "omega", "nia": "nlinarith", "field": "field_simp",
                "ring": "ring_nf"}  # fmt: skip
DEFAULT_WRONG_PROCEDURE = 0.2
Apply = Callable[[Task, str, np.random.Generator], "str | None"]


def procedure_class(features: Mapping[str, object]) -> str:
    """The class the wrong-procedure rate is measured per: ``<domain>/<linear|nonlinear>``."""
    return f"{features.get('domain', 'nat')}/{'nonlinear' if features.get('nonlinear') else 'linear'}"


def _wrong_procedure(task: Task, action: str, rng: np.random.Generator) -> str | None:
    s = split_lines(action)
    fin = s.finishing()
    if not fin:
        return None
    i = fin[-1]
    proc = procedure_of(s.body[i])
    options = CONFUSIONS.get(LEAN_TO_COQ.get(proc, proc))
    if not options:
        return None
    wrong = options[int(rng.integers(len(options)))]
    s.body[i] = with_body(s.body[i], wrong)
    s.ensure_library(wrong)
    return s.text()


def _drop(head: str) -> Apply:
    def apply(task: Task, action: str, rng: np.random.Generator) -> str | None:
        s = split_lines(action)
        keep = [line for line in s.body if line.split(" ")[0].rstrip(".") != head]
        if len(keep) == len(s.body) or not keep:
            return None
        s.body = keep
        return s.text()

    return apply


def _missing_require(task: Task, action: str, rng: np.random.Generator) -> str | None:
    s = split_lines(action)
    keep = [h for h in s.header if not h.startswith(("Require", "From"))]
    if len(keep) == len(s.header):
        return None
    s.header = keep
    return s.text()


def _lean_tactic(task: Task, action: str, rng: np.random.Generator) -> str | None:
    s = split_lines(action)
    fin = [i for i in s.finishing() if procedure_of(s.body[i]) in _COQ_TO_LEAN]
    if not fin:
        return None
    i = fin[-1]
    s.body[i] = with_body(s.body[i], _COQ_TO_LEAN[procedure_of(s.body[i])])
    return s.text()


def _missing_case_split(task: Task, action: str, rng: np.random.Generator) -> str | None:
    s = split_lines(action)
    for i, line in enumerate(s.body):
        if line in ("split_Rabs.", "repeat split.") and i + 1 < len(s.body):
            nxt = s.body[i + 1]
            s.body[i : i + 2] = [with_selector(nxt, "") if nxt.startswith("all:") else nxt]
            return s.text()
    return None


def _wrong_lemma_name(task: Task, action: str, rng: np.random.Generator) -> str | None:
    for coq, lean in LEAN_LEMMAS.items():
        if coq in action:
            return action.replace(coq, lean, 1)
    return None


def math_error_model(rates: Mapping[str, float] | None = None) -> ErrorModel:
    """The slips (module doc); `rates` = measured wrong-procedure share by `procedure_class`."""
    measured = dict(rates or {})

    def wrong_rate(task: Task) -> float:
        return 0.5 * float(measured.get(procedure_class(task.features), 2 * DEFAULT_WRONG_PROCEDURE))

    f = lambda t, k: bool(t.features.get(k))  # noqa: E731
    ops = (
        ErrorOperator("lean_tactic", lambda t: 0.10, _lean_tactic),
        ErrorOperator("wrong_procedure", wrong_rate, _wrong_procedure),
        ErrorOperator("missing_intros", lambda t: 0.15 if f(t, "has_binders") else 0.0, _drop("intros")),
        ErrorOperator("missing_case_split", lambda t: 0.30 if f(t, "has_abs") or t.features.get("goal_kind") == "conj"
                      else 0.0, _missing_case_split),
        ErrorOperator("wrong_lemma_name", lambda t: 0.30 if f(t, "has_abs") else 0.0, _wrong_lemma_name),
        ErrorOperator("missing_require", lambda t: 0.20, _missing_require),
    )  # fmt: skip
    return ErrorModel(operators=ops)
