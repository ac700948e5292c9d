"""``CM_GYM_QUICK=1``: try everything fast, at smoke sizes whose numbers mean nothing.

With the variable set, the defaults that make the main job take minutes shrink (only options a
command line or call leaves unset; an explicit ``--seeds 0 1 2 3 4`` is kept):

- `cm-gym run`, `train` and `evaluate` (without a training record): `PROTOCOL_SIZES`, so
  ``cm-gym run`` takes a minute or two instead of ~13 on two cores;
- `cm-gym experiment`: ``--quick`` (results in ``runs/experiments-quick``);
- `cm_gym.evaluate_policies`: ``n_eval`` = ``PROTOCOL_SIZES["n_eval"]``;
- the default store a bare ``gym.make`` builds (`cm_gym.memory.defaults`): at most
  `DEFAULT_STORE_N_BUILD` build tasks — another content-keyed file, so the full-size store is
  never replaced and never reused for a quick one.

Each of them says so on stderr once. The documentation's code blocks run in CI under this
variable (``tests/test_docs_snippets.py``), so their text stays what a user types.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable
from typing import Any

logger = logging.getLogger(__name__)

ENV = "CM_GYM_QUICK"
#: smoke sizes of the protocol (five seeds of 2,000 decisions on 320/240/240 tasks at full size)
PROTOCOL_SIZES: dict[str, Any] = {
    "seeds": (0,),
    "n_build": 60,
    "n_train": 40,
    "n_eval": 40,
    "total_decisions": 300,
    "checkpoint_every": 100,
}
#: build tasks of a default store at most
DEFAULT_STORE_N_BUILD = 60
_said: set[str] = set()


def quick_mode() -> bool:
    """True when ``CM_GYM_QUICK`` is set to 1/true/yes/on."""
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def say(what: str) -> None:
    """Tell once per process, on stderr, that `what` runs at smoke sizes."""
    if what not in _said:
        _said.add(what)
        print(
            f"{ENV}=1: {what} at smoke sizes (numbers mean nothing; unset it for real runs)", file=sys.stderr
        )


def protocol_overrides(given: Iterable[str]) -> dict[str, Any]:
    """The smoke sizes for the `ProtocolConfig` fields not in `given` (empty unless quick)."""
    if not quick_mode():
        return {}
    given = set(given)
    return {name: value for name, value in PROTOCOL_SIZES.items() if name not in given}
