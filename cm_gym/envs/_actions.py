"""What the selection env accepts as an action (SPEC §4, *Amended* action rule).

An action must be an integer in ``Discrete(n)``: a Python ``int``, a NumPy integer scalar, a 0-d
integer tensor (anything implementing ``__index__``), or an integer NumPy array holding exactly one
element (SB3 and RLlib hand out shapes ``()`` and ``(1,)``). Everything else raises
`InvalidActionError` in every mode, with one line naming the fix: out-of-range integers (7, −1),
floats (1.0, 1.5, inf, nan), strings ("1"), ``None``, lists, arrays of another size or dtype, and
booleans — ``True``/``False`` are refused on purpose, because a bool reaching ``step`` is almost
always a mask entry passed by mistake. Only an in-range *masked* action gets the lenient skip.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from cm_gym.core.types import CmGymError


class InvalidActionError(CmGymError, ValueError):
    """The action is not an integer of the action space, or (``strict_actions=True``) it is masked."""


def _describe(action: Any) -> str:
    text = repr(action)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{text} ({type(action).__name__})"


def action_index(action: Any, n: int) -> int:
    """The integer in ``0..n-1`` that `action` denotes, or `InvalidActionError`."""
    hint = f"pass an integer 0..{n - 1} (0 = skip, j = use retrieved slot j)"
    if isinstance(action, (bool, np.bool_)):
        raise InvalidActionError(f"action {_describe(action)} is a boolean, not an integer: {hint}")
    if isinstance(action, np.ndarray):
        if action.size != 1 or action.dtype.kind not in "iu":
            raise InvalidActionError(
                f"action array of shape {action.shape} and dtype {action.dtype} is not one integer: {hint}"
            )
        value = int(action.reshape(-1)[0])
    else:
        try:
            value = operator.index(action)
        except TypeError:
            raise InvalidActionError(f"action {_describe(action)} is not an integer: {hint}") from None
    if not 0 <= value < n:
        raise InvalidActionError(f"action {value} is outside Discrete({n}): {hint}")
    return value


def checked_action(space: Any, action: Any) -> Any:
    """The one validation path of every wrapper (issue 33): for a ``Discrete`` action space, the
    integer `action_index` makes of `action` (so a wrapper refuses ``1.9``, ``"1"``, ``-1``, ``17``
    and ``nan`` with `InvalidActionError` exactly as the env it wraps does, before it reads a mask
    or counts a step); any other space passes the action through unchanged."""
    n = getattr(space, "n", None)
    if n is None or getattr(space, "start", 0) != 0:
        return action
    return action_index(action, int(n))
