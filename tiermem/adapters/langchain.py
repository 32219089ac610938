"""LangChain chat history over tiermem (`pip install 'tiermem[langchain]'`).

    history = TiermemChatMessageHistory(mem, "user-42")
    chain = RunnableWithMessageHistory(model, lambda session_id: TiermemChatMessageHistory(mem, session_id))

Messages are stored in OpenAI format (`langchain_core.messages.convert_to_openai_messages`),
so other clients of the same conversation read them as any other message; what that
format has no field for goes in the row's metadata and comes back on read: the message's
LangChain id (`langchain_id`), a tool message's `status` when it is not "success"
(`langchain_status`), and its `artifact` (`langchain_artifact`) when it is JSON and fits
the store's `max_metadata_bytes` with the rest (else it is left out: the message is stored
without it). A tool message's `name` is kept in the stored body. Content blocks a chat
message of the role cannot carry (an AI message's reasoning, thinking or server-tool
blocks, a tool result's images), which LangChain's conversion passes through and the
store would refuse, are left out of the stored body; the message's LangChain content
is kept whole in `langchain_content` and comes back on read, on the same terms as an
artifact (left out when it does not fit: the message then reads back as stored), as is
an AI message's content whose blocks the chat form holds otherwise (a `tool_use` block
is its call, the text a string). The message's own metadata, `additional_kwargs`,
`response_metadata` and `usage_metadata` (`METADATA_FIELD_KEYS`: what an integration
may need sent back, such as Gemini's thought signatures or DeepSeek's
`reasoning_content`), is kept in `langchain_additional_kwargs`,
`langchain_response_metadata` and `langchain_usage_metadata` on the same terms (of the
first two their JSON entries; where the limit takes only some, `additional_kwargs`
first, the reply's metadata last), never in the stored body, which the planner counts;
it comes back on read and in the context a LangChain agent's model is given
(`context_input`'s `memory`), its text as planned. A block LangChain's conversion
cannot write (a v1 `text-plain` block) is a ValidationError naming the message's content.
An AI message's `invalid_tool_calls` (which LangChain's conversion leaves out) are
stored after its calls as langchain-openai sends them (`_invalid_wire_calls`: the
arguments the text the model wrote), so a model is shown its failed call and the
context keeps the tool message answering it; the LangChain form (the error text, a call
without an id or name, which no chat call carries) is kept in
`langchain_invalid_tool_calls` on the same terms and comes back whole (without it, a
call whose arguments are not JSON reads back invalid with the parser's error).
`clear()` appends a clear row (a read boundary): the log keeps everything.

`memory` is a `Memory`, a `NamespacedMemory` or a `tiermem.client.Client` (a shared
`tiermem serve`). A client reads the server's metadata limit (`Client.limits()`, once,
at the first batch keeping more than ids in metadata) and what is kept is checked before
sending, as over a Memory. Only a server that does not say its limits (an older one)
gets the batch with all of it; when it refuses one message's metadata (422, nothing
written) that message's optional keys are left out one at a time (`MENDED_KEYS`: the
artifact among them) and the batch sent again (`append_messages`), so every way stores
the same rows.

`add_messages` writes its messages in one batch (all or nothing) where one append takes
them. More (past `MAX_BATCH_MESSAGES` messages or, over a `Client`, past its server's
`max_body_bytes`: a long imported history) go in consecutive chunks (`append_chunks`, as
a LangGraph sync's), in order, each message once, each chunk an ordinary append readers
may see: each chunk after the first is conditional on the incarnation the first went to
and the position the previous one left, so another writer's append between two chunks
refuses the next (nothing of it written), which then goes after it; an erasure between
two chunks stops the add (`HistoryErased`) rather than begin the conversation again
holding only its tail. A server that takes no condition (an older one) gets the chunks
as they are. Every message is checked as its append checks it before the first chunk
is written (`_common.checked_chunks`): one the store refuses leaves nothing written and
is named by its index in the whole add. A `Client` asks its server's limits for this
only for a batch past the least `max_body_bytes` any server takes.

`messages` is the whole visible history (`tiermem.adapters._common.visible`: folds do not
cut it), as a model is sent it (`RunnableWithMessageHistory` gives it the model): a tool
call id used before in the history (a server that numbers its calls per reply, `call_0`
every round) comes back renamed with its tool messages (`unique_call_ids`: `call_0_2`,
`call_0_3`, given oldest first, so an earlier id stays as the history grows), since the
integrations send a repeat as it is and the providers refuse it. The rows keep the ids
appended: a message read back and given to a LangGraph sync (matched by its LangChain id)
reads there as an edit of its row. Reading accepts every stored shape, the `openai` SDK's own replies included: an
assistant message whose `content` is null (a tool-calling or refusal-only reply) is an
`AIMessage` with empty content, and a tool call whose arguments are not a JSON object is
one of its `invalid_tool_calls` (LangChain's conversion raised on both). Responses items
(what the OpenAI Agents SDK stores) are grouped into turns as `tiers.formats.to_chat`
groups them: a `function_call` / `custom_tool_call` item right after an assistant
message with text or calls is a call of that turn, so a turn's text item and its call
items read back as one `AIMessage`; two chat messages with calls stay two (two rounds).
An assistant message item right after calls (a Responses reply `[function_call, message]`,
one round: `tiers.formats.joins_round`) joins their `AIMessage`'s content as `to_chat`
joins it, so their tool messages follow it (`_join_text`): Chat Completions and Anthropic
refuse a message between a call and its result.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.language_models import BaseChatModel, BaseLanguageModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langchain_core.runnables import RunnableBinding, RunnableConfig, RunnableSequence
from langchain_core.runnables.configurable import DynamicRunnable

from tiermem.adapters._common import (
    LANGCHAIN_CONTENT_KEY,
    LANGCHAIN_ID_KEY,
    LANGCHAIN_INVALID_CALLS_KEY,
    MemoryLike,
    append_chunked,
    append_chunks,
    check_memory,
    checked_chunks,
    clear,
    conditional_appends,
    in_context_namespace,
    log_pages,
    metadata_limit,
    visible,
)
from tiermem.adapters.anthropic import CONTINUED_TEXT, _match_key, chosen_breakpoints
from tiermem.planner.plan import EPHEMERAL, MAX_BREAKPOINTS, Context
from tiermem.tiers.errors import LimitExceeded, ValidationError
from tiermem.tiers.formats import (
    CALL_ID_MAX_CHARS,
    CHAT_PART_TYPES,
    RESPONSES_PART_TYPES,
    TOOL_NAME_MAX_CHARS,
    SentCallIds,
    is_control,
    join_reply_text,
    joins_turn,
    to_chat,
)
from tiermem.tiers.models import MAX_JSON_DEPTH, check_int, check_keys, nested_deeper_than, non_string_key
from tiermem.tiers.plain_json import check_int_digits, long_int_place

# Responses items that are one tool call each (`to_chat` makes each an AI message of one call)
RESPONSES_CALL_TYPES = frozenset({"function_call", "custom_tool_call"})
# content blocks of an AI message that are one of its calls, by the key naming the call's
# id: the providers' integrations send such a block as the call (the id the block's)
CALL_BLOCK_ID_KEYS = {"tool_use": "id", "tool_call": "id", "function_call": "call_id"}

METADATA_ID_KEY = LANGCHAIN_ID_KEY
METADATA_STATUS_KEY = "langchain_status"
METADATA_ARTIFACT_KEY = "langchain_artifact"
# a message's LangChain content, kept when its chat form had to leave blocks out
METADATA_CONTENT_KEY = LANGCHAIN_CONTENT_KEY
# an AI message's `invalid_tool_calls` as LangChain has them (the error text, a call
# without an id), which the chat form's calls (`_invalid_wire_calls`) cannot say
METADATA_INVALID_CALLS_KEY = LANGCHAIN_INVALID_CALLS_KEY
INVALID_CALL_FIELDS = ("name", "args", "id", "error")
# a message's own metadata, which the chat form has no field for: what the provider's
# integration put there and may need back (`additional_kwargs`: Gemini's
# `__gemini_function_call_thought_signatures__`, DeepSeek's `reasoning_content`), what it
# said of the reply (`response_metadata`) and the tokens it counted (`usage_metadata`).
# Kept in the row's metadata under these keys, never in the stored body (the text the
# planner counts), in this order of precedence where the metadata limit keeps only some
METADATA_FIELD_KEYS = {
    "additional_kwargs": "langchain_additional_kwargs",
    "response_metadata": "langchain_response_metadata",
    "usage_metadata": "langchain_usage_metadata",
}
# which optional metadata key a store's size refusal leaves out first (`_optional_refused`):
# what is told of the reply before what the message holds, what the provider needs last
MENDED_KEYS = (METADATA_FIELD_KEYS["usage_metadata"], METADATA_FIELD_KEYS["response_metadata"],
               METADATA_ARTIFACT_KEY, METADATA_CONTENT_KEY, METADATA_INVALID_CALLS_KEY,
               METADATA_FIELD_KEYS["additional_kwargs"])
# the level a row's metadata sits at, as the store counts depth (the message is 1)
_METADATA_DEPTH = 2
# how Memory and the service name a batch message's metadata they refuse
_REFUSED_METADATA = re.compile(r"messages\[(\d+)\]\.metadata")
_T = TypeVar("_T")


def _fits(value: object, limit: int | None) -> bool:
    """Whether `value` is JSON tiermem can store in metadata within `limit` bytes."""
    try:
        size = len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode())
    except (TypeError, ValueError, RecursionError):
        return False
    return limit is None or size <= limit


def _storable_json(value: object, depth: int) -> bool:
    """Whether the store takes `value` at level `depth` of a message: JSON, every key a
    string, no integer past the one limit, nested within its depth. What the caller gave
    (an artifact, content) is refused for any of these, naming it; what an integration
    put in a message's own metadata is left out instead (`_message_fields`)."""
    return (_fits(value, None) and non_string_key(value) is None and long_int_place(value) is None
            and not nested_deeper_than(value, MAX_JSON_DEPTH, depth=depth))


