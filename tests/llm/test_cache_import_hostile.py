"""`cm-gym cache import` never touches what it refuses, and reads its input as untrusted (issue 27).

Targets: a frozen memory snapshot, a live memory store, a foreign SQLite file, a folder, a FIFO —
each refused in one line with its bytes unchanged and no side file created (`memory verify`
still passes on the snapshot). Inputs: FIFOs, devices and links to them, a gzip that expands to
one huge line, deep nesting, binary garbage, oversized totals — each one `CacheCorruptError` line
(fuzzed with Hypothesis), never a hang, a MemoryError or a RecursionError."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cm_gym.cli import main
from cm_gym.core.types import Task
from cm_gym.llm.base import DRAFT_ACTION
from cm_gym.llm.cache import ResponseCache
from cm_gym.llm.cache_io import FORMAT, MAX_LINE_BYTES, export_cache, merge_export, read_export
from cm_gym.llm.cached import CachedLLM
from cm_gym.llm.errors import CacheCorruptError, CacheError
from cm_gym.llm.simulated import SimulatedLLM
from cm_gym.memory.schema import manifest_path
from cm_gym.memory.store import RecordStore


@pytest.fixture
def export(tmp_path: Path, toy: list[Task]) -> Path:
    llm = CachedLLM(SimulatedLLM(seed=1), ResponseCache(tmp_path / "src.sqlite", "rw"))
    llm.complete(DRAFT_ACTION, {"task": toy[0]})
    out = tmp_path / "x.jsonl"
    assert export_cache(llm.cache, out) == 1
    llm.cache.close()
    return out


def _state(folder: Path) -> dict[str, str]:
    """Every file of `folder` and its sha256 (side files included)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()
    }


def _snapshot(folder: Path, task: Task | None = None) -> Path:
    folder.mkdir()
    with RecordStore(folder / "work.sqlite", domain="memtoy", benchmark="MEMTOY") as store:
        store.freeze(folder / "snap.sqlite")
    (folder / "work.sqlite").unlink()
    for side in ("-wal", "-shm"):
        Path(f"{folder / 'work.sqlite'}{side}").unlink(missing_ok=True)
    return folder / "snap.sqlite"


def _foreign(folder: Path) -> Path:
    folder.mkdir()
    with sqlite3.connect(folder / "other.sqlite") as conn:
        conn.execute("CREATE TABLE meta (key TEXT, value TEXT)")
        conn.execute("CREATE TABLE responses (key TEXT)")  # looks like one, is not
    return folder / "other.sqlite"


def _live_store(folder: Path) -> Path:
    folder.mkdir()
    RecordStore(folder / "store.sqlite", domain="memtoy", benchmark="MEMTOY").close()
    return folder / "store.sqlite"


def _text(folder: Path) -> Path:
    folder.mkdir()
    (folder / "notes.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00" * 84 + b"garbage" * 100)
    return folder / "notes.sqlite"


