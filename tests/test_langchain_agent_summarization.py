"""`create_agent` with langchain's `SummarizationMiddleware` beside `TiermemMiddleware`
(either order): the summary it puts in the state in place of the messages it summarised
(a human message marked `lc_source: summarization`) is not stored as a user turn, nor
taken for the latest human message (`_langchain_sync.is_summary`): tiermem holds the
messages it summarised. Real `create_agent` and `SummarizationMiddleware` with
langchain-core's fake chat models, real SQLite.

Fails on the code before: each summary was stored as a user turn (3 of the log's rows in
5 turns, either order), and recalled as one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("langchain.agents")
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_helpers import RecordingFakeModel
from langgraph.checkpoint.memory import InMemorySaver

from tiermem import Memory
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.adapters.langchain_agent import TiermemMiddleware

BUDGET = 3000  # tokens of tiermem's context: room for the whole thread
TURNS = 5
SUMMARISE_AT = 5  # state messages that start a summary
KEEP = 2  # messages the summary leaves after it


def answers() -> Iterator[AIMessage]:
    n = 0
    while True:
        n += 1
        yield AIMessage(f"answer {n}")


@pytest.mark.parametrize("summary_first", [
    True,  # summarisation outer: tiermem sees the summarised state
    False,  # tiermem outer
])
def test_summary_is_not_stored(cold_memory: Memory, summary_first: bool) -> None:
    summariser = GenericFakeChatModel(messages=iter([AIMessage(f"SUMMARY {i}") for i in range(TURNS)]))
    summary = SummarizationMiddleware(summariser, trigger=("messages", SUMMARISE_AT), keep=("messages", KEEP))
    tiermem = TiermemMiddleware(cold_memory, budget=BUDGET)
    model = RecordingFakeModel(messages=answers())
    model.received = []
    agent = create_agent(model, [], middleware=[summary, tiermem] if summary_first else [tiermem, summary],
                         checkpointer=InMemorySaver())
    for i in range(TURNS):
        state = agent.invoke({"messages": [HumanMessage(f"question {i}")]}, {"configurable": {"thread_id": "t"}})
    assert any(m.additional_kwargs.get("lc_source") == "summarization" for m in state["messages"])  # it summarised
    rows = [(r.body["role"], r.body["content"]) for r in cold_memory.history("t")]
    assert rows == [row for i in range(TURNS) for row in (("user", f"question {i}"), ("assistant", f"answer {i + 1}"))]


def test_summary_is_not_the_latest_question(cold_memory: Memory) -> None:
    # a summary after the last question (a tool loop summarised): neither stored nor sent
    sync = ConversationSync(cold_memory, "t", budget=BUDGET)
    marked = HumanMessage("Here is a summary of the conversation to date:\n\nS", id="s1",
                          additional_kwargs={"lc_source": "summarization"})
    sent = sync.model_input([HumanMessage("Weather in Lisbon?", id="h1"), AIMessage("Sunny.", id="a1"), marked])
    assert [m.content for m in sent if isinstance(m, HumanMessage)] == ["Weather in Lisbon?"]
    assert [(r.metadata or {}).get("langchain_id") for r in cold_memory.history("t")] == ["h1", "a1"]


