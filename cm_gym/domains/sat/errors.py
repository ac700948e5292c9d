"""Errors of the SAT domain: every one is a `CmGymError`, so callers catch one base class."""

from __future__ import annotations

from cm_gym.core.types import CmGymError


class SatError(CmGymError):
    """Base class of the SAT domain's errors."""


class EncodingError(SatError):
    """A constraint-language encoding does not parse or cannot be compiled (names the line)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        self.line = line
        super().__init__(f"line {line}: {message}" if line is not None else message)


class EncodingTooLarge(EncodingError):
    """The encoding grounds to more clauses or literals than the sandbox allows."""


class DimacsError(SatError):
    """A DIMACS CNF file is missing, malformed or too large (the message names the file)."""


class SolverConfigError(SatError):
    """A solver configuration action is malformed (unknown key, solver or value)."""


class SolverRefused(SatError):
    """A well-formed solver configuration the sandbox will not run (e.g. over the task's budget)."""
