"""The first context after a bulk import embeds at most CONTEXT_EMBED_POOLS catch-up pools
of its conversation's pending turns inline, leaves the rest to the background catch-up,
and its plan says how many turns dense ranking could not see (tiermem.memory). Before,
it embedded the whole backlog first: 250 s after importing 20,000 turns.

Counted in turns, not timed: with `embedding_batch_size` 8 a pool is 8 x INDEX_POOL_BATCHES
= 128 turns of these short lines (no cut by characters)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.memory import CONTEXT_EMBED_POOLS
from tiermem.planner.plan import Plan
from tiermem.tiers.embed import Embedder
from tiermem.tiers.store import INDEX_POOL_BATCHES

BATCH = 8  # embedding_batch_size: a small pool keeps the model's work short
POOL = BATCH * INDEX_POOL_BATCHES  # 128 turns
INLINE = CONTEXT_EMBED_POOLS * POOL  # what one context embeds at most
IMPORT_BATCH = 100  # > INLINE_INDEX_ROWS (64): an import's batch, which append never embeds
QUERY = "what is my budget for the trip?"


def _imported(mem: Memory, turns: int) -> None:
    for start in range(0, turns, IMPORT_BATCH):
        mem.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                               "content": f"turn {i}: my budget for the trip is {i} euros."}
                              for i in range(start, min(turns, start + IMPORT_BATCH))])


@pytest.mark.parametrize(("turns", "left"), [
    (100, 0),  # fewer than one pool: embedded before planning, as before
    (INLINE, 0),  # exactly the bound: all of it, and nothing reported partial
    (300, 300 - INLINE),  # past the bound: one pool embedded, the rest left and reported
    (1000, 1000 - INLINE),  # a larger backlog: still one pool, not one per call's worth of time
])
def test_first_context_embeds_at_most_its_bound(tmp_path: Path, embedder: Embedder, turns: int, left: int) -> None:
    cfg = Config(data_dir=tmp_path, embedding_batch_size=BATCH)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        _imported(mem, turns)
        key = mem._key("c", None)[2]
        assert mem.cold.pending_embeddings(key) == turns  # the import embedded nothing
        ctx = mem.context("c", QUERY, 2000)
        assert mem.cold.pending_embeddings(key) == left
        # the plan counts what dense ranking did not see: exactly the turns left pending
        # (the turn cache looked again at every turn this call embedded)
        assert ctx.plan.vectors_pending == left
        assert (f"dense ranking partial: {left} turn(s) have no vector yet" in ctx.plan.retrieval) == (left > 0)
        assert Plan.from_dict(ctx.plan.to_dict()).vectors_pending == left  # as the service answers it
        if left:
            # the next call embeds its own pool: the backlog drains call by call (and by the indexer)
            again = mem.context("c", QUERY, 2000)
            assert mem.cold.pending_embeddings(key) == max(left - INLINE, 0)
            assert again.plan.vectors_pending == max(left - INLINE, 0)


def test_without_a_model_nothing_is_reported_partial(tmp_path: Path) -> None:
    # no embedder to catch up with: no vector is owed by the bound, none is reported
    # (keyword ranking is the whole story there, and the plan says so in its own words)
    cfg = Config(data_dir=tmp_path, embedding_batch_size=BATCH)
    with Memory(cfg, hot=False, background_indexing=False) as mem:
        mem.cold.embedder = None  # the store's catch-up has none (as a read-only store embeds nothing)
        _imported(mem, 300)
        ctx = mem.context("c", None, 2000)  # no query: nothing loads a model for its vector either
        assert ctx.plan.vectors_pending == 0
        assert "dense ranking partial" not in ctx.plan.retrieval
