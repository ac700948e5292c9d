"""Property-based fuzzing (Hypothesis) of every parser of untrusted LLM-layer text: the rendered
prompt parser the server runs on request bodies, the server's request heads (raw bytes on the
wire, and its own head bounds), and the LLM-reply parsers. Each must return or raise its one documented error, and round-trip what cm_gym writes.
Plus fixed hostile probes that made the old backtracking regexes run for seconds to minutes."""

from __future__ import annotations

import functools
import re
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cm_gym.llm._http import HTTPError, check_head
from cm_gym.llm.errors import PromptError
from cm_gym.llm.parsers import apply_edit, format_alternatives, parse_alternatives, parse_distil, parse_judge
from cm_gym.llm.parsers_mechanisms import parse_strategy
from cm_gym.llm.prompts import CHAT_TEMPLATES, parse_rendered, render
from cm_gym.llm.server import LLMServer, serve_in_thread
from cm_gym.llm.simulated import SimulatedLLM

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# printable text without '<' (the tag character: with it a field may contain a separator, and
# parse_rendered may then refuse the messages, which is allowed; without it it must succeed)
plain = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="<"), max_size=300)
anything = st.text(st.characters(blacklist_categories=("Cs",)), max_size=400)


@FUZZ
@given(name=st.sampled_from(sorted(CHAT_TEMPLATES)), data=st.data())
def test_rendered_prompts_parse_back_exactly(name: str, data: Any) -> None:
    template = CHAT_TEMPLATES[name]
    values = {f: data.draw(plain, label=f) for f in template.field_names}
    rendered = render(name, values)
    parsed_name, fields = parse_rendered(rendered.messages)
    assert parsed_name == name
    assert fields == rendered.fields


@FUZZ
@given(name=st.sampled_from(sorted(CHAT_TEMPLATES)), data=st.data())
def test_tampered_prompts_are_refused_or_parsed_consistently(name: str, data: Any) -> None:
    """Arbitrary text (tags included) in fields, and arbitrary edits of the messages: the parser
    either refuses with PromptError or returns fields that render to exactly those messages."""
    template = CHAT_TEMPLATES[name]
    values = {f: data.draw(anything, label=f) for f in template.field_names}
    messages = render(name, values).messages
    which = data.draw(st.integers(0, 1))
    text = messages[which]["content"]
    cut = data.draw(st.integers(0, len(text)))
    if data.draw(st.booleans()):
        text = text[:cut] + data.draw(anything) + text[cut:]
    messages[which] = {"role": messages[which]["role"], "content": text}
    try:
        parsed_name, fields = parse_rendered(messages)
    except PromptError:
        return
    assert [m["content"] for m in render(parsed_name, fields).messages] == [m["content"] for m in messages]


@FUZZ
@given(st.lists(st.fixed_dictionaries({"role": anything, "content": anything}), max_size=3))
def test_arbitrary_messages_only_ever_raise_prompt_error(messages: list[dict[str, str]]) -> None:
    if messages and messages[0]["content"] and len(messages) == 2:
        messages[0]["content"] = "[cm_gym:DRAFT_ACTION v1]\n" + messages[0]["content"]
    with pytest.raises(PromptError):
        parse_rendered(messages)


_token = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", min_size=1, max_size=12)


@pytest.fixture(scope="module")
def wire() -> Iterator[LLMServer]:
    """One server for every example of the wire fuzz, with short head and body deadlines."""
    server, _ = serve_in_thread(
        SimulatedLLM(seed=1), model_name="fuzz", idle_timeout_s=0.3, read_timeout_s=0.3
    )
    yield server
    server.shutdown()
    server.server_close()


_STATUS = re.compile(rb"HTTP/1\.[01] [1-5][0-9][0-9] ")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.binary(max_size=600), prefix=st.sampled_from([b"", b"GET /v1/models HTTP/1.1\r\nHost: x\r\n"]))
def test_http_heads_on_the_wire_get_a_status_or_a_close(wire: LLMServer, raw: bytes, prefix: bytes) -> None:
    """Any bytes as a request head (h11 parses them, `check_head` bounds them): the server answers
    with an HTTP status or closes the connection, and keeps serving."""
    with socket.create_connection(wire.server_address, timeout=10) as sock:
        sock.sendall(prefix + raw + b"\r\n\r\n")
        reply = b""
        try:
            while chunk := sock.recv(65536):
                reply += chunk
        except ConnectionResetError:
            pass  # closed with bytes unread: a reset, which is a close
    assert not reply or _STATUS.match(reply), reply[:80]


