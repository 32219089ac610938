"""LangGraph hooks over tiermem (`pip install 'tiermem[langgraph]'`).

    hooks = TiermemHooks(mem, "user-42", budget=2000)
    agent = create_react_agent(model, tools, pre_model_hook=hooks.pre_model_hook,
                               post_model_hook=hooks.post_model_hook)

`pre_model_hook` appends the graph state's messages that tiermem has not stored yet
(matched by LangChain message id, kept in each message's metadata) and returns
`{"llm_input_messages": ...}`: tiermem's planned context for the latest human message
under the budget, in place of the whole state, which the graph keeps unchanged.
`post_model_hook` stores the model's reply, so the log has every turn even when the run
ends on it. Without a checkpointer the state holds only the new input and tiermem
supplies the past; with one, already-stored messages are skipped.

"Already stored" is read from the log, not remembered: each sync first reads the rows
appended since its last read (by this instance, another one, or another process), so
several hooks on one conversation (workers sharing a checkpointer) store each message
once. Syncs of one conversation are serialised in a process (`_common.conversation_lock`);
two processes that both append a message in the same instant leave it twice in the log,
and the later copy is hidden at once by a retraction row (the first by position wins),
so views and contexts show it once while `history()` keeps both.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage

from tiermem.adapters._common import (
    DEFAULT_BUDGET_TOKENS,
    MemoryLike,
    conversation_lock,
    latest_user_text,
    log_pages,
)
from tiermem.adapters.langchain import METADATA_ID_KEY, to_langchain, to_openai
from tiermem.tiers.errors import ConversationNotFound
from tiermem.tiers.formats import RETRACT_TYPE
from tiermem.tiers.models import StoredMessage


class TiermemHooks:
    """`pre_model_hook` and `post_model_hook` for one tiermem conversation."""

    def __init__(self, memory: MemoryLike, conversation_id: str, *, budget: int = DEFAULT_BUDGET_TOKENS,
                 system: str | None = None) -> None:
        self.memory = memory
        self.conversation_id = conversation_id
        self.budget = budget
        self.system = system
        self._seen: dict[str, int] = {}  # LangChain id -> the first position holding it
        self._after: int | None = None  # the last position read into _seen

    def _load_seen(self) -> list[StoredMessage]:
        """Note the ids of the rows appended since the last read; returns those rows."""
        rows = log_pages(self.memory, self.conversation_id, after=self._after)
        if not rows and self._after is not None and not self._still_there(self._after):
            self._seen, self._after = {}, None  # erased (and maybe begun again): read it anew
            rows = log_pages(self.memory, self.conversation_id)
        for m in rows:
            lc_id = (m.metadata or {}).get(METADATA_ID_KEY)
            if lc_id:
                self._seen.setdefault(str(lc_id), m.position)
            self._after = m.position
        return rows

    def _still_there(self, position: int) -> bool:
        try:
            return bool(self.memory.history(self.conversation_id, after=position - 1, limit=1))
        except ConversationNotFound:
            return False

    def sync(self, messages: list[BaseMessage]) -> int:
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
            positions = self.memory.append_many(self.conversation_id, to_openai(
                new, max_metadata_bytes=self.memory.config.max_metadata_bytes))
            self._load_seen()
            # another process may have stored some of them between the read and the append:
            # the copy at the lower position stands, this one is hidden
            dupes = [p for p, m in zip(positions, new, strict=True) if m.id and self._seen[m.id] < p]
            if dupes:
                self.memory.append_many(self.conversation_id, [{"type": RETRACT_TYPE, "position": p} for p in dupes])
            return len(new) - len(dupes)

    def context_messages(self, query: str | None) -> list[BaseMessage]:
        ctx = self.memory.context(self.conversation_id, query, self.budget, system=self.system)
        return to_langchain(ctx.messages)

    def pre_model_hook(self, state: Any) -> dict[str, Any]:
        messages = list(state["messages"] if isinstance(state, dict) else state.messages)
        self.sync(messages)
        query = latest_user_text(to_openai(messages))
        return {"llm_input_messages": self.context_messages(query)}

    def post_model_hook(self, state: Any) -> dict[str, Any]:
        self.sync(list(state["messages"] if isinstance(state, dict) else state.messages))
        return {}
