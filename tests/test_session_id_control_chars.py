"""A session id with a control character is refused naming `session_id`.

The check ran in the message's model validator (`Message._shape`), so pydantic located its
error at the whole message: the library and the MCP tool said "message: Value error,
session_id must not ...", the HTTP service answered a 422 at `["body"]` (or at the
batch's `messages[0].message` for the batch's own `session_id`). It is the field's own
validator now: every way in names `session_id` (the HTTP `loc` ends in it), the problem
says which code points, nothing is written, and the other envelope fields' messages are
as before. Real SQLite, the real MCP server over the `mcp` client, the real app.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

pytest.importorskip("mcp")
from mcp import Client

from tiermem import Config, Memory
from tiermem.adapters.mcp_server import build_server
from tiermem.errors import ValidationError
from tiermem.service import create_app
from tiermem.tiers.embed import Embedder

NS = "default"
CONV = "c1"
BAD_SESSION = "s1\r\nX-Injected: 1"
HI = {"role": "user", "content": "hi"}
PROBLEM = "must not contain control characters (U+0000-U+001F, U+007F)"


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as m:
        yield m


def _library_error(call: Callable[[Memory], Any]) -> Callable[[Memory], str]:
    def run(m: Memory) -> str:
        with pytest.raises(ValidationError) as info:
            call(m)
        assert str(info.value) == f"{info.value.field}: {info.value.problem}"
        return str(info.value)
    return run


def _mcp_error(m: Memory) -> str:
    async def run() -> str:
        async with Client(build_server(m.namespaced(NS))) as client:
            r = await client.call_tool("append", {"conversation_id": CONV,
                                                  "message": {**HI, "session_id": BAD_SESSION}})
            assert r.is_error
            text: str = r.content[0].text  # type: ignore[union-attr]
            return text
    return asyncio.run(run())


def _http_error(path: str, body: dict[str, Any]) -> Callable[[Memory], str]:
    def run(m: Memory) -> str:
        app = create_app(m.config, m, auth=False, start_scheduler=False)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            r = client.post(f"/v1/conversations/{CONV}/{path}", json=body)
        assert r.status_code == 422, r.text
        [item] = r.json()["detail"]
        return f"{'.'.join(str(p) for p in item['loc'])}: {item['msg']}"
    return run


REFUSALS: list[tuple[Callable[[Memory], str], str]] = [
    # the library, the session id as a keyword
    (_library_error(lambda m: m.append(CONV, HI, session_id=BAD_SESSION)), f"session_id: {PROBLEM}"),
    # the library, the session id in the message's envelope
    (_library_error(lambda m: m.append(CONV, {**HI, "session_id": BAD_SESSION})), f"session_id: {PROBLEM}"),
    # a batch: the message named in it
    (_library_error(lambda m: m.append_many(CONV, [HI, {**HI, "session_id": BAD_SESSION}])),
     f"messages[1].session_id: {PROBLEM}"),
    # DEL (U+007F), the one control character above the C0 range
    (_library_error(lambda m: m.append(CONV, {**HI, "session_id": "\x7f"})), f"session_id: {PROBLEM}"),
    # the MCP append tool
    (_mcp_error, f"Error executing tool append: session_id: {PROBLEM}"),
    # HTTP, one message
    (_http_error("messages", {**HI, "session_id": BAD_SESSION}), f"body.session_id: {PROBLEM}"),
    # HTTP, a batch's message
    (_http_error("messages:batch", {"messages": [HI, {**HI, "session_id": BAD_SESSION}]}),
     f"body.messages.1.session_id: {PROBLEM}"),
    # HTTP, the batch's own session id (applied to every message): the batch's field
    (_http_error("messages:batch", {"messages": [HI], "session_id": BAD_SESSION}), f"body.session_id: {PROBLEM}"),
]


@pytest.mark.parametrize(("refuse", "expected"), REFUSALS,
                         ids=["kwarg", "envelope", "batch", "del", "mcp", "http", "http batch message", "http batch"])
def test_a_control_character_is_refused_naming_session_id(mem: Memory, refuse: Callable[[Memory], str],
                                                           expected: str) -> None:
    assert refuse(mem) == expected
    assert CONV not in mem.conversations(namespace=NS)  # nothing written


OTHER_FIELDS: list[tuple[dict[str, Any], str]] = [
    # an empty session id: pydantic's own length message, as before
    ({"session_id": ""}, "session_id: String should have at least 1 character"),
    # a time before the epoch: created_at's bound, as before
    ({"created_at": -1}, "created_at: Input should be greater than or equal to 0"),
]


@pytest.mark.parametrize(("envelope", "expected"), OTHER_FIELDS, ids=["empty session", "created_at"])
def test_other_envelope_fields_say_what_they_said(mem: Memory, envelope: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValidationError) as info:
        mem.append(CONV, {**HI, **envelope})
    assert str(info.value) == expected


def test_printable_unicode_session_ids_are_kept(mem: Memory) -> None:
    # the check is control characters only: spaces and any other Unicode stay free text
    mem.append(CONV, HI, session_id="Café run #2 🙂")
    assert [m.session_id for m in mem.history(CONV, namespace=NS)] == ["Café run #2 🙂"]
