"""`create_agent` with `TiermemMiddleware`: a model that calls six tools at once, whose
results (about 10 kB each) do not fit the budget whole, is shown its round (each result
trimmed to fit) and answers; real langchain and langgraph packages, a scripted model, no
network.

On the code before, tiermem sent the model the question alone, so it called the six tools
again and again until LangGraph's recursion limit (GraphRecursionError): an agent paying
for every call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from tiermem import Config, Memory
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.tokens import messages_tokens

pytestmark = pytest.mark.usefixtures("shared_vectors")

BUDGET_TOKENS = 2000
CALLS = 6
RECURSION_LIMIT = 10  # a model call and a tool step each: room for a few rounds only


class ScriptedModel(BaseChatModel):
    """Calls the tool CALLS times in parallel until it is shown their results, then answers."""

    received: list[list[BaseMessage]] = Field(default_factory=list)  # each call's input

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kw: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kw: Any) -> ChatResult:
        self.received.append(list(messages))
        if isinstance(messages[-1], ToolMessage):  # it got its results: answer
            return ChatResult(generations=[ChatGeneration(message=AIMessage("Done."))])
        calls = [{"id": f"call_{i}", "name": "fetch", "args": {"city": f"c{i}"}} for i in range(CALLS)]
        return ChatResult(generations=[ChatGeneration(message=AIMessage("", tool_calls=calls))])


@tool
def fetch(city: str) -> str:
    """Fetch a city's weather page."""
    return " ".join(f"{city} line{j} temp" for j in range(500))  # about 10 kB


def test_the_agent_is_shown_its_round_and_stops(tmp_path: Path, embedder: FastEmbedder) -> None:
    model = ScriptedModel()
    with Memory(Config(data_dir=tmp_path / "d"), embedder=embedder, hot=False, background_indexing=False) as mem:
        agent = create_agent(model, [fetch], middleware=[TiermemMiddleware(mem, budget=BUDGET_TOKENS)],
                             checkpointer=InMemorySaver())
        out = agent.invoke({"messages": [HumanMessage("Compare the weather in six cities")]},
                           {"configurable": {"thread_id": "t"}, "recursion_limit": RECURSION_LIMIT})
        assert out["messages"][-1].content == "Done."
        assert len(model.received) == 2  # the round, then the answer: no call repeated
        second = model.received[1]
        assert [type(m).__name__ for m in second] == ["HumanMessage", "AIMessage"] + ["ToolMessage"] * CALLS
        assert [m.tool_call_id for m in second[2:]] == [f"call_{i}" for i in range(CALLS)]  # type: ignore[attr-defined]
        assert messages_tokens(mem.tokens, convert_to_openai_messages(second)) <= BUDGET_TOKENS  # type: ignore[arg-type]
