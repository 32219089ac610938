"""A LangChain/LangGraph sync keeps each message's snapshot (`_langchain_sync._snapshot`)
for as long as the instance lives (one per conversation, held by the hooks or the
middleware): a large field value is kept as a digest, not copied. A tool message's
artifact of 200,000 floats kept 22.8 MB (an `_Exact`, type and repr, per number; 0.2 MB
before the snapshots), a bytes artifact its whole repr (4 characters a zero byte). The
memory the syncs leave allocated is measured (`tracemalloc`). Real `langchain-core`,
real SQLite.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langchain_core")
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tiermem import Config, Memory
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.tiers.embed import Embedder

FLOATS = 200_000  # the reviewer's artifact: 22.6 MB held before, 0.11 MB after
BYTES = 2 * 1024 * 1024  # a binary artifact: its repr, 8.4 MB held before, 0.03 MB after
# the most the syncs may leave allocated: far from both (0.11 MB and 8.4 MB)
MAX_HELD_BYTES = 2 * 1024 * 1024
ROUNDS = 3  # model calls after the first sync, each one message more


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


@pytest.mark.parametrize("artifact", [
    pytest.param(lambda: [i * 0.001 for i in range(FLOATS)], id="floats"),  # scores, an embedding
    pytest.param(lambda: bytes(BYTES), id="bytes"),  # a file the tool read
])
def test_a_large_artifact_is_not_copied_into_the_snapshots(mem: Memory, artifact: object) -> None:
    state: list[BaseMessage] = [
        HumanMessage("find", id="h0"),
        AIMessage("", id="a0", tool_calls=[{"id": "call_1", "name": "search", "args": {"q": "x"}}]),
        ToolMessage("3 hits", tool_call_id="call_1", id="t0", artifact=artifact())]  # type: ignore[operator]
    sync = ConversationSync(mem, "c")
    tracemalloc.start()
    try:
        sync.sync(state)
        for k in range(ROUNDS):
            state.append(HumanMessage(f"more {k}", id=f"h{k + 1}"))
            sync.sync(state)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < MAX_HELD_BYTES, held
