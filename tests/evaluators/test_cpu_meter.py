"""The per-process CPU meter of killable workers (`cpuclock.ProcessMeter`): the figures the CPU
backstop is charged in, read cheaply enough to take around every call."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cm_gym.evaluators.cpuclock import ProcessMeter, process_cpu_s
from cm_gym.evaluators.worker import Worker

SPIN = "import time\nt = time.process_time() + 0.3\nwhile time.process_time() < t: pass\nimport sys; sys.stdin.read()"


@pytest.mark.parametrize("children", [True, False])
def test_meter_counts_the_process_cpu_and_keeps_its_last_reading(children: bool) -> None:
    proc = subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.PIPE)
    try:
        meter = ProcessMeter(proc.pid, children=children)
        meter.start()
        while (process_cpu_s(proc.pid) or 0.0) < 0.3 and proc.poll() is None:
            pass
        used = meter.used()
        assert 0.1 < used < 5.0
        # the same clock as the /proc figures the backstop always used (ticks: 10 ms apart)
        assert abs((meter._read() or 0.0) - (process_cpu_s(proc.pid) or 0.0)) < 0.05
    finally:
        proc.communicate(b"")
    assert meter.used() >= used  # gone: the last reading stays
    meter.close()


@pytest.mark.parametrize("children", [True, False])
def test_worker_cpu_budget_with_either_meter(children: bool) -> None:
    with Worker("cm_gym.evaluators._worker_probe", memory_mb=200, children_cpu=children) as worker:
        res = worker.call("spin", 3.0, timeout=30, cpu_budget_s=0.3)
        assert res.status == "cpu" and res.cpu_s is not None and res.cpu_s >= 0.3
        ok = worker.call("echo", [1, 2], timeout=30, cpu_budget_s=5.0)
        assert ok.ok and ok.value == [1, 2] and ok.cpu_s is not None and 0.0 <= ok.cpu_s < 1.0
