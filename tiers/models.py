"""The message model: a body in any OpenAI format (`tiers.formats`) plus tiermem's envelope.

Validation happens here, at the edge, before anything touches storage: a refused
message raises `tiers.errors.ValidationError` naming the field and the limit, and
nothing is written; it quotes caller input within `tiers.errors.MAX_SHOWN_CHARS`
(`tiers.formats`, "Bounded echoes"), a key in pydantic's location too (`_model_error`).
The body is stored exactly as given (lossless: `history()` returns what went in), so a
dict key that is no string, at any depth of the body or the metadata, is refused naming
where (`check_keys`): JSON would store it as its text, another key;
unknown top-level fields are refused rather than silently dropped, because a dropped
field is data lost (the policy is in `tiers.formats`).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pydantic
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from tiermem.tiers.errors import LimitExceeded, ValidationError, field_error, plain_field, shown_key
from tiermem.tiers.formats import (
    MAX_ENVELOPE_BYTES,
    NAME_MAX_CHARS,
    OPAQUE_ITEM_TYPES,
    canonical_role,
    check_body,
    check_envelope,
    content_bytes,
    message_text,
    wire_body,
    without_tool_call_field,
    without_tool_call_index,
)
from tiermem.tiers.plain_json import (
    MAX_JSON_INT_DIGITS,
    NESTED_TOO_DEEP,
    check_int_digits,
    lone_surrogate,
    plain_deep,
    unencodable,
)

# the canonical roles the turn index keeps (tiers.formats.canonical_role)
Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
__all__ = ["MAX_ENVELOPE_BYTES", "MAX_JSON_DEPTH", "MAX_JSON_INT_DIGITS", "MAX_STORED_JSON_DEPTH", "NAME_MAX_CHARS", "ROLES", "Message", "StoredMessage", "canonical_role", "loads_stored", "message_text", "parse_message", "search_text",
           "speaker_name"]

# Ids become SQLite keys, Redis hash tags, URL path segments and file-free log lines: a
# conservative ASCII alphabet keeps all four safe (no control characters, no look-alike
# Unicode, no `/`, `{`, `}` or whitespace). The first character excludes `.` and `-` so
# that an id is never `..` or an option-looking string.
ID_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._:@-]*$")
# A conversation's internal key is its id, or (the id used before in the database: by
# another namespace, or by an erased incarnation) the id + KEY_SEPARATOR + a random
# suffix. `~` is outside ID_PATTERN, so a suffixed key is never an id and the id is
# everything before it (`key_name`).
KEY_SEPARATOR = "~"
SESSION_MAX_CHARS = 128
# The code points a session id may not hold (C0 controls and DEL), as its refusal names them
SESSION_CONTROL_CHARS = "U+0000-U+001F, U+007F"
MAX_TIMESTAMP = 253402300799.0  # 9999-12-31T23:59:59Z: the last instant a datetime can show
# Above any position a conversation can reach (SQLite and Postgres integers are 64-bit):
# the open end of a position range, and the largest position an API accepts.
MAX_POSITION = 2**62
# tokens: the largest context budget a call accepts (tiermem.memory re-exports it). Here,
# below both tiermem.memory and planner.plan, so that a stored plan's token bound is
# defined from it, not restated: memory imports the planner only when first used.
MAX_BUDGET_TOKENS = 2_000_000
# An append's idempotency key (`check_idempotency_key`): characters, at most. It travels in
# an HTTP header (the IETF draft "The Idempotency-Key HTTP Header Field"), so it is visible
# ASCII only; 255 holds a UUID, a ULID or a caller's own request id with room to spare.
MAX_IDEMPOTENCY_KEY_CHARS = 255
IDEMPOTENCY_KEY_PATTERN = re.compile(r"[\x21-\x7e]+")  # visible ASCII: no space, no control character
# Namespaces are hierarchical scopes: `acme`, `acme/alice`. Each segment is an id; a
# credential bound to `acme` may act on `acme` and every namespace below it.
NAMESPACE_SEPARATOR = "/"
MAX_NAMESPACE_DEPTH = 8
NAMESPACE_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._:@-]*(/[A-Za-z0-9_][A-Za-z0-9._:@-]*)*$")
# Levels of nesting a message may have as a JSON document: the message object is level 1,
# its fields' values (metadata included) nest below it, and no value may sit deeper than
# this. The one limit of every way in: `parse_message` (library, CLI, import) and the HTTP
# service's body guard (tiermem.service.guard, on the request body, which for an append is
# the message). Real messages nest under ~10 levels (a hosted-tool item's payload, a part's
# annotations); pydantic's serializer gives up past 255 levels and Python's json near
# 1,000, so a row stored deeper could not be served back (the service answered 500).
MAX_JSON_DEPTH = 32
# Levels of brackets ('{', '[') a stored row's text may have open at once (the message
# object is 1) for a read to decode it: `loads_stored`. Rows written before MAX_JSON_DEPTH
# held on every way in, or with SQL, can be deeper. `json.loads` recurses once per level
# on Python's recursion limit (1,000, shared with the caller's frames: a read of the
# service or the CLI decodes ~20 frames down, a test ~70), so past ~950 levels it raised
# a bare RecursionError that failed the whole read (the service answered 500). The bound
# keeps every row an older version was known to serve (900 levels of payload in a
# message: 901, tests/test_mcp_deep_rows.py) and leaves ~80 levels to the caller's stack;
# a deeper row is salvaged, the same on every read path whatever its stack.
MAX_STORED_JSON_DEPTH = 920
# The depth scan of `stored_json_deeper_than` reads the UTF-8 bytes of the text (no byte of
# a multi-byte sequence is ASCII): the bytes it keeps (quotes and brackets; every other one
# deleted by `bytes.translate`), and each kept byte's step: +1 opens a level, -1 closes one.
_QUOTE = ord('"')
_NOT_KEPT = bytes(b for b in range(256) if b not in b'"[]{}')
_BRACKET_STEP = np.zeros(256, dtype=np.int8)
_BRACKET_STEP[list(b"[{")] = 1
_BRACKET_STEP[list(b"]}")] = -1


def stored_json_deeper_than(text: str, limit: int) -> bool:
    """True when the JSON text `text` has more than `limit` brackets open at once, found
    without recursing and without decoding. A text with at most `limit` opening brackets
    in all (inside strings too: an upper bound) cannot be deeper, which `len` or two
    `str.count` calls tell (every ordinary row). Otherwise the brackets outside string
    tokens are summed in order with bytes methods and numpy: a scan in Python (a regex
    over the strings, or the brackets summed one by one) cost 3 times `json.loads` on a
    120 KB hosted-tool item, this one about a third (and about as much as `json.loads` on
    a 140 KB tool result of JSON text, whose every quote is escaped). On invalid JSON the
    answer may be either: `json.loads` refuses that text anyway, and before its first
    error it has opened no bracket the scan missed."""
    if len(text) <= limit or text.count("{") + text.count("[") <= limit:
        return False
    raw = text.encode("utf-8", "surrogatepass")
    if b"\\" in raw:
        # escapes out, pairs of backslashes first (`\\"` ends a string, `\"` does not), so
        # that every quote left delimits a string
        if b"\\\\" in raw:
            raw = raw.replace(b"\\\\", b"")
        raw = raw.replace(b'\\"', b"")
    marks = np.frombuffer(raw.translate(None, _NOT_KEPT), dtype=np.uint8)  # quotes and brackets, in order
    # a bracket after an odd number of quotes is inside a string: text, not nesting (the
    # count of quotes may wrap in uint8: its parity does not)
    inside = np.cumsum(marks == _QUOTE, dtype=np.uint8) & 1
    steps = np.where(inside == 0, _BRACKET_STEP[marks], np.int8(0))
    # int32: a body is far below 2**31 bytes
    return bool(steps.size) and int(np.cumsum(steps, dtype=np.int32).max()) > limit


def loads_stored(text: str | bytes) -> Any:
    """Decode a stored row's JSON text (a message body, its metadata; also a hot-tier
    payload): `json.loads`, except that a text nested deeper than MAX_STORED_JSON_DEPTH
    raises ValueError, as undecodable text does, so that every reader salvages the row
    (DESIGN invariant 8) instead of meeting a RecursionError. Anything else that is not
    text raises TypeError, as `json.loads` does."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")  # UnicodeDecodeError is a ValueError
    # `len` first, here: most rows are shorter than the bound, and then cost no call
    if (isinstance(text, str) and len(text) > MAX_STORED_JSON_DEPTH
            and stored_json_deeper_than(text, MAX_STORED_JSON_DEPTH)):
        raise ValueError(f"nested deeper than {MAX_STORED_JSON_DEPTH} levels, the most a stored row is decoded at")
    try:
        return json.loads(text)
    except RecursionError:
        # within the bound but under a caller deeper than any tiermem's: salvaged the same
        raise ValueError(f"nested too deeply to decode here (at most {MAX_STORED_JSON_DEPTH} levels)") from None


