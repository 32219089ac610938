"""A Responses reply may put other items among or after its calls (`[reasoning,
function_call, message]`, a hosted tool's call after the function calls), and the app's
`function_call_output` comes after the whole reply: one round. The Responses API pairs a
call with its output by `call_id`, not by adjacency (the Agents SDK sends its history in
exactly this order), so `context()` keeps the call, the items after it and its output in
one unit (`tiers.formats.joins_round`), a reasoning item with the item after it; the
chat form joins the reply's text to its calls' message, where Chat Completions wants the
results right after the calls. A chat assistant message after unanswered chat calls still
ends their round (Chat Completions adjacency).

On the code before, any item after a call and before its output ended the round: the
call (with the reasoning before it) was left out as "a tool call no result answers" and
its output as an orphan, so the model never saw the result it asked for.

Real SQLite files, the real `openai` SDK's types (the reply parsed into a `Response`, the
context validated against `ResponseInputItemParam` / `ChatCompletionMessageParam`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hash_embedder import HashEmbedder
from openai.types.responses import Response
from provider_rules import chat_problems, responses_problems
from sdk_corpus import valid_chat, valid_responses

from tiermem import Config, Memory
from tiermem.planner.candidates import UNANSWERED_CALL, tool_units
from tiermem.tiers.models import StoredMessage

RS = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
RS2 = {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "now say so"}]}
FC = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "refund", "arguments": '{"order":"A1"}',
      "status": "completed"}
CT = {"type": "custom_tool_call", "id": "ct_1", "call_id": "call_2", "name": "sql", "input": "select 1"}
MSG = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
       "content": [{"type": "output_text", "text": "I am issuing the refund now.", "annotations": []}]}
WS = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "policy"}}
CI = {"type": "code_interpreter_call", "id": "ci_1", "status": "completed", "code": "1", "container_id": "cntr_1",
      "outputs": []}
FC_OUT = {"type": "function_call_output", "call_id": "call_1", "output": "refund R-77 issued"}
CT_OUT = {"type": "custom_tool_call_output", "call_id": "call_2", "output": "one row: R-88"}

REPLIES = [
    # the reported reply: reasoning, the call, then the model's text
    pytest.param([RS, FC, MSG], id="reasoning-call-message"),
    # the text after the call, no reasoning
    pytest.param([FC, MSG], id="call-message"),
    # a hosted tool's call after the function calls
    pytest.param([RS, FC, CT, CI], id="calls-then-code-interpreter"),
    pytest.param([RS, FC, WS], id="call-then-web-search"),
    # a second reasoning item among the round: it stays with the message after it
    pytest.param([RS, FC, RS2, MSG], id="reasoning-after-call-stays-with-its-message"),
    # the text before the call: a round before the fix too
    pytest.param([MSG, FC], id="message-call"),
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


def _sdk_output(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reply's output parsed by the `openai` SDK, each item as the Agents SDK stores it
    (`to_input_item`: its dump without unset fields)."""
    return [i.model_dump(mode="json", by_alias=True, exclude_unset=True) for i in Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 1, "model": "o4-mini", "status": "completed",
        "output": items, "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}).output]


def _problems(fmt: str, sent: list[dict[str, Any]]) -> list[str]:
    if fmt == "chat":
        valid_chat(sent)
        return chat_problems(sent)
    valid_responses(sent)
    return responses_problems(sent)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("reply", REPLIES)
def test_the_round_and_its_outputs_are_sent(make_memory: Any, reply: list[dict[str, Any]], fmt: str) -> None:
    m = make_memory(fmt)
    m.append("t", {"role": "user", "content": "Refund order A1"})
    m.append_many("t", _sdk_output(reply))
    m.append_many("t", [o for o in (FC_OUT, CT_OUT) if any(i.get("call_id") == o["call_id"] for i in reply)])
    m.append("t", {"role": "user", "content": "What is the refund number?"})
    ctx = m.context("t", "What is the refund number?", budget=4000)
    sent = json.dumps(ctx.messages)
    assert "R-77" in sent  # the output the model asked for
    assert _problems(fmt, ctx.messages) == []
    assert not ctx.plan.left_out  # nothing left out: the round is complete and the budget ample
    if fmt != "chat":  # every item of the round, in its order
        kinds = [s.get("type") for s in ctx.messages if s.get("type") not in (None, "message")
                 or s.get("role") == "assistant"]
        assert kinds == [i["type"] for i in reply] + [o["type"] for o in (FC_OUT, CT_OUT)
                                                       if any(i.get("call_id") == o["call_id"] for i in reply)]
    else:  # the reply's text rides on its calls' message, the result right after it
        calls = [i for i, s in enumerate(ctx.messages) if s.get("tool_calls")]
        assert len(calls) == 1 and ctx.messages[calls[0] + 1]["role"] == "tool"
        if MSG in reply:
            assert "issuing the refund" in (ctx.messages[calls[0]]["content"] or "")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_pending_round_then_its_output_extends_the_epoch(make_memory: Any, fmt: str) -> None:
    # the agent asks for a context mid-loop (the reply appended, its output not yet), then
    # again once the output is in: the output continues the round the context left open
    m = make_memory(fmt)
    m.append("t", {"role": "user", "content": "Refund order A1"})
    m.append_many("t", _sdk_output([RS, FC, MSG]))
    first = m.context("t", "Refund order A1", budget=4000)
    assert "refund" in json.dumps(first.messages)  # the pending round is shown
    m.append("t", FC_OUT)
    again = m.context("t", "Refund order A1", budget=4000)
    assert "R-77" in json.dumps(again.messages)
    assert _problems(fmt, again.messages) == []


def _stored(bodies: list[dict[str, Any]]) -> list[StoredMessage | None]:
    return [StoredMessage("t", i, b.get("role", "assistant"), b, None, None, 0.0, tokens=1)
            for i, b in enumerate(bodies)]


CHAT_CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "refund", "arguments": "{}"}}]}
CHAT_TEXT = {"role": "assistant", "content": "I am issuing the refund now."}
CHAT_RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "refund R-77 issued"}


def test_chat_messages_keep_the_adjacency_rule() -> None:
    # a chat assistant message after unanswered chat calls is a new model turn: the calls
    # (and the result after it) are left out, as Chat Completions refuses them
    msgs = _stored([CHAT_CALL, CHAT_TEXT, CHAT_RESULT])
    units = tool_units(msgs, [False] * len(msgs))
    assert [[m.position for m in g] for g in units.groups] == [[1]]
    assert ([m.position for m in units.dropped[0][0]], units.dropped[0][1]) == ([0], UNANSWERED_CALL)
