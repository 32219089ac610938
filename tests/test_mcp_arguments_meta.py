"""An MCP tool call whose arguments hold the request's `_meta` runs: the key is dropped.

MCP reserves `_meta` for request metadata (a progress token, a host's own keys) and puts it
beside the arguments (params._meta), but some hosts put it inside them. Since every tool
refuses an argument it does not take (tests/test_mcp_unknown_arguments.py), such a host's
every call was a tool error ("_meta / Extra inputs are not permitted") and nothing was
written. Now a top-level `_meta` in the arguments is dropped before they are validated: the
call runs as without it, and any other unknown argument is still refused. Over the
in-process server and a real `tiermem mcp` child on stdio (both `build_server`), with the
real SQLite store read back."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from cold_helpers import every_row
from hash_embedder import HashEmbedder
from mcp import Client
from mcp_stdio_helpers import child_rows, started_child

from tiermem import Config, Memory
from tiermem.adapters.mcp_server import META_KEY, build_server

NS = "acme"
CONV = "trip"
FIRST = {"role": "user", "content": "Lisbon trip: window seat, no red-eyes."}
NEW_MESSAGE = {"role": "user", "content": "a new note"}
EXTRA_REFUSAL = "Extra inputs are not permitted"


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False, background_indexing=False)
    m.append(CONV, FIRST, namespace=NS)
    yield m
    m.close()


def _call(mem: Memory, tool: str, args: dict[str, Any]) -> tuple[bool, Any]:
    """(is_error, the error's text or the structured answer) of one in-process call."""
    async def run() -> tuple[bool, Any]:
        async with Client(build_server(mem.namespaced(NS))) as client:
            r = await client.call_tool(tool, args)
            return r.is_error, r.content[0].text if r.is_error else r.structured_content  # type: ignore[union-attr]

    return asyncio.run(run())


# (the `_meta` a host puts in the arguments)
METAS: list[Any] = [
    {"progressToken": 1},  # the reviewer's host: a progress token. Before: refused, nothing written
    {"progressToken": "p-7", "com.example/trace": {"id": "t1"}},  # a host's own keys too
    {},  # empty
    None,  # a null: still no argument of the tool's
]


@pytest.mark.parametrize("meta", METAS, ids=["progress", "host keys", "empty", "null"])
def test_append_with_meta_in_its_arguments_writes(mem: Memory, meta: Any) -> None:
    is_error, out = _call(mem, "append", {"conversation_id": CONV, "message": NEW_MESSAGE, META_KEY: meta})
    assert not is_error, out
    assert out["position"] == 1
    assert [m.body["content"] for m in mem.history(CONV, namespace=NS)] == [FIRST["content"], NEW_MESSAGE["content"]]


def test_the_condition_beside_meta_is_still_checked(mem: Memory) -> None:
    # the arguments are validated as without `_meta`: a stale expect_position is refused
    is_error, text = _call(mem, "append", {"conversation_id": CONV, "message": NEW_MESSAGE, "expect_position": 0,
                                           META_KEY: {"progressToken": 2}})
    assert is_error and "expect_position" in text, text
    assert len(mem.history(CONV, namespace=NS)) == 1


# (tool, a call with `_meta` and one argument the tool does not take, that argument)
STILL_REFUSED: list[tuple[str, dict[str, Any], str]] = [
    # a misspelled condition next to `_meta`: before and now refused, naming it
    ("append", {"conversation_id": CONV, "message": NEW_MESSAGE, "expect_postion": 0}, "expect_postion"),
    # `meta` without the underscore is no reserved key: refused
    ("history", {"conversation_id": CONV, "meta": {"progressToken": 3}}, "meta"),
]


@pytest.mark.parametrize(("tool", "args", "arg"), STILL_REFUSED, ids=[f"{s[0]}.{s[2]}" for s in STILL_REFUSED])
def test_other_unknown_arguments_are_still_refused(mem: Memory, tool: str, args: dict[str, Any], arg: str) -> None:
    before = every_row(mem.config.db_path)
    is_error, text = _call(mem, tool, {**args, META_KEY: {"progressToken": 4}})
    lines = text.splitlines()
    assert is_error and arg in lines and EXTRA_REFUSAL in lines[lines.index(arg) + 1], text
    assert META_KEY not in lines  # `_meta` itself is not what it names
    assert every_row(mem.config.db_path) == before


def test_reading_tools_take_meta_too(mem: Memory) -> None:
    is_error, out = _call(mem, "history", {"conversation_id": CONV, META_KEY: {"progressToken": 5}})
    assert not is_error and [m["message"]["content"] for m in out["messages"]] == [FIRST["content"]], out
    is_error, out = _call(mem, "context", {"conversation_id": CONV, "query": "seat?", META_KEY: {"progressToken": 6}})
    assert not is_error and out["tokens"] > 0, out


def test_stdio_child_takes_meta_in_the_arguments(tmp_path: Path) -> None:
    with started_child(tmp_path, CONV) as child:
        before = len(child_rows(child)["messages"])
        answer = child.call(2, "append", {"conversation_id": CONV, "message": NEW_MESSAGE,
                                          META_KEY: {"progressToken": 8}})
        assert answer["result"].get("isError") is not True, answer
        assert len(child_rows(child)["messages"]) == before + 1
