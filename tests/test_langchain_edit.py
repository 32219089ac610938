"""A LangChain/LangGraph message edited in place under the same id reaches tiermem.

LangGraph's `add_messages` replaces a message whose id the state holds (`update_state`,
time travel), and `ConversationSync` (the LangGraph hooks', the `create_agent`
middleware's) skipped it since the id was stored: the old text stayed in `context()` and
in the chat history. An edit now retracts the edited row and every visible row after it
and appends the new version and copies of the later rows, in one batch (one
transaction): the view keeps its order, the log keeps the old version. Real
`langchain-core` / `langgraph` packages and their fake chat model, real SQLite (and
PostgreSQL for the one-transaction check).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain.agents")
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_helpers import RecordingFakeModel, weather
from langgraph.checkpoint.memory import InMemorySaver

from tiermem import Config, Memory
from tiermem.adapters._common import visible
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.tiers.embed import Embedder
from tiermem.tiers.formats import RETRACT_TYPE

CONV = "trip"
THREAD = {"configurable": {"thread_id": CONV}}
BUDGET_TOKENS = 2000
OLD, NEW = "Booked for the 12th.", "Booked for the 14th."


def _state() -> list[BaseMessage]:
    return [HumanMessage("Book my hotel.", id="h1"), AIMessage(OLD, id="a1"),
            HumanMessage("Add breakfast.", id="h2"), AIMessage("Breakfast added.", id="a2")]


def _shown(mem: Memory) -> list[tuple[str | None, Any]]:
    return [(m.id, m.content) for m in TiermemChatMessageHistory(mem, CONV).messages]


def _context(mem: Memory, query: str = "When is my hotel booked?") -> list[Any]:
    return [m.get("content") for m in mem.context(CONV, query, BUDGET_TOKENS).messages]


def test_a_reply_edited_in_a_langgraph_state_replaces_the_old_text(cold_memory: Memory) -> None:
    """The colleague's reproduction: `update_state` edits the latest reply, the next run
    must not plan from the old text."""
    model = RecordingFakeModel(messages=iter([AIMessage(OLD, id="a1"), AIMessage("On the 14th.", id="a2")]))
    model.received = []
    agent = create_agent(model, [], middleware=[TiermemMiddleware(cold_memory, CONV, budget=BUDGET_TOKENS)],
                         checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("Book my hotel.", id="h1")]}, THREAD)
    agent.update_state(THREAD, {"messages": [AIMessage(NEW, id="a1")]})
    agent.invoke({"messages": [HumanMessage("When is it booked?", id="h2")]}, THREAD)
    sent = [m.content for m in model.received[-1]]
    assert NEW in sent and OLD not in sent
    assert _shown(cold_memory) == [("h1", "Book my hotel."), ("a1", NEW), ("h2", "When is it booked?"),
                                   ("a2", "On the 14th.")]
    # the old version stays in the log, retracted
    hist = cold_memory.history(CONV)
    assert [m.body.get("content") for m in hist if m.body.get("type") != RETRACT_TYPE][:3] == \
        ["Book my hotel.", OLD, NEW]


def _edited(state: list[BaseMessage], i: int, new: BaseMessage) -> list[BaseMessage]:
    return [*state[:i], new, *state[i + 1:]]


EDITS: list[tuple[int, BaseMessage, list[Any]]] = [
    # the latest message
    (3, AIMessage("Breakfast and parking added.", id="a2"),
     ["Book my hotel.", OLD, "Add breakfast.", "Breakfast and parking added."]),
    # an earlier one: the later turns keep their places after it
    (1, AIMessage(NEW, id="a1"), ["Book my hotel.", NEW, "Add breakfast.", "Breakfast added."]),
    # the first one
    (0, HumanMessage("Book my hotel in Porto.", id="h1"),
     ["Book my hotel in Porto.", OLD, "Add breakfast.", "Breakfast added."]),
]


@pytest.mark.parametrize(("index", "new", "want"), EDITS, ids=["latest", "earlier", "first"])
def test_an_edit_keeps_the_order_and_the_times(cold_memory: Memory, index: int, new: BaseMessage,
                                              want: list[Any]) -> None:
    sync = ConversationSync(cold_memory, CONV)
    state = _state()
    assert sync.sync(state) == len(state)
    before = visible(cold_memory, CONV)
    assert sync.sync(_edited(state, index, new)) == 1
    after = visible(cold_memory, CONV)
    assert [m.body.get("content") for m in after] == want
    assert [m.id for m in TiermemChatMessageHistory(cold_memory, CONV).messages] == [m.id for m in state]
    assert _context(cold_memory) == want
    # the edited row and the later ones are rewritten with their times and metadata; the
    # earlier ones stand as they were
    assert [(m.created_at, m.role) for m in after] == [(m.created_at, m.role) for m in before]
    assert [m.position for m in after[:index]] == [m.position for m in before[:index]]
    assert [m.metadata for m in after[index + 1:]] == [m.metadata for m in before[index + 1:]]
    # the same state again: nothing more is written
    rows = len(cold_memory.history(CONV))
    assert sync.sync(_edited(state, index, new)) == 0
    assert len(cold_memory.history(CONV)) == rows


def test_a_tool_calls_args_edited(cold_memory: Memory) -> None:
    call = AIMessage("", id="c1", tool_calls=[{"id": "call_w", "name": "weather", "args": {"city": "Paris"}}])
    state: list[BaseMessage] = [HumanMessage("Weather?", id="h1"), call,
                                ToolMessage("sunny", tool_call_id="call_w", id="t1", artifact={"temp": 21}),
                                AIMessage("Sunny.", id="a1")]
    sync = ConversationSync(cold_memory, CONV)
    sync.sync(state)
    lisbon = AIMessage("", id="c1", tool_calls=[{"id": "call_w", "name": "weather", "args": {"city": "Lisbon"}}])
    assert sync.sync(_edited(state, 1, lisbon)) == 1
    got = TiermemChatMessageHistory(cold_memory, CONV).messages
    assert [m.id for m in got] == ["h1", "c1", "t1", "a1"]
    assert isinstance(got[1], AIMessage) and got[1].tool_calls[0]["args"] == {"city": "Lisbon"}
    # the tool result after it is copied whole, its artifact (metadata) too
    assert isinstance(got[2], ToolMessage) and got[2].artifact == {"temp": 21}


UNCHANGED: list[tuple[str, BaseMessage]] = [
    # plain text, the same
    ("text", AIMessage(OLD, id="a1")),
    # the same text with other response metadata (not content)
    ("response metadata", AIMessage(OLD, id="a1", response_metadata={"model_name": "other"})),
    # blocks the chat form leaves out (kept as LangChain content), the same
    ("reasoning blocks", AIMessage([{"type": "reasoning", "reasoning": "think"}, {"type": "text", "text": OLD}],
                                   id="a1")),
    # the same tool call
    ("tool call", AIMessage("", id="a1", tool_calls=[{"id": "c", "name": "weather", "args": {"city": "Oslo"}}])),
]


@pytest.mark.parametrize(("shape", "message"), UNCHANGED, ids=[c[0] for c in UNCHANGED])
def test_an_edit_that_changes_no_content_writes_nothing(cold_memory: Memory, shape: str,
                                                        message: BaseMessage) -> None:
    sync = ConversationSync(cold_memory, CONV)
    stored = message.model_copy(update={"response_metadata": {}}) if shape == "response metadata" else message
    sync.sync([HumanMessage("hi", id="h1"), stored])
    rows = len(cold_memory.history(CONV))
    # a fresh instance (another worker, a restart) compares against the log too
    for s in (sync, ConversationSync(cold_memory, CONV)):
        assert s.sync([HumanMessage("hi", id="h1"), message]) == 0
    assert len(cold_memory.history(CONV)) == rows


def test_an_edit_ends_the_prompt_cache_epoch_that_showed_it(cold_memory: Memory) -> None:
    sync = ConversationSync(cold_memory, CONV)
    state = _state()
    sync.sync(state)
    _context(cold_memory)
    sync.sync(_edited(state, 1, AIMessage(NEW, id="a1")))
    ctx = cold_memory.context(CONV, "When is my hotel booked?", BUDGET_TOKENS)
    assert ctx.plan.cache is not None and ctx.plan.cache.new_epoch
    assert ctx.plan.cache.reason == "3 item(s) it showed were retracted since (popped, or edited: a new version " \
        "replaced it)"
    assert OLD not in [m.get("content") for m in ctx.messages]


def test_another_instance_edits_from_the_log(cold_memory: Memory) -> None:
    """Two workers: the one that did not store the message edits it, and the first one
    then sees the new version as stored (no second edit)."""
    a, b = ConversationSync(cold_memory, CONV), ConversationSync(cold_memory, CONV)
    state = _state()
    a.sync(state)
    edited = _edited(state, 1, AIMessage(NEW, id="a1"))
    assert b.sync(edited) == 1
    rows = len(cold_memory.history(CONV))
    assert a.sync(edited) == 0
    assert len(cold_memory.history(CONV)) == rows


def test_a_removed_message_stays_in_memory(cold_memory: Memory) -> None:
    """Pins what must not change: `RemoveMessage` is how a graph keeps its state short, and
    the past is what tiermem supplies, so a message removed from the state is not
    retracted (passes before and after)."""
    model = RecordingFakeModel(messages=iter([AIMessage(OLD, id="a1"), AIMessage("On the 12th.", id="a2")]))
    model.received = []
    agent = create_agent(model, [weather], middleware=[TiermemMiddleware(cold_memory, CONV, budget=BUDGET_TOKENS)],
                         checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("Book my hotel.", id="h1")]}, THREAD)
    agent.update_state(THREAD, {"messages": [RemoveMessage(id="h1"), RemoveMessage(id="a1")]})
    agent.invoke({"messages": [HumanMessage("When is it booked?", id="h2")]}, THREAD)
    assert [i for i, _ in _shown(cold_memory)] == ["h1", "a1", "h2", "a2"]


@pytest.fixture
def engine_memory(engine_config: Config, embedder: Embedder) -> Iterator[Memory]:
    with Memory(engine_config, embedder=embedder, hot=False, background_indexing=False) as mem:
        yield mem


def test_an_edit_is_one_transaction(engine_memory: Memory) -> None:
    """The retractions, the new version, the copies and the new messages are one append
    batch: one write transaction on either engine (all or nothing), so a crash never
    leaves a half-replayed tail."""
    sync = ConversationSync(engine_memory, CONV)
    state = _state()
    sync.sync(state)
    batches: list[int] = []
    append_batch = engine_memory.cold.append_batch

    def counted(*args: Any, **kwargs: Any) -> Any:  # the real append, counted
        batches.append(len(args[1]))
        return append_batch(*args, **kwargs)

    engine_memory.cold.append_batch = counted  # type: ignore[method-assign]
    try:
        assert sync.sync([*_edited(state, 1, AIMessage(NEW, id="a1")), HumanMessage("And parking?", id="h3")]) == 2
    finally:
        del engine_memory.cold.append_batch
    # 3 retractions, the new version, 2 copies and the new message
    assert batches == [7]
    assert [m.body.get("content") for m in visible(engine_memory, CONV)] == \
        ["Book my hotel.", NEW, "Add breakfast.", "Breakfast added.", "And parking?"]
