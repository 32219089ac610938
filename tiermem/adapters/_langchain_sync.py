"""A LangChain agent's message state kept in one tiermem conversation: what the LangGraph
hooks (`tiermem.adapters.langgraph`) and the `create_agent` middleware
(`tiermem.adapters.langchain_agent`) share.

`sync(messages)` appends the messages tiermem has not stored yet, matched by LangChain
message id (kept in each row's metadata, `tiermem.adapters.langchain.METADATA_ID_KEY`);
a message without an id is always appended. `model_input(messages)` syncs, then returns
tiermem's planned context for the latest human message under the budget: what the model
is sent in place of the whole state, which the caller leaves unchanged. `timezone` (an
IANA name, checked when the instance is made) is the user's zone for every context it
plans: the calendar of the days turns tell of and the clock of the dates shown (None:
the memory's, or the namespaced view's, zone; a `tiermem.client.Client`'s: the server's).
`memory` may be a `Client` of a shared `tiermem serve`: the same rows are stored and the
same contexts planned as over the server's Memory.

"Already stored" is read from the log, not remembered: each sync first reads the rows
appended since its last read (by this instance, another one, or another process), so
several instances on one conversation (workers sharing a checkpointer) store each message
once. The read starts at the last row read before: when that row is gone or another, the
conversation was erased since (and maybe begun again, longer or not), and the whole log
is read anew. Syncs of one conversation are serialised in a process (`_common.conversation_lock`);
two processes that both append a message in the same instant leave it twice in the log,
and the later copy is hidden at once by a retraction row (the first by position wins),
so views and contexts show it once while `history()` keeps both.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from tiermem.adapters._common import (
    DEFAULT_BUDGET_TOKENS,
    MemoryLike,
    check_memory,
    conversation_lock,
    latest_user_text,
    log_pages,
)
from tiermem.adapters.langchain import METADATA_ID_KEY, append_messages, to_langchain, to_openai
from tiermem.tiers.formats import RETRACT_TYPE
from tiermem.tiers.models import StoredMessage
from tiermem.tiers.zones import optional_timezone


def _same_row(a: StoredMessage, b: StoredMessage) -> bool:
    """Whether two reads of a position are one row: its incarnation's rows never change,
    and another incarnation's row there differs in its time of writing at least (an
    import of an export of this log is the one exception, and holds the same rows)."""
    return (a.position, a.created_at, a.session_id, a.body, a.metadata) == \
        (b.position, b.created_at, b.session_id, b.body, b.metadata)


class ConversationSync:
    """One tiermem conversation as the store and the model input of a LangChain agent."""

    def __init__(self, memory: MemoryLike, conversation_id: str, *, budget: int = DEFAULT_BUDGET_TOKENS,
                 system: str | None = None, timezone: str | None = None) -> None:
        self.memory = check_memory(memory)
        self.conversation_id = conversation_id
        self.budget = budget
        self.system = system
        # refused here, not at the first model call mid-run
        self.timezone = optional_timezone(timezone)
        self._seen: dict[str, int] = {}  # LangChain id -> the first position holding it
        self._last: StoredMessage | None = None  # the last row read into _seen

    def _load_seen(self) -> list[StoredMessage]:
        """Note the ids of the rows appended since the last read; returns those rows.

        The read starts at the last row read before, which must come back the same: rows
        never change, so a different row there (or none) means the conversation was
        erased since, and maybe begun again, longer or not, by another instance or
        process; `_seen` then belongs to the gone incarnation and the log is read anew.
        (Only "nothing after the last position" was noticed: a conversation begun again
        longer left its rows at or below that position unread, and their messages were
        stored twice.)"""
        last = self._last
        rows = log_pages(self.memory, self.conversation_id, after=None if last is None else last.position - 1)
        if last is not None:
            if rows and _same_row(rows[0], last):
                rows = rows[1:]
            else:
                self._seen, self._last = {}, None
                rows = log_pages(self.memory, self.conversation_id)
        for m in rows:
            lc_id = (m.metadata or {}).get(METADATA_ID_KEY)
            if lc_id:
                self._seen.setdefault(str(lc_id), m.position)
            self._last = m
        return rows

    def sync(self, messages: Sequence[BaseMessage]) -> int:
        """Append the messages not stored yet (all of those without an id); returns how many."""
        with conversation_lock(self.memory, self.conversation_id):
            self._load_seen()
            new, ids = [], set()
            for m in messages:
                if m.id and (m.id in self._seen or m.id in ids):
                    continue
                new.append(m)
                if m.id:
                    ids.add(m.id)
            if not new:
                return 0
            positions = append_messages(self.memory, self.conversation_id, new)
            self._load_seen()
            # another process may have stored some of them between the read and the append:
            # the copy at the lower position stands, this one is hidden
            dupes = [p for p, m in zip(positions, new, strict=True) if m.id and self._seen[m.id] < p]
            if dupes:
                self.memory.append_many(self.conversation_id, [{"type": RETRACT_TYPE, "position": p} for p in dupes])
            return len(new) - len(dupes)

    def context_messages(self, query: str | None) -> list[BaseMessage]:
        ctx = self.memory.context(self.conversation_id, query, self.budget, system=self.system,
                                  timezone=self.timezone)
        return to_langchain(ctx.messages)

    def model_input(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """Store the state's new messages, then plan the context for its latest human message."""
        self.sync(messages)
        return self.context_messages(latest_user_text(to_openai(messages)))
