"""A search does not depend on the background indexer's timing (Memory.CLAIMED_WAIT_S),
as a context does not (tests/test_context_claims_wait.py).

The background indexer, woken by an append, claims the turn just appended
(tiers.catchup.Claims); the search's own catch-up skips claimed turns, so it ranked with
the newest turn's vector missing whenever the indexer got there first: the turn was found
by keywords only, its fused score and everyone's ranks shifted, and the same appends and
searches gave different hits run to run. Now the search waits, at most CLAIMED_WAIT_S, for
the turns of its scope (the conversation, or the namespace's conversations) that another
catch-up of its process holds, and past that goes on and says so (`vectors_pending`).

Real child processes over copies of one seeded SQLite data dir (tests/search_claims_child.py),
the real embedding model; a real indexer thread held in its model run for the bound."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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

CHILD = Path(__file__).parent / "search_claims_child.py"


def test_searches_with_the_indexer_on_are_the_same_run_to_run(tmp_path: Path, embedder: FastEmbedder) -> None:
    # the reference: the indexer off, each question embedded before its search
    calls, runs = replayed(CHILD, tmp_path, embedder)
    assert all(c["vectors_pending"] == 0 for c in calls)
    # each search ranked the question just appended by meaning too (else the race is not tested)
    assert all(any(len(h[3]) == 2 for h in c["hits"]) for c in calls)
    # PYTHONHASHSEED -> searches that differ
    differ = {seed: [i for i, (a, b) in enumerate(zip(got, calls, strict=True)) if a != b]
              for seed, got in runs.items()}
    # each search's hits (positions, fused scores, ranks per retriever, status) byte for
    # byte, whichever of the indexer and the search embedded the question
    assert differ == {}, f"PYTHONHASHSEED -> searches that differ from the indexer-off run: {differ}"


class FailingIndexer(HeldIndexer):
    """The indexer's model run over TEXT held until the caller's wait begins (`release`),
    then failing: its claim ends with no vector stored (a lost model, a full disk)."""

    def embed(self, texts: list[str], *args: Any, **kwargs: Any) -> Any:
        out = super().embed(texts, *args, **kwargs)
        if self.TEXT in texts and threading.current_thread().name == "tiermem-indexer":
            raise OSError("the test's model run failed")  # the indexer logs it and retries later
        return out


class Counted:
    """How often a bound method of a real object ran (the turn cache's reads, the store's
    waits), and a hook run before each call."""

    def __init__(self, obj: Any, name: str, before: Callable[..., None] | None = None) -> None:
        self.obj, self.name, self.real = obj, name, getattr(obj, name)
        self.calls: list[tuple[Any, ...]] = []
        self.before = before

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(args)
        if self.before is not None:
            self.before(*args)
        return self.real(*args, **kwargs)

    def __enter__(self) -> Counted:
        setattr(self.obj, self.name, self)
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(self.obj, self.name, self.real)


QUERY = "Who went to the pottery studio?"


@pytest.mark.parametrize(("engine", "scope"), [
    ("sqlite", CONV),  # ColdStore, a search in the conversation
    ("sqlite", None),  # ColdStore, across the namespace: the held conversations of the namespace
    ("postgres", CONV),  # PostgresStore: its own Claims and Deciding, the same wait
], ids=["sqlite-conversation", "sqlite-namespace", "postgres-conversation"])
def test_a_claim_never_released_delays_a_search_by_the_bound_and_the_answer_says_so(
        tmp_path: Path, request: pytest.FixtureRequest, embedder: FastEmbedder, engine: str,
        scope: str | None) -> None:
    held = HeldIndexer(embedder)
    with held_turn(tmp_path, request, embedder, engine, held) as (mem, pos):
        t0 = time.monotonic()
        hits = mem.search(scope, QUERY, 8, namespace=NS)
        took = time.monotonic() - t0
        held.release.set()
        # waited the bound, then ranked without the turn's vector, and said so
        assert CLAIMED_WAIT_S <= took < CLAIMED_WAIT_S + CONTEXT_SLACK_S, took
        assert hits.vectors_pending == 1
        assert [sorted(h.ranks) for h in hits if h.position == pos] == [["bm25"]]  # found by keywords alone
        key = mem._key(CONV, NS)[2]
        deadline = time.monotonic() + HOLD_S
        while mem.cold.pending_embeddings(key) and time.monotonic() < deadline:
            time.sleep(0.05)  # the indexer's run, released, stores it
        # the next search finds its vector: nothing pending, ranked by meaning too
        after = mem.search(scope, QUERY, 8, namespace=NS)
        assert after.vectors_pending == 0
        assert [sorted(h.ranks) for h in after if h.position == pos] == [["bm25", "dense"]]
    # never embedded twice: the search left the claimed turn to the indexer
    assert held.embedded_by == ["tiermem-indexer"]


@pytest.mark.parametrize("call", [
    "context",  # the plan says the turn had no vector
    "search",  # the answer's vectors_pending counts it
])
def test_a_claim_given_up_without_a_vector_is_said_and_read_once(
        tmp_path: Path, request: pytest.FixtureRequest, embedder: FastEmbedder, call: str) -> None:
    held = FailingIndexer(embedder)
    with held_turn(tmp_path, request, embedder, "sqlite", held) as (mem, _pos):
        # the indexer's run fails once the call waits for it (not before: then the call's own
        # catch-up would find the turn free and embed it)
        def fail_when_waited(_conv: str, _positions: Sequence[int] | None, timeout_s: float) -> None:
            if timeout_s > 0:
                held.release.set()

        with Counted(mem.cold, "wait_decided", fail_when_waited) as waits, Counted(mem.turns, "get") as gets:
            t0 = time.monotonic()
            if call == "context":
                ctx = mem.context(CONV, QUERY, 1500, namespace=NS, record=False)
                pending, said = ctx.plan.vectors_pending, ctx.plan.retrieval
            else:
                hits = mem.search(CONV, QUERY, 8, namespace=NS)
                pending, said = hits.vectors_pending, ""
            took = time.monotonic() - t0
        # woken by the failed run's release, not by the bound
        assert took < CLAIMED_WAIT_S + CONTEXT_SLACK_S, took
        assert [w[2] > 0 for w in waits.calls] == [False, True]  # one look, then one wait
        assert pending == 1
        if call == "context":
            assert "1 turn(s) have no vector yet" in said
            # the turn table read once before the call's catch-up and once after the wait
            assert len(gets.calls) == 2
        else:
            assert not gets.calls  # a search ranks from the store, not from the turn cache
    # the call left the claimed turn to the indexer (which retries, failing again)
    assert set(held.embedded_by) == {"tiermem-indexer"}
