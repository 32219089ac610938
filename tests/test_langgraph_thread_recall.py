"""One graph, many LangGraph threads, and namespace recall: a thread's contexts recall
nothing of the graph's other threads unless the adapter opts in.

`TiermemHooks` (`create_react_agent`) and `TiermemMiddleware` (`create_agent`) keep each
thread in its own conversation (its `thread_id`), all in the adapter's one namespace.
Namespace recall (a context may bring back turns of the namespace's other conversations)
is for one user's other sessions; the threads of one graph are usually other users (a
support backend: one thread per customer). Before, with namespace recall on (the
default), bob asking "what is my PIN?" got alice's PIN in a system note of his model
input. Now an adapter without `conversation_id` plans contexts from the thread's own
conversation (the log says so once, each plan's `retrieval` too), unless it was made with
`recall_across_threads=True`; a fixed `conversation_id` keeps namespace recall on.

Real packages, a fake chat model (no network), LangGraph's `InMemorySaver`.
"""

from __future__ import annotations

import logging
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
from tiermem.errors import ValidationError

BUDGET_TOKENS = 2000
CANARY = "7319-QUOKKA"  # alice's PIN: a string nothing else in the test holds
ALICE_TURNS = (f"My bank card PIN is {CANARY}.", "I live in Porto.")
BOB_QUESTION = "What is my bank card PIN?"  # a recall question alice's first turn answers
ONLY_OWN = "this conversation only: namespace recall is off for this call"  # the plan's note


class EchoModel(GenericFakeChatModel):
    """A fake chat model that answers "ok" and records every input it was sent."""

    received: list[list[BaseMessage]] = []  # noqa: RUF012 (a pydantic field, set per instance below)

    def bind_tools(self, tools: Any, **kwargs: Any) -> EchoModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.received.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage("ok"))])


def _model() -> EchoModel:
    model = EchoModel(messages=iter([]))
    model.received = []
    return model


def _hooks_agent(model: EchoModel, adapter: Any) -> Any:
    from langgraph.prebuilt import create_react_agent

    return create_react_agent(model, [], pre_model_hook=adapter.pre_model_hook,
                              post_model_hook=adapter.post_model_hook, checkpointer=InMemorySaver())


def _middleware_agent(model: EchoModel, adapter: Any) -> Any:
    return create_agent(model, [], middleware=[adapter], checkpointer=InMemorySaver())


# (the adapter's class, how an agent is built on it)
ADAPTERS = [
    pytest.param(TiermemHooks, _hooks_agent, id="langgraph-hooks"),  # create_react_agent's pre/post hooks
    pytest.param(TiermemMiddleware, _middleware_agent, id="agent-middleware"),  # create_agent's middleware
]
Build = Callable[[EchoModel, Any], Any]


def _ask(agent: Any, thread_id: str, text: str) -> None:
    agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread_id}})


def _everything(messages: list[BaseMessage]) -> str:
    """The whole model input as text: every message, system notes included, every field."""
    return "\n".join(repr(m) for m in messages)


# (how the adapters are made: alice's and bob's, whether bob's input may recall alice's PIN)
SETUPS = [
    # one graph, a conversation per thread id: the default keeps bob's input free of alice
    pytest.param("per-thread", {}, False, id="per-thread-default"),
    # one graph, threads that are one user's sessions: opted in, bob's question recalls it
    pytest.param("per-thread", {"recall_across_threads": True}, True, id="per-thread-opted-in"),
    # one adapter per fixed conversation_id (today's behaviour kept): namespace recall on
    pytest.param("fixed", {}, True, id="fixed-conversation-ids"),
]


@pytest.mark.parametrize(("setup", "kwargs", "recalled"), SETUPS)
@pytest.mark.parametrize(("adapter", "build"), ADAPTERS)
def test_a_thread_recalls_another_threads_turns_only_when_opted_in(
        cold_memory: Memory, adapter: type, build: Build, setup: str, kwargs: dict[str, Any],
        recalled: bool) -> None:
    model = _model()
    if setup == "per-thread":
        agent = build(model, adapter(cold_memory, budget=BUDGET_TOKENS, **kwargs))
        alices = bobs = agent
    else:
        alices = build(model, adapter(cold_memory, "alice", budget=BUDGET_TOKENS))
        bobs = build(model, adapter(cold_memory, "bob", budget=BUDGET_TOKENS))
    for turn in ALICE_TURNS:
        _ask(alices, "alice", turn)
    assert CANARY in _everything(model.received[0])  # her own input holds it (the canary is findable)
    sent_before = len(model.received)
    _ask(bobs, "bob", BOB_QUESTION)
    bob_input = _everything(model.received[sent_before])
    # the whole input, system notes included (before: a system note recalling alice's turn
    # held her PIN in bob's input, by default)
    assert (CANARY in bob_input) is recalled
    assert "Porto" not in bob_input or recalled
    # and nothing was written across: bob's conversation holds his turn and the reply only
    assert [m.body.get("content") for m in cold_memory.history("bob")] == [BOB_QUESTION, "ok"]


@pytest.mark.parametrize(("adapter", "build"), ADAPTERS)
def test_the_log_says_recall_is_off_by_the_adapters_default_once(
        cold_memory: Memory, adapter: type, build: Build, caplog: pytest.LogCaptureFixture) -> None:
    agent = build(_model(), adapter(cold_memory, budget=BUDGET_TOKENS))
    with caplog.at_level(logging.INFO, logger="tiermem.adapters._threads"):
        for thread in ("alice", "bob", "carol"):
            _ask(agent, thread, "hello")
    said = [r.getMessage() for r in caplog.records if r.name == "tiermem.adapters._threads"]
    assert said == [f"{adapter.__name__}: namespace recall is off, by the adapter's default for a conversation "
                    "per thread_id: a thread's contexts recall none of the other threads' turns (make it with "
                    "recall_across_threads=True where its threads are one user's sessions)"]


# (namespace_recall for the call, whether the plan's retrieval says it searched one conversation)
PLAN_NOTES = [
    (False, True),  # off for the call (the adapters' default per thread): the plan says so
    (True, False),  # on: the plan says nothing of it (recall may or may not find something)
]


@pytest.mark.parametrize(("namespace_recall", "noted"), PLAN_NOTES)
def test_the_plan_says_when_namespace_recall_was_off(cold_memory: Memory, namespace_recall: bool,
                                                     noted: bool) -> None:
    cold_memory.append("alice", {"role": "user", "content": ALICE_TURNS[0]})
    cold_memory.append("bob", {"role": "user", "content": BOB_QUESTION})
    plan = cold_memory.context("bob", BOB_QUESTION, BUDGET_TOKENS, namespace_recall=namespace_recall).plan
    assert (ONLY_OWN in plan.retrieval) is noted
    assert any(it.conversation_id == "alice" for it in plan.items) is not noted


# (the arguments, the field the error names)
BAD_ARGUMENTS = [
    ({"conversation_id": "bob", "recall_across_threads": True}, "recall_across_threads"),  # a fixed id recalls already
    ({"recall_across_threads": "yes"}, "recall_across_threads"),  # not a bool
]


@pytest.mark.parametrize(("kwargs", "field"), BAD_ARGUMENTS)
@pytest.mark.parametrize("adapter", [TiermemHooks, TiermemMiddleware])
def test_bad_recall_arguments_are_refused_when_the_adapter_is_made(cold_memory: Memory, adapter: type,
                                                                    kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        adapter(cold_memory, **kwargs)
    assert err.value.field == field
    assert cold_memory.conversations() == []
