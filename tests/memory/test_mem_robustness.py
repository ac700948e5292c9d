"""Stores and caches under stress (issue 14 item 5): a snapshot is never opened writable, builders
serialise, locks are not "corruption", a full disk is one clear error that loses nothing committed,
and a read-only cache serves everything that only reads."""

from __future__ import annotations

import errno
import multiprocessing as mp
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from cm_gym.memory import schema
from cm_gym.memory.errors import StoreError, StoreFullError, StoreLockedError, StoreReadOnlyError
from cm_gym.memory.opening import open_store
from cm_gym.memory.schema import connect_rw, integrity_ok, migrate
from cm_gym.memory.snapshot import FrozenStore, file_sha256, load_readonly, manifest_path
from cm_gym.memory.store import RecordStore

REPO = Path(__file__).resolve().parents[2]


def _files(folder: Path) -> dict[str, str]:
    return {p.name: file_sha256(p) for p in sorted(folder.iterdir()) if p.is_file()}


def test_a_snapshot_without_manifest_is_never_opened_writable(
    store: RecordStore, make_record, tmp_path: Path
) -> None:
    for _ in range(3):
        store.add(make_record())
    snap_dir = tmp_path / "snap"
    store.freeze(snap_dir / "s.sqlite")
    manifest_path(snap_dir / "s.sqlite").unlink()
    before = _files(snap_dir)
    with pytest.raises(StoreError, match="manifest .* is missing"):
        open_store(snap_dir / "s.sqlite")
    with pytest.raises(StoreReadOnlyError, match="frozen snapshot"):
        RecordStore(snap_dir / "s.sqlite")
    assert len(load_readonly(snap_dir / "s.sqlite")) == 3  # still readable for inspection
    assert _files(snap_dir) == before  # same bytes, no -wal / -shm / lock file appeared


def _writer(path: str, n: int, timeout: float, out: mp.Queue) -> None:
    from cm_gym.memory.record import Record

    try:
        with RecordStore(path, domain="memtoy", lock_timeout=timeout) as s:
            rec = Record.create(
                domain="memtoy", source_task_id=f"w{n}", env_id="e", situation=f"s{n}", a_minus=f"x > {n}",
                a_plus=f"x >= {n}", evidence={}, condition="", contrast_key="k", delta=1.0, created_order=n,
            )  # fmt: skip
            s.add(rec)
        out.put(("ok", n, ""))
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        out.put((type(exc).__name__, n, str(exc)))


