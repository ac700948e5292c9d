"""A minimal stand-in for `pytest`, copied into sandboxes as ``pytest.py``.

Upstream test files (QuixBugs) only use ``pytest.mark.parametrize``, ``pytest.skip``,
``pytest.approx`` and the ``use_correct`` / ``run_slow`` flags their conftest sets. Importing real
pytest in every sandboxed run would cost far more than the tests themselves, and the package must
not need pytest at run time. Stdlib only; also used in-process by the QuixBugs loader to read the
parameters of a test file without running it.
"""

from __future__ import annotations

from typing import Any

use_correct = False
run_slow = False


class Skipped(Exception):
    """Raised by `skip`."""


def skip(msg: str = "") -> None:
    """Skip the current test."""
    raise Skipped(msg)


class Approx:
    """``pytest.approx`` for numbers: equal within `abs` (only `abs` when given, as pytest)."""

    def __init__(self, expected: Any, rel: float | None = None, abs: float | None = None) -> None:
        self.expected = expected
        self.rel = rel
        self.abs = abs

    def tolerance(self) -> float:
        if self.abs is not None and self.rel is None:
            return float(self.abs)
        rel = 1e-6 if self.rel is None else float(self.rel)
        absolute = 1e-12 if self.abs is None else float(self.abs)
        return max(rel * abs(float(self.expected)), absolute)

    def matches(self, value: Any) -> bool:
        if type(value) not in (int, float) or type(self.expected) not in (int, float):
            return False
        return abs(value - self.expected) <= self.tolerance()

    def __eq__(self, other: object) -> bool:
        return self.matches(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"approx({self.expected!r}, abs={self.abs!r}, rel={self.rel!r})"


def approx(expected: Any, rel: float | None = None, abs: float | None = None) -> Approx:
    """Numeric closeness, as ``pytest.approx``."""
    return Approx(expected, rel=rel, abs=abs)


class _Mark:
    def parametrize(self, argnames: str | list[str], argvalues: Any, **_: Any) -> Any:
        names = [n.strip() for n in argnames.split(",")] if isinstance(argnames, str) else list(argnames)
        values = list(argvalues)

        def deco(fn: Any) -> Any:
            fn._cm_params = (names, values)
            return fn

        return deco

    def __getattr__(self, name: str) -> Any:
        def mark(*args: Any, **kwargs: Any) -> Any:
            if len(args) == 1 and callable(args[0]) and not kwargs:
                return args[0]
            return lambda fn: fn

        return mark


mark = _Mark()
