"""The shared killable worker: deadlines, memory caps, crashes, restarts, bounded replies,
pickling and fork safety; and the plain-data loader it reads replies with."""

from __future__ import annotations

import os
import pickle
import time

import pytest

from cm_gym.evaluators.bounded import UntrustedValueError, check_plain, loads_plain
from cm_gym.evaluators.worker import Worker, WorkerError

PROBE = "cm_gym.evaluators._worker_probe"


@pytest.fixture(scope="module")
def worker() -> Worker:
    w = Worker(PROBE, memory_mb=200, track_memory=True)
    yield w
    w.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def test_round_trip_keeps_plain_values_and_module_state(worker: Worker) -> None:
    value = [1, (2.5, None), {"a": b"x", ("t",): frozenset({1})}, {3}, 1j, True]
    res = worker.call("echo", value, timeout=10)
    assert res.ok and res.value == value and res.peak_rss_mb and res.peak_rss_mb > 1
    first = worker.call("count", timeout=10).value
    assert worker.call("count", timeout=10).value == first + 1


def test_parent_packages_are_not_initialised() -> None:
    with Worker(PROBE) as w:
        loaded = w.call(
            "modules_loaded", "cm_gym", "gymnasium", "torch", "cm_gym.domains.registry", timeout=30
        ).value
    assert loaded == ["cm_gym"]  # a stub: importing cm_gym for real would load gymnasium


def test_deadline_kills_an_uninterruptible_call_and_the_next_call_restarts(worker: Worker) -> None:
    old = worker.call("pid", timeout=10).value
    start = time.perf_counter()
    res = worker.call("spin", 30.0, timeout=0.3)
    assert res.status == "timeout" and "deadline" in res.error
    assert time.perf_counter() - start < 5
    assert not _alive(old)
    nxt = worker.call("pid", timeout=30)
    assert nxt.ok and nxt.restarted and nxt.value != old


def test_heap_over_the_cap_is_budget_and_the_worker_is_replaced(worker: Worker) -> None:
    old = worker.call("pid", timeout=10).value
    res = worker.call("allocate", 2000, timeout=10)
    assert res.status == "budget" and "200 MB" in res.error
    assert worker.call("allocate", 50, timeout=30).ok
    assert worker.call("pid", timeout=10).value != old


def test_resident_memory_the_rlimit_misses_is_caught_by_the_watch(worker: Worker) -> None:
    res = worker.call("touch_shared", 600, 20.0, timeout=30)
    assert res.status == "budget" and "killed" in res.error
    assert res.wall_s < 20


def test_exceptions_are_errors_and_keep_the_worker(worker: Worker) -> None:
    old = worker.call("pid", timeout=10).value
    res = worker.call("fail", "boom", timeout=10)
    assert res.status == "error" and res.error == "ValueError: boom"
    assert worker.call("pid", timeout=10).value == old


def test_crash_and_unsendable_results_are_errors(worker: Worker) -> None:
    died = worker.call("die", 3, timeout=10)
    assert died.status == "error" and "status 3" in died.error
    odd = worker.call("not_plain", timeout=30)
    assert odd.status == "error" and "object" in odd.error
    lam = worker.call("echo", lambda: 1, timeout=10)
    assert lam.status == "error" and "cannot be sent" in lam.error
    assert worker.call("echo", 7, timeout=30).value == 7


def test_a_bad_module_is_one_error_not_an_exception() -> None:
    w = Worker("cm_gym.no_such_module_here")
    res = w.call("f", timeout=10)
    assert res.status == "error" and "No module named" in res.error
    with pytest.raises(WorkerError, match="did not start"):
        w.start()


def test_pickled_worker_starts_its_own_process(worker: Worker) -> None:
    mine = worker.call("pid", timeout=10).value
    copy = pickle.loads(pickle.dumps(worker))
    try:
        assert copy.pid is None
        theirs = copy.call("pid", timeout=30).value
        assert theirs != mine and worker.call("pid", timeout=10).value == mine
    finally:
        copy.close()


def test_forked_child_does_not_reuse_the_parent_worker(worker: Worker) -> None:
    mine = worker.call("pid", timeout=10).value
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            got = worker.call("pid", timeout=30).value
            os.write(w, str(got).encode())
        finally:
            os._exit(0)
    os.close(w)
    got = int(os.read(r, 100) or b"0")
    os.close(r)
    os.waitpid(child, 0)
    assert got not in (0, mine)
    assert worker.call("pid", timeout=10).value == mine  # the parent's worker is untouched


def test_close_stops_the_process() -> None:
    w = Worker(PROBE)
    pid = w.call("pid", timeout=30).value
    w.close()
    assert not _alive(pid) and w.pid is None


# -- the plain-data loader ----------------------------------------------------------------------
def test_plain_values_load() -> None:
    value = {"rows": [(1, "a", None, 2.5, b"\x00")], "set": {1, 2}, "c": 1 + 2j}
    assert loads_plain(pickle.dumps(value)) == value


@pytest.mark.parametrize(
    "data",
    [
        b"cos\nsystem\n(S'echo pwned'\ntR.",  # GLOBAL + REDUCE: a call of the sender's choosing
        pickle.dumps(ValueError("x")),
        pickle.dumps(range(3)),
        b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01.garbage",
        b"\x80\x05garbage",
        b"",
        b"(" * 50_000 + b"l" * 50_000 + b".",  # 50k nested lists from 100 KB
    ],
)
def test_anything_but_bounded_plain_data_is_refused(data: bytes) -> None:
    with pytest.raises(UntrustedValueError):
        loads_plain(data)


def test_size_depth_and_item_limits() -> None:
    with pytest.raises(UntrustedValueError, match="bytes"):
        loads_plain(pickle.dumps(b"x" * 1000), max_bytes=100)
    deep: list = []
    for _ in range(50):
        deep = [deep]
    with pytest.raises(UntrustedValueError, match="deeper"):
        check_plain(deep, max_depth=20)
    check_plain(deep, max_depth=60)
    with pytest.raises(UntrustedValueError, match="items"):
        check_plain([list(range(100))] * 100, max_nodes=5000)
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(UntrustedValueError):
        check_plain(cycle)
