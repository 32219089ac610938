"""LangChain `create_agent` middleware over tiermem (`pip install 'tiermem[langchain-agent]'`).

    agent = create_agent(model, tools, middleware=[TiermemMiddleware(mem, budget=2000)], checkpointer=saver)
    agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "user-42"}})

One instance serves every thread of the agent: each run's tiermem conversation is its
`thread_id` (`tiermem.adapters._threads`), one conversation per thread; a run without a
thread id is refused (`tiermem.errors.ThreadIdMissing`). `TiermemMiddleware(mem,
"user-42")` keeps one fixed conversation instead, for runs without a thread id or of that
one; a run of another thread id is refused (`ThreadMismatch`) unless it was made with
`shared_across_threads=True` (every thread then writes and reads that one conversation).
Without `conversation_id`, a thread's contexts recall nothing of the other threads (the
namespace's other conversations: other users, in a support backend) unless it was made
with `recall_across_threads=True`, for threads that are one user's sessions. A sub-agent
(an agent called from a tool or node of another, in the same thread) is in the thread id's
conversation too unless its middleware is made with `sub_agent=True`: then its own,
`<thread_id>:<nodes>:<agent name>` (`tiermem.adapters._threads`).

Each model call (`wrap_model_call`, and `awrap_model_call` for `ainvoke`/`astream`)
first appends the agent state's messages that tiermem has not stored yet (matched by
LangChain message id, kept in each message's metadata), then sends the model tiermem's
planned context for the latest human message under the budget in place of the state's
messages: only the model's input changes, the state keeps every message. `after_model`
stores the model's reply, so the log has every turn even when the run ends on it, and
`after_agent` whatever came after the last model call (a `return_direct` tool's result,
a run another middleware ended before the model). Without a checkpointer the state holds
only the new input and tiermem supplies the past; with one, already-stored messages are
skipped. Tool calls and their results are stored and come back in later contexts, an
invalid call (arguments that are not JSON) with the error result create_agent answers it
with, in its place (`with_repairs`).

"Already stored" is read from the log at every sync, so several agents on one
conversation (workers sharing a checkpointer, or processes) store each message once
(`tiermem.adapters._langchain_sync`, shared with the LangGraph hooks, says how a race
between processes ends).

The budget (an int of 1 to `MAX_BUDGET_TOKENS` tokens, checked when the middleware is
made) covers tiermem's context, `system` (this middleware's) included; a latest message
larger than it is refused (`BudgetTooSmall`, after the turn is stored) unless the
middleware was made with `truncate_latest=True`, which cuts it to fit (`Memory.context`);
`create_agent(system_prompt=...)` is sent before it, outside the budget. Middleware
listed after this one (inner) sees, and may edit, tiermem's context; middleware listed
before it (outer) edits messages this one replaces.

`timezone` (an IANA name such as `America/Los_Angeles`, checked when the middleware is
made) is the user's zone for every context it plans: the days turns tell of and the
dates shown are that zone's (None: the memory's, or the namespaced view's, zone).

`memory` may be a `tiermem.client.Client` of a shared `tiermem serve` (agents in other
processes on one store): the blocking calls run off the event loop in `ainvoke` too.

`cache_marks` (0 to 4; 0, the default, for OpenAI and others that cache without marks):
for langchain-anthropic's `ChatAnthropic`, at most that many Anthropic `cache_control`
marks on the model's input, where the plan's breakpoints say (the end of the stable
prefix first), placed as `tiermem.adapters.anthropic.to_anthropic` places them
(`tiermem.adapters.langchain.context_input`); Anthropic reads a cached prefix only up to
a mark. Leave room for marks of your own (tools, `create_agent(system_prompt=...)`):
Anthropic takes four a request.

`system_messages`: how the memory blocks placed between the turns are sent. As planned
("as_is", for OpenAI and others that take a system message anywhere), the retrieved
turns are a `SystemMessage` before the latest message, which `ChatAnthropic` refuses
("Received multiple non-consecutive system messages") when a system message opens the
input; "in_turn" sends them as text of the user turn they sit in, as
`tiermem.adapters.anthropic.to_anthropic` does (`tiermem.adapters.langchain.in_turn`).
The default, None, picks per model call from the model the request carries
(`tiermem.adapters.langchain.system_messages_for`): "in_turn" for an Anthropic chat model
(`ChatAnthropic` or a subclass, bound with `bind_tools`, configurable or
`init_chat_model`'s, resolved to the model the call goes to), "as_is" for any other and
where it cannot be told; a value given wins. An agent on Claude wants `cache_marks` too,
which stay explicit (marks change what a call costs): `TiermemMiddleware(mem,
cache_marks=4)`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.runtime import Runtime

from tiermem.adapters._common import DEFAULT_BUDGET_TOKENS, MemoryLike
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.adapters._threads import DEFAULT_MAX_THREADS, ThreadConversations, run_config
from tiermem.adapters.langchain import system_messages_for

ModelCallResult = ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]


class TiermemMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """`create_agent` middleware keeping each LangGraph thread of an agent in its own
    tiermem conversation (or in `conversation_id`: the module's docstring)."""

    def __init__(self, memory: MemoryLike, conversation_id: str | None = None, *,
                 budget: int = DEFAULT_BUDGET_TOKENS, system: str | None = None, timezone: str | None = None,
                 shared_across_threads: bool = False, recall_across_threads: bool = False,
                 max_threads: int = DEFAULT_MAX_THREADS, cache_marks: int = 0,
                 system_messages: str | None = None, truncate_latest: bool = False,
                 sub_agent: bool = False) -> None:
        super().__init__()
        self.threads = ThreadConversations(type(self).__name__, memory, conversation_id, budget=budget,
                                           system=system, timezone=timezone,
                                           shared_across_threads=shared_across_threads,
                                           recall_across_threads=recall_across_threads, max_threads=max_threads,
                                           cache_marks=cache_marks, system_messages=system_messages,
                                           truncate_latest=truncate_latest, sub_agent=sub_agent)

    def conversation(self) -> ConversationSync:
        """The conversation of the run going on (its node's config: `langgraph.config.get_config()`;
        outside a run, `conversation_id`'s). Called on the event loop in `ainvoke`: the
        config is read from the task's context, before the work goes to a thread."""
        return self.threads.sync_for()

    def _planned(self, conversation: ConversationSync, request: ModelRequest[Any]) -> ModelRequest[Any]:
        # the state, not request.messages: what the graph holds is what tiermem must store
        # (request.messages is the state as outer middleware edited it for this call),
        # with the answers create_agent gives the invalid calls in their place
        # the form for the model this call goes to (a middleware before may have changed it),
        # where none was given
        form = None if self.threads.system_messages else system_messages_for(request.model, run_config())
        context = conversation.model_input(with_repairs(request.state["messages"], request.messages), form)
        return request.override(messages=cast("list[AnyMessage]", context))

    def _sync_state(self, state: AgentState[Any]) -> None:
        self.conversation().sync(state["messages"])

    def wrap_model_call(self, request: ModelRequest[Any],
                        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]) -> ModelCallResult:
        return handler(self._planned(self.conversation(), request))

    async def awrap_model_call(self, request: ModelRequest[Any],
                               handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
                               ) -> ModelCallResult:
        # tiermem's reads and writes block (SQLite, Redis): off the event loop
        return await handler(await asyncio.to_thread(self._planned, self.conversation(), request))

    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._sync_state(state)
        return None

    async def aafter_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        await asyncio.to_thread(self.conversation().sync, state["messages"])
        return None

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._sync_state(state)
        return None

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        await asyncio.to_thread(self.conversation().sync, state["messages"])
        return None


