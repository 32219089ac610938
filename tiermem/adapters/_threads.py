"""Which tiermem conversation a LangGraph run is in: what the LangGraph hooks
(`tiermem.adapters.langgraph`) and the `create_agent` middleware
(`tiermem.adapters.langchain_agent`) share.

The usual LangGraph pattern is one compiled graph, with a checkpointer, serving many
threads (`config["configurable"]["thread_id"]`). An adapter instance is part of that
graph, so it serves them all: each run's conversation is read from the run's config,
per call, never fixed when the adapter is made (a fixed id wrote every thread into one
conversation, and each thread's model input held the other threads' turns).

- Made without `conversation_id`: the conversation is the run's `thread_id` (a string;
  an int or UUID as its `str`), one `ConversationSync` per thread. A run without a
  thread id is refused (`ThreadIdMissing`), before anything is read or written: there
  is no shared default conversation.
- Made with `conversation_id`: a run without a thread id, or with that same thread id,
  is in that conversation. A run of another thread id is refused (`ThreadMismatch`),
  unless the adapter was made with `shared_across_threads=True`: then every thread is
  written into that one conversation and reads it whole (what such an adapter did
  before, by design now), one `ConversationSync` per thread still.

Namespace recall (`context(namespace_recall=)`: a context may bring back turns of the
namespace's other conversations) was made for one user's other sessions. The threads
of one graph are conversations of one namespace (the adapter's `memory`), and in the
usual case they are different users (a support backend: one thread per customer), so
without `conversation_id` the contexts are planned from the thread's own conversation
alone: bob's model input never recalls alice's turns, not even in a system note. An
adapter whose threads are one user's sessions (say, on that user's
`mem.namespaced("acme/alice")`) opts in with `recall_across_threads=True`. The adapter
logs (INFO, once) that recall is off by its default, and each plan's `retrieval` says the
call searched its own conversation only. With `conversation_id` the adapter keeps
namespace recall on, as before (`recall_across_threads` is refused there: it is about
threads that are conversations of their own); `namespace_recall = false` in the config
turns it off everywhere, the opt-in too.

A nested agent (a `create_agent` or graph called from a tool or node of the graph, in
the same thread: the usual sub-agents-as-tools supervisor) inherits the run's thread id,
so by default its conversation is the thread id, as every agent's is: its turns land in
the supervisor's conversation, between the supervisor's tool call and its result. An
agent whose adapter is made with `sub_agent=True` keeps a conversation of its own in the
thread instead: the thread id, then the stable part of its checkpoint namespace (the
names of the nodes it sits in, not the current one, nor the task ids, new at every call),
then the agent's name where it has one (`create_agent(name=)`: LangChain's
`lc_agent_name`), `:` between them, so `job-1:tools:researcher` (`run_conversation_key`;
a character a conversation id may not hold, as `_` in a name), the same at every run.
Opt-in, so that an agent's conversation never changes under an upgrade (a `create_agent`
added as a node of a parent graph has a namespace of two segments too: it stays in the
thread id's conversation, which `delete_conversation(thread_id)` erases). Two unnamed
sub-agents called from one node share a conversation: name them. `sub_agent=True` needs
no `conversation_id` (a fixed one stays that one conversation); a key longer than the
store's `max_id_chars` is refused (`ValidationError` naming `sub_agent` and the limit)
before anything is written. Erasing a thread erases its sub-agents' conversations too
only when each is named: `delete_conversation("job-1:tools:researcher")`.

The thread id is the config the framework hands the hook (LangGraph injects a node's
`config`), else `langgraph.config.get_config()`: the config of the node running (a
middleware's hooks run inside the agent's nodes). A call outside any run (a hook called
by hand) has none.

The `ConversationSync`s are kept per thread id, at most `max_threads` (the least
recently used goes first; `DEFAULT_MAX_THREADS`), under a lock: runs of several threads
may call one adapter at once. A sync instance keeps what its last sync saw (snapshots of
the state's messages), so the bound bounds the memory it holds; a thread whose instance
went reads the log again at its next call, as a new worker would, storing nothing twice.
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from tiermem.adapters._common import DEFAULT_BUDGET_TOKENS, MemoryLike, check_memory
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.adapters.langchain import check_cache_marks, check_system_messages
from tiermem.config import MAX_ID_CHARS_LIMIT
from tiermem.tiers.errors import ThreadIdMissing, ThreadMismatch, ValidationError, shown
from tiermem.tiers.models import MAX_BUDGET_TOKENS, check_int
from tiermem.tiers.zones import optional_timezone

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

# LangGraph threads whose ConversationSync one adapter keeps (each holds snapshots of its
# thread's state: about the state's size); a thread past it reads the log again when it
# runs next
DEFAULT_MAX_THREADS = 256

# what a node's or agent's name may not hold of a conversation id (`tiers.models.ID_PATTERN`)
_NOT_IN_ID = re.compile(r"[^A-Za-z0-9._@-]")

log = logging.getLogger(__name__)


def run_config(config: RunnableConfig | None = None) -> RunnableConfig | None:
    """`config`, or (None) the running node's, `langgraph.config.get_config()`; None where
    no run is going on."""
    if config is None:
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:  # outside a runnable context: a hook called by hand
            return None
    return config


def run_thread_id(config: RunnableConfig | None = None) -> str | None:
    """The thread id of the run `config` belongs to (None: the running node's config,
    `langgraph.config.get_config()`), as a conversation id; None where the run has none
    or no run is going on."""
    config = run_config(config)
    if config is None:
        return None
    thread_id: Any = (config.get("configurable") or {}).get("thread_id")
    if thread_id is None or type(thread_id) is str:
        return thread_id
    if isinstance(thread_id, uuid.UUID) or (isinstance(thread_id, int) and not isinstance(thread_id, bool)):
        return str(thread_id)
    raise ValidationError("thread_id", f"config['configurable']['thread_id'] must be a string (or an int or UUID) "
                          f"to name a tiermem conversation, got {shown(thread_id)}")


def run_nesting(config: RunnableConfig | None = None) -> str | None:
    """The stable part of the checkpoint namespace of the run `config` belongs to (None:
    the running node's), `:`-joined: the nodes the running graph is nested in (each
    namespace segment is `node:task id`; the last one is the node running, the task ids
    change at every call), then the agent's name (`lc_agent_name`) where it has one,
    each with `_` for a character a conversation id may not hold (`ID_PATTERN`); None
    where there is neither (a top-level run of an unnamed agent, or no run)."""
    config = run_config(config)
    if config is None:
        return None
    ns = (config.get("configurable") or {}).get("checkpoint_ns")
    # NS_SEP "|" between segments, NS_END ":" before a segment's task id: langgraph's own
    nodes = [segment.split(":", 1)[0] for segment in ns.split("|") if segment][:-1] if isinstance(ns, str) else []
    agent = (config.get("metadata") or {}).get("lc_agent_name")
    if isinstance(agent, str) and agent:
        nodes.append(agent)
    return ":".join(_NOT_IN_ID.sub("_", node) for node in nodes) or None


def run_conversation_key(config: RunnableConfig | None = None) -> str | None:
    """The conversation of a run on an adapter made with `sub_agent=True` and without a
    fixed `conversation_id`: `thread id:run_nesting`, or the thread id where the run has
    no nesting (the module's docstring); None without a thread id."""
    thread_id = run_thread_id(config)
    if thread_id is None:
        return None
    nesting = run_nesting(config)
    return thread_id if nesting is None else f"{thread_id}:{nesting}"


def id_limit(memory: MemoryLike) -> int:
    """The most characters of a conversation id `memory` creates: a local Memory's
    `max_id_chars`, a server's as a client reads it, else the largest any config sets."""
    from tiermem.client import Client
    from tiermem.memory import Memory, NamespacedMemory

    if isinstance(memory, Memory | NamespacedMemory):
        return memory.config.max_id_chars
    if isinstance(memory, Client):
        limits = memory.limits()
        if limits is not None:
            return limits.max_id_chars
    return MAX_ID_CHARS_LIMIT


class ThreadConversations:
    """The `ConversationSync` of each LangGraph thread an adapter serves (the module's
    docstring)."""

    def __init__(self, adapter: str, memory: MemoryLike, conversation_id: str | None, *,
                 budget: int = DEFAULT_BUDGET_TOKENS, system: str | None = None, timezone: str | None = None,
                 shared_across_threads: bool = False, recall_across_threads: bool = False,
                 max_threads: int = DEFAULT_MAX_THREADS, cache_marks: int = 0,
                 system_messages: str | None = None, truncate_latest: bool = False,
                 sub_agent: bool = False) -> None:
        # refused when the adapter is made, not at the first model call mid-run (after the turn is stored)
        self.memory = check_memory(memory)
        self.budget = check_int(budget, "budget", 1, MAX_BUDGET_TOKENS, "tokens")
        if type(truncate_latest) is not bool:
            raise ValidationError("truncate_latest", f"must be True or False, got {shown(truncate_latest)}")
        self.truncate_latest = truncate_latest
        self.cache_marks = check_cache_marks(cache_marks)
        self.system_messages = check_system_messages(system_messages)
        self.timezone = optional_timezone(timezone)
        if conversation_id is not None and (type(conversation_id) is not str or not conversation_id):
            raise ValidationError("conversation_id", f"must be a non-empty string or None (None: each LangGraph "
                                  f"thread's own, its thread_id), got {shown(conversation_id)}")
        if shared_across_threads and conversation_id is None:
            raise ValidationError("shared_across_threads", "needs conversation_id: without one each thread has "
                                  "its own conversation (its thread_id), so there is nothing to share")
        if type(recall_across_threads) is not bool:
            raise ValidationError("recall_across_threads", f"must be True or False, got {shown(recall_across_threads)}")
        if recall_across_threads and conversation_id is not None:
            raise ValidationError("recall_across_threads", "needs no conversation_id: it lets each thread's own "
                                  "conversation (its thread_id) recall the namespace's other threads; a fixed "
                                  "conversation_id recalls the namespace's other conversations already")
        if type(sub_agent) is not bool:
            raise ValidationError("sub_agent", f"must be True or False, got {shown(sub_agent)}")
        if sub_agent and conversation_id is not None:
            raise ValidationError("sub_agent", "needs no conversation_id: it keys the agent's own conversation "
                                  "in each thread, thread_id:<nodes>:<agent name>; a fixed conversation_id "
                                  "is that one conversation already")
        # a sub-agent's own conversation per thread (the module's docstring); opt-in
        self.sub_agent = sub_agent
        if type(max_threads) is not int or max_threads < 1:
            raise ValidationError("max_threads", f"must be an int of at least 1, got {shown(max_threads)}")
        self.adapter = adapter
        self.conversation_id = conversation_id
        self.shared_across_threads = shared_across_threads
        # the contexts of a thread's own conversation recall nothing of the namespace's other
        # conversations (other threads: other users, often) unless the caller opted in
        self.namespace_recall = conversation_id is not None or recall_across_threads
        self._told = False  # whether the log said so yet (once per adapter, not once per thread)
        self.system = system
        self.max_threads = max_threads
        self._lock = threading.Lock()
        # thread id (None: a run without one, on an adapter with conversation_id) -> its sync, least recent first
        self._syncs: OrderedDict[str | None, ConversationSync] = OrderedDict()

    def conversation_for(self, thread_id: str | None) -> str:
        """The conversation a run of `thread_id` is in; refused (`ThreadIdMissing`,
        `ThreadMismatch`) where the adapter does not serve it."""
        if self.conversation_id is None:
            if thread_id is None:
                raise ThreadIdMissing(self.adapter)
            return thread_id
        if thread_id is not None and thread_id != self.conversation_id and not self.shared_across_threads:
            raise ThreadMismatch(self.adapter, self.conversation_id, thread_id)
        return self.conversation_id

    def sync_for(self, config: RunnableConfig | None = None) -> ConversationSync:
        """The `ConversationSync` of the run `config` belongs to (None: the running node's)."""
        thread_id = run_thread_id(config)
        conversation = self.conversation_for(thread_id)
        if self.sub_agent:
            # the sub-agent's own conversation in the thread (the module's docstring)
            thread_id = conversation = self._sub_agent_key(conversation, config)
        with self._lock:
            sync = self._syncs.get(thread_id)
            if sync is not None:
                self._syncs.move_to_end(thread_id)
                return sync
            sync = self._syncs[thread_id] = ConversationSync(self.memory, conversation, budget=self.budget,
                                                              system=self.system, timezone=self.timezone,
                                                              namespace_recall=self.namespace_recall,
                                                              cache_marks=self.cache_marks,
                                                              system_messages=self.system_messages,
                                                              truncate_latest=self.truncate_latest)
            if not self.namespace_recall and not self._told:
                self._told = True
                log.info("%s: namespace recall is off, by the adapter's default for a conversation per thread_id: "
                         "a thread's contexts recall none of the other threads' turns (make it with "
                         "recall_across_threads=True where its threads are one user's sessions)", self.adapter)
            while len(self._syncs) > self.max_threads:
                self._syncs.popitem(last=False)
            return sync

    def _sub_agent_key(self, thread_id: str, config: RunnableConfig | None) -> str:
        """`thread_id:<nodes>:<agent name>` (`run_nesting`), refused where it is longer
        than the store's `max_id_chars` (nothing written yet)."""
        nesting = run_nesting(config)
        if nesting is None:
            return thread_id
        key = f"{thread_id}:{nesting}"
        limit = id_limit(self.memory)
        if len(key) > limit:
            raise ValidationError("sub_agent", f"{self.adapter}(sub_agent=True) keys this agent's conversation "
                                  f"thread_id:<nodes>:<agent name>, {shown(key)}, {len(key)} characters: over "
                                  f"the store's max_id_chars, {limit}; use a shorter thread id or agent name, "
                                  f"or raise max_id_chars")
        return key

    def cached_threads(self) -> list[str | None]:
        """The thread ids whose `ConversationSync` is kept, least recently used first."""
        with self._lock:
            return list(self._syncs)
