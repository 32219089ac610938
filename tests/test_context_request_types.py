"""Every message a context sends is one the `openai` SDK's own request types take, extra keys
forbidden (`ChatCompletionMessageParam` for a chat message, `ResponseInputItemParam` for a
Responses item), in every `context_format`, for messages append accepts as the SDK hands
them back (`tiers.formats.wire_body`):

- a Conversations API item's `created_by` is left out of every typed item, hosted-tool
  items too (`computer_call_output`, `apply_patch_call(_output)`, `shell_call`, ...);
- an input message's item `id` (`responses.input_items.list()`, `conversations.items.list()`)
  is left out: no input message request type has one;
- a Responses message whose parts its role's request types do not take (a user's
  `input_audio`, `refusal` or `output_text`; an assistant's `output_text` without the
  item's `id` and `status`) is rebuilt as a role-only one is: input parts, or its text;
- a chat tool call stored without `type`, `function.arguments` or `custom.input`, and a
  legacy `function_call` without `arguments`, go out with them (`"function"`, `"{}"`, `""`);
- a hosted-tool item appended as `model_dump()` goes out without the nulls of its unset
  nested fields (`action.queries: null`), a required one (`action.keys` of a double click)
  kept;
- an `output_text` part's `logprobs` are dropped on append (as `parsed` is), so a reply
  asked with logprobs is stored however long it is.

On the code before, each case's context held a message the request type refuses, and the
logprobs reply was refused over the 32 KiB envelope limit.

Real SQLite files, the real `openai` SDK."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import (
    ResponseApplyPatchToolCallOutput,
    ResponseComputerToolCallOutputItem,
    ResponseInputItemParam,
)
from pydantic import ConfigDict, TypeAdapter
from sdk_corpus import format_memory, sdk_output

from tiermem import Memory
from tiermem.tiers.formats import RESPONSES_ONLY_PART_TYPES

CHAT = TypeAdapter(ChatCompletionMessageParam, config=ConfigDict(extra="forbid"))
ITEM = TypeAdapter(ResponseInputItemParam, config=ConfigDict(extra="forbid"))
FORMATS = ["as_stored", "responses", "chat"]


def _materialize(v: Any) -> Any:
    """The validated value read through: the SDK's `Iterable` fields validate lazily."""
    if isinstance(v, dict):
        return {k: _materialize(x) for k, x in v.items()}
    if isinstance(v, (str, bytes, int, float, bool)) or v is None:
        return v
    if isinstance(v, Iterable):
        return [_materialize(x) for x in v]
    return v


def _is_chat(m: dict[str, Any]) -> bool:
    content = m.get("content")
    return "type" not in m and not (isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") in RESPONSES_ONLY_PART_TYPES for p in content))


def refused(msgs: list[dict[str, Any]]) -> list[str]:
    """The messages the SDK's request types refuse, with the first error line of each."""
    bad = []
    for i, m in enumerate(msgs):
        try:
            _materialize((CHAT if _is_chat(m) else ITEM).validate_python(m))
        except Exception as e:  # pydantic's ValidationError, or a lazy Iterable's
            bad.append(f"messages[{i}] {m}: {str(e).splitlines()[1:3]}")
    return bad


@pytest.fixture
def mem(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Memory]:
    with format_memory(tmp_path, request.param) as m:  # the context_format each test names
        yield m


APPLY_PATCH = {"type": "apply_patch_call", "id": "ap_1", "call_id": "call_p", "status": "completed",
               "created_by": "resp_1", "operation": {"type": "delete_file", "path": "a.txt"}}
APPLY_PATCH_OUT = {"type": "apply_patch_call_output", "id": "apo_1", "call_id": "call_p", "status": "completed",
                   "created_by": "user_123", "output": "done"}
COMPUTER = {"type": "computer_call", "id": "cu_1", "call_id": "call_c", "status": "completed",
            "action": {"type": "screenshot"}, "pending_safety_checks": []}
COMPUTER_OUT = {"type": "computer_call_output", "id": "cuo_1", "call_id": "call_c", "status": "completed",
                "created_by": "user_123",
                "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,iVBORw0KGgo="}}
