"""Over stdio, the `mcp` package's own client gets an answer to every call holding a big
integer: one of up to `MAX_JSON_INT_DIGITS` digits (a uint256 amount has 78) is stored and
read back exactly, as in process and over HTTP; one of more is refused with invalid
params (-32602) carrying the call's id, naming the place down to the integer and the
limit, and nothing is written. A tool argument tiermem reads as a number (`k`) keeps its
own small range: a 78-digit `k` is the tool's error naming it.

Fails on the code before: `tiermem mcp` answered a line holding an integer of more than 40
digits with a parse error (-32700) whose id was null. The client matches an answer to its
call by id only, so the call was never answered: the ClientSession (read timeout None by
default) waited for ever; here its read timeout is bounded, and the call timed out.

The real `tiermem mcp` in a child process, spoken to by `mcp.Client` over stdio."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_stdio_helpers import child_env

from tiermem.tiers.models import MAX_JSON_INT_DIGITS

NS = "acme"
CONV = "chain"
READ_TIMEOUT_S = 30.0  # per call, initialize included (the child imports 1-2 s); a lost answer times out
INVALID_PARAMS = -32602
U256 = 2**256 - 1
AT_LIMIT = 10**MAX_JSON_INT_DIGITS - 1
PAST_LIMIT = 10**MAX_JSON_INT_DIGITS  # one digit more


def _part(n: int) -> dict[str, Any]:
    return {"conversation_id": CONV, "message": {"role": "user", "content": [
        {"type": "text", "text": "approve max", "amount": n}]}}


def _metadata(n: int) -> dict[str, Any]:
    return {"conversation_id": CONV, "message": {"role": "user", "content": "approve max",
                                                 "metadata": {"amount_wei": n}}}


# (tool, arguments, the integer, what is answered: "stored", "tool error" naming the
# word given, or "refused" naming the place given)
CASES: list[tuple[str, dict[str, Any], int, str, str]] = [
    # a uint256 in a content part: the call hung before (78 > 40 digits)
    ("append", _part(U256), U256, "stored", ""),
    # ... in the metadata
    ("append", _metadata(-U256), -U256, "stored", ""),
    # the most digits taken
    ("append", _part(AT_LIMIT), AT_LIMIT, "stored", ""),
    # one digit past: refused, answered with the call's id (it hung before: id null)
    ("append", _part(PAST_LIMIT), PAST_LIMIT, "refused", "params.arguments.message.content.0.amount"),
    # ... in the metadata
    ("append", _metadata(PAST_LIMIT), PAST_LIMIT, "refused", "params.arguments.message.metadata.amount_wei"),
    # a number tiermem reads: its own range, a tool error (it hung before)
    ("search", {"query": "approve", "k": U256}, U256, "tool error", "k"),
]
IDS = ["uint256-part", "uint256-metadata", "at-limit-part", "past-limit-part", "past-limit-metadata", "uint256-k"]


def _params(data_dir: Path) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, env=child_env(), args=[
        "-c", "from tiermem.cli import main; main()", "--data-dir", str(data_dir), "--namespace", NS, "mcp"])


@pytest.mark.parametrize(("tool", "arguments", "n", "answered", "named"), CASES, ids=IDS)
def test_a_call_holding_a_big_integer_is_answered(tmp_path: Path, tool: str, arguments: dict[str, Any], n: int,
                                                  answered: str, named: str) -> None:
    async def run() -> tuple[Any, Any]:
        async with Client(_params(tmp_path / "d"), read_timeout_seconds=READ_TIMEOUT_S) as client:
            try:
                got: Any = await client.call_tool(tool, arguments)
            except MCPError as exc:  # a JSON-RPC error answered to this call (a timeout is no such answer)
                got = exc
            history = await client.call_tool("history", {"conversation_id": CONV})
            return got, history

    got, history = asyncio.run(run())
    rows = [] if history.is_error else history.structured_content["messages"]
    if answered == "stored":
        assert not isinstance(got, MCPError) and got.is_error is False, got
        (row,) = rows
        stored = row["message"]["content"][0]["amount"] if "metadata" not in arguments["message"] \
            else row["metadata"]["amount_wei"]
        assert stored == n  # the integer exactly
    elif answered == "tool error":
        assert not isinstance(got, MCPError) and got.is_error is True, got
        assert named in got.content[0].text, got
        assert rows == []
    else:
        assert isinstance(got, MCPError) and got.code == INVALID_PARAMS, got
        assert f"{named}: is an integer of {MAX_JSON_INT_DIGITS + 1:,} digits" in got.message, got.message
        assert f"the limit of {MAX_JSON_INT_DIGITS:,}" in got.message
        assert rows == []  # nothing written
