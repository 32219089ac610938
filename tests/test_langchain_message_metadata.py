"""A LangChain message's own metadata (`additional_kwargs`, `response_metadata`,
`usage_metadata`), which the OpenAI chat form has no field for, is kept in the row's
metadata (`METADATA_FIELD_KEYS`), never in the stored body the planner counts, and comes
back: in the chat history, and in the context a LangChain agent's model is given (so a
provider that needs its own data back, such as Gemini's thought signatures of the calls
it answers, gets it in the same turn). It is kept on the terms the LangChain content is:
JSON only (an integration's object in `additional_kwargs` left out, the rest kept), and
left out where the store's metadata limit does not take it, the message stored without
it. An AI message's content blocks the chat form does not hold as they are (an Anthropic
`tool_use` block) come back from the LangChain content kept; a block LangChain's
conversion cannot write (v1 `text-plain`) is tiermem's ValidationError naming the
message's content. Real langchain-core and langchain (`create_agent`), real SQLite.

Fails on the code before: every field read back empty (history and agent context), the
`tool_use` block read back as a string of its text, and `text-plain` raised LangChain's
bare ValueError."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from tiermem import Config, Memory
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import ValidationError

SIGNATURES = {"__gemini_function_call_thought_signatures__": {"c1": "c2lnbmF0dXJl"}}
USAGE = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
# a metadata limit the kwargs and usage fit in, a long response_metadata does not
SMALL_METADATA_BYTES = 300
LONG_TEXT = "x" * 2 * SMALL_METADATA_BYTES
# the row's metadata keys (`tiermem.adapters.langchain.METADATA_FIELD_KEYS`)
KWARGS_KEY = "langchain_additional_kwargs"
RESPONSE_KEY = "langchain_response_metadata"


def mem_at(tmp_path: Path, embedder: Embedder, **cfg: Any) -> Memory:
    return Memory(Config(data_dir=tmp_path / "data", **cfg), embedder=embedder, hot=False, background_indexing=False)


# each case: messages appended, each read back equal (every field)
ROUND_TRIP: list[tuple[str, list[BaseMessage]]] = [
    # the reviewer's case: a reply's reasoning, its response metadata and token counts
    ("AI reply, all three", [HumanMessage("q", id="h1"), AIMessage(
        "hi", id="a1", additional_kwargs={"reasoning_content": "step 1"},
        response_metadata={"model_name": "gpt-x", "finish_reason": "stop"}, usage_metadata=USAGE)]),
    # a tool-calling reply with Gemini's thought signatures, and its tool result
    ("tool call with signatures", [HumanMessage("go", id="h1"), AIMessage(
        "", id="a1", tool_calls=[{"id": "c1", "name": "t", "args": {}, "type": "tool_call"}],
        additional_kwargs=SIGNATURES), ToolMessage("ok", tool_call_id="c1", id="t1")]),
    # a human message's additional_kwargs
    ("human kwargs", [HumanMessage("q", id="h1", additional_kwargs={"source": "voice"})]),
    # a tool message's response_metadata
    ("tool response_metadata", [AIMessage("", id="a1", tool_calls=[{"id": "c1", "name": "t", "args": {},
                                                                     "type": "tool_call"}]),
                                ToolMessage("ok", tool_call_id="c1", id="t1", response_metadata={"ms": 12})]),
    # Anthropic's reply form: text and a tool_use block, the block kept (was a string)
    ("tool_use block", [HumanMessage("q", id="h1"), AIMessage(
        [{"type": "text", "text": "let me"}, {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {"a": 1}}],
        id="a1", tool_calls=[{"id": "toolu_1", "name": "t", "args": {"a": 1}, "type": "tool_call"}]),
        ToolMessage("r", tool_call_id="toolu_1", id="t1")]),
]


@pytest.mark.parametrize(("name", "messages"), ROUND_TRIP, ids=[c[0] for c in ROUND_TRIP])
def test_round_trip(tmp_path: Path, embedder: Embedder, name: str, messages: list[BaseMessage]) -> None:
    with mem_at(tmp_path, embedder) as mem:
        history = TiermemChatMessageHistory(mem, "c")
        history.add_messages(messages)
        assert history.messages == messages
        # none of it in the stored bodies, which the planner counts
        for row in mem.history("c"):
            assert not {"additional_kwargs", "response_metadata", "usage_metadata"} & set(row.body)
            assert "signature" not in json.dumps(row.body)


def test_not_counted_by_the_planner(tmp_path: Path, embedder: Embedder) -> None:
    # two conversations alike but for the reply's metadata plan to the same tokens
    with mem_at(tmp_path, embedder) as mem:
        plain = [HumanMessage("What is the weather?"), AIMessage("Sunny.")]
        rich = [HumanMessage("What is the weather?"),
                AIMessage("Sunny.", additional_kwargs={"reasoning_content": "r" * 400},
                          response_metadata={"model_name": "m"}, usage_metadata=USAGE)]
        TiermemChatMessageHistory(mem, "plain").add_messages(plain)
        TiermemChatMessageHistory(mem, "rich").add_messages(rich)
        assert KWARGS_KEY in (mem.history("rich")[1].metadata or {})
        assert mem.context("rich", "weather").tokens == mem.context("plain", "weather").tokens


def test_json_entries_kept_an_object_left_out(tmp_path: Path, embedder: Embedder) -> None:
    # structured output's `parsed` (an object) is not JSON: the other entries are kept
    with mem_at(tmp_path, embedder) as mem:
        history = TiermemChatMessageHistory(mem, "c")
        history.add_messages([AIMessage("{}", id="a1", additional_kwargs={"parsed": object(), **SIGNATURES,
                                                                          "bad_key": {1: "int key"}})])
        assert history.messages[0].additional_kwargs == SIGNATURES


def test_over_the_metadata_limit_left_out(tmp_path: Path, embedder: Embedder) -> None:
    # the provider's data first: the long response_metadata is left out, the message
    # stored with the rest
    with mem_at(tmp_path, embedder, max_metadata_bytes=SMALL_METADATA_BYTES) as mem:
        history = TiermemChatMessageHistory(mem, "c")
        history.add_messages([AIMessage("hi", id="a1", additional_kwargs=SIGNATURES,
                                        response_metadata={"raw": LONG_TEXT}, usage_metadata=USAGE)])
        meta = mem.history("c")[0].metadata or {}
        assert KWARGS_KEY in meta and RESPONSE_KEY not in meta
        back = history.messages[0]
        assert isinstance(back, AIMessage)
        assert (back.content, back.additional_kwargs, back.response_metadata, back.usage_metadata) == (
            "hi", SIGNATURES, {}, USAGE)


def test_text_plain_block_is_a_validation_error(tmp_path: Path, embedder: Embedder) -> None:
    with mem_at(tmp_path, embedder) as mem:
        history = TiermemChatMessageHistory(mem, "c")
        with pytest.raises(ValidationError) as exc:
            history.add_messages([HumanMessage("ok"), HumanMessage(
                [{"type": "text-plain", "text": "hello", "mime_type": "text/plain"}])])
        assert exc.value.field == "messages[1].content"
        assert "text-plain" in str(exc.value)
        assert "c" not in mem.conversations()  # nothing written, the first message neither


class SignedToolModel(BaseChatModel):
    """A chat model that calls tool `t` with a thought signature, then answers; records
    each call's input."""

    received: list[list[BaseMessage]] = []  # noqa: RUF012 (a pydantic field, per instance below)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> SignedToolModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.received.append(list(messages))
        if isinstance(messages[-1], ToolMessage):
            return ChatResult(generations=[ChatGeneration(message=AIMessage("Done."))])
        reply = AIMessage("", tool_calls=[{"id": "c1", "name": "t", "args": {}}], additional_kwargs=SIGNATURES,
                          response_metadata={"model_name": "m"})
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def t() -> str:
    """A tool."""
    return "ok"


