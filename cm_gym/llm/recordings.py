"""Published real LLM outputs on the shared benchmark subsets (``<data root>/llm-outputs``).

One reader for everything that uses them: the recorded LLM (real drafts) and the error analysis
(real mistakes against the simulator's). Three files, one per benchmark kind (their README says
where each row comes from):

* ``spider/predictions.jsonl`` — per Spider dev question: ``db_id``, ``question``, ``gold`` and, per
  system (``gpt-4-zero-shot``, ``codex-din-sql``, …), the predicted SQL and this folder's execution
  verdict (``correct`` / ``wrong`` / ``error``). Key: ``"<db_id>\\x1f<question>"`` (`spider_key`).
* ``dafny/outputs.jsonl`` — per DafnyBench task file and model: the raw model text (``llm_output``)
  and upstream's ``success_on_attempt`` (``"1"``…``"10"``, ``"failed"``, ``"0"``). Key: the task's
  file name (``X.dfy``, as in ``dafny/hints_removed``).
* ``humaneval/samples.jsonl`` — per HumanEval problem and system: the completion (``prompt +
  completion`` is the program) and ``passed_here``. Key: ``"HumanEval/<n>"``.

The text is kept verbatim: a consumer parses it with the domain's own parser. Nothing here is ever
copied into the package. A missing folder or file, or a malformed line, is one `RecordingsError`
naming the file (and line).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cm_gym.core import boundedjson
from cm_gym.core.paths import DataFileError, data_root, read_data_file
from cm_gym.core.types import CmGymError

KINDS: tuple[str, ...] = ("spider", "dafny", "humaneval")
FILES: Mapping[str, str] = {
    "spider": "spider/predictions.jsonl",
    "dafny": "dafny/outputs.jsonl",
    "humaneval": "humaneval/samples.jsonl",
}
MAX_FILE_BYTES = 256 * 1024 * 1024
#: one row (a Spider question with every system's prediction is a few KiB) and its nesting
MAX_LINE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 16


class RecordingsError(CmGymError):
    """The recorded LLM outputs cannot be read (missing folder or file, malformed line)."""


@dataclass(frozen=True)
class RecordedOutput:
    """One system's published final answer to one task, verbatim.

    `verdict` is what the data folder says of it: Spider ``correct``/``wrong``/``error`` (executed
    there), HumanEval ``pass``/``fail`` (``passed_here``), Dafny upstream's ``success_on_attempt``
    string (not re-verified). `gold` is the Spider gold query (None elsewhere)."""

    kind: str
    key: str
    system: str
    text: str
    verdict: str
    gold: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def spider_key(db_id: str, question: str) -> str:
    """The key of a Spider question: its database and its question text."""
    return f"{db_id}\x1f{question}"


@dataclass(frozen=True)
class Recordings:
    """The recorded outputs of one benchmark kind: ``rows[(key, system)]``."""

    kind: str
    path: Path
    rows: Mapping[tuple[str, str], RecordedOutput]

    @property
    def systems(self) -> tuple[str, ...]:
        """The systems with at least one output, sorted."""
        return tuple(sorted({system for _key, system in self.rows}))

    @property
    def keys(self) -> tuple[str, ...]:
        """The task keys with at least one output, in file order."""
        return tuple(dict.fromkeys(key for key, _system in self.rows))

    def get(self, key: str, system: str) -> RecordedOutput | None:
        """The output of `system` for `key`, or None when it published none."""
        return self.rows.get((key, system))

    def for_system(self, system: str) -> dict[str, RecordedOutput]:
        """Every output of `system`, by key. An unknown system is a `RecordingsError`."""
        if system not in self.systems:
            raise RecordingsError(
                f"no recorded outputs of system {system!r} in {self.path}; known: {', '.join(self.systems)}"
            )
        return {key: row for (key, sys_), row in self.rows.items() if sys_ == system}

    def __iter__(self) -> Iterator[RecordedOutput]:
        return iter(self.rows.values())

    def __len__(self) -> int:
        return len(self.rows)


def recordings_root(root: str | Path | None = None) -> Path:
    """``root`` or ``<data root>/llm-outputs``."""
    return Path(root) if root is not None else data_root() / "llm-outputs"


def load_recordings(kind: str, root: str | Path | None = None) -> Recordings:
    """The recorded outputs of benchmark `kind` (one of `KINDS`) under `root` (default
    ``<data root>/llm-outputs``). Cached per file (path, size, mtime)."""
    if kind not in FILES:
        raise RecordingsError(f"unknown recording kind {kind!r}; use one of {', '.join(KINDS)}")
    path = recordings_root(root) / FILES[kind]
    try:
        st = path.stat()
    except OSError:
        raise RecordingsError(
            f"recorded LLM outputs not found: {path} (set CM_GYM_DATA to the folder holding llm-outputs/)"
        ) from None
    return _load(kind, str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _load(kind: str, path_text: str, _size: int, _mtime: int) -> Recordings:
    path = Path(path_text)
    try:
        text = read_data_file(path, MAX_FILE_BYTES)
    except DataFileError as exc:
        raise RecordingsError(str(exc)) from None
    rows: dict[tuple[str, str], RecordedOutput] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:  # bounded: a line nested 200,000 deep is this error, not a RecursionError
            obj = boundedjson.loads(
                line, max_bytes=MAX_LINE_BYTES, max_depth=MAX_DEPTH, what="the row", expect=dict
            )
            for out in _ROW_READERS[kind](obj):
                rows[(out.key, out.system)] = out
        except (ValueError, KeyError, TypeError) as exc:
            raise RecordingsError(f"{path}: line {lineno}: malformed row ({exc})") from None
    if not rows:
        raise RecordingsError(f"{path}: no recorded outputs")
    return Recordings(kind, path, rows)


def _text(obj: Mapping[str, Any], name: str) -> str:
    value = obj[name]
    if not isinstance(value, str):
        raise TypeError(f"{name!r} is not a string")
    return value


def _spider_rows(obj: Mapping[str, Any]) -> Iterator[RecordedOutput]:
    key = spider_key(_text(obj, "db_id"), _text(obj, "question"))
    predictions, execution = obj["predictions"], obj.get("execution", {})
    if not isinstance(predictions, dict) or not isinstance(execution, dict):
        raise TypeError("'predictions' / 'execution' are not objects")
    for system, sql in predictions.items():
        if not isinstance(sql, str):
            raise TypeError(f"prediction of {system!r} is not a string")
        yield RecordedOutput(
            "spider", key, str(system), sql, str(execution.get(system, "")), gold=_text(obj, "gold")
        )


def _dafny_rows(obj: Mapping[str, Any]) -> Iterator[RecordedOutput]:
    yield RecordedOutput(
        "dafny",
        _text(obj, "task"),
        _text(obj, "model"),
        _text(obj, "llm_output"),
        str(obj["success_on_attempt"]),
    )


def _humaneval_rows(obj: Mapping[str, Any]) -> Iterator[RecordedOutput]:
    yield RecordedOutput(
        "humaneval",
        _text(obj, "task_id"),
        _text(obj, "model"),
        _text(obj, "completion"),
        "pass" if obj.get("passed_here") is True else "fail",
        extra={"is_solved_upstream": bool(obj.get("is_solved_upstream"))},
    )


_ROW_READERS = {"spider": _spider_rows, "dafny": _dafny_rows, "humaneval": _humaneval_rows}
