"""A LangGraph sync whose new messages alone are too many for one append is written in
chunks (a first sync of a long imported state).

It was refused by the batch's own limit ("messages: 10005 messages exceed the batch
limit of 10000"), and over a `Client` by the server's body limit well before that (413,
`max_body_bytes`, 2 MiB by default), so the state was never stored. Appends, unlike an
edit, may be chunked: each chunk is an ordinary append, at most the batch limit and,
over a `Client`, within the server's `max_body_bytes` (read from its /v1/limits),
conditional on where the previous chunk left the log. A writer appending between two
chunks refuses the next, and the sync goes on from what the log holds; a sync killed
between chunks leaves the chunks before stored, and the next one appends the rest:
each message stored once, none lost.

A real `create_react_agent` graph with the LangGraph hooks and a checkpointer; real
SQLite; a real server (the app over HTTP on loopback) configured with a small
`max_body_bytes` so that a few hundred messages need several chunks (the local case holds
a state just past the library's batch limit, lowered to LOCAL_BATCH_LIMIT for it); the other
writer is a second real `Client` (or worker), run between two chunks from an httpx
response hook of the syncing client's own `http_client`; the interrupted sync is a real
process, killed (SIGKILL) while it waits between two chunks.

Fails on the code before: the local state is refused (ValidationError), each `Client`
case by the server's 413 (ServiceError) with nothing stored."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("langgraph")
from chunked_appends import (
    LONG,
    MAX_BODY_BYTES,
    after_first_chunk,
    as_older,
    hash_memory,
    imported_messages,
    recording,
    small_server,
)
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from service_helpers import TOKEN_ACME

from tiermem import memory
from tiermem.adapters import _common
from tiermem.adapters._common import MemoryLike, log_pages, visible
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.adapters.langchain import METADATA_ID_KEY, to_openai
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.client import Client
from tiermem.tiers.embed_onnx import FastEmbedder

REPLY = "Noted, all of it."
LOCAL_BATCH_LIMIT = 200  # messages per append in the local case: 205 go in two chunks, as 10,005 did at 10,000
LOCAL_HISTORY_PAGE = 64  # rows per log read in the local case: 205 rows in four pages
CHILD_TIMEOUT_S = 120.0  # a child process imports tiermem and LangChain: seconds, more on a loaded machine
OLDER_CLIENT = "older server's client"


class FakeToolModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> FakeToolModel:
        return self


def _agent(mem: MemoryLike, conv: str) -> Any:
    from langgraph.prebuilt import create_react_agent

    hooks = TiermemHooks(mem, conv, budget=500)
    model = FakeToolModel(messages=iter([AIMessage(REPLY, id="reply")]))
    return create_react_agent(model, [], pre_model_hook=hooks.pre_model_hook,
                              post_model_hook=hooks.post_model_hook, checkpointer=InMemorySaver())


def _thread(conv: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": conv}}


def _ids(mem: MemoryLike, conv: str) -> list[str | None]:
    """The LangChain id of each visible row, in the view's order."""
    return [(r.metadata or {}).get(METADATA_ID_KEY) for r in visible(mem, conv)]


def _written_once(mem: MemoryLike, conv: str) -> list[str | None]:
    """Every row's id (retractions aside), after checking no row was retracted: nothing
    was written twice and hidden."""
    rows = log_pages(mem, conv)
    assert all(r.body.get("type") != "tiermem.retract" for r in rows)
    return [(r.metadata or {}).get(METADATA_ID_KEY) for r in rows]