def _bounded_string(value: object, field: str, max_chars: int) -> str:
    """The checks every identifier shares: a non-empty string of at most `max_chars`."""
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__}")
    if not value:
        raise ValidationError(field, "must not be empty")
    if len(value) > max_chars:
        raise LimitExceeded(field, len(value), max_chars, unit="characters")
    return value


def validate_id(value: object, field: str, max_chars: int) -> str:
    value = _bounded_string(value, field, max_chars)
    if not ID_PATTERN.fullmatch(value):  # match() would let a trailing newline through ($)
        raise ValidationError(
            field, "may contain only ASCII letters, digits and . _ : @ - (and not start with . or -)"
        )
    return value


# A fork made without `new_id` is named `<parent>.fork-<hex>` (`fork_id`): at most
# FORK_ID_PARENT_CHARS of the parent's id, then FORK_ID_HEX random hex digits (48 bits: n
# forks of one parent hold two equal names with probability about n^2 / 2^49, ~2e-9 at
# 1,000; a name taken is refused, never shared). The whole id fits the limit the fork
# writes under (`max_id_chars`, as every id a conversation is created under): the parent's
# part is cut to leave room for the suffix, and under a limit too small for even one of its
# characters beside it (8..18) the id is the random digits alone (8..11: `max_chars` of them).
FORK_ID_HEX = 12
FORK_ID_MARK = ".fork-"
FORK_ID_PARENT_CHARS = 80
# characters: the limit a store's fork names under when its caller gives none (tiermem.config's
# default max_id_chars; `Memory.fork` passes its config's)
DEFAULT_FORK_MAX_ID_CHARS = 128


def fork_id(parent_name: str, max_chars: int) -> str:
    """A new, random id for a fork of `parent_name`, of at most `max_chars` characters."""
    digits = uuid.uuid4().hex[:FORK_ID_HEX]  # the first 12 of a uuid4's hex are all random
    room = min(FORK_ID_PARENT_CHARS, max_chars - len(FORK_ID_MARK) - FORK_ID_HEX)
    if room < 1:  # no parent character fits beside the suffix, nor may an id start with "."
        return digits[:max_chars]
    return f"{parent_name[:room]}{FORK_ID_MARK}{digits}"


def validate_namespace(value: object, field: str, max_chars: int) -> str:
    """A namespace: one to `MAX_NAMESPACE_DEPTH` ids joined by `/`, at most `max_chars`."""
    value = _bounded_string(value, field, max_chars)
    if not NAMESPACE_PATTERN.fullmatch(value):
        raise ValidationError(
            field, "must be ids joined by '/' (each of ASCII letters, digits and . _ : @ -, "
            "not starting with . or -)"
        )
    if value.count(NAMESPACE_SEPARATOR) >= MAX_NAMESPACE_DEPTH:
        raise LimitExceeded(field, value.count(NAMESPACE_SEPARATOR) + 1, MAX_NAMESPACE_DEPTH, unit="levels")
    return value


