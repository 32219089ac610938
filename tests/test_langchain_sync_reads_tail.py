"""A LangChain/LangGraph sync that only appends reads the log from the last row it read,
never the whole log: `ConversationSync._batch` read every visible row (a full pass over
the log) on each sync with new messages and threw the rows away unless there was an
edit, so every model call of an agent cost a read of the whole conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from tiermem import Config, Memory
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.tiers.embed import Embedder

HISTORY_LEN = 120  # more than one history page would not be needed to see a full read


class CountingMemory(Memory):
    """A real Memory that records the `after` of every history page read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.page_reads: list[int | None] = []

    def history_page(self, conversation_id: str, *args: Any, **kwargs: Any) -> Any:
        self.page_reads.append(kwargs.get("after"))
        return super().history_page(conversation_id, *args, **kwargs)


def _state(n: int) -> list[BaseMessage]:
    return [(HumanMessage if i % 2 == 0 else AIMessage)(f"message {i}", id=f"m{i}") for i in range(n)]


@pytest.mark.parametrize("step", [
    1,  # an agent's next model call: one new message
    2,  # a user turn and its reply synced together
])
def test_an_appending_sync_reads_only_what_came_after(tmp_path: Path, embedder: Embedder, step: int) -> None:
    mem = CountingMemory(Config(data_dir=tmp_path), embedder=embedder, hot=False, background_indexing=False)
    try:
        sync = ConversationSync(mem, "c")
        state = _state(HISTORY_LEN)
        assert sync.sync(state) == HISTORY_LEN
        for _ in range(3):
            state = state + _state(len(state) + step)[len(state):]
            mem.page_reads.clear()
            assert sync.sync(state) == step
            # every read started past the rows this sync had read before
            assert mem.page_reads and None not in mem.page_reads, mem.page_reads
        assert [m.body["content"] for m in mem.history("c")] == [m.content for m in state]
    finally:
        mem.close()


def test_an_edit_still_reads_the_rows_it_replays(tmp_path: Path, embedder: Embedder) -> None:
    # the edit path needs every visible row from the edited one on: the fix must not cut it
    mem = Memory(Config(data_dir=tmp_path), embedder=embedder, hot=False, background_indexing=False)
    try:
        sync = ConversationSync(mem, "c")
        state = _state(6)
        sync.sync(state)
        state[2] = HumanMessage("message 2, corrected", id="m2")
        sync.sync([*state, AIMessage("message 6", id="m6")])
        texts = [m.content for m in ConversationSync(mem, "c").context_messages(None)]
        assert "message 2, corrected" in texts and "message 2" not in texts
        assert texts[-1] == "message 6"
    finally:
        mem.close()
