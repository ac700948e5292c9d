"""Snapshot manifests (issue 27): sealed when written, read with size and depth caps, every field
checked, one `StoreError` line for anything else — on open and in `cm-gym memory verify`, never a
RecursionError; manifests written before the seal (format 1) still open (the migration rule)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cm_gym.cli import main
from cm_gym.memory.errors import StoreError
from cm_gym.memory.manifest import LEGACY_FORMATS, MANIFEST_FORMAT, SEAL, manifest_digest, read_manifest, seal
from cm_gym.memory.snapshot import FrozenStore, manifest_path
from cm_gym.memory.store import RecordStore


@pytest.fixture
def snapshot(store: RecordStore, make_record: Any, tmp_path: Path) -> Path:
    for _ in range(3):
        store.add(make_record())
    store.freeze(tmp_path / "snap.sqlite")
    (tmp_path / "good.json").write_text(manifest_path(tmp_path / "snap.sqlite").read_text())
    return tmp_path / "snap.sqlite"


def _legacy(manifest: dict[str, Any]) -> dict[str, Any]:
    """What main wrote before the seal: format 1, no manifest_sha256."""
    return {**{k: v for k, v in manifest.items() if k != SEAL}, "format": LEGACY_FORMATS[0]}


def test_freeze_writes_a_sealed_manifest_and_old_ones_still_open(snapshot: Path, capsys: Any) -> None:
    m = json.loads(manifest_path(snapshot).read_text())
    assert m["format"] == MANIFEST_FORMAT and m[SEAL] == manifest_digest(m)
    assert main(["memory", "verify", str(snapshot)]) == 0
    assert "manifest: sealed" in capsys.readouterr().out
    manifest_path(snapshot).write_text(json.dumps(_legacy(m), indent=2))
    assert len(FrozenStore.open(snapshot)) == 3
    assert main(["memory", "verify", str(snapshot)]) == 0
    assert "format 1, unsealed" in capsys.readouterr().out


def _deep(n: int) -> str:
    return '{"format": "cm_gym.memory.snapshot/2", "x": ' + "[" * n + "]" * n + "}"


HOSTILE = {
    "deep_list": _deep(200_000),
    "deep_object": '{"a": ' * 100_000 + "1" + "}" * 100_000,
    "huge": json.dumps({"format": MANIFEST_FORMAT, "pad": "x" * (2 << 20)}),
    "not_json": "{format: 2",
    "not_utf8": b"\xff\xfe{}",
    "not_an_object": "[1, 2, 3]",
    "unknown_format": json.dumps({"format": "cm_gym.memory.snapshot/99", "sha256": "0" * 64}),
    "edited": "EDIT",
    "bad_sha": "SHA",
    "negative_records": "RECORDS",
    "fifo": None,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_manifest_is_one_line_on_open_and_in_verify(snapshot: Path, name: str, capsys: Any) -> None:
    mpath = manifest_path(snapshot)
    good = json.loads(mpath.read_text())
    content = HOSTILE[name]
    if content is None:
        mpath.unlink()
        os.mkfifo(mpath)
    elif content == "EDIT":
        mpath.write_text(json.dumps({**good, "records": 2}))  # not resealed
    elif content == "SHA":
        mpath.write_text(json.dumps(seal({**good, "sha256": "../../etc/passwd"})))
    elif content == "RECORDS":
        mpath.write_text(json.dumps(seal({**good, "records": -1})))
    else:
        mpath.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(StoreError):
        FrozenStore.open(snapshot)
    assert main(["memory", "verify", str(snapshot)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("cm-gym: error:") and "\n" not in err and "Recursion" not in err, err


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
        max_leaves=30,
    ),
    sealed=st.booleans(),
)
def test_property_any_manifest_is_read_or_refused_in_one_line(
    snapshot: Path, value: Any, sealed: bool
) -> None:
    good = json.loads((snapshot.parent / "good.json").read_text())
    doc = {**good, "extra": value} if isinstance(value, dict) and sealed else value
    if isinstance(doc, dict) and sealed:
        doc = seal(doc)
    manifest_path(snapshot).write_text(json.dumps(doc))
    try:
        read_manifest(snapshot)
    except StoreError as exc:
        assert "\n" not in str(exc)
