"""A frozen snapshot's manifest: written sealed, read with caps, checked field by field.

The manifest (``<snapshot>.manifest.json``) says what the snapshot serves: the sha256, size and
record count of the SQLite file, its domain and embedder, and — when it has one — every parameter
of its ANN sidecar (file name, sha256, size, rows, dimension, layout digest, and the index
``params``: kind, ``nlist``, ``seed``, library). Format 2 (`MANIFEST_FORMAT`) is *sealed*:
``manifest_sha256`` is the sha256 of the canonical JSON of every other field, so an edited
parameter (an ``nlist`` changed by hand) no longer matches and the snapshot is refused.

Reading never trusts the file: a regular file only, at most `MAX_MANIFEST_BYTES`, JSON nested at
most `MAX_MANIFEST_DEPTH` levels (checked before parsing, so a deeply nested manifest is one
`StoreError`, not a `RecursionError`), every field of the expected type and range, the ANN entry's
parameters within what an index can be built with. Every problem is one `StoreError` line.

Migration rule: manifests of format 1 (``cm_gym.memory.snapshot/1``, written before the seal)
have no ``manifest_sha256``; they still open, after the same field checks, and `memory verify`
reports them as unsealed ("freeze again to seal it"). Nothing rewrites an old manifest in place.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from cm_gym.core import boundedjson
from cm_gym.core.paths import DataFileError, read_data_file
from cm_gym.memory.errors import StoreError
from cm_gym.memory.schema import manifest_path

MANIFEST_FORMAT = "cm_gym.memory.snapshot/2"
LEGACY_FORMATS = ("cm_gym.memory.snapshot/1",)
MAX_MANIFEST_BYTES = 1 << 20
MAX_MANIFEST_DEPTH = 8
SEAL = "manifest_sha256"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_INTS = {"bytes": (0, 1 << 62), "records": (0, 1 << 40), "dim": (1, 1 << 16), "capacity": (0, 1 << 40),
         "schema_version": (0, 1 << 16), "processed_tasks": (0, 1 << 40)}  # fmt: skip
_STRS = ("domain", "benchmark", "embedder_id", "created", "source")


def manifest_digest(manifest: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of every field but the seal."""
    body = {k: v for k, v in manifest.items() if k != SEAL}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def seal(manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` in the current format, with its seal."""
    out = {**manifest, "format": MANIFEST_FORMAT}
    out.pop(SEAL, None)
    out[SEAL] = manifest_digest(out)
    return out


def is_sealed(manifest: dict[str, Any]) -> bool:
    """Written in the current (sealed) format, rather than migrated from format 1."""
    return manifest.get("format") == MANIFEST_FORMAT


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The checked manifest of the snapshot at `path` (see module doc); `StoreError` otherwise."""
    mpath = manifest_path(path)
    if not mpath.exists():
        raise StoreError(f"{path} has no manifest ({mpath.name}); it is not a frozen snapshot")
    try:
        text = read_data_file(mpath, MAX_MANIFEST_BYTES)
    except DataFileError as exc:
        raise StoreError(
            f"{mpath} is not a readable manifest ({str(exc).removeprefix(str(mpath) + ': ')})"
        ) from None
    try:
        manifest = boundedjson.loads(
            text, max_bytes=MAX_MANIFEST_BYTES, max_depth=MAX_MANIFEST_DEPTH, what="it"
        )
    except boundedjson.BoundedJSONError as exc:
        raise StoreError(f"{mpath} is not a readable manifest: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") not in (MANIFEST_FORMAT, *LEGACY_FORMATS):
        raise StoreError(f"{mpath} is not a cm_gym snapshot manifest")
    if is_sealed(manifest) and manifest.get(SEAL) != manifest_digest(manifest):
        raise StoreError(
            f"{mpath} was modified after the snapshot was frozen ({SEAL} does not match its fields); "
            "restore it or freeze the store again"
        )
    check_fields(manifest, str(mpath))
    if "ann" in manifest:
        check_ann_entry(manifest["ann"], manifest, Path(path), str(mpath))
    return manifest


def check_fields(manifest: dict[str, Any], where: str) -> None:
    """Types and ranges of the top-level fields (`StoreError` naming the first bad one)."""
    if not isinstance(manifest.get("sha256"), str) or not _HEX64.fullmatch(manifest["sha256"]):
        raise StoreError(f"{where}: 'sha256' must be 64 lower-case hex digits")
    for key, (lo, hi) in _INTS.items():
        value = manifest.get(key)
        if value is not None and not (type(value) is int and lo <= value <= hi):
            raise StoreError(f"{where}: {key!r} must be an integer in [{lo}, {hi}], not {str(value)[:40]!r}")
    for key in _STRS:
        value = manifest.get(key)
        if value is not None and not (isinstance(value, str) and len(value) <= 4096):
            raise StoreError(f"{where}: {key!r} must be a string")


def check_ann_entry(entry: Any, manifest: dict[str, Any], snapshot: Path, where: str) -> None:
    """Every parameter of the ANN sidecar entry, against the snapshot it belongs to: a value no
    index could have been built with is refused here, before faiss ever sees it."""
    from cm_gym.memory import ann as ann_mod

    def bad(what: str) -> StoreError:
        return StoreError(f"{where}: the ANN entry's {what}")

    if not isinstance(entry, dict) or set(entry) != {
        "file",
        "sha256",
        "bytes",
        "records",
        "dim",
        "digest",
        "params",
    }:
        raise bad("fields are not file, sha256, bytes, records, dim, digest and params")
    if entry["file"] != snapshot.name + ".ann":
        raise bad(f"file {str(entry['file'])[:80]!r} is not {snapshot.name}.ann")
    if not isinstance(entry["sha256"], str) or not _HEX64.fullmatch(entry["sha256"]):
        raise bad("sha256 is not 64 lower-case hex digits")
    records = manifest.get("records")
    if type(entry["records"]) is not int or entry["records"] != records:
        raise bad(f"records {str(entry['records'])[:20]} differ from the snapshot's {records}")
    if type(entry["bytes"]) is not int or not 0 < entry["bytes"] <= 1 << 40:
        raise bad("bytes is not a positive size")
    if (
        type(entry["dim"]) is not int
        or entry["dim"] != manifest.get("dim", entry["dim"])
        or not 0 < entry["dim"] <= 1 << 16
    ):
        raise bad(f"dim {str(entry['dim'])[:20]} differs from the snapshot's {manifest.get('dim')}")
    if not isinstance(entry["digest"], str) or not 0 < len(entry["digest"]) <= 128:
        raise bad("layout digest is not a short string")
    params = entry["params"]
    if not isinstance(params, dict) or set(params) != {"kind", "nlist", "seed", "library"}:
        raise bad("params are not kind, nlist, seed and library")
    if params["kind"] != ann_mod.INDEX_KIND:
        raise bad(f"kind {str(params['kind'])[:60]!r} is not {ann_mod.INDEX_KIND}")
    if type(params["nlist"]) is not int or not 1 <= params["nlist"] <= max(1, records or 0):
        raise bad(f"nlist {str(params['nlist'])[:20]} is not in [1, {records}]")
    if type(params["seed"]) is not int or not 0 <= params["seed"] < 1 << 31:
        raise bad(f"seed {str(params['seed'])[:20]} is not in [0, 2**31)")
    if not isinstance(params["library"], str) or len(params["library"]) > 200:
        raise bad("library is not a short string")
