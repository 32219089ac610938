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
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage

from tiermem.adapters._common import DEFAULT_BUDGET_TOKENS, MemoryLike, latest_user_text
from tiermem.adapters.langchain import METADATA_ID_KEY, to_langchain, to_openai
from tiermem.tiers.errors import ConversationNotFound


class TiermemHooks:
    """`pre_model_hook` and `post_model_hook` for one tiermem conversation."""

    def __init__(self, memory: MemoryLike, conversation_id: str, *, budget: int = DEFAULT_BUDGET_TOKENS,
                 system: str | None = None) -> None:
        self.memory = memory
        self.conversation_id = conversation_id
        self.budget = budget
        self.system = system
        self._seen: set[str] | None = None

    def _stored_ids(self) -> set[str]:
        if self._seen is None:
            try:
                hist = self.memory.history(self.conversation_id)
            except ConversationNotFound:
                hist = []
            self._seen = {str(m.metadata[METADATA_ID_KEY]) for m in hist
                          if m.metadata and m.metadata.get(METADATA_ID_KEY)}
        return self._seen

    def sync(self, messages: list[BaseMessage]) -> int:
        """Append the messages not stored yet (all of those without an id); returns how many."""
        seen = self._stored_ids()
        new = [m for m in messages if not (m.id and m.id in seen)]
        if new:
            self.memory.append_many(self.conversation_id, to_openai(new))
            seen.update(m.id for m in new if m.id)
        return len(new)

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
