"""What every adapter shares: the conversation as a session sees it.

A session's view is the conversation's whole log (`history()`, read in pages) minus
tiermem's control rows and what they hide (`tiers.formats.hidden_positions`): a
retraction hides one item, a clear hides everything before it. A fold (a consolidation
checkpoint) is a read boundary for planned contexts only, never for a session's view:
a framework that sends its history to the model (`RunnableWithMessageHistory`, the
Agents SDK without `model_input_filter`) must still get every turn after a fold. The log
itself is never changed: `history()` still returns every row, control rows included.

Writes that read the view first (a pop, the LangGraph hooks' "stored yet?") hold a lock
per (Memory, namespace, conversation) in this process (`conversation_lock`); across
processes they check the log after writing, whose positions are one total order
(see `retract_latest`).
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, Union

from tiermem.tiers.errors import ConversationNotFound
from tiermem.tiers.formats import (
    CLEAR_TYPE,
    RETRACT_TYPE,
    hidden_positions,
    message_text,
    to_responses_rows,
)
from tiermem.tiers.models import StoredMessage

if TYPE_CHECKING:
    from tiermem.memory import Memory, NamespacedMemory

MemoryLike = Union["Memory", "NamespacedMemory"]
DEFAULT_BUDGET_TOKENS = 4000
HISTORY_PAGE = 2000  # rows per history() read while building a view
POPPED_FROM_KEY = "tiermem_popped_from"  # metadata of the items a pop of a multi-item row put back

_locks_guard = threading.Lock()
_locks: weakref.WeakKeyDictionary[Memory, dict[tuple[str, str], threading.Lock]] = weakref.WeakKeyDictionary()


def _base(mem: MemoryLike) -> tuple[Memory, str]:
    """The Memory behind `mem` and the namespace `mem` acts in."""
    from tiermem.memory import DEFAULT_NAMESPACE, NamespacedMemory

    if isinstance(mem, NamespacedMemory):
        return mem.memory, mem.namespace
    return mem, DEFAULT_NAMESPACE


def conversation_lock(mem: MemoryLike, conversation_id: str) -> threading.Lock:
    """One lock per conversation of one Memory, whichever view or adapter instance asks."""
    base, ns = _base(mem)
    with _locks_guard:
        per = _locks.setdefault(base, {})
        return per.setdefault((ns, conversation_id), threading.Lock())


def log_pages(mem: MemoryLike, conversation_id: str, after: int | None = None) -> list[StoredMessage]:
    """The log's rows after position `after` (None: all), read a page at a time
    ([] for a conversation that does not exist, or no longer does)."""
    rows: list[StoredMessage] = []
    try:
        while True:
            page, after = mem.history_page(conversation_id, after=after, limit=HISTORY_PAGE)
            rows.extend(page)
            if after is None:
                return rows
    except ConversationNotFound:
        return []


def visible(mem: MemoryLike, conversation_id: str) -> list[StoredMessage]:
    """The session's items in log order, from the whole log (folds do not cut it)."""
    rows = log_pages(mem, conversation_id)
    hidden, cleared = hidden_positions([(m.position, m.body) for m in rows])
    return [m for m in rows if m.position > cleared and m.position not in hidden]


def items_of(stored: list[StoredMessage], *, verbatim: bool = True) -> list[tuple[StoredMessage, list[dict[str, Any]]]]:
    """Each row with the Responses items it converts to (`tiers.formats.to_responses_rows`):
    Responses items as stored (explicit nulls kept, as the SDK's own sessions return
    them), chat messages converted (an assistant turn with text and calls is several)."""
    return list(zip(stored, to_responses_rows([m.body for m in stored], verbatim=verbatim), strict=True))


def _lost(mem: MemoryLike, conversation_id: str, target: int, mine: int) -> bool:
    """Whether a row between `target` and the retraction at `mine` hid `target` first:
    an earlier retraction of it (another process's pop) or a clear."""
    between = [m for m in log_pages(mem, conversation_id, after=target) if m.position < mine]
    for m in between:
        t = m.body.get("type")
        if t == CLEAR_TYPE or (t == RETRACT_TYPE and m.body.get("position") == target):
            return True
    return False


def retract_latest(mem: MemoryLike, conversation_id: str) -> dict[str, Any] | None:
    """Pop the session's latest Responses item; returns it (None: the session is empty).

    The row holding the item is hidden by a retraction row. When that row converts to
    several items (a chat assistant turn with text and tool calls), the items before the
    popped one are appended again after the retraction, in the same batch, so the view
    loses exactly one item; the re-appended rows carry `POPPED_FROM_KEY` in their metadata.

    Serialised per conversation within the process (`conversation_lock`). Across
    processes the log decides: a pop whose retraction follows another hiding the same
    row (or a clear) lost the race, leaves its redundant row (it hides nothing more) and
    pops again, so two pops never return the same item.
    """
    with conversation_lock(mem, conversation_id):
        while True:
            rows = [(m, items) for m, items in items_of(visible(mem, conversation_id)) if items]
            if not rows:
                return None
            target, items = rows[-1]
            batch: list[dict[str, Any]] = [{"type": RETRACT_TYPE, "position": target.position}]
            batch += [{**item, "metadata": {POPPED_FROM_KEY: target.position}} for item in items[:-1]]
            positions = mem.append_many(conversation_id, batch)
            if not _lost(mem, conversation_id, target.position, positions[0]):
                return items[-1]
            if len(positions) > 1:  # the winner put these items back already: hide this copy
                mem.append_many(conversation_id, [{"type": RETRACT_TYPE, "position": p} for p in positions[1:]])


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
