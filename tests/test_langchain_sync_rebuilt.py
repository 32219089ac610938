"""The LangChain/LangGraph sync notices a conversation erased and begun again elsewhere.

`ConversationSync` remembers which LangChain ids the log holds up to the last position it
read, and read on from there. It noticed an erasure only when nothing came after that
position: a conversation another process erased and began again as long or longer left
the new rows at or below it unread, and ids of the old incarnation noted, so a shared
checkpointer's messages were stored twice (both copies shown). The read now starts at the
last row read, which must come back the same (rows never change). Two Memory objects on
one data directory, as two processes are; real SQLite; real LangChain messages.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langchain_core")
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from tiermem import Config, Memory
from tiermem.adapters._common import visible
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.tiers.embed import Embedder

CONV = "t"
OLD = [HumanMessage("Book Lisbon.", id="o0"), AIMessage("Booked.", id="o1")]


def _turns(n: int) -> list[BaseMessage]:
    return [HumanMessage(f"q{i}", id=f"n{i}") if i % 2 == 0 else AIMessage(f"a{i}", id=f"n{i}") for i in range(n)]


@pytest.fixture
def two(tmp_path: Path, embedder: Embedder) -> Iterator[tuple[Memory, Memory]]:
    cfg = Config(data_dir=tmp_path / "d")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as a, \
            Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as b:
        yield a, b


CASES: list[tuple[int, int]] = [
    # begun again longer than what this instance read: its new rows sit at and below it
    (4, 5),
    # begun again as long: nothing after the last position read
    (2, 3),
    # begun again shorter (noticed before too)
    (1, 3),
    # erased and not begun again: this instance begins it
    (0, 2),
]


@pytest.mark.parametrize(("rebuilt", "state"), CASES, ids=["longer", "as long", "shorter", "erased only"])
def test_a_rebuilt_conversation_stores_each_message_once(two: tuple[Memory, Memory], rebuilt: int,
                                                         state: int) -> None:
    a, b = two
    ours = ConversationSync(a, CONV)
    assert ours.sync(OLD) == len(OLD)
    b.delete_conversation(CONV)
    if rebuilt:
        assert ConversationSync(b, CONV).sync(_turns(rebuilt)) == rebuilt  # another process's worker
    # the shared checkpointer's state: what the other worker stored, and what came after
    assert ours.sync(_turns(state)) == state - rebuilt
    assert [(m.metadata or {}).get("langchain_id") for m in visible(a, CONV)] == [f"n{i}" for i in range(state)]


def test_an_unchanged_conversation_reads_on(two: tuple[Memory, Memory]) -> None:
    a, b = two
    ours = ConversationSync(a, CONV)
    assert ours.sync(OLD) == len(OLD)
    assert ConversationSync(b, CONV).sync([*OLD, *_turns(2)]) == 2  # another worker went on
    assert ours.sync([*OLD, *_turns(3)]) == 1
    assert [(m.metadata or {}).get("langchain_id") for m in visible(a, CONV)] == ["o0", "o1", "n0", "n1", "n2"]