def _message_fields(m: BaseMessage) -> dict[str, Any]:
    """`m`'s own metadata to keep, by its metadata key (`METADATA_FIELD_KEYS`), where it
    holds any: of `additional_kwargs` and `response_metadata` the entries the store takes
    (`_storable_json`; an integration's object, such as a structured output's `parsed`,
    is left out: the text it was parsed from is kept), `usage_metadata` whole where it
    takes it. The integration made them, not the caller: never a refusal of the message."""
    out: dict[str, Any] = {}
    for field, key in METADATA_FIELD_KEYS.items():
        value = getattr(m, field, None)
        if field != "usage_metadata" and isinstance(value, dict):
            value = {k: v for k, v in value.items()
                     if isinstance(k, str) and _storable_json({k: v}, _METADATA_DEPTH + 1)}
        if value and _storable_json(value, _METADATA_DEPTH + 1):
            out[key] = value
    return out


log = logging.getLogger(__name__)


def _finite(value: Any, path: str, found: list[str]) -> Any:
    """`value` with each NaN or Infinity (no JSON number) as None, their paths in `found`."""
    if isinstance(value, float) and not math.isfinite(value):
        found.append(path)
        return None
    if isinstance(value, dict):
        return {k: _finite(v, f"{path}.{k}", found) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value


def _nulled_non_finite(m: BaseMessage, n: int, warn: bool) -> BaseMessage:
    """`m` with NaN and Infinity in its tool calls' args as null (`to_openai`'s
    non_finite="null"), with one WARNING naming the message and fields where `warn`."""
    calls = getattr(m, "tool_calls", None) or []
    found: list[str] = []
    fixed = [{**call, "args": _finite(call.get("args"), f"tool_calls[{i}].args", found)} for i, call in enumerate(calls)]
    if not found:
        return m
    if warn:
        log.warning("messages[%d] (an %s, id %r): %s held NaN or Infinity, no JSON number; stored as null "
                    "(the state keeps the model's value)", n, type(m).__name__, m.id, ", ".join(found))
    return m.model_copy(update={"tool_calls": fixed})


def to_openai(messages: Sequence[BaseMessage], *,
              max_metadata_bytes: int | Callable[[], int | None] | None = None,
              non_finite: Literal["refuse", "null"] = "refuse", warn: bool = True) -> list[dict[str, Any]]:
    """LangChain messages as OpenAI chat messages, with what that format has no field
    for (the id, a tool message's status and artifact, content blocks its role cannot
    carry, the message's own metadata) in the envelope metadata. `max_metadata_bytes`
    may be a function, asked once and only when a message has more than its id there.
    NaN or Infinity in a tool call's args (no JSON number; `json.loads` takes them, as
    LangChain parses a provider's args) is refused (`non_finite="refuse"`, naming
    `messages[i].tool_calls[j].args`: a caller's input, which the caller can fix), or
    stored as null (`"null"`, with one WARNING where `warn`: what the LangGraph adapters
    store of an agent's state, which a checkpointer keeps, so a refusal would refuse every
    later turn of the thread)."""
    from langchain_core.messages import BaseMessage, ToolMessage

    limit_of = max_metadata_bytes if callable(max_metadata_bytes) else (lambda: max_metadata_bytes)
    limit: list[int | None] = []  # asked at most once

    def fits(value: dict[str, Any]) -> bool:
        if not limit:
            limit.append(limit_of())
        return _fits(value, limit[0])

    out: list[dict[str, Any]] = []
    for n, m in enumerate(messages):
        if not isinstance(m, BaseMessage):  # a bare str or dict: named, not an AttributeError further in
            raise ValidationError(f"messages[{n}]", f"must be a LangChain message (a BaseMessage such as "
                                  f"HumanMessage), got {type(m).__name__}")
        if non_finite == "null":
            m = _nulled_non_finite(m, n, warn)
        # LangChain writes a call's args as JSON text, a key that is no string as its text:
        # refused first, as append refuses one anywhere else (the args' own keys LangChain
        # checks itself)
        for i, call in enumerate(getattr(m, "tool_calls", None) or ()):
            check_keys(call.get("args"), f"messages[{n}].tool_calls[{i}].args")
            # and an integer past the one limit, which the args' JSON text would hide
            check_int_digits(call.get("args"), f"messages[{n}].tool_calls[{i}].args")
            # and NaN or Infinity, which the args' text would hold as no JSON (`NaN`)
            try:
                json.dumps(call.get("args"), allow_nan=False, default=str)
            except ValueError:
                raise ValidationError(f"messages[{n}].tool_calls[{i}].args", "must be JSON: NaN and Infinity "
                                      "are no JSON numbers") from None
        try:
            body = dict(convert_to_openai_messages(m))
        except ValueError as exc:
            # a block its conversion cannot write (a v1 `text-plain` block): LangChain's bare
            # ValueError, named here as append names any refusal
            raise ValidationError(f"messages[{n}].content", f"cannot be written as an OpenAI chat message "
                                                           f"(LangChain: {exc})") from None
        meta: dict[str, Any] = {}
        if m.id:
            meta[METADATA_ID_KEY] = m.id
        invalid = getattr(m, "invalid_tool_calls", None) or []
        if invalid:
            # LangChain's conversion leaves them out: the model would never see its failed
            # call, nor the tool message answering it (`_invalid_wire_calls`)
            sent = _invalid_wire_calls(invalid)
            if sent:
                body["tool_calls"] = [*(body.get("tool_calls") or []), *sent]
            kept = [{k: c.get(k) for k in INVALID_CALL_FIELDS} for c in invalid]
            if fits({**meta, METADATA_INVALID_CALLS_KEY: kept}):
                meta[METADATA_INVALID_CALLS_KEY] = kept
        storable = _storable_parts(body)
        if storable is not None:
            body = storable
        # an AI message's blocks its chat form does not hold as they are (a `tool_use`
        # block, which the chat form holds as its call, leaving a string of its text)
        # come back from the LangChain content kept, as blocks left out do
        regrouped = isinstance(m, AIMessage) and isinstance(m.content, list) and body.get("content") != m.content
        if (storable is not None or regrouped) and fits({**meta, METADATA_CONTENT_KEY: m.content}):
            meta[METADATA_CONTENT_KEY] = m.content
        # the message's own metadata where the limit keeps only some: what the provider
        # may need back (`additional_kwargs`) before the artifact, what was told of the
        # reply after it (the order `MENDED_KEYS` leaves them out in, reversed)
        fields = _message_fields(m)
        kwargs_key = METADATA_FIELD_KEYS["additional_kwargs"]
        if kwargs_key in fields and fits({**meta, kwargs_key: fields[kwargs_key]}):
            meta[kwargs_key] = fields[kwargs_key]
        if isinstance(m, ToolMessage):
            if m.status != "success":
                meta[METADATA_STATUS_KEY] = m.status
            if m.artifact is not None and fits({**meta, METADATA_ARTIFACT_KEY: m.artifact}):
                meta[METADATA_ARTIFACT_KEY] = m.artifact
        for key, value in fields.items():
            if key != kwargs_key and fits({**meta, key: value}):
                meta[key] = value
        if meta:
            body["metadata"] = meta
        out.append(body)
    return out


def _invalid_wire_calls(invalid: Sequence[Any]) -> list[dict[str, Any]]:
    """An AI message's `invalid_tool_calls` as the chat form's calls, after its valid
    ones, as langchain-openai sends them (`_lc_invalid_tool_call_to_openai_tool_call`):
    the arguments the text the model wrote (missing: the empty text). A call the chat
    form cannot carry is left out of them: without an id (no tool message can answer
    it) or a name, or either longer than the store takes (`CALL_ID_MAX_CHARS`,
    `TOOL_NAME_MAX_CHARS`: it would refuse the whole batch). Every invalid call is kept
    in the row's metadata (`METADATA_INVALID_CALLS_KEY`) and comes back on read."""
    return [{"type": "function", "id": c["id"], "function": {"name": c["name"], "arguments": c.get("args") or ""}}
            for c in invalid
            if _within(c.get("id"), CALL_ID_MAX_CHARS) and _within(c.get("name"), TOOL_NAME_MAX_CHARS)]


def _within(text: object, max_chars: int) -> bool:
    return isinstance(text, str) and 0 < len(text) <= max_chars


def _storable_parts(body: dict[str, Any]) -> dict[str, Any] | None:
    """`body` without the content blocks a chat message of its role cannot carry (an AI
    message's reasoning, thinking or server tool blocks, a tool result's image), which
    LangChain's conversion passes through and the store refuses; None when it has none.
    Parts of the Responses API's types are left: such a message is stored as a Responses
    item. With no part left the content is the empty text."""
    role, content = body.get("role"), body.get("content")
    if not isinstance(role, str) or role not in CHAT_PART_TYPES or not isinstance(content, list):
        return None
    allowed = CHAT_PART_TYPES[role] | RESPONSES_PART_TYPES
    kept = [p for p in content if not (isinstance(p, dict) and isinstance(p.get("type"), str)
                                       and p["type"] not in allowed)]
    if len(kept) == len(content):
        return None
    return {**body, "content": kept or ""}


def append_messages(memory: MemoryLike, conversation_id: str, messages: Sequence[BaseMessage]) -> list[int]:
    """Append `messages` (`to_openai`); returns their positions. In one batch (all or
    nothing) where one append takes them, else in chunks (`_append_chunked`). An
    artifact, or the LangChain content kept beside blocks the chat form cannot carry, is
    left out where the store's metadata limit refuses it: checked before sending where
    this process knows the limit (`_common.metadata_limit`), else on the store's refusal
    of that message's metadata (nothing written), after which the batch is sent again."""
    # asked only for a message that needs it: a plain batch never asks a client's server
    bodies = to_openai(messages, max_metadata_bytes=lambda: metadata_limit(memory))
    chunks = append_chunks(memory, bodies)
    if len(chunks) == 1:
        return append_bodies(memory, conversation_id, chunks[0])
    return _append_chunked(memory, conversation_id, chunks)


def _append_chunked(memory: MemoryLike, conversation_id: str, chunks: list[list[dict[str, Any]]]) -> list[int]:
    """Append `chunks` in order (`_common.append_chunked`: each chunk after the first
    conditional on where the previous one left the log, `HistoryErased` on an erasure
    between two), each mended as one batch is (`_mended`)."""
    return append_chunked(memory, conversation_id, chunks, mend=_mended)


def checked(memory: MemoryLike, chunks: list[list[dict[str, Any]]], fields: Sequence[str]) -> list[list[dict[str, Any]]]:
    """`chunks` of one write, every message checked (and mended, `_mended`) as its append
    will check it before any is written (`_common.checked_chunks`), a refusal named as
    `fields` names the message: what a write in chunks of its own (the LangGraph sync's)
    checks first."""
    return checked_chunks(memory, chunks, mend=_mended, fields=fields)


def append_bodies(memory: MemoryLike, conversation_id: str, bodies: list[dict[str, Any]], *,
                  expect_position: int | None = None) -> list[int]:
    """Append `bodies` (`to_openai`'s, or rows read back) in one batch; returns their
    positions. A body's artifact or kept LangChain content the store refuses for its
    size is left out of it (nothing written), and the batch sent again.
    `expect_position`: written only if the conversation goes on there, else
    `PositionMismatch` and nothing written (`append_outcome`: a store in this process, or
    a `Client` of a server that takes it, `conditional_appends`)."""
    if expect_position is None:
        return _mended(bodies, lambda b: memory.append_many(conversation_id, b))
    if not conditional_appends(memory):
        raise ValidationError("expect_position", f"a conditional append needs a Memory, a NamespacedMemory "
                              f"or a Client of a server that takes it, got {type(memory).__name__}")
    return _mended(bodies, lambda b: memory.append_outcome(conversation_id, b, expect_position=expect_position)
                   ).positions


def _mended(bodies: list[dict[str, Any]], write: Callable[[list[dict[str, Any]]], _T]) -> _T:
    """`write(bodies)`, where a body's artifact or kept LangChain content the store refuses
    for its size (nothing written) is left out of it and the batch written again."""
    bodies = list(bodies)
    while True:
        try:
            return write(bodies)
        except ValidationError as exc:
            refused = _optional_refused(exc, bodies)
            if refused is None:
                raise
            i, key = refused
            meta = {k: v for k, v in bodies[i]["metadata"].items() if k != key}
            bodies[i] = {k: v for k, v in bodies[i].items() if k != "metadata"} | ({"metadata": meta} if meta else {})


def _optional_refused(exc: ValidationError, bodies: list[dict[str, Any]]) -> tuple[int, str] | None:
    """The batch index whose metadata `exc` refused for its size and the optional key to
    leave out of it (`MENDED_KEYS`, in order), when it holds one (None:
    a refusal leaving it out cannot mend, or one a local Memory raises too, such as
    nesting too deep: raised as it is)."""
    if not isinstance(exc, LimitExceeded):
        return None
    match = _REFUSED_METADATA.fullmatch(exc.field)
    if match is None or not int(match.group(1)) < len(bodies):
        return None
    i = int(match.group(1))
    meta = bodies[i].get("metadata") or {}
    key = next((k for k in MENDED_KEYS if k in meta), None)
    return None if key is None else (i, key)


def to_langchain(bodies: list[dict[str, Any]], ids: Sequence[str | None] | None = None, *,
                 metadata: Sequence[dict[str, Any] | None] | None = None) -> list[BaseMessage]:
    """Bodies of any format as LangChain messages (Responses items through `to_chat`);
    `ids` (or `metadata`, the rows' metadata), one per body, restore LangChain ids, and
    `metadata` a tool message's status and artifact, where a body maps to one message."""
    return _converted(bodies, ids, metadata=metadata)[0]


def _converted(bodies: list[dict[str, Any]], ids: Sequence[str | None] | None = None, *,
               metadata: Sequence[dict[str, Any] | None] | None = None,
               fields_only: bool = False) -> tuple[list[BaseMessage], list[int]]:
    """`to_langchain`'s messages, and for each body how many of them hold what the
    bodies through it convert to (a body that converts to none, or to a call joined to
    the message before, adds none). `fields_only`: of `metadata` only the message's own
    metadata is put back (`_restored_fields`: a context's, whose text is as planned)."""
    out: list[BaseMessage] = []
    ends: list[int] = []
    last: dict[str, Any] | None = None  # the chat form of out[-1], as `to_chat` sees it
    for i, b in enumerate(bodies):
        if is_control(b):
            ends.append(len(out))
            continue
        chats = to_chat([b])
        msgs: list[BaseMessage] = []
        for c in chats:
            msgs.extend(_to_message(_function_calls_only(c)))
        if len(msgs) == 1:
            meta = (metadata[i] if metadata is not None else None) or {}
            lc_id = ids[i] if ids is not None else meta.get(METADATA_ID_KEY)
            if fields_only:
                update = _restored_fields(msgs[0], meta)
                msgs[0] = msgs[0].model_copy(update=update) if update else msgs[0]
            else:
                msgs[0] = _restore(msgs[0], b, meta, lc_id)
        # a call item of the turn before goes on its AI message (`last` still joins after it)
        joined = (b.get("type") in RESPONSES_CALL_TYPES and len(msgs) == 1 and last is not None
                  and joins_turn(last) and _join_call(out, msgs[0]))
        if (not joined and b.get("type") == "message" and b.get("role") == "assistant" and len(msgs) == 1
                and last is not None and last.get("role") == "assistant" and last.get("tool_calls")
                and _join_text(out, msgs[0])):
            # a Responses reply's text after its calls, one round (`tiers.formats.joins_round`):
            # its results must follow the calls' message, so the text joins it as `to_chat`
            # joins it (`last` keeps its calls: a call item after it still joins)
            joined = True
        if not joined:
            out.extend(msgs)
            if chats:
                last = chats[-1]
        ends.append(len(out))
    return out, ends


def context_input(ctx: Context, cache_marks: int = 0, system_messages: str | None = "as_is", *,
                  memory: MemoryLike | None = None) -> list[BaseMessage]:
    """A planned context as a LangChain model's input: its messages (`to_langchain`;
    with `memory`, the one it came from, each with the message's own metadata its row
    kept, `_shown_metadata`: an AI message's `additional_kwargs` a provider may need
    back, such as Gemini's thought signatures of the calls it answers in this turn),
    each tool call id once (`unique_call_ids`), and with `cache_marks` (0 to
    `MAX_BREAKPOINTS`) at most that many Anthropic `cache_control` marks where the plan's
    breakpoints say, placed as `to_anthropic` places them (`chosen_breakpoints`: the end
    of the stable prefix first, one per block, never on a blank block or a prefill's
    trimmed text). A mark is a content block's `cache_control` key, which
    langchain-anthropic's `ChatAnthropic` sends with the block: a marked message's
    content becomes a list of blocks (a string one text block), the marked block a copy
    with the key; every other message is the one `to_langchain` gives. What can carry a
    mark is what `ChatAnthropic` keeps it on (`_MARKABLE_PART_TYPES`): a non-blank text
    block of any message (a tool message's, recent langchain-anthropic moves to its
    `tool_result` block). It
    rebuilds an AI message's `tool_use` blocks from its `tool_calls` and an `image_url`
    part as an image block, both without the key, so a breakpoint ending on one marks
    the last text block before it (an AI message's text, which it sends before the
    calls; else the message before). An AI message ending the context is prefill,
    which the API refuses with trailing whitespace and `to_anthropic` sends cut: its
    text block with trailing whitespace carries no mark either (the next call sends it
    uncut, after a message of its own). `system_messages="in_turn"`: then sent as
    `to_anthropic` sends them (`in_turn`), marks and all (None: "as_is")."""
    check_cache_marks(cache_marks)
    check_system_messages(system_messages)
    shown = _shown_metadata(ctx, check_memory(memory)) if memory is not None else None
    messages, ends = _converted(list(ctx.messages), metadata=shown, fields_only=True)
    messages = unique_call_ids(messages)
    if cache_marks:
        messages = _with_marks(ctx, messages, ends, cache_marks)
    return in_turn(messages) if system_messages == "in_turn" else messages


def _shown_metadata(ctx: Context, memory: MemoryLike) -> list[dict[str, Any] | None]:
    """For each message of `ctx`, the metadata of the row of its conversation's tail it
    shows (None: none found), matched as `to_anthropic` matches them
    (`anthropic._match_key`: a call's id, a result's, else the chat form; the n-th
    message of a key the n-th row of it shown, in log order). Only the rows the plan's
    tail items show are read (in the namespace the context was planned in)."""
    out: list[dict[str, Any] | None] = [None] * len(ctx.messages)
    memory = in_context_namespace(memory, ctx)
    conv = ctx.plan.conversation_id
    shown = {p for it in ctx.plan.items if it.slice == "tail" and it.conversation_id == conv for p in it.positions}
    if not shown:
        return out
    lo = min(shown)
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    # [] for a conversation erased since the context was built
    for row in log_pages(memory, conv, after=lo - 1 if lo > 0 else None):
        chats = to_chat([row.body]) if row.position in shown else []
        if len(chats) == 1:
            rows.setdefault(_match_key(row.body, chats[0]), []).append(row.metadata or {})
    for i, m in enumerate(ctx.messages):
        chats = to_chat([m])
        found = rows.get(_match_key(chats[0], chats[0])) if len(chats) == 1 else None
        if found:
            out[i] = found.pop(0)
    return out


def _with_marks(ctx: Context, messages: list[BaseMessage], ends: list[int], cache_marks: int) -> list[BaseMessage]:
    """`messages` (`ctx`'s, `_converted`'s `ends`) with `cache_marks` marks (`context_input`)."""
    # the last block that can carry a mark of the messages through each one: (message, block
    # index in its content, or -1 for string content)
    through: list[tuple[int, int] | None] = []
    end: tuple[int, int] | None = None
    for k, m in enumerate(messages):
        spot = _markable_block(m, prefill=k == len(messages) - 1)
        end = (k, spot) if spot is not None else end
        through.append(end)
    _found, marked = chosen_breakpoints(ctx.plan.breakpoints, [through[e - 1] if e else None for e in ends],
                                        cache_marks)
    for k, spot in marked:
        messages[k] = _marked(messages[k], spot)
    return messages


# how a LangChain adapter sends the context's system messages (`in_turn`): as planned
# (OpenAI's chat takes a system message anywhere), or as `to_anthropic` sends them
SYSTEM_MESSAGE_FORMS = ("as_is", "in_turn")


def check_system_messages(system_messages: object) -> str | None:
    """`system_messages` checked: one of `SYSTEM_MESSAGE_FORMS`, or None (the adapters'
    default: chosen per call by the model it goes to, `system_messages_for`)."""
    if system_messages is not None and (not isinstance(system_messages, str)
                                        or system_messages not in SYSTEM_MESSAGE_FORMS):
        raise ValidationError("system_messages", f"must be None (chosen per call by the model: in_turn for an "
                                                 f"Anthropic chat model such as ChatAnthropic) or one of "
                                                 f"{', '.join(SYSTEM_MESSAGE_FORMS)}, got {system_messages!r}")
    return system_messages


# ChatAnthropic's `_llm_type`, which its subclasses reaching Claude another way extend
# ("anthropic-chat-vertexai"); each sends its input through langchain-anthropic's
# `_format_messages`, which refuses a system message after the conversation began
ANTHROPIC_LLM_TYPE = "anthropic-chat"
ANTHROPIC_PACKAGE = "langchain_anthropic"  # a chat model class of it (or built on one)
# `init_chat_model`'s providers whose chat model is ChatAnthropic or built on it
ANTHROPIC_PROVIDERS = frozenset({"anthropic", "anthropic_bedrock", "bedrock_mantle_anthropic",
                                 "google_anthropic_vertex"})
ANTHROPIC_MODEL_PREFIX = "claude"  # `init_chat_model` infers provider "anthropic" from such a name
MAX_MODEL_WRAPS = 16  # bindings, sequences, configurables unwrapped at most (a cycle ends there)


def anthropic_chat(model: object, config: RunnableConfig | None = None) -> bool | None:
    """Whether `model` (as a run of `config` calls it) is an Anthropic chat model
    (langchain-anthropic's `ChatAnthropic`, a subclass, or one of `ANTHROPIC_LLM_TYPE`);
    None where it cannot be told. Wrappers are resolved to the chat model they call: a
    `RunnableBinding` (`model.bind_tools(...)`, `.bind(...)`, `.with_config(...)`), a
    `RunnableSequence` (`prompt | model`: its first model, as `create_react_agent`
    reads one), a `configurable_fields` / `configurable_alternatives` model (the one
    `config` picks), `init_chat_model`'s configurable model (its provider, as it infers
    it from the defaults and `config`, without making the model). langchain-anthropic
    need not be installed: the class is read by its `_llm_type` and module."""
    for _ in range(MAX_MODEL_WRAPS):
        if isinstance(model, BaseChatModel):
            return _anthropic_class(model)
        if isinstance(model, RunnableBinding):
            model = model.bound
        elif isinstance(model, DynamicRunnable):
            model = model.prepare(config)[0]
        elif isinstance(model, RunnableSequence):
            model = next((step for step in model.steps if not _plain_step(step)), None)
        elif callable(getattr(model, "_model_params", None)) and isinstance(getattr(model, "_default_config", None),
                                                                             dict):
            return _anthropic_provider(model, config)
        else:
            return None
    return None


def _anthropic_class(model: Any) -> bool:
    llm_type = model._llm_type
    return (isinstance(llm_type, str) and llm_type.startswith(ANTHROPIC_LLM_TYPE)) or any(
        c.__module__.split(".")[0] == ANTHROPIC_PACKAGE for c in type(model).__mro__)


def _plain_step(step: object) -> bool:
    """A step of a sequence that is no model (a prompt, a parser, a function)."""
    return not (isinstance(step, (BaseLanguageModel, RunnableBinding, RunnableSequence, DynamicRunnable))
                or callable(getattr(step, "_model_params", None)))


def _anthropic_provider(model: Any, config: RunnableConfig | None) -> bool | None:
    """`init_chat_model`'s configurable model (`langchain.chat_models.base._ConfigurableModel`):
    whether the provider it would make the model of is an Anthropic one, read as it reads
    it (an explicit `model_provider`, a "provider:" prefix, else a name's "claude")."""
    params = {**model._default_config, **model._model_params(config)}
    provider, name = params.get("model_provider"), params.get("model")
    if isinstance(provider, str) and provider:
        return provider in ANTHROPIC_PROVIDERS
    if not isinstance(name, str) or not name:
        return None  # the model is named at call time, and this call names none
    head, colon, _ = name.partition(":")
    if colon and head in ANTHROPIC_PROVIDERS:
        return True
    return name.lower().startswith(ANTHROPIC_MODEL_PREFIX)


def system_messages_for(model: object, config: RunnableConfig | None = None) -> str:
    """The `system_messages` form for a call to `model` (`anthropic_chat`): "in_turn" for
    an Anthropic chat model, "as_is" for any other and where it cannot be told."""
    return "in_turn" if anthropic_chat(model, config) else "as_is"


def in_turn(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """A context's LangChain messages as `to_anthropic` sends them, for a model that takes
    system text only ahead of the conversation: langchain-anthropic's `ChatAnthropic`
    raises "Received multiple non-consecutive system messages" on a system message after
    the conversation began when one opens it (and moves it into `system`, changing the
    start of every request and so the prompt cache, when none does); chat templates
    refuse one. The system messages the context opens with are one `SystemMessage` (a
    text block per message, in order, as ChatAnthropic sends a run of them); a system
    message after the conversation began (the memory blocks placed between the turns:
    retrieved turns before the latest message, `system_messages="before_latest"`'s block)
    is a `HumanMessage` of its content, which ChatAnthropic sends as text blocks of the
    user turn it sits in (a tool result's turn: after the results), where the next
    call's context holds it too; an opening AI message (the tail starts with a reply)
    gets a `HumanMessage` of `CONTINUED_TEXT` first, as does a context of system messages
    alone (the Messages API refuses an assistant opening and no message). Cache marks on
    content blocks stay on their blocks."""
    k = next((i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)), len(messages))
    head = list(messages[:k])
    out: list[BaseMessage] = []
    parts = [part for m in head for part in _blocks(m.content)]
    if len(head) == 1:
        out.append(head[0])
    elif parts:
        out.append(SystemMessage(parts))
    # an empty one would be an empty user message (the API refuses one)
    rest = [HumanMessage(m.content) if isinstance(m, SystemMessage) else m for m in messages[k:]
            if not (isinstance(m, SystemMessage) and not m.content)]
    # ChatAnthropic leaves out an empty AI message before the last: the one after it opens
    sent = [m for m in rest if not (isinstance(m, AIMessage) and not m.content and not m.tool_calls)]
    if not sent or isinstance(sent[0], AIMessage):
        out.append(HumanMessage(CONTINUED_TEXT))
    return out + rest


def _blocks(content: str | list[str | dict[str, Any]]) -> list[str | dict[str, Any]]:
    """A message's content as content blocks (a string one text block; an empty one none)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [{"type": "text", "text": p} if isinstance(p, str) else p for p in content]


def check_cache_marks(cache_marks: object) -> int:
    """`cache_marks` checked: an int within 0..`MAX_BREAKPOINTS` (0: no marks, for every
    provider but Anthropic, which caches by them)."""
    return check_int(cache_marks, "cache_marks", 0, MAX_BREAKPOINTS,
                     "(Anthropic's limit on cache_control marks in a request; 0: none)")


# the content blocks ChatAnthropic sends with their `cache_control` (text; a string content
# is one text block); it rebuilds the others tiermem's contexts hold (`image_url`) without it
_MARKABLE_PART_TYPES = frozenset({"text"})


def _markable_block(m: BaseMessage, *, prefill: bool) -> int | None:
    """The index of `m`'s last content block that can carry a mark as ChatAnthropic sends
    it (-1: its string content), None where none can; `prefill`: `m` ends the context,
    so an AI message's trailing text is sent as prefill (`context_input`)."""
    trims = prefill and isinstance(m, AIMessage) and not m.tool_calls
    if isinstance(m.content, str):
        return -1 if m.content.strip() and not (trims and m.content != m.content.rstrip()) else None
    for k in range(len(m.content) - 1, -1, -1):
        part = m.content[k]
        text: object = part if isinstance(part, str) else (
            part.get("text") if part.get("type") in _MARKABLE_PART_TYPES else None)
        if not isinstance(text, str) or not text.strip():
            continue  # blank text ChatAnthropic leaves out; a block it rebuilds without the mark
        if trims:
            trims = False  # only the last block sent is cut
            if text != text.rstrip():
                continue
        return k
    return None


def _marked(m: BaseMessage, spot: int) -> BaseMessage:
    """`m` (a copy) with an ephemeral `cache_control` on its content block `spot` (-1: its
    string content, made one text block)."""
    mark = {"cache_control": dict(EPHEMERAL)}
    if spot < 0:
        return m.model_copy(update={"content": [{"type": "text", "text": m.content, **mark}]})
    content = list(m.content)
    part = content[spot]
    content[spot] = {"type": "text", "text": part, **mark} if isinstance(part, str) else {**part, **mark}
    return m.model_copy(update={"content": content})


def _to_message(chat: dict[str, Any]) -> list[BaseMessage]:
    """One chat message (wire form) as a LangChain message. Wire form leaves out null
    fields, and LangChain refuses a dict without `content` (a tool-calling or
    refusal-only reply has none) and raises on call arguments that are not JSON: those
    calls become `invalid_tool_calls`, as LangChain's own parsers make them."""
    from langchain_core.messages import AIMessage
    from langchain_core.messages.tool import invalid_tool_call

    chat = {**chat, "content": chat.get("content") or ""}
    bad: list[Any] = []
    if chat.get("role") == "assistant" and chat.get("tool_calls"):
        good: list[dict[str, Any]] = []
        for c in chat["tool_calls"]:
            fn = c.get("function") or {}
            error: str | None = None
            try:
                args = json.loads(fn.get("arguments") or "{}", strict=False)
            except (ValueError, RecursionError) as exc:
                error = f"arguments are not valid JSON: {exc}"
            else:
                if not isinstance(args, dict):
                    error = "arguments are not a JSON object"
            if error is None:
                # no arguments are none ({}), which LangChain's conversion would raise on
                good.append(c if fn.get("arguments") else {**c, "function": {**fn, "arguments": "{}"}})
            else:
                bad.append(invalid_tool_call(name=fn.get("name"), args=fn.get("arguments"), id=c.get("id"),
                                             error=error))
        chat["tool_calls"] = good
    msg = convert_to_messages([chat])[0]
    if bad and isinstance(msg, AIMessage):
        msg = msg.model_copy(update={"invalid_tool_calls": [*msg.invalid_tool_calls, *bad]})
    return [msg]


def _restore(msg: BaseMessage, body: dict[str, Any], meta: dict[str, Any], lc_id: str | None) -> BaseMessage:
    """Put back what the OpenAI wire form leaves out: the id, the content where blocks
    had to be left out of the stored form, a tool message's name (stored in the body,
    not sent), status and artifact (in metadata), an AI message's invalid calls (in
    metadata, `_kept_invalid_calls`), the message's own metadata (`_restored_fields`)."""
    from langchain_core.messages import AIMessage, ToolMessage

    update: dict[str, Any] = _restored_fields(msg, meta)
    if lc_id:
        update["id"] = lc_id
    if isinstance(meta.get(METADATA_CONTENT_KEY), str | list):
        update["content"] = meta[METADATA_CONTENT_KEY]
    if isinstance(msg, AIMessage):
        update |= _kept_invalid_calls(body, meta)
    if isinstance(msg, ToolMessage):
        if isinstance(body.get("name"), str) and body.get("role") == "tool":
            update["name"] = body["name"]
        if METADATA_ARTIFACT_KEY in meta:
            update["artifact"] = meta[METADATA_ARTIFACT_KEY]
    return msg.model_copy(update=update) if update else msg


def _restored_fields(msg: BaseMessage, meta: dict[str, Any]) -> dict[str, Any]:
    """The message fields `to_openai` kept in the row's metadata (`METADATA_FIELD_KEYS`),
    as an update of `msg`: `additional_kwargs` over those the stored form gives back,
    `response_metadata` whole, `usage_metadata` where `msg` is an AI message and the
    row's is one LangChain takes (another writer's metadata of the key is left), and a
    tool message's status: a context's tool error must reach the model as an error
    (ChatAnthropic's `is_error`), not as the success a ToolMessage defaults to. Copies:
    a message changed in place leaves the row read unchanged."""
    from langchain_core.messages import AIMessage, ToolMessage

    update: dict[str, Any] = {}
    if isinstance(msg, ToolMessage) and meta.get(METADATA_STATUS_KEY) in ("success", "error"):
        update["status"] = meta[METADATA_STATUS_KEY]
    for field, key in METADATA_FIELD_KEYS.items():
        value = copy.deepcopy(meta.get(key))
        if not isinstance(value, dict) or not value or not hasattr(msg, field):
            continue
        if field == "additional_kwargs":
            value = {**msg.additional_kwargs, **value}
        elif field == "usage_metadata" and not (isinstance(msg, AIMessage) and _usage(value)):
            continue  # LangChain refuses a usage without its three counts
        update[field] = value
    return update


def _usage(value: dict[str, Any]) -> bool:
    """Whether `value` is a `usage_metadata` LangChain takes (its three counts ints)."""
    return all(isinstance(value.get(k), int) and not isinstance(value.get(k), bool)
               for k in ("input_tokens", "output_tokens", "total_tokens"))


def _kept_invalid_calls(body: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """An AI message's calls as `to_openai` stored them, where its row kept the
    message's `invalid_tool_calls` (`METADATA_INVALID_CALLS_KEY`): the body's last calls
    are those the chat form carries (`_invalid_wire_calls`), which go back to
    `invalid_tool_calls` whole with the others (the error text, a call it could not
    carry: no id); the calls before them are its valid ones.
    Empty (the calls as parsed: arguments that are not JSON make an invalid call) where
    the row kept none, the key is not such a list, or the body's calls do not end with
    its calls' ids (another writer's row)."""
    from langchain_core.messages.tool import invalid_tool_call

    kept = meta.get(METADATA_INVALID_CALLS_KEY)
    calls = body.get("tool_calls") if body.get("role") == "assistant" else None
    if not isinstance(kept, list) or not all(
            isinstance(c, dict) and all(isinstance(c.get(k), str | None) for k in INVALID_CALL_FIELDS)
            for c in kept):
        return {}
    sent = [c["id"] for c in _invalid_wire_calls(kept)]
    calls = calls if isinstance(calls, list) else []
    if len(sent) > len(calls) or [c.get("id") if isinstance(c, dict) else None
                                  for c in calls[len(calls) - len(sent):]] != sent:
        return {}
    valid = _to_message({**body, "tool_calls": calls[:len(calls) - len(sent)]})[0]
    return {"tool_calls": getattr(valid, "tool_calls", []),
            "invalid_tool_calls": [*getattr(valid, "invalid_tool_calls", []),
                                   *(invalid_tool_call(**{k: c.get(k) for k in INVALID_CALL_FIELDS})
                                     for c in kept)]}


def _function_calls_only(body: dict[str, Any]) -> dict[str, Any]:
    """LangChain tool calls are functions with JSON arguments: a custom tool call (free
    text input) becomes one whose arguments are `{"input": ...}`."""
    calls = body.get("tool_calls")
    if not calls or all(c.get("type", "function") == "function" for c in calls):
        return body
    fixed = [c if c.get("type", "function") == "function" else
             {"id": c["id"], "type": "function", "function": {
                 "name": (c.get("custom") or {}).get("name", ""),
                 "arguments": json.dumps({"input": (c.get("custom") or {}).get("input", "")})}}
             for c in calls]
    return {**body, "tool_calls": fixed}


def _join_call(out: list[BaseMessage], call: BaseMessage) -> bool:
    """Put call item `call`'s calls on the AI message `out` ends with; False when it does
    not end with one. Responses items convert one call at a time, and a turn's text is an
    item of its own: a call item right after an AI message with calls or text is a call of
    its turn (`tiers.formats.joins_turn`, as `to_chat` groups them), one AI message as a
    chat model expects. Only call items join: two chat messages with calls are two rounds
    (the first's calls abandoned), kept apart with their ids."""
    from langchain_core.messages import AIMessage

    prev = out[-1] if out else None
    if not (isinstance(call, AIMessage) and isinstance(prev, AIMessage)):
        return False
    out[-1] = prev.model_copy(update={"tool_calls": [*prev.tool_calls, *call.tool_calls],
                                      "invalid_tool_calls": [*prev.invalid_tool_calls, *call.invalid_tool_calls]})
    return True


def _join_text(out: list[BaseMessage], text: BaseMessage) -> bool:
    """Put AI message `text`'s content on the AI message with calls `out` ends with, after
    its own (`tiers.formats.to_chat`: a Responses reply `[function_call, message]` is one
    round, and a chat model wants the calls' results right after their message: Chat
    Completions refuses a message between, Anthropic two assistant messages in a row);
    False when `out` does not end with one. String contents join as `to_chat` joins them
    (`tiers.formats.join_reply_text`); else as lists of blocks."""
    from langchain_core.messages import AIMessage

    prev = out[-1] if out else None
    if not (isinstance(text, AIMessage) and isinstance(prev, AIMessage) and prev.tool_calls):
        return False
    before, after = prev.content, text.content
    if isinstance(before, str) and isinstance(after, str):
        content: str | list[str | dict[str, Any]] = join_reply_text(before, after)
    else:
        content = [*_blocks(before), *_blocks(after)]
    out[-1] = prev.model_copy(update={"content": content})
    return True


def unique_call_ids(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """`messages` as a model is sent them: each tool call id once, each tool message
    naming its call's (`tiers.formats.SentCallIds`, "Ids sent"; every AI message starts a
    round). A server that numbers its calls per reply (`call_0` every round) leaves one id
    in several rounds, which the integrations send as it is (`ChatAnthropic`: "tool_use ids
    must be unique"; `ChatOpenAI`'s Responses input: the later call left out and two
    outputs of one `call_id`; a strict Chat Completions server: "Duplicate value for
    'tool_call_id'"). A repeat goes out with the first free suffix (`call_0_2`), its
    results with it, ids in order, so an earlier id stays as it was as the history
    grows. An AI message's calls are renamed in the order the integrations send them
    (`tool_calls`, then `invalid_tool_calls`), and a content block that is one of its
    calls (`CALL_BLOCK_ID_KEYS`) with it. Messages whose ids change are copies."""
    from langchain_core.messages import AIMessage, ToolMessage

    ids = SentCallIds()
    out: list[BaseMessage] = []
    for m in messages:
        if isinstance(m, AIMessage):
            ids.round()
            m = calls_renamed(m, ids)
        elif isinstance(m, ToolMessage):
            rid = ids.result(m.tool_call_id)
            if rid is not None and rid != m.tool_call_id:
                m = m.model_copy(update={"tool_call_id": rid})
        out.append(m)
    return out


def calls_renamed(m: AIMessage, ids: SentCallIds) -> AIMessage:
    """`m` with each call id the one `ids` gives it (`SentCallIds.call`), in the order the
    integrations send them (`tool_calls`, then `invalid_tool_calls`), and a content block
    that is one of its calls with it; `m` itself when no id changes. The one renaming
    `unique_call_ids` (a history as sent) and the LangGraph hooks' `fresh_call_ids` (a
    reply's repeats of the state's ids) share."""
    renamed: dict[str, list[str]] = {}  # id as written -> ids given, in order
    update: dict[str, Any] = {}
    for field in ("tool_calls", "invalid_tool_calls"):
        calls = [dict(c) for c in getattr(m, field)]
        for c in calls:
            if isinstance(c.get("id"), str):
                given = ids.call(c["id"])
                renamed.setdefault(c["id"], []).append(given)
                c["id"] = given
        if calls != getattr(m, field):
            update[field] = calls
    if not update:
        return m
    return m.model_copy(update={**update, "content": renamed_call_blocks(m.content, renamed)})


def renamed_call_blocks(content: str | list[Any], renamed: dict[str, list[str]]) -> str | list[Any]:
    """`content` with each call block's id the one its call goes out under (`renamed`: an
    id as stored, the ids its calls are sent under, in order)."""
    if isinstance(content, str):
        return content
    left = {k: list(v) for k, v in renamed.items()}
    out: list[Any] = []
    for b in content:
        kind = b.get("type") if isinstance(b, dict) else None
        key = CALL_BLOCK_ID_KEYS.get(kind) if isinstance(kind, str) else None
        cid = b.get(key) if key is not None else None
        if key is not None and isinstance(cid, str) and left.get(cid):
            b = {**b, key: left[cid].pop(0)}
        out.append(b)
    return out


class TiermemChatMessageHistory(BaseChatMessageHistory):
    """A LangChain `BaseChatMessageHistory` whose messages live in a tiermem conversation."""

    def __init__(self, memory: MemoryLike, conversation_id: str) -> None:
        self.memory = check_memory(memory)
        self.conversation_id = conversation_id

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        # what RunnableWithMessageHistory gives the model: a repeated call id renamed
        # (the rows keep theirs)
        stored = visible(self.memory, self.conversation_id)
        return unique_call_ids(to_langchain([m.body for m in stored], metadata=[m.metadata for m in stored]))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        if messages:
            append_messages(self.memory, self.conversation_id, messages)

    def clear(self) -> None:
        clear(self.memory, self.conversation_id)
