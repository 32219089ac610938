"""An MCP request whose `id` is no string and no integer is answered with an invalid request
(-32600, `id` null, the message naming the rule), over HTTP (`/v1/mcp`) and stdio
(`tiermem mcp`) alike, and reaches no tool: nothing is written. A request with a valid id
is answered as ever, carrying its id back; a notification (no "id" key) stays unanswered,
as JSON-RPC 2.0 says.

Before, the `mcp` package read a request's id strictly (a string or an integer) and took
an object with any other id for a notification: over HTTP `/v1/mcp` answered 202 with an
empty body, over stdio nothing at all, and the host waited on the call until its own
timeout. JSON-RPC 2.0 requires an Invalid Request error with `id` null; MCP requires a
request's id to be a string or an integer, never null.

HTTP: a real uvicorn serving the real app in this process, bodies written byte for byte.
Stdio: the real `tiermem mcp` in a child process, lines written byte for byte (the `mcp`
Python client cannot send such ids). Every table of the real SQLite file is compared
before and after.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from hash_embedder import HashEmbedder
from mcp_stdio_helpers import StdioChild
from service_helpers import TOKEN_ACME, raw_request, serve_in_thread

from tiermem import Config, Memory
from tiermem.adapters.mcp_http import MCP_PATH

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
CONV = "ids"
INVALID_REQUEST = -32600  # JSON-RPC 2.0: the request itself is refused
REFUSED_STATUS = 422  # the guard's status for a body it refuses after parsing it
NOTIFIED_STATUS = 202  # the streamable-HTTP transport's answer to a notification: accepted, no body
RULE = "a request's id must be a string or an integer"
AUTH = ("Authorization", f"Bearer {TOKEN_ACME}")
ACCEPT = ("Accept", "application/json, text/event-stream")
JSON = ("Content-Type", "application/json")


def _append(id_json: bytes | None, content: str) -> bytes:
    """A tools/call of `append` with `id_json` as its raw id, or with no "id" key (None)."""
    rid = b"" if id_json is None else b'"id":' + id_json + b","
    return (b'{"jsonrpc":"2.0",' + rid + b'"method":"tools/call","params":{"name":"append","arguments":'
            b'{"conversation_id":"' + CONV.encode() + b'","message":{"role":"user","content":'
            + json.dumps(content).encode() + b"}}}}")


def _store(data_dir: Path) -> dict[str, list[str]]:
    """Every row of every ordinary table of the store (virtual ones through their shadow
    tables): nothing written means equal before and after."""
    (db,) = data_dir.rglob("*.db")
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                            "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'")]
        return {n: sorted(map(repr, conn.execute(f'SELECT * FROM "{n}"'))) for n in names}


class Transport:
    """One way in: `send` a body / line, get (HTTP status or None, the JSON-RPC answers)."""

    data_dir: Path

    def send(self, body: bytes, *, answered: bool) -> tuple[int | None, list[dict[str, Any]]]:
        raise NotImplementedError


class Http(Transport):
    def __init__(self, url: str, data_dir: Path) -> None:
        self.url, self.data_dir = url, data_dir

    def send(self, body: bytes, *, answered: bool) -> tuple[int | None, list[dict[str, Any]]]:
        status, headers, doc = raw_request(self.url, "POST", MCP_PATH, [AUTH, ACCEPT, JSON], body)
        if doc is not None:
            assert headers["content-type"] == "application/json", headers
        return status, [] if doc is None else [doc]


class Stdio(Transport):
    """`tiermem mcp` as an MCP host starts it (mcp_stdio_helpers.StdioChild: initialized, its
    stdout read line by line), its stderr in a log beside `data_dir`."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.child = StdioChild(data_dir, data_dir.parent / "mcp.log", namespace=NS)

    def send(self, body: bytes, *, answered: bool) -> tuple[int | None, list[dict[str, Any]]]:
        return None, self.child.send(body, answered=answered)

    def close(self) -> None:
        self.child.close()


