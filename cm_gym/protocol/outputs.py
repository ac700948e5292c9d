"""Output folders of the protocol commands: refuse to mix a new run into a finished one, replace
on request, and keep TensorBoard runs from piling up.

`claim_out_dir(out, "run", overwrite=False)` raises when ``out`` already holds the finished output
of that command (``results.json`` for run / evaluate, ``training.json`` for train); with
``overwrite=True`` it first removes that command's outputs — and only those, never other files in
the folder. A folder holding only an interrupted build (``memory/store.sqlite``) is not finished:
rerunning resumes it.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from cm_gym.core.types import CmGymError

logger = logging.getLogger(__name__)

#: What each command writes into its output folder (files, folders, globs).
OUTPUTS: dict[str, tuple[str, ...]] = {
    "run": ("results.json", "training.json", "selector", "tensorboard", "memory", "*.png"),
    "train": ("training.json", "selector", "tensorboard", "memory", "results.json", "*.png"),
    "evaluate": ("results.json", "*.png"),
    "compare": ("results.json", "training.json", "selector", "tensorboard", "*.png"),
}
#: The file that says the command finished in that folder.
FINISHED: dict[str, str] = {
    "run": "results.json",
    "train": "training.json",
    "evaluate": "results.json",
    "compare": "results.json",
}


class OutputExistsError(CmGymError):
    """The output folder already holds a finished run (pass --overwrite to replace it)."""


def claim_out_dir(out_dir: str | Path, command: str, *, overwrite: bool) -> Path:
    """Make `out_dir` ready for `command` (see the module docstring); returns it."""
    out = Path(out_dir)
    done = out / FINISHED[command]
    if done.exists() and not overwrite:
        raise OutputExistsError(
            f"{out} already holds {done.name} from an earlier run: pass --overwrite to replace its "
            "outputs, or choose another --out-dir"
        )
    if overwrite and out.is_dir():
        for pattern in OUTPUTS[command]:
            for path in out.glob(pattern):
                logger.info("removing %s (--overwrite)", path)
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
    out.mkdir(parents=True, exist_ok=True)
    return out


def remove_tensorboard_runs(folder: Path, name: str) -> None:
    """Remove SB3's ``<name>_<n>`` run folders, so retraining a seed logs to ``<name>_1`` again."""
    if not folder.is_dir():
        return
    for path in folder.glob(f"{name}_*"):
        if path.is_dir() and path.name[len(name) + 1 :].isdigit():
            shutil.rmtree(path)
