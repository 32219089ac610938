"""LangChain chat history over tiermem (`pip install 'tiermem[langchain]'`).

    history = TiermemChatMessageHistory(mem, "user-42")
    chain = RunnableWithMessageHistory(model, lambda session_id: TiermemChatMessageHistory(mem, session_id))

Messages are stored in OpenAI format (`langchain_core.messages.convert_to_openai_messages`),
so other clients of the same conversation read them as any other message; a message's
LangChain id goes in its metadata (`langchain_id`) and comes back on read. `clear()`
appends a clear row (a read boundary): the log keeps everything.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, convert_to_messages, convert_to_openai_messages

from tiermem.adapters._common import MemoryLike, clear, visible
from tiermem.tiers.formats import is_control, to_chat
from tiermem.tiers.models import StoredMessage

METADATA_ID_KEY = "langchain_id"


def to_openai(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages as OpenAI chat messages with their ids in the envelope metadata."""
    out: list[dict[str, Any]] = []
    for m in messages:
        body = dict(convert_to_openai_messages(m))
        if m.id:
            body["metadata"] = {METADATA_ID_KEY: m.id}
        out.append(body)
    return out


def to_langchain(bodies: list[dict[str, Any]], ids: Sequence[str | None] | None = None) -> list[BaseMessage]:
    """Bodies of any format as LangChain messages (Responses items through `to_chat`);
    `ids`, one per body, restore LangChain ids where a body maps to one message."""
    out: list[BaseMessage] = []
    for i, b in enumerate(bodies):
        if is_control(b):
            continue
        chat = [_function_calls_only(c) for c in to_chat([b])]
        msgs = convert_to_messages(chat)
        if ids is not None and len(msgs) == 1 and ids[i]:
            msgs[0].id = ids[i]
        out.extend(msgs)
    return _merge_calls(out)


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


def _merge_calls(msgs: list[BaseMessage]) -> list[BaseMessage]:
    """Responses items convert one call at a time: consecutive tool-calling AI messages
    without text are one turn of parallel calls, as a chat model expects."""
    from langchain_core.messages import AIMessage

    out: list[BaseMessage] = []
    for m in msgs:
        prev = out[-1] if out else None
        if (isinstance(m, AIMessage) and isinstance(prev, AIMessage) and m.tool_calls and prev.tool_calls
                and not m.content):
            out[-1] = prev.model_copy(update={"tool_calls": [*prev.tool_calls, *m.tool_calls]})
            continue
        out.append(m)
    return out


def stored_ids(stored: list[StoredMessage]) -> list[str | None]:
    return [(m.metadata or {}).get(METADATA_ID_KEY) for m in stored]


class TiermemChatMessageHistory(BaseChatMessageHistory):
    """A LangChain `BaseChatMessageHistory` whose messages live in a tiermem conversation."""

    def __init__(self, memory: MemoryLike, conversation_id: str) -> None:
        self.memory = memory
        self.conversation_id = conversation_id

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        stored = visible(self.memory, self.conversation_id)
        return to_langchain([m.body for m in stored], stored_ids(stored))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        if messages:
            self.memory.append_many(self.conversation_id, to_openai(messages))

    def clear(self) -> None:
        clear(self.memory, self.conversation_id)
