"""Progress output of long work: a tqdm bar on a terminal, plain lines everywhere else.

A tqdm bar redraws itself with carriage returns: piped to a file or a CI log it writes one
"line" per refresh (26 KB for one default-store build). `progress_bar` returns a tqdm bar only
when its stream is a terminal; otherwise a `LineProgress` that prints a start line, a short line
when another tenth of the work is done (at most one per second, at least one per `LINE_EVERY_S`
while work advances) and a final line with the elapsed time. ``CM_GYM_PROGRESS=0`` silences both.

`cm_gym.protocol.training.DecisionProgress` is the same for SB3's ``learn`` (a callback counting
decisions), and `PhaseBar` one bar per phase of a protocol run (build, train, evaluate): the
commands and `cm_gym.evaluate_policies` show it.
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO, Any

#: seconds between two lines at most while work advances (a slow tenth still shows life)
LINE_EVERY_S = 60.0
_OFF = ("0", "false", "no", "off")


def progress_enabled() -> bool:
    """False when ``CM_GYM_PROGRESS`` is 0/false/no/off (hides every bar and progress line)."""
    return os.environ.get("CM_GYM_PROGRESS", "1").strip().lower() not in _OFF


def _clock(seconds: float) -> str:
    seconds = int(max(0.0, seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class LineProgress:
    """tqdm's interface (``update``, ``n`` + ``refresh``, ``set_postfix``, ``close``, ``with``)
    printing whole lines: ``build: 32/320 task (10%), 0:41 elapsed, ~6:09 left, records=7``."""

    def __init__(
        self,
        total: int | None = None,
        desc: str = "",
        unit: str = "it",
        file: IO[str] | None = None,
        initial: int = 0,
        enabled: bool = True,
        steps: int = 10,
        min_interval: float = 1.0,
    ) -> None:
        self.total, self.desc, self.unit, self.n = total, desc, unit, initial
        self.steps, self.min_interval = max(1, steps), min_interval
        self.file = file if file is not None else sys.stderr
        self.enabled = enabled
        self.postfix = ""
        self.started = self._last_t = time.monotonic()
        self._last_n, self._last_step, self._closed = initial, self._step(), False
        if enabled:
            size = f" ({total} {unit})" if total else ""
            self._write(f"{desc}: started{size}")

    def _step(self) -> int:
        return int(self.steps * self.n / self.total) if self.total else 0

    def _write(self, text: str) -> None:
        print(text, file=self.file, flush=True)

    def _line(self) -> str:
        elapsed = time.monotonic() - self.started
        done = f"{self.n}/{self.total} {self.unit}" if self.total else f"{self.n} {self.unit}"
        parts = [f"{self.desc}: {done}"]
        if self.total:
            parts[0] += f" ({100 * self.n / self.total:.0f}%)"
        parts.append(f"{_clock(elapsed)} elapsed")
        if self.total and 0 < self.n < self.total:
            parts.append(f"~{_clock(elapsed / self.n * (self.total - self.n))} left")
        if self.postfix:
            parts.append(self.postfix)
        return ", ".join(parts)

    def refresh(self) -> None:
        """Print a line if another 1/`steps` of the total is done (and `min_interval` seconds have
        passed), or `LINE_EVERY_S` have passed since the last line."""
        if not self.enabled or self._closed or self.n == self._last_n:
            return
        if self.total and self.n >= self.total:  # the final line is close()'s
            return
        now, step = time.monotonic(), self._step()
        since = now - self._last_t
        if (step != self._last_step and since >= self.min_interval) or since >= LINE_EVERY_S:
            self._write(self._line())
            self._last_t, self._last_n, self._last_step = now, self.n, step

    def update(self, n: int = 1) -> None:
        self.n += n
        self.refresh()

    def set_postfix(self, ordered_dict: dict | None = None, refresh: bool = True, **kwargs: Any) -> None:
        items = {**(ordered_dict or {}), **kwargs}
        self.postfix = ", ".join(f"{k}={v}" for k, v in items.items())
        if refresh:
            self.refresh()

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = s
        if refresh:
            self.refresh()

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        self.desc = desc or ""

    def close(self) -> None:
        """The final line (what was done, in how long); once."""
        if self.enabled and not self._closed:
            self._write(self._line().replace(" elapsed", ""))
        self._closed = True

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    *,
    file: IO[str] | None = None,
    initial: int = 0,
    leave: bool = True,
    enabled: bool = True,
    steps: int = 10,
    min_interval: float = 1.0,
) -> Any:
    """A progress display on `file` (default stderr): tqdm on a terminal, `LineProgress`
    otherwise (a line per 1/`steps` of `total`); silent (a disabled `LineProgress`) when `enabled`
    is False or ``CM_GYM_PROGRESS=0``."""
    stream = file if file is not None else sys.stderr
    enabled = enabled and progress_enabled()
    isatty = getattr(stream, "isatty", None)
    if enabled and callable(isatty) and isatty():
        from tqdm import tqdm

        return tqdm(
            total=total, desc=desc, unit=unit, file=stream, initial=initial, leave=leave, dynamic_ncols=True
        )
    return LineProgress(
        total,
        desc,
        unit,
        file=stream,
        initial=initial,
        enabled=enabled,
        steps=steps,
        min_interval=min_interval,
    )


class PhaseBar:
    """A progress bar per protocol phase (build tasks, selector seeds, evaluation); called as
    ``bar(phase, done, total)``. On a terminal a tqdm bar, piped a line per tenth of the phase
    (so one line per selector seed), via `progress_bar`."""

    def __init__(self, enabled: bool) -> None:
        self.enabled, self.bar, self.phase = enabled, None, ""

    def __call__(self, phase: str, i: int, n: int) -> None:
        if not self.enabled:
            return
        if phase != self.phase:
            self.close()
            unit = "task" if phase == "build" else "seed" if phase == "train" else "run"
            steps = n if phase == "train" else 10  # piped: one line per selector seed
            self.phase, self.bar = phase, progress_bar(n, phase, unit, steps=steps, min_interval=0.0)
        if self.bar is not None:
            self.bar.n = min(i, n)  # i = units done so far
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