def test_the_wire_fuzzed_server_still_serves(wire: LLMServer) -> None:
    assert [m.id for m in openai.OpenAI(base_url=wire.base_url, api_key="x").models.list()] == ["fuzz"]


_name = st.binary(min_size=1, max_size=20).map(bytes.lower)


@FUZZ
@given(
    method=st.sampled_from(["GET", "POST", "PUT"]),
    version=st.sampled_from(["1.0", "1.1", "2", "0.9"]),
    headers=st.lists(
        st.tuples(
            st.one_of(_name, st.sampled_from([b"content-length", b"transfer-encoding", b"host"])),
            st.binary(max_size=30),
        ),
        max_size=120,
    ),
)
def test_check_head_gives_a_length_or_an_http_error(
    method: str, version: str, headers: list[tuple[bytes, bytes]]
) -> None:
    try:
        length = check_head(method, version, headers, 1024)
    except HTTPError as exc:
        assert exc.status in (400, 411, 413, 431, 505) and exc.message and exc.close
        return
    assert 0 <= length <= 1024 and version in ("1.0", "1.1") and len(headers) <= 100


@FUZZ
@given(text=anything, action=anything)
def test_alternatives_parser_never_raises_and_returns_local_edits(text: str, action: str) -> None:
    out = parse_alternatives(text, action)
    assert len(out) == len(set(out))
    assert all(isinstance(o, str) and o != action for o in out)


_words = st.lists(st.text("abcdefgh=<>()*;,.", min_size=1, max_size=6), min_size=2, max_size=12)


@FUZZ
@given(words=_words, data=st.data())
def test_edit_grammar_round_trips(words: list[str], data: Any) -> None:
    """An edit cm_gym writes in the grammar (format_alternatives) parses back to the same action."""
    action = " ".join(words)
    i = data.draw(st.integers(0, len(words) - 1))
    edited_words = list(words)
    edited_words[i] = data.draw(st.text("xyz0123", min_size=1, max_size=5))
    edited = " ".join(edited_words)
    reply = format_alternatives(action, [edited])
    if edited != action and reply:
        assert parse_alternatives(reply, action) == [edited]


@FUZZ
@given(action=anything, fragment=anything, replacement=anything)
def test_apply_edit_is_a_single_local_replacement(action: str, fragment: str, replacement: str) -> None:
    out = apply_edit(action, fragment, replacement)
    if out is not None:
        assert action.count(fragment) == 1 and out == action.replace(fragment, replacement, 1)


@FUZZ
@given(text=anything)
def test_distil_and_judge_parsers_never_raise(text: str) -> None:
    situation, condition = parse_distil(text)
    assert isinstance(situation, str) and isinstance(condition, str)
    assert 1 <= parse_judge(text, 4) <= 4


@FUZZ
@given(
    situation=st.text("abcdef ,.", min_size=1, max_size=60).filter(str.strip),
    condition=st.text('abc()"_ ', min_size=1, max_size=60).filter(lambda c: c.strip("\"'. ")),
    choice=st.integers(1, 5),
)
def test_well_formed_replies_parse(situation: str, condition: str, choice: int) -> None:
    got = parse_distil(f"SITUATION: {situation}\nCONDITION: {condition}")
    assert got[0] == " ".join(situation.split())
    assert parse_judge(f"I pick\nCHOICE: [{choice}]", 5) == choice


_DOMAIN_NAMES = ("sql", "sat", "smt", "code", "dafny", "math")


@functools.lru_cache(maxsize=1)
def _domains() -> list[Any]:
    from cm_gym.domains.code.domain import CodeDomain
    from cm_gym.domains.dafny.domain import DafnyDomain
    from cm_gym.domains.math.domain import MathDomain
    from cm_gym.domains.sat.domain import SatDomain
    from cm_gym.domains.smt.domain import SmtDomain
    from cm_gym.domains.sql.domain import SQLDomain

    return [SQLDomain(), SatDomain(), SmtDomain(), CodeDomain(), DafnyDomain(), MathDomain()]


