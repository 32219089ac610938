"""Message formats: every OpenAI Chat Completions message and every Responses API input item.

A stored message ("body") is a JSON object in one of two families:

- **Chat Completions**: `{"role": ..., ...}` with role `system`, `developer`, `user`,
  `assistant`, `tool` or the legacy `function` (the `openai` SDK's
  `ChatCompletionMessageParam`, and what `ChatCompletionMessage.model_dump()`,
  `model_dump(exclude_none=True)` and `to_dict()` produce for a reply).
- **Responses API input items** (what the OpenAI Agents SDK stores): messages
  (`type: "message"`, or a role with `input_text` / `output_text` / `input_image` /
  `input_file` parts), `function_call`, `function_call_output`, `custom_tool_call(_output)`,
  `reasoning`, and the hosted-tool items (`web_search_call`, `computer_call`, `mcp_call`, ...).

Invariants and policy (README, "Message formats"):

- **Lossless.** A body is stored exactly as given (explicit nulls included) and
  `history()` returns it equal, modulo key order. Nothing is normalized on the way in,
  with one exception: `as_appended`, the form of a row stored before a check was added
  that an export writes, an import reads and an Agents session returns (a reasoning item
  without a summary list).
- **Strict top level.** Each kind has a fixed set of top-level fields (from the
  `openai` SDK's types). A top-level field a kind does not define is refused with an
  error naming it: tiermem routes on top-level fields (role, ids, pairing) and sends
  bodies to models, so an unknown one could change what a provider does with a stored
  message, and it has no rule for counting its tokens. Caller data goes in `metadata`.
  Exceptions, kept in history and left out of contexts: `VENDOR_ASSISTANT_FIELDS`,
  reasoning fields OpenAI-compatible servers put on replies (vLLM, DeepSeek, OpenRouter),
  `name` on a tool message, which LangChain's `convert_to_openai_messages` emits, and
  `provider_data` (an object or null) on every typed Responses item and Responses
  message, which the Agents SDK writes on the items of a Chat Completions model's reply
  (`PROVIDER_DATA_FIELD`; returned to a session as given, where the SDK reads it). An
  explicit null in `name`, `tool_calls` or `tool_call_id` is accepted on any chat role
  (tiermem's first message model declared them everywhere).
- **Opaque payload below.** Inside content parts, tool calls, annotations and hosted-tool
  items, the fields tiermem reads are type-checked and every other field is kept
  verbatim (`prompt_cache_breakpoint`, a new `detail` value, a vendor's extra): it is the
  provider's payload, not tiermem's.
- **Unknown kinds are refused**: a role or an item `type` not listed here, naming the field.
- **Bounded echoes.** An error quotes a refused value cut to `tiers.errors.MAX_SHOWN_CHARS`
  (a container by its type: `shown`), and names an unknown key as the field only when it
  is a plain name within that bound; any other key is quoted in a `message` error
  (`field_error`). Errors travel whole into HTTP bodies, tool errors, CLI output and logs.
- **Canonical role** (`canonical_role`): the turn index keeps one of `system`, `user`,
  `assistant`, `tool` (developer -> system, function -> tool, calls and reasoning ->
  assistant, `*_output` results -> tool), which is what ranking and classification read.
- **One unit**: a call and its results share an id (`tool_calls[].id` / `tool_call_id`,
  `call_id` on Responses items, the function name for the legacy `function_call`);
  `call_ids` and `result_id` expose it so the planner never splits them. A `reasoning`
  item belongs to the item after it. The calls of one assistant message have ids of
  their own (`repeated_call_id`; append only, as `_reasoning_summary`): two calls of one
  id leave their results nothing to tell them apart by, and no provider emits them.
  Across messages an id may come again (servers that number calls per reply, `call_0`
  every round), and Responses items, one row each, may hold two calls of one id in one
  round: a result answers the call of its id just before it, the n-th result of an id
  in a round its n-th call. A chat result converted to a Responses item
  (`to_responses_rows`) takes the output type of that call (`custom_tool_call_output`
  for a custom tool's, else `function_call_output`), not of another call of its id.
- **Ids sent** (`SentCallIds`): a request sends each call id once, each result naming
  its call's. The providers refuse a repeat: Responses ("Duplicate function_call_output
  for call_id"), strict Chat Completions servers ("Duplicate value for 'tool_call_id'"),
  Anthropic ("tool_use ids must be unique"). A call goes out under its id as stored
  where no call before it in the request has that id, else with the first free suffix
  (`call_0_2`, `call_0_3`), its results with it; ids are given in request order, so
  appending leaves every earlier id (the prompt cache's prefix) as it was. Rows are
  stored as given: the Responses form (`to_responses`, `context_format="responses"`),
  the chat form (`context_format="chat"`, `unique_chat_call_ids`), the Anthropic form,
  the Agents SDK session's items (`unique_item_call_ids`) and the LangChain adapters'
  messages (`tiermem.adapters.langchain.unique_call_ids`) rename; `as_stored` sends the
  rows as appended, a repeated id repeated. The Responses form sends each item `id` of a
  call or output item once too ("Duplicate item found with id"): a repeat, such as a
  server's `fc_0` every round or an item id equal to a renamed call id, goes without
  one (the id is optional on both items; the pairing is the `call_id`'s).
- **Control rows** (`tiermem.retract`, `tiermem.clear`): tiermem's own log-level
  operations (the adapters' pop and clear), stored and returned by `history()` like any
  row, never sent to a model; `hidden_positions` says what they hide.
- **Wire form** (`wire_body`): what a context sends is a valid request param: fields only a
  reply carries (`annotations`, the vendor reasoning fields, an `audio` reply's data,
  an item's `provider_data`), the Agents SDK's placeholder item id (`SDK_PLACEHOLDER_ID`,
  `__fake_id__`, which the SDK strips itself before a Responses request; the Agents
  session's `model_input_filter` gives the SDK the item with it, as its own input is),
  a Conversations API item's `created_by` on any item, hosted-tool items too (and a custom
  tool item's `status`: `CONVERSATION_ONLY_FIELDS`), top-level nulls (but those a hosted-tool
  item's request type requires, `REQUIRED_NULL_FIELDS`), the nulls of content parts (a
  `model_dump()` of an SDK reply writes every unset field, such as an `output_text` part's
  `logprobs`) and those nested in a hosted-tool item (`_without_nulls`: a web search's
  `action.queries`; `NESTED_REQUIRED_NULL_FIELDS` kept, a listed function tool's `strict`
  and `parameters` among them, and nulls inside free JSON, a tool's JSON schema, kept:
  `FREE_JSON_FIELDS`) are left out; `history()` still has
  them. A Responses message goes as a request type takes its role and parts
  (`_wire_message`): an input message without its item `id`, with input parts; an
  assistant one with output parts only where it has both a `status` and a provider's `id`
  (not the SDK's placeholder), else as its text without either. A chat tool call append took
  without `type`, `function.arguments` or `custom.input` (a legacy `function_call` without
  `arguments`) goes with them (`_wire_tool_calls`). A reasoning item's `summary` is required on append (a list, the API's
  request type); a row stored before without one, or with null, is read as stored and
  sent with `[]` (`as_appended`). Its `id`, where given, is a non-empty string (the API's
  request type; null, a number or "" is refused on append, a row stored before so is
  read as stored); an item without one is stored and sent as given: the Agents SDK's
  `RunConfig(reasoning_item_id_policy="omit")` saves and sends reasoning items so (the
  provider reads their `encrypted_content` or summary, not a stored item).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from typing import Any

from tiermem.tiers.errors import ValidationError, field_error, shown

CHAT_ROLES: tuple[str, ...] = ("system", "developer", "user", "assistant", "tool", "function")
RESPONSES_ROLES: tuple[str, ...] = ("system", "developer", "user", "assistant")
CALL_ID_MAX_CHARS = 256
TOOL_NAME_MAX_CHARS = 128
NAME_MAX_CHARS = 64

# Reasoning fields that OpenAI-compatible servers put on assistant replies, so that the
# `openai` SDK's `model_dump()` of their replies carries them: vLLM and DeepSeek
# (`reasoning_content`), OpenRouter and newer vLLM (`reasoning`, `reasoning_details`).
VENDOR_ASSISTANT_FIELDS = frozenset({"reasoning_content", "reasoning", "reasoning_details"})
_CHAT_TEXT_FIELDS = frozenset({"role", "content", "name"})
CHAT_FIELDS: dict[str, frozenset[str]] = {
    "system": _CHAT_TEXT_FIELDS,
    "developer": _CHAT_TEXT_FIELDS,
    "user": _CHAT_TEXT_FIELDS,
    "assistant": frozenset({"role", "content", "refusal", "name", "tool_calls", "function_call", "audio",
                            "annotations"}) | VENDOR_ASSISTANT_FIELDS,
    # `name`: the tool's name, which LangChain's convert_to_openai_messages puts on tool
    # messages; kept in history, not sent (the request type has no such field)
    "tool": frozenset({"role", "content", "tool_call_id", "name"}),
    "function": frozenset({"role", "content", "name"}),
}
# Fields a reply carries that a request param does not: kept in history, not sent.
REPLY_ONLY_FIELDS = frozenset({"annotations"}) | VENDOR_ASSISTANT_FIELDS
CHAT_PART_TYPES: dict[str, frozenset[str]] = {
    "system": frozenset({"text"}),
    "developer": frozenset({"text"}),
    "tool": frozenset({"text"}),
    "user": frozenset({"text", "image_url", "input_audio", "file"}),
    "assistant": frozenset({"text", "refusal"}),
}
# Part types that only the Responses API uses: a role-only message carrying one is a
# Responses `EasyInputMessage`, not a chat message.
# Bytes of a message that are neither its text nor its payloads (ids, statuses, call ids,
# annotations, fields tiermem stores without reading): they are sent but not counted as
# tokens, and `max_content_bytes` does not see them, so they have a bound of their own
# (`check_envelope`). 128 parallel tool calls with their ids and types take about 9 KiB.
MAX_ENVELOPE_BYTES = 32 * 1024
RESPONSES_ONLY_PART_TYPES = frozenset({"input_text", "output_text", "input_image", "input_file"})
RESPONSES_PART_TYPES = RESPONSES_ONLY_PART_TYPES | {"input_audio", "refusal"}
INPUT_PART_TYPES = frozenset({"input_text", "input_image", "input_file"})  # of a Responses request
OUTPUT_PART_TYPES = INPUT_PART_TYPES  # a function_call_output's parts are request parts too
# The OpenAI Agents SDK's own field on the items it makes from a Chat Completions reply
# (OpenAIChatCompletionsModel, LiteLLM, any-llm): an object of the model, the response id
# and what the provider needs back (Anthropic thinking blocks, Gemini thought signatures),
# which the SDK reads when it sends the item to such a model again and strips itself
# before an OpenAI Responses request. Kept in history and returned to a session as
# given; never in a context (`wire_body`): no OpenAI request type has it.
PROVIDER_DATA_FIELD = "provider_data"
# The Agents SDK's placeholder item id (`agents.models.fake_id.FAKE_RESPONSES_ID`) on every
# item it makes from a Chat Completions reply (reasoning, message, function_call): no
# provider gave it, so no provider knows it. The SDK strips it from every item before a
# Responses request (`OpenAIResponsesModel._clean_item_for_openai`) and before saving to
# OpenAI's Conversations API; a context leaves it out too (`wire_body`): the API looks an
# item id up ("Item with id '__fake_id__' not found"), and every such item holds the same one
# ("Duplicate item found"). Kept in history and returned to a session as given.
SDK_PLACEHOLDER_ID = "__fake_id__"
# What the Conversations API's items carry that a request item does not
# (`client.conversations.items.list()`: `ResponseFunctionToolCallItem` and the other
# call and output items): the response that made the item, and a custom tool's call or
# output's status. Accepted on append, kept in history, left out of contexts (`wire_body`).
CONVERSATION_ITEM_FIELD = "created_by"
CONVERSATION_ONLY_FIELDS: dict[str, frozenset[str]] = {
    "function_call": frozenset({CONVERSATION_ITEM_FIELD}),
    "function_call_output": frozenset({CONVERSATION_ITEM_FIELD}),
    "custom_tool_call": frozenset({CONVERSATION_ITEM_FIELD, "status"}),
    "custom_tool_call_output": frozenset({CONVERSATION_ITEM_FIELD, "status"}),
}
ITEM_FIELDS: dict[str, frozenset[str]] = {k: v | {PROVIDER_DATA_FIELD} | CONVERSATION_ONLY_FIELDS.get(k, frozenset())
                                          for k, v in {
    "message": frozenset({"type", "role", "content", "status", "id", "phase"}),
    "function_call": frozenset({"type", "call_id", "name", "arguments", "id", "status", "namespace", "caller",
                                "async"}),
    "function_call_output": frozenset({"type", "call_id", "output", "id", "status", "caller", "name",
                                       "namespace"}),
    "custom_tool_call": frozenset({"type", "call_id", "name", "input", "id", "caller", "namespace", "async"}),
    "custom_tool_call_output": frozenset({"type", "call_id", "output", "id", "caller"}),
    "reasoning": frozenset({"type", "id", "summary", "content", "encrypted_content", "status"}),
}.items()}
# Responses input items tiermem stores and sends verbatim without reading their insides
# (the hosted tools' calls and results, and the API's bookkeeping items): from the
# `openai` SDK's `ResponseInputItemParam`.
OPAQUE_ITEM_TYPES = frozenset({
    "file_search_call", "computer_call", "computer_call_output", "web_search_call", "tool_search_call",
    "tool_search_output", "additional_tools", "configuration_update", "compaction", "image_generation_call",
    "code_interpreter_call", "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output",
    "apply_patch_call", "apply_patch_call_output", "mcp_list_tools", "mcp_approval_request",
    "mcp_approval_response", "mcp_call", "compaction_trigger", "item_reference", "program", "program_output",
})
# The top-level fields of hosted-tool items that the API's request type requires and
# allows null in (the `openai` SDK's `ResponseInputItemParam`: `Required[Optional[...]]`):
# a reply's `outputs: null` (no outputs asked for) and an image still generating are sent
# with their null, as stored (`wire_body`): without the key the request type refuses the
# item. Every other top-level null is left out as before.
REQUIRED_NULL_FIELDS: dict[str, frozenset[str]] = {
    "code_interpreter_call": frozenset({"code", "outputs"}),
    "image_generation_call": frozenset({"result"}),
}
# tiermem's own log-level operations, rows like any other (append-only, kept in history)
# and never sent to a model: a retraction hides one earlier item from active views and
# contexts (the Agents SDK's pop_item), a clear is a read boundary for them (clear_session).
# The dot keeps them apart from any OpenAI type.
RETRACT_TYPE = "tiermem.retract"
CLEAR_TYPE = "tiermem.clear"
CONTROL_TYPE_PREFIX = "tiermem."  # in every control row's stored JSON: a cheap filter before decoding
CONTROL_FIELDS: dict[str, frozenset[str]] = {
    RETRACT_TYPE: frozenset({"type", "position"}),
    CLEAR_TYPE: frozenset({"type"}),
}
ITEM_TYPES = frozenset(ITEM_FIELDS) | OPAQUE_ITEM_TYPES | frozenset(CONTROL_FIELDS)

# -- the token rule for what is not text ------------------------------------------------------
# An image costs what OpenAI bills a 1024x1024 image at high detail (85 base + 4 tiles of
# 170), or the flat 85 at `detail: "low"`. Inline audio costs one token per 1,600 bytes of
# decoded data (mp3 at 128 kbit/s is 16 kB a second, about 10 audio tokens; wav counts
# more: conservative). An inline file costs one token per 4 decoded bytes (plain text's
# rate; a PDF costs less). A file or audio given only by id or URL costs a flat guess.
# Items tiermem does not read (hosted tools) cost the tokens of their compact JSON.
IMAGE_TOKENS = 765
IMAGE_LOW_DETAIL_TOKENS = 85
AUDIO_BYTES_PER_TOKEN = 1600
FILE_BYTES_PER_TOKEN = 4
REFERENCE_TOKENS = 1024


def _fail(path: str, problem: str) -> None:
    raise ValidationError(path, problem)


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _obj(value: object, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        _fail(path, f"must be an object, got {type(value).__name__}")
    assert isinstance(value, dict)
    return value


def _str(d: dict[str, Any], key: str, path: str, *, required: bool = True, nullable: bool = False,
         min_chars: int = 0, max_chars: int | None = None) -> None:
    p = _join(path, key)
    if key not in d:
        if required:
            _fail(p, "Field required")
        return
    v = d[key]
    if v is None:
        if not nullable:
            _fail(p, "must be a string, got null")
        return
    if not isinstance(v, str):
        _fail(p, f"must be a string, got {type(v).__name__}")
    if len(v) < min_chars:
        _fail(p, "must not be empty")
    if max_chars is not None and len(v) > max_chars:
        _fail(p, f"{len(v)} characters exceed the limit of {max_chars} characters")


# Fields tiermem's first message model declared on every role: an explicit null there is
# "absent" (kept in history, left out of contexts), as it always was.
NULL_TOLERATED_FIELDS = frozenset({"name", "tool_calls", "tool_call_id"})


def _fields(d: dict[str, Any], allowed: frozenset[str], path: str, kind: str) -> None:
    for k in d:
        if not isinstance(k, str):
            _fail(path or "message", "field names must be strings")
        if k not in allowed and not (k in NULL_TOLERATED_FIELDS and d[k] is None and "role" in d
                                     and "type" not in d):
            # a key that is no plain name is quoted, bounded, not made the field (`field_error`)
            raise field_error(k, f"is not a field of {kind} (its fields: {', '.join(sorted(allowed))}); "
                              "put caller data in metadata", path=path)


def _part(part: object, path: str, allowed: frozenset[str], where: str) -> None:
    p = _obj(part, path)
    t = p.get("type")
    if not isinstance(t, str):
        _fail(_join(path, "type"), "Field required (a content part needs a string type)")
    if t not in allowed:
        _fail(_join(path, "type"), f"{shown(t)} is not a content part type of {where} (allowed: {', '.join(sorted(allowed))})")
    if t in ("text", "input_text", "output_text", "summary_text", "reasoning_text"):
        _str(p, "text", path)
    elif t == "refusal":
        _str(p, "refusal", path)
    elif t == "image_url":
        _str(_obj(p.get("image_url"), _join(path, "image_url")), "url", _join(path, "image_url"))
    elif t == "input_audio":
        a = _obj(p.get("input_audio"), _join(path, "input_audio"))
        _str(a, "data", _join(path, "input_audio"))
        _str(a, "format", _join(path, "input_audio"))
    elif t == "file":
        f = _obj(p.get("file"), _join(path, "file"))
        for k in ("file_data", "file_id", "filename"):
            _str(f, k, _join(path, "file"), required=False, nullable=True)
        if not any(isinstance(f.get(k), str) for k in ("file_data", "file_id")):
            _fail(_join(path, "file"), "needs file_data or file_id")
    elif t == "input_image":
        for k in ("image_url", "file_id"):
            _str(p, k, path, required=False, nullable=True)
        if not any(isinstance(p.get(k), str) for k in ("image_url", "file_id")):
            _fail(path, "an input_image part needs image_url or file_id")
    elif t == "input_file":
        for k in ("file_data", "file_id", "file_url", "filename"):
            _str(p, k, path, required=False, nullable=True)
        if not any(isinstance(p.get(k), str) for k in ("file_data", "file_id", "file_url")):
            _fail(path, "an input_file part needs file_data, file_id or file_url")


def _content(d: dict[str, Any], key: str, path: str, allowed: frozenset[str], where: str, *,
             required: bool, nullable: bool) -> None:
    p = _join(path, key)
    if key not in d:
        if required:
            _fail(p, "Field required")
        return
    v = d[key]
    if v is None:
        if not nullable:
            _fail(p, f"may not be null on {where}")
        return
    if isinstance(v, str):
        return
    if not isinstance(v, list):
        _fail(p, f"must be a string or a list of content parts, got {type(v).__name__}")
    for i, part in enumerate(v):
        _part(part, _join(p, i), allowed, where)


def _tool_call(call: object, path: str) -> None:
    c = _obj(call, path)
    _str(c, "id", path, min_chars=1, max_chars=CALL_ID_MAX_CHARS)
    t = c.get("type", "function")
    if t == "function":
        fn = _obj(c.get("function"), _join(path, "function"))
        _str(fn, "name", _join(path, "function"), min_chars=1, max_chars=TOOL_NAME_MAX_CHARS)
        _str(fn, "arguments", _join(path, "function"), required=False)
    elif t == "custom":
        cu = _obj(c.get("custom"), _join(path, "custom"))
        _str(cu, "name", _join(path, "custom"), min_chars=1, max_chars=TOOL_NAME_MAX_CHARS)
        _str(cu, "input", _join(path, "custom"), required=False)
    else:
        _fail(_join(path, "type"), f"must be 'function' or 'custom', got {shown(t)}")


def kind_of(body: dict[str, Any]) -> str:
    """`chat:<role>`, `message` (a Responses message) or a Responses item type. Raises
    `ValidationError` naming `type` or `role` for anything else."""
    if "type" in body:
        t = body["type"]
        if not isinstance(t, str):
            _fail("type", f"must be a string, got {type(t).__name__}")
        if t not in ITEM_TYPES:
            _fail("type", f"{shown(t)} is not a Responses input item type tiermem knows "
                  f"(known: {', '.join(sorted(ITEM_TYPES))})")
        return t
    if "role" not in body:
        _fail("role", "Field required (a chat message needs a role, a Responses item a type)")
    role = body["role"]
    if role not in CHAT_ROLES:
        _fail("role", "Input should be " + ", ".join(repr(r) for r in CHAT_ROLES)
              + f" (Chat Completions), got {shown(role)}")
    content = body.get("content")
    if role in RESPONSES_ROLES and isinstance(content, list) and any(
            isinstance(p, dict) and isinstance(p.get("type"), str) and p["type"] in RESPONSES_ONLY_PART_TYPES
            for p in content):
        return "message"  # a Responses EasyInputMessage: a role and Responses parts, no type
    return f"chat:{role}"


def check_body(body: object, *, stored: bool = False) -> str:
    """Validate one message body; returns its kind (see `kind_of`). Raises
    `ValidationError` naming the offending field. `stored`: a row read back, which skips
    the checks added after rows were admitted without them (a reasoning item's summary:
    `_reasoning_summary`), so that such a row is still read, not salvaged away."""
    d = _obj(body, "message")
    kind = kind_of(d)
    if kind in ITEM_FIELDS:
        _provider_data(d)
    if kind.startswith("chat:"):
        _check_chat(d, kind[5:], stored=stored)
    elif kind == "message":
        _fields(d, ITEM_FIELDS["message"], "", "a Responses message")
        if d.get("role") not in RESPONSES_ROLES:
            _fail("role", "Input should be " + ", ".join(repr(r) for r in RESPONSES_ROLES)
                  + f" (Responses message), got {shown(d.get('role'))}")
        _content(d, "content", "", RESPONSES_PART_TYPES, "a Responses message", required=True, nullable=False)
    elif kind in ("function_call", "custom_tool_call"):
        _fields(d, ITEM_FIELDS[kind], "", f"a {kind} item")
        _str(d, "call_id", "", min_chars=1, max_chars=CALL_ID_MAX_CHARS)
        _str(d, "name", "", min_chars=1, max_chars=CALL_ID_MAX_CHARS)
        _str(d, "arguments" if kind == "function_call" else "input", "")
        _str(d, "id", "", required=False, nullable=True)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        _fields(d, ITEM_FIELDS[kind], "", f"a {kind} item")
        _str(d, "call_id", "", min_chars=1, max_chars=CALL_ID_MAX_CHARS)
        _content(d, "output", "", OUTPUT_PART_TYPES, f"a {kind} item", required=True, nullable=False)
        _str(d, "id", "", required=False, nullable=True)
    elif kind in CONTROL_FIELDS:
        _fields(d, CONTROL_FIELDS[kind], "", f"a {kind} row")
        pos = d.get("position", 0)
        if isinstance(pos, bool) or not isinstance(pos, int) or pos < 0:
            _fail("position", "must be a non-negative integer (the position of the item to retract)")
        if kind == RETRACT_TYPE and "position" not in d:
            _fail("position", "Field required")
    elif kind == "reasoning":
        _fields(d, ITEM_FIELDS["reasoning"], "", "a reasoning item")
        if not stored:
            _reasoning_summary(d)
            _reasoning_id(d)
        for key, part in (("summary", "summary_text"), ("content", "reasoning_text")):
            v = d.get(key)
            if v is None:
                continue
            if not isinstance(v, list):
                _fail(key, f"must be a list, got {type(v).__name__}")
            for i, p in enumerate(v):
                _part(p, _join(key, i), frozenset({part}), "a reasoning item")
        _str(d, "encrypted_content", "", required=False, nullable=True)
    else:  # opaque hosted-tool and bookkeeping items: ids that pair them must be strings
        for key in ("id", "call_id", "approval_request_id"):
            _str(d, key, "", required=False, nullable=True, max_chars=CALL_ID_MAX_CHARS)
    return kind


def _provider_data(d: dict[str, Any]) -> None:
    """`provider_data` (`PROVIDER_DATA_FIELD`), where given, is an object (the SDK's
    `dict[str, Any]`) or null; its insides are the provider's, stored without reading."""
    v = d.get(PROVIDER_DATA_FIELD)
    if v is not None and not isinstance(v, dict):
        _fail(PROVIDER_DATA_FIELD, f"must be an object, got {type(v).__name__} (the Agents SDK's provider "
              "data of the item)")