@pytest.mark.parametrize("timeout", [30.0, 0.0])
def test_concurrent_builders_serialise_or_get_one_line(tmp_path: Path, timeout: float) -> None:
    ctx = mp.get_context("fork")
    out: mp.Queue = ctx.Queue()
    path = str(tmp_path / "shared.sqlite")
    procs = [ctx.Process(target=_writer, args=(path, n, timeout, out)) for n in range(4)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    ok = [n for kind, n, _ in results if kind == "ok"]
    refused = [msg for kind, _, msg in results if kind != "ok"]
    assert {kind for kind, _, _ in results} <= {"ok", "StoreLockedError"}, results
    assert all("\n" not in m and "in use by another process" in m for m in refused)
    if timeout:
        assert len(ok) == 4  # they waited for each other
    reader = load_readonly(path)
    assert sorted(int(r.source_task_id[1:]) for r in reader.records) == sorted(ok)


def test_concurrent_schema_migrations_serialise(tmp_path: Path) -> None:
    """Below the writer lock: raw connections racing on a new file never see a half-migrated one."""
    path = tmp_path / "race.sqlite"
    errors: list[BaseException] = []

    def run() -> None:
        try:
            conn = connect_rw(path)
            migrate(conn, path)
            conn.close()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT version FROM schema_version").fetchall() == [(schema.SCHEMA_VERSION,)]


def test_a_sqlite_lock_is_reported_as_a_lock(
    store: RecordStore, make_record, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.add(make_record())
    store._conn.execute("PRAGMA busy_timeout = 200")
    holder = sqlite3.connect(store.path, isolation_level=None, timeout=0.1)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreLockedError) as err:
            store.add(make_record())
        assert "corrupt" not in str(err.value) and "locked" in str(err.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(store) == 1
    store.add(make_record())  # works again once the other process lets go
    plain = sqlite3.connect(store.path.with_name("plain.sqlite"), isolation_level=None)
    plain.execute("CREATE TABLE t (x)")
    plain.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(schema, "BUSY_TIMEOUT_MS", 200)
    with pytest.raises(StoreLockedError, match="locked"):
        FrozenStore.open(store.path.with_name("plain.sqlite"), verify=False)
    plain.execute("ROLLBACK")
    plain.close()


def test_a_full_disk_is_one_error_and_loses_nothing(store: RecordStore, make_record) -> None:
    kept = [store.add(make_record()).record_id for _ in range(3)]
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own SQLITE_FULL
    with pytest.raises(StoreFullError) as err:
        for _ in range(50):
            store.add(make_record(situation="x" * 3000))
    assert "\n" not in str(err.value) and "free disk space" in str(err.value)
    assert integrity_ok(store._conn)
    in_memory = {r.record_id for r in store.records}
    store.close()
    on_disk = {r.record_id for r in load_readonly(store.path).records}
    assert set(kept) <= on_disk and on_disk == in_memory  # the mirror never ran ahead of the file


def test_freezing_onto_a_full_disk_leaves_nothing_behind(
    store: RecordStore, make_record, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cm_gym.memory import snapshot

    store.add(make_record())

    def full(path: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(snapshot, "_fsync", full)
    out = tmp_path / "frozen"
    with pytest.raises(StoreFullError, match="no space left"):
        store.freeze(out / "s.sqlite")
    assert list(out.iterdir()) == []


def _read_only_mount_works() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount --bind /tmp /tmp && mount -o remount,bind,ro /tmp"],
        capture_output=True,
    )
    return probe.returncode == 0


def _run_with_read_only(folder: Path, code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh Python with `folder` read-only (a read-only bind mount in a private
    mount namespace as root, where permissions would not stop us; chmod otherwise)."""
    cmd = [sys.executable, "-c", textwrap.dedent(code)]
    if os.geteuid() == 0:
        mount = f'mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && exec "$@"'
        cmd = ["unshare", "-m", "sh", "-c", mount, "sh", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    os.chmod(folder, 0o555)
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    finally:
        os.chmod(folder, 0o755)


@pytest.mark.skipif(os.geteuid() == 0 and not _read_only_mount_works(), reason="no read-only mounts here")
def test_a_read_only_cache_serves_everything_that_only_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tests.envs.toy_env  # noqa: F401  (registers EnvToy)
    from cm_gym.memory.defaults import default_snapshot

    cache = tmp_path / "cache"
    monkeypatch.setenv("CM_GYM_CACHE", str(cache))
    monkeypatch.setenv("CM_GYM_PROGRESS", "0")
    default_snapshot("EnvToy")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    before = {p.relative_to(cache): file_sha256(p) for p in cache.rglob("*") if p.is_file()}
    result = _run_with_read_only(
        cache,
        """
        import gymnasium as gym
        import tests.envs.toy_env as toy
        from cm_gym.memory.defaults import default_snapshot
        from cm_gym.core.types import CmGymError
        path = default_snapshot("EnvToy")            # cached: no lock, no write
        for store in (path, None):                   # explicit snapshot, then the default one
            env = gym.make(toy.TOY_ENV_ID, store=store, tasks="all")
            env.reset(seed=0)
            env.step(0)
        try:
            default_snapshot("EnvToy", seed=5)       # not cached: would need a build
        except CmGymError as exc:
            print("REFUSED", exc)
        """,
        env,
    )
    assert result.returncode == 0, result.stderr
    refused = [line for line in result.stdout.splitlines() if line.startswith("REFUSED")]
    assert len(refused) == 1 and "CM_GYM_CACHE" in refused[0], result.stdout
    after = {p.relative_to(cache): file_sha256(p) for p in cache.rglob("*") if p.is_file()}
    assert after == before