_reply_text = st.lists(
    st.one_of(
        st.characters(blacklist_categories=("Cs",)),
        st.sampled_from(["`", "```", "\n", "~~~", "<think>", "</think>", "(", ")", ";", "SELECT ", "def "]),
    ),
    max_size=120,
).map("".join)


@FUZZ
@given(text=_reply_text)
def test_every_domain_extracts_or_explains(text: str) -> None:
    """Arbitrary replies: an action found (stripped, non-empty) or a one-line problem; an action
    the recogniser found in prose is found again, whole, in itself (so it counts as usable);
    parse_action never raises."""
    for domain in _domains():
        got = domain.extract_action(text)
        if got.found:
            assert got.action and got.action == got.action.strip()
            if got.source in ("prose", "label"):
                assert domain.extract_action(got.action).action == got.action
        else:
            assert got.problem and "\n" not in got.problem
        assert isinstance(domain.parse_action(text), str)


@FUZZ
@given(body=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="`~\r"), max_size=200))
def test_a_fenced_body_comes_back_whole(body: str) -> None:
    from cm_gym.domains.reply import ReplyFormat, extract
    from cm_gym.llm.simulated import fenced

    got = extract(f"Answer:\n{fenced(body)}\nThanks.", ReplyFormat())
    if body.strip() and "<" not in body:
        assert got.action == body.strip("\n").strip()


# -- hostile probes: linear time ------------------------------------------------------------------
N = 8000
_PROBES: dict[str, Callable[[], Any]] = {
    # each took 2-10 s (8 KB) with the old regexes, and minutes for parse_rendered
    "edit-header-whitespace": lambda: parse_alternatives(("EDIT" + " " * N + "x\n") * 3, "a"),
    "fenced-fragment": lambda: parse_alternatives("EDIT 1\nREPLACE:\n```" + "a" * N + "\nWITH:\nb", "a"),
    "judge-whitespace": lambda: parse_judge(("CHOICE:" + " " * N + "x") * 3, 3),
    "distil-whitespace": lambda: parse_distil(("SITUATION:" + " " * N + "x") * 3),
    "labelled-fields": lambda: parse_strategy("TITLE:" + " " * N + "x\n" * N),
    "rendered-separators": lambda: _refused(
        [
            render("DRAFT_ACTION", {"task_id": "t"}).messages[0],
            {
                "role": "user",
                "content": "<task_id>"
                + "</task_id> <agent></agent> <decision></decision> <failed_attempts></failed_attempts>"
                "\n\n<state_text>\n" * 80 + "x",
            },
        ]
    ),
}


#: hostile replies for every domain's extraction (one probe per domain and reply)
_REPLIES: dict[str, Callable[[], str]] = {
    "backtick-runs": lambda: ("```" * N + "\n") * 4,
    "open-fences": lambda: "```sql\n" * N,
    "think-tags": lambda: "<think>" * N + "</think>" * N,
    "selects": lambda: "SELECT " * N + "FROM t",
    "parens": lambda: "(assert " * N + ")" * (N // 2),
    "one-long-line": lambda: "x" * (20 * N) + " SELECT a FROM t",
    "many-lines": lambda: "def f():\n" + "    pass\n" * N + "This is it.",
}
for _reply, _make in _REPLIES.items():
    for _i, _name in enumerate(_DOMAIN_NAMES):
        _PROBES[f"reply-{_reply}-{_name}"] = lambda m=_make, i=_i: _domains()[i].parse_action(m())


def _refused(messages: list[dict[str, str]]) -> None:
    with pytest.raises(PromptError):
        parse_rendered(messages)


@pytest.mark.parametrize("name", sorted(_PROBES))
def test_hostile_reply_probes_finish(name: str) -> None:
    """Run the probe in a thread and require it to finish within 10 s (it takes milliseconds; the
    backtracking parsers it replaced needed seconds to minutes), so a regression fails, not hangs.
    A domain probe first parses one small reply outside the clock (imports such as sqlglot)."""
    if name.startswith("reply-"):
        _domains()[_DOMAIN_NAMES.index(name.rsplit("-", 1)[1])].parse_action("SELECT 1")
    errors: list[BaseException] = []

    def target() -> None:
        try:
            _PROBES[name]()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive(), f"probe {name} still running after 10 s: a parser backtracks"
    assert not errors, errors
