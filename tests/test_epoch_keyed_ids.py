"""An epoch holds for a conversation whose internal key is not its id (tiers.cold,
incarnations): an id used in another namespace too (`session-1` in every tenant), or an
id erased and created again.

`Memory.context` names plan items by the id their owner knows. It renamed the items in
place, and those items are also the planner's record of what the epoch showed (by key):
the next call saw its own turns as another conversation's, found that conversation
"erased" and started a new epoch on every call, so the provider's prompt cache never hit.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.cold import KEY_SEPARATOR
from tiermem.tiers.embed import Embedder

SYSTEM = "You are a helpful travel assistant."


def used_elsewhere(mem: Memory) -> None:
    mem.append("d", {"role": "user", "content": "another tenant's thread"}, namespace="other-tenant")


def erased_and_reused(mem: Memory) -> None:
    mem.append("d", {"role": "user", "content": "a first life"})
    mem.delete_conversation("d")


SETUPS: list[tuple[str, Callable[[Memory], None]]] = [
    ("the id is used in another namespace first", used_elsewhere),
    ("the id was erased and is used again", erased_and_reused),
]


@pytest.mark.parametrize("setup", [s[1] for s in SETUPS], ids=[s[0] for s in SETUPS])
def test_consecutive_calls_stay_in_one_epoch(tmp_path: Path, embedder: Embedder,
                                             setup: Callable[[Memory], None]) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        setup(mem)
        mem.append("d", {"role": "user", "content": "My budget is 2,000 EUR."})
        key = mem.cold.key_of("default", "d")
        assert key is not None and KEY_SEPARATOR in key  # the premise: key and id differ
        epochs = []
        for turn in range(4):
            mem.append("d", {"role": "assistant", "content": f"sure, noted ({turn})"})
            mem.append("d", {"role": "user", "content": f"garden violin harbour, turn {turn}"})
            ctx = mem.context("d", f"garden violin harbour, turn {turn}", 2000, system=SYSTEM)
            assert ctx.plan.cache is not None
            epochs.append((ctx.plan.cache.epoch, ctx.plan.cache.new_epoch, ctx.plan.cache.reason))
            assert {it.conversation_id for it in ctx.plan.items} == {"d"}  # the caller sees ids
        assert [e[0] for e in epochs] == [1, 1, 1, 1], epochs
        assert [e[1] for e in epochs] == [True, False, False, False], epochs
