"""A LangChain/LangGraph edit whose one batch fits `max_batch_messages` but whose request
passes a `Client`'s server's `max_body_bytes`.

An edit is one batch (a retraction and a copy of each visible row from the edited one
on, then the state's new messages: `_langchain_sync`); it was sent and refused by the
server as a bare 413 `ServiceError`. It is now refused before sending, as `EditTooLong`
naming `max_body_bytes`, the request's bytes and how far an edit of messages that large
may reach, nothing written; an edit of that reach is written. The refusal holds the
bytes this process sends, not the upper bound the chunks are cut by: an edit of
non-ASCII text within the limit is written.

A real server (the app over HTTP on loopback, real SQLite) with a small
`max_body_bytes`; `ConversationSync` over a real `Client`.

Fails on the code before: the refusal was the server's 413 (ServiceError)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langchain_core")
from client_helpers import served
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from service_helpers import TOKEN_ACME

from tiermem.adapters._common import visible
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.adapters.langchain import to_openai
from tiermem.client import Client, batch_request_bytes
from tiermem.errors import EditTooLong
from tiermem.tiers.embed_onnx import FastEmbedder

MAX_BODY_BYTES = 8192  # the server's: at least its max_content_bytes (client_helpers' 4096)
# messages of about 90 bytes on the wire: an edit of the first (a retraction and a copy
# of each, about 200 bytes) is some 24 KiB, a few hundred messages within the batch limit
STATE = 120
# non-ASCII messages: 3 bytes a character as sent, 6 as the chunks' bound counts them
CJK_STATE = 8
CJK_CHARS = 100


def _state(n: int) -> list[BaseMessage]:
    return [HumanMessage(f"question {i}: what about item {i}?", id=f"h{i}") if i % 2 == 0
            else AIMessage(f"answer {i}: item {i} is fine.", id=f"a{i}") for i in range(n)]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("lc-edit-bytes") / "data", embedder,
                max_body_bytes=MAX_BODY_BYTES) as (got, _):
        yield got


def test_an_edit_past_the_servers_body_limit_is_refused_naming_it(url: str, tmp_path: Path) -> None:
    conv = f"edit-bytes-{tmp_path.name}"  # the server's store outlives a test
    state = _state(STATE)
    with Client(url, token=TOKEN_ACME) as client:
        sync = ConversationSync(client, conv)
        sync.sync(state)
        rows = len(client.history(conv))

        edited = [HumanMessage("question 0, edited", id="h0"), *state[1:]]
        with pytest.raises(EditTooLong) as err:
            sync.sync(edited)
        e = err.value
        assert (e.field, e.unit, e.limit, e.rows, e.reach, e.position) == (
            "messages", "bytes", MAX_BODY_BYTES, 2 * STATE, STATE, 0)
        assert e.value == e.size and e.size > MAX_BODY_BYTES
        assert 0 < e.farthest < STATE
        assert str(e) == (
            f"messages: conversation {conv!r}: the edit of the stored message at position 0 reaches back over "
            f"{STATE} visible messages, and an edit is written as one batch (a retraction and a copy of each: "
            f"{2 * STATE} messages, {e.size} bytes as a request), over the server's "
            f"max_body_bytes of {MAX_BODY_BYTES} bytes; nothing was written. An edit may reach back over at most "
            f"{e.farthest} messages as large as the latest ones: put the stored version back in the state, or "
            "remove the message from it (RemoveMessage), and add the correction as a new message")
        assert len(client.history(conv)) == rows  # nothing written

        # an edit reaching back as far as the error says is written
        far = STATE - e.farthest
        edited = [*state[:far], HumanMessage(f"{state[far].content} edited", id=state[far].id), *state[far + 1:]]
        if isinstance(state[far], AIMessage):
            edited[far] = AIMessage(f"{state[far].content} edited", id=state[far].id)
        sync.sync(edited)
        shown = [r.body.get("content") for r in visible(client, conv)]
        assert shown == [m.content for m in edited]


def test_a_non_ascii_edit_within_the_limit_as_sent_is_written(url: str, tmp_path: Path) -> None:
    """Its batch passes the limit as the chunks' bound counts it (6 bytes a character),
    not as it is sent (3): it is written, as the server takes it."""
    conv = f"edit-cjk-{tmp_path.name}"
    state: list[BaseMessage] = [HumanMessage(f"{i} " + "漢" * CJK_CHARS, id=f"c{i}") for i in range(CJK_STATE)]
    edited = [HumanMessage("0 edited " + "字" * CJK_CHARS, id="c0"), *state[1:]]
    # the edit's batch: a retraction and a copy of each, about as large as the state twice
    bodies = to_openai(edited) * 2
    sent = len(json.dumps({"messages": bodies, "format": "openai", "expect_position": CJK_STATE},
                          ensure_ascii=False, separators=(",", ":")).encode())  # as httpx 0.28 and later send it
    assert sent < MAX_BODY_BYTES < batch_request_bytes(bodies)
    with Client(url, token=TOKEN_ACME) as client:
        sync = ConversationSync(client, conv)
        sync.sync(state)
        sync.sync(edited)
        assert [r.body.get("content") for r in visible(client, conv)] == [m.content for m in edited]
