"""create_react_agent with `TiermemHooks` runs every round's tool when the model server
numbers its calls per reply (`call_0` every round), as the README promises: the hooks'
`post_model_hook` gives a reply's call id that the state holds already the first free
suffix (`fresh_call_ids`: `call_0_2`), in the state (the same message id: the graph
replaces it) and the stored row alike. Real langgraph `create_react_agent` with
langchain-core's fake chat model, real SQLite.

Fails on the code before: create_react_agent's router after a post_model_hook counts a
call answered when any tool message of the state has its id, so the second round's
`call_0` never ran (1 tool run of 2, the run ending on the unanswered call)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langgraph.prebuilt")
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_helpers import RecordingFakeModel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from tiermem import Memory
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.adapters.langgraph import TiermemHooks, fresh_call_ids

BUDGET = 3000  # tokens of the hooks' context: room for the whole thread
ROUNDS = 3  # turns, each one call_0 and a final answer

ran: list[str] = []


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    ran.append(city)
    return f"sunny in {city}"


def per_reply_ids() -> Iterator[AIMessage]:
    for r in range(ROUNDS):
        yield AIMessage("", tool_calls=[{"id": "call_0", "name": "weather", "args": {"city": f"city{r}"}}])
        yield AIMessage(f"Sunny {r}.")


def call_ids(messages: list[BaseMessage]) -> list[tuple[str, str | None]]:
    """(kind, id) of each call and tool message, in order."""
    out = []
    for m in messages:
        if isinstance(m, AIMessage):
            out += [("call", c["id"]) for c in m.tool_calls]
        elif isinstance(m, ToolMessage):
            out.append(("result", m.tool_call_id))
    return out


def test_every_round_runs_its_tool(cold_memory: Memory) -> None:
    ran.clear()
    hooks = TiermemHooks(cold_memory, budget=BUDGET)
    graph = create_react_agent(RecordingFakeModel(messages=per_reply_ids()), [weather], checkpointer=InMemorySaver(),
                               pre_model_hook=hooks.pre_model_hook, post_model_hook=hooks.post_model_hook)
    for r in range(ROUNDS):
        state = graph.invoke({"messages": [HumanMessage(f"Weather {r}?")]}, {"configurable": {"thread_id": "t"}})
        assert state["messages"][-1].content == f"Sunny {r}."  # before: the 2nd turn ended on its call
    assert ran == [f"city{r}" for r in range(ROUNDS)]  # before: ["city0"]
    expected = [(kind, cid) for cid in ("call_0", "call_0_2", "call_0_3") for kind in ("call", "result")]
    assert call_ids(state["messages"]) == expected
    # the log holds the ids the state does: each message stored once, no edit
    rows = cold_memory.history("t")
    assert len(rows) == len(state["messages"])
    assert call_ids(TiermemChatMessageHistory(cold_memory, "t").messages) == expected


def ai(*ids: str, content: Any = "", ai_id: str = "new") -> AIMessage:
    return AIMessage(content, tool_calls=[{"id": i, "name": "weather", "args": {"city": "x"}} for i in ids], id=ai_id)


def answered(cid: str) -> ToolMessage:
    return ToolMessage("sunny", tool_call_id=cid, id=f"t-{cid}")


USE = {"type": "tool_use", "id": "call_0", "name": "weather", "input": {"city": "x"}}

# each case: the state (its last message the reply), the reply's call ids after, and its
# content after (None: the reply is left as it is)
FRESH: list[tuple[str, list[BaseMessage], list[str] | None, Any]] = [
    # ids of its own: left as they are
    ("fresh ids", [ai("a", ai_id="old"), answered("a"), ai("b")], None, None),
    # a per-reply id answered before: the first free suffix
    ("call_0 answered before", [ai("call_0", ai_id="old"), answered("call_0"), ai("call_0")], ["call_0_2"], ""),
    # the suffix taken too (a third round): the next one
    ("call_0 and call_0_2 taken",
     [ai("call_0", ai_id="o1"), answered("call_0"), ai("call_0_2", ai_id="o2"), answered("call_0_2"), ai("call_0")],
     ["call_0_3"], ""),
    # an earlier call with the id, never answered (an abandoned round): taken as well
    ("call_0 called before, unanswered", [ai("call_0", ai_id="old"), ai("call_0")], ["call_0_2"], ""),
    # two calls of the reply, one repeating: only it renamed
    ("one of two repeats", [ai("call_0", ai_id="old"), answered("call_0"), ai("call_0", "call_1")],
     ["call_0_2", "call_1"], ""),
    # ChatAnthropic's reply: its tool_use block goes with its call
    ("tool_use block", [ai("call_0", ai_id="old"), answered("call_0"), ai("call_0", content=[USE])],
     ["call_0_2"], [{**USE, "id": "call_0_2"}]),
    # the last message no AI message (a hook after a tool message): nothing to do
    ("last is a tool message", [ai("call_0", ai_id="old"), answered("call_0")], None, None),
]


@pytest.mark.parametrize(("name", "messages", "ids", "content"), FRESH, ids=[c[0] for c in FRESH])
def test_fresh_call_ids(name: str, messages: list[BaseMessage], ids: list[str] | None, content: Any) -> None:
    renamed = fresh_call_ids(messages)
    if ids is None:
        assert renamed is None
        return
    assert renamed is not None and renamed.id == messages[-1].id  # replaces the reply in the state
    assert [c["id"] for c in renamed.tool_calls] == ids
    assert renamed.content == content
