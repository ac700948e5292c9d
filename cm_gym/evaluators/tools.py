"""Finding the external tools world models run (a verifier, a proof assistant): one clear
`ToolNotFoundError` naming the install command when a tool is missing."""

from __future__ import annotations

import os
import shutil

from cm_gym.evaluators.sandbox import ToolNotFoundError


def find_tool(executable: str, env_var: str, what: str, install_hint: str) -> str:
    """Path of `executable`: ``$env_var`` when set (it must be an executable file), else PATH.
    Raises `ToolNotFoundError` ("<what> (`executable`) is not installed; <install_hint>")."""
    override = os.environ.get(env_var)
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override
        raise ToolNotFoundError(f"{env_var}={override!r} is not an executable; {install_hint}")
    path = shutil.which(executable)
    if path is None:
        raise ToolNotFoundError(f"{what} (`{executable}`) is not installed; {install_hint}")
    return path
