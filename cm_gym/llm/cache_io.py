"""A response cache as a portable artefact: `cache_summary`, `export_cache`, `import_cache`.

The export format is JSON Lines (gzip-compressed when the file name ends in ``.gz``): a header
line ``{"format": "cm_gym.llm_cache_export", "version": 1}``, one line per entry ``{"key",
"template", "created", "value", "request"}`` (the request is the exact identity, template, version
and messages the key hashes), and a trailer ``{"end": true, "entries": N, "sha256": ...}`` over the
entry lines, so a truncated or edited file is detected.

Import reads the file as untrusted input: only a regular file (a FIFO, device, socket, folder or a
link to one is refused before a byte is read), streamed line by line with caps on a line
(`MAX_LINE_BYTES`), on the whole decompressed text (`MAX_IMPORT_BYTES`: a small gzip may expand
without end) and on a line's JSON nesting (`MAX_JSON_DEPTH`, checked before parsing); each refusal
is one `CacheCorruptError` line naming the file and line. It verifies everything before it writes
anything: the trailer, every reply's shape, and that every key is the hash of its request (entries
without a request — exported from a v1 cache — only with ``allow_unverified``). Only then is the
target opened, and only after a read-only look (`cache_db.inspect_cache_file`) has shown it is a
response cache — a memory snapshot or any other SQLite file is refused untouched. An entry whose
key is already cached with a *different* reply is a conflict: the import refuses them all, naming
them (`CacheConflictError`), unless ``skip_conflicts``. Everything new is then inserted in one
transaction: all or nothing.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from cm_gym.core import boundedjson
from cm_gym.core.paths import DataFileError, open_regular_file
from cm_gym.llm.cache import ResponseCache, check_value, decode_request, request_payload
from cm_gym.llm.errors import CacheConflictError, CacheCorruptError, CacheError

FORMAT = "cm_gym.llm_cache_export"
FORMAT_VERSION = 1
MAX_LINE_BYTES = 16 << 20
MAX_IMPORT_BYTES = 1 << 30
MAX_JSON_DEPTH = 32


def _open_text(path: Path, mode: str, gz: bool | None = None) -> IO[str]:
    if path.suffix == ".gz" if gz is None else gz:
        return gzip.open(path, mode + "t", encoding="utf-8")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8")


def cache_summary(cache: ResponseCache) -> dict[str, Any]:
    """Entries, size, tokens recorded, and counts per template and per model."""
    templates: Counter[str] = Counter()
    models: Counter[str] = Counter()
    entries = tokens = unverifiable = 0
    first = last = None
    for _key, template, value, created, blob in cache.rows():
        entries += 1
        templates[template] += 1
        try:
            reply = json.loads(value)
            tokens += int(reply.get("prompt_tokens", 0)) + int(reply.get("completion_tokens", 0))
        except (ValueError, TypeError, AttributeError):
            pass
        if blob is None:
            unverifiable += 1
            models["(unknown: no request stored)"] += 1
        else:
            try:
                models[str(decode_request(blob)[1]["identity"].get("model", "?"))] += 1
            except (zlib.error, ValueError, KeyError, TypeError, AttributeError):
                models["(unreadable request)"] += 1
        first = created if first is None else min(first, created)
        last = created if last is None else max(last, created)
    size = sum(p.stat().st_size for p in _files(cache.path))
    return {
        "path": str(cache.path),
        "bytes": size,
        "entries": entries,
        "tokens_recorded": tokens,
        "templates": dict(templates.most_common()),
        "models": dict(models.most_common()),
        "without_request": unverifiable,
        "first_created": first,
        "last_created": last,
    }


def _files(path: Path | None) -> list[Path]:
    if path is None:
        return []
    return [p for p in (path, Path(f"{path}-wal")) if p.exists()]


def export_cache(cache: ResponseCache, out: Path) -> int:
    """Write every entry of `cache` to `out` (see the module docstring); returns the count.
    The file is written next to `out` and renamed into place, so `out` is never half-written."""
    digest, count = hashlib.sha256(), 0
    tmp = out.with_name(out.name + ".part")
    try:
        with _open_text(tmp, "w", gz=out.suffix == ".gz") as fh:
            fh.write(json.dumps({"format": FORMAT, "version": FORMAT_VERSION}) + "\n")
            for key, template, value, created, blob in cache.rows():
                request = decode_request(blob)[1] if blob is not None else None
                line = json.dumps(
                    {
                        "key": key,
                        "template": template,
                        "created": created,
                        "value": json.loads(value),
                        "request": request,
                    },
                    sort_keys=True,
                    ensure_ascii=False,
                )
                digest.update(line.encode("utf-8") + b"\n")
                fh.write(line + "\n")
                count += 1
            fh.write(json.dumps({"end": True, "entries": count, "sha256": digest.hexdigest()}) + "\n")
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return count


@dataclass
class ImportReport:
    """What `import_cache` did: entries read, added, already present, conflicts (skipped)."""

    read: int = 0
    added: int = 0
    present: int = 0
    unverified: int = 0
    conflicts: list[str] = field(default_factory=list)


def _lines(path: Path, max_bytes: int) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of a regular file, gunzipped when it starts like a gzip stream,
    within the line and total caps (see module doc)."""
    try:
        raw: IO[bytes] = open_regular_file(path)
    except DataFileError as exc:
        raise CacheCorruptError(f"cannot import {exc}") from None
    with raw:
        gz = raw.peek(2)[:2] == b"\x1f\x8b" if hasattr(raw, "peek") else path.suffix == ".gz"
        fh: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw  # type: ignore[assignment]
        total = 0
        for lineno in itertools.count(1):
            line = fh.readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            total += len(line)
            if len(line) > MAX_LINE_BYTES:
                raise CacheCorruptError(f"{path}:{lineno}: a line longer than {MAX_LINE_BYTES:,} bytes")
            if total > max_bytes:
                raise CacheCorruptError(f"{path}: more than {max_bytes:,} bytes (decompressed)")
            yield lineno, line