def test_agent_gets_its_call_back_with_its_kwargs(tmp_path: Path, embedder: Embedder) -> None:
    # create_agent + TiermemMiddleware: the second model call of the turn is given the
    # tool-calling reply from tiermem's context, its signatures with it (before: none)
    pytest.importorskip("langchain.agents")
    from langchain.agents import create_agent

    from tiermem.adapters.langchain_agent import TiermemMiddleware

    with mem_at(tmp_path, embedder) as mem:
        model = SignedToolModel(received=[])
        agent = create_agent(model, [t], middleware=[TiermemMiddleware(mem, budget=2000)])
        agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "x"}})
        assert len(model.received) == 2
        calls = [m for m in model.received[1] if isinstance(m, AIMessage) and m.tool_calls]
        assert [(m.additional_kwargs, m.response_metadata) for m in calls] == [(SIGNATURES, {"model_name": "m"})]


def test_langgraph_hooks_store_and_send_them(tmp_path: Path, embedder: Embedder) -> None:
    # the hooks' sync stores the fields; a restart's sync of the same state writes
    # nothing; its model input carries the reply's kwargs
    from tiermem.adapters.langgraph import TiermemHooks

    state: list[BaseMessage] = [
        HumanMessage("go", id="h1"),
        AIMessage("", id="a1", tool_calls=[{"id": "c1", "name": "t", "args": {}, "type": "tool_call"}],
                  additional_kwargs=SIGNATURES, usage_metadata=USAGE),
        ToolMessage("ok", tool_call_id="c1", id="t1")]
    with mem_at(tmp_path, embedder) as mem:
        assert TiermemHooks(mem, "t", budget=2000).sync(state) == len(state)
        assert TiermemHooks(mem, "t", budget=2000).sync(state) == 0
        assert TiermemChatMessageHistory(mem, "t").messages == state
        sent = TiermemHooks(mem, "t", budget=2000).model_input(state)
        calls = [m for m in sent if isinstance(m, AIMessage) and m.tool_calls]
        assert [m.additional_kwargs for m in calls] == [SIGNATURES]
