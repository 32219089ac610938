"""`rebuild()` and `warm_up()` learn of erasures by others before they act.

Every other public call that touches the store reads the erasure mark first
(test_erasure_check_listing_calls), but `rebuild()` and `warm_up()` did not: a Memory
with `background_indexing=False` (no indexer thread to check while idle) whose only
calls after another process erased were a rebuild or a warm-up kept its copies of the
erased text (here: the planner's epoch state, and the memos of the text) for as long as
it lived. Each now drops them first. A real SQLite file, two Memory objects on it (two
processes), the real model; a walk over every object reachable in this process
(tests/erasure_child.py `held`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from erasure_child import held

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

NS = "acme/alice"


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return Config(data_dir=tmp_path / "data")


@pytest.fixture
def reader(config: Config, embedder: Embedder) -> Iterator[Memory]:
    """The Memory that keeps copies: no hot tier, no indexer thread."""
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem:
        yield mem


# the reader's only call after the other process erased: (what, the call)
CALLS: list[tuple[str, Callable[[Memory], object]]] = [
    # recomputes every derived structure from the log: the erased conversation is gone
    # from it, but not from the copies this process kept
    ("rebuild", lambda m: m.rebuild()),
    # loads the model (loaded already by the context) and wakes the indexer: no store
    # statement of its own before
    ("warm_up", lambda m: m.warm_up()),
]


@pytest.mark.parametrize(("what", "call"), CALLS, ids=[c[0] for c in CALLS])
def test_rebuild_and_warm_up_drop_what_another_process_erased(
        reader: Memory, config: Config, embedder: Embedder, what: str, call: Callable[[Memory], object]) -> None:
    canary = "zq7canary-" + uuid.uuid4().hex
    reader.append("doomed", {"role": "user", "content": f"Remember: the vault code is {canary}, keep it safe."},
                  namespace=NS)
    reader.append("kept", {"role": "user", "content": "I am planting tomatoes in the garden this week."},
                  namespace=NS)
    reader.context("doomed", "what is the vault code?", 1500, namespace=NS)
    key = reader.cold.key_of(NS, "doomed")
    assert key is not None
    # the premise: this process holds the text (its epoch state)
    assert reader.planner._epochs.get(key) is not None and held(canary) != []
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as other:
        other.delete_conversation("doomed", namespace=NS)
    call(reader)
    assert reader.planner._epochs.get(key) is None
    assert held(canary) == []
