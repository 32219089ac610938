"""A fold (a consolidation checkpoint) is a read boundary for planned contexts, never for
a session's view: after one, the Agents SDK `Session.get_items` and LangChain's
`TiermemChatMessageHistory.messages` still return the whole visible history (read from
`history()` in pages), with what pops and clears hide still hidden. They returned only
the rows after the fold, so a framework that sends its history lost the whole past."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain_core")
from agents import SQLiteSession
from langchain_core.messages import AIMessage, HumanMessage, convert_to_openai_messages

from tiermem import Memory
from tiermem.adapters import _common
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.adapters.openai_agents import TiermemSession


def _turn(i: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"Question {i}: weather in city{i}? I prefer aisle seats."},
            {"type": "function_call", "call_id": f"c{i}", "name": "weather", "arguments": "{}", "id": f"fc{i}",
             "status": "completed"},
            {"type": "function_call_output", "call_id": f"c{i}", "output": f"sunny in city{i}"},
            {"type": "message", "role": "assistant", "id": f"m{i}", "status": "completed",
             "content": [{"type": "output_text", "text": f"Sunny in city{i}.", "annotations": []}]}]


def test_session_items_survive_a_fold(cold_memory: Memory) -> None:
    ours, ref = TiermemSession(cold_memory, "trip"), SQLiteSession("ref")
    for i in range(10):
        asyncio.run(ours.add_items(_turn(i)))
        asyncio.run(ref.add_items(_turn(i)))
    cold_memory.consolidate("trip")  # what the scheduler does: it folds
    last = len(cold_memory.history("trip")) - 1
    cold_memory.checkpoint("trip", "Ten weather questions.", last)  # and a fold at the very end
    assert cold_memory.active("trip").messages == []
    assert asyncio.run(ours.get_items()) == asyncio.run(ref.get_items())
    assert asyncio.run(ours.get_items(limit=3)) == asyncio.run(ref.get_items(limit=3))
    # pops after the fold hide items before it, as the SDK's session removes them
    for _ in range(5):
        assert asyncio.run(ours.pop_item()) == asyncio.run(ref.pop_item())
    assert asyncio.run(ours.get_items()) == asyncio.run(ref.get_items())


def test_langchain_history_survives_a_fold(cold_memory: Memory) -> None:
    h = TiermemChatMessageHistory(cold_memory.namespaced("acme"), "chat")
    sent = [m for i in range(30) for m in (HumanMessage(f"fact {i}: budget {100 + i} euros", id=f"h{i}"),
                                           AIMessage(f"answer {i}", id=f"a{i}"))]
    h.add_messages(sent)
    cold_memory.namespaced("acme").checkpoint("chat", "Thirty budgets.", 57)
    got = h.messages
    assert [m.id for m in got] == [m.id for m in sent]
    assert convert_to_openai_messages(got) == convert_to_openai_messages(sent)


def test_the_view_reads_in_pages_and_keeps_what_control_rows_hide(cold_memory: Memory,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    s = TiermemSession(cold_memory, "paged")
    items = [{"role": "user", "content": f"m{i}"} for i in range(6)]
    asyncio.run(s.add_items(items))
    asyncio.run(s.clear_session())  # position 6: hides m0..m5
    asyncio.run(s.add_items([{"role": "user", "content": f"n{i}"} for i in range(5)]))  # 7..11
    cold_memory.checkpoint("paged", "m and n", 9)
    monkeypatch.setattr(_common, "HISTORY_PAGE", 3)  # the clear, the items and the pop in different pages
    assert asyncio.run(s.pop_item()) == {"role": "user", "content": "n4"}
    cold_memory.append("paged", {"type": "tiermem.retract", "position": 8})  # n1, two pages back
    assert [i["content"] for i in asyncio.run(s.get_items())] == ["n0", "n2", "n3"]
    assert [m.content for m in TiermemChatMessageHistory(cold_memory, "paged").messages] == ["n0", "n2", "n3"]
