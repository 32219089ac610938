"""Every public Memory call that touches the store learns of erasures by others.

A call that names a conversation reads the newest tombstone with its lookup (08e3e6f,
2790f1e), but `conversations()`, `conversations_page()`, `tombstones()`, `stats()`,
`prune()` and `purge_deferred()` did not: a Memory with `background_indexing=False` (no
indexer thread to check while idle) that made only those calls after another process
erased kept its copies of the erased text (here: the planner's epoch state and the turn
cache) for as long as it lived. Each now reads the tombstones past its mark first (one
index seek). A real SQLite file, two Memory objects on it (two processes), the real model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

NS = "acme/alice"
SECRET = "Remember: the vault code is zq7canary-5150-medlar, keep it safe."


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return Config(data_dir=tmp_path / "data")


@pytest.fixture
def reader(config: Config, embedder: Embedder) -> Iterator[Memory]:
    """The Memory that keeps copies: no hot tier, no indexer thread."""
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem:
        yield mem


# each call that reads no conversation's text: (what, the call)
CALLS: list[tuple[str, Callable[[Memory], object]]] = [
    ("conversations", lambda m: m.conversations(NS)),
    ("conversations_page", lambda m: m.conversations_page(NS)),
    ("tombstones", lambda m: m.tombstones(namespace=NS)),
    # a namespace's counts, and the whole store's
    ("stats_namespace", lambda m: m.stats(namespace=NS)),
    ("stats", lambda m: m.stats()),
    # a prune that takes nothing
    ("prune", lambda m: m.prune(3600.0, namespace=NS)),
    ("purge_deferred", lambda m: m.purge_deferred()),
]


@pytest.mark.parametrize(("what", "call"), CALLS, ids=[c[0] for c in CALLS])
def test_a_call_that_names_no_conversation_drops_what_another_process_erased(
        reader: Memory, config: Config, embedder: Embedder, what: str, call: Callable[[Memory], object]) -> None:
    reader.append("doomed", {"role": "user", "content": SECRET}, namespace=NS)
    reader.context("doomed", "what is the vault code?", 1500, namespace=NS)
    key = reader.cold.key_of(NS, "doomed")
    assert key is not None
    # the premise: this process holds the text (its epoch state, its turn cache)
    assert reader.planner._epochs.get(key) is not None and reader.turns.stats()["conversations"] == 1
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as other:
        other.delete_conversation("doomed", namespace=NS)
    call(reader)
    assert reader.planner._epochs.get(key) is None
    assert reader.turns.stats()["conversations"] == 0