def check_int(value: object, field: str, low: int, high: int, unit: str = "", *,
              what: str = "an integer") -> int:
    """An integer within low..high (not a bool, not a float); `unit` follows the range
    in the message ("tokens"), `what` names the kind ("an integer position")."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(field, f"must be {what} within {low}..{high}{f' {unit}' if unit else ''}")
    return value


def check_position(value: object, field: str, *, low: int = 0) -> int:
    """An integer position within low..MAX_POSITION (not a bool, not a float)."""
    return check_int(value, field, low, MAX_POSITION, what="an integer position")


def check_text(value: object, field: str, max_bytes: int) -> str:
    """A string of valid Unicode (no lone surrogates) of at most `max_bytes` in UTF-8."""
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValidationError(field, "is not valid Unicode (a lone UTF-16 surrogate)") from None
    if size > max_bytes:
        raise ValidationError(field, f"{size} bytes exceed the limit of {max_bytes} bytes")
    return value


def check_idempotency_key(value: object, field: str = "idempotency_key") -> str:
    """An append's idempotency key: a string of 1..MAX_IDEMPOTENCY_KEY_CHARS visible ASCII
    characters (0x21-0x7E: what an HTTP header carries unchanged). The client checks it
    with this too, before it sends anything."""
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__}")
    if not value:
        raise ValidationError(field, f"must not be empty (1..{MAX_IDEMPOTENCY_KEY_CHARS} characters)")
    if len(value) > MAX_IDEMPOTENCY_KEY_CHARS:
        raise LimitExceeded(field, len(value), MAX_IDEMPOTENCY_KEY_CHARS, unit="characters")
    if not IDEMPOTENCY_KEY_PATTERN.fullmatch(value):
        raise ValidationError(field, "may contain only visible ASCII characters (0x21-0x7E: no space, no control "
                              "character, nothing outside ASCII)")
    return value


class Fingerprint(bytes):
    """An append's fingerprint (recorded with its idempotency key), with `also`: the
    fingerprints an earlier release took of the same request, which a retry matches too
    (`tiers.dialect._replayed`): a retry spanning the upgrade replays instead of being
    refused as another request."""

    also: frozenset[bytes]

    def __new__(cls, digest: bytes, also: frozenset[bytes] = frozenset()) -> Fingerprint:
        out = super().__new__(cls, digest)
        out.also = also - {digest}
        return out


def _fingerprint_of(messages: Sequence[Message], sent: bool) -> bytes:
    rows = []
    for m in messages:
        body = m._sent_body if sent and m._sent_body is not None else m.body()
        row: dict[str, Any] = {"role": m.role, "body": body, "session_id": m.session_id, "metadata": m.metadata}
        if m.created_at is not None:
            row["created_at"] = m.created_at
        rows.append(row)
    text = json.dumps(rows, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).digest()


def append_fingerprint(messages: Sequence[Message]) -> Fingerprint:
    """sha256 of what an append asked to store, for its idempotency key: each message's
    role, body, session, metadata, and its created_at only where the caller gave one
    (`parse_message(..., stamp=False)` leaves a defaulted one None: "now" differs between
    a request and its retry). Canonical JSON (sorted keys), so a `Message` and the equal
    dict fingerprint alike; the batch's order counts. Where append dropped logprobs, `also`
    holds the fingerprint of the bodies as sent (`Message._sent_body`): what releases
    before 2fe5e0c recorded for the same request."""
    digest = _fingerprint_of(messages, sent=False)
    if all(m._sent_body is None for m in messages):
        return Fingerprint(digest)
    return Fingerprint(digest, frozenset({_fingerprint_of(messages, sent=True)}))


def check_summary(value: object, max_bytes: int) -> str:
    """A checkpoint's summary: `check_text`, not blank, and without NUL."""
    summary = check_text(value, "summary", max_bytes)
    if not summary.strip():
        raise ValidationError("summary", "must be a non-empty string")
    if "\x00" in summary:
        # stored as text, not JSON: PostgreSQL refuses NUL in text, so both engines do
        raise ValidationError("summary", "must not contain NUL (U+0000) characters")
    return summary


def key_name(key: str) -> str:
    """The id a conversation key was issued for. What a caller is told names this, never
    the key: a suffix says the id was used before, perhaps in another namespace."""
    return key.split(KEY_SEPARATOR, 1)[0]


def namespace_within(namespace: str, prefix: str) -> bool:
    """True when `namespace` is `prefix` or below it (`acme/alice` is within `acme`,
    `acme2` is not)."""
    return namespace == prefix or namespace.startswith(prefix + NAMESPACE_SEPARATOR)


ENVELOPE_FIELDS = ("session_id", "metadata", "created_at")


# The validation context under which `Message` does not check its body again: parse_message's,
# which has (`check_body`, the only check of a body; the model's is for a Message built
# directly). A private object, so that no caller's context can hold it by chance.
_BODY_CHECKED = object()


def check_session_chars(value: str | None) -> str | None:
    """A pydantic field validator of a session id: refuses control characters
    (SESSION_CONTROL_CHARS). Its message is the problem alone: the error's location names
    the field (`session_id: must not contain ...`)."""
    if value is not None and any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise PydanticCustomError("control_character",
                                  f"must not contain control characters ({SESSION_CONTROL_CHARS})")
    return value


class Message(BaseModel):
    """One message as a caller sends it: a body in any format `tiers.formats` accepts
    (every Chat Completions message, every Responses input item), kept exactly as given,
    plus tiermem's envelope fields, which are not sent to a model.

    `Message(role="user", content="hi")`, `Message(type="function_call", call_id=...)`:
    every keyword that is not an envelope field is the body.
    """

    # strict, as the HTTP service's request models: lax mode read `created_at` true as 1.0,
    # false as 0.0 and "5" as 5.0 (a message stored at 1970-01-01 00:00:01), and a session id
    # of bytes as its text. Strict, a float field still takes an int (and numpy's numbers);
    # the body (the extra fields) is Any, stored exactly as given, untouched by it
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    # envelope: not sent to the model
    session_id: str | None = Field(None, min_length=1, max_length=SESSION_MAX_CHARS)
    metadata: dict[str, Any] | None = None
    # allow_inf_nan=False: NaN compares false with every bound, so it was refused as "less
    # than or equal to" the upper one; it is no time at all (finite checked first)
    created_at: float | None = Field(None, ge=0, le=MAX_TIMESTAMP, allow_inf_nan=False,
                                     description="unix seconds; default: now")

    # a field validator, not the model's: its error is located at `session_id` (a model
    # validator's is located at the whole message, which every way in then named `message`)
    @field_validator("session_id")
    @classmethod
    def _session_chars(cls, value: str | None) -> str | None:
        return check_session_chars(value)

    @model_validator(mode="after")
    def _shape(self, info: ValidationInfo) -> Message:
        # parse_message checked the body already (its error names the field): once is enough
        if not (isinstance(info.context, dict) and info.context.get(_BODY_CHECKED)):
            check_body(self.body())
        return self

    # the body as the client sent it where append dropped an `output_text` part's logprobs
    # (SDK_LOGPROBS_FIELD), else None: what releases before 2fe5e0c stored and fingerprinted,
    # so an idempotent retry spanning that upgrade replays (`append_fingerprint`). Private:
    # never stored, never part of body()
    _sent_body: dict[str, Any] | None = PrivateAttr(None)

    @property
    def role(self) -> str:
        """The canonical role (system, user, assistant or tool; `tiers.formats`)."""
        return canonical_role(self.body())

    def text(self) -> str:
        """The searchable text (`tiers.formats.message_text`)."""
        return message_text(self.body())

    def body(self) -> dict[str, Any]:
        """The message itself, exactly as given: stored, returned by history()."""
        return dict(self.__pydantic_extra__ or {})


