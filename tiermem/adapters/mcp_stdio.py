"""`tiermem mcp`'s stdio transport: the `mcp` package's `stdio_server`, fed the lines of
stdin after tiermem has checked them as the HTTP service checks a /v1/mcp body.

The package's own reader decodes stdin with `errors="replace"` and drops a line its JSON
parser refuses without answering it: a tool call holding a lone UTF-16 surrogate (what
`JSON.stringify` writes for a cut emoji), an integer past the parser's range or JSON
nested past its recursion limit was never answered, so the host waited on the call until
its own timeout, and bytes that are not UTF-8 were stored as U+FFFD.

Invariants: every line that is not blank gets an answer. A line is passed to the server
exactly as sent when it is UTF-8 and the package's parser takes it (so what the server
answers is unchanged); any other is answered here and reaches no tool, so nothing is
written: with the JSON-RPC error /v1/mcp answers the same body
(`tiermem.service.guard.mcp_message_refusal`: a parse error with `id` null where it did
not parse, invalid params with the request's id where it parsed but holds a lone
surrogate or nests too deep), or, for JSON the guard takes that is no JSON-RPC message,
an invalid request. Refusals are written through the server's own write stream, so an
answer is never interleaved with another. While serving, fd 0 points at the null
device (as the package's reader leaves it), so nothing else in the process reads the
wire; it is restored after.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, BinaryIO, cast

import anyio
import mcp_types as types
from anyio.abc import ObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from tiermem.adapters.mcp_http import JSONRPC_INVALID_REQUEST, jsonrpc_refusal, request_id_of

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

STDIN_FD = 0
NOT_JSONRPC = "not a JSON-RPC 2.0 message (a request, notification or response object)"


def line_refusal(raw: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error to answer the stdin line `raw` (its newline stripped) with, or
    None to pass it to the server: UTF-8 that the `mcp` package parses as a message."""
    try:
        types.jsonrpc_message_adapter.validate_json(raw.decode("utf-8"), by_name=False)
        return None
    except (UnicodeDecodeError, ValueError):  # pydantic's ValidationError is a ValueError
        pass
    # not at import: the service's guard costs `tiermem mcp` a second of imports at
    # start-up, for lines a well-behaved client never sends
    from tiermem.service.guard import mcp_message_refusal

    refusal = mcp_message_refusal(raw)
    if refusal is not None:
        return refusal
    # JSON the guard takes, but no message the package knows: answered, not dropped
    return jsonrpc_refusal(JSONRPC_INVALID_REQUEST, NOT_JSONRPC, {"detail": NOT_JSONRPC},
                           request_id_of(json.loads(raw)))


class CheckedLines:
    """stdin's lines for `stdio_server`'s reader, which iterates its `stdin` argument:
    a line it would drop unanswered or alter is answered through the server's write
    stream (`bind`) instead of being passed on."""

    def __init__(self, wire: BinaryIO) -> None:
        self._wire = anyio.wrap_file(wire)
        self._answers: ObjectSendStream[SessionMessage] | None = None
        self._bound = anyio.Event()

    def bind(self, answers: ObjectSendStream[SessionMessage]) -> None:
        self._answers = answers
        self._bound.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for raw in self._wire:
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                continue  # the package's reader would drop it too; there is nothing to answer
            refusal = line_refusal(line)
            if refusal is None:
                yield line.decode("utf-8")
                continue
            await self._bound.wait()
            assert self._answers is not None
            await self._answers.send(SessionMessage(types.JSONRPCError.model_validate(refusal)))


async def serve_stdio(server: MCPServer) -> None:
    """Serve `server` on stdin and stdout until stdin closes."""
    wire = os.fdopen(os.dup(STDIN_FD), "rb")
    saved = os.dup(STDIN_FD)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, STDIN_FD)
    os.close(null)
    try:
        lines = CheckedLines(wire)
        # stdio_server iterates its stdin for lines of text, all it asks of an AsyncFile
        async with stdio_server(stdin=cast("anyio.AsyncFile[str]", lines)) as (read_stream, write_stream):
            lines.bind(write_stream)
            # A private attribute, knowingly: mcp 2.3.0 has no public way to run an
            # MCPServer on streams given to it. Its public stdio entry,
            # `run_stdio_async` (and `run("stdio")`), opens `stdio_server()` itself, with
            # no stdin argument, and reads fd 0 with `errors="replace"`. Feeding it our
            # checked lines through fds instead (a pipe on fd 0, a relay pipe on fd 1 to
            # write refusals between its answers) fails at the end: `stdio_server` keeps its
            # duplicate of fd 1 open for the life of the process (`closefd=False`, by
            # design), so the relay never reads EOF and the last answers could be cut off.
            # Its public `middleware` never sees a line the package failed to parse (the
            # dispatcher only logs it), so it cannot answer one. The low-level `Server` is
            # public, but MCPServer keeps its own private; the package's own in-memory
            # client reads the same attribute (mcp.client._memory, "TODO: Make
            # `lowlevel_server` public"). Use that accessor once it exists.
            lowlevel = server._lowlevel_server
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
    finally:
        os.dup2(saved, STDIN_FD)
        os.close(saved)
        wire.close()


def run_stdio(server: MCPServer) -> None:
    """`tiermem mcp`: serve `server` on this process's stdin and stdout."""
    sys.stdout.flush()
    anyio.run(serve_stdio, server)
