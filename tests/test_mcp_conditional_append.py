"""The MCP `append` tool's conditions, `expect_position` and `expect_incarnation`, with the
HTTP append's names and semantics (the real MCP server in process against the official
`mcp` client, real SQLite): stored only where the conversation goes on at the position
expected and is still the incarnation named; a failed condition is a tool error the
model reads (a result with `isError`, not a protocol error) naming the position
expected and found, and nothing is written; every append answers the conversation's
`incarnation` as the HTTP service's opaque token (never the store's key), which a later
append passes back; bad values are tool errors naming the field, writing nothing.

Fails on the code before: the tool took no conditions (the mcp package's arguments
model dropped them: a stale append was stored) and answered no incarnation."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from hash_embedder import HashEmbedder
from mcp import Client

from tiermem import Config, Memory
from tiermem.adapters import mcp_server
from tiermem.adapters.mcp_server import build_server
from tiermem.errors import ValidationError
from tiermem.service import schemas
from tiermem.tiers.models import incarnation_token

NS = "acme"
TOKEN = re.compile(schemas.INCARNATION_PATTERN)


def say(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False, background_indexing=False)
    yield m  # type: ignore[misc]
    m.close()


def _appends(mem: Memory, calls: list[dict[str, Any]]) -> list[tuple[bool, Any]]:
    """Each `append` call's (is_error, structured content or error text), in order; a
    call that raised (a protocol error) fails the test."""
    async def run() -> list[tuple[bool, Any]]:
        async with Client(build_server(mem.namespaced(NS))) as client:
            schema = {t.name: t for t in (await client.list_tools()).tools}["append"].input_schema
            assert {"expect_position", "expect_incarnation"} <= set(schema["properties"])
            out = []
            for args in calls:
                r = await client.call_tool("append", {"conversation_id": "trip", **args})
                out.append((r.is_error, r.content[0].text if r.is_error else r.structured_content))  # type: ignore[union-attr]
            return out

    return asyncio.run(run())


def contents(mem: Memory) -> list[str]:
    return [m.body["content"] for m in mem.history("trip", namespace=NS)] if "trip" in mem.conversations(NS) else []


def test_written_where_expected_and_the_incarnation_chains(mem: Memory) -> None:
    first, second = _appends(mem, [{"message": say("a"), "expect_position": 0},
                                   {"message": say("b"), "expect_position": 1}])
    assert (first[0], first[1]["position"], second[0], second[1]["position"]) == (False, 0, False, 1)
    token = first[1]["incarnation"]
    assert TOKEN.fullmatch(token) and second[1]["incarnation"] == token
    # the library's (and the HTTP service's) token of the same incarnation, never the store's key
    assert mem.append_outcome("trip", [say("c")], namespace=NS).incarnation == token
    key = mem.cold.key_of(NS, "trip")
    assert key is not None and token == incarnation_token(mem.cold.db_uuid, key) and key not in token
    [third] = _appends(mem, [{"message": say("d"), "expect_position": 3, "expect_incarnation": token}])
    assert third == (False, {"position": 3, "incarnation": token})
    assert contents(mem) == ["a", "b", "c", "d"]


# (id, messages stored first, the position expected, the position found)
MISMATCHES: list[tuple[str, int, int, int]] = [
    ("behind", 2, 1, 2),  # another writer appended since the model read the conversation
    ("ahead", 2, 5, 2),  # the model counted messages that are not there
    ("missing_conversation", 0, 3, 0),  # nothing stored: not created by the refused append
    ("exists_but_new_expected", 1, 0, 1),
]


@pytest.mark.parametrize(("stored", "expected", "found"), [m[1:] for m in MISMATCHES], ids=[m[0] for m in MISMATCHES])
def test_a_mismatch_is_a_tool_error_naming_both_positions(mem: Memory, stored: int, expected: int,
                                                          found: int) -> None:
    if stored:
        mem.append_many("trip", [say(f"old {i}") for i in range(stored)], namespace=NS)
    [(is_error, text)] = _appends(mem, [{"message": say("new"), "expect_position": expected}])
    assert is_error and text.endswith(f"expect_position: conversation 'trip' was expected to go on at position "
                                      f"{expected} but goes on at position {found}; nothing was written")
    assert contents(mem) == [f"old {i}" for i in range(stored)]


def test_a_gone_incarnation_is_a_tool_error(mem: Memory) -> None:
    [(_, first)] = _appends(mem, [{"message": say("a")}])
    mem.delete_conversation("trip", namespace=NS)
    mem.append_many("trip", [say("x")], namespace=NS)  # written again, as long
    # (id, the token sent): the old incarnation's; one of this service's shape no conversation has
    for token in (first["incarnation"], "0" * 32):
        [(is_error, text)] = _appends(mem, [{"message": say("b"), "expect_position": 1,
                                             "expect_incarnation": token}])
        assert is_error and re.search(rf"expected to be incarnation '{token}', going on at position 1, but its "
                                      r"incarnation is '[0-9a-f]{32}'; nothing was written$", text), text
    assert contents(mem) == ["x"]


def test_a_replay_under_its_key_answers_the_first_outcome(mem: Memory) -> None:
    call = {"message": say("a"), "expect_position": 0, "idempotency_key": "req-1"}
    once, again = _appends(mem, [call, call])
    assert once == again and once[1]["position"] == 0
    assert contents(mem) == ["a"]


# (id, arguments, the field the error names): refused before anything is written
BAD: list[tuple[str, dict[str, Any], str]] = [
    ("negative position", {"expect_position": -1}, "expect_position"),
    ("position not a number", {"expect_position": "x"}, "expect_position"),
    ("position past the limit", {"expect_position": 2**63}, "expect_position"),
    ("incarnation not a token", {"expect_position": 0, "expect_incarnation": "zz"}, "expect_incarnation"),
    ("a store key is no token", {"expect_position": 0, "expect_incarnation": "trip~0123"}, "expect_incarnation"),
    ("incarnation without position", {"expect_incarnation": "0" * 32}, "expect_incarnation"),
]


@pytest.mark.parametrize(("args", "field"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_conditions_are_tool_errors_naming_the_field(mem: Memory, args: dict[str, Any], field: str) -> None:
    [(is_error, text)] = _appends(mem, [{"message": say("a"), **args}])
    assert is_error and field in text
    assert contents(mem) == []


def test_the_token_pattern_is_the_services() -> None:
    assert mcp_server.INCARNATION_PATTERN == schemas.INCARNATION_PATTERN


# (id, the message): refused by the library; the tool names its field as Memory.append
# does, not as the batch it now appends through (`messages[0].role`)
BAD_MESSAGES: list[tuple[str, dict[str, Any]]] = [
    ("unknown role", {"role": "moderator", "content": "x"}),
    ("content not text or parts", {"role": "user", "content": 3}),
]


@pytest.mark.parametrize("message", [b[1] for b in BAD_MESSAGES], ids=[b[0] for b in BAD_MESSAGES])
def test_a_refused_message_is_named_as_the_library_names_it(mem: Memory, message: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as library:
        mem.append("other", message, namespace=NS)
    [(is_error, text)] = _appends(mem, [{"message": message, "expect_position": 0}])
    assert is_error and text.endswith(str(library.value)) and "messages[0]" not in text
    assert contents(mem) == []
