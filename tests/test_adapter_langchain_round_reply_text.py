"""The LangChain adapters send a Responses reply's text that is among its calls
(`[function_call, message]`, one round: `tiers.formats.joins_round`) on the calls'
AIMessage, as `tiers.formats.to_chat` joins it: their ToolMessages right after it. Every
adapter that sends a planned context (`context_input`: the LangGraph hooks, the
`create_agent` middleware, their `ConversationSync`) and the chat history's `messages`.

Fails on the code before: `_converted` converted each body alone and joined only call
items, so the reply read `[Human, AI+calls, AI(text), Tool, Human]`: Chat Completions
refuses it (the calls not answered before the next message), Anthropic too (two
assistant messages in a row; the `tool_use` not answered in the next message).

Real langchain-core, langchain's `create_agent` with the fake chat model, langchain-
anthropic's own request formatting (`ChatAnthropic._get_request_payload`, no network),
real SQLite; provider_rules' checks of LangChain's conversion to the chat form."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")
from hash_embedder import HashEmbedder
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_helpers import RecordingFakeModel, weather
from provider_rules import anthropic_problems, chat_problems

from tiermem import Config, Memory
from tiermem.adapters.langchain import TiermemChatMessageHistory, context_input
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.adapters.langgraph import TiermemHooks

BUDGET = 4000  # tokens: room for every case's whole log, so nothing is cut
ASK = {"role": "user", "content": "Refund order A1"}
NEXT = "What is the refund number?"
RS = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "refund it"}]}
FC = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "refund", "arguments": '{"order":"A1"}',
      "status": "completed"}
FC2 = {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "refund", "arguments": '{"order":"B2"}',
       "status": "completed"}
MSG = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
       "content": [{"type": "output_text", "text": "I am issuing the refund now.", "annotations": []}]}
OUT = {"type": "function_call_output", "call_id": "call_1", "output": "refund R-77 issued"}
OUT2 = {"type": "function_call_output", "call_id": "call_2", "output": "refund R-88 issued"}

# each case: the rows after ASK (then the user's NEXT), and the calls (ids) of the one
# AIMessage that must carry the reply's text
CASES = [
    # the reported reply: the call, then the text, then its output
    pytest.param([FC, MSG, OUT], ["call_1"], id="call-message-output"),
    # reasoning first (no chat form: left out of the LangChain messages)
    pytest.param([RS, FC, MSG, OUT], ["call_1"], id="reasoning-call-message-output"),
    # parallel calls, the text after both
    pytest.param([FC, FC2, MSG, OUT, OUT2], ["call_1", "call_2"], id="two-calls-message"),
    # the text between two parallel calls: one AIMessage, both calls on it
    pytest.param([FC, MSG, FC2, OUT2, OUT], ["call_1", "call_2"], id="call-message-call"),
    # the text before the call: one AIMessage before the fix too
    pytest.param([MSG, FC, OUT], ["call_1"], id="message-call-output"),
]
FORMATS = ["as_stored", "responses", "chat"]


@pytest.fixture
def make_memory(tmp_path: Path) -> Iterator[Any]:
    opened: list[Memory] = []

    def make(fmt: str) -> Memory:
        m = Memory(Config(data_dir=tmp_path / f"m{len(opened)}", context_format=fmt), embedder=HashEmbedder(),
                   hot=False, background_indexing=False)
        opened.append(m)
        return m

    yield make
    for m in opened:
        m.close()


def _anthropic_problems(msgs: list[BaseMessage]) -> list[str]:
    """The repo's Anthropic rules on what langchain-anthropic would send for `msgs`."""
    from langchain_anthropic import ChatAnthropic

    payload = ChatAnthropic(model="claude-sonnet-4-5", api_key="unused").\
        _get_request_payload(msgs)  # type: ignore[arg-type]
    blocks = [{**m, "content": [{"type": "text", "text": m["content"]}] if isinstance(m["content"], str)
               else m["content"]} for m in payload["messages"]]
    system = payload.get("system") or []
    return anthropic_problems([{"type": "text", "text": system}] if isinstance(system, str) else system, blocks)


def _check(msgs: list[BaseMessage], calls: list[str]) -> None:
    """One AIMessage holds `calls` and the reply's text, their ToolMessages right after it,
    and both providers take the messages."""
    with_calls = [i for i, m in enumerate(msgs) if isinstance(m, AIMessage) and m.tool_calls]
    assert len(with_calls) == 1
    ai = msgs[with_calls[0]]
    assert [c["id"] for c in ai.tool_calls] == calls  # type: ignore[attr-defined]
    assert "issuing the refund" in str(ai.content)
    assert sum("issuing the refund" in str(m.content) for m in msgs) == 1  # sent once
    after = msgs[with_calls[0] + 1:with_calls[0] + 1 + len(calls)]
    assert sorted(m.tool_call_id for m in after if isinstance(m, ToolMessage)) == sorted(calls)
    assert chat_problems(convert_to_openai_messages(msgs)) == []
    pytest.importorskip("langchain_anthropic")
    assert _anthropic_problems(msgs) == []


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("rows", "calls"), CASES)
def test_context_input_sends_the_text_on_the_calls_message(make_memory: Any, fmt: str, rows: list[dict[str, Any]],
                                                           calls: list[str]) -> None:
    m = make_memory(fmt)
    m.append_many("t", [ASK, *rows, {"role": "user", "content": NEXT}])
    _check(context_input(m.context("t", NEXT, budget=BUDGET)), calls)


@pytest.mark.parametrize(("rows", "calls"), CASES)
def test_history_messages_send_the_text_on_the_calls_message(make_memory: Any, rows: list[dict[str, Any]],
                                                             calls: list[str]) -> None:
    m = make_memory("as_stored")
    m.append_many("t", [ASK, *rows])
    _check([*TiermemChatMessageHistory(m, "t").messages, HumanMessage(NEXT)], calls)


@pytest.mark.parametrize("fmt", FORMATS)
def test_langgraph_hooks_send_a_valid_round(make_memory: Any, fmt: str) -> None:
    m = make_memory(fmt)
    m.append_many("t", [ASK, FC, MSG, OUT])
    msgs = TiermemHooks(m, "t", budget=BUDGET).pre_model_hook({"messages": [HumanMessage(NEXT)]})["llm_input_messages"]
    _check(msgs, ["call_1"])


def test_create_agent_middleware_sends_a_valid_round(make_memory: Any) -> None:
    m = make_memory("as_stored")
    m.append_many("t", [ASK, FC, MSG, OUT])
    model = RecordingFakeModel(messages=iter([AIMessage("R-77.")]))
    agent = create_agent(model, [weather], middleware=[TiermemMiddleware(m, "t", budget=BUDGET)])
    assert agent.invoke({"messages": [HumanMessage(NEXT)]})["messages"][-1].content == "R-77."
    _check([x for x in model.received[-1] if x.type != "system"], ["call_1"])
