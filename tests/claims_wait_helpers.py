"""What tests/test_context_claims_wait.py and test_search_claims_wait.py share: the seeded
data dir their child processes copy (tests/claims_wait_child.py, search_claims_child.py),
the runs of one child with the indexer off and on (`replayed`), and a real indexer thread held in its model run over the turn
just appended (HeldIndexer, `held_turn`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from claims_wait_data import CONV, NS, QUESTION_AT, seed_messages
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

TESTS = Path(__file__).parent
BG_SEEDS = [1, 2, 3, 4]  # PYTHONHASHSEED of the runs with the indexer on
CHILD_TIMEOUT_S = 300
# the call's own work besides the wait (a 40-turn table, the query's embedding, the
# plan) on a loaded 2-core runner: the tests' bound is CLAIMED_WAIT_S plus this
CONTEXT_SLACK_S = 3.0
HOLD_S = 30.0  # the longest the indexer's model run is held (released at the test's end)


def seed_store(data: Path, embedder: FastEmbedder) -> None:
    """The data dir the child processes copy: seed_messages(), every turn embedded."""
    with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many(CONV, seed_messages(), namespace=NS)
        mem.catch_up(CONV, namespace=NS)  # every seeded turn embedded: only the questions race
        assert mem.cold.pending_embeddings(mem._key(CONV, NS)[2]) == 0


def run_child(child: Path, seeded: Path, where: Path, mode: str, seed: int) -> str:
    """`child` (MODE bg | sync) over a copy of `seeded` at `where`, under PYTHONHASHSEED
    `seed`: its last line of output (the calls' JSON)."""
    shutil.copytree(seeded, where)
    env = {**os.environ, "PYTHONHASHSEED": str(seed),
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(child), str(where), mode], capture_output=True, text=True,
                          env=env, timeout=CHILD_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def replayed(child: Path, tmp_path: Path, embedder: FastEmbedder
             ) -> tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]]]]:
    """`child` over copies of one seeded data dir: the reference run's calls (the indexer
    off, each question embedded before its call), and per BG_SEEDS seed the calls of the
    run with the indexer on, where its output differs from the reference's byte for byte."""
    seeded = tmp_path / "seeded"
    seed_store(seeded, embedder)
    ref = run_child(child, seeded, tmp_path / "sync", "sync", 0)
    differ: dict[int, list[dict[str, Any]]] = {}
    for seed in BG_SEEDS:
        got = run_child(child, seeded, tmp_path / f"bg{seed}", "bg", seed)
        if got != ref:
            differ[seed] = json.loads(got)
    return json.loads(ref), differ


class HeldIndexer:
    """The indexer's model run over TEXT held until `release` (HOLD_S at most): a claim
    that is not released while the call runs. Who ran the model over TEXT, by thread."""

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


@contextmanager
def held_turn(tmp_path: Path, request: pytest.FixtureRequest, embedder: FastEmbedder, engine: str,
              held: HeldIndexer) -> Iterator[tuple[Memory, int]]:
    """A store (`engine`: sqlite | postgres) whose indexer (on) is in its model run over
    the turn just appended (HeldIndexer.TEXT, after 40 embedded turns): the Memory and
    that turn's position. The run is released and the embedder restored at the end."""
    extra: dict[str, Any] = {} if engine == "sqlite" else {"cold_url": request.getfixturevalue("pg_url"),
                                                          "cold_schema": fresh_schema()}
    embedder.embed = held.embed  # type: ignore[method-assign]
    try:
        with Memory(Config(data_dir=tmp_path / "data", **extra), embedder=embedder, hot=False,
                    background_indexing=True) as mem:
            mem.append_many(CONV, seed_messages(40), namespace=NS)
            mem.catch_up(CONV, namespace=NS)
            pos = mem.append(CONV, {"role": "user", "content": HeldIndexer.TEXT}, namespace=NS,
                             created_at=QUESTION_AT)
            assert held.in_run.wait(HOLD_S), "the indexer never read the appended turn"
            yield mem, pos
    finally:
        held.release.set()
        embedder.embed = held.real  # type: ignore[method-assign]
