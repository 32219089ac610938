"""One graph, many LangGraph threads: `TiermemHooks` (`create_react_agent`) and
`TiermemMiddleware` (`create_agent`) keep each thread (`config["configurable"]
["thread_id"]`) in its own tiermem conversation, against the real packages with a fake
chat model (no network) and LangGraph's `InMemorySaver`.

Before, both fixed their conversation id when they were made: the usual pattern (one
compiled graph with a checkpointer serving many threads) wrote every thread into that one
conversation, so bob's model input held alice's turns (her PIN), and an `update_state`
edit of alice's first message retracted and re-copied bob's rows. Now a run's
conversation is its thread id; a run with neither a thread id nor a `conversation_id` is
refused, and a fixed `conversation_id` run in another thread is refused unless the
adapter was made with `shared_across_threads=True`.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("langchain.agents")
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from tiermem import Memory
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.errors import ThreadIdMissing, ThreadMismatch, ValidationError

BUDGET_TOKENS = 2000
CONTEXT_ROLES = ("human", "ai")  # the turns a model input holds (tiermem may add a system note)


class EchoModel(GenericFakeChatModel):
    """A fake chat model whose reply names the latest human message ("re: <text>"), so a
    reply is the same whichever thread or OS thread asked first; records every input."""

    received: list[list[BaseMessage]] = []  # noqa: RUF012 (a pydantic field, set per instance below)

    def bind_tools(self, tools: Any, **kwargs: Any) -> EchoModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        with _RECEIVED_LOCK:
            self.received.append(list(messages))
        last = next(m for m in reversed(messages) if m.type == "human")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(f"re: {last.content}"))])


_RECEIVED_LOCK = threading.Lock()


def _model() -> EchoModel:
    model = EchoModel(messages=iter([]))
    model.received = []
    return model


def _hooks_agent(model: EchoModel, adapter: Any, checkpointer: InMemorySaver | None) -> Any:
    from langgraph.prebuilt import create_react_agent

    return create_react_agent(model, [], pre_model_hook=adapter.pre_model_hook,
                              post_model_hook=adapter.post_model_hook, checkpointer=checkpointer)


def _middleware_agent(model: EchoModel, adapter: Any, checkpointer: InMemorySaver | None) -> Any:
    return create_agent(model, [], middleware=[adapter], checkpointer=checkpointer)


# (the adapter's class, how an agent is built on it)
ADAPTERS = [
    pytest.param(TiermemHooks, _hooks_agent, id="langgraph-hooks"),  # create_react_agent's pre/post hooks
    pytest.param(TiermemMiddleware, _middleware_agent, id="agent-middleware"),  # create_agent's middleware
]
Build = Callable[[EchoModel, Any, "InMemorySaver | None"], Any]


def _thread(thread_id: object) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _turns(messages: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages if m.type in CONTEXT_ROLES]


def _stored(mem: Memory, conv: str) -> list[str]:
    return [str(m.body.get("content")) for m in mem.history(conv) if m.body.get("role")]


def _ask(agent: Any, thread_id: object, text: str) -> None:
    agent.invoke({"messages": [HumanMessage(text)]}, _thread(thread_id))


@pytest.mark.parametrize(("adapter", "build"), ADAPTERS)
def test_two_threads_of_one_graph_keep_separate_conversations(cold_memory: Memory, adapter: type,
                                                               build: Build) -> None:
    model = _model()
    agent = build(model, adapter(cold_memory, budget=BUDGET_TOKENS), InMemorySaver())
    _ask(agent, "alice", "alice: my PIN is 4321")
    _ask(agent, "bob", "bob: hello")
    # bob's first input: his message alone (before: alice's PIN turn and its reply first)
    assert _turns(model.received[-1]) == ["bob: hello"]
    _ask(agent, "alice", "alice: what is my PIN?")
    assert _turns(model.received[-1]) == ["alice: my PIN is 4321", "re: alice: my PIN is 4321",
                                          "alice: what is my PIN?"]
    _ask(agent, "bob", "bob: anything new?")
    assert _turns(model.received[-1]) == ["bob: hello", "re: bob: hello", "bob: anything new?"]
    # no turn of alice's is in bob's input, system notes included (namespace recall across
    # threads is off unless opted in: tests/test_langgraph_thread_recall.py)
    assert not any("4321" in str(m.content) for m in model.received[-1])
    assert _stored(cold_memory, "alice") == ["alice: my PIN is 4321", "re: alice: my PIN is 4321",
                                             "alice: what is my PIN?", "re: alice: what is my PIN?"]
    assert _stored(cold_memory, "bob") == ["bob: hello", "re: bob: hello", "bob: anything new?",
                                           "re: bob: anything new?"]
    assert sorted(cold_memory.conversations()) == ["alice", "bob"]  # no shared default conversation


@pytest.mark.parametrize(("adapter", "build"), ADAPTERS)
def test_an_edit_in_one_thread_leaves_the_others_rows_untouched(cold_memory: Memory, adapter: type,
                                                                  build: Build) -> None:
    model = _model()
    agent = build(model, adapter(cold_memory, budget=BUDGET_TOKENS), InMemorySaver())
    for turn in ("one", "two"):
        _ask(agent, "alice", f"alice: {turn}")
        _ask(agent, "bob", f"bob: {turn}")
    bobs_rows = [(m.position, m.body) for m in cold_memory.history("bob")]
    first = agent.get_state(_thread("alice")).values["messages"][0]
    agent.update_state(_thread("alice"), {"messages": [HumanMessage("alice: ONE", id=first.id)]})
    _ask(agent, "alice", "alice: three")
    # alice's edit is in her conversation: [H1', A1, H2, A2] then the new turn
    assert [str(m.get("content")) for m in cold_memory.context("alice", None, BUDGET_TOKENS).messages] == [
        "alice: ONE", "re: alice: one", "alice: two", "re: alice: two", "alice: three", "re: alice: three"]
    assert any(m.body.get("type") == "tiermem.retract" for m in cold_memory.history("alice"))
    # bob's log is row for row what it was (before: retracted and copied again after alice's edit)
    assert [(m.position, m.body) for m in cold_memory.history("bob")] == bobs_rows
    _ask(agent, "bob", "bob: three")
    assert _turns(model.received[-1]) == ["bob: one", "re: bob: one", "bob: two", "re: bob: two", "bob: three"]


# (conversation_id, shared_across_threads, the run's thread id: None for a run without a
# checkpointer and no thread id, the error expected (None: the run works), where it is stored)
CASES = [
    ("alice", False, "alice", None, "alice"),  # the fixed id run in its own thread
    ("alice", False, None, None, "alice"),  # the fixed id, a run without a thread id (no checkpointer)
    ("alice", False, "bob", ThreadMismatch, None),  # another thread: the bug's shape, refused
    ("app", True, "bob", None, "app"),  # another thread, opted in: written into the shared conversation
    (None, False, None, ThreadIdMissing, None),  # neither: no shared default conversation
    (None, False, 7, None, "7"),  # an int thread id names the conversation as its str
    (None, False, uuid.UUID(int=5), None, str(uuid.UUID(int=5))),  # a UUID thread id, the same
]


@pytest.mark.parametrize(("conversation_id", "shared", "thread_id", "error", "stored_in"), CASES)
@pytest.mark.parametrize(("adapter", "build"), ADAPTERS)
def test_which_conversation_a_run_is_in(cold_memory: Memory, adapter: type, build: Build,
                                        conversation_id: str | None, shared: bool, thread_id: object,
                                        error: type[Exception] | None, stored_in: str | None) -> None:
    model = _model()
    made = adapter(cold_memory, conversation_id, budget=BUDGET_TOKENS, shared_across_threads=shared)
    agent = build(model, made, None if thread_id is None else InMemorySaver())
    config = {} if thread_id is None else _thread(thread_id)
    if error is None:
        agent.invoke({"messages": [HumanMessage("hello")]}, config)
        assert cold_memory.conversations() == [stored_in]
        assert _stored(cold_memory, str(stored_in)) == ["hello", "re: hello"]
        return
    with pytest.raises(error) as err:
        agent.invoke({"messages": [HumanMessage("hello")]}, config)
    assert model.received == []  # refused before the model was called
    assert cold_memory.conversations() == []  # and before anything was written
    assert err.value.field == "thread_id"  # type: ignore[attr-defined]
    name = adapter.__name__
    if error is ThreadMismatch:
        assert str(err.value) == (
            f"thread_id: {name} was made for conversation_id 'alice' but this run's thread_id is 'bob': every "
            "thread would be written into that one conversation and read the others' turns; nothing was "
            "written: make it without conversation_id (one conversation per thread_id), or with "
            "shared_across_threads=True if the threads are meant to share one conversation")
    else:
        assert str(err.value) == (
            f"thread_id: {name} was made without conversation_id, so each run's conversation is its "
            "config['configurable']['thread_id'], and this run has none; nothing was written: invoke with "
            "{'configurable': {'thread_id': ...}}, or make the "
            f"{name} with conversation_id=... for one fixed conversation")


@pytest.mark.parametrize(("adapter", "build"), ADAPTERS)
def test_shared_across_threads_is_one_conversation_by_choice(cold_memory: Memory, adapter: type,
                                                              build: Build) -> None:
    model = _model()
    agent = build(model, adapter(cold_memory, "team", shared_across_threads=True), InMemorySaver())
    _ask(agent, "alice", "alice: standup at 9")
    _ask(agent, "bob", "bob: when is standup?")
    # the opt-in: bob's input holds alice's turn, as the shared conversation does
    assert _turns(model.received[-1]) == ["alice: standup at 9", "re: alice: standup at 9", "bob: when is standup?"]
    assert cold_memory.conversations() == ["team"]


# (the arguments, the field the error names)
BAD_ARGUMENTS = [
    ({"shared_across_threads": True}, "shared_across_threads"),  # sharing with no conversation to share
    ({"conversation_id": ""}, "conversation_id"),  # an empty id
    ({"max_threads": 0}, "max_threads"),  # a cache of no thread
]


@pytest.mark.parametrize(("kwargs", "field"), BAD_ARGUMENTS)
@pytest.mark.parametrize("adapter", [TiermemHooks, TiermemMiddleware])
def test_bad_arguments_are_refused_when_the_adapter_is_made(cold_memory: Memory, adapter: type,
                                                             kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        adapter(cold_memory, **kwargs)
    assert err.value.field == field


@pytest.mark.parametrize(("adapter", "build"), ADAPTERS)
def test_threads_past_the_bound_read_the_log_again_storing_nothing_twice(cold_memory: Memory, adapter: type,
                                                                         build: Build) -> None:
    model = _model()
    made = adapter(cold_memory, max_threads=2)
    agent = build(model, made, InMemorySaver())
    for t in ("a", "b", "c"):
        _ask(agent, t, f"{t}: one")
    assert made.threads.cached_threads() == ["b", "c"]  # the least recently used went
    _ask(agent, "a", "a: two")  # its sync instance made again: reads the log
    assert made.threads.cached_threads() == ["c", "a"]
    assert _stored(cold_memory, "a") == ["a: one", "re: a: one", "a: two", "re: a: two"]
    assert _turns(model.received[-1]) == ["a: one", "re: a: one", "a: two"]


THREADS = 4  # OS threads, each running its own LangGraph thread on the one graph
TURNS = 3


@pytest.mark.parametrize(("adapter", "build"), ADAPTERS)
def test_threads_run_at_once_on_one_graph_stay_apart(cold_memory: Memory, adapter: type, build: Build) -> None:
    model = _model()
    agent = build(model, adapter(cold_memory, budget=BUDGET_TOKENS), InMemorySaver())
    start = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    def run(name: str) -> None:
        start.wait()
        try:
            for turn in range(TURNS):
                _ask(agent, name, f"{name}: {turn}")
        except BaseException as e:  # reported by the test's thread below
            failures.append(e)

    names = [f"t{i}" for i in range(THREADS)]
    workers = [threading.Thread(target=run, args=(n,)) for n in names]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert failures == []
    for n in names:
        assert _stored(cold_memory, n) == [x for t in range(TURNS) for x in (f"{n}: {t}", f"re: {n}: {t}")]
    for sent in model.received:  # each input holds one thread's turns only
        assert len({str(m.content).removeprefix("re: ").split(":")[0] for m in sent if m.type in CONTEXT_ROLES}) == 1


@pytest.mark.parametrize(("adapter", "build"), ADAPTERS)
def test_ainvoke_of_two_threads_at_once_keeps_them_apart(cold_memory: Memory, adapter: type,
                                                          build: Build) -> None:
    model = _model()
    agent = build(model, adapter(cold_memory, budget=BUDGET_TOKENS), InMemorySaver())

    async def both() -> None:
        for turn in range(2):
            await asyncio.gather(*(agent.ainvoke({"messages": [HumanMessage(f"{n}: {turn}")]}, _thread(n))
                                   for n in ("alice", "bob")))

    asyncio.run(both())
    for n in ("alice", "bob"):
        assert _stored(cold_memory, n) == [f"{n}: 0", f"re: {n}: 0", f"{n}: 1", f"re: {n}: 1"]