def _reasoning_summary(d: dict[str, Any]) -> None:
    """A reasoning item's `summary` is required, a list (the Responses API's request type:
    `[]` when the model wrote none): one without it, or null, was stored, and every context
    or session sending it back got a 400 from the provider. Append only: a row stored
    before is read, and sent with `[]` (`wire_body`)."""
    if "summary" not in d:
        _fail("summary", "Field required (a reasoning item's summary is a list; [] when there is none)")
    if d["summary"] is None:
        _fail("summary", "must be a list, got null (a reasoning item's summary is a list; [] when there is none)")


def _reasoning_id(d: dict[str, Any]) -> None:
    """A reasoning item's `id`, where given, is a non-empty string (the Responses API's
    request type; the provider finds the reasoning it wrote by it): one of another type
    was stored, and every context or session sending it back got a 400. Append only, as
    `_reasoning_summary`: a row stored before is read as stored. An item without one is
    accepted: the Agents SDK's `reasoning_item_id_policy="omit"` saves and sends its
    reasoning items so (the API reads their `encrypted_content` or summary instead; a run
    whose items were refused lost its turn). So is one with neither an id nor
    `encrypted_content` nor summary text: the SDK makes it (that policy on the reasoning of
    a model asked for no summary, without `include=["reasoning.encrypted_content"]`), and
    sends it back itself (only its OpenAI Conversations session leaves it unsaved), so a
    refusal would fail the run after the model answered, as the id's did."""
    if "id" not in d:
        return
    if not isinstance(d["id"], str):
        _fail("id", f"must be a string, got {'null' if d['id'] is None else type(d['id']).__name__} "
              "(a reasoning item's id is the string the provider gave it, as 'rs_...')")
    if not d["id"]:
        _fail("id", "must not be empty (a reasoning item's id is the string the provider gave it, as 'rs_...')")


