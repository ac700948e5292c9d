"""Errors of the SMT domain: every one is a `CmGymError`, so callers catch one base class."""

from __future__ import annotations

from cm_gym.core.types import CmGymError


class SmtError(CmGymError):
    """Base class of the SMT domain's errors."""


class SexprError(SmtError):
    """Text is not a well-formed sequence of s-expressions (unbalanced, too deep, too large)."""


class ScriptRefused(SmtError):
    """An SMT-LIB script uses a command, option or size the sandbox does not allow."""


class ScriptError(SmtError):
    """An allowed SMT-LIB script that z3 rejects (unknown symbol, ill-sorted term, ...)."""


class SmtLibError(SmtError):
    """An SMT-LIB benchmark file is missing, malformed or lacks its header (names the file)."""


class SmtConfigError(SmtError):
    """A solver configuration action is malformed (unknown key, logic, tactic or value)."""


class SmtConfigRefused(SmtError):
    """A well-formed solver configuration the sandbox will not run (over the task's rlimit)."""