def nested_deeper_than(value: object, limit: int, depth: int = 1) -> bool:
    """True when some dict, list or tuple inside `value` (`value` itself, when it is one,
    at level `depth`; each one a level below its container) sits deeper than `limit`.
    Containers count, not the values in them: an empty one at a level counts as one
    holding a string. Iterative, and stops at the first one: a value nested thousands of
    levels deep is answered without recursion."""
    stack: list[tuple[object, int]] = [(value, depth)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, dict):
            children: Iterable[object] = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        if d > limit:
            return True
        stack.extend((v, d + 1) for v in children)
    return False


# Why a key that is no string is refused (JSON's object keys are strings: json.dumps would
# store 2 as "2", None as "null", and read back another key than the one given)
NON_STRING_KEY_PROBLEM = ("Input should be a valid string (JSON object keys are strings: a key of another "
                          "type would be stored as its text and read back as another key)")


def non_string_key(value: object) -> tuple[int | str, ...] | None:
    """The location inside `value` of its first dict key (in document order) that is no
    string, the key itself last as pydantic's location writes one (an int as it is, any
    other key as its str); None when every key is a string. Iterative, as
    `nested_deeper_than`: call it on a value within MAX_JSON_DEPTH."""
    if _all_keys_strings(value):  # every append: a walk without locations (a third of the time)
        return None
    stack: list[tuple[object, tuple[int | str, ...]]] = [(value, ())]
    while stack:
        node, loc = stack.pop()
        if isinstance(node, dict):
            for k in node:
                if not isinstance(k, str):
                    return (*loc, _key_part(k))
            stack.extend((v, (*loc, k)) for k, v in reversed(node.items()))
        elif isinstance(node, list | tuple):
            stack.extend((v, (*loc, i)) for i, v in reversed(list(enumerate(node))))
    return None


def _all_keys_strings(value: object) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                if not isinstance(k, str):
                    return False
                if isinstance(v, dict | list | tuple):
                    stack.append(v)
        elif isinstance(node, list | tuple):
            stack.extend(v for v in node if isinstance(v, dict | list | tuple))
    return True


def _key_part(key: object) -> int | str:
    if isinstance(key, int) and not isinstance(key, bool):
        return key
    try:
        return str(key)
    except Exception:  # a caller's key type whose str fails: named by its type
        return f"a {type(key).__name__}"


def check_keys(value: object, field: str) -> None:
    """Refuse `value` (named `field`, a name of tiermem's) when a dict key anywhere inside
    it is no string: ValidationError named by `field` and the location down to the key,
    as `_model_error` names pydantic's (a part that is no plain name quoted and cut). The
    one check of every way in: `parse_message` (library, CLI, import, the HTTP service,
    the MCP tools, a client before it sends) and the adapters that turn a caller's value
    into JSON text before appending it (an Anthropic tool_use's input, a LangChain tool
    call's args)."""
    loc = non_string_key(value)
    if loc is not None:
        raise _model_error((*loc, PYDANTIC_KEY_LOC), NON_STRING_KEY_PROBLEM, within=field)


def _check_depth(fields: dict[str, Any]) -> None:
    """Refuse a message nested deeper than MAX_JSON_DEPTH, naming the top-level field that is
    (`fields` are the message's top-level fields, envelope included: the message is level 1,
    a field's object or list level 2)."""
    for name, value in fields.items():
        if nested_deeper_than(value, MAX_JSON_DEPTH, depth=2):
            # any key, not only a known field (the depth is checked first): quoted when it is
            # no plain name (`field_error`)
            raise field_error(name, f"is nested deeper than the limit of {MAX_JSON_DEPTH} levels "
                              "(the message itself is level 1)")


# The openai SDK's Python field names that differ from the wire's (its `alias`): what a
# plain `model_dump()` (no by_alias) of a Responses tool-call item writes. The item is
# stored under the wire name, the one `to_dict()`, `model_dump(by_alias=True)` and the API use.
SDK_FIELD_ALIASES: dict[str, dict[str, str]] = {
    "function_call": {"async_": "async"},
    "custom_tool_call": {"async_": "async"},
}
# What the SDK's `.parse()` helpers add to a reply on the client: the parse of `content`
# (ParsedChatCompletionMessage.parsed, ParsedResponseOutputText.parsed) or of `arguments`
# (ParsedFunction.parsed_arguments, ParsedResponseFunctionToolCall.parsed_arguments). The
# API never sends them, a request may not carry them, and the text they were parsed from
# is kept: they are dropped, not stored.
SDK_PARSED_FIELD = "parsed"
SDK_PARSED_ARGUMENTS_FIELD = "parsed_arguments"
# A Responses reply asked with `include=["message.output_text.logprobs"]` carries one entry
# per token on each `output_text` part (with `top_logprobs`, several): about 80 bytes a
# token, so a reply of a few hundred tokens passed the envelope limit (MAX_ENVELOPE_BYTES)
# and was refused. They are the reply's scores, not its text, and no context needs them
# (the request type leaves them optional): dropped on append, as `parsed` is.
# An empty list (every reply not asked for them carries one) says nothing and costs
# nothing: kept, so such a reply's history is what went in.
SDK_LOGPROBS_FIELD = "logprobs"


def _sdk_client_fields(part: dict[str, Any], logprobs: bool = True) -> frozenset[str]:
    """The fields of an `output_text` part append drops: `parsed`, and `logprobs` unless
    empty (unless `logprobs` is False)."""
    dropped = {SDK_PARSED_FIELD} & part.keys()
    if logprobs and part.get(SDK_LOGPROBS_FIELD):
        dropped.add(SDK_LOGPROBS_FIELD)
    return frozenset(dropped)


