"""`tiermem mcp` refuses a line holding NaN, Infinity or an integer of more than
`MAX_JSON_INT_DIGITS` digits as `/v1/mcp` refuses the same body: the same JSON-RPC parse
error (-32700, `id` null, the message naming the rule), the line reaches no tool and
nothing is written; the session goes on. A line that only quotes such a word in a string
is served as ever.

Fails on the code before: the `mcp` package's parser (pydantic's) takes NaN, Infinity and
integers of any length, and a line it parsed was passed on unchecked (the guard's strict
numbers ran only on lines the package refused), so over stdio a tool ran on a NaN or a
45-digit integer that the HTTP route refuses before any tool.

HTTP: a real uvicorn serving the real app in this process. Stdio: the real `tiermem mcp`
in a child process. Lines and bodies written byte for byte (the `mcp` Python client does
not send NaN)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp")
from cold_helpers import every_row
from hash_embedder import HashEmbedder
from mcp_stdio_helpers import StdioChild
from service_helpers import TOKEN_ACME, raw_request, serve_in_thread

from tiermem import Config, Memory
from tiermem.adapters.mcp_http import MCP_PATH
from tiermem.service.guard import MAX_JSON_INT_DIGITS

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
CONV = "nums"
PARSE_ERROR = -32700
REFUSED_STATUS = 422  # the guard's status for a body it refuses
HTTP_HEADERS = [("Authorization", f"Bearer {TOKEN_ACME}"), ("Accept", "application/json, text/event-stream"),
                ("Content-Type", "application/json")]
TOO_MANY_DIGITS = b"1" + b"0" * MAX_JSON_INT_DIGITS  # one digit past the limit


def call(rid: bytes, tool: str, arguments: bytes) -> bytes:
    """A tools/call line with the raw id and arguments given."""
    return (b'{"jsonrpc":"2.0","id":' + rid + b',"method":"tools/call","params":{"name":"' + tool.encode()
            + b'","arguments":' + arguments + b"}}")


def append(rid: bytes, metadata: bytes) -> bytes:
    return call(rid, "append", b'{"conversation_id":"' + CONV.encode()
                + b'","message":{"role":"user","content":"hi","metadata":' + metadata + b"}}")


# each case: the line, and what the refusal's message names
REFUSED: list[tuple[str, bytes, str]] = [
    # NaN in a message's metadata: the tool ran on it over stdio
    ("nan-metadata", append(b"10", b'{"score":NaN}'), "NaN is not valid JSON"),
    # Infinity as a tool's integer argument
    ("infinity-argument", call(b"11", "search", b'{"query":"hi","k":Infinity}'), "Infinity is not valid JSON"),
    # -Infinity nested in a list
    ("minus-infinity-nested", append(b"12", b'{"xs":[1,-Infinity]}'), "-Infinity is not valid JSON"),
    # an integer one digit past the limit in the metadata: stored over stdio, refused over HTTP
    ("long-integer-metadata", append(b"13", b'{"n":' + TOO_MANY_DIGITS + b"}"),
     f"more than {MAX_JSON_INT_DIGITS}"),
    # ... negative
    ("long-negative-integer", append(b"14", b'{"n":-' + TOO_MANY_DIGITS + b"}"), f"more than {MAX_JSON_INT_DIGITS}"),
    # ... as the request's id, which the package took as an integer id
    ("long-integer-id", call(TOO_MANY_DIGITS, "history", b'{"conversation_id":"' + CONV.encode() + b'"}'),
     f"more than {MAX_JSON_INT_DIGITS}"),
]


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("nums-http") / "data", auth_tokens={TOKEN_ACME: NS})
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url:
        yield url


@pytest.fixture(scope="module")
def child(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioChild]:
    d = tmp_path_factory.mktemp("nums-stdio")
    c = StdioChild(d / "data", d / "stderr.log", NS)
    try:
        first = c.call(1, "append", {"conversation_id": CONV, "message": {"role": "user", "content": "first"}})
        assert first["result"]["isError"] is False, first  # the store exists
        yield c
    finally:
        assert c.close() == 0


def _rows(child: StdioChild) -> dict[str, list[str]]:
    (db,) = child.data_dir.rglob("*.db")
    return every_row(db)


@pytest.mark.parametrize(("line", "named"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_loose_number_is_refused_as_over_http(child: StdioChild, http_url: str, line: bytes, named: str) -> None:
    status, _headers, over_http = raw_request(http_url, "POST", MCP_PATH, HTTP_HEADERS, line)
    assert status == REFUSED_STATUS and over_http["error"]["code"] == PARSE_ERROR, over_http
    before = _rows(child)
    answers = child.send(line, answered=False)
    assert answers == [over_http]  # the same error, id null (the line did not parse strictly)
    (answer,) = answers
    assert answer["id"] is None and named in answer["error"]["message"], answer
    assert _rows(child) == before  # reached no tool
    # the session goes on
    ok = child.call(50, "history", {"conversation_id": CONV})
    assert ok["id"] == 50 and ok["result"]["isError"] is False, ok


# each case: a line holding such a word or digits only in a string, and the tool's answer
# (passes before and after: the scan that sends a line to the guard is a superset)
TAKEN: list[tuple[str, bytes]] = [
    # NaN and Infinity as text in the content
    ("words-in-content", call(b"20", "append", b'{"conversation_id":"' + CONV.encode()
                              + b'","message":{"role":"user","content":"NaN and -Infinity are words"}}')),
    # a long run of digits in a string
    ("digits-in-string", call(b"21", "append", b'{"conversation_id":"' + CONV.encode()
                              + b'","message":{"role":"user","content":"' + TOO_MANY_DIGITS + b'"}}')),
]


@pytest.mark.parametrize("line", [c[1] for c in TAKEN], ids=[c[0] for c in TAKEN])
def test_the_same_words_in_a_string_are_served(child: StdioChild, line: bytes) -> None:
    before = _rows(child)
    (answer,) = child.send(line, answered=True)
    assert answer["id"] == json.loads(line)["id"] and answer["result"]["isError"] is False, answer
    stored: Any = json.loads(line)["params"]["arguments"]["message"]["content"]
    history = child.call(51, "history", {"conversation_id": CONV})["result"]["structuredContent"]
    assert history["messages"][-1]["message"]["content"] == stored, history
    assert _rows(child) != before  # the tool ran: appended
