"""The message model: OpenAI chat-format messages plus tiermem's envelope.

Validation happens here, at the edge, before anything touches storage: a refused
message raises `tiers.errors.ValidationError` naming the field and the limit, and
nothing is written. Unknown fields are refused rather than silently dropped, because
a dropped field is data lost.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, model_validator

from tiers.errors import LimitExceeded, ValidationError

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")

# Ids become SQLite keys, Redis hash tags, URL path segments and file-free log lines: a
# conservative ASCII alphabet keeps all four safe (no control characters, no look-alike
# Unicode, no `/`, `{`, `}` or whitespace). The first character excludes `.` and `-` so
# that an id is never `..` or an option-looking string.
ID_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._:@-]*$")
SESSION_MAX_CHARS = 128
NAME_MAX_CHARS = 64
MAX_TIMESTAMP = 253402300799.0  # 9999-12-31T23:59:59Z: the last instant a datetime can show
# Namespaces are hierarchical scopes: `acme`, `acme/alice`. Each segment is an id; a
# credential bound to `acme` may act on `acme` and every namespace below it.
NAMESPACE_SEPARATOR = "/"
MAX_NAMESPACE_DEPTH = 8
NAMESPACE_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._:@-]*(/[A-Za-z0-9_][A-Za-z0-9._:@-]*)*$")


def validate_id(value: object, field: str, max_chars: int) -> str:
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__}")
    if not value:
        raise ValidationError(field, "must not be empty")
    if len(value) > max_chars:
        raise LimitExceeded(field, len(value), max_chars, unit="characters")
    if not ID_PATTERN.match(value):
        raise ValidationError(
            field, "may contain only ASCII letters, digits and . _ : @ - (and not start with . or -)"
        )
    return value


def validate_namespace(value: object, field: str, max_chars: int) -> str:
    """A namespace: one to `MAX_NAMESPACE_DEPTH` ids joined by `/`, at most `max_chars`."""
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__}")
    if not value:
        raise ValidationError(field, "must not be empty")
    if len(value) > max_chars:
        raise LimitExceeded(field, len(value), max_chars, unit="characters")
    if not NAMESPACE_PATTERN.match(value):
        raise ValidationError(
            field, "must be ids joined by '/' (each of ASCII letters, digits and . _ : @ -, "
            "not starting with . or -)"
        )
    if value.count(NAMESPACE_SEPARATOR) >= MAX_NAMESPACE_DEPTH:
        raise LimitExceeded(field, value.count(NAMESPACE_SEPARATOR) + 1, MAX_NAMESPACE_DEPTH, unit="levels")
    return value


def namespace_within(namespace: str, prefix: str) -> bool:
    """True when `namespace` is `prefix` or below it (`acme/alice` is within `acme`,
    `acme2` is not)."""
    return namespace == prefix or namespace.startswith(prefix + NAMESPACE_SEPARATOR)


class TextPart(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["text"] = "text"
    text: str


class ToolFunction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=128)
    arguments: str = ""


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=256)
    type: Literal["function"] = "function"
    function: ToolFunction


class Message(BaseModel):
    """One chat message as a caller sends it (OpenAI-compatible, plus envelope fields)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Role
    content: str | list[TextPart] | None = None
    name: str | None = Field(None, min_length=1, max_length=NAME_MAX_CHARS)
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = Field(None, min_length=1, max_length=256)
    # envelope: not sent to the model
    session_id: str | None = Field(None, min_length=1, max_length=SESSION_MAX_CHARS)
    metadata: dict[str, Any] | None = None
    created_at: float | None = Field(None, ge=0, le=MAX_TIMESTAMP, description="unix seconds; default: now")

    @model_validator(mode="after")
    def _shape(self) -> Message:
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError("tool_calls is allowed only on assistant messages")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("tool messages need tool_call_id")
        if self.tool_call_id is not None and self.role != "tool":
            raise ValueError("tool_call_id is allowed only on tool messages")
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError("content may be null only on an assistant message that carries tool_calls")
        if self.session_id is not None and any(ord(c) < 32 or ord(c) == 127 for c in self.session_id):
            raise ValueError("session_id must not contain control characters")
        return self

    def text(self) -> str:
        """The searchable text: content, plus tool-call names and arguments."""
        parts: list[str] = []
        if isinstance(self.content, str):
            parts.append(self.content)
        elif self.content:
            parts.extend(p.text for p in self.content)
        for call in self.tool_calls or ():
            parts.append(f"{call.function.name}({call.function.arguments})")
        return "\n".join(parts)

    def body(self) -> dict[str, Any]:
        """The OpenAI-format part, as stored and as sent to a model."""
        return self.model_dump(
            exclude_none=True, include={"role", "content", "name", "tool_calls", "tool_call_id"}
        )


def parse_message(
    raw: Message | dict[str, Any],
    *,
    max_content_bytes: int,
    max_metadata_bytes: int,
    session_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    created_at: float | None = None,
) -> Message:
    """Validate a caller's message and fold the keyword envelope into it.

    Raises `ValidationError` naming the field; never partially accepts a message.
    """
    if isinstance(raw, Message):
        data: dict[str, Any] = raw.model_dump(exclude_none=True)
    elif isinstance(raw, dict):
        data = dict(raw)
    else:
        raise ValidationError("message", f"must be an object, got {type(raw).__name__}")
    if session_id is not None:
        data["session_id"] = session_id
    if metadata is not None:
        data["metadata"] = metadata
    if created_at is not None:
        data["created_at"] = created_at
    if "metadata" in data and data["metadata"] is not None and not isinstance(data["metadata"], dict):
        raise ValidationError("metadata", "must be a JSON object")
    try:
        msg = Message.model_validate(data)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "message"
        raise ValidationError(loc, err["msg"]) from None
    content_bytes = len(msg.text().encode("utf-8", "surrogatepass"))
    if content_bytes > max_content_bytes:
        raise LimitExceeded("content", content_bytes, max_content_bytes)
    try:
        msg.text().encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("content", "is not valid UTF-8 (lone surrogate)") from None
    if msg.metadata is not None:
        try:
            meta_bytes = len(json.dumps(msg.metadata, ensure_ascii=False, allow_nan=False).encode())
        except (TypeError, ValueError) as exc:
            raise ValidationError("metadata", f"is not JSON-serializable: {exc}") from None
        if meta_bytes > max_metadata_bytes:
            raise LimitExceeded("metadata", meta_bytes, max_metadata_bytes)
    if msg.created_at is None:
        msg = msg.model_copy(update={"created_at": time.time()})
    return msg


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
        return dict(self.body)


def check_stored_body(body: dict[str, Any]) -> Message:
    """A stored message body, checked by the model that admitted it (no size limits:
    those are the caller's and may have changed since). Raises ValueError (pydantic's
    ValidationError is one) for a row of the wrong shape."""
    return Message.model_validate(body)


def message_text(body: dict[str, Any]) -> str:
    parts: list[str] = []
    content = body.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    for call in body.get("tool_calls") or ():
        fn = call.get("function", {})
        parts.append(f"{fn.get('name', '')}({fn.get('arguments', '')})")
    return "\n".join(parts)


def search_text(body: dict[str, Any]) -> str:
    """What the FTS and vector indexes see: the speaker's name (when the message has
    one) and the text, because in a multi-party chat "what did Ana say about X" is
    about who spoke as much as what was said."""
    text = message_text(body)
    name = body.get("name")
    return f"{name}: {text}" if name else text
