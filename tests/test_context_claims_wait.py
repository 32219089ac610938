"""A context does not depend on the background indexer's timing (Memory.CLAIMED_WAIT_S).

The background indexer, woken by an append, claims the turn just appended
(tiers.catchup.Claims); the context's own catch-up skips claimed turns, so it planned
with the newest turn's vector missing whenever the indexer got there first: normalised
scores and neighbour/episode bonuses shifted, near-ties flipped, and the same appends and
calls gave different contexts run to run. Now the context waits, at most CLAIMED_WAIT_S,
for turns of its conversation another catch-up of its process holds (their vectors stored
and hooks run), and past that goes on and says so.

Real child processes over copies of one seeded SQLite data dir (tests/claims_wait_child.py),
the real embedding model; a real indexer thread held in its model run for the bound."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from claims_wait_data import CONV, NS
from claims_wait_helpers import (
    CONTEXT_SLACK_S,
    HOLD_S,
    HeldIndexer,
    held_turn,
    replayed,
)

from tiermem.memory import CLAIMED_WAIT_S
from tiermem.tiers.embed_onnx import FastEmbedder

CHILD = Path(__file__).parent / "claims_wait_child.py"


def test_contexts_with_the_indexer_on_are_the_same_run_to_run(tmp_path: Path, embedder: FastEmbedder) -> None:
    # the reference: the indexer off, each question embedded before its context
    calls, runs = replayed(CHILD, tmp_path, embedder)
    assert all(c["vectors_pending"] == 0 for c in calls)
    assert any(it[0] == "retrieved" for c in calls for it in c["items"])  # retrieval weighs in
    messages: dict[int, list[int]] = {}  # PYTHONHASHSEED -> calls whose messages differ
    differ: dict[int, list[int]] = {}  # -> calls whose messages or plan items differ
    for seed, got in runs.items():
        pairs = list(enumerate(zip(got, calls, strict=True)))
        messages[seed] = [i for i, (a, b) in pairs if json.dumps(a["messages"]) != json.dumps(b["messages"])]
        differ[seed] = [i for i, (a, b) in pairs if a != b]
    # each call's messages byte for byte, whichever of the indexer and the context
    # embedded the question; and its plan items (slices, positions, reasons with scores)
    assert {s: c for s, c in messages.items() if c} == {}, f"messages differ from the indexer-off run: {messages}"
    assert differ == {}, f"PYTHONHASHSEED -> calls that differ from the indexer-off run: {differ}"


@pytest.mark.parametrize("engine", [
    "sqlite",  # ColdStore
    "postgres",  # PostgresStore: its own Claims and Deciding, the same wait
])
def test_a_claim_never_released_delays_a_context_by_the_bound_and_the_plan_says_so(
        tmp_path: Path, request: pytest.FixtureRequest, embedder: FastEmbedder, engine: str) -> None:
    held = HeldIndexer(embedder)
    with held_turn(tmp_path, request, embedder, engine, held) as (mem, pos):
        t0 = time.monotonic()
        ctx = mem.context(CONV, "Who went to the pottery studio?", 1500, namespace=NS, record=False)
        took = time.monotonic() - t0
        held.release.set()
        # waited the bound, then went on without the turn's vector, and said so
        assert CLAIMED_WAIT_S <= took < CLAIMED_WAIT_S + CONTEXT_SLACK_S, took
        assert ctx.plan.vectors_pending == 1
        assert "still being embedded by another catch-up" in ctx.plan.retrieval
        assert any(pos in it.positions for it in ctx.plan.items)  # the tail still shows it
        key = mem._key(CONV, NS)[2]
        deadline = time.monotonic() + HOLD_S
        while mem.cold.pending_embeddings(key) and time.monotonic() < deadline:
            time.sleep(0.05)  # the indexer's run, released, stores it
        assert mem.cold.pending_embeddings(key) == 0
        # the next context finds its vector: nothing pending, nothing said
        after = mem.context(CONV, "Who went to the pottery studio?", 1500, namespace=NS, record=False)
        assert after.plan.vectors_pending == 0 and "still being embedded" not in after.plan.retrieval
    # never embedded twice: the context left the claimed turn to the indexer
    assert held.embedded_by == ["tiermem-indexer"]
