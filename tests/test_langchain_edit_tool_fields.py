"""A ToolMessage edited only in its `status` or `artifact` is an edit.

Both live in the row's metadata (`langchain_status`, `langchain_artifact`), and the
edit check compared the stored body and the kept content only: a tool result marked
an error after the fact (`update_state`), or given another artifact, kept its old
status or artifact in the chat history. The metadata the adapter derives from the
message is compared too; an artifact the store's metadata limit left out is not (it
would be left out again). Real `langchain-core`, real SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tiermem import Config, Memory
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.tiers.embed import Embedder

CONV = "weather"
# the store's metadata limit: the id and a small artifact fit, BIG does not
MAX_METADATA_BYTES = 200
BIG = {"rows": ["x" * 40] * 8}


def _state(**tool: Any) -> list[BaseMessage]:
    return [HumanMessage("Weather in Oslo?", id="h1"),
            AIMessage("", id="c1", tool_calls=[{"id": "call_w", "name": "weather", "args": {"city": "Oslo"}}]),
            ToolMessage("sunny", tool_call_id="call_w", id="t1", **tool),
            AIMessage("Sunny in Oslo.", id="a1")]


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data", max_metadata_bytes=MAX_METADATA_BYTES), embedder=embedder,
                hot=False, background_indexing=False) as m:
        yield m


def _tool(mem: Memory) -> ToolMessage:
    got = TiermemChatMessageHistory(mem, CONV).messages
    assert [m.id for m in got] == ["h1", "c1", "t1", "a1"]
    assert isinstance(got[2], ToolMessage)
    return got[2]


# the tool message stored, the same message edited, and its status and artifact read back
EDITS: list[tuple[str, dict[str, Any], dict[str, Any], tuple[str, Any]]] = [
    # marked an error after the fact
    ("status to error", {}, {"status": "error"}, ("error", None)),
    # an error marked a success again
    ("status to success", {"status": "error"}, {"status": "success"}, ("success", None)),
    # another artifact
    ("artifact changed", {"artifact": {"v": 1}}, {"artifact": {"v": 2}}, ("success", {"v": 2})),
    # an artifact where there was none
    ("artifact added", {}, {"artifact": {"v": 1}}, ("success", {"v": 1})),
    # the artifact taken away
    ("artifact removed", {"artifact": {"v": 1}}, {}, ("success", None)),
]


@pytest.mark.parametrize(("case", "before", "after", "want"), EDITS, ids=[e[0] for e in EDITS])
def test_a_tool_message_edited_in_status_or_artifact(mem: Memory, case: str, before: dict[str, Any],
                                                     after: dict[str, Any], want: tuple[str, Any]) -> None:
    sync = ConversationSync(mem, CONV)
    sync.sync(_state(**before))
    assert sync.sync(_state(**after)) == 1
    tool = _tool(mem)
    assert (tool.status, tool.artifact) == want
    rows = len(mem.history(CONV))
    # the same state again, from this instance or a fresh one: nothing more is written
    for s in (sync, ConversationSync(mem, CONV)):
        assert s.sync(_state(**after)) == 0
    assert len(mem.history(CONV)) == rows


# a tool message stored, then the same one synced again: no edit
UNCHANGED: list[tuple[str, dict[str, Any]]] = [
    # an error, the same
    ("status error", {"status": "error"}),
    # the same artifact
    ("artifact", {"artifact": {"temp": 21, "unit": "C"}}),
    # an artifact over the store's metadata limit: stored without it, and left out again
    ("artifact too big", {"artifact": BIG}),
]


@pytest.mark.parametrize(("case", "tool"), UNCHANGED, ids=[u[0] for u in UNCHANGED])
def test_a_tool_message_unchanged_writes_nothing(mem: Memory, case: str, tool: dict[str, Any]) -> None:
    sync = ConversationSync(mem, CONV)
    assert sync.sync(_state(**tool)) == len(_state())
    rows = len(mem.history(CONV))
    for s in (sync, ConversationSync(mem, CONV)):
        assert s.sync(_state(**tool)) == 0
    assert len(mem.history(CONV)) == rows