USER_ITEM = {"id": "msg_in_1", "type": "message", "role": "user", "status": "completed",
             "content": [{"type": "input_text", "text": "Find fares to Lisbon."}]}
REPLY = {"type": "message", "role": "assistant", "id": "msg_out", "status": "completed",
         "content": [{"type": "output_text", "text": "Looking.", "annotations": []}]}


def _call(call: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "sunny"}]


CASES = [
    # 1. created_by on hosted-tool items, dicts as conversations.items.list() gives them
    pytest.param([COMPUTER, COMPUTER_OUT, APPLY_PATCH, APPLY_PATCH_OUT], id="created_by-hosted-dicts"),
    # 2. an input message with its item id, as the input items list returns it
    pytest.param([USER_ITEM, REPLY], id="user-message-item-id"),
    pytest.param([{**USER_ITEM, "role": "developer"}, REPLY], id="developer-message-item-id"),
    pytest.param([{**USER_ITEM, "content": "Find fares to Lisbon."}, REPLY], id="user-item-id-status-text"),
    # 3. a typed message whose parts its role's request types do not take
    pytest.param([{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Listen:"},
        {"type": "input_audio", "input_audio": {"data": "UklGRiQAAABXQVZF", "format": "wav"}}]}],
        id="user-input_audio"),
    pytest.param([{"type": "message", "role": "user", "content": [{"type": "refusal", "refusal": "no"}]}],
                 id="user-refusal-part"),
    pytest.param([{"type": "message", "role": "user", "content": [
        {"type": "output_text", "text": "quoted", "annotations": []}]}], id="user-output_text"),
    pytest.param([{"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "Noted: Lisbon.", "annotations": []}]}], id="assistant-output_text-no-id"),
    pytest.param([{"role": "assistant", "content": [
        {"type": "output_text", "text": "Noted: Lisbon.", "annotations": []}]}], id="assistant-role-only-output_text"),
    pytest.param([{**REPLY, "content": [{"type": "input_text", "text": "Noted."}]}], id="assistant-input_text-id"),
    # 4. chat tool calls without a field the request type requires
    pytest.param(_call({"id": "call_1", "function": {"name": "weather", "arguments": "{}"}}), id="call-no-type"),
    pytest.param(_call({"id": "call_1", "type": "function", "function": {"name": "weather"}}),
                 id="call-no-arguments"),
    pytest.param(_call({"id": "call_1", "type": "custom", "custom": {"name": "weather"}}), id="custom-no-input"),
    pytest.param([{"role": "assistant", "content": None, "function_call": {"name": "weather"}},
                  {"role": "function", "name": "weather", "content": "sunny"}], id="legacy-function_call-no-arguments"),
]


@pytest.mark.parametrize("mem", FORMATS, indirect=True)
@pytest.mark.parametrize("items", CASES)
def test_context_valid_request(mem: Memory, items: list[dict[str, Any]]) -> None:
    mem.append("c", {"role": "user", "content": "I fly to Lisbon."})
    mem.append_many("c", items)
    mem.append("c", {"role": "user", "content": "Where do I fly?"})
    msgs = mem.context("c", "Where do I fly?", 8000).messages
    assert refused(msgs) == []
    assert not any("created_by" in m for m in msgs)
    assert mem.history("c")[1].body == items[0]  # history keeps what was appended


@pytest.mark.parametrize("mem", ["as_stored", "responses"], indirect=True)
def test_created_by_left_out_of_sdk_items(mem: Memory) -> None:
    # the SDK's own objects from conversations.items.list(): every item's created_by left out
    mem.append("c", {"role": "user", "content": "Take a screenshot and delete a.txt."})
    mem.append_many("c", [*sdk_output([COMPUTER, APPLY_PATCH]), ResponseComputerToolCallOutputItem.model_validate(COMPUTER_OUT),
                          ResponseApplyPatchToolCallOutput.model_validate(APPLY_PATCH_OUT)])
    mem.append("c", {"role": "user", "content": "Done?"})
    msgs = mem.context("c", "Done?", 8000).messages
    assert [m.get("type") for m in msgs[1:5]] == ["computer_call", "apply_patch_call", "computer_call_output",
                                                  "apply_patch_call_output"]
    assert refused(msgs) == []
    assert not any("created_by" in m for m in msgs)


@pytest.mark.parametrize("mem", ["as_stored", "responses"], indirect=True)
def test_rebuilt_message_keeps_its_text(mem: Memory) -> None:
    mem.append("c", {"role": "user", "content": "I fly to Lisbon."})
    mem.append("c", {"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "Noted: Lisbon.", "annotations": []}]})
    mem.append("c", {"type": "message", "role": "user", "content": [{"type": "refusal", "refusal": "not that"}]})
    mem.append("c", {"role": "user", "content": "Where?"})
    msgs = mem.context("c", "Where?", 8000).messages
    assert msgs[1] == {"type": "message", "role": "assistant", "content": "Noted: Lisbon."}
    assert msgs[2] == {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "not that"}]}


@pytest.mark.parametrize("mem", FORMATS, indirect=True)
@pytest.mark.parametrize("dump", [
    pytest.param(lambda o: o.model_dump(), id="model_dump"),               # every unset field as null
    pytest.param(lambda o: o.model_dump(mode="json"), id="model_dump-json"),
])
def test_hosted_model_dump_nulls_left_out(mem: Memory, dump: Any) -> None:
    out = [{"type": "web_search_call", "id": "ws_1", "status": "completed",
            "action": {"type": "search", "query": "Lisbon fares"}},
           {"type": "computer_call", "id": "cu_1", "call_id": "call_3", "status": "completed",
            "action": {"type": "double_click", "x": 1, "y": 2, "keys": None}, "pending_safety_checks": []},
           {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "fares",
            "tools": [{"name": "lookup", "input_schema": {"properties": {"d": {"default": None}}}}]}]
    mem.append("c", {"role": "user", "content": "Find fares."})
    mem.append_many("c", [dump(o) for o in sdk_output(out)])
    mem.append("c", {"type": "computer_call_output", "call_id": "call_3",  # the call answered: sent
                     "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,iVBORw0KGgo="}})
    mem.append("c", {"role": "user", "content": "And?"})
    msgs = mem.context("c", "And?", 8000).messages
    assert refused(msgs) == []
    if mem.config.context_format != "chat":  # chat has no hosted-tool items
        by_type = {m.get("type"): m for m in msgs}
        assert by_type["computer_call"]["action"]["keys"] is None  # required, null allowed: kept
        # an MCP tool's input schema is the caller's JSON: its null is data, sent as is
        assert by_type["mcp_list_tools"]["tools"][0]["input_schema"] == {"properties": {"d": {"default": None}}}


@pytest.mark.parametrize("mem", ["as_stored"], indirect=True)
@pytest.mark.parametrize(("tokens", "top"), [
    (800, 0),   # ~62 KB of logprobs, one entry a token
    (200, 5),   # ~60 KB with five alternatives a token
])
def test_logprobs_dropped_on_append(mem: Memory, tokens: int, top: int) -> None:
    text = " ".join(f"tok{i}" for i in range(tokens))
    lp = [{"token": f"tok{i}", "logprob": -0.0123, "bytes": [116, 111, 107],
           "top_logprobs": [{"token": f"alt{j}", "logprob": -3.2, "bytes": [97]} for j in range(top)]}
          for i in range(tokens)]
    reply = sdk_output([{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [
        {"type": "output_text", "text": text, "annotations": [], "logprobs": lp}]}])
    mem.append_many("c", reply)
    stored = mem.history("c")[0].body
    assert stored["content"] == [{"type": "output_text", "text": text, "annotations": []}]
