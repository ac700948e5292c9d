"""Shared world-model utilities for domains: a sandbox for untrusted code and external tools
(`Sandbox`, `Limits`, `SandboxResult`), and a Python test-suite runner built on it (`run_suite`,
`TestSuite`, `Case`). See `sandbox.py` for what is and is not isolated."""

from __future__ import annotations

from cm_gym.evaluators.sandbox import (
    Limits,
    Sandbox,
    SandboxError,
    SandboxResult,
    ToolNotFoundError,
    probe_isolation,
)
from cm_gym.evaluators.testrun import Case, SuiteRun, TestResult, TestSuite, run_suite

__all__ = [
    "Case",
    "Limits",
    "Sandbox",
    "SandboxError",
    "SandboxResult",
    "SuiteRun",
    "TestResult",
    "TestSuite",
    "ToolNotFoundError",
    "probe_isolation",
    "run_suite",
]