def repeated_call_id(ids: list[str]) -> tuple[int, int] | None:
    """(the first index, the index that repeats it) of the first id `ids` hold twice; None
    when every id is its own (module docstring, "One unit"). The one rule for the calls of
    one message, which each way in names by its own field."""
    first: dict[str, int] = {}
    for i, cid in enumerate(ids):
        if cid in first:
            return first[cid], i
        first[cid] = i
    return None


def _check_chat(d: dict[str, Any], role: str, *, stored: bool = False) -> None:
    where = f"a {role} message"
    _fields(d, CHAT_FIELDS[role], "", where)
    if "name" in d:
        _str(d, "name", "", min_chars=1, max_chars=NAME_MAX_CHARS, nullable=role != "function")
    if role == "function":
        _str(d, "content", "", nullable=True)
        _str(d, "name", "", min_chars=1, max_chars=NAME_MAX_CHARS)
        return
    if role == "tool":
        _str(d, "tool_call_id", "", min_chars=1, max_chars=CALL_ID_MAX_CHARS)
    if role != "assistant":
        _content(d, "content", "", CHAT_PART_TYPES[role], where, required=True, nullable=False)
        return
    _content(d, "content", "", CHAT_PART_TYPES["assistant"], where, required=False, nullable=True)
    _str(d, "refusal", "", required=False, nullable=True)
    calls = d.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            _fail("tool_calls", f"must be a list, got {type(calls).__name__}")
        for i, call in enumerate(calls):
            _tool_call(call, _join("tool_calls", i))
        # append only: a row stored before the rule is read as stored (`to_anthropic`
        # pairs its calls with their results by position)
        repeat = None if stored else repeated_call_id([c["id"] for c in calls])
        if repeat is not None:
            first, again = repeat
            _fail(_join(_join("tool_calls", again), "id"),
                  f"{shown(calls[again]['id'])} is the id of tool_calls[{first}] too: each call of a message "
                  "needs an id of its own (its result names the call by it)")
    fc = d.get("function_call")
    if fc is not None:
        f = _obj(fc, "function_call")
        _str(f, "name", "function_call", min_chars=1, max_chars=TOOL_NAME_MAX_CHARS)
        _str(f, "arguments", "function_call", required=False)
    audio = d.get("audio")
    if audio is not None:
        _str(_obj(audio, "audio"), "id", "audio", min_chars=1)
    ann = d.get("annotations")
    if ann is not None and not isinstance(ann, list):
        _fail("annotations", f"must be a list, got {type(ann).__name__}")
    if d.get("content") is None and not (calls or fc is not None or isinstance(d.get("refusal"), str)
                                         or audio is not None):
        _fail("content", "may be null only on an assistant message that carries tool_calls, "
              "function_call, refusal or audio")


