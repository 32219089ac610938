"""`tiermem mcp` answers every line it is sent over stdio, as /v1/mcp answers every body.

The `mcp` package's stdio transport decodes stdin with `errors="replace"` and drops a line
its JSON parser refuses: a tool call holding a lone UTF-16 surrogate (what
`JSON.stringify` writes for a cut emoji), an integer past the parser's range or JSON
nested past its recursion limit got no answer at all, so the MCP host waited on the call
until its own timeout, and a message with bytes that are not UTF-8 was stored with
U+FFFD in their place. Each is now a JSON-RPC error naming the place and the rule, as the
HTTP endpoint's guard answers it (a parse error with `id` null where the line did not
parse, invalid params with the request's `id` where it did), nothing is written, and the
session goes on. The real `tiermem mcp` process; the lines are written byte for byte, as
a client in another language sends them (the `mcp` Python client cannot encode them);
and, as a property, every tool called with generated JSON of every type at every argument
is answered, a refusal writing nothing (derandomized and bounded: TIERMEM_FUZZ_EXAMPLES).
"""

from __future__ import annotations

import json
import os
import select
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp")

REPO = Path(__file__).resolve().parents[1]
ANSWER_TIMEOUT_S = 30.0  # a line that gets no answer fails the test here, not the host's timeout
PROTOCOL_VERSION = "2025-06-18"
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
FIRST_ID = 100  # ids of the hostile calls; below it the session's own


class StdioSession:
    """`tiermem mcp` as an MCP host starts it, spoken to line by line."""

    def __init__(self, data_dir: Path) -> None:
        env = {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
               "TIERMEM_REDIS_URL": "redis://127.0.0.1:1/0",  # unreachable: cold-only, quickly
               "PATH": os.environ.get("PATH", "")}
        self.data_dir = data_dir
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from tiermem.cli import main; main()", "--data-dir", str(data_dir),
             "--namespace", "acme", "mcp"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def answer(self) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], ANSWER_TIMEOUT_S)
        if not ready:
            return None
        doc: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return doc

    def request(self, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        self.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode())
        return self.answer()

    def stored(self) -> list[tuple[str, str]]:
        (db,) = self.data_dir.rglob("*.db")
        with sqlite3.connect(db) as conn:
            return [(r[0], r[1]) for r in conn.execute("SELECT conversation_id, body FROM messages ORDER BY id")]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=ANSWER_TIMEOUT_S)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioSession]:
    s = StdioSession(tmp_path_factory.mktemp("stdio") / "d")
    try:
        init = s.request(0, "initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                           "clientInfo": {"name": "test", "version": "1"}})
        assert init is not None and "result" in init, init
        s.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
        ok = s.request(1, "tools/call", {"name": "append", "arguments": {
            "conversation_id": "c", "message": {"role": "user", "content": "hello"}}})
        assert ok is not None and ok["result"]["isError"] is False, ok
        yield s
    finally:
        s.close()


def _append_line(rid: int, message_json: bytes) -> bytes:
    return (b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"append","arguments":'
            b'{"conversation_id":"c","message":%s}}}' % (rid, message_json))


def _short_int(digits: str) -> int | None:
    """An integer of the line as the test reads it: None past Python's own digit limit."""
    return int(digits) if len(digits) < SHORT_INT_DIGITS else None


SHORT_INT_DIGITS = 100  # an id has fewer; the huge-int case's 5,001 would raise in int()
DEEP = b"[" * 5000 + b"]" * 5000
# (the line, the error code, whether the answer carries the request's id, what the message names)
CASES: list[tuple[bytes, int, bool, str]] = [
    # a lone surrogate in the content: parsed by Python's json, refused as not Unicode
    (_append_line(FIRST_ID, b'{"role":"user","content":"cut \\ud83d here"}'), INVALID_PARAMS, True,
     "params.arguments.message.content: contains a lone UTF-16 surrogate"),
    # ... in a key of the metadata
    (_append_line(FIRST_ID + 1, b'{"role":"user","content":"x","metadata":{"\\udfff":1}}'), INVALID_PARAMS, True,
     "lone UTF-16 surrogate"),
    # ... in the session id beside the message
    (b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"append","arguments":{"conversation_id":"c",'
     b'"message":{"role":"user","content":"x"},"session_id":"\\ud800"}}}' % (FIRST_ID + 2), INVALID_PARAMS, True,
     "params.arguments.session_id: contains a lone UTF-16 surrogate"),
    # ... in a query, a read
    (b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"search","arguments":{"query":"\\ud800"}}}'
     % (FIRST_ID + 3), INVALID_PARAMS, True, "params.arguments.query"),
    # bytes that are not UTF-8: were stored as U+FFFD; JSON around them, so its id is read
    # (answered id null before the one integer rule's change: a client waited for ever)
    (_append_line(FIRST_ID + 4, b'{"role":"user","content":"caf\xe9"}'), INVALID_PARAMS, True, "not valid UTF-8"),
    # an integer of 5,000 digits: past the mcp parser's range; the line parses, its id read
    (_append_line(FIRST_ID + 5, b'{"role":"user","content":"x","metadata":{"n":1' + b"0" * 5000 + b"}}"),
     INVALID_PARAMS, True, "metadata.n: is an integer of 5,001 digits"),
    # 5,000 levels: past the mcp parser's recursion limit
    (_append_line(FIRST_ID + 6, b'{"role":"user","content":"x","metadata":{"d":' + DEEP + b"}}"), PARSE_ERROR, False,
     "nested deeper than"),
    # JSON that is no JSON-RPC message at all
    (b'{"hello":"world"}', INVALID_REQUEST, False, "JSON-RPC"),
    # not JSON
    (b"this is not json", PARSE_ERROR, False, "invalid JSON"),
]


