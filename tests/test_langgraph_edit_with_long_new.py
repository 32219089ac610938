"""A LangGraph sync with an edit of a stored message and more new messages than one
append takes beside it.

It was refused as `EditTooLong` saying an edit may reach back over "at most 0 messages"
(the new messages alone filled the batch), an edit of one message, and with a `Client`
past its server's `max_body_bytes` likewise, though the edit's own rows fit one append.
The edit's batch (its retractions and copies) is now written first, conditional on the
log it was made from, and the new messages after it in chunks, each conditional on where
the previous one left the log (`_langchain_sync`): the view is the state, each message
once.

Real SQLite with a state of `MAX_BATCH_MESSAGES` new messages and the hash embedder; a
real server (the app over HTTP on loopback) with a small `max_body_bytes` and a real
`Client`, directly and behind a proxy hiding `conditional_appends` (an older server: the
chunks go as they are, checked after writing).

Fails on the code before: `EditTooLong` ("at most 0 messages"; over the `Client`, the
body limit)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langchain_core")
from client_helpers import served
from flaky_proxy import CLOSE, flaky_proxy
from hash_embedder import HashEmbedder
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from service_helpers import TOKEN_ACME

from tiermem import Config, Memory
from tiermem.adapters._common import MemoryLike, log_pages, visible
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.adapters.langchain import METADATA_ID_KEY
from tiermem.client import Client
from tiermem.memory import MAX_BATCH_MESSAGES
from tiermem.tiers.embed_onnx import FastEmbedder

STORED = 6  # messages stored before the edit
MAX_BODY_BYTES = 8192  # the server's: at least its max_content_bytes (client_helpers' 4096)
LONG = 300  # new messages of about 90 bytes on the wire: several chunks under the limit
OLDER_SERVER = "older server"


def _state(n: int, tag: str = "") -> list[BaseMessage]:
    return [HumanMessage(f"question {tag}{i}: what about item {i}?", id=f"h{tag}{i}") if i % 2 == 0
            else AIMessage(f"answer {tag}{i}: item {i} is fine.", id=f"a{tag}{i}") for i in range(n)]


def _edit_then_append(mem: MemoryLike, conv: str, new: int) -> list[BaseMessage]:
    """Sync `STORED` messages, then the state with its first one edited and `new` more;
    returns that state."""
    sync = ConversationSync(mem, conv)
    stored = _state(STORED)
    sync.sync(stored)
    state = [HumanMessage("question 0, edited", id="h0"), *stored[1:], *_state(new, "n")]
    assert sync.sync(state) == 1 + new  # the edit and each new message, once
    return state


def _check(mem: MemoryLike, conv: str, state: list[BaseMessage]) -> None:
    assert [r.body.get("content") for r in visible(mem, conv)] == [m.content for m in state]
    # the log: the stored rows, the edit's retractions and copies, the new messages once each
    rows = [r for r in log_pages(mem, conv) if r.body.get("type") != "tiermem.retract"]
    assert [(r.metadata or {}).get(METADATA_ID_KEY) for r in rows] == [
        *(m.id for m in _state(STORED)), *(m.id for m in state)]


def test_a_local_edit_with_a_batch_of_new_messages_is_written(tmp_path: Path) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as mem:
        _check(mem, "edited", _edit_then_append(mem, "edited", MAX_BATCH_MESSAGES))


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("lg-edit-long") / "data", embedder,
                max_body_bytes=MAX_BODY_BYTES) as (got, _):
        yield got


@pytest.fixture(params=["server", OLDER_SERVER])
def base(request: pytest.FixtureRequest, url: str) -> Iterator[str]:
    """The server, or the server behind a proxy hiding `conditional_appends` from its
    /v1/limits (an older server)."""
    if request.param == OLDER_SERVER:
        with flaky_proxy(url, CLOSE, times=0, hide=("conditional_appends",)) as proxy:
            yield proxy.url
    else:
        yield url


def test_a_client_edit_with_new_messages_past_the_body_limit_is_written(base: str, tmp_path: Path) -> None:
    conv = f"edited-{tmp_path.name}"  # the server's store outlives a test
    with Client(base, token=TOKEN_ACME) as client:
        _check(client, conv, _edit_then_append(client, conv, LONG))