def _json_line(path: Path, lineno: int, line: bytes) -> Any:
    try:
        return boundedjson.loads(line, max_bytes=MAX_LINE_BYTES + 1, max_depth=MAX_JSON_DEPTH,
                                 what=f"{path}:{lineno}")  # fmt: skip
    except boundedjson.BoundedJSONError as exc:
        raise CacheCorruptError(f"{exc} (not a cm_gym LLM cache export line)") from None


def _entries(path: Path, max_bytes: int = MAX_IMPORT_BYTES) -> Iterator[tuple[int, dict[str, Any]]]:
    """The entries of an export file, after checking header and trailer (count and sha256)."""
    digest, count, trailer = hashlib.sha256(), 0, None
    try:
        lines = _lines(path, max_bytes)
        first = next(lines, None)
        header = _json_line(path, 1, first[1]) if first is not None else None
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise CacheCorruptError(f"{path} is not a cm_gym LLM cache export (no header line)")
        if header.get("version") != FORMAT_VERSION:
            raise CacheCorruptError(
                f"{path}: export format v{header.get('version')} is not v{FORMAT_VERSION}"
            )
        for lineno, line in lines:
            if trailer is not None:
                raise CacheCorruptError(f"{path}:{lineno}: data after the end line")
            obj = _json_line(path, lineno, line)
            if isinstance(obj, dict) and obj.get("end") is True:
                trailer = obj
                continue
            digest.update(line.rstrip(b"\r\n") + b"\n")  # as exported ("\n"); a CRLF copy still checks
            count += 1
            yield lineno, obj
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise CacheCorruptError(f"cannot read {path}: {exc}") from None
    if trailer is None:
        raise CacheCorruptError(f"{path} is truncated: no end line (export it again)")
    if trailer.get("entries") != count or trailer.get("sha256") != digest.hexdigest():
        raise CacheCorruptError(f"{path}: entries or checksum differ from its end line (edited or damaged)")


