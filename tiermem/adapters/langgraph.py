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
ends on it. A reply's call id that the state holds already (a server numbering its calls
per reply: `call_0` every round) is renamed in the state and the row alike (`call_0_2`,
`fresh_call_ids`): create_react_agent's router after a post_model_hook counts a call
answered when any tool message of the state has its id, and would never run it. Without a checkpointer the state holds only the new input and tiermem
supplies the past; with one, already-stored messages are skipped.
`TiermemHooks(..., timezone="America/Los_Angeles")` plans every context in that user's
zone (checked when the hooks are made; None: the memory's, or the namespaced view's).
`memory` may be a `tiermem.client.Client` of a shared `tiermem serve`.
`sub_agent=True` keeps a graph called from a tool or node of another, in the same
thread, in a conversation of its own, `<thread_id>:<nodes>:<agent name>`
(`tiermem.adapters._threads`); by default it is the thread id's, as every graph's.
`budget` (an int of 1 to `MAX_BUDGET_TOKENS` tokens) is checked when the hooks are made;
`truncate_latest=True` cuts a latest message larger than it to fit (`Memory.context`)
where it is refused by default (`BudgetTooSmall`, after the turn is stored).
`TiermemHooks(..., cache_marks=N)` (0 to 4; 0, the default, for providers that cache
without marks) puts at most N Anthropic `cache_control` marks on `llm_input_messages`
for langchain-anthropic's `ChatAnthropic`, as the middleware does
(`tiermem.adapters.langchain.context_input`), and `system_messages="in_turn"` sends the
memory blocks placed between the turns as text of the user turn they sit in
(`tiermem.adapters.langchain.in_turn`), which `ChatAnthropic` needs: it refuses a system
message after the first turn when one opens the input ("as_is", OpenAI's form, sends them
as planned). A hook does not see the graph's model: give it to the hooks,
`TiermemHooks(mem, model=model)` (the one given to `create_react_agent`), and the
default, None, picks per call (`tiermem.adapters.langchain.system_messages_for`, with
the run's config for a configurable model): "in_turn" for an Anthropic chat model,
"as_is" for any other, and without a model; a value given wins. A model function
(`create_react_agent(pick_model, ...)`: `pick_model(state, runtime)` returns the chat
model of each call) is called by the pre_model_hook too, with the state and runtime it
gets (the graph calls it again after the hook, the state's messages then the hook's
input), and the form is the returned model's: the function should pick without side
effects, and the same model from either state. An async one a hook cannot call: the hooks refuse it when made
(`ValidationError` naming system_messages) unless system_messages is given. Claude wants
`cache_marks` too, which stay explicit (marks change what a call costs).

"Already stored" is read from the log at every sync, so several hooks on one conversation
(workers sharing a checkpointer, or processes) store each message once
(`tiermem.adapters._langchain_sync`, which says how a race between processes ends).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Optional

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import Runnable

from tiermem.adapters._common import DEFAULT_BUDGET_TOKENS, MemoryLike
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.adapters._threads import DEFAULT_MAX_THREADS, ThreadConversations, run_config
from tiermem.adapters.langchain import calls_renamed, system_messages_for
from tiermem.errors import ValidationError
from tiermem.tiers.formats import SentCallIds

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig


def _messages(state: Any) -> list[BaseMessage]:
    return list(state["messages"] if isinstance(state, dict) else state.messages)


def model_function(model: object) -> bool:
    """Whether `model` is a model function as `create_react_agent` tells one (a callable
    that is neither a Runnable nor a model name): it calls `model(state, runtime)` for the
    chat model of each call."""
    return callable(model) and not isinstance(model, (str, Runnable))


class TiermemHooks:
    """`pre_model_hook` and `post_model_hook` keeping each LangGraph thread of a graph in
    its own tiermem conversation (or in `conversation_id`: the module's docstring)."""

    def __init__(self, memory: MemoryLike, conversation_id: str | None = None, *,
                 budget: int = DEFAULT_BUDGET_TOKENS, system: str | None = None, timezone: str | None = None,
                 shared_across_threads: bool = False, recall_across_threads: bool = False,
                 max_threads: int = DEFAULT_MAX_THREADS, cache_marks: int = 0,
                 system_messages: str | None = None, model: object = None, truncate_latest: bool = False,
                 sub_agent: bool = False) -> None:
        # the model the graph calls, for the form of system_messages=None (a hook sees none)
        if system_messages is None and model_function(model) and inspect.iscoroutinefunction(model):
            # a sync hook cannot await it, and a guess sends ChatAnthropic what it refuses
            raise ValidationError("system_messages", f"must be given ('in_turn' for an Anthropic chat model such as "
                                                     f"ChatAnthropic, 'as_is' for any other) with an async model "
                                                     f"function, which a hook cannot call to tell the model: "
                                                     f"model={getattr(model, '__qualname__', model)!r}")
        self.model = model
        self.threads = ThreadConversations(type(self).__name__, memory, conversation_id, budget=budget,
                                           system=system, timezone=timezone,
                                           shared_across_threads=shared_across_threads,
                                           recall_across_threads=recall_across_threads, max_threads=max_threads,
                                           cache_marks=cache_marks, system_messages=system_messages,
                                           truncate_latest=truncate_latest, sub_agent=sub_agent)

    def conversation(self, config: RunnableConfig | None = None) -> ConversationSync:
        """The conversation of the run `config` belongs to (None: the running node's; a
        call outside a run: `conversation_id`'s)."""
        return self.threads.sync_for(config)

    def sync(self, messages: list[BaseMessage], config: RunnableConfig | None = None) -> int:
        """Store the state's messages not stored yet in the run's conversation
        (`ConversationSync.sync`)."""
        return self.conversation(config).sync(messages)

    def model_input(self, messages: list[BaseMessage], config: RunnableConfig | None = None, *,
                    model: object = None) -> list[BaseMessage]:
        """`ConversationSync.model_input` in the run's conversation, for `model` (None: the
        hooks' model; a model function is resolved by `pre_model_hook`, which has the state)."""
        target = self.model if model is None else model
        form = None if self.threads.system_messages else system_messages_for(target, run_config(config))
        return self.conversation(config).model_input(messages, form)

    # `config` is injected by LangGraph, which matches the annotation's text: "Optional[RunnableConfig]"
    # is one it knows ("RunnableConfig | None" is not, and would be left out with a warning); `runtime`
    # it injects by name (the Runtime a model function is called with)
    def pre_model_hook(self, state: Any, config: Optional[RunnableConfig] = None,  # noqa: UP045
                       runtime: Any = None) -> dict[str, Any]:
        model = self.model
        if self.threads.system_messages is None and model_function(model):
            # the chat model this call goes to, as create_react_agent asks the function for it
            model = model(state, runtime)  # type: ignore[operator]
        return {"llm_input_messages": self.model_input(_messages(state), config, model=model)}

    def post_model_hook(self, state: Any, config: Optional[RunnableConfig] = None) -> dict[str, Any]:  # noqa: UP045
        messages = _messages(state)
        renamed = fresh_call_ids(messages)
        if renamed is None:
            self.sync(messages, config)
            return {}
        # stored as the state will hold it (the same message id: the graph replaces it)
        self.sync([*messages[:-1], renamed], config)
        return {"messages": [renamed]}


def fresh_call_ids(messages: list[BaseMessage]) -> AIMessage | None:
    """The state's last message, the model's reply, with each call id that a message
    before it already holds (a call's, or a tool message's) given the first free suffix
    (`call_0_2`, `call_0_3`, ...; `tiers.formats.SentCallIds`), a content block that is
    one of its calls with it; None when it holds none such (or is no AI message).
    create_react_agent's router after a post_model_hook counts a call answered when any
    tool message of the state has its id, so a server numbering its calls per reply
    (`call_0` every round) had its second round's call never run. The new id depends on
    the state before the reply alone, and the message keeps its id, so the state and
    the stored row hold the same call ids."""
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage) or not (last.tool_calls or last.invalid_tool_calls):
        return None
    taken: set[str] = set()
    for m in messages[:-1]:
        if isinstance(m, ToolMessage):
            taken.add(m.tool_call_id)
        elif isinstance(m, AIMessage):
            taken.update(cid for c in (*m.tool_calls, *m.invalid_tool_calls) if isinstance(cid := c.get("id"), str))
    fresh = SentCallIds()
    for cid in sorted(taken):
        fresh.call(cid)  # taken: a repeat of it goes out with a suffix
    reply = calls_renamed(last, fresh)
    return None if reply is last else reply
