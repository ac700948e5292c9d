"""Moving files between a Ray driver and workers that may share no disk.

On one machine (or a cluster with a shared results folder) workers read and write the driver's
results directly. When a worker cannot see the driver's results folder — detected, not configured:
the driver writes a random token into it and a worker that reads the same token shares its disk —
unit folders travel as tar bytes through Ray's object store, a unit runs in a node-local scratch
folder, and the driver unpacks its folder into the results with the runner's own atomic
partial-then-rename step. LLM response-cache rows written on such a node travel back with the unit
and are inserted into the driver's cache, so results and caches always land in one place.

Nothing here imports Ray: these are plain functions on paths and bytes (tested without a cluster).
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path

from cm_gym.core.types import CmGymError
from cm_gym.memory.schema import sqlite_bytes

TOKEN_FILE = ".cm_gym-results-id"
Row = tuple[str, str, str, float, "bytes | None"]


class ShippingError(CmGymError):
    """A shipped folder or cache cannot be unpacked (corrupt bytes, unsafe member names)."""


def results_token(results_dir: Path) -> str:
    """The token that identifies `results_dir` (created on first use)."""
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / TOKEN_FILE
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = uuid.uuid4().hex
        tmp = path.with_name(f"{TOKEN_FILE}.{uuid.uuid4().hex[:8]}")
        tmp.write_text(token, encoding="utf-8")
        try:
            os.link(tmp, path)  # first writer wins; a concurrent runner reads the winner's token
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
        return path.read_text(encoding="utf-8").strip()


def sees(results_dir: str | Path, token: str) -> bool:
    """True when this process sees the driver's results folder (same token in the same place)."""
    try:
        return (Path(results_dir) / TOKEN_FILE).read_text(encoding="utf-8").strip() == token
    except OSError:
        return False


def scratch_root(token: str) -> Path:
    """A node-local folder for one results folder's shipped units (shared by the node's workers)."""
    path = Path(tempfile.gettempdir()) / "cm_gym-ray" / token
    path.mkdir(parents=True, exist_ok=True)
    return path


def pack_dir(path: Path) -> bytes:
    """The folder `path` as uncompressed tar bytes, members relative to it, sorted."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for item in sorted(path.rglob("*")):
            tar.add(item, arcname=item.relative_to(path).as_posix(), recursive=False)
    return buf.getvalue()


def unpack_dir(data: bytes, dest: Path, *, done_marker: str = "result.json") -> Path:
    """Unpack `pack_dir` bytes into `dest` atomically (a private folder renamed into place); a
    `dest` that already holds `done_marker` is kept (the first finisher wins)."""
    if (dest / done_marker).is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(f"{dest.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            for member in tar.getmembers():
                name = Path(member.name)
                if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
                    raise ShippingError(f"unsafe member {member.name!r} in a shipped folder for {dest}")
            tar.extractall(partial)  # noqa: S202 - every member was vetted above
        if dest.exists():
            shutil.rmtree(dest)  # an unfinished earlier copy (no done marker)
        os.rename(partial, dest)
    except tarfile.TarError as exc:
        raise ShippingError(f"a shipped folder for {dest} is corrupt: {exc}") from None
    except OSError:
        if not (dest / done_marker).is_file():
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return dest


#: a consistent copy of an SQLite file (WAL included) as bytes, via SQLite's backup API
copy_sqlite = sqlite_bytes


def materialise(data: bytes, path: Path) -> Path:
    """Write `data` to `path` once per node (atomic rename; a concurrent writer's copy is equal)."""
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def cache_rows_since(path: Path, since: float) -> list[Row]:
    """Rows of a response-cache file written at or after `since` (what a unit added)."""
    from cm_gym.llm.cache import ResponseCache

    if not path.is_file():
        return []
    with ResponseCache(path, "ro") as cache:
        return [row for row in cache.rows() if row[3] >= since]


def insert_cache_rows(path: Path, rows: Iterable[Row]) -> int:
    """Insert shipped rows into the driver's cache (existing keys untouched); returns how many
    were new."""
    from cm_gym.llm.cache import ResponseCache

    rows = list(rows)
    if not rows:
        return 0
    with ResponseCache(path, "rw") as cache:
        return cache.insert_rows(rows)