def _sdk_wire_form(body: dict[str, Any], logprobs: bool = True) -> dict[str, Any]:
    """`body` as the wire has it when it came from an openai SDK object however serialized:
    Python field names renamed to their aliases (SDK_FIELD_ALIASES) and the client-side
    parse results dropped (SDK_PARSED_FIELD, SDK_PARSED_ARGUMENTS_FIELD; an `output_text`
    part's SDK_LOGPROBS_FIELD too, unless empty), so is the
    streaming helper's `index` on a chat reply's tool calls
    (`tiers.formats.SDK_STREAM_INDEX_FIELD`). `logprobs=False`: the logprobs kept (the
    form releases before 2fe5e0c stored). A new dict when anything changes; the caller's
    is never modified."""
    out = body
    kind = body.get("type")
    aliases = SDK_FIELD_ALIASES.get(kind) if isinstance(kind, str) else None
    if aliases and any(k in body and v not in body for k, v in aliases.items()):
        # the same key order, each Python name in its place under the wire name
        out = {(aliases[k] if k in aliases and aliases[k] not in body else k): v for k, v in body.items()}
    if kind == "function_call" and SDK_PARSED_ARGUMENTS_FIELD in out:
        out = {k: v for k, v in out.items() if k != SDK_PARSED_ARGUMENTS_FIELD}
    elif kind is None and out.get("role") == "assistant":
        if SDK_PARSED_FIELD in out:
            out = {k: v for k, v in out.items() if k != SDK_PARSED_FIELD}
        out = without_tool_call_field(out, SDK_PARSED_ARGUMENTS_FIELD, in_function=True)
        # the streaming helper's `index` on each call (tiers.formats.SDK_STREAM_INDEX_FIELD)
        out = without_tool_call_index(out)
    if (kind == "message" or kind is None) and out.get("role") == "assistant":
        parts = out.get("content")
        if isinstance(parts, list) and any(
                isinstance(p, dict) and p.get("type") == "output_text" and _sdk_client_fields(p, logprobs)
                for p in parts):
            out = {**out, "content": [
                {k: v for k, v in p.items() if k not in _sdk_client_fields(p, logprobs)}
                if isinstance(p, dict) and p.get("type") == "output_text" else p for p in parts]}
    return out


def sdk_dump(value: Any) -> Any:
    """An `openai` SDK object (any pydantic model) as the JSON data a message stores: its
    `model_dump` with the wire's field names (by_alias: `async`, not `async_`) and its
    nulls, as the SDK's `to_dict()` writes them (a hosted tool's item, which tiermem
    stores without reading, without the fields left unset: what the SDK sends); any other
    value as it is. A message that is one, or holds them at any depth of its dicts and
    lists (`plain_deep`: the tool loop's `{"role": "assistant", "tool_calls":
    message.tool_calls}`), is read through it."""
    if not isinstance(value, BaseModel):
        return value
    kind = getattr(value, "type", None)
    if isinstance(kind, str) and kind in OPAQUE_ITEM_TYPES:
        # a hosted tool's item, stored and sent verbatim: as the SDK itself sends one
        # (`exclude_unset`), so a field the reply did not carry is not written as null
        # inside it (a web search's `action.queries: null`, which the request type refuses)
        return value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return value.model_dump(mode="json", by_alias=True)


# what wraps a chat reply in the openai SDK (and on the wire): a `ChatCompletion` holds
# its messages in `choices`, each `Choice` its one in `message`; neither has a role
COMPLETION_FIELD, CHOICE_FIELD = "choices", "message"
# ... and a Responses reply: a `Response` (`client.responses.create(...)`) holds its items
# in `output`, with no `type` (an item's own `output`, a function_call_output's, has one)
RESPONSE_OUTPUT_FIELD = "output"


def refuse_reply_wrapper(body: dict[str, Any]) -> None:
    """Refuse a whole chat completion, or one of its choices, or a whole Responses
    `Response`, given where a message goes, saying what to append instead:
    `completion.choices[0].message`, or the response's items, `response.output`, with
    `append_many` (each output item is a message). Before, each was refused `role: Field
    required`, which did not say what to pass instead."""
    if "role" in body or "type" in body:
        return
    if isinstance(body.get(RESPONSE_OUTPUT_FIELD), list):
        raise ValidationError("message", "is a whole Responses response (it has `output` and no `type`): append "
                                         "its output items, `append_many(conversation_id, response.output)` "
                                         "(HTTP: POST them to `/messages:batch`)")
    if isinstance(body.get(COMPLETION_FIELD), list):
        raise ValidationError("message", "is a whole chat completion (it has `choices` and no `role`): append "
                                         "its message, `completion.choices[0].message`")
    if isinstance(body.get(CHOICE_FIELD), dict):
        raise ValidationError("message", "is a chat completion's choice (it has `message` and no `role`): "
                                         "append its message, `choice.message` (`completion.choices[0].message`)")


