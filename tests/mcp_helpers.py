"""What every MCP test checks, whatever the transport: `exercise` lists the tools and
calls each one (appends, a pinned context under a budget, a history page, a search,
unpin, a refused message, a missing conversation, an unconfirmed and a confirmed erase)
on a fresh server; `check` asserts what each answer must be. `call_in_process`: one tool
call on a server over a memory in this process (no transport)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import sdk_corpus as corpus
from mcp import Client

from tiermem.adapters._common import LocalMemory

TOOLS = {"append", "context", "history", "search", "pin", "unpin", "erase"}


async def _call(client: Client, tool: str, args: dict[str, Any]) -> Any:
    r = await client.call_tool(tool, args)
    assert not r.is_error, r.content
    return r.structured_content


def call_in_process(memory: LocalMemory, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """`tool` called with `args` on `build_server(memory)` (a `Memory` or a namespace's
    view) in this process: its structured answer, the call asserted to be no error."""
    from tiermem.adapters.mcp_server import build_server

    async def run() -> dict[str, Any]:
        async with Client(build_server(memory)) as client:
            return dict(await _call(client, tool, args) or {})

    return asyncio.run(run())


async def exercise(client: Client) -> dict[str, Any]:
    listed = (await client.list_tools()).tools
    assert {t.name for t in listed} == TOOLS
    assert all(t.description and len(t.description) > 20 for t in listed)  # something a model can use
    # the per-call context the tools take is injected by the server, never an argument
    assert all("ctx" not in t.input_schema.get("properties", {}) for t in listed)
    out: dict[str, Any] = {}
    for msg in [{"role": "user", "content": "I always want a window seat."},
                {"role": "assistant", "content": "Noted: window seat."},
                *corpus.responses_conversation()[3:8],  # reasoning, parallel calls and their outputs
                {"role": "user", "content": "Which seat do I like?"}]:
        await _call(client, "append", {"conversation_id": "trip", "message": msg})
    await _call(client, "pin", {"conversation_id": "trip", "position": 0, "priority": 90})
    out["context"] = await _call(client, "context", {"conversation_id": "trip", "query": "Which seat do I like?",
                                                     "budget": 400})
    out["history"] = await _call(client, "history", {"conversation_id": "trip", "start": 1, "limit": 3})
    out["search"] = await _call(client, "search", {"query": "window seat", "conversation_id": "trip"})
    assert (await _call(client, "unpin", {"conversation_id": "trip", "position": 0})) == {"pinned": False}
    bad = await client.call_tool("append", {"conversation_id": "trip", "message": {"role": "moderator",
                                                                                   "content": "x"}})
    out["bad"] = (bad.is_error, bad.content[0].text)  # type: ignore[union-attr]
    out["after_bad"] = await _call(client, "history", {"conversation_id": "trip"})
    missing = await client.call_tool("history", {"conversation_id": "nope"})
    out["missing"] = (missing.is_error, missing.content[0].text)  # type: ignore[union-attr]
    # erase: refused without the id repeated (nothing erased), then done with it
    await _call(client, "append", {"conversation_id": "scratch", "message": {"role": "user", "content": "forget me"}})
    unconfirmed = await client.call_tool("erase", {"conversation_id": "scratch", "confirm": "yes"})
    out["unconfirmed"] = (unconfirmed.is_error, unconfirmed.content[0].text)  # type: ignore[union-attr]
    out["still_there"] = await _call(client, "history", {"conversation_id": "scratch"})
    out["erased"] = await _call(client, "erase", {"conversation_id": "scratch", "confirm": "scratch"})
    gone = await client.call_tool("history", {"conversation_id": "scratch"})
    out["gone"] = gone.is_error
    return out


def check(out: dict[str, Any]) -> None:
    ctx = out["context"]
    assert ctx["tokens"] <= 400 and ctx["messages"][-1] == {"role": "user", "content": "Which seat do I like?"}
    assert any("window seat" in json.dumps(m) for m in ctx["messages"][:-1])
    assert ctx["plan"]["items"] and "query class" in ctx["explain"]
    assert [m["position"] for m in out["history"]["messages"]] == [1, 2, 3] and out["history"]["next_start"] == 4
    assert out["history"]["messages"][1]["message"] == corpus.responses_conversation()[3]  # stored as given
    assert out["search"]["hits"] and out["search"]["hits"][0]["position"] in (0, 1)
    assert out["bad"][0] and "role" in out["bad"][1] and "moderator" in out["bad"][1]
    # the refused message wrote nothing
    assert len(out["after_bad"]["messages"]) == 8 and out["after_bad"]["next_start"] is None
    assert out["missing"][0] and "not found" in out["missing"][1]
    assert out["unconfirmed"][0] and "confirm" in out["unconfirmed"][1] and len(out["still_there"]["messages"]) == 1
    assert out["erased"]["erased"] and out["erased"]["messages"] == 1 and "forget me" not in json.dumps(out["erased"])
    assert out["gone"]


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions an MCP client raised, out of the exception groups its task groups
    wrap them in."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in leaves(e)]
    return [exc]
