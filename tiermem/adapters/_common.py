"""What every adapter shares: the conversation as a session sees it.

A session's view is the conversation's active messages (after the latest fold) minus
tiermem's control rows and what they hide (`tiers.formats.hidden_positions`): a
retraction hides one item, a clear hides everything before it. The log itself is never
changed: `history()` still returns every row, control rows included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Union

from tiermem.tiers.errors import ConversationNotFound
from tiermem.tiers.formats import CLEAR_TYPE, RETRACT_TYPE, hidden_positions, message_text
from tiermem.tiers.models import StoredMessage

if TYPE_CHECKING:
    from tiermem.memory import Memory, NamespacedMemory

MemoryLike = Union["Memory", "NamespacedMemory"]
DEFAULT_BUDGET_TOKENS = 4000


def visible(mem: MemoryLike, conversation_id: str) -> list[StoredMessage]:
    """The session's items in log order ([] for a conversation that does not exist yet)."""
    try:
        msgs = mem.active(conversation_id).messages
    except ConversationNotFound:
        return []
    hidden, cleared = hidden_positions([(m.position, m.body) for m in msgs])
    return [m for m in msgs if m.position > cleared and m.position not in hidden]


def retract_latest(mem: MemoryLike, conversation_id: str) -> StoredMessage | None:
    """Hide the latest visible item with a retraction row; returns it (None: nothing to hide)."""
    items = visible(mem, conversation_id)
    if not items:
        return None
    mem.append(conversation_id, {"type": RETRACT_TYPE, "position": items[-1].position})
    return items[-1]


def clear(mem: MemoryLike, conversation_id: str) -> None:
    """A read boundary: nothing before it is in the session's view or the recent tail."""
    if visible(mem, conversation_id):
        mem.append(conversation_id, {"type": CLEAR_TYPE})


def latest_user_text(bodies: list[dict[str, Any]]) -> str | None:
    """The text of the newest user message, the query a context is planned for."""
    for b in reversed(bodies):
        if b.get("role") == "user":
            return message_text(b)
    return None
