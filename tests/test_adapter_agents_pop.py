"""`TiermemSession.pop_item` against the SDK's own `SQLiteSession`: concurrent pops
return distinct items (they are serialised per conversation in a process, and two
Memory objects on one data directory, as two processes are, settle it by the log's
order), and a chat row that converts to several Responses items loses exactly its last
item. Pops read the view and then appended, so two could return the same item; and a
pop of a multi-item row returned its first item while hiding all of them."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
from agents import SQLiteSession

from tiermem import Config, Memory
from tiermem.adapters.openai_agents import TiermemSession
from tiermem.tiers.embed_onnx import FastEmbedder

ITEMS = [{"role": "user", "content": f"m{i}"} for i in range(12)]


async def _gather_pops(session: Any, n: int) -> list[Any]:
    return list(await asyncio.gather(*[session.pop_item() for _ in range(n)]))


def test_concurrent_pops_return_distinct_items(cold_memory: Memory) -> None:
    for trial in range(6):
        s = TiermemSession(cold_memory, f"race{trial}")
        asyncio.run(s.add_items(ITEMS))
        # two session objects on one conversation, as two requests of one service hold
        other = TiermemSession(cold_memory, f"race{trial}")
        popped = asyncio.run(_gather_pops(s, 4)) + asyncio.run(_gather_pops(other, 4))
        assert sorted(p["content"] for p in popped) == sorted(f"m{i}" for i in range(4, 12))
        assert asyncio.run(s.get_items()) == ITEMS[:4]


def _pop(session: TiermemSession, start: threading.Barrier, got: list[Any]) -> None:
    start.wait()  # every pop reads the view at about the same time
    got.append(asyncio.run(session.pop_item()))


def test_pops_through_two_memories_on_one_directory_stay_distinct(tmp_path: Path,
                                                                  embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "d")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as a, \
            Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as b:
        for trial in range(4):
            conv = f"x{trial}"
            asyncio.run(TiermemSession(a, conv).add_items(ITEMS))
            sessions = [TiermemSession(m, conv) for m in (a, b) for _ in range(3)]
            start = threading.Barrier(len(sessions))
            got: list[Any] = []
            threads = [threading.Thread(target=_pop, args=(s, start, got)) for s in sessions]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert sorted(p["content"] for p in got) == sorted(f"m{i}" for i in range(6, 12))
            assert asyncio.run(TiermemSession(b, conv).get_items()) == ITEMS[:6]


def test_a_row_of_several_items_loses_only_its_last(cold_memory: Memory) -> None:
    rows = [{"role": "user", "content": "Check both cities."},
            {"role": "assistant", "content": "Checking both.", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}]
    cold_memory.append_many("multi", rows)
    ours = TiermemSession(cold_memory, "multi")
    ref = SQLiteSession("ref")
    asyncio.run(ref.add_items(asyncio.run(ours.get_items())))
    assert len(asyncio.run(ours.get_items())) == 4  # the user turn, the text, two calls
    for _ in range(5):
        assert asyncio.run(ours.pop_item()) == asyncio.run(ref.pop_item())
        assert asyncio.run(ours.get_items()) == asyncio.run(ref.get_items())
    hist = cold_memory.history("multi")
    assert [m.body for m in hist[:2]] == rows  # nothing changed or deleted
    assert any((m.metadata or {}).get("tiermem_popped_from") == 1 for m in hist)  # what a pop put back says so
