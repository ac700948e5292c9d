"""The work memo's files (``$CM_GYM_CACHE/work/``): what each holds, when it was last used, and
removing those no process uses (``cm-gym cache list --work`` / ``cm-gym cache clear --work``).

Why: every memo file's name carries the version of the code and libraries that computed it
(`cm_gym.core.workmemo`), so each upgrade of cm_gym, sqlglot, scikit-learn or a solver starts new
files and the old ones are never read again, nor removed: the folder only grows. A process marks
each file it opens (`workmemo.mark_use`: the marker's time is set to now, and a shared lock is held
while the file is open), so a file's *last use* is known, and a file a live process holds is never
removed. A file without a marker (written before markers existed) counts as last used when it was
last written.

Only files that are work memos (SQLite files whose ``meta`` table names the work memo's format,
read without writing anything beside them) are listed as such and removed, with their write-ahead log,
shared-memory file and marker; anything else in the folder is listed as "not a work memo" and
left alone.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cm_gym.core.paths import cache_root
from cm_gym.core.workmemo import FORMAT, fcntl, marker_path

_SIDE_FILES = ("-wal", "-shm")


@dataclass(frozen=True)
class WorkFile:
    """One file of the work memo folder."""

    path: str
    #: the file, its write-ahead log and shared-memory file, in bytes
    bytes: int
    #: when a process last opened it (its marker), else last wrote it (seconds since the epoch)
    last_used: float
    #: "idle", "in use" (a live process holds it) or "not a work memo" (never removed)
    state: str

    @property
    def name(self) -> str:
        return Path(self.path).name

    def idle_days(self, now: float | None = None) -> float:
        return max(0.0, ((time.time() if now is None else now) - self.last_used) / 86400.0)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "name": self.name, "idle_days": round(self.idle_days(), 2)}


def work_folder() -> Path:
    """The work memo folder of the current cache (``$CM_GYM_CACHE/work``)."""
    return cache_root() / "work"


def work_files() -> list[WorkFile]:
    """Every ``*.sqlite`` file of the work memo folder, by name."""
    folder = work_folder()
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.sqlite")):
        if not path.is_file() or path.is_symlink():
            continue
        size = sum(_size(Path(f"{path}{suffix}")) for suffix in ("", *_SIDE_FILES))
        used = _mtime(marker_path(path)) or _mtime(path) or 0.0
        if not _is_work_memo(path):
            state = "not a work memo"
        else:
            state = "in use" if _held(marker_path(path)) else "idle"
        out.append(WorkFile(str(path), size, used, state))
    return out


def clear_work(
    unused_days: float | None = None, *, dry_run: bool = False
) -> tuple[list[WorkFile], list[WorkFile]]:
    """Remove the work memo's files (all, or those not used for `unused_days` days): (removed,
    skipped because a live process holds them). Every file is taken exclusively through its marker
    first, so no process opens it while it is removed (one that tries waits, then starts a new
    file); "not a work memo" files are never touched. `dry_run`: only report."""
    if unused_days is not None and not unused_days >= 0:
        raise ValueError(f"unused_days must be a number of days >= 0, got {unused_days!r}")
    removed: list[WorkFile] = []
    skipped: list[WorkFile] = []
    now = time.time()
    for entry in work_files():
        if entry.state == "not a work memo":
            continue
        if unused_days is not None and entry.idle_days(now) < unused_days:
            continue
        path = Path(entry.path)
        if dry_run:
            (skipped if entry.state == "in use" else removed).append(entry)
            continue
        fd = _take(marker_path(path))
        if fd is None:
            skipped.append(entry)
            continue
        try:
            for suffix in ("", *_SIDE_FILES):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            marker_path(path).unlink(missing_ok=True)
            removed.append(entry)
        finally:
            os.close(fd)  # (the marker is unlinked: a process waiting on it goes on, unmarked)
    return removed, skipped


def _is_work_memo(path: Path) -> bool:
    """Whether `path` is a work memo: its ``meta`` table (written before the file turns to WAL
    mode, so it is in the main file) names `FORMAT`. Read as an immutable file: no lock, and no
    log or shared-memory file is created beside it."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True, timeout=1.0)
    except sqlite3.Error:
        return False
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        return row is not None and row[0] == FORMAT
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def _take(marker: Path) -> int | None:
    """An exclusive lock on `marker` (created if missing): its descriptor, or None when a live
    process holds the file, the folder cannot be written (nothing can be removed then) or the
    file system refuses locks (a file that may be in use is never removed)."""
    try:
        fd = os.open(marker, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    if fcntl is None:  # pragma: no cover - no flock: nothing tells a file in use
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _held(marker: Path) -> bool:
    """Whether a live process holds `marker` (a shared lock another descriptor cannot upgrade)."""
    if fcntl is None or not marker.is_file():
        return False
    try:
        fd = os.open(marker, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # (closing releases a lock this look took)
    return False


def _size(path: Path) -> int:
    with contextlib.suppress(OSError):
        return path.stat().st_size
    return 0


def _mtime(path: Path) -> float | None:
    with contextlib.suppress(OSError):
        return path.stat().st_mtime
    return None
