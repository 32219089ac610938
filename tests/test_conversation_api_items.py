"""Items the `openai` SDK returns from OpenAI's Conversations API
(`client.conversations.items.list()`) are appended as they are: their `created_by` (the
response that made the item) and a custom tool item's `status`, fields no request item
has, are kept in history and left out of every context
(`tiers.formats.CONVERSATION_ONLY_FIELDS`).

On the code before, append refused them ("created_by: is not a field of a function_call
item", "status: is not a field of a custom_tool_call_output item"), so a conversation
could not be copied from the Conversations API into tiermem.

Real SQLite files; the items parsed by the real `openai` SDK, the context checked
against its request types."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hash_embedder import HashEmbedder
from openai.types.conversations import ConversationItemList
from provider_rules import responses_problems
from sdk_corpus import valid_responses

from tiermem import Config, Memory

ITEMS: list[dict[str, Any]] = [
    # a function call and its output, each with the response that made it
    {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": "{}", "status": "completed",
     "created_by": "resp_1"},
    {"type": "function_call_output", "id": "fco_1", "call_id": "c1", "output": "o1", "status": "completed",
     "created_by": "resp_1"},
    # a custom tool's call and output: a status the request items do not have
    {"type": "custom_tool_call", "id": "ct_1", "call_id": "c2", "name": "g", "input": "x", "status": "completed"},
    {"type": "custom_tool_call_output", "id": "ctco_1", "call_id": "c2", "output": "o2", "status": "completed"},
]


@pytest.fixture
def mem(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Memory]:
    m = Memory(Config(data_dir=tmp_path / "m", context_format=request.param), embedder=HashEmbedder(), hot=False,
               background_indexing=False)
    yield m
    m.close()


@pytest.mark.parametrize("mem", ["as_stored", "responses"], indirect=True)
def test_conversation_items_are_appended_and_sent_as_request_items(mem: Memory) -> None:
    page = ConversationItemList.model_validate({"object": "list", "has_more": False, "first_id": "fc_1",
                                                "last_id": "ctco_1", "data": ITEMS})
    mem.append("ci", {"role": "user", "content": "run both"})
    mem.append_many("ci", page.data)  # failed before: refused
    mem.append("ci", {"role": "user", "content": "and?"})
    stored = [m.body for m in mem.history("ci")][1:-1]
    assert [{k: v for k, v in b.items() if v is not None} for b in stored] == ITEMS  # history keeps them
    sent = mem.context("ci", "and?", budget=3000).messages
    valid_responses(sent)  # no created_by, no status on a custom tool item
    assert responses_problems(sent) == []
    assert [s.get("type") for s in sent if "type" in s] == [i["type"] for i in ITEMS]