def _split(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    body = {k: v for k, v in raw.items() if k not in ENVELOPE_FIELDS}
    envelope = {k: raw[k] for k in ENVELOPE_FIELDS if k in raw}
    return body, envelope


def parse_message(
    raw: Message | dict[str, Any] | Any,
    *,
    max_content_bytes: int,
    max_metadata_bytes: int,
    session_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    created_at: float | None = None,
    stamp: bool = True,
) -> Message:
    """Validate a caller's message and fold the keyword envelope into it.

    Accepts a dict, a `Message`, or any pydantic model (an `openai` SDK object such as
    `ChatCompletionMessage` or a Responses output item: its `model_dump()`, `sdk_dump`), a
    dict's SDK objects at any depth too (its `tool_calls`, parts, a reasoning summary).
    Raises `ValidationError` naming the field (a value JSON cannot carry by its place,
    `tiers.plain_json.unencodable`); never partially accepts a message. A message
    without created_at gets now, unless `stamp` is False (then None: the caller tells a
    given time from a default, as an idempotency fingerprint must, and stamps it itself).
    """
    if isinstance(raw, Message):
        body = raw.body()
        envelope: dict[str, Any] = {k: getattr(raw, k) for k in ENVELOPE_FIELDS if getattr(raw, k) is not None}
    elif isinstance(raw, dict):
        body, envelope = _split(raw)
    elif isinstance(raw, BaseModel):
        body, envelope = _split(sdk_dump(raw))
    else:
        raise ValidationError("message", f"must be an object, got {type(raw).__name__}")
    if session_id is not None:
        envelope["session_id"] = session_id
    if metadata is not None:
        envelope["metadata"] = metadata
    if created_at is not None:
        envelope["created_at"] = created_at
    if "metadata" in envelope and envelope["metadata"] is not None and not isinstance(envelope["metadata"], dict):
        raise ValidationError("metadata", "must be a JSON object")
    _check_depth({**body, **envelope})  # before anything below recurses into the values
    # the SDK's objects in a dict (a reply's tool_calls, parts, summary): as their dump,
    # which nests below where each sat (the depth again); a body holding none is itself
    if isinstance(raw, dict) and (plain := plain_deep(body, sdk_dump)) is not body:
        body = plain
        _check_depth(body)
    # an SDK reply however serialized (an HTTP body too); `sent` keeps its logprobs, for the
    # fingerprint an earlier release took of it (`append_fingerprint`)
    sent = _sdk_wire_form(body, logprobs=False)
    body = _sdk_wire_form(sent)
    if isinstance(raw, Message) and raw._sent_body is not None and _sdk_wire_form(raw._sent_body) == body:
        # a parse of a parse: as it was sent first; only while it still says what the body
        # does: `model_copy(update=...)` keeps the private attribute, and an edited body must
        # not pass for the request sent before it (a replay of another request)
        sent = raw._sent_body
    for name, value in {**body, **envelope}.items():
        # a top-level key that is no string is check_body's ("field names must be strings")
        if isinstance(name, str) and (loc := non_string_key(value)) is not None:
            raise _model_error((name, *loc, PYDANTIC_KEY_LOC), NON_STRING_KEY_PROBLEM)
    # an integer past the one limit, in the body or the metadata, named by its place: before
    # json.dumps, which refused one only past the interpreter's own limit (4,300 digits)
    check_int_digits({**body, **envelope}, "")
    refuse_reply_wrapper(body)
    check_body(body)  # names the field; Message() below would only say "value error"
    try:
        encoded = json.dumps(body, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        # a date, NaN, an object no SDK made, in a payload kept verbatim: named by its place
        raise unencodable(body) from None
    except RecursionError:
        raise ValidationError("message", NESTED_TOO_DEEP) from None
    size = content_bytes(body)
    if size > max_content_bytes:
        raise LimitExceeded("content", size, max_content_bytes)
    check_envelope(body, size)
    try:
        encoded.encode("utf-8")
    except UnicodeEncodeError:
        # named by where it is (a Responses output's `output[0].text`), not `content`
        raise lone_surrogate(body) from None
    try:
        msg = Message.model_validate({**body, **envelope}, context={_BODY_CHECKED: True})
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        raise _model_error(err["loc"], err["msg"]) from None
    if msg.metadata is not None:
        try:
            meta_bytes = len(json.dumps(msg.metadata, ensure_ascii=False, allow_nan=False).encode())
        except (TypeError, ValueError) as exc:
            raise ValidationError("metadata", f"is not JSON-serializable: {exc}") from None
        except UnicodeEncodeError:
            raise ValidationError("metadata", "is not valid UTF-8 (lone surrogate)") from None
        if meta_bytes > max_metadata_bytes:
            raise LimitExceeded("metadata", meta_bytes, max_metadata_bytes)
    if sent is not body:
        msg._sent_body = sent
    if stamp and msg.created_at is None:
        msg = stamped(msg)
    return msg


# the part pydantic's location has after a dict key whose error is in the key itself (a
# metadata key that is no string): pydantic's own marker, not caller input
PYDANTIC_KEY_LOC = "[key]"


def _model_error(loc: tuple[int | str, ...], problem: str, *, within: str = "") -> ValidationError:
    """pydantic's error at `loc` as tiermem's: named by its location when every part is a
    plain name (`tiers.errors.plain_field`), an index or `PYDANTIC_KEY_LOC`; else named by
    the parts before the first that is not (a caller's key: a metadata key that is no
    string is in the location as its str, a tuple's of a 100,000-character string whole)
    with the rest, each part quoted and bounded (`shown_key`), before `problem`. `within`:
    the name of what `loc` is inside, tiermem's own (`check_keys`), put first as it is."""
    parts = [str(p) if isinstance(p, int) or p == PYDANTIC_KEY_LOC else p for p in loc]
    head = [within] if within else []
    for i, part in enumerate(parts):
        if not (plain_field(part) or part == PYDANTIC_KEY_LOC):
            rest = ".".join(p if p == PYDANTIC_KEY_LOC else shown_key(p) for p in parts[i:])
            return ValidationError(".".join(head + parts[:i]) or "message", f"at {rest}: {problem}")
    return ValidationError(".".join(head + parts) or "message", problem)


def stamped(msg: Message) -> Message:
    """`msg` with created_at now when it has none."""
    return msg if msg.created_at is not None else msg.model_copy(update={"created_at": time.time()})


@dataclass(frozen=True)
class StoredMessage:
    """A message as read back from the cold log."""

    conversation_id: str
    position: int
    role: str
    body: dict[str, Any]
    session_id: str | None
    metadata: dict[str, Any] | None
    created_at: float
    tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return message_text(self.body)

    def to_openai(self) -> dict[str, Any]:
        """The body as a request param (`tiers.formats.wire_body`); `body` is as stored."""
        return wire_body(self.body)


def check_stored_body(body: object) -> str:
    """A stored message body, checked as it was on append (no size limits: those are
    the caller's and may have changed since; nor the checks added after rows were
    admitted without them: `check_body(stored=True)`); returns its kind. Raises ValidationError,
    a ValueError, for a row of the wrong shape."""
    return check_body(body, stored=True)


def search_text(body: dict[str, Any]) -> str:
    """What the FTS and vector indexes see: the speaker's name (when the message has
    one) and the text, because in a multi-party chat "what did Ana say about X" is
    about who spoke as much as what was said."""
    text = message_text(body)
    name = speaker_name(body)
    return f"{name}: {text}" if name else text


def speaker_name(body: dict[str, Any]) -> str | None:
    """The name of who said a message, where its body gives one (Chat Completions'
    `name`, "alice" in a group chat), else None. On a function_call item, a tool message
    (LangChain) or a legacy function message the name is the tool's, no speaker's."""
    if "type" in body or body.get("role") in ("function", "tool"):
        return None
    name = body.get("name")
    return name if isinstance(name, str) and name else None


# ----------------------------------------------------------------------------------
# Store records: what the store interface (tiers/store.py) returns


@dataclass(frozen=True)
class TurnRow:
    """One row of the turn index."""

    conversation_id: str
    position: int
    role: str
    session_id: str | None
    tokens: int
    content_hash: str
    created_at: float
    intent: str | None = None
    load_bearing: bool = False
    priority: int = 0
    label_reason: str | None = None
    superseded_by: int | None = None
    pinned_priority: int | None = None  # explicit pin, if any


# A search hit's supersession (`SearchHit.status`), as `facts()` says it of a statement,
# and of a turn some of whose statements a later turn superseded, the others holding
HIT_CURRENT = "current"
HIT_SUPERSEDED = "superseded"
HIT_SUPERSEDED_IN_PART = "superseded_in_part"
HIT_STATUSES = (HIT_CURRENT, HIT_SUPERSEDED, HIT_SUPERSEDED_IN_PART)


@dataclass(frozen=True)
class SearchHit:
    conversation_id: str
    position: int
    score: float
    ranks: dict[str, int]  # retriever name -> 1-based rank in that retriever's list
    text: str = ""
    # What the hit's conversation holds of it now (tiers/statements.py; a popped
    # correction supersedes nothing): HIT_CURRENT, HIT_SUPERSEDED (the whole turn no longer
    # holds: `superseded_by` is the position of the turn that superseded it, in the same
    # conversation, and `until` that turn's time, as `facts()`'s Validity) or
    # HIT_SUPERSEDED_IN_PART (some of its statements: `facts()` names them; the turn
    # itself has no `superseded_by`). None: not known (a hit from a service older than
    # these fields). A search ranks by relevance alone: a superseded hit is marked, not moved.
    status: str | None = None
    superseded_by: int | None = None
    until: float | None = None


def hit_supersession(h: SearchHit) -> dict[str, Any]:
    """A hit's `status` and `valid_until` as JSON, the shape of a fact's (`facts()`'s
    Validity.to_json, the HTTP answer's): valid_until null unless wholly superseded."""
    until = (None if h.superseded_by is None or h.until is None else
             {"position": h.superseded_by, "time": h.until, "superseded_by": h.superseded_by})
    return {"status": h.status, "valid_until": until}


class SearchHits(list[SearchHit]):
    """A search's hits, best first, and how they were ranked: `degraded` says why by
    keywords (BM25) only (the query has no vector: the embedding model cannot be used;
    the error's type, not its message, which names the model's path), None where by
    meaning and keywords both. `vectors_pending`: turns in the search's scope without a
    vector yet that this call left to the background catch-up (a bulk import's backlog
    past the one pool a search embeds inline: `tiermem.memory.CONTEXT_EMBED_POOLS`; or
    turns another catch-up of the process was still embedding after the search waited
    `tiermem.memory.CLAIMED_WAIT_S` for them, or gave up): the dense ranking did not see
    them, the keyword ranking did; 0 when it saw every turn it could."""

    degraded: str | None = None
    vectors_pending: int = 0


@dataclass(frozen=True)
class AppendResult:
    key: str  # the incarnation the messages went to
    positions: list[int]
    created: bool  # this append created the conversation
    # the batch's idempotency key was recorded by an earlier append of the same request:
    # nothing was written now, and `positions` are the ones that append wrote
    replayed: bool = False
    # the newest tombstone's id (ColdLog.erasure_mark) when the append's statement read it
    # in passing (PostgreSQL's one-statement append), else None: the caller reads it itself
    erasure_mark: int | None = None


# A conversation's incarnation as every way in answers it (`Memory.append_outcome`, an
# erasure's report, the HTTP appends, the MCP append tool) and takes it back
# (`expect_incarnation`): a keyed digest of the store's key, hex (`incarnation_token`)
INCARNATION_DIGEST_BYTES = 16
INCARNATION_PATTERN = f"^[0-9a-f]{{{2 * INCARNATION_DIGEST_BYTES}}}$"
_INCARNATION_RE = re.compile(INCARNATION_PATTERN)


def incarnation_token(db_uuid: str, key: str) -> str:
    """The incarnation `key` of the database `db_uuid` as a caller sees it: the same in
    every process of one store, the same for each append to one incarnation, and telling
    nothing of the key (a digest keyed by the database's id, which no route answers). The
    key itself never leaves the facade: it is the bare name the first time the name is
    used anywhere in the database, else the name with `~` and a suffix, so a tenant would
    read from it whether its id is, or was, used in another namespace (DESIGN invariants
    9 and 10)."""
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), key=db_uuid.encode()[:hashlib.blake2b.MAX_KEY_SIZE],
                           digest_size=INCARNATION_DIGEST_BYTES).hexdigest()


