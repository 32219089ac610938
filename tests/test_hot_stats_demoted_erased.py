"""`stats()`'s demoted pins name each conversation by the id its owner knows. A
conversation erased between the Redis read of the sets and the lookup of their names
fell back to its raw key (`names.get(k, k)`): an id used first in another namespace is
spelled `id~<hex>` there, which tells that the id is, or was, used elsewhere. Such a
conversation is now left out: it is gone. The race is forced with a real erasure by a
second Memory between the two reads (real SQLite file, real embedded Redis).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

NS = "acme/alice"
TURNS = 12  # ~100 tokens a turn against the fixture's 600-token budget: pins alone overflow it


def _demote(mem: Memory, conversation_id: str, namespace: str) -> None:
    for i in range(TURNS):
        mem.append(conversation_id, {"role": "user", "content": f"Turn {i}: " + "the harbour ferry timetable " * 20},
                   namespace=namespace)
    for p in range(TURNS):  # pins alone over the budget: the lowest-priority ones are demoted
        mem.pin(conversation_id, p, priority=10 + p, namespace=namespace)


# (the conversation erased during stats, its namespace)
CASES = [
    ("doomed", NS),  # its key is its id
    ("dup", NS),  # its id was used first in another namespace: its key is dup~<hex>
]


@pytest.mark.parametrize("erased, namespace", CASES, ids=[c[0] for c in CASES])
def test_a_conversation_erased_during_stats_is_left_out_not_shown_by_key(
        memory: Memory, embedder: Embedder, monkeypatch: pytest.MonkeyPatch, erased: str, namespace: str) -> None:
    assert memory.hot is not None
    memory.append("dup", {"role": "user", "content": "first use of the id"}, namespace="other")
    _demote(memory, "kept", NS)
    _demote(memory, erased, namespace)
    before = memory.stats(namespace=NS)["hot"]["demoted_pins"]
    assert set(before) == {"kept", erased}  # the premise: both have demoted pins
    read: Callable[[Sequence[str]], Any] = memory.hot.tier.summaries

    def then_erased(keys: Sequence[str]) -> Any:
        got = read(keys)
        # another process erases it after the sets were read, before their names are
        with Memory(Config(data_dir=memory.config.data_dir), embedder=embedder, background_indexing=False) as other:
            other.delete_conversation(erased, namespace=namespace)
        return got

    monkeypatch.setattr(memory.hot.tier, "summaries", then_erased)
    demoted = memory.stats(namespace=NS)["hot"]["demoted_pins"]
    assert demoted == {"kept": before["kept"]}
