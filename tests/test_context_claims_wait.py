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
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from claims_wait_data import CONV, NS, QUESTION_AT, seed_messages
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.memory import CLAIMED_WAIT_S
from tiermem.tiers.embed_onnx import FastEmbedder

TESTS = Path(__file__).parent
CHILD = TESTS / "claims_wait_child.py"
BG_SEEDS = [1, 2, 3, 4]  # PYTHONHASHSEED of the runs with the indexer on
CHILD_TIMEOUT_S = 300
# the context's own work besides the wait (a 40-turn table, the query's embedding, the
# plan) on a loaded 2-core runner: the test's bound is CLAIMED_WAIT_S plus this
CONTEXT_SLACK_S = 3.0
HOLD_S = 30.0  # the longest the indexer's model run is held (released at the test's end)


def _seed(data: Path, embedder: FastEmbedder) -> None:
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many(CONV, seed_messages(), namespace=NS)
        mem.catch_up(CONV, namespace=NS)  # every seeded turn embedded: only the questions race
        assert mem.cold.pending_embeddings(mem._key(CONV, NS)[2]) == 0


def _run(seeded: Path, where: Path, mode: str, seed: int) -> str:
    shutil.copytree(seeded, where)
    env = {**os.environ, "PYTHONHASHSEED": str(seed),
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(CHILD), str(where), mode], capture_output=True, text=True,
                          env=env, timeout=CHILD_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_contexts_with_the_indexer_on_are_the_same_run_to_run(tmp_path: Path, embedder: FastEmbedder) -> None:
    seeded = tmp_path / "seeded"
    _seed(seeded, embedder)
    # the reference: the indexer off, each question embedded before its context
    ref = _run(seeded, tmp_path / "sync", "sync", 0)
    calls = json.loads(ref)
    assert all(c["vectors_pending"] == 0 for c in calls)
    assert any(it[0] == "retrieved" for c in calls for it in c["items"])  # retrieval weighs in
    messages: dict[int, list[int]] = {}  # PYTHONHASHSEED -> calls whose messages differ
    differ: dict[int, list[int]] = {}  # -> calls whose messages or plan items differ
    for seed in BG_SEEDS:
        got = _run(seeded, tmp_path / f"bg{seed}", "bg", seed)
        if got != ref:
            pairs = list(enumerate(zip(json.loads(got), calls, strict=True)))
            messages[seed] = [i for i, (a, b) in pairs if json.dumps(a["messages"]) != json.dumps(b["messages"])]
            differ[seed] = [i for i, (a, b) in pairs if a != b]
    # each call's messages byte for byte, whichever of the indexer and the context
    # embedded the question; and its plan items (slices, positions, reasons with scores)
    assert {s: c for s, c in messages.items() if c} == {}, f"messages differ from the indexer-off run: {messages}"
    assert differ == {}, f"PYTHONHASHSEED -> calls that differ from the indexer-off run: {differ}"


class HeldIndexer:
    """The indexer's model run over TEXT held until `release` (HOLD_S at most): a claim
    that is not released while the context runs. Who ran the model over TEXT, by thread."""

    TEXT = "Which of them went to the pottery studio on a rainy Sunday?"

    def __init__(self, embedder: FastEmbedder) -> None:
        self.real = embedder.embed
        self.in_run = threading.Event()
        self.release = threading.Event()
        self.embedded_by: list[str] = []

    def embed(self, texts: list[str], *args: Any, **kwargs: Any) -> np.ndarray:
        if self.TEXT in texts:
            name = threading.current_thread().name
            self.embedded_by.append(name)
            if name == "tiermem-indexer":
                self.in_run.set()
                self.release.wait(HOLD_S)
        return self.real(texts, *args, **kwargs)


@pytest.mark.parametrize("engine", [
    "sqlite",  # ColdStore
    "postgres",  # PostgresStore: its own Claims and Deciding, the same wait
])
def test_a_claim_never_released_delays_a_context_by_the_bound_and_the_plan_says_so(
        tmp_path: Path, request: pytest.FixtureRequest, embedder: FastEmbedder, engine: str) -> None:
    extra: dict[str, Any] = {} if engine == "sqlite" else {"cold_url": request.getfixturevalue("pg_url"),
                                                          "cold_schema": fresh_schema()}
    held = HeldIndexer(embedder)
    embedder.embed = held.embed  # type: ignore[method-assign]
    try:
        with Memory(Config(data_dir=tmp_path / "data", **extra), embedder=embedder, hot=False,
                    background_indexing=True) as mem:
            mem.append_many(CONV, seed_messages(40), namespace=NS)
            mem.catch_up(CONV, namespace=NS)
            pos = mem.append(CONV, {"role": "user", "content": HeldIndexer.TEXT}, namespace=NS,
                             created_at=QUESTION_AT)
            assert held.in_run.wait(HOLD_S), "the indexer never read the appended turn"
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
    finally:
        held.release.set()
        embedder.embed = held.real  # type: ignore[method-assign]
    # never embedded twice: the context left the claimed turn to the indexer
    assert held.embedded_by == ["tiermem-indexer"]
