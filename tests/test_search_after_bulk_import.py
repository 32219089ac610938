"""A search embeds at most CONTEXT_EMBED_POOLS catch-up pools of its scope's pending turns
inline (the conversation's, or the namespace's), leaves the rest to the background
catch-up, and says how many turns its dense ranking could not see
(`SearchHits.vectors_pending`; HTTP, its client and MCP hand it on); the keyword (BM25)
ranking still finds those turns. Before, it embedded the whole backlog first: the first
search after a 20,000-turn import took minutes.

Counted in embedded rows, not timed: with `embedding_batch_size` 8 a pool is
8 x INDEX_POOL_BATCHES = 128 turns of these short lines (no cut by characters)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from service_helpers import TOKEN_ACME, serve_in_thread

from tiermem import Config, Memory
from tiermem.client import Client as HttpClient
from tiermem.memory import CONTEXT_EMBED_POOLS
from tiermem.tiers.embed import Embedder
from tiermem.tiers.store import INDEX_POOL_BATCHES

BATCH = 8  # embedding_batch_size: a small pool keeps the model's work short
POOL = BATCH * INDEX_POOL_BATCHES  # 128 turns
INLINE = CONTEXT_EMBED_POOLS * POOL  # what one search embeds at most
IMPORT_BATCH = 100  # > INLINE_INDEX_ROWS (64): an import's batch, which append never embeds
NS = "acme"
OTHER_NS = "other"  # another tenant's backlog: never embedded nor counted by acme's searches
OTHER_TURNS = 50
WORD = "zanzibar"  # in the scope's last turn only: past the inline pool whenever one is cut
QUERY = WORD  # its only keyword match; by meaning it may rank anywhere

# every case imports the same lines (up to 600 of them): each line's vector computed once
# for the session (conftest's shared_vectors); what is counted is the rows each search
# embeds, which the store's pools decide above the model
pytestmark = pytest.mark.usefixtures("shared_vectors")


def _import(mem: Memory, conv: str, turns: int, namespace: str, *, last_word: bool) -> None:
    def line(i: int) -> str:
        place = WORD if last_word and i == turns - 1 else "the island"
        return f"turn {i}: the ferry to {place} leaves at {i % 24}:{i % 60:02d}."

    for start in range(0, turns, IMPORT_BATCH):
        mem.append_many(conv, [{"role": "user" if i % 2 == 0 else "assistant", "content": line(i)}
                               for i in range(start, min(turns, start + IMPORT_BATCH))], namespace=namespace)


def _pending(mem: Memory, namespace: str) -> int:
    """The namespace's turns without a vector yet, as its stats count them."""
    return int(mem.cold.namespace_stats(namespace)["pending_embeddings"])


def _store(mem: Memory, turns: int) -> None:
    """`turns` pending turns in NS (conversation "a", or "a" and "b" when over 150: the
    word in "b"'s last turn), and OTHER_NS's backlog."""
    first = min(turns, 150)
    _import(mem, "a", first, NS, last_word=first == turns)
    if turns > first:
        _import(mem, "b", turns - first, NS, last_word=True)
    _import(mem, "x", OTHER_TURNS, OTHER_NS, last_word=False)
    assert mem.cold.pending_embeddings() == turns + OTHER_TURNS  # the import embedded nothing


@pytest.mark.parametrize(("conversation", "turns", "left"), [
    ("a", 100, 0),  # fewer than one pool: embedded before searching, as before
    ("a", INLINE, 0),  # exactly the bound: all of it, nothing reported
    ("a", 150, 150 - INLINE),  # past the bound: one pool embedded, the rest left and reported
    (None, 100, 0),  # the namespace's search, under the bound
    (None, 400, 400 - INLINE),  # the namespace's, past it (two conversations): still one pool
])
def test_first_search_embeds_at_most_its_bound(tmp_path: Path, embedder: Embedder, conversation: str | None,
                                               turns: int, left: int) -> None:
    cfg = Config(data_dir=tmp_path, embedding_batch_size=BATCH)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        _store(mem, turns)
        hits = mem.search(conversation, QUERY, 5, namespace=NS)
        assert _pending(mem, NS) == left
        assert _pending(mem, OTHER_NS) == OTHER_TURNS  # another tenant's: untouched
        assert hits.vectors_pending == left and hits.degraded is None
        # the turn with the word: found by keywords whether or not it has its vector yet
        (found,) = [h for h in hits if WORD in h.text]
        assert found.ranks["bm25"] == 1
        if left:
            assert "dense" not in found.ranks  # past the inline pool: no vector to rank it by meaning
            # the next search embeds its own pool: the backlog drains call by call (and by the indexer)
            again = mem.search(conversation, QUERY, 5, namespace=NS)
            assert _pending(mem, NS) == max(left - INLINE, 0)
            assert again.vectors_pending == max(left - INLINE, 0)


@pytest.mark.parametrize("conversation", [
    "b",  # one conversation's search
    None,  # the namespace's
])
def test_every_surface_says_the_turns_left_pending(tmp_path: Path, embedder: Embedder,
                                                   conversation: str | None) -> None:
    pytest.importorskip("mcp")
    from mcp_helpers import call_in_process  # after the skip: it needs mcp

    turns = 150 + 3 * INLINE + 10  # each of the three searches below embeds one pool more
    cfg = Config(data_dir=tmp_path, embedding_batch_size=BATCH, auth_tokens={TOKEN_ACME: NS})
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url:
        _store(mem, turns)
        scope = (lambda: mem.cold.pending_embeddings(mem._key(conversation, NS)[2])) if conversation else (
            lambda: _pending(mem, NS))
        before = scope()
        params = {"q": QUERY, "k": 3, **({"conversation_id": conversation} if conversation else {})}
        body = httpx.get(url + "/v1/search", params=params, headers={"Authorization": f"Bearer {TOKEN_ACME}"}).json()
        assert body["vectors_pending"] == scope() == before - INLINE
        with HttpClient(url, token=TOKEN_ACME) as client:  # the HTTP client hands it on
            assert client.search(conversation, QUERY, 3).vectors_pending == scope() == before - 2 * INLINE
        args = {"query": QUERY, "k": 3, **({"conversation_id": conversation} if conversation else {})}
        out = call_in_process(mem.namespaced(NS), "search", args)
        assert out["vectors_pending"] == scope() == before - 3 * INLINE > 0
        mem.catch_up(namespace=NS)
        assert "vectors_pending" not in call_in_process(mem.namespaced(NS), "search", args)  # said only while some are left
        assert httpx.get(url + "/v1/search", params=params,
                         headers={"Authorization": f"Bearer {TOKEN_ACME}"}).json()["vectors_pending"] == 0
