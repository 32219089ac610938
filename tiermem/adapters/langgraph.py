"""LangGraph hooks over tiermem (`pip install 'tiermem[langgraph]'`).

    hooks = TiermemHooks(mem, "user-42", budget=2000)
    agent = create_react_agent(model, tools, pre_model_hook=hooks.pre_model_hook,
                               post_model_hook=hooks.post_model_hook)

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

from typing import Any

from tiermem.adapters._langchain_sync import ConversationSync


class TiermemHooks(ConversationSync):
    """`pre_model_hook` and `post_model_hook` for one tiermem conversation."""

    def pre_model_hook(self, state: Any) -> dict[str, Any]:
        messages = list(state["messages"] if isinstance(state, dict) else state.messages)
        return {"llm_input_messages": self.model_input(messages)}

    def post_model_hook(self, state: Any) -> dict[str, Any]:
        self.sync(list(state["messages"] if isinstance(state, dict) else state.messages))
        return {}
