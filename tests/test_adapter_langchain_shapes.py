"""LangChain history and the LangGraph hook read every stored shape, and keep what the
OpenAI format has no field for. An assistant tool-call reply with `content: null` (what
the `openai` SDK's `model_dump()` and `to_dict()` give) and a refusal-only reply raised
ValueError in LangChain's conversion, as did a call whose arguments are not JSON; a tool
message came back without its `name`, with status "success" for "error", and without
its artifact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langgraph")
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from openai.types.chat import ChatCompletionMessage

from tiermem import Config, Memory
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.tiers.embed_onnx import FastEmbedder

CALL = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}}
REPLY = ChatCompletionMessage.model_validate({"role": "assistant", "content": None, "tool_calls": [CALL]})
REPLIES = {
    "model_dump": REPLY.model_dump(),
    "to_dict": REPLY.to_dict(),
    "param": {"role": "assistant", "content": None, "tool_calls": [CALL]},
}


@pytest.mark.parametrize("how", list(REPLIES))
def test_a_null_content_tool_call_reads_back(cold_memory: Memory, how: str) -> None:
    cold_memory.append_many("c", [{"role": "user", "content": "Weather in Lisbon?"}, REPLIES[how],
                                  {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}])
    msgs = TiermemChatMessageHistory(cold_memory, "c").messages
    assert [type(m) for m in msgs] == [HumanMessage, AIMessage, ToolMessage]
    ai = msgs[1]
    assert isinstance(ai, AIMessage) and ai.content == ""
    assert ai.tool_calls == [{"name": "weather", "args": {"city": "Lisbon"}, "id": "call_1", "type": "tool_call"}]
    # the LangGraph hook plans a context over the same rows
    out = TiermemHooks(cold_memory, "c").pre_model_hook({"messages": [HumanMessage("And tomorrow?", id="q2")]})
    sent: list[BaseMessage] = out["llm_input_messages"]
    assert any(isinstance(m, AIMessage) and m.tool_calls for m in sent)


def test_a_refusal_only_reply_reads_back(cold_memory: Memory) -> None:
    cold_memory.append_many("r", [{"role": "user", "content": "Help me cheat."},
                                  {"role": "assistant", "content": None, "refusal": "I can't help with that."}])
    msgs = TiermemChatMessageHistory(cold_memory, "r").messages
    assert isinstance(msgs[1], AIMessage) and msgs[1].content == ""
    assert msgs[1].additional_kwargs == {"refusal": "I can't help with that."}
    TiermemHooks(cold_memory, "r").pre_model_hook({"messages": []})


def test_a_call_whose_arguments_are_not_json_is_an_invalid_tool_call(cold_memory: Memory) -> None:
    bad = {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Lis'}}
    cold_memory.append_many("b", [{"role": "user", "content": "Weather?"},
                                  {"role": "assistant", "content": None, "tool_calls": [CALL, bad]}])
    ai = TiermemChatMessageHistory(cold_memory, "b").messages[1]
    assert isinstance(ai, AIMessage)
    assert [c["id"] for c in ai.tool_calls] == ["call_1"]
    assert [(c["id"], c["args"]) for c in ai.invalid_tool_calls] == [("call_2", '{"city": "Lis')]


def test_tool_messages_keep_name_status_and_artifact(cold_memory: Memory) -> None:
    h = TiermemChatMessageHistory(cold_memory.namespaced("acme"), "tools")
    sent = [
        AIMessage("", id="a1", tool_calls=[{"id": "c1", "name": "w", "args": {}},
                                           {"id": "c2", "name": "w", "args": {}},
                                           {"id": "c3", "name": "w", "args": {}}]),
        ToolMessage("sunny", tool_call_id="c1", name="w", id="t1"),
        ToolMessage("boom", tool_call_id="c2", status="error", id="t2"),
        ToolMessage('{"a": 1}', tool_call_id="c3", artifact={"raw": [1, 2], "ok": True}, id="t3"),
    ]
    h.add_messages(sent)
    got = h.messages
    for want, back in zip(sent[1:], got[1:], strict=True):
        assert isinstance(back, ToolMessage) and isinstance(want, ToolMessage)
        assert (back.id, back.name, back.status, back.artifact, back.content) == (
            want.id, want.name, want.status, want.artifact, want.content)


def test_an_artifact_tiermem_cannot_keep_is_left_out(tmp_path: Path, embedder: FastEmbedder) -> None:
    with Memory(Config(data_dir=tmp_path / "d", max_metadata_bytes=200), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        h = TiermemChatMessageHistory(mem, "big")
        odd: Any = object()
        h.add_messages([AIMessage("", id="a", tool_calls=[{"id": "c1", "name": "w", "args": {}},
                                                          {"id": "c2", "name": "w", "args": {}}]),
                        ToolMessage("x", tool_call_id="c1", artifact="y" * 500, id="t1", status="error"),
                        ToolMessage("x", tool_call_id="c2", artifact=odd, id="t2")])
        got = h.messages
        assert [(m.id, getattr(m, "artifact", None), getattr(m, "status", None)) for m in got[1:]] == [
            ("t1", None, "error"), ("t2", None, "success")]