@pytest.mark.parametrize(("line", "code", "has_id", "named"), CASES,
                         ids=["surrogate-content", "surrogate-key", "surrogate-session", "surrogate-query",
                              "not-utf8", "huge-int", "too-deep", "not-jsonrpc", "not-json"])
def test_every_line_is_answered_and_writes_nothing(session: StdioSession, line: bytes, code: int, has_id: bool,
                                                   named: str) -> None:
    before = session.stored()
    session.send(line)
    got = session.answer()
    assert got is not None, f"no answer in {ANSWER_TIMEOUT_S} s to {line[:120]!r}"
    assert got["jsonrpc"] == "2.0" and "result" not in got, got
    assert got["error"]["code"] == code, got
    assert named in got["error"]["message"], got
    sent_id = json.loads(line.decode("utf-8", "replace"), parse_int=_short_int)["id"] if has_id else None
    assert got["id"] == sent_id
    assert session.stored() == before
    # the session goes on: the next call is answered as ever
    ok = session.request(FIRST_ID + 50, "tools/call", {"name": "history", "arguments": {"conversation_id": "c"}})
    assert ok is not None and ok["id"] == FIRST_ID + 50 and ok["result"]["isError"] is False, ok


# every tool with arguments it takes, so that a generated value lands beside real ones
TOOL_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("append", {"conversation_id": "c", "message": {"role": "user", "content": "hi"}}),
    ("context", {"conversation_id": "c", "query": "hi", "budget": 500}),
    ("history", {"conversation_id": "c", "start": 0, "limit": 10}),
    ("search", {"query": "hi", "k": 3}),
    ("pin", {"conversation_id": "c", "position": 0}),
    ("unpin", {"conversation_id": "c", "position": 0}),
    ("erase", {"conversation_id": "gone", "confirm": "gone"}),
]
EXAMPLES = int(os.environ.get("TIERMEM_FUZZ_EXAMPLES", "25"))
hostile_text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=30)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=10**20, max_value=10**60)
    | st.floats(allow_nan=True, allow_infinity=True) | hostile_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=10,
)


@pytest.mark.parametrize(("tool", "base"), TOOL_CALLS, ids=[t for t, _ in TOOL_CALLS])
@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(value=json_values, which=st.integers(min_value=0, max_value=len(TOOL_CALLS)), name=hostile_text,
       replace=st.booleans())
def test_a_hostile_argument_is_answered_and_a_refusal_writes_nothing(
        session: StdioSession, tool: str, base: dict[str, Any], value: Any, which: int, name: str,
        replace: bool) -> None:
    args = dict(base)
    keys = list(base)
    args[keys[which % len(keys)] if replace else name] = value
    rid = FIRST_ID + 60 + which
    # written as a client in another language writes it: NaN and Infinity as Python spells
    # them, a lone surrogate as its \u escape
    before = session.stored()
    session.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                             "params": {"name": tool, "arguments": args}}).encode())
    got = session.answer()
    assert got is not None, f"no answer in {ANSWER_TIMEOUT_S} s to {tool} {args!r:.200}"
    assert got["id"] in (rid, None), got
    refused = "error" in got or got["result"].get("isError") is True
    if refused:
        assert session.stored() == before, (tool, args, got)
