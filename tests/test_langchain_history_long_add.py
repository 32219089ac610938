"""`TiermemChatMessageHistory.add_messages` of more messages than one append takes is
written in chunks (a long imported history added at once).

It was one batch: refused by the batch's own limit past `MAX_BATCH_MESSAGES` ("messages:
10005 messages exceed the batch limit of 10000"), and over a `Client` by the server's
body limit well before that (413, `max_body_bytes`, 2 MiB by default), nothing stored.
It now goes in the chunks a LangGraph sync uses (`append_chunks`: the batch limit and,
over a `Client`, the server's `max_body_bytes` read from /v1/limits), in order, each
message once: each chunk after the first conditional on where the previous one left the
log and on its incarnation. Another writer's append between two chunks refuses the next
(nothing of it written), which goes after it; an erasure between two stops the add
(`HistoryErased`) instead of beginning the conversation again with only its tail.

Real SQLite; a real server (the app over HTTP on loopback) with a small
`max_body_bytes`, directly and behind a proxy hiding `conditional_appends` (an older
server: the chunks go as they are); the other writer is a second real `Client`, run
between two chunks from an httpx response hook of the adding client's own
`http_client`. The local case holds a history just past the library's batch limit
(lowered to LOCAL_BATCH_LIMIT for it).

Fails on the code before: the local history is refused (ValidationError), each `Client`
case by the server's 413 (ServiceError) with nothing stored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("langchain_core")
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
from service_helpers import TOKEN_ACME

from tiermem import memory
from tiermem.adapters import _common
from tiermem.adapters._common import MemoryLike, log_pages
from tiermem.adapters.langchain import METADATA_ID_KEY, TiermemChatMessageHistory
from tiermem.client import Client
from tiermem.tiers.embed_onnx import FastEmbedder

OLDER_SERVER = "older server"
LOCAL_BATCH_LIMIT = 200  # messages per append in the local case: 205 go in two chunks, as 10,005 did at 10,000
LOCAL_HISTORY_PAGE = 64  # rows per log read in the local case: 205 rows in four pages


def _rows(mem: MemoryLike, conv: str) -> list[str | None]:
    """Every row's LangChain id in log order, after checking no row is a control row:
    nothing was written twice and hidden."""
    rows = log_pages(mem, conv)
    assert all(not str(r.body.get("type", "")).startswith("tiermem.") for r in rows)
    return [(r.metadata or {}).get(METADATA_ID_KEY) for r in rows]


def test_a_local_history_past_the_batch_limit_is_stored_once_in_order(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # the library's limit lowered for this test (Memory's check and the adapters' chunking
    # both read memory.MAX_BATCH_MESSAGES when called): the same refusal and chunks as at
    # 10,000, without storing 10,005 messages (~13-17 s of a single-process run); the log
    # read back a page at a time over several pages, as 10,005 rows are at 2,000 a page
    monkeypatch.setattr(memory, "MAX_BATCH_MESSAGES", LOCAL_BATCH_LIMIT)
    monkeypatch.setattr(_common, "HISTORY_PAGE", LOCAL_HISTORY_PAGE)
    history = imported_messages(memory.MAX_BATCH_MESSAGES + 5)
    # the hash embedder: what is measured is the batch, not the model
    with hash_memory(tmp_path / "data") as mem:
        TiermemChatMessageHistory(mem, "imported").add_messages(history)
        assert _rows(mem, "imported") == [m.id for m in history]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    with small_server(tmp_path_factory.mktemp("lc-long") / "data", embedder) as got:
        yield got


@pytest.fixture(params=["server", OLDER_SERVER])
def base(request: pytest.FixtureRequest, url: str) -> Iterator[str]:
    """The server, or the server behind a proxy hiding `conditional_appends` from its
    /v1/limits (an older server: the chunks go as they are)."""
    with as_older(url, request.param == OLDER_SERVER) as got:
        yield got


def test_a_client_history_past_the_servers_body_limit_goes_in_chunks_within_it(base: str, tmp_path: Path) -> None:
    conv = f"imported-{tmp_path.name}"  # the server's store outlives a test
    history = imported_messages(LONG)
    client, sizes, statuses = recording(base)
    with client:
        TiermemChatMessageHistory(client, conv).add_messages(history)
        assert _rows(client, conv) == [m.id for m in history]
        assert [m.id for m in TiermemChatMessageHistory(client, conv).messages] == [m.id for m in history]
    assert len(sizes) > 2 and max(sizes) <= MAX_BODY_BYTES and set(statuses) == {httpx.codes.CREATED}


def test_a_short_add_is_still_one_batch(base: str, tmp_path: Path) -> None:
    conv = f"short-{tmp_path.name}"
    client, sizes, _statuses = recording(base)
    with client:
        TiermemChatMessageHistory(client, conv).add_messages(imported_messages(4))
        assert _rows(client, conv) == [m.id for m in imported_messages(4)]
    assert len(sizes) == 1


def test_a_writer_between_two_chunks_goes_between_them(request: pytest.FixtureRequest, base: str,
                                                       tmp_path: Path) -> None:
    """Its row lands after the chunk stored before it; the next chunk, refused where the
    server takes conditions (nothing of it written), goes after it: each message once."""
    conv = f"raced-{tmp_path.name}"
    history = imported_messages(LONG)
    other = Client(base, token=TOKEN_ACME)
    between, fired = after_first_chunk(lambda: len(log_pages(other, conv)), lambda: other.append(
        conv, {"role": "user", "content": "Also: a window seat.", "metadata": {METADATA_ID_KEY: "theirs"}}))
    client, _sizes, statuses = recording(base, between)
    with client, other:
        TiermemChatMessageHistory(client, conv).add_messages(history)
        first = fired[0]
        assert 0 < first < LONG
        ids = [m.id for m in history]
        assert _rows(client, conv) == [*ids[:first], "theirs", *ids[first:]]
    if request.node.callspec.params["base"] != OLDER_SERVER:
        assert statuses.count(httpx.codes.CONFLICT) == 1  # the next chunk, refused once, then sent after it


def test_an_erasure_between_two_chunks_stops_the_add(url: str, tmp_path: Path) -> None:
    """The rest is not written into the conversation begun again: it would hold only the
    history's tail."""
    from tiermem.errors import HistoryErased

    conv = f"erased-{tmp_path.name}"
    other = Client(url, token=TOKEN_ACME)
    between, fired = after_first_chunk(lambda: len(log_pages(other, conv)),
                                       lambda: other.delete_conversation(conv))
    client, _sizes, statuses = recording(url, between)
    with client, other:
        with pytest.raises(HistoryErased) as err:
            TiermemChatMessageHistory(client, conv).add_messages(imported_messages(LONG))
        assert (err.value.conversation_id, err.value.position, err.value.written) == (conv, fired[0], fired[0])
        assert str(err.value) == (
            f"conversation {conv!r} was erased while add_messages wrote it in chunks (the next chunk was to go on "
            f"at position {fired[0]}; the {fired[0]} message(s) written before it went with the erasure); nothing "
            "more was written: add the messages again to store them whole")
        assert log_pages(client, conv) == []  # nothing begun again
        assert statuses[-1] == httpx.codes.CONFLICT