@pytest.fixture(scope="module", params=["http", "stdio"])
def transport(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Transport]:
    data_dir = tmp_path_factory.mktemp(f"ids-{request.param}") / "data"
    if request.param == "http":
        cfg = Config(data_dir=data_dir, auth_tokens={TOKEN_ACME: NS})
        with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
                serve_in_thread(cfg, mem) as url:
            mem.append(CONV, {"role": "user", "content": "first"}, namespace=NS)  # the store exists
            yield Http(url, data_dir)
        return
    s = Stdio(data_dir)
    try:
        _, first = s.send(_append(b"1", "first"), answered=True)  # the store exists
        assert first[0]["result"]["isError"] is False, first
        yield s
    finally:
        s.close()


# (the id as the request writes it, the kind the refusal names): each refused
REFUSED_IDS: list[tuple[bytes, str]] = [
    (b"1.5", "a number with a fraction"),  # a fraction: JSON-RPC's SHOULD NOT, MCP's must not
    (b"1.0", "a number with a fraction"),  # integral, but written as a fraction: no JSON integer
    (b"{}", "an object"),  # no scalar at all
    (b"[]", "an array"),  # nor is an array (the id of a request, not a batch)
    (b"true", "a boolean"),  # JSON's true is no integer, though Python's bool is an int
    (b"false", "a boolean"),  # ... nor false (lax parsers read it as 0)
    (b"null", "null"),  # JSON-RPC 2.0 discourages it, MCP forbids it; over stdio it went unanswered
]


@pytest.mark.parametrize(("id_json", "kind"), REFUSED_IDS, ids=[i.decode() for i, _ in REFUSED_IDS])
def test_an_id_of_another_type_is_an_invalid_request(transport: Transport, id_json: bytes, kind: str) -> None:
    before = _store(transport.data_dir)
    status, answers = transport.send(_append(id_json, f"refused {id_json.decode()}"), answered=False)
    assert status in (None, REFUSED_STATUS), (status, answers)
    assert len(answers) == 1, f"{len(answers)} answers to a request with id {id_json.decode()}: {answers}"
    (answer,) = answers
    assert set(answer) == {"jsonrpc", "id", "error"} and answer["jsonrpc"] == "2.0", answer
    assert answer["id"] is None  # JSON-RPC 2.0: the id could not be determined
    assert answer["error"]["code"] == INVALID_REQUEST, answer
    message = answer["error"]["message"]
    assert RULE in message and kind in message and "body.id" in message, message
    assert answer["error"]["data"]["detail"][0]["loc"] == ["body", "id"]  # the service's own error JSON
    assert _store(transport.data_dir) == before  # reached no tool


# (the id as the request writes it, as the answer carries it back): each taken
TAKEN_IDS: list[tuple[bytes, str | int]] = [
    (b'"a"', "a"),  # a string
    (b"7", 7),  # an integer
    (b"-1", -1),  # a negative integer is an integer
]


@pytest.mark.parametrize(("id_json", "rid"), TAKEN_IDS, ids=[i.decode() for i, _ in TAKEN_IDS])
def test_a_string_or_integer_id_is_answered_as_ever(transport: Transport, id_json: bytes, rid: str | int) -> None:
    before = _store(transport.data_dir)
    status, answers = transport.send(_append(id_json, f"taken {id_json.decode()}"), answered=True)
    assert status in (None, 200), (status, answers)
    assert len(answers) == 1, answers
    (answer,) = answers
    assert answer["id"] == rid and type(answer["id"]) is type(rid), answer
    assert answer["result"]["isError"] is False, answer
    after = _store(transport.data_dir)
    assert len(after["messages"]) == len(before["messages"]) + 1  # the tool ran: one message appended


def test_a_notification_stays_unanswered(transport: Transport) -> None:
    """No "id" key: JSON-RPC answers a notification with nothing, and the mcp package runs
    no tools/call sent as one."""
    before = _store(transport.data_dir)
    status, answers = transport.send(_append(None, "notified"), answered=False)
    assert status in (None, NOTIFIED_STATUS) and answers == [], (status, answers)
    assert _store(transport.data_dir) == before