@pytest.mark.parametrize(
    "make", [_snapshot, _foreign, _live_store, _text], ids=lambda f: f.__name__.strip("_")
)
def test_a_target_that_is_not_a_response_cache_is_refused_untouched(
    tmp_path: Path, export: Path, make: Any, capsys: Any
) -> None:
    target = make(tmp_path / "target")
    before = _state(target.parent)
    assert main(["cache", "import", str(export), "--llm-cache", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not" in err and "it was not changed" in err, err
    assert _state(target.parent) == before  # no byte changed, no -wal / -shm / journal created
    if make is _snapshot:
        assert main(["memory", "verify", str(target)]) == 0
        assert manifest_path(target).exists()


def test_folders_fifos_and_devices_as_the_cache_are_one_line(
    tmp_path: Path, export: Path, capsys: Any
) -> None:
    fifo = tmp_path / "fifo.sqlite"
    os.mkfifo(fifo)
    for target, why in (
        (tmp_path, "is a folder"),
        (fifo, "not a regular file"),
        (Path("/dev/null"), "not a regular file"),
    ):
        with pytest.raises(CacheError, match=why):
            ResponseCache(target, "rw")
        assert main(["cache", "import", str(export), "--llm-cache", str(target)]) == 2
        assert why in capsys.readouterr().err


def test_the_input_is_read_before_the_target_is_opened(tmp_path: Path, capsys: Any) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    target = tmp_path / "new.sqlite"
    assert main(["cache", "import", str(bad), "--llm-cache", str(target)]) == 2
    assert "not JSON" in capsys.readouterr().err and not target.exists()


def _line_bomb(path: Path) -> None:
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(json.dumps({"format": FORMAT, "version": 1}).encode() + b"\n")
        chunk = b"x" * (1 << 20)
        for _ in range(MAX_LINE_BYTES // len(chunk) + 2):  # one line past the cap, ~17 KB of gzip
            fh.write(chunk)


def _deep(path: Path) -> None:
    path.write_text(
        json.dumps({"format": FORMAT, "version": 1}) + "\n" + "[" * 200_000 + "]" * 200_000 + "\n"
    )


def _deep_header(path: Path) -> None:
    path.write_text("{" * 100_000 + "\n")


def _binary(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 100)


def _not_utf8(path: Path) -> None:
    path.write_bytes(json.dumps({"format": FORMAT, "version": 1}).encode() + b"\n\xff\xfe\n")


def _huge_number(path: Path) -> None:
    path.write_text(json.dumps({"format": FORMAT, "version": 1}) + "\n" + "9" * 100_000 + "\n")


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _truncated_gzip(path: Path) -> None:
    path.write_bytes(gzip.compress(json.dumps({"format": FORMAT, "version": 1}).encode() + b"\n")[:-8])


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero_link(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _folder(path: Path) -> None:
    path.mkdir()


INPUTS = {
    "line_bomb.jsonl.gz": (_line_bomb, "longer than"),
    "deep.jsonl": (_deep, "nested deeper"),
    "deep_header.jsonl": (_deep_header, "nested deeper"),
    "binary.jsonl": (_binary, "not"),
    "not_utf8.jsonl": (_not_utf8, "not UTF-8"),
    "huge_number.jsonl": (_huge_number, "not JSON"),
    "empty.jsonl": (_empty, "no header line"),
    "truncated.jsonl.gz": (_truncated_gzip, "cannot read"),
    "fifo.jsonl": (_fifo, "not a regular file"),
    "zero.jsonl": (_dev_zero_link, "not a regular file"),
    "folder.jsonl": (_folder, "not a regular file"),
}


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_hostile_inputs_are_one_line_each(tmp_path: Path, name: str, capsys: Any) -> None:
    make, why = INPUTS[name]
    path = tmp_path / name
    make(path)
    with pytest.raises(CacheCorruptError, match=why):
        read_export(path)
    target = tmp_path / "cache.sqlite"
    assert main(["cache", "import", str(path), "--llm-cache", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("cm-gym: error:") and "\n" not in err and why in err
    assert not target.exists()


def test_the_total_size_is_capped(tmp_path: Path, export: Path) -> None:
    with pytest.raises(CacheCorruptError, match="more than 100 bytes"):
        read_export(export, max_bytes=100)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(st.binary(max_size=80), st.text(max_size=80).map(str.encode),
                                st.recursive(st.none() | st.integers() | st.text(max_size=5),
                                             lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
                                             max_leaves=20).map(lambda v: json.dumps(v).encode())),
                      max_size=6),
       gz=st.booleans())  # fmt: skip
def test_property_any_file_is_imported_or_refused_in_one_line(
    tmp_path: Path, lines: list[bytes], gz: bool
) -> None:
    data = b"\n".join([json.dumps({"format": FORMAT, "version": 1}).encode(), *lines]) + b"\n"
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(gzip.compress(data) if gz else data)
    try:
        read_export(path, allow_unverified=True)
    except CacheError as exc:
        assert "\n" not in str(exc)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**400), max_value=10**400) | st.floats()
    | st.text(max_size=6) | st.just("\ud800"),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=12,
)  # fmt: skip
_ENTRY = st.fixed_dictionaries(
    {"key": st.text(max_size=8) | st.just("\udfff"), "template": st.text(max_size=8)},
    optional={
        "value": st.fixed_dictionaries({"text": st.text(max_size=5) | st.just("\ud800")},
                                       optional={"prompt_tokens": _JSON, "completion_tokens": _JSON}),
        "request": _JSON | st.fixed_dictionaries({"identity": _JSON, "template": _JSON, "version": _JSON,
                                                  "messages": _JSON}),
        "created": _JSON,
    },
)  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(_ENTRY, min_size=1, max_size=4), unverified=st.booleans())
def test_property_entry_shaped_lines_are_imported_or_refused_in_one_line(
    tmp_path: Path, entries: list[dict], unverified: bool
) -> None:
    """Entries whose fields have any JSON type and value (huge integers, lone surrogates, pair
    lists as identities) are verified and stored, or refused with one `CacheError` line."""
    lines = [json.dumps(e) for e in entries]
    digest = hashlib.sha256(
        "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")
    ).hexdigest()
    text = "\n".join([json.dumps({"format": FORMAT, "version": 1}), *lines,
                      json.dumps({"end": True, "entries": len(lines), "sha256": digest})]) + "\n"  # fmt: skip
    path = tmp_path / "entries.jsonl"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    cache = ResponseCache(tmp_path / "c.sqlite", "rw")
    try:
        export = read_export(path, allow_unverified=unverified)
        merge_export(cache, export, skip_conflicts=True)
    except CacheError as exc:
        assert "\n" not in str(exc)
    finally:
        cache.close()
