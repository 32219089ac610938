"""A message whose request alone passes a `Client`'s server's `max_body_bytes`, in a
LangChain `add_messages` or a LangGraph sync long enough to go in chunks.

The chunks put it alone and the server refused it (a bare 413 `ServiceError`), after
the chunks before it were written. It is now refused before any chunk is sent, as
`RequestTooLarge` (a `LimitExceeded`) naming the message's index among the caller's
messages and the limit, nothing written. A message past the limit only by the bound the
chunks are cut by (non-ASCII text: 6 bytes a character there, 3 as sent) is not refused:
it goes alone and is stored.

A real server (the app over HTTP on loopback, real SQLite) with a small
`max_body_bytes`; real `Client`s.

Fails on the code before: the server's 413 (ServiceError), with the chunks before it
stored."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")
from client_helpers import MAX_CONTENT_BYTES, served
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from service_helpers import TOKEN_ACME

from tiermem.adapters._common import MemoryLike, log_pages
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.client import Client
from tiermem.errors import LimitExceeded
from tiermem.tiers.embed_onnx import FastEmbedder

MAX_BODY_BYTES = 8192  # the server's: at least its max_content_bytes (client_helpers' 4096)
LONG = 200  # messages of about 90 bytes on the wire: several chunks under the limit
BIG_AT = 150  # where the message too large alone stands among them
# a tool result at the content limit with an artifact of as much again: past the body
# limit alone, within the metadata limit (16 KiB by default)
BIG_CONTENT = "r" * MAX_CONTENT_BYTES
BIG_ARTIFACT = {"raw": "a" * MAX_CONTENT_BYTES}
# a CJK text within the content limit as UTF-8 (3 bytes a character)
CJK_CHARS = MAX_CONTENT_BYTES // 3


def _state(n: int) -> list[BaseMessage]:
    return [HumanMessage(f"question {i}: what about item {i}?", id=f"h{i}") if i % 2 == 0
            else AIMessage(f"answer {i}: item {i} is fine.", id=f"a{i}") for i in range(n)]


def _with(state: list[BaseMessage], at: int, message: BaseMessage) -> list[BaseMessage]:
    calls = [{"name": "fetch", "args": {}, "id": "call-big"}]
    return [*state[:at - 1], AIMessage("", tool_calls=calls, id="calls"), message, *state[at + 1:]]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("lc-big-message") / "data", embedder,
                max_body_bytes=MAX_BODY_BYTES) as (got, _):
        yield got


def _add(mem: MemoryLike, conv: str, messages: list[BaseMessage]) -> Any:
    return TiermemChatMessageHistory(mem, conv).add_messages(messages)


def _sync(mem: MemoryLike, conv: str, messages: list[BaseMessage]) -> Any:
    return ConversationSync(mem, conv).sync(messages)


# the two writers of a long list of LangChain messages
WRITERS: list[Callable[[MemoryLike, str, list[BaseMessage]], Any]] = [
    _add,  # TiermemChatMessageHistory.add_messages
    _sync,  # a LangGraph sync (TiermemHooks, the agent middleware)
]


@pytest.mark.parametrize("write", WRITERS)
def test_a_message_over_the_body_limit_alone_is_refused_naming_it(url: str, tmp_path: Path,
                                                                   write: Callable[..., Any]) -> None:
    conv = f"big-{write.__name__}-{tmp_path.name}"  # the server's store outlives a test
    big = ToolMessage(BIG_CONTENT, tool_call_id="call-big", artifact=BIG_ARTIFACT, id="big")
    messages = _with(_state(LONG), BIG_AT, big)
    with Client(url, token=TOKEN_ACME) as client:
        with pytest.raises(LimitExceeded) as err:
            write(client, conv, messages)
        e = err.value
        assert type(e).__name__ == "RequestTooLarge"
        assert (e.field, e.unit, e.limit) == (f"messages[{BIG_AT}]", "bytes", MAX_BODY_BYTES)
        assert e.value > MAX_BODY_BYTES
        assert str(e) == (
            f"messages[{BIG_AT}]: the message alone takes {e.value} bytes as an append's request, over the server's "
            f"max_body_bytes of {MAX_BODY_BYTES} bytes; nothing was written: store it smaller (its content, "
            "metadata or artifact), or raise the server's max_body_bytes")
        assert log_pages(client, conv) == []  # nothing of any chunk


@pytest.mark.parametrize("write", WRITERS)
def test_a_message_over_the_limit_only_by_the_chunks_bound_is_stored(url: str, tmp_path: Path,
                                                                     write: Callable[..., Any]) -> None:
    conv = f"cjk-{write.__name__}-{tmp_path.name}"
    text = "漢" * CJK_CHARS
    # past the limit as the chunks' bound counts it (json.dumps' default: \\uXXXX), within it as sent
    assert len(json.dumps({"content": text})) > MAX_BODY_BYTES > 2 * len(text.encode())
    messages = [*_state(LONG)[:BIG_AT], HumanMessage(text, id="cjk"), *_state(LONG)[BIG_AT:]]
    with Client(url, token=TOKEN_ACME) as client:
        write(client, conv, messages)
        assert [r.body.get("content") for r in log_pages(client, conv)] == [m.content for m in messages]
