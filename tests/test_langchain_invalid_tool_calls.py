"""An AI message's `invalid_tool_calls` (a call the model wrote with arguments that are not
JSON, as LangChain's parsers make them) are stored and come back: in the row's calls as
langchain-openai sends them (`{"type": "function", "id", "function": {"name", "arguments":
the text written}}`, after the valid calls), so the model sees its failed call and the
context keeps the tool message answering it; the LangChain form whole (the error text,
a call without an id or a name: no chat call can carry it) in the row's metadata
(`METADATA_INVALID_CALLS_KEY`), so the chat history and the LangGraph sync read back an
equal message. `create_agent`'s answer to an invalid call (an error tool message it
writes into the state's past at the next model call) is stored in its place
(`tiermem.adapters.langchain_agent.with_repairs`). Real langchain-core messages, real
`create_agent` with langchain-core's fake chat model, real SQLite.

Fails on the code before: `convert_to_openai_messages` leaves invalid calls out, so the
row held none (every case of the round trip read back without them), and the context
left out the tool message answering the failed call (it answered no stored call); the
agent's second model call saw neither the failed call nor its answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import invalid_tool_call

from tiermem import Config, Memory
from tiermem.adapters.langchain import METADATA_INVALID_CALLS_KEY, TiermemChatMessageHistory
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.tiers.embed import Embedder
from tiermem.tiers.formats import TOOL_NAME_MAX_CHARS

BUDGET = 4000  # tokens of the hooks' context: room for the whole log, so nothing is cut
# a metadata limit the kept invalid calls of LONG_ARGS do not fit (the store's least is 2)
SMALL_METADATA_BYTES = 200
LONG_ARGS = '{"city": "' + "L" * 2 * SMALL_METADATA_BYTES  # cut off mid-string: not JSON

VALID = {"id": "c1", "name": "weather", "args": {"city": "Lisbon"}}


def bad(cid: str | None, name: str | None = "weather", args: str | None = '{"city": Lisb',
        error: str | None = "JSONDecodeError") -> Any:
    return invalid_tool_call(name=name, args=args, id=cid, error=error)


# each case: the AI message's valid and invalid calls, and the calls its row holds
# (id, name, arguments), valid ones first
ROUND_TRIP: list[tuple[str, list[Any], list[Any], list[tuple[str, str, str]]]] = [
    # the reviewer's case: a valid call and one whose arguments are not JSON
    ("valid and invalid", [VALID], [bad("c2")],
     [("c1", "weather", '{"city": "Lisbon"}'), ("c2", "weather", '{"city": Lisb')]),
    # only an invalid call (create_agent's repro: the model's first try)
    ("invalid only", [], [bad("c2")], [("c2", "weather", '{"city": Lisb')]),
    # arguments that are JSON yet the call invalid (a parser's other error): read back
    # invalid, never as a call a tool node would run
    ("JSON arguments, still invalid", [], [bad("c2", args='{"city": "Lisbon"}', error="unknown tool")],
     [("c2", "weather", '{"city": "Lisbon"}')]),
    # no arguments (a stream cut off): the empty text in the row, None back
    ("no arguments", [], [bad("c2", args=None, error=None)], [("c2", "weather", "")]),
    # no id: no chat call can carry it (nor a tool message answer it); kept in metadata,
    # back on read
    ("no id", [VALID], [bad(None)], [("c1", "weather", '{"city": "Lisbon"}')]),
    # no name: the store takes no call without one (it would refuse the whole batch)
    ("no name", [VALID], [bad("c2", name=None, args=None, error=None)], [("c1", "weather", '{"city": "Lisbon"}')]),
    # a name longer than the store takes (TOOL_NAME_MAX_CHARS): as without one
    ("name too long", [], [bad("c2", name="w" * (TOOL_NAME_MAX_CHARS + 1))], []),
    # two invalid calls, one without an id between them: order kept
    ("two invalid, one without an id", [], [bad("c2"), bad(None, args="{"), bad("c3", args="[")],
     [("c2", "weather", '{"city": Lisb'), ("c3", "weather", "[")]),
]


def row_calls(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in body.get("tool_calls") or []]


@pytest.mark.parametrize(("name", "valid", "invalid", "stored"), ROUND_TRIP, ids=[c[0] for c in ROUND_TRIP])
def test_history_round_trip(cold_memory: Memory, name: str, valid: list[Any], invalid: list[Any],
                            stored: list[tuple[str, str, str]]) -> None:
    ai = AIMessage("", tool_calls=valid, invalid_tool_calls=invalid, id="a1")
    history = TiermemChatMessageHistory(cold_memory, "chat")
    history.add_messages([HumanMessage("Weather?", id="h1"), ai])
    row = cold_memory.history("chat")[1]
    assert row_calls(row.body) == stored  # what another client, and the model, reads
    back = history.messages[1]
    assert isinstance(back, AIMessage)
    assert (back.tool_calls, back.invalid_tool_calls, back.id) == (ai.tool_calls, ai.invalid_tool_calls, "a1")
    assert back == ai


def test_context_keeps_the_failed_call_and_its_answer(cold_memory: Memory) -> None:
    history = TiermemChatMessageHistory(cold_memory, "chat")
    history.add_messages([HumanMessage("Weather?", id="h1"),
                          AIMessage("", invalid_tool_calls=[bad("c2")], id="a1"),
                          ToolMessage("Error: arguments were malformed", tool_call_id="c2", status="error", id="t1"),
                          AIMessage("Let me try again.", id="a2"), HumanMessage("Please do.", id="h2")])
    ctx = cold_memory.context("chat", "Please do.", BUDGET)
    roles = [(m["role"], m.get("tool_call_id")) for m in ctx.messages]
    assert ("tool", "c2") in roles  # before: left out, it answered no stored call
    call_at = next(i for i, m in enumerate(ctx.messages) if row_calls(m) == [("c2", "weather", '{"city": Lisb')])
    assert roles[call_at + 1] == ("tool", "c2")


def test_kept_calls_over_the_metadata_limit_read_back_as_parsed(tmp_path: Path, embedder: Embedder) -> None:
    # the LangChain form left out (it does not fit): the row's calls still carry the
    # failed call, read back invalid (its arguments are not JSON) with its id, name, args
    cfg = Config(data_dir=tmp_path / "data", max_metadata_bytes=SMALL_METADATA_BYTES)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        history = TiermemChatMessageHistory(mem, "chat")
        history.add_messages([AIMessage("", tool_calls=[VALID], invalid_tool_calls=[bad("c2", args=LONG_ARGS)],
                                        id="a1")])
        assert METADATA_INVALID_CALLS_KEY not in (mem.history("chat")[0].metadata or {})
        back = history.messages[0]
        assert isinstance(back, AIMessage) and back.tool_calls == [{**VALID, "type": "tool_call"}]
        assert [(c["id"], c["name"], c["args"]) for c in back.invalid_tool_calls] == [("c2", "weather", LONG_ARGS)]


def state() -> list[BaseMessage]:
    return [HumanMessage("Weather?", id="h1"), AIMessage("", invalid_tool_calls=[bad("c2")], id="a1"),
            ToolMessage("Error: malformed", tool_call_id="c2", status="error", id="t1"),
            AIMessage("", tool_calls=[{**VALID, "id": "c3"}], id="a2")]


def test_langgraph_sync_stores_them_and_reads_no_edit(tmp_path: Path, embedder: Embedder) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        assert TiermemHooks(mem, "t", budget=BUDGET).sync(state()) == len(state())
        # a new instance (a restart) syncing the same state: each row is as the state
        # holds it, no edit (no retraction, nothing written)
        assert TiermemHooks(mem, "t", budget=BUDGET).sync(state()) == 0
        rows = mem.history("t")
        assert len(rows) == len(state())
        assert row_calls(rows[1].body) == [("c2", "weather", '{"city": Lisb')]
        back = TiermemChatMessageHistory(mem, "t").messages
        assert back == state()
        # the hooks' model input shows the failed call and its answer
        sent = TiermemHooks(mem, "t", budget=BUDGET).model_input([*state(), HumanMessage("Again?", id="h2")])
        failed = [m for m in sent if isinstance(m, AIMessage) and m.invalid_tool_calls]
        assert [c["id"] for m in failed for c in m.invalid_tool_calls] == ["c2"]
        assert any(isinstance(m, ToolMessage) and m.tool_call_id == "c2" for m in sent)


def test_a_call_with_empty_arguments_reads_as_one_without_arguments(cold_memory: Memory) -> None:
    # another writer's row (a server that sends "" for a call of no arguments): read as
    # arguments {} (before: LangChain's conversion raised JSONDecodeError on reading)
    cold_memory.append_many("chat", [{"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "id": "c1", "function": {"name": "now", "arguments": ""}}]}])
    back = TiermemChatMessageHistory(cold_memory, "chat").messages[0]
    assert isinstance(back, AIMessage)
    assert (back.tool_calls, back.invalid_tool_calls) == ([{"name": "now", "args": {}, "id": "c1", "type": "tool_call"}],
                                                          [])


def test_create_agent_sends_the_failed_call_and_its_answer(cold_memory: Memory) -> None:
    pytest.importorskip("langchain.agents")
    from langchain.agents import create_agent
    from langchain_helpers import RecordingFakeModel, weather
    from langgraph.checkpoint.memory import InMemorySaver

    from tiermem.adapters.langchain_agent import TiermemMiddleware

    replies = iter([AIMessage("", invalid_tool_calls=[bad("call_1", args="{city: Lisbon")]),
                    AIMessage("", tool_calls=[{"id": "call_2", "name": "weather", "args": {"city": "Lisbon"}}]),
                    AIMessage("Sunny.")])
    model = RecordingFakeModel(messages=replies)
    model.received = []
    agent = create_agent(model, [weather], middleware=[TiermemMiddleware(cold_memory, budget=BUDGET)],
                         checkpointer=InMemorySaver())
    for turn in ["Weather in Lisbon?", "Try again."]:
        state = agent.invoke({"messages": [HumanMessage(turn)]}, {"configurable": {"thread_id": "t1"}})
    second = model.received[1]  # the model's call after its failed one
    shown = [(type(m).__name__, [c["id"] for c in getattr(m, "invalid_tool_calls", [])],
              getattr(m, "tool_call_id", None)) for m in second]
    # as without tiermem: the failed call, LangChain's error answer, then the new turn
    assert shown == [("HumanMessage", [], None), ("AIMessage", ["call_1"], None), ("ToolMessage", [], "call_1"),
                     ("HumanMessage", [], None)]
    # the log in the state's order, each message once (the answer under the state's id)
    rows = cold_memory.history("t1")
    assert [(r.body["role"], r.body.get("tool_call_id")) for r in rows] == [
        ("user", None), ("assistant", None), ("tool", "call_1"), ("user", None), ("assistant", None),
        ("tool", "call_2"), ("assistant", None)]
    assert [(r.metadata or {}).get("langchain_id") for r in rows] == [m.id for m in state["messages"]]