def is_incarnation_token(value: object) -> bool:
    """Whether `value` has the shape of an `incarnation_token` (not whether one is live)."""
    return isinstance(value, str) and _INCARNATION_RE.fullmatch(value) is not None


@dataclass(frozen=True)
class AppendOutcome:
    """`Memory.append_outcome`: the positions of the batch, and whether they come from
    an earlier append under the same idempotency key (a replay: nothing was written).
    `incarnation`: the conversation's incarnation the batch is in, as an opaque token
    (`incarnation_token`: never the store's key), what a later conditional append passes
    as `expect_incarnation`."""

    positions: list[int]
    replayed: bool = False
    incarnation: str | None = None


@dataclass(frozen=True)
class IdempotencyRecord:
    """What a conversation keeps of an append made with an idempotency key: the
    request's fingerprint (`append_fingerprint`) and the positions it wrote, which are
    contiguous (one batch, under the conversation's write lock on both engines)."""

    fingerprint: bytes
    first_position: int
    count: int
    created_at: float

    @property
    def positions(self) -> list[int]:
        return list(range(self.first_position, self.first_position + self.count))


@dataclass
class ErasureReport:
    """What a retention operation (prune, or erasure on request) removed. Tombstones
    hold ids, namespaces, times and counts: no content. The conversations are listed
    (tombstones, keys, conversation_ids and namespaces alike) by namespace, then name, then an older
    incarnation of a name first, on every engine (`tiers.dialect.ERASURE_ORDER`)."""

    conversations: int = 0
    messages: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    conversation_ids: list[str] = field(default_factory=list)  # the names, as callers know them
    # each of `conversation_ids`' namespace (same order): a prune of every namespace, or an
    # erasure of a namespace and those below it, lists the same name in several. Empty
    # only where not known (tiermem.client read an answer of a service older than it)
    namespaces: list[str] = field(default_factory=list)
    # the incarnations gone: below the facade their keys (derived stores key on them); as
    # `Memory` answers the report, their tokens (`incarnation_token`, as an append's
    # `incarnation` names them), never a key
    keys: list[str] = field(default_factory=list)
    # the store's keys of `keys` (same order) in the report `Memory.erasure_hooks` are told
    # only: hooks are the store owner's code in this process (no route registers one), and
    # before 0784bc0 they were told keys in `keys` (a cache keyed by them still matches
    # these). Empty in what any call answers (a key would tell a tenant whether its id is
    # used in another namespace)
    internal_keys: list[str] = field(default_factory=list)
    tombstones: list[dict[str, Any]] = field(default_factory=list)
    # False: another connection's read transaction held the SQLite WAL, whose old frames
    # (the erased rows' former pages) stay until this store's next write or close; always
    # False on PostgreSQL, whose WAL keeps the records until its segments are recycled.
    # None: not known (tiermem.client read an erasure answer of a service older than its
    # `wal_truncated`)
    wal_truncated: bool | None = True
    # True: no data file of the store holds an erased byte any more (the WAL aside). False:
    # the engine could not rewrite the freed storage now (SQLite: the WAL, as above;
    # PostgreSQL: erase_scrub="vacuum", or its VACUUM FULL failed, e.g. on a lock
    # timeout: the rows are gone, their bytes wait for the rewrite the next open of the
    # store, or the next erasure, does; or the role may not VACUUM pg_statistic, whose old
    # rows may hold sampled values: logged, for an operator's VACUUM FULL of it). None: not
    # known (tiermem.client read a prune answer of a service older than its `scrubbed`)
    scrubbed: bool | None = True
    # Where `scrubbed` is False and the store knows why: what was not rewritten, and why
    # (PostgreSQL: pg_catalog.pg_statistic, its lock held by another session past its
    # short wait, retried later, or the role may not VACUUM it; or "deleted rows kept: a
    # snapshot older than the erasure is open (backend pid N)", the tables not rewritten,
    # owed until it ends), no content; "" otherwise (a failed rewrite, or scrubbed). The
    # operator's report only
    not_rewritten: str = ""
    # True: a preview (`prune(dry_run=True)`), nothing erased: it lists what a prune would
    # erase now, and every field about work done says none was (no tombstone, no byte
    # reclaimed, `scrubbed` and `wal_truncated` False: nothing rewritten nor truncated)
    dry_run: bool = False

    @property
    def bytes_reclaimed(self) -> int:
        return max(0, self.bytes_before - self.bytes_after)

    def named(self) -> list[dict[str, str]]:
        """Each conversation as `{"namespace", "id"}` (a tombstone's two fields), in the
        report's order; [] where the namespaces are not known (`namespaces` empty)."""
        if len(self.namespaces) != len(self.conversation_ids):
            return []
        return [{"namespace": ns, "id": name} for ns, name in zip(self.namespaces, self.conversation_ids, strict=True)]

    def to_json(self) -> dict[str, Any]:
        """The whole report, as the operator's CLI prints it: `conversation_ids` as it was
        (names alone), and `namespaced_ids` (`named`), which says each one's namespace."""
        return {**self.tenant_json(), "namespaced_ids": self.named(), "bytes_reclaimed": self.bytes_reclaimed,
                "not_rewritten": self.not_rewritten}

    def tenant_json(self) -> dict[str, Any]:
        """What the tenant who asked may see of it (the HTTP and MCP answers): its own
        counts and tombstones, never the store's file sizes, whose change since the last
        erasure counts every tenant's writes. `dry_run` only on a preview (an erasure's
        answer is as it was before previews)."""
        return {"conversations": self.conversations, "messages": self.messages,
                "conversation_ids": list(self.conversation_ids),
                "tombstones": [dict(t) for t in self.tombstones], "wal_truncated": self.wal_truncated,
                "scrubbed": self.scrubbed, **({"dry_run": True} if self.dry_run else {})}