def _row(
    path: Path, lineno: int, obj: Any, allow_unverified: bool
) -> tuple[str, str, str, float, bytes | None]:
    """One verified row for `ResponseCache.insert_rows`."""
    where = f"{path}:{lineno}"
    if (
        not isinstance(obj, dict)
        or not isinstance(obj.get("key"), str)
        or not isinstance(obj.get("template"), str)
    ):
        raise CacheCorruptError(f"{where}: an entry needs a string key and template")
    try:
        value = check_value(obj.get("value"))
    except ValueError as exc:
        raise CacheCorruptError(f"{where}: {exc}") from exc
    request, blob = obj.get("request"), None
    if request is None:
        if not allow_unverified:
            raise CacheError(
                f"{where}: entry has no request to verify its key against (exported from an old cache); "
                "pass --allow-unverified to import such entries"
            )
    else:
        try:
            payload = request_payload(
                request["identity"], request["template"], request["version"], request["messages"]
            )
        except (KeyError, TypeError, ValueError) as exc:  # ValueError: a lone surrogate, a bad pair list
            raise CacheCorruptError(f"{where}: malformed request ({type(exc).__name__})") from None
        if hashlib.sha256(payload).hexdigest() != obj["key"] or request["template"] != obj["template"]:
            raise CacheCorruptError(
                f"{where}: key {obj['key'][:12]} is not the hash of its request (edited?)"
            )
        blob = zlib.compress(payload)
    created = obj.get("created")
    try:
        stored = json.dumps(value, sort_keys=True, ensure_ascii=False)
        for text in (stored, obj["key"], obj["template"]):
            text.encode("utf-8")  # a lone surrogate (valid JSON escape) cannot be stored
        stamp = float(created) if isinstance(created, int | float) else 0.0
    except (ValueError, OverflowError) as exc:
        raise CacheCorruptError(f"{where}: a value that cannot be stored ({type(exc).__name__})") from None
    return obj["key"], obj["template"], stored, stamp, blob


@dataclass
class VerifiedExport:
    """An export file read and verified (`read_export`): its rows by key, and what was read."""

    path: Path
    rows: dict[str, tuple[str, str, str, float, bytes | None]]
    report: ImportReport


def read_export(
    path: Path, *, allow_unverified: bool = False, max_bytes: int = MAX_IMPORT_BYTES
) -> VerifiedExport:
    """Read and verify the whole export file `path` (module docstring); nothing is opened but it."""
    report = ImportReport()
    rows: dict[str, tuple[str, str, str, float, bytes | None]] = {}
    try:
        for lineno, obj in _entries(path, max_bytes):
            row = _row(path, lineno, obj, allow_unverified)
            report.read += 1
            report.unverified += row[4] is None
            if row[0] in rows:
                if json.loads(rows[row[0]][2])["text"] != json.loads(row[2])["text"]:
                    report.conflicts.append(
                        f"{row[0][:12]} ({row[1]}, twice in the file with different replies)"
                    )
                continue
            rows[row[0]] = row
    except MemoryError:
        rows.clear()
        raise CacheCorruptError(
            f"{path} is too large to verify in this process's memory; nothing was imported"
        ) from None
    return VerifiedExport(path, rows, report)


def merge_export(
    cache: ResponseCache, export: VerifiedExport, *, skip_conflicts: bool = False
) -> ImportReport:
    """Add a verified export's new rows to `cache`: conflicts refuse everything (unless
    `skip_conflicts`), the rest goes in one all-or-nothing transaction."""
    report, rows = export.report, dict(export.rows)
    held = cache.values_of(list(rows))
    for key, stored in held.items():
        if json.loads(stored)["text"] != json.loads(rows[key][2])["text"]:
            report.conflicts.append(f"{key[:12]} ({rows[key][1]})")
        else:
            report.present += 1
        del rows[key]
    if report.conflicts and not skip_conflicts:
        shown = ", ".join(report.conflicts[:5]) + (" ..." if len(report.conflicts) > 5 else "")
        raise CacheConflictError(
            f"{len(report.conflicts)} entr{'y' if len(report.conflicts) == 1 else 'ies'} of {export.path} "
            f"conflict with {cache.path} (same request, different reply): {shown}; nothing was imported "
            "(--skip-conflicts imports the others and keeps the cached replies)"
        )
    report.added = cache.insert_rows(rows.values()) if rows else 0
    return report


def import_cache(
    cache: ResponseCache, path: Path, *, skip_conflicts: bool = False, allow_unverified: bool = False
) -> ImportReport:
    """Merge the export file `path` into `cache` (module docstring: verify, refuse conflicts, then
    one all-or-nothing transaction)."""
    export = read_export(path, allow_unverified=allow_unverified)
    return merge_export(cache, export, skip_conflicts=skip_conflicts)
