"""The MCP `append` tool's `idempotency_key` (the real MCP server in process against the
official `mcp` client, real SQLite): called twice with one key and message it stores one
copy and answers the first position both times; the key reused for another message, or
malformed, is a tool error naming `idempotency_key` (the library's check and message)
that writes nothing; the tool lists the argument.

Fails on the code before: the tool took no `idempotency_key` (an unexpected argument is
dropped by the mcp package's arguments model: the second call stored a second copy)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from mcp import Client

from tiermem import Config, Memory
from tiermem.adapters.mcp_server import build_server
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.models import MAX_IDEMPOTENCY_KEY_CHARS, check_idempotency_key

NS = "acme"
MSG = {"role": "user", "content": "Book the 9:40 to Lisbon, please."}
OTHER = {"role": "user", "content": "Book the 11:15 instead."}


def _calls(mem: Memory, calls: list[dict[str, Any]]) -> list[tuple[bool, Any]]:
    """Each `append` call's (is_error, structured content or error text), in order."""
    async def run() -> list[tuple[bool, Any]]:
        async with Client(build_server(mem.namespaced(NS))) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert "idempotency_key" in listed["append"].input_schema["properties"]
            out = []
            for args in calls:
                r = await client.call_tool("append", {"conversation_id": "trip", **args})
                out.append((r.is_error, r.content[0].text if r.is_error else r.structured_content))  # type: ignore[union-attr]
            return out

    return asyncio.run(run())


def _library_message(key: object) -> str:
    with pytest.raises(ValidationError) as got:
        check_idempotency_key(key)
    return str(got.value)


def test_a_key_twice_stores_once_and_reused_for_another_message_is_refused(tmp_path: Path,
                                                                         embedder: FastEmbedder) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        got = _calls(mem, [{"message": {"role": "user", "content": "before"}},
                           {"message": MSG, "idempotency_key": "req-1"},
                           {"message": MSG, "idempotency_key": "req-1"},
                           {"message": OTHER, "idempotency_key": "req-1"}])
        assert got[1] == got[2] and (got[1][0], got[1][1]["position"]) == (False, 1)
        assert got[3][0] and "idempotency_key" in got[3][1] and "different request" in got[3][1]
        assert [m.body for m in mem.history("trip", namespace=NS)] == [{"role": "user", "content": "before"}, MSG]


@pytest.mark.parametrize("key", [
    "",  # empty
    "k" * (MAX_IDEMPOTENCY_KEY_CHARS + 1),  # one past the limit
    "two words",  # a space
    "caf\u00e9",  # outside ASCII
])
def test_a_malformed_key_is_a_tool_error_with_the_librarys_message(tmp_path: Path, embedder: FastEmbedder,
                                                                  key: str) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        [(is_error, text)] = _calls(mem, [{"message": MSG, "idempotency_key": key}])
        assert is_error and text.endswith(_library_message(key))  # after the mcp package's "Error executing tool"
        assert mem.conversations(NS) == []  # nothing written
