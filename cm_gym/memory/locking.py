"""Advisory file locks for the record store and the default-store cache.

`FileLock` takes an exclusive ``flock`` on a small sidecar file (``.<name>.lock`` next to the
store), so a second writer of the same store — another ``cm-gym build``, another process building
the same default store — either waits or gets one `StoreLockedError` naming the holder's pid.
The lock dies with its process (no stale locks after a crash). Where ``fcntl`` does not exist
(Windows) locking is a no-op and concurrent writers are the user's responsibility.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path

from cm_gym.memory.errors import StoreLockedError, StoreReadOnlyError

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.1


def lock_path_for(path: Path) -> Path:
    """The sidecar lock file of `path`: ``.<name>.lock`` in the same folder."""
    return path.with_name(f".{path.name}.lock")


class FileLock:
    """An exclusive, process-level lock on `path` (a sidecar file, created on demand)."""

    def __init__(self, path: Path, *, what: str = "") -> None:
        self.path = Path(path)
        self.what = what or str(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def _holder(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            pid = int(self.path.read_text().strip() or "0")
            return f" (pid {pid})" if pid else ""
        return ""

    def acquire(self, timeout: float | None = 0.0) -> None:
        """Take the lock; wait at most `timeout` seconds (None = as long as it takes, 0 = not at
        all). Raises `StoreLockedError` when another process keeps it."""
        if fcntl is None or self._fd is not None:
            return
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreReadOnlyError(
                f"cannot create the lock file {self.path} ({exc.strerror}): {self.what} needs a writable folder"
            ) from None
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        waited = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    os.close(fd)
                    raise StoreLockedError(
                        f"{self.what} is in use by another process{self._holder()}: wait for it to "
                        "finish, or use another file"
                    ) from None
                if not waited:
                    logger.warning("waiting for %s: in use by another process%s", self.what, self._holder())
                    waited = True
                time.sleep(POLL_SECONDS)
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        """Release the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None or fcntl is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __enter__(self) -> FileLock:
        self.acquire(timeout=None)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
