"""Where cm_gym reads real benchmark data and writes its caches."""

from __future__ import annotations

import os
from pathlib import Path

from cm_gym.types import CmGymError


class DataNotFoundError(CmGymError):
    """The real-data folder (CM_GYM_DATA or ../shared/data) is missing."""


class CacheError(CmGymError):
    """The cache folder ($CM_GYM_CACHE) cannot be created or written where writing is needed."""


def data_root() -> Path:
    """The folder holding the real benchmark subsets: $CM_GYM_DATA, else ``../shared/data`` next
    to the current directory or next to the source checkout. Nothing is ever downloaded."""
    env = os.environ.get("CM_GYM_DATA")
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise DataNotFoundError(f"CM_GYM_DATA={env!r} is not a directory")
        return path
    candidates = [
        Path.cwd().parent / "shared" / "data",
        Path(__file__).resolve().parents[2] / "shared" / "data",
    ]
    for path in candidates:
        if path.is_dir():
            return path
    raise DataNotFoundError(
        "real benchmark data not found: set CM_GYM_DATA to the folder holding spider/, sat/, smt/, "
        f"quixbugs/, dafny/ (looked in {', '.join(str(c) for c in candidates)})"
    )


def cache_root() -> Path:
    """The cache root ($CM_GYM_CACHE, default ~/.cache/cm_gym), not created: read-only use of an
    existing cache must work in a folder nobody may write to."""
    return Path(os.environ.get("CM_GYM_CACHE", Path.home() / ".cache" / "cm_gym")).expanduser()


def cache_dir(*parts: str) -> Path:
    """A cache folder under `cache_root()`, created on demand. An existing folder is returned
    as is, so a read-only cache works for reading; one that cannot be created is a `CacheError`."""
    path = cache_root().joinpath(*parts)
    if not path.is_dir():
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(
                f"cannot create the cache folder {path} ({exc.strerror}): set CM_GYM_CACHE to a writable folder"
            ) from None
    return path
