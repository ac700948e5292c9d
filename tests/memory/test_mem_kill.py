"""Kill test: SIGKILL a real build process mid-run; the store must open, pass SQLite's integrity
check and hold every record committed before the kill; a rerun resumes and completes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cm_gym.memory.schema import connect_ro, integrity_ok
from cm_gym.memory.store import RecordStore

HERE = Path(__file__).parent

SCRIPT = textwrap.dedent(
    """
    import sys
    from memfakes import FakeLLM, ToyDomain, ToyEvaluator, make_tasks
    from cm_gym.memory.admission import AdmissionWeights
    from cm_gym.memory.construction import ConstructionConfig, build_memory
    from cm_gym.memory.store import RecordStore

    path, n = sys.argv[1], int(sys.argv[2])
    store = RecordStore(path, domain="memtoy")
    # no redundancy penalty and no reuse: every inclusive task adds one record (every task is
    # inclusive, so the shared condition holds on all of T_build: keep it despite that)
    cfg = ConstructionConfig(reuse_policy="never", capacity=100000, refuse_vacuous=False,
                             admission_weights=AdmissionWeights(redundancy=0.0))

    def progress(done, total):
        # printed only after the task's admissions were committed
        print(f"COMMITTED {len(store)} {done}", flush=True)

    tasks = make_tasks(n, kinds=("inclusive",))
    build_memory(ToyDomain(), tasks, store, FakeLLM(sleep=0.001), ToyEvaluator(), cfg, progress=progress)
    print("DONE", len(store), flush=True)
    """
)


def _run(path: Path, n: int, kill_after: int | None) -> tuple[int, int]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(path), str(n)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    committed, lines = 0, 0
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("COMMITTED"):
            committed = int(line.split()[1])
            lines += 1
            if kill_after is not None and lines >= kill_after:
                time.sleep(0.003)  # land the kill somewhere inside the next task's work
                proc.send_signal(signal.SIGKILL)
                break
    proc.wait(timeout=60)
    if kill_after is None:
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    else:
        assert proc.returncode == -signal.SIGKILL
    return committed, proc.returncode


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkill_mid_build_loses_nothing_committed(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    n = 60
    for kill_after in (5, 17):
        committed, _ = _run(path, n, kill_after)
        conn = connect_ro(path)
        assert integrity_ok(conn)
        conn.close()
        with RecordStore(path) as store:
            assert len(store) >= committed >= 1
            assert store.integrity_check()
            ids = [r.record_id for r in store.records]
            assert len(ids) == len(set(ids))
    _run(path, n, None)  # resume to the end
    with RecordStore(path) as store:
        assert len(store.processed_task_ids) == n
        assert len(store) == n  # one record per inclusive task, none duplicated by the restarts
        assert store.integrity_check()
