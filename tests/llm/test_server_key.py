"""The server's API key (issue 27): read from a file or the environment so it never shows in the
process list (``--api-key`` still works, with a warning); an empty or unusable key refused in one
line; any byte string a header can carry accepted — UTF-8, non-Latin-1, not text at all — and
compared as bytes, in constant time, with no traceback on any request."""

from __future__ import annotations

import http.client
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cm_gym.cli import main
from cm_gym.core.types import Task
from cm_gym.llm.apikey import APIKeyError, authorized, resolve_key
from cm_gym.llm.server import LLMServer, serve_in_thread
from cm_gym.llm.simulated import SimulatedLLM

HERE = Path(__file__).parent
KEYS = {
    "ascii": b"s3cret",
    "utf8_non_latin1": "clé-ключ-🔑".encode(),
    "latin1_bytes": b"caf\xe9",
    "binary": bytes(range(0x21, 0x7F)) + b"\x80\xff\xfe\x01\x7f",
}


@pytest.fixture(params=sorted(KEYS))
def keyed(request: pytest.FixtureRequest, toy_lookup: dict[str, Task]) -> Iterator[tuple[LLMServer, bytes]]:
    key = KEYS[request.param]
    srv, _ = serve_in_thread(SimulatedLLM(seed=3, task_lookup=toy_lookup), model_name="probe", api_key=key)
    yield srv, key
    srv.shutdown()
    srv.server_close()


def _get(server: LLMServer, auth: bytes | None) -> int:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.putrequest("GET", "/v1/models")
        if auth is not None:
            conn.putheader("Authorization", auth)  # raw bytes, as a client sends them
        conn.endheaders()
        return conn.getresponse().status
    finally:
        conn.close()


def test_any_byte_key_is_compared_as_bytes(keyed: tuple[LLMServer, bytes]) -> None:
    server, key = keyed
    assert _get(server, b"Bearer " + key) == 200
    for wrong in (None, b"Bearer " + key[:-1], b"Bearer " + key + b"x", b"bearer " + key, key,
                  b"Bearer " + key.decode("latin-1").encode("utf-8"), b"Bearer \xff" * 3):  # fmt: skip
        if wrong != b"Bearer " + key:
            assert _get(server, wrong) == 401, wrong
    assert _get(server, b"Bearer " + key) == 200  # still serving: no request raised


@pytest.mark.parametrize(
    ("key", "why"),
    [("", "empty"), (b"", "empty"), ("a\nb", "CR or LF"), (b"a\x00b", "NUL"), (" key", "blank"),
     ("key\t", "blank"), ("k" * 5000, "longer than")],
)  # fmt: skip
def test_unusable_keys_are_refused_in_one_line(key: str | bytes, why: str) -> None:
    with pytest.raises(APIKeyError, match=why):
        LLMServer(("127.0.0.1", 0), SimulatedLLM(seed=1), api_key=key)


def test_key_sources_file_env_and_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("CM_GYM_API_KEY", raising=False)
    monkeypatch.delenv("CM_GYM_SERVER_API_KEY", raising=False)
    assert resolve_key() is None
    keyfile = tmp_path / "key"
    keyfile.write_bytes(KEYS["binary"] + b"\n")
    keyfile.chmod(0o600)
    assert resolve_key(key_file=keyfile) == KEYS["binary"]  # one trailing newline dropped
    os.environb[b"CM_GYM_API_KEY"] = KEYS["latin1_bytes"]
    try:
        assert resolve_key() == KEYS["latin1_bytes"]
        with caplog.at_level(logging.WARNING, logger="cm_gym.llm.apikey"):
            assert resolve_key("clé") == "clé".encode()
        assert "process list" in caplog.text
    finally:
        del os.environb[b"CM_GYM_API_KEY"]
    monkeypatch.setenv("CM_GYM_SERVER_API_KEY", "legacy")
    assert resolve_key() == b"legacy"
    for bad, why in ((tmp_path / "missing", "cannot read"), (tmp_path, "not a regular file")):
        with pytest.raises(APIKeyError, match=why):
            resolve_key(key_file=bad)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(APIKeyError, match="not a regular file"):
        resolve_key(key_file=fifo)  # refused without blocking on the FIFO
    (tmp_path / "empty").write_bytes(b"\n")
    with pytest.raises(APIKeyError, match="empty"):
        resolve_key(key_file=tmp_path / "empty")
    with pytest.raises(APIKeyError, match="not both"):
        resolve_key("a", keyfile)
    assert authorized("Bearer " + "clé".encode().decode("latin-1"), "clé".encode())


def test_serve_llm_refuses_an_empty_key_in_one_line(capsys: Any) -> None:
    assert main(["serve-llm", "--port", "0", "--api-key", ""]) == 2
    err = capsys.readouterr().err.strip()
    assert "empty" in err and "\n" not in err.split("cm-gym: error:")[-1]


# The child presses "Ctrl-C" on itself only if SIGINT reaches it: a parent that runs with SIGINT
# ignored or blocked (a CI runner, a library thread) passes that on through exec, so the child
# restores the default first, as an interactive shell would have it.
_SERVE = (
    "import signal; signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT]); "
    "signal.signal(signal.SIGINT, signal.default_int_handler); "
    "import sys; sys.path.insert(0, {here!r}); from conftest import ensure_toy_registered; "
    "ensure_toy_registered(); from cm_gym.cli import main; "
    "sys.exit(main(['serve-llm', '--port', '0', '--benchmark', 'LLMTestToy', '--api-key-file', {key!r}]))"
)


def test_a_key_from_a_file_never_reaches_the_process_list(tmp_path: Path) -> None:
    key = KEYS["utf8_non_latin1"]
    keyfile = tmp_path / "key"
    keyfile.write_bytes(key)
    keyfile.chmod(0o600)
    proc = subprocess.Popen([sys.executable, "-u", "-c", _SERVE.format(here=str(HERE), key=str(keyfile))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().decode()
        assert first.startswith("serving"), first + (proc.stderr.read().decode() if proc.poll() else "")
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert key not in cmdline and str(keyfile).encode() in cmdline
        port = int(first.split(" at ")[1].split(" for ")[0].rsplit(":", 1)[1].split("/")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.putrequest("GET", "/v1/models")
        conn.putheader("Authorization", b"Bearer " + key)
        conn.endheaders()
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
