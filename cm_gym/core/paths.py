"""Where cm_gym reads real benchmark data and writes its caches."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from cm_gym.core.types import CmGymError


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
        Path(__file__).resolve().parents[3] / "shared" / "data",
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


class DataFileError(CmGymError):
    """A data file cannot be read as text: missing, not a regular file, too large or not UTF-8."""


def open_regular_file(path: str | Path) -> BinaryIO:
    """`path` opened for binary reading, only when it is a regular file (symlinks followed).

    The file is opened without blocking and checked with ``fstat`` before a byte is read, so a
    FIFO, a device (``/dev/zero``), a socket or a link to one of them is refused instead of
    hanging or flooding the reader. `DataFileError` (one line) otherwise."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise DataFileError(f"{p}: cannot read ({exc.strerror or exc})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DataFileError(f"{p}: not a regular file (a FIFO, device, socket or folder is refused)")
        return os.fdopen(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def read_data_file(path: str | Path, max_bytes: int) -> str:
    """The UTF-8 text of a regular file of at most `max_bytes` bytes (`open_regular_file`: a FIFO
    or device is refused before a byte is read); a file that grows while it is read is cut off at
    the limit and refused."""
    p = Path(path)
    with open_regular_file(p) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes:
            raise DataFileError(f"{p}: {size} bytes exceed the limit of {max_bytes}")
        try:
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise DataFileError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise DataFileError(f"{p}: more than {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def is_regular_file(path: Path) -> bool:
    """True for a regular file (symlinks followed); False for FIFOs, devices, folders, missing."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False