def test_a_local_state_past_the_batch_limit_is_stored_once_in_order(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # the library's limit lowered for this test (Memory's check and the adapters' chunking
    # both read memory.MAX_BATCH_MESSAGES when called): the same refusal and chunks as at
    # 10,000, without storing 10,005 messages (~13-17 s of a single-process run); the log
    # read back a page at a time over several pages, as 10,005 rows are at 2,000 a page
    monkeypatch.setattr(memory, "MAX_BATCH_MESSAGES", LOCAL_BATCH_LIMIT)
    monkeypatch.setattr(_common, "HISTORY_PAGE", LOCAL_HISTORY_PAGE)
    state = imported_messages(memory.MAX_BATCH_MESSAGES + 5)
    # the hash embedder: what is measured is the batch, not the model
    with hash_memory(tmp_path / "data") as mem:
        _agent(mem, "imported").invoke({"messages": state}, _thread("imported"))
        assert _written_once(mem, "imported") == [m.id for m in state] + ["reply"]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    with small_server(tmp_path_factory.mktemp("lg-long") / "data", embedder) as got:
        yield got


@pytest.fixture(params=["client", OLDER_CLIENT])
def base(request: pytest.FixtureRequest, url: str) -> Iterator[str]:
    """The server, or the server behind a proxy hiding `conditional_appends` from its
    /v1/limits (an older server: the chunks go unconditional, checked after writing)."""
    with as_older(url, request.param == OLDER_CLIENT) as got:
        yield got


def test_a_client_state_past_the_servers_body_limit_goes_in_chunks_within_it(
        base: str, tmp_path: Path) -> None:
    conv = f"imported-{tmp_path.name}"  # the server's store outlives a test
    state = imported_messages(LONG)
    client, sizes, _statuses = recording(base)
    with client:
        _agent(client, conv).invoke({"messages": state}, _thread(conv))
        assert _written_once(client, conv) == [m.id for m in state] + ["reply"]
    # several chunks, each request within the server's limit; the reply is one more batch
    assert len(sizes) > 2 and max(sizes) <= MAX_BODY_BYTES


def test_the_chunks_measured_are_what_is_sent(url: str) -> None:
    """Each chunk's measure holds the request's body as httpx sends it, and the chunks
    fill the server's limit (none could take the next message)."""
    # here, not at the top: the other tests run on the code before, which has neither
    from tiermem.adapters._common import append_chunks
    from tiermem.client import batch_request_bytes

    client, sizes, _statuses = recording(url)
    bodies = to_openai(imported_messages(LONG))
    with client:
        chunks = append_chunks(client, bodies)
        for k, chunk in enumerate(chunks):
            client.append_many(f"measured-{k}", chunk)
    assert [c for chunk in chunks for c in chunk] == bodies
    assert all(sent <= batch_request_bytes(chunk) <= MAX_BODY_BYTES for sent, chunk in zip(sizes, chunks, strict=True))
    assert all(batch_request_bytes([*chunk, nxt[0]]) > MAX_BODY_BYTES for chunk, nxt in itertools.pairwise(chunks))


# what the other writer does once the first chunk is stored, and the view it leaves
RACES = [
    # another conversation's turn lands between two chunks: the rest comes after it
    "a message of another writer",
    # another worker syncs the same state up to past the next chunk: each message once
    "another worker on the same state",
]


@pytest.mark.parametrize("race", RACES)
def test_a_writer_between_two_chunks_loses_or_doubles_nothing(request: pytest.FixtureRequest, base: str,
                                                              tmp_path: Path, race: str) -> None:
    conv = f"raced-{tmp_path.name}"
    state = imported_messages(LONG)
    other = Client(base, token=TOKEN_ACME)

    def act() -> None:
        if race == RACES[0]:
            other.append(conv, {"role": "user", "content": "Also: a window seat.", "metadata": {
                METADATA_ID_KEY: "theirs"}})
        else:
            ConversationSync(other, conv).sync(state[:LONG * 3 // 4])

    between, fired = after_first_chunk(lambda: len(_ids(other, conv)), act)
    client, _sizes, statuses = recording(base, between)
    with client, other:
        ConversationSync(client, conv).sync(state)
        first = fired[0]
        assert 0 < first < LONG
        want = [m.id for m in state]
        if race == RACES[0]:
            want = [*want[:first], "theirs", *want[first:]]
        assert _ids(client, conv) == want
        if request.node.callspec.params["base"] != OLDER_CLIENT:
            # the next chunk was refused (nothing of it written), and nothing written twice, even hidden
            assert statuses.count(httpx.codes.CONFLICT) == 1
            assert _written_once(client, conv) == want


def test_messages_without_ids_a_chunk_stored_are_not_written_again(base: str, tmp_path: Path) -> None:
    """A message without an id is always appended by a sync, but within one sync a chunk
    refused by another writer does not send again what the chunks before it stored."""
    conv = f"no-ids-{tmp_path.name}"
    state = [HumanMessage(m.content) if isinstance(m, HumanMessage) else AIMessage(m.content)
             for m in imported_messages(LONG)]
    other = Client(base, token=TOKEN_ACME)
    between, fired = after_first_chunk(lambda: len(_ids(other, conv)),
                                       lambda: other.append(conv, {"role": "user", "content": "Also: a window seat."}))
    client, _sizes, _statuses = recording(base, between)
    with client, other:
        assert ConversationSync(client, conv).sync(state) == LONG
        want = [m.content for m in state]
        want.insert(fired[0], "Also: a window seat.")
        assert [r.body.get("content") for r in log_pages(client, conv)] == want


def test_chunks_refused_every_round_are_a_clear_error(url: str, tmp_path: Path) -> None:
    """Another writer appending before every chunk is sent: after `MAX_EDIT_ROUNDS`
    refusals the sync raises `EditConflict` naming the chunk, nothing of it written."""
    from tiermem.adapters._langchain_sync import MAX_EDIT_ROUNDS
    from tiermem.errors import EditConflict

    conv = f"busy-{tmp_path.name}"
    with Client(url, token=TOKEN_ACME) as other:
        client, _sizes, statuses = recording(url, before_batch=lambda: other.append(
            conv, {"role": "user", "content": "And parking?"}))
        with client, pytest.raises(EditConflict) as err:
            ConversationSync(client, conv).sync(imported_messages(LONG))
        assert err.value.chunk and statuses == [httpx.codes.CONFLICT] * MAX_EDIT_ROUNDS
        assert str(err.value) == (
            f"conversation {conv!r}: the next chunk of the state's new messages (too many for one append) was "
            f"refused {MAX_EDIT_ROUNDS} times in a row, since other writers appended to the conversation between "
            "each read and its write; the chunks before it stand, the rest is not written: sync again")
        assert _written_once(other, conv) == [None] * MAX_EDIT_ROUNDS  # the other writer's alone


CHILD = textwrap.dedent('''
    import sys, time
    import httpx
    from langchain_core.messages import AIMessage, HumanMessage
    from tiermem.adapters._langchain_sync import ConversationSync
    from tiermem.client import Client

    url, token, conv, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    state = [HumanMessage(f"imported question {i}: what about item {i}?", id=f"h{i}") if i % 2 == 0
             else AIMessage(f"imported answer {i}: item {i} is fine.", id=f"a{i}") for i in range(n)]

    def answered(r):
        if r.request.url.path.endswith("/messages:batch") and r.is_success:
            print("chunk", flush=True)
            time.sleep(3600)  # killed here, between two chunks

    http = httpx.Client(event_hooks={"response": [answered]})
    ConversationSync(Client(url, token=token, http_client=http), conv).sync(state)
    print("done", flush=True)
''')


def test_a_sync_killed_between_chunks_is_resumed_by_the_next(url: str, tmp_path: Path) -> None:
    conv = f"killed-{tmp_path.name}"
    state = imported_messages(LONG)
    child = subprocess.Popen([sys.executable, "-c", CHILD, url, TOKEN_ACME, conv, str(LONG)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "chunk"  # the first chunk is stored
    finally:
        child.kill()
        child.wait(CHILD_TIMEOUT_S)
    with Client(url, token=TOKEN_ACME) as client:
        stored = _ids(client, conv)
        assert 0 < len(stored) < LONG and stored == [m.id for m in state[:len(stored)]]
        started = time.monotonic()
        _agent(client, conv).invoke({"messages": state}, _thread(conv))
        assert time.monotonic() - started < CHILD_TIMEOUT_S
        assert _written_once(client, conv) == [m.id for m in state] + ["reply"]
