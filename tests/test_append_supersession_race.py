"""A correction's supersession is recorded before `append` returns, whoever embeds it
(`Memory.append`, `ColdLog.wait_decided`, tiers.catchup.Deciding).

A live append that carries a correction embeds its turns inline and so decides its
supersession before it returns. With the background indexer on, the indexer (woken by
the append before) can read the correction first: the append's own catch-up then found
nothing to do (its store step finding `embedded = 1`, or the turn claimed) and returned
while the indexer's after-embedding hook had still to record the supersession. A
`context()` right after the append showed the corrected value in the pinned block as
current ("load-bearing statement (priority 85)"), and `facts()` called it current too,
until the hook ran (2 or 3 of 8 tries of the scenario in a reviewer's script).

Real threads of one Memory, its background indexer and the caller, on both engines. The
interleaving is forced, not hoped for: the caller's inline catch-up is held where it
starts (the store asks the embedder's `model_identity` before its first read) until the
indexer's hook for the correction has started (so the indexer read, stored and owns
the decision), and that hook is held until the caller has read its facts and context
after the append (or HOLD_S passed: with the fix the append waits for the hook, which
then goes on after HOLD_S)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

HOLD_S = 3.0  # the longest a held model run or hook waits for the other side (seconds)
BUDGET = 2000  # tokens of the context read right after the correction
OLD = "My budget for the trip to {city} is 3000 dollars."
ACK = "Got it, a 3000 dollar budget for {city}."
FIX = "Actually, my budget for the trip to {city} is now 5000 dollars, not 3000."
OLD_VALUE = "3000 dollars"
FILLER = "Turn {i}: shall we see the museums or the restaurants of {city} first, option {i}?"
# turns between the value and its correction, so that the value has left the recent
# window by then and the context shows it in its pinned block of current values
FILLER_TURNS = 40
CORRECTION_POSITION = 2 + FILLER_TURNS  # OLD at 0, ACK at 1, then the filler
INDEXER = "tiermem-indexer"  # the background indexer's thread (tiermem.memory._Indexer)
PRODUCER = "tiermem-catchup"  # a catch-up's reading thread (tiers.catchup)


class Held:
    """The appending thread's first look at the model's identity while armed (the start
    of the correction's inline catch-up) held until the indexer's hook for the
    correction has started, and that hook held until the test says it read (`read`),
    each at most HOLD_S."""

    def __init__(self, embedder: FastEmbedder, key: str, wake: Callable[[], None]) -> None:
        self.identity = embedder.model_identity
        self.key = key
        self.wake = wake  # the indexer's wake-up: it reads the correction while the append is held
        self.armed = threading.Event()
        self.hook_in = threading.Event()
        self.read = threading.Event()
        self.hook: Callable[[list[tuple[str, int, np.ndarray]]], None] | None = None
        self.hooked_by: list[str] = []  # the threads whose hook ran for the correction

    def model_identity(self) -> str:
        if self.armed.is_set() and threading.current_thread().name not in (INDEXER, PRODUCER):
            self.armed.clear()
            self.wake()
            self.hook_in.wait(HOLD_S)
        return self.identity()

    def on_embedded(self, stored: list[tuple[str, int, np.ndarray]]) -> None:
        assert self.hook is not None
        if any(conv == self.key and pos == CORRECTION_POSITION for conv, pos, _v in stored):
            self.hooked_by.append(threading.current_thread().name)
            if threading.current_thread().name == INDEXER:
                self.hook_in.set()
                self.read.wait(HOLD_S)
        self.hook(stored)


def _current_old_value(messages: list[dict[str, Any]]) -> list[str]:
    """The messages that present OLD_VALUE in the context's pinned block of current values."""
    return [str(m.get("content")) for m in messages
            if m.get("role") == "system" and "current values" in str(m.get("content"))
            and OLD_VALUE in str(m.get("content"))]


@pytest.mark.parametrize(("engine", "via"), [
    ("sqlite", "library"),  # ColdStore: the append's store step finds the indexer's embedded = 1
    ("postgres", "library"),  # PostgresStore: the same, in one statement per pool
    ("sqlite", "service"),  # tiermem serve: the append route, in a worker thread, beside the indexer
])
def test_the_correction_is_recorded_before_append_returns(tmp_path: Path, request: pytest.FixtureRequest,
                                                          embedder: FastEmbedder, engine: str, via: str) -> None:
    extra: dict[str, Any] = {} if engine == "sqlite" else {"cold_url": request.getfixturevalue("pg_url"),
                                                          "cold_schema": fresh_schema()}
    city = f"rome-{engine}-{via}"  # texts of their own: the memo of recent texts never answers them
    cfg = Config(data_dir=tmp_path / "data", **extra)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=True) as mem:
        first = mem.append_outcome("trip", [{"role": "user", "content": OLD.format(city=city)},
                                            {"role": "assistant", "content": ACK.format(city=city)}])
        key = mem.cold.key_of("default", "trip")  # the store's key (the outcome answers a token)
        assert first.incarnation is not None and key is not None and mem._indexer is not None
        mem.append_many("trip", [{"role": "user" if i % 2 == 0 else "assistant",
                                  "content": FILLER.format(i=i, city=city)} for i in range(FILLER_TURNS)])
        held = Held(embedder, key, mem._indexer.wake.set)
        held.hook = mem.cold.on_embedded
        mem.cold.on_embedded = held.on_embedded
        embedder.model_identity = held.model_identity  # type: ignore[method-assign]
        fix = {"role": "user", "content": FIX.format(city=city)}
        try:
            held.armed.set()
            if via == "library":
                position = mem.append("trip", fix)
                facts = {f.position: f.until_position for f in mem.facts("trip")}
                shown = _current_old_value(mem.context("trip", fix["content"], BUDGET).messages)
            else:
                with TestClient(create_app(cfg, mem, auth=False, start_scheduler=False),
                                base_url="http://127.0.0.1") as client:
                    r = client.post("/v1/conversations/trip/messages", json=fix)
                    assert r.status_code == 201, r.text
                    position = r.json()["position"]
                    facts = {f.position: f.until_position for f in mem.facts("trip")}
                    r = client.post("/v1/conversations/trip/context", json={"query": fix["content"], "budget": BUDGET})
                    assert r.status_code == 200, r.text
                    shown = _current_old_value(r.json()["messages"])
        finally:
            held.armed.clear()
            held.read.set()
            del embedder.model_identity  # the class's method again
        assert position == CORRECTION_POSITION
        # the indexer's hook decided it (the interleaving under test), not the append's own
        assert held.hooked_by[:1] == [INDEXER], held.hooked_by
        assert not shown, f"the old value shown as current right after the correction: {shown}"
        assert facts.get(0) == CORRECTION_POSITION, f"#0 superseded by {facts.get(0)} right after append"