# -- reading bodies -----------------------------------------------------------------------------


def canonical_role(body: dict[str, Any]) -> str:
    """The role the turn index keeps (see the module docstring); "" for a non-message."""
    t = body.get("type")
    if t in CONTROL_FIELDS:
        return "system"
    if isinstance(t, str) and t != "message":
        return "tool" if t.endswith("_output") or t == "mcp_approval_response" else "assistant"
    role = body.get("role")
    if role == "developer":
        return "system"
    if role == "function":
        return "tool"
    return role if isinstance(role, str) and role in ("system", "user", "assistant", "tool") else ""


def _parts_text(content: object) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if not isinstance(content, list):
        return out
    for p in content:
        if not isinstance(p, dict):
            continue
        t = p.get("type")
        if isinstance(p.get("text"), str):
            out.append(p["text"])
        elif t == "refusal" and isinstance(p.get("refusal"), str):
            out.append(p["refusal"])
        elif t in ("image_url", "input_image"):
            out.append("[image]")
        elif t == "input_audio":
            out.append("[audio]")
        elif t in ("file", "input_file"):
            f = p.get("file") if t == "file" else p
            name = f.get("filename") if isinstance(f, dict) else None
            out.append(f"[file {name}]" if isinstance(name, str) and name else "[file]")
    return out


def message_text(body: dict[str, Any]) -> str:
    """The readable text of a body: what is searched, classified and counted as text.
    Content parts of every type (non-text parts as a short reference such as `[image]`),
    refusals, an audio reply's transcript, each tool call as `name(arguments)`, tool
    results, reasoning summaries; a hosted-tool item as `[its type]`."""
    parts: list[str] = []
    t = body.get("type")
    if t is None or t == "message":
        parts.extend(_parts_text(body.get("content")))
        if isinstance(body.get("refusal"), str) and body["refusal"]:
            parts.append(body["refusal"])
        audio = body.get("audio")
        if isinstance(audio, dict) and isinstance(audio.get("transcript"), str):
            parts.append(audio["transcript"])
        for call in body.get("tool_calls") or ():
            if not isinstance(call, dict):
                continue
            fn = call.get("function") if call.get("type", "function") == "function" else call.get("custom")
            if isinstance(fn, dict):
                args = fn.get("arguments", fn.get("input", ""))
                parts.append(f"{fn.get('name', '')}({args if args is not None else ''})")
        fc = body.get("function_call")
        if isinstance(fc, dict):
            parts.append(f"{fc.get('name', '')}({fc.get('arguments', '')})")
    elif t in ("function_call", "custom_tool_call"):
        args = body.get("arguments") if t == "function_call" else body.get("input")
        parts.append(f"{body.get('name', '')}({args if isinstance(args, str) else ''})")
    elif t in ("function_call_output", "custom_tool_call_output"):
        parts.extend(_parts_text(body.get("output")))
    elif t == "reasoning":
        parts.extend(_parts_text(body.get("summary")))
        parts.extend(_parts_text(body.get("content")))
    elif t in CONTROL_FIELDS:
        pass  # nothing to search or count: never sent
    else:
        parts.append(f"[{t}]")
    return "\n".join(parts)


