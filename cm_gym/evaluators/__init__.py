"""Shared world-model utilities for domains: a sandbox for untrusted code and external tools
(`Sandbox`, `Limits`, `SandboxResult`), a Python test-suite runner built on it (`run_suite`,
`TestSuite`, `Case`), and a killable, reusable worker process for in-process engines that cannot
interrupt themselves (`Worker`, `WorkerResult`). See `sandbox.py` for what is and is not
isolated and `worker.py` for the worker's contract."""

from __future__ import annotations

from cm_gym.evaluators.sandbox import (
    Limits,
    Sandbox,
    SandboxError,
    SandboxResult,
    Session,
    ToolNotFoundError,
    probe_isolation,
)
from cm_gym.evaluators.testrun import Case, SuiteRun, TestResult, TestSuite, run_suite
from cm_gym.evaluators.worker import Worker, WorkerError, WorkerResult

__all__ = [
    "Case",
    "Limits",
    "Sandbox",
    "SandboxError",
    "SandboxResult",
    "Session",
    "SuiteRun",
    "TestResult",
    "TestSuite",
    "ToolNotFoundError",
    "Worker",
    "WorkerError",
    "WorkerResult",
    "probe_isolation",
    "run_suite",
]
