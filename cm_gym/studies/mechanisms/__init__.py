"""Memory mechanisms behind one interface (`MemoryMechanism`): the paper's Table-1 baselines,
ReasoningBank and its E.2 variants, the WM-without-CF ablation, and CounterMem itself.

`make_mechanism(name, **params)` builds one by name; `MECHANISMS` lists them. Each module cites its
source paper and states what was adapted to the common task interface.
"""

from __future__ import annotations

from typing import Any

from cm_gym.studies.mechanisms.base import (
    Choice,
    DecisionContext,
    Guidance,
    GuidanceItem,
    MechanismContext,
    MechanismError,
    MemoryMechanism,
)
from cm_gym.studies.mechanisms.best_of_n import BestOfN
from cm_gym.studies.mechanisms.countermem import CounterMem
from cm_gym.studies.mechanisms.expel import ExpeL
from cm_gym.studies.mechanisms.generative_agents import GenerativeAgents
from cm_gym.studies.mechanisms.memgpt import MemGPT
from cm_gym.studies.mechanisms.none import NoMemory
from cm_gym.studies.mechanisms.reasoningbank import ReasoningBank
from cm_gym.studies.mechanisms.voyager import Voyager
from cm_gym.studies.mechanisms.wm_without_cf import WMWithoutCF

#: Mechanism classes by name.
MECHANISMS: dict[str, type[MemoryMechanism]] = {
    cls.name: cls
    for cls in (
        NoMemory,
        BestOfN,
        ExpeL,
        GenerativeAgents,
        Voyager,
        MemGPT,
        ReasoningBank,
        WMWithoutCF,
        CounterMem,
    )
}

__all__ = [
    "MECHANISMS",
    "BestOfN",
    "Choice",
    "CounterMem",
    "DecisionContext",
    "ExpeL",
    "GenerativeAgents",
    "Guidance",
    "GuidanceItem",
    "MechanismContext",
    "MechanismError",
    "MemGPT",
    "MemoryMechanism",
    "NoMemory",
    "ReasoningBank",
    "Voyager",
    "WMWithoutCF",
    "make_mechanism",
]


def make_mechanism(name: str, **params: Any) -> MemoryMechanism:
    """A mechanism by its `name` with constructor `params`; unknown names raise `MechanismError`."""
    cls = MECHANISMS.get(name)
    if cls is None:
        raise MechanismError(f"unknown memory mechanism {name!r}; known: {', '.join(sorted(MECHANISMS))}")
    try:
        return cls(**params)
    except TypeError as exc:
        raise MechanismError(f"bad parameters for mechanism {name!r}: {exc}") from None
