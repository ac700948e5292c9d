"""The persistent cache of Coq's verdicts (`cm_gym.evaluators.verdicts` with Coq's schema), so RL
training does not re-run ``coqc`` on a script it has already checked.

Key: sha256 of (checker version, ``coqc --version``, the statement prefix and its declared
axioms, the vetted script's canonical text, the time limits). Only Coq's own verdicts are stored.
"""

from __future__ import annotations

from pathlib import Path

from cm_gym.evaluators.verdicts import VerdictCache as _VerdictCache
from cm_gym.evaluators.verdicts import verdict_key

__all__ = ["SCHEMA", "VerdictCache", "verdict_key"]

SCHEMA = "cm_gym.coq_verdicts.v1"


class VerdictCache(_VerdictCache):
    """Coq verdicts by key (see `cm_gym.evaluators.verdicts.VerdictCache`)."""

    def __init__(self, path: str | Path | None) -> None:
        super().__init__(path, schema=SCHEMA, what="coq verdict cache")
