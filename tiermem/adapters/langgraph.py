"""LangGraph hooks over tiermem (`pip install 'tiermem[langgraph]'`).

    hooks = TiermemHooks(mem, budget=2000)
    agent = create_react_agent(model, tools, pre_model_hook=hooks.pre_model_hook,
                               post_model_hook=hooks.post_model_hook, checkpointer=saver)
    agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "user-42"}})

One instance serves every thread of the graph: each run's tiermem conversation is its
`thread_id` (`tiermem.adapters._threads`), one conversation per thread; a run without a
thread id is refused (`tiermem.errors.ThreadIdMissing`). `TiermemHooks(mem, "user-42")`
keeps one fixed conversation instead, for runs without a thread id or of that one; a run
of another thread id is refused (`ThreadMismatch`) unless it was made with
`shared_across_threads=True` (every thread then writes and reads that one conversation).
Without `conversation_id`, a thread's contexts recall nothing of the other threads (the
namespace's other conversations: other users, in a support backend) unless it was made
with `recall_across_threads=True`, for threads that are one user's sessions.

LangGraph 1.x deprecates `create_react_agent` in favour of LangChain's `create_agent`:
for that, use `tiermem.adapters.langchain_agent.TiermemMiddleware`, which keeps the same
guarantees through the same `ConversationSync`. These hooks stay for graphs built on
`create_react_agent`.

`pre_model_hook` appends the graph state's messages that tiermem has not stored yet
(matched by LangChain message id, kept in each message's metadata) and returns
`{"llm_input_messages": ...}`: tiermem's planned context for the latest human message
under the budget, in place of the whole state, which the graph keeps unchanged.
`post_model_hook` stores the model's reply, so the log has every turn even when the run
ends on it. Without a checkpointer the state holds only the new input and tiermem
supplies the past; with one, already-stored messages are skipped.
`TiermemHooks(..., timezone="America/Los_Angeles")` plans every context in that user's
zone (checked when the hooks are made; None: the memory's, or the namespaced view's).
`memory` may be a `tiermem.client.Client` of a shared `tiermem serve`.

"Already stored" is read from the log at every sync, so several hooks on one conversation
(workers sharing a checkpointer, or processes) store each message once
(`tiermem.adapters._langchain_sync`, which says how a race between processes ends).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from langchain_core.messages import BaseMessage

from tiermem.adapters._common import DEFAULT_BUDGET_TOKENS, MemoryLike
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.adapters._threads import DEFAULT_MAX_THREADS, ThreadConversations

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig


def _messages(state: Any) -> list[BaseMessage]:
    return list(state["messages"] if isinstance(state, dict) else state.messages)


class TiermemHooks:
    """`pre_model_hook` and `post_model_hook` keeping each LangGraph thread of a graph in
    its own tiermem conversation (or in `conversation_id`: the module's docstring)."""

    def __init__(self, memory: MemoryLike, conversation_id: str | None = None, *,
                 budget: int = DEFAULT_BUDGET_TOKENS, system: str | None = None, timezone: str | None = None,
                 shared_across_threads: bool = False, recall_across_threads: bool = False,
                 max_threads: int = DEFAULT_MAX_THREADS) -> None:
        self.threads = ThreadConversations(type(self).__name__, memory, conversation_id, budget=budget,
                                           system=system, timezone=timezone,
                                           shared_across_threads=shared_across_threads,
                                           recall_across_threads=recall_across_threads, max_threads=max_threads)

    def conversation(self, config: RunnableConfig | None = None) -> ConversationSync:
        """The conversation of the run `config` belongs to (None: the running node's; a
        call outside a run: `conversation_id`'s)."""
        return self.threads.sync_for(config)

    def sync(self, messages: list[BaseMessage], config: RunnableConfig | None = None) -> int:
        """Store the state's messages not stored yet in the run's conversation
        (`ConversationSync.sync`)."""
        return self.conversation(config).sync(messages)

    def model_input(self, messages: list[BaseMessage], config: RunnableConfig | None = None) -> list[BaseMessage]:
        """`ConversationSync.model_input` in the run's conversation."""
        return self.conversation(config).model_input(messages)

    # `config` is injected by LangGraph, which matches the annotation's text: "Optional[RunnableConfig]"
    # is one it knows ("RunnableConfig | None" is not, and would be left out with a warning)
    def pre_model_hook(self, state: Any, config: Optional[RunnableConfig] = None) -> dict[str, Any]:  # noqa: UP045
        return {"llm_input_messages": self.model_input(_messages(state), config)}

    def post_model_hook(self, state: Any, config: Optional[RunnableConfig] = None) -> dict[str, Any]:  # noqa: UP045
        self.sync(_messages(state), config)
        return {}
