"""A LangChain/LangGraph sync of a state grown at its end, and the hooks' model input,
look at the new messages only, not at the whole history. Each sync hashed every message
of the state (`ConversationSync._key`) to find what was new or edited, and `model_input`
converted the whole state to find its latest human message, so a model call on a long
conversation cost time in proportion to all of it even with one message new (210.6 ms
p50 at 5,000 messages in `tiermem.evals.bench_langchain_sync`). The Python calls the
adapter and langchain-core make in one sync and one `model_input` are counted
(`sys.setprofile`): they are as many for a history of SHORT as of LONG messages. The
state is the previous one plus new messages (the same objects, or a checkpoint's copies).
Real `langchain-core`, real SQLite.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

pytest.importorskip("langchain_core")
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from tiermem import Config, Memory
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.tiers.embed import Embedder

SHORT, LONG = 40, 400  # history lengths compared
BUDGET_TOKENS = 60  # a context that holds fewer messages than SHORT, at either length
# where the counted calls live: the adapters and langchain-core, not the store or the planner
COUNTED = ("tiermem/adapters/", "langchain_core/")


def _message(i: int, prefix: str = "m") -> BaseMessage:
    return (HumanMessage if i % 2 == 0 else AIMessage)(f"{prefix} {i}: a line of a conversation", id=f"{prefix}{i}")


def _calls(run: Callable[[], Any]) -> int:
    n = 0

    def count(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal n
        if event == "call" and any(p in frame.f_code.co_filename for p in COUNTED):
            n += 1

    sys.setprofile(count)
    try:
        run()
    finally:
        sys.setprofile(None)
    return n


@pytest.fixture
def mem(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


def _cost(mem: Memory, length: int, step: str, copies: bool) -> int:
    conv = f"c{length}"
    sync = ConversationSync(mem, conv, budget=BUDGET_TOKENS)
    state = [_message(i) for i in range(length)]
    sync.sync(state)
    sync.model_input(state)
    # the next model call's state: the same objects or a checkpoint's copies, one message more
    state = [m.model_copy(deep=True) for m in state] if copies else list(state)
    state.append(_message(length))
    if step == "sync":
        return _calls(lambda: sync.sync(state))
    return _calls(lambda: sync.model_input(state))


@pytest.mark.parametrize("copies", [
    False,  # the objects the last sync saw (within one graph run)
    True,   # a checkpoint's copies of them (a new run of the graph)
])
@pytest.mark.parametrize("step", [
    "sync",         # post_model_hook, the middleware's after_model
    "model_input",  # pre_model_hook: the sync, then the query for the context
])
def test_a_model_call_costs_the_new_messages_only(mem: Memory, step: str, copies: bool) -> None:
    short, long = _cost(mem, SHORT, step, copies), _cost(mem, LONG, step, copies)
    assert long == short, (short, long)


def _cost_after_edit(mem: Memory, length: int) -> int:
    conv = f"e{length}"
    sync = ConversationSync(mem, conv, budget=BUDGET_TOKENS)
    state = [_message(i) for i in range(length)]
    sync.sync(state)
    state[-3].content = "edited in place"  # an edit: its retractions and copies, by conditional appends
    state.append(_message(length))
    assert sync.sync(state) >= 1
    state.append(_message(length + 1))
    return _calls(lambda: sync.sync(state))


def test_a_sync_after_an_edit_costs_the_new_messages_only(mem: Memory) -> None:
    # the edit's sync recorded the state it ended with (before, the chunk index it had
    # reused as the state's: the state recorded twice as long, so every later sync
    # compared the whole history again)
    short, long = _cost_after_edit(mem, SHORT), _cost_after_edit(mem, LONG)
    assert long == short, (short, long)
