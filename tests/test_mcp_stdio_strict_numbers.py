"""`tiermem mcp` refuses a line holding NaN, Infinity or an integer of more than
`MAX_JSON_INT_DIGITS` digits as `/v1/mcp` refuses the same body: the same JSON-RPC error,
invalid params (-32602) carrying the request's id (the line parses; the refused number is
named by its place and the limit), or an invalid request (-32600, id null) where the
number is the id itself; the line reaches no tool and nothing is written; the session
goes on. A line that only quotes such a word in a string is served as ever.

Fails on the code before 6b22ac5: the `mcp` package's parser (pydantic's) takes NaN,
Infinity and integers of any length, and a line it parsed was passed on unchecked. Before
the one integer limit, the refusal was a parse error (-32700) with id null, naming only
`body`: the mcp package's ClientSession matches answers by id and waited for ever.

HTTP: a real uvicorn serving the real app in this process. Stdio: the real `tiermem mcp`
in a child process. Lines and bodies written byte for byte (the `mcp` Python client does
not send NaN)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp")
from hash_embedder import HashEmbedder
from mcp_stdio_helpers import StdioChild, child_rows, started_child
from service_helpers import TOKEN_ACME, raw_request, serve_in_thread

from tiermem import Config, Memory
from tiermem.adapters.mcp_http import MCP_PATH
from tiermem.service.guard import MAX_JSON_INT_DIGITS

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
CONV = "nums"
INVALID_PARAMS = -32602  # a parsed request with a value refused in it: its id carried back
INVALID_REQUEST = -32600  # a request whose id itself is refused: no id to carry, null
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


# each case: the line, what the refusal's message names (the number's place, the rule),
# the JSON-RPC code and the id the answer carries
TOO_LONG = f"is an integer of {MAX_JSON_INT_DIGITS + 1:,} digits, more than the limit of {MAX_JSON_INT_DIGITS:,}"
REFUSED: list[tuple[str, bytes, str, int, int | None]] = [
    # NaN in a message's metadata: the tool ran on it over stdio
    ("nan-metadata", append(b"10", b'{"score":NaN}'), "message.metadata.score: NaN is not valid JSON",
     INVALID_PARAMS, 10),
    # Infinity as a tool's integer argument
    ("infinity-argument", call(b"11", "search", b'{"query":"hi","k":Infinity}'),
     "arguments.k: Infinity is not valid JSON", INVALID_PARAMS, 11),
    # -Infinity nested in a list
    ("minus-infinity-nested", append(b"12", b'{"xs":[1,-Infinity]}'), "metadata.xs.1: -Infinity is not valid JSON",
     INVALID_PARAMS, 12),
    # an integer one digit past the limit in the metadata: stored over stdio, refused over HTTP
    ("long-integer-metadata", append(b"13", b'{"n":' + TOO_MANY_DIGITS + b"}"), "metadata.n: " + TOO_LONG,
     INVALID_PARAMS, 13),
    # ... negative (the sign is no digit)
    ("long-negative-integer", append(b"14", b'{"n":-' + TOO_MANY_DIGITS + b"}"), "metadata.n: " + TOO_LONG,
     INVALID_PARAMS, 14),
    # ... as the request's id, which the package took as an integer id: none to carry back
    ("long-integer-id", call(TOO_MANY_DIGITS, "history", b'{"conversation_id":"' + CONV.encode() + b'"}'),
     "body.id: " + TOO_LONG,
     INVALID_REQUEST, None),
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
    with started_child(d, CONV, NS) as c:
        yield c


@pytest.mark.parametrize(("line", "named", "code", "rid"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_loose_number_is_refused_as_over_http(child: StdioChild, http_url: str, line: bytes, named: str, code: int,
                                                rid: int | None) -> None:
    status, _headers, over_http = raw_request(http_url, "POST", MCP_PATH, HTTP_HEADERS, line)
    assert status == REFUSED_STATUS and over_http["error"]["code"] == code, over_http
    before = child_rows(child)
    answers = child.send(line, answered=False)  # answered by the reader, before the ping
    assert answers == [over_http]  # the same error over both transports
    (answer,) = answers
    assert answer["id"] == rid and named in answer["error"]["message"], answer
    assert child_rows(child) == before  # reached no tool
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
    before = child_rows(child)
    (answer,) = child.send(line, answered=True)
    assert answer["id"] == json.loads(line)["id"] and answer["result"]["isError"] is False, answer
    stored: Any = json.loads(line)["params"]["arguments"]["message"]["content"]
    history = child.call(51, "history", {"conversation_id": CONV})["result"]["structuredContent"]
    assert history["messages"][-1]["message"]["content"] == stored, history
    assert child_rows(child) != before  # the tool ran: appended