PruneReport = ErasureReport  # prune is one of the two retention operations


# A warm fold's metadata carries, under this key, one entry per line of its text: the
# log positions and status of the view sentence that line renders (fold_lines_meta).
FOLD_LINES_KEY = "lines"
FOLD_STATUSES = ("current", "superseded")


@dataclass(frozen=True)
class FoldLine:
    """One line of a fold's text with the log positions it came from."""

    text: str
    positions: tuple[int, ...]
    status: str  # "current" or "superseded" when the fold was written


def fold_lines_meta(body: str) -> list[dict[str, Any]] | None:
    """The per-line provenance to store with a fold written from a warm view whose
    stored body is `body` (a JSON list of sentences, tiers.warm.SummaryView.body_json:
    the fold's text renders them one per line, in order). None when the body is not
    that shape: the fold is then stored without provenance."""
    try:
        sentences = json.loads(body)
        out = [{"positions": [int(p) for p in s["positions"]], "status": str(s.get("status", "current"))}
               for s in sentences]
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return out if isinstance(sentences, list) else None


@dataclass(frozen=True)
class Checkpoint:
    conversation_id: str
    position: int
    summary: str
    metadata: dict[str, Any] | None
    created_at: float

    def lines(self) -> list[FoldLine] | None:
        """The fold's text line by line with each line's source positions, when it was
        written with them (a warm fold, fold_lines_meta); None for a fold without them
        (a caller's checkpoint, or a fold written before folds carried them), or whose
        provenance does not match its text line for line."""
        meta = self.metadata.get(FOLD_LINES_KEY) if isinstance(self.metadata, dict) else None
        if not isinstance(meta, list):
            return None
        texts = self.summary.split("\n")
        if len(texts) != len(meta):
            return None
        out: list[FoldLine] = []
        for text, m in zip(texts, meta, strict=True):
            positions = m.get("positions") if isinstance(m, dict) else None
            status = m.get("status") if isinstance(m, dict) else None
            if (not isinstance(positions, list) or not positions or status not in FOLD_STATUSES
                    or not all(isinstance(p, int) and not isinstance(p, bool) and 0 <= p <= self.position
                               for p in positions)):
                return None
            out.append(FoldLine(text, tuple(positions), status))
        return out