def base64_tokens(b64: str, bytes_per_token: int = FILE_BYTES_PER_TOKEN) -> int:
    """What a base64 payload costs by the rule above: its decoded bytes (3 for each 4
    characters of `b64`, the base64 text as it stands: a data URL's head is the caller's
    to strip) at `bytes_per_token`, rounded up. An Anthropic kept block's payloads
    (`tiermem.adapters.anthropic.kept_block_tokens`) are counted by it too."""
    return math.ceil(len(b64) * 3 // 4 / bytes_per_token)


def _b64_text(data: object) -> str:
    """The base64 text of an inline payload: a data URL's after its comma; "" for a
    value that is not a string."""
    if not isinstance(data, str):
        return ""
    return data.partition(",")[2] if data.startswith("data:") else data


def _iter_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key in ("content", "output"):
        v = body.get(key)
        if isinstance(v, list):
            out.extend(p for p in v if isinstance(p, dict))
    return out


def payload_tokens(body: dict[str, Any]) -> int:
    """Tokens for what is not text, by the rule above (`IMAGE_TOKENS` and friends)."""
    t = body.get("type")
    if isinstance(t, str) and t in OPAQUE_ITEM_TYPES:
        return math.ceil(len(_compact(body)) / FILE_BYTES_PER_TOKEN)
    n = 0
    for p in _iter_parts(body):
        pt = p.get("type")
        if pt in ("image_url", "input_image"):
            detail = (p.get("image_url") or {}).get("detail") if pt == "image_url" else p.get("detail")
            n += IMAGE_LOW_DETAIL_TOKENS if detail == "low" else IMAGE_TOKENS
        elif pt == "input_audio":
            data = (p.get("input_audio") or {}).get("data")
            n += base64_tokens(_b64_text(data), AUDIO_BYTES_PER_TOKEN) if data else REFERENCE_TOKENS
        elif pt in ("file", "input_file"):
            f = p.get("file") if pt == "file" else p
            data = f.get("file_data") if isinstance(f, dict) else None
            n += base64_tokens(_b64_text(data)) if data else REFERENCE_TOKENS
    if t == "reasoning" and isinstance(body.get("encrypted_content"), str):
        n += base64_tokens(_b64_text(body["encrypted_content"]))
    return n


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def content_bytes(body: dict[str, Any]) -> int:
    """What `max_content_bytes` limits: the UTF-8 bytes of the text plus those of the
    inline payloads (data URLs, base64 audio and files, encrypted reasoning, vendor
    reasoning fields) and of items tiermem stores without reading."""
    n = len(message_text(body).encode("utf-8", "surrogatepass"))
    t = body.get("type")
    if isinstance(t, str) and t in OPAQUE_ITEM_TYPES:
        return n + len(_compact(body).encode("utf-8", "surrogatepass"))
    for p in _iter_parts(body):
        for holder, key in ((p.get("image_url"), "url"), (p, "image_url"), (p.get("input_audio"), "data"),
                            (p.get("file"), "file_data"), (p, "file_data")):
            if isinstance(holder, dict) and isinstance(holder.get(key), str):
                n += len(holder[key].encode("utf-8", "surrogatepass"))
    # provider_data: a payload too (thinking blocks hold the thinking and its signatures),
    # which the envelope's bound is not made for
    for key in ("encrypted_content", *VENDOR_ASSISTANT_FIELDS, PROVIDER_DATA_FIELD):
        if body.get(key) is not None:
            n += len(_compact(body[key]).encode("utf-8", "surrogatepass"))
    audio = body.get("audio")
    if isinstance(audio, dict) and isinstance(audio.get("data"), str):
        n += len(audio["data"])
    return n


def _escapes(value: object) -> int:
    """Bytes JSON's escaping adds to the strings in `value` (a newline or a quote is two
    bytes in JSON, a control character six): text that is counted pays them too, and they
    are no part of the envelope."""
    stack, n = [value], 0
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            n += len(_compact(v).encode("utf-8", "surrogatepass")) - 2 - len(v.encode("utf-8", "surrogatepass"))
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return n


def check_envelope(body: dict[str, Any], counted: int) -> None:
    """Refuse a body whose bytes besides the `counted` ones (`content_bytes`: text and
    payloads) pass MAX_ENVELOPE_BYTES, naming its largest field."""
    def size(v: object) -> int:
        return len(_compact(v).encode("utf-8", "surrogatepass"))

    envelope = size(body) - counted - _escapes(body)
    if envelope > MAX_ENVELOPE_BYTES:
        largest = max(body, key=lambda k: size(body[k]))
        _fail(largest, f"the message holds {envelope} bytes besides its text and payloads (ids, statuses, "
              "annotations, fields tiermem stores without reading), over the limit of "
              f"{MAX_ENVELOPE_BYTES} bytes; this field holds {size(body[largest])}")


# -- pairing ------------------------------------------------------------------------------------

LEGACY_FUNCTION_PREFIX = "function:"


def call_ids(body: dict[str, Any]) -> tuple[str, ...]:
    """The ids of the calls this body makes (their results answer with the same id)."""
    t = body.get("type")
    if isinstance(t, str) and t != "message":
        if t.endswith("_output") or t == "mcp_approval_response":
            return ()
        cid = body.get("id") if t == "mcp_approval_request" else body.get("call_id")
        return (cid,) if isinstance(cid, str) and cid else ()
    if body.get("role") != "assistant":
        return ()
    ids = tuple(c["id"] for c in body.get("tool_calls") or () if isinstance(c, dict) and isinstance(c.get("id"), str))
    fc = body.get("function_call")
    if isinstance(fc, dict) and isinstance(fc.get("name"), str):
        ids += (LEGACY_FUNCTION_PREFIX + fc["name"],)
    return ids


# The `openai` SDK's request type for a local shell call's result (`LocalShellCallOutput`)
# names the call by `id`, no `call_id`; the Agents SDK sends it with the call's `call_id`.
# Either pairs (`result_id`): by `id`, the call's `call_id` or its item `id` (`call_item_id`).
LOCAL_SHELL_CALL_TYPE = "local_shell_call"
LOCAL_SHELL_OUTPUT_TYPE = "local_shell_call_output"


def call_item_id(body: dict[str, Any]) -> str | None:
    """The item `id` of a call that a result may name instead of its `call_id` (a local
    shell call's, which the SDK's typed `local_shell_call_output` answers by `id`), or None."""
    iid = body.get("id") if body.get("type") == LOCAL_SHELL_CALL_TYPE else None
    return iid if isinstance(iid, str) and iid else None


def result_id(body: dict[str, Any]) -> str | None:
    """The call id this body answers, when it is a tool result."""
    t = body.get("type")
    if isinstance(t, str) and t != "message":
        if t == "mcp_approval_response":
            rid = body.get("approval_request_id")
        elif t == LOCAL_SHELL_OUTPUT_TYPE and "call_id" not in body:
            rid = body.get("id")  # the SDK's typed form: the call it answers by `id` (`call_item_id`)
        elif t.endswith("_output"):
            rid = body.get("call_id")
        else:
            return None
        return rid if isinstance(rid, str) and rid else None
    role = body.get("role")
    if role == "tool":
        rid = body.get("tool_call_id")
        return rid if isinstance(rid, str) else None
    if role == "function" and isinstance(body.get("name"), str):
        return LEGACY_FUNCTION_PREFIX + body["name"]
    return None


# the suffix of an id's second use in a request ("call_0_2"); its first use has none
FIRST_REPEAT_SUFFIX = 2


class SentCallIds:
    """The ids a request's calls and results go out under (module docstring, "Ids sent"),
    given in request order: `call` for each call, `result` for each result, `round` where
    a new round of calls starts. A call goes out under its id as stored (through `safe`,
    a provider's character rule) where no call before it in the request has that id,
    else with the first free suffix `_2`, `_3`, ... (cut to keep within
    CALL_ID_MAX_CHARS): an id depends only on what comes before it, so appending leaves
    every earlier id, and the prompt cache's prefix, as it was. A result takes the id of
    the call it answers: among the calls of its id in the round before it, the n-th
    result the n-th call. The one renaming of every form (`to_responses`,
    `unique_item_call_ids`, `unique_chat_call_ids`, the Anthropic and LangChain adapters')."""

    def __init__(self, safe: Callable[[str], str] | None = None) -> None:
        self._safe = safe
        self._taken: set[str] = set()
        self._asked: dict[str, list[str]] = {}  # this round's calls: id as stored -> ids sent, in order

    def round(self) -> None:
        """A new round of calls: results answer only its calls from here on."""
        self._asked = {}

    def call(self, cid: str) -> str:
        base = self._safe(cid) if self._safe is not None else cid
        n = FIRST_REPEAT_SUFFIX
        sent = base
        while sent in self._taken:
            suffix = f"_{n}"
            sent = base[:CALL_ID_MAX_CHARS - len(suffix)] + suffix
            n += 1
        self._taken.add(sent)
        self._asked.setdefault(cid, []).append(sent)
        return sent

    def result(self, rid: str) -> str | None:
        """The id sent for the call `rid` answers; None when no call of the round waits for
        it (the planner sends no such result: a form leaves it out or as it is)."""
        waiting = self._asked.get(rid)
        return waiting.pop(0) if waiting else None


_CALL_ITEM_TYPES = ("function_call", "custom_tool_call")
_OUTPUT_ITEM_TYPES = ("function_call_output", "custom_tool_call_output")


# the roles of input a round of calls cannot run through: the next call item is a new round
_ROUND_ENDING_ROLES = ("user", "system", "developer")


def _ends_round(item: dict[str, Any]) -> bool:
    """Whether `item` ends a round of calls: a result (a function's, a hosted tool's) or an
    input message. What the model sends among one response's calls (reasoning, a message,
    a hosted tool's call) does not."""
    t = item.get("type")
    return (isinstance(t, str) and t.endswith("_output")) or item.get("role") in _ROUND_ENDING_ROLES


def joins_round(body: dict[str, Any]) -> bool:
    """Whether `body`, while calls wait for their results, goes on with their round: an
    item a model writes among one response's items (an assistant message, a hosted tool's
    call, reasoning), typed. The Responses API pairs a call with its output by `call_id`,
    not by adjacency: a reply `[reasoning, function_call, message]` and then the app's
    `function_call_output` is one round (the Agents SDK sends its history so). A result,
    an input message (`_ends_round`) or a control row does not; nor does a chat message
    (no `type`): Chat Completions wants a `tool_calls` message's results right after it."""
    t = body.get("type")
    return (isinstance(t, str) and t not in CONTROL_FIELDS and result_id(body) is None
            and not _ends_round(body))


def unique_item_call_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Responses items with each call's `call_id` sent once (`SentCallIds`): a call item
    after a result or an input message starts a round (`_ends_round`). A call or output
    item whose item `id` an earlier item of the request holds goes without it (module
    docstring, "Ids sent": the API refuses a repeated item id, and the id is optional on
    both). Items that change are copies (the items given may be the caller's). A typed
    `local_shell_call_output` naming its call by the call's item id (`call_item_id`) goes
    naming its `call_id`, as the SDK's type describes that `id`: else two items of one id
    go (the call and its output), which the API refuses.
    `to_responses` and the Agents SDK session's `get_items` send items through it."""
    ids = SentCallIds()
    in_round = False
    item_ids: set[str] = set()  # the item ids sent so far
    shell_calls: dict[str, str] = {}  # a local shell call's item id -> its call_id
    out: list[dict[str, Any]] = []
    for item in items:
        t = item.get("type")
        cid = item.get("call_id")
        if (sid := call_item_id(item)) is not None and isinstance(cid, str):
            shell_calls[sid] = cid
        elif t == LOCAL_SHELL_OUTPUT_TYPE and cid is None and item.get("id") in shell_calls:
            item = {**item, "id": shell_calls[item["id"]]}
        if t in _CALL_ITEM_TYPES and isinstance(cid, str):
            if not in_round:
                ids.round()
            in_round = True
            sent: str | None = ids.call(cid)
        elif t in _OUTPUT_ITEM_TYPES and isinstance(cid, str):
            in_round = False
            sent = ids.result(cid)
        else:
            in_round = in_round and not _ends_round(item)
            sent = None
        if sent is not None and sent != cid:
            item = {**item, "call_id": sent}
        iid = item.get("id")
        if isinstance(iid, str):
            if iid in item_ids and t in _CALL_ITEM_TYPES + _OUTPUT_ITEM_TYPES and isinstance(cid, str):
                # a server that numbers its items per reply as it does its calls (`fc_0`, or
                # the call id itself, every round): the repeat goes without an id, as an
                # item the client made itself does; suffixing it would make an id the API
                # never gave (it checks their form: "Expected an ID that begins with 'fc'")
                item = {k: v for k, v in item.items() if k != "id"}
            item_ids.add(iid)
        out.append(item)
    return out


def unique_chat_call_ids(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages with each `tool_calls` id sent once and each tool
    message naming its call's (`SentCallIds`; every assistant message starts a round).
    A legacy `function_call` is answered by name and keeps it. Messages whose ids change
    are copies, their `tool_calls` new lists."""
    ids = SentCallIds()
    out: list[dict[str, Any]] = []
    for m in msgs:
        role = m.get("role")
        if role == "assistant" and "type" not in m:
            ids.round()
            calls = m.get("tool_calls") or ()
            sent = [ids.call(c["id"]) if isinstance(c, dict) and isinstance(c.get("id"), str) else None
                    for c in calls]
            if any(s is not None and s != c["id"] for s, c in zip(sent, calls, strict=True)):
                m = {**m, "tool_calls": [c if s is None or s == c["id"] else {**c, "id": s}
                                         for s, c in zip(sent, calls, strict=True)]}
        elif role == "tool" and "type" not in m and isinstance(m.get("tool_call_id"), str):
            rid = ids.result(m["tool_call_id"])
            if rid is not None and rid != m["tool_call_id"]:
                m = {**m, "tool_call_id": rid}
        out.append(m)
    return out


def is_reasoning(body: dict[str, Any]) -> bool:
    return body.get("type") == "reasoning"


def is_foreign_reasoning(body: dict[str, Any]) -> bool:
    """A reasoning item another provider's model wrote: the Agents SDK marks the items
    of a Chat Completions model's reply (DeepSeek's reasoning, Anthropic thinking through
    LiteLLM) with `provider_data` (`PROVIDER_DATA_FIELD`), and its own
    `OpenAIResponsesModel._clean_item_for_openai` leaves a reasoning item with any out of
    a Responses request: OpenAI cannot read it (no `encrypted_content` of its own, a
    placeholder id or another provider's). A Responses-form context leaves it out too
    (`context_format="responses"`); history keeps it."""
    return is_reasoning(body) and bool(body.get(PROVIDER_DATA_FIELD))


def result_text_field(body: dict[str, Any]) -> str | None:
    """The field of a tool result that holds its text (trimmed when long), or None."""
    if result_id(body) is None:
        return None
    return "output" if "type" in body else "content"


# -- what a context sends -------------------------------------------------------------------------


# What the openai SDK's streaming helper (`client.chat.completions.stream(...)
# .get_final_completion()`, `ChatCompletionStreamState`) leaves on each tool call of the
# message it accumulates from the chunks: the chunk's `index` (`ChoiceDeltaToolCall.index`),
# the call's place in the reply, which the list's order already says. The API never sends
# it on a reply and no request type has it (a strict server, and the SDK's own
# `ChatCompletionMessageParam` with extra keys forbidden, refuse the message): append
# drops it as it drops `parsed_arguments` (`tiers.models._sdk_wire_form`), and a row
# stored with it before is read without it (`as_appended`).
SDK_STREAM_INDEX_FIELD = "index"


def without_tool_call_field(body: dict[str, Any], field: str, *, in_function: bool = False) -> dict[str, Any]:
    """`body` (a chat message) with `field` dropped from each of its `tool_calls` (with
    `in_function`, from each call's `function`): a new dict when a call has it, else
    `body` itself (the caller's is never modified; a call that is not a dict, or has no
    dict `function`, is kept as it is)."""
    calls = body.get("tool_calls")

    def holder(c: object) -> object:
        return c.get("function") if in_function and isinstance(c, dict) else c

    if not isinstance(calls, list) or not any(isinstance(h := holder(c), dict) and field in h for c in calls):
        return body

    def without(c: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in c.items() if k != field}

    return {**body, "tool_calls": [
        ({**c, "function": without(c["function"])} if in_function else without(c))
        if isinstance(c, dict) and isinstance(holder(c), dict) else c for c in calls]}


def without_tool_call_index(body: dict[str, Any]) -> dict[str, Any]:
    """A chat assistant message without its tool calls' `SDK_STREAM_INDEX_FIELD`: a new
    dict when a call has one, else `body` itself (the caller's is never modified)."""
    if body.get("type") is not None or body.get("role") != "assistant":
        return body
    return without_tool_call_field(body, SDK_STREAM_INDEX_FIELD)


def as_appended(body: dict[str, Any]) -> dict[str, Any]:
    """A stored body in the form append admits today: a row stored before the summary of a
    reasoning item was required (`_reasoning_summary`: absent, or null) gets `[]`, which
    means the same (no summary written) and is what a provider takes; a chat reply stored
    before append dropped its tool calls' streaming `index` (`without_tool_call_index`)
    is without it; any other body is returned as it is. Such a row stays in the log as
    stored (rows never change: history returns it, a fork and migrate-store copy it); what
    leaves the store in a form another writer re-appends or sends (`wire_body`, an export,
    the Agents session's items: `to_responses_rows(verbatim=True)`) and what an import
    reads (an older release exported such rows) take this form, so an export of a store
    the previous release wrote imports and an Agents run over it gets no 400."""
    if body.get("type") == "reasoning" and body.get("summary") is None:
        return {**body, "summary": []}
    return without_tool_call_index(body)


# Nested fields of hosted-tool items that the request type requires and allows null in
# (`Required[Optional[...]]` below the top level: a computer action's `keys`, an image
# generation's `error.code` / `error.param`, a function tool's `strict` and `parameters`
# in the tools an `additional_tools` / `tool_search_output` item lists: `FunctionToolParam`,
# which refuses the tool without them): kept with their null by `_without_nulls`.
# tests/test_formats_tool_nulls.py derives these from the SDK's types.
FUNCTION_TOOL_REQUIRED_NULL_FIELDS = frozenset({"strict", "parameters"})
NESTED_REQUIRED_NULL_FIELDS: dict[str, frozenset[str]] = {
    "computer_call": frozenset({"keys"}),
    "image_generation_call": frozenset({"code", "param"}),
    "additional_tools": FUNCTION_TOOL_REQUIRED_NULL_FIELDS,
    "tool_search_output": FUNCTION_TOOL_REQUIRED_NULL_FIELDS,
}
# Fields of hosted-tool items whose value is the caller's free JSON (an MCP tool's input
# schema and annotations, a function tool's JSON schema `parameters`): a null in them is
# data (`"default": null`, `"const": null`), never an unset field, and is sent as is.
FREE_JSON_FIELDS = frozenset({"input_schema", "annotations", "parameters"})
# What a chat tool call or legacy `function_call` stored without its `arguments` (append
# took it; the request type requires them) is sent with: no arguments, as the API writes it.
NO_ARGUMENTS = "{}"


def _without_nulls(value: Any, kept: frozenset[str], depth: int = 0) -> Any:
    """`value` without the null-valued keys of its dicts at any depth (those in `kept`, and
    whatever sits under FREE_JSON_FIELDS, as they are): what `to_dict()` (`exclude_unset`)
    would have stored of a hosted-tool item a `model_dump()` wrote with every unset field as
    null, which its request type refuses (`action.queries: null`). `value` itself when it
    holds no such null; the caller's is never modified. Below NULLS_MAX_DEPTH levels a value
    is left as it is: a row stored by an older release may nest far deeper than append now
    allows, and recursing through it raised RecursionError in every context over it."""
    if depth >= NULLS_MAX_DEPTH:
        return value
    if isinstance(value, dict):
        out = {k: (v if k in FREE_JSON_FIELDS else _without_nulls(v, kept, depth + 1))
               for k, v in value.items() if v is not None or k in kept}
        same = len(out) == len(value) and all(out[k] is v for k, v in value.items())
        return value if same else out
    if isinstance(value, list):
        items = [_without_nulls(v, kept, depth + 1) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


# how deep `_without_nulls` looks: past append's own nesting limit (MAX_JSON_DEPTH, 32) with
# room, far below the interpreter's recursion limit
NULLS_MAX_DEPTH = 64


def _is_responses_message(body: dict[str, Any]) -> bool:
    """A Responses message: typed, or role-only with a Responses part (`kind_of`)."""
    if body.get("type") is not None:
        return bool(body.get("type") == "message")
    content = body.get("content")
    return body.get("role") in RESPONSES_ROLES and isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") in RESPONSES_ONLY_PART_TYPES for p in content)


def _parts_of(content: object) -> set[object]:
    return {p.get("type") if isinstance(p, dict) else None for p in content} if isinstance(content, list) else set()


def _wire_message(m: dict[str, Any]) -> dict[str, Any]:
    """A Responses message (`_is_responses_message`) as one of the request types takes it:
    append takes any `RESPONSES_PART_TYPES` part on any role, and item ids and statuses as
    the API's lists give them (`responses.input_items.list()`, `conversations.items.list()`),
    which no request type takes together. A user, system or developer message goes without
    its `id` (no input message has one) and with input parts (an `output_text` or `refusal`
    part as its text, an `input_audio` part as "[audio]", as an untyped one is rebuilt:
    `to_responses_rows`; the chat form keeps the audio); a `status` only on a parts list
    (`Message`), a `phase` only without `status` (`EasyInputMessageParam`). An assistant
    message with output parts is sent as the reply it is where it has both the item's
    `status` and a provider's `id` (`ResponseOutputMessageParam` requires both), else
    without its `id` and `status` and with input parts or its text (`EasyInputMessageParam`,
    as an untyped one is rebuilt): the Agents SDK's placeholder id (`SDK_PLACEHOLDER_ID`) is
    no provider's, and a reply stored with a status and no id (an Agents SDK session's
    message item once the SDK has stripped the placeholder, as it does before saving to
    OpenAI's Conversations API) has none to send; tiermem makes up neither."""
    role, content = m.get("role"), m.get("content")
    parts = _parts_of(content)
    if role == "assistant":
        if (isinstance(content, list) and parts <= {"output_text", "refusal"} and isinstance(m.get("status"), str)
                and _provider_item_id(m.get("id"))):
            # a reply's item as the API returned it: as it is
            return m if m.get("type") == "message" else {**m, "type": "message"}
        out = {k: v for k, v in m.items() if k not in ("id", "status")}
        if isinstance(content, list) and not parts <= INPUT_PART_TYPES:
            out["content"] = _joined(content)
        return out
    out = {k: v for k, v in m.items() if k != "id"}
    if isinstance(content, list) and not parts <= INPUT_PART_TYPES:
        out["content"] = [_to_input_part(p) for p in content if isinstance(p, dict)]
    if "status" in out and (isinstance(content, str) or "phase" in out):
        if isinstance(content, str):
            del out["status"]
        else:
            del out["phase"]
    return out


def _provider_item_id(item_id: object) -> bool:
    """Whether `item_id` is an item id a provider gave: a non-empty string, not the Agents
    SDK's placeholder."""
    return isinstance(item_id, str) and item_id != "" and item_id != SDK_PLACEHOLDER_ID


def sdk_input_fields(item: dict[str, Any]) -> dict[str, Any]:
    """The fields of a stored item that the Agents SDK's own input gives it (a session's
    items as `get_items` returns them) and its wire form (`wire_body`) leaves out: its
    `provider_data` (an object), the SDK's placeholder id (`SDK_PLACEHOLDER_ID`), and with
    that id on an assistant message its stored parts (their nulls left out, as
    `wire_body` leaves them out) and `status`: the SDK's Chat Completions converter reads an
    assistant message item with an id as a reply, by its output parts (text content there
    is read a character at a time), and one with a status and no id it refuses ("Unhandled
    item type or structure"); its Responses model strips the id and `provider_data`
    itself. `{}` where the item has none of them."""
    fields: dict[str, Any] = {k: item[k] for k in (PROVIDER_DATA_FIELD,) if isinstance(item.get(k), dict)}
    if item.get("id") != SDK_PLACEHOLDER_ID:
        return fields
    fields["id"] = SDK_PLACEHOLDER_ID
    content = item.get("content")
    if item.get("role") == "assistant" and _is_responses_message(item) and isinstance(content, list):
        fields["content"] = [{k: v for k, v in p.items() if v is not None} if isinstance(p, dict) else p
                             for p in content]
        if isinstance(item.get("status"), str):
            fields["status"] = item["status"]
    return fields


def _wire_tool_calls(m: dict[str, Any]) -> dict[str, Any]:
    """A chat assistant message's calls with the fields append took without and the request
    type requires: a call's `type` (`"function"`, as append read it: `_tool_call`), a
    function's `arguments` and the legacy `function_call`'s (NO_ARGUMENTS), a custom call's
    `input` (""). `m` itself when none lacks one; the caller's is never modified."""
    out = m
    calls = m.get("tool_calls")
    if isinstance(calls, list):
        fixed: list[Any] = []
        for c in calls:
            if isinstance(c, dict) and isinstance(c.get("function"), dict) and c.get("type", "function") == "function" \
                    and ("type" not in c or "arguments" not in c["function"]):
                fn = c["function"]
                c = {"id": c.get("id"), "type": "function", **{k: v for k, v in c.items() if k != "id"},
                     "function": fn if "arguments" in fn else {**fn, "arguments": NO_ARGUMENTS}}
            elif isinstance(c, dict) and c.get("type") == "custom" and isinstance(c.get("custom"), dict) \
                    and "input" not in c["custom"]:
                c = {**c, "custom": {**c["custom"], "input": ""}}
            fixed.append(c)
        if any(a is not b for a, b in zip(fixed, calls, strict=True)):
            out = {**out, "tool_calls": fixed}
    fc = m.get("function_call")
    if isinstance(fc, dict) and "arguments" not in fc:
        out = {**out, "function_call": {**fc, "arguments": NO_ARGUMENTS}}
    return out


def wire_body(body: dict[str, Any]) -> dict[str, Any]:
    """The body as a request param (module docstring, "Wire form")."""
    t = body.get("type")
    kept = REQUIRED_NULL_FIELDS.get(t, frozenset()) if isinstance(t, str) else frozenset()
    # a Conversations API item's `created_by`, on any item (no request type has it)
    dropped = (CONVERSATION_ONLY_FIELDS.get(t, frozenset()) | {CONVERSATION_ITEM_FIELD}
               if isinstance(t, str) else frozenset())
    out = {k: v for k, v in as_appended(body).items()
           if (v is not None or k in kept) and k != PROVIDER_DATA_FIELD and k not in dropped}
    if t in OPAQUE_ITEM_TYPES:
        out = _without_nulls(out, NESTED_REQUIRED_NULL_FIELDS.get(t, frozenset()) | kept)
    content = out.get("content")
    if isinstance(content, list) and any(isinstance(p, dict) and None in p.values() for p in content):
        out["content"] = [{k: v for k, v in p.items() if v is not None} if isinstance(p, dict) else p
                          for p in content]
    # a message under the SDK's placeholder id goes as one without an id: its text (the
    # Agents adapter gives the SDK its parts, status and id back: `sdk_input_fields`)
    if _is_responses_message(out):
        out = _wire_message(out)
    elif "type" not in out and out.get("role") == "assistant":
        out = _wire_tool_calls(out)
    if out.get("id") == SDK_PLACEHOLDER_ID:
        out = {k: v for k, v in out.items() if k != "id"}  # the SDK's placeholder, no provider's id
    if "type" not in out:
        for k in REPLY_ONLY_FIELDS:
            out.pop(k, None)
        audio = out.get("audio")
        if isinstance(audio, dict) and set(audio) != {"id"}:
            out["audio"] = {"id": audio.get("id")}
        if out.get("tool_calls") == []:
            del out["tool_calls"]
        if out.get("role") == "tool":
            out.pop("name", None)
    return out


def is_control(body: dict[str, Any]) -> bool:
    return body.get("type") in CONTROL_FIELDS


def hidden_positions(rows: list[tuple[int, dict[str, Any]]]) -> tuple[set[int], int]:
    """From (position, body) rows in log order: the positions hidden by control rows (the
    control rows themselves and what retractions name) and the position of the latest
    clear (-1 if none), before which nothing is active."""
    hidden: set[int] = set()
    clear = -1
    for pos, body in rows:
        t = body.get("type")
        if t == RETRACT_TYPE:
            hidden.add(pos)
            named = body.get("position")
            # only an earlier row: a retraction stored naming itself or a later position
            # (refused at append since) must not hide the message written there afterwards
            if isinstance(named, int) and not isinstance(named, bool) and named < pos:
                hidden.add(named)
        elif t == CLEAR_TYPE:
            hidden.add(pos)
            clear = max(clear, pos)
    return hidden, clear


def is_system(body: dict[str, Any]) -> bool:
    return body.get("role") in ("system", "developer") and body.get("type") in (None, "message")


def fold_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One leading system message holding, in order, the text of every system and
    developer message; the others keep their order (strict chat templates refuse a
    system message anywhere but first)."""
    systems = [m for m in messages if is_system(m)]
    if not systems or (len(systems) == 1 and messages[0] is systems[0]):
        return list(messages)
    merged = {"role": "system", "content": "\n\n".join(message_text(m) for m in systems)}
    return [merged, *(m for m in messages if not is_system(m))]


# -- converting between the two families (for adapters and output shapes) ------------------------
# Lossy only where the target family has no place for something: chat has no reasoning
# or hosted-tool items (left out), Responses messages no audio part (kept as its text
# reference). Control rows are never converted: callers drop them first.
# No conversion changes its input: the bodies converted are the stored ones, the hot
# tier's and the planner's cached copies, and a context's planned messages, which later
# calls read again (and count tokens by); an output shares no list it appends to with them.


def _to_input_part(p: dict[str, Any]) -> dict[str, Any]:
    t = p.get("type")
    if t in INPUT_PART_TYPES:  # a Responses input part already (a role-only message's): as it is
        return copy.deepcopy(p)
    if t == "text":
        return {"type": "input_text", "text": p.get("text", "")}
    if t == "image_url":
        img = p.get("image_url") or {}
        out = {"type": "input_image", "image_url": img.get("url"), "detail": img.get("detail") or "auto"}
        return out
    if t == "file":
        f = {k: v for k, v in (p.get("file") or {}).items() if k in ("file_data", "file_id", "filename") and v}
        return {"type": "input_file", **f}
    if t == "refusal":
        return {"type": "input_text", "text": p.get("refusal", "")}
    return {"type": "input_text", "text": "\n".join(_parts_text([p]))}


def _joined(content: object) -> str:
    return "\n".join(_parts_text(content))


def join_reply_text(before: str, after: str) -> str:
    """A Responses reply's text `after` joined to the text `before` of its calls' message
    (`joins_round`: one round): the non-empty ones, a newline between; "" when neither
    says anything. The one rule of `to_chat` and of the LangChain history
    (tiermem.adapters.langchain), which read such a round as one message."""
    return "\n".join(x for x in (before, after) if x)


def to_responses(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages as Responses input items (Responses items pass as they
    are, in wire form), a request's: each call's `call_id` sent once, each output naming
    its call's (module docstring, "Ids sent")."""
    return unique_item_call_ids([item for items in to_responses_rows(bodies) for item in items])


def to_responses_rows(bodies: list[dict[str, Any]], *, verbatim: bool = False) -> list[list[dict[str, Any]]]:
    """`to_responses`, one list per body: a control row gives none, a Responses item one,
    a chat message as many as it converts to (an assistant turn's text, then each call).
    `verbatim`: Responses items (typed, or role-only messages with Responses parts) come
    back as stored (explicit nulls and reply-only fields kept, as the Agents SDK's own
    sessions return them) instead of in wire form, in the form append admits today
    (`as_appended`: a reasoning row stored before its summary was required gets `[]`; the
    Agents SDK sends a session's items to the provider as they come, and null is a 400);
    copies either way. A chat result's item type (`custom_tool_call_output` or
    `function_call_output`) is its call's: the call of its id it answers in its own round
    (`_RoundCalls`), as the API refuses an output whose type is not its call's."""
    out: list[list[dict[str, Any]]] = []
    asked = _RoundCalls()
    for b in bodies:
        row: list[dict[str, Any]] = []
        out.append(row)
        if is_control(b):
            continue
        if "type" in b:
            row.append(copy.deepcopy(as_appended(b)) if verbatim else wire_body(b))
            asked.saw(row[-1])
            continue
        if verbatim and kind_of(b) == "message":
            # a role-only message with Responses parts is a Responses item already; in wire
            # form below it is rebuilt from its text and parts, which an assistant one needs
            # (its output_text parts are no request param without the item's id and status)
            row.append(copy.deepcopy(b))
            asked.saw(row[-1])
            continue
        role = b.get("role")
        content = b.get("content")
        if role in ("system", "developer", "user"):
            parts = content if isinstance(content, str) else [_to_input_part(p) for p in content or ()
                                                               if isinstance(p, dict)]
            row.append({"role": role, "content": parts})
            asked.saw(row[-1])
        elif role == "assistant":
            text = "\n".join(x for x in [_joined(content), b.get("refusal") or "",
                                         (b.get("audio") or {}).get("transcript") or ""] if x)
            if text:
                row.append({"role": "assistant", "content": text})
                asked.saw(row[-1])
            for c in b.get("tool_calls") or ():
                if c.get("type", "function") == "custom":
                    cu = c.get("custom") or {}
                    row.append({"type": "custom_tool_call", "call_id": c["id"], "name": cu.get("name", ""),
                                "input": cu.get("input", "")})
                else:
                    fn = c.get("function") or {}
                    row.append({"type": "function_call", "call_id": c["id"], "name": fn.get("name", ""),
                                "arguments": fn.get("arguments") or ""})
                asked.saw(row[-1])
            fc = b.get("function_call")
            if isinstance(fc, dict):
                row.append({"type": "function_call", "call_id": LEGACY_FUNCTION_PREFIX + fc.get("name", ""),
                            "name": fc.get("name", ""), "arguments": fc.get("arguments") or ""})
                asked.saw(row[-1])
        elif role in ("tool", "function"):
            cid = result_id(b) or ""
            row.append({"type": asked.output_type(cid), "call_id": cid, "output": _joined(content)})
            asked.saw(row[-1])
    return out


class _RoundCalls:
    """The output type each call of the round so far waits for, by id, for `to_responses_rows` to
    type a chat result by the call it answers. Rounds and pairing as `unique_item_call_ids`
    reads the same items (a call item after a result or an input message starts a round,
    `_ends_round`; the n-th result of an id in a round answers its n-th call), so an output's
    type follows the very call whose id `SentCallIds` gives it: an id may be a custom
    tool's in one round and a function's in another (servers that number calls per reply),
    or both in one round (Responses items)."""

    def __init__(self) -> None:
        self._asked: dict[str, list[str]] = {}  # id -> the output types its calls wait for, in order
        self._in_round = False

    def saw(self, item: dict[str, Any]) -> None:
        t = item.get("type")
        cid = item.get("call_id")
        if t in _CALL_ITEM_TYPES and isinstance(cid, str):
            if not self._in_round:
                self._asked = {}
            self._in_round = True
            self._asked.setdefault(cid, []).append(f"{t}_output")
        elif t in _OUTPUT_ITEM_TYPES and isinstance(cid, str):
            self._in_round = False
            waiting = self._asked.get(cid)
            if waiting:
                waiting.pop(0)
        else:
            self._in_round = self._in_round and not _ends_round(item)

    def output_type(self, cid: str) -> str:
        """The output type for a result of `cid` next: its waiting call's; a result no
        call of the round waits for (the planner sends none) stays a function's."""
        waiting = self._asked.get(cid)
        return waiting[0] if waiting else "function_call_output"


def _to_chat_part(p: dict[str, Any]) -> dict[str, Any] | None:
    t = p.get("type")
    if t in ("input_text", "output_text", "text"):
        return {"type": "text", "text": p.get("text", "")}
    if t == "input_image" and isinstance(p.get("image_url"), str):
        img: dict[str, Any] = {"url": p["image_url"]}
        if p.get("detail") in ("auto", "low", "high"):
            img["detail"] = p["detail"]
        return {"type": "image_url", "image_url": img}
    if t == "input_file":
        f = {k: p[k] for k in ("file_data", "file_id", "filename") if isinstance(p.get(k), str)}
        if "file_data" in f or "file_id" in f:
            return {"type": "file", "file": f}
    if t == "input_audio":
        audio = p.get("input_audio")
        return {"type": "input_audio", "input_audio": dict(audio) if isinstance(audio, dict) else audio}
    text = _joined([p])
    return {"type": "text", "text": text} if text else None


def joins_turn(prev: dict[str, Any]) -> bool:
    """Whether a Responses call item (`function_call`, `custom_tool_call`) right after chat
    message `prev` (as `to_chat` makes it) is a call of `prev`'s assistant turn: `prev` has
    calls (the item is a parallel one) or text (the Responses API writes a turn's text as a
    message item of its own, its calls after it). `to_chat` puts the call on `prev`; the
    LangChain history reads the two as one AIMessage by the same rule."""
    return prev.get("role") == "assistant" and bool(prev.get("tool_calls") or isinstance(prev.get("content"), str))


def to_chat(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Responses items as Chat Completions messages (chat messages pass in wire form).
    Consecutive calls become one assistant message with parallel `tool_calls`; an assistant
    message item right after them (its reply's text, the round going on: `joins_round`)
    joins that message's content."""
    out: list[dict[str, Any]] = []
    for b in bodies:
        if is_control(b):
            continue
        t = b.get("type")
        if t is None and "role" in b and not (isinstance(b.get("content"), list) and kind_of(b) == "message"):
            out.append(wire_body(b))
            continue
        if t in (None, "message"):
            role, content = b.get("role"), b.get("content")
            prev = out[-1] if out else None
            if (t == "message" and role == "assistant" and prev is not None and prev.get("role") == "assistant"
                    and prev.get("tool_calls")):
                # a Responses reply's text after its calls (one round, `joins_round`): Chat
                # Completions wants the calls' results right after their message, so the
                # text joins it (`prev` is this conversion's own dict, or a wire-form copy)
                prev["content"] = join_reply_text(_joined(prev.get("content")), _joined(content)) or None
                continue
            if isinstance(content, str) or role in ("system", "developer", "assistant"):
                out.append({"role": role, "content": content if isinstance(content, str) else _joined(content)})
            else:
                parts = [q for q in (_to_chat_part(p) for p in content or () if isinstance(p, dict)) if q]
                out.append({"role": role, "content": parts})
        elif t in ("function_call", "custom_tool_call"):
            call: dict[str, Any] = (
                {"id": b["call_id"], "type": "function",
                 "function": {"name": b.get("name", ""), "arguments": b.get("arguments", "")}}
                if t == "function_call" else
                {"id": b["call_id"], "type": "custom", "custom": {"name": b.get("name", ""), "input": b.get("input", "")}})
            prev = out[-1] if out else None
            if prev is not None and joins_turn(prev):
                # a new list: `prev` may be a chat body in wire form, a shallow copy whose
                # `tool_calls` is the stored (or cached, or planned) body's own list
                prev["tool_calls"] = [*(prev.get("tool_calls") or ()), call]
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif t in ("function_call_output", "custom_tool_call_output"):
            out.append({"role": "tool", "tool_call_id": b["call_id"], "content": _joined(b.get("output"))})
        # reasoning and hosted-tool items have no Chat Completions form: left out
    return out
