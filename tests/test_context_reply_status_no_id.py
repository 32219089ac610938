"""An assistant reply stored with output parts and a `status` but no provider's item id goes
out as a message the SDKs' request types take, built from what was stored alone.

Such an item is what an Agents SDK session holds once the SDK has stripped its placeholder
id (`__fake_id__`, which it puts on every item of a Chat Completions model's reply; it
strips it before saving to OpenAI's Conversations API and before a Responses request),
and what a Chat Completions model's reply is under the placeholder. A context sent it as
stored: `ResponseOutputMessageParam` requires the `id` with the `status`, and
`EasyInputMessageParam` takes neither output parts nor a status, so the `openai` SDK's
`ResponseInputItemParam` refused it (extra keys forbidden), and the Agents SDK's own Chat
Completions converter, given it by the session's `model_input_filter`, raised
"Unhandled item type or structure". It now goes as an easy input message with its text
(`tiers.formats._wire_message`): no id or status made up; a provider's id with its status
still goes as the reply it is. Under the placeholder, the filter gives the SDK the item
as its own input holds it (`tiers.formats.sdk_input_fields`), so a Chat Completions
model gets what it gets without tiermem. The Anthropic form (`to_anthropic`) sends the
text as an assistant turn `MessageParam` takes. History keeps the body as appended.

Real SQLite files, the real `openai`, `anthropic` and `openai-agents` packages.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hash_embedder import HashEmbedder
from pydantic import ConfigDict, TypeAdapter
from test_context_request_types import CHAT, refused

from tiermem import Config, Memory

pytest.importorskip("agents")
pytest.importorskip("anthropic")
from agents import Agent, RunConfig, Runner, SQLiteSession
from agents.models.chatcmpl_converter import Converter
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.testing import ScriptedModel
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessage

from tiermem.adapters.anthropic import to_anthropic
from tiermem.adapters.openai_agents import TiermemSession

CONV = "c"
BUDGET_TOKENS = 8000
TEXT = "Noted: Lisbon."
QUESTION = "Where do I fly?"
ANTHROPIC = TypeAdapter(MessageParam, config=ConfigDict(extra="forbid"))
FORMATS = ["as_stored", "responses", "chat"]

# the Agents SDK's message item with its placeholder id stripped (status kept, no id)
NO_ID = {"type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": TEXT, "annotations": []}]}
CASES = [
    pytest.param(NO_ID, TEXT, id="status-no-id"),
    # the same item without its type (a role-only Responses message)
    pytest.param({k: v for k, v in NO_ID.items() if k != "type"}, TEXT, id="role-only-status-no-id"),
    # a reply cut short, its parts a refusal: the refusal's text
    pytest.param({**NO_ID, "status": "incomplete", "content": [{"type": "refusal", "refusal": "I can't say."}]},
                 "I can't say.", id="incomplete-refusal"),
    # a phase, which the easy input message takes too
    pytest.param({**NO_ID, "phase": "final_answer"}, TEXT, id="phase"),
    # two text parts: one text, a newline between
    pytest.param({**NO_ID, "content": [{"type": "output_text", "text": "Noted:", "annotations": []},
                                       {"type": "output_text", "text": "Lisbon.", "annotations": []}]},
                 "Noted:\nLisbon.", id="two-parts"),
    # the SDK's placeholder id with its provider_data, as a session stores a Chat
    # Completions model's reply: no provider's id either
    pytest.param({**NO_ID, "id": FAKE_RESPONSES_ID, "provider_data": {"model": "deepseek-chat"}}, TEXT,
                 id="placeholder-id"),
]


@pytest.fixture
def mem(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Memory]:
    m = Memory(Config(data_dir=tmp_path / "m", context_format=getattr(request, "param", "responses")),
               embedder=HashEmbedder(), hot=False, background_indexing=False)
    yield m
    m.close()


def _context(mem: Memory, reply: dict[str, Any]) -> Any:
    mem.append("c", {"role": "user", "content": "I fly to Lisbon."})
    mem.append("c", reply)
    mem.append("c", {"role": "user", "content": QUESTION})
    return mem.context(CONV, QUESTION, BUDGET_TOKENS)


@pytest.mark.parametrize("mem", FORMATS, indirect=True)
@pytest.mark.parametrize(("reply", "text"), CASES)
def test_context_sends_a_request_type(mem: Memory, reply: dict[str, Any], text: str) -> None:
    msgs = _context(mem, reply).messages
    assert refused(msgs) == []  # failed before in as_stored and responses: the item as stored
    sent = msgs[1]
    assert sent["role"] == "assistant"
    assert sent["content"] == text  # its text, nothing else
    assert "id" not in sent
    assert "status" not in sent  # not made up, nor kept where the request type refuses it
    assert sent.get("phase") == (reply.get("phase") if mem.config.context_format != "chat" else None)
    assert mem.history(CONV)[1].body == reply  # history keeps what was appended


@pytest.mark.parametrize("mem", ["as_stored", "responses"], indirect=True)
def test_a_providers_id_goes_as_the_reply(mem: Memory) -> None:
    # with a provider's id and its status the reply is a ResponseOutputMessageParam: as it is
    reply = {**NO_ID, "id": "msg_1"}
    msgs = _context(mem, reply).messages
    assert refused(msgs) == []
    assert msgs[1] == reply


@pytest.mark.parametrize(("reply", "text"), CASES)
def test_anthropic_form(mem: Memory, reply: dict[str, Any], text: str) -> None:
    req = to_anthropic(_context(mem, reply), mem)
    for m in req.messages:
        ANTHROPIC.validate_python(m)
    said = [b["text"] for m in req.messages if m["role"] == "assistant" for b in m["content"] if b["type"] == "text"]
    assert said == [text]


def _filter_input(session: Any, config: RunConfig) -> list[dict[str, Any]]:
    """The input the model gets at the next turn's call, over `session`."""
    model = ScriptedModel([Converter.message_to_output_items(ChatCompletionMessage(role="assistant", content="Lisbon."))])
    agent = Agent(name="a", instructions="Be brief.", model=model)
    asyncio.run(Runner.run(agent, QUESTION, session=session, run_config=config))
    return [dict(i) for i in model.calls[0].input]


@pytest.mark.parametrize(("reply", "text"), CASES)
def test_agents_chat_completions_converter(mem: Memory, reply: dict[str, Any], text: str) -> None:
    # the session holds the reply as stored; the filter's input goes to a Chat Completions
    # model through the SDK's own converter, which raised on the item as stored
    mem.append_many(CONV, [{"role": "user", "content": "I fly to Lisbon."}, reply])
    session = TiermemSession(mem, CONV)
    config = RunConfig(tracing_disabled=True, call_model_input_filter=session.model_input_filter(BUDGET_TOKENS))
    chat = Converter.items_to_messages(_filter_input(session, config))  # type: ignore[arg-type]
    for m in chat:
        CHAT.validate_python(m)
    assert [m.get("content") for m in chat if m["role"] == "assistant"] == [text]
    if reply.get("id") == FAKE_RESPONSES_ID:
        # the SDK's own session input converts the same: the item as its input holds it
        ref = SQLiteSession("ref")
        asyncio.run(ref.add_items([{"role": "user", "content": "I fly to Lisbon."}, reply]))  # type: ignore[list-item]
        assert chat == Converter.items_to_messages(_filter_input(ref, RunConfig(tracing_disabled=True)))  # type: ignore[arg-type]
