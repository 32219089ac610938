"""A Responses-form context (`context_format="responses"`) leaves out the reasoning items
another provider's model wrote: the Agents SDK marks a Chat Completions model's items
(DeepSeek's reasoning, Anthropic thinking through LiteLLM) with `provider_data`, and its
own `OpenAIResponsesModel._clean_item_for_openai` drops a reasoning item that has any
before a Responses request. The plan says why (`FOREIGN_REASONING`); history keeps the
items; the items after them (the call, its output, the message) are sent; an OpenAI
reasoning item (no `provider_data`) is sent as before.

On the code before, they went to OpenAI in the Responses form with their `provider_data`
stripped (and one without its placeholder id): another provider's reasoning as OpenAI's.

Real SQLite files; the context checked by tests/provider_rules.py and the `openai` SDK's
request types."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hash_embedder import HashEmbedder
from provider_rules import responses_problems
from sdk_corpus import valid_responses

from tiermem import Config, Memory

FAKE = "__fake_id__"  # the Agents SDK's placeholder id (agents.models.fake_id.FAKE_RESPONSES_ID)
DEEPSEEK = {"type": "reasoning", "id": FAKE, "summary": [{"type": "summary_text", "text": "check the ledger"}],
            "provider_data": {"model": "deepseek-reasoner", "response_id": "chatcmpl-1"}}
CALL = {"type": "function_call", "id": FAKE, "call_id": "call_1", "name": "ledger", "arguments": "{}",
        "provider_data": {"model": "deepseek-reasoner"}}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "two charges"}
CLAUDE = {"type": "reasoning", "id": "rs_x", "summary": [], "encrypted_content": "<claude thinking signature>",
          "provider_data": {"model": "claude-sonnet-4-5"}}
SAID = {"type": "message", "id": FAKE, "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "You were charged twice.", "annotations": []}],
        "provider_data": {"model": "claude-sonnet-4-5"}}
OPENAI = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
OPENAI_SAID = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": "Refund issued.", "annotations": []}]}
ITEMS = [DEEPSEEK, CALL, OUTPUT, CLAUDE, SAID]


@pytest.fixture
def mem(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Memory]:
    m = Memory(Config(data_dir=tmp_path / "m", context_format=request.param), embedder=HashEmbedder(), hot=False,
               background_indexing=False)
    yield m
    m.close()


def _conversation(mem: Memory, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    mem.append("p", {"role": "user", "content": "Why was I charged twice?"})
    mem.append_many("p", items)
    mem.append("p", {"role": "user", "content": "refund one"})
    return mem.context("p", "refund one", budget=3000).messages


@pytest.mark.parametrize("mem", ["responses"], indirect=True)
@pytest.mark.parametrize("items", [
    pytest.param(ITEMS, id="deepseek-call-round-and-claude-reply"),  # the reported history
    pytest.param([CLAUDE, SAID], id="claude-reasoning-before-its-message"),
    pytest.param([DEEPSEEK, CALL, OUTPUT], id="deepseek-reasoning-before-its-call"),
])
def test_another_providers_reasoning_is_left_out(mem: Memory, items: list[dict[str, Any]]) -> None:
    sent = _conversation(mem, items)
    assert responses_problems(sent) == []
    assert [s for s in sent if s.get("type") == "reasoning"] == []
    # the items after it are sent
    others = [i for i in items if i["type"] != "reasoning"]
    assert [s.get("type") for s in sent if s.get("type") not in (None, "message") or s.get("role") == "assistant"] \
        == [i["type"] for i in others]
    # the plan says why, and history keeps them as given
    ctx = mem.context("p", "refund one", budget=3000)
    reasons = [it.reason for it in ctx.plan.left_out]
    assert len(reasons) == sum(i["type"] == "reasoning" for i in items)
    assert all("another provider's model" in r for r in reasons)
    assert [m.body for m in mem.history("p")][1:-1] == items


@pytest.mark.parametrize("mem", ["responses"], indirect=True)
def test_openais_own_reasoning_is_sent(mem: Memory) -> None:
    # no provider_data: an OpenAI Responses model's reasoning, sent with its id as before
    sent = _conversation(mem, [*ITEMS, OPENAI, OPENAI_SAID])
    valid_responses([s for s in sent if s.get("id") in ("rs_1", "msg_1")])
    assert [s["id"] for s in sent if s.get("type") == "reasoning"] == ["rs_1"]


@pytest.mark.parametrize("mem", ["as_stored"], indirect=True)
def test_as_stored_sends_the_rows_as_appended(mem: Memory) -> None:
    # `as_stored` sends what was appended (the Agents session's model_input_filter plans
    # on it and gives the SDK the items with their provider_data): unchanged
    sent = _conversation(mem, ITEMS)
    assert [s["summary"] for s in sent if s.get("type") == "reasoning"] == [DEEPSEEK["summary"], []]
