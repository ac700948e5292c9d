"""The API key of `cm-gym serve-llm`: where it comes from, what it may be, how it is compared.

Sources, first match wins: ``--api-key-file FILE`` (the file's bytes, one trailing newline
dropped), ``--api-key KEY`` (still accepted, with a warning: a command line is readable by every
local user through the process list, ``/proc/<pid>/cmdline``), ``$CM_GYM_API_KEY`` (the
environment of a process is readable only by its own user), and the older
``$CM_GYM_SERVER_API_KEY``. Giving both ``--api-key`` and ``--api-key-file`` is an error.

A key is a byte string: any bytes an HTTP header value can carry — UTF-8 or not, Latin-1 or not —
so it is never re-encoded on the way to the comparison. Refused, each with one `APIKeyError`
line: an empty key (it would silently serve without authentication), NUL / CR / LF (no header can
carry them), blanks at either end (HTTP strips them, so the key could never match), and more than
`MAX_KEY_BYTES`. The server compares the raw bytes of the ``Authorization`` header with
``Bearer <key>`` by `hmac.compare_digest` (constant time in the length of the header it is given).
"""

from __future__ import annotations

import hmac
import logging
import os
import stat
from pathlib import Path

from cm_gym.core.paths import DataFileError, open_regular_file
from cm_gym.core.types import CmGymError

logger = logging.getLogger(__name__)

MAX_KEY_BYTES = 4096
ENV = "CM_GYM_API_KEY"
LEGACY_ENV = "CM_GYM_SERVER_API_KEY"
CLI_WARNING = (
    "--api-key puts the key on the command line, which every local user can read in the process list; "
    "use --api-key-file FILE or $CM_GYM_API_KEY instead"
)


class APIKeyError(CmGymError):
    """An API key that cannot be used (see module doc)."""


def key_bytes(key: str | bytes, source: str = "the API key") -> bytes:
    """`key` as the bytes a client sends (a str is UTF-8, undecodable argv bytes kept as they
    were), checked (module doc)."""
    raw = key.encode("utf-8", "surrogateescape") if isinstance(key, str) else bytes(key)
    if not raw:
        raise APIKeyError(f"{source} is empty: an empty key would serve without authentication")
    if len(raw) > MAX_KEY_BYTES:
        raise APIKeyError(f"{source} is longer than {MAX_KEY_BYTES} bytes")
    if any(c in raw for c in b"\x00\r\n"):
        raise APIKeyError(f"{source} holds a NUL, CR or LF byte, which no HTTP header can carry")
    if raw[:1] in (b" ", b"\t") or raw[-1:] in (b" ", b"\t"):
        raise APIKeyError(f"{source} starts or ends with a blank, which HTTP strips from a header")
    return raw


def read_key_file(path: str | Path) -> bytes:
    """The key stored in `path` (a regular file; one trailing newline dropped)."""
    try:
        with open_regular_file(path) as fh:
            mode = os.fstat(fh.fileno()).st_mode
            data = fh.read(MAX_KEY_BYTES + 3)
    except DataFileError as exc:
        raise APIKeyError(f"--api-key-file: {exc}") from None
    except OSError as exc:
        raise APIKeyError(f"--api-key-file {path}: cannot read ({exc.strerror or exc})") from None
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        logger.warning("API key file %s is readable by other users (chmod 600 %s)", path, path)
    if data.endswith(b"\r\n"):
        data = data[:-2]
    elif data.endswith(b"\n"):
        data = data[:-1]
    return key_bytes(data, f"the key in {path}")


def _env_bytes(name: str) -> bytes | None:
    if os.supports_bytes_environ:
        return os.environb.get(name.encode())
    value = os.environ.get(name)
    return None if value is None else value.encode("utf-8", "surrogateescape")


def resolve_key(cli_key: str | None = None, key_file: str | Path | None = None) -> bytes | None:
    """The server's key from the command line or the environment (module doc); None = no key."""
    if cli_key is not None and key_file is not None:
        raise APIKeyError("give the key once: --api-key-file FILE or --api-key KEY, not both")
    if key_file is not None:
        return read_key_file(key_file)
    if cli_key is not None:
        logger.warning(CLI_WARNING)
        return key_bytes(cli_key, "--api-key")
    for name in (ENV, LEGACY_ENV):
        value = _env_bytes(name)
        if value is not None:
            return key_bytes(value, f"${name}")
    return None


def authorized(header: str | bytes, key: bytes) -> bool:
    """Does the ``Authorization`` header value (as parsed: Latin-1 text, or raw bytes) carry
    ``Bearer <key>``? Constant-time comparison of the raw bytes."""
    given = header.encode("latin-1") if isinstance(header, str) else header
    return hmac.compare_digest(given, b"Bearer " + key)