def with_repairs(state: list[AnyMessage], sent: list[AnyMessage]) -> list[AnyMessage]:
    """`state` with the tool messages create_agent's model node answers an invalid tool
    call with (`_patch_invalid_tool_calls`: an error result right after the AI message,
    for each invalid call with an id no tool message answers) where it puts them. It
    adds them to the model's input (`sent`, without an id) and writes them into the
    state's past after the call, behind the human message that began the turn: synced
    as the state holds them then, they would be stored after it, and the context would
    leave the failed call and its answer out (the call unanswered where it stands).
    Each such message of `sent` is given an id here, the object LangChain writes back
    to the state (LangGraph keeps an id a message has), so the row and the state's
    message are one (were the object copied on its way, the state's would be stored
    once more at the next sync)."""
    answered = {m.tool_call_id for m in state if isinstance(m, ToolMessage)}
    waiting = {c["id"] for m in state if isinstance(m, AIMessage)
               for c in m.invalid_tool_calls if c.get("id") and c["id"] not in answered}
    repairs: dict[str, ToolMessage] = {}
    for m in sent:
        if isinstance(m, ToolMessage) and m.id is None and m.tool_call_id in waiting:
            repairs.setdefault(m.tool_call_id, m)
    if not repairs:
        return state
    out: list[AnyMessage] = []
    for m in state:
        out.append(m)
        for c in m.invalid_tool_calls if isinstance(m, AIMessage) else ():
            repair = repairs.pop(cid, None) if isinstance(cid := c.get("id"), str) else None
            if repair is not None:
                repair.id = str(uuid.uuid4())
                out.append(repair)
    return out
