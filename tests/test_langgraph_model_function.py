"""`TiermemHooks` on `create_react_agent(pick_model, ...)`, where the model is a function
(`pick_model(state, runtime)` returns the chat model of each call): the default
`system_messages=None` now calls the function in the pre_model_hook, with the state and
runtime the hook gets, and picks the form from the model it returns ("in_turn" for
ChatAnthropic, "as_is" for any other). An async model function, which a sync hook cannot
call, is refused when the hooks are made unless system_messages is given.

Before, a model function could not be told, so the default sent "as_is", and a function
returning a ChatAnthropic failed at the first call that retrieved anything:
ChatAnthropic raised "Received multiple non-consecutive system messages" before sending.

Against the real packages (langgraph, langchain-anthropic, the anthropic SDK) and the
scripted Messages API server of `test_langchain_anthropic_system` (a real HTTP server on
127.0.0.1); every request it receives is checked against Anthropic's request rules.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.prebuilt")
pytest.importorskip("langchain_anthropic")
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_helpers import weather
from langgraph.prebuilt import create_react_agent
from test_langchain_anthropic_auto import (
    THREAD,
    OpenAIStyleModel,
    _check_anthropic_requests,
    _dumped,
    _fake_script,
    _memory,
)
from test_langchain_anthropic_system import (
    BUDGET_TOKENS,
    CONVERSATION,
    TURNS,
    MessagesServer,
    _prefill,
    messages_server,  # noqa: F401  # the `server` fixture
)

from tiermem import Memory
from tiermem.adapters.langgraph import TiermemHooks, model_function
from tiermem.errors import ValidationError
from tiermem.planner.render import HEADERS
from tiermem.tiers.embed import Embedder

# the session embedder with each distinct text's vector computed once for the session
# (conftest.shared_vectors): every test prefills memories with the same notes, re-embedded
# for each new store (~1 s a store); what is checked is the messages the adapters send
pytestmark = pytest.mark.usefixtures("shared_vectors")

ModelFunction = Callable[[Any, Any], Any]


def _agent(pick: ModelFunction, mem: Memory, **kw: Any) -> Any:
    # the function given to the hooks and the graph alike, as the README shows
    hooks = TiermemHooks(mem, CONVERSATION, budget=BUDGET_TOKENS, shared_across_threads=True, model=pick, **kw)
    return create_react_agent(pick, [weather], pre_model_hook=hooks.pre_model_hook,
                              post_model_hook=hooks.post_model_hook)


def _bound_claude(server: MessagesServer) -> ModelFunction:
    claude = server.model().bind_tools([weather])  # a dynamic model comes with its tools bound
    return lambda state, runtime: claude


def _claude_by_context(server: MessagesServer) -> ModelFunction:
    # picks by the run's context, which only the runtime passed to the function carries
    claude, other = server.model().bind_tools([weather]), OpenAIStyleModel(messages=iter([]))
    return lambda state, runtime: claude if runtime.context["provider"] == "anthropic" else other


def _claude_by_state(server: MessagesServer) -> ModelFunction:
    # picks by the state: ChatAnthropic once the state holds a message (always, in a run)
    claude, other = server.model().bind_tools([weather]), OpenAIStyleModel(messages=iter([]))
    return lambda state, runtime: claude if state["messages"] else other


@pytest.mark.parametrize("system", [
    "You are a travel agent.",  # the adapter's system prompt opens the context
    None,  # none: a pinned block opens it
])
@pytest.mark.parametrize("make", [
    pytest.param(_bound_claude, id="returns-chatanthropic"),  # the plain case
    pytest.param(_claude_by_context, id="picks-by-runtime-context"),  # the runtime reaches the function
    pytest.param(_claude_by_state, id="picks-by-state"),  # the state reaches the function
])
def test_a_model_function_returning_chatanthropic_runs(cold_memory: Memory, server: MessagesServer,
                                                       make: Callable[[MessagesServer], ModelFunction],
                                                       system: str | None) -> None:
    _prefill(cold_memory)
    agent = _agent(make(server), cold_memory, system=system)  # no system_messages given
    for turn in TURNS:
        agent.invoke({"messages": [HumanMessage(turn)]}, THREAD, context={"provider": "anthropic"})
    _check_anthropic_requests(server.bodies)  # 3 requests, each one the API takes, retrieved in a user turn


def test_a_model_function_to_an_openai_style_model_stays_as_is(tmp_path: Path, embedder: Embedder) -> None:
    def inputs(mem: Memory, **kw: Any) -> list[Any]:
        model = OpenAIStyleModel(messages=iter(_fake_script()))
        model.received = []
        agent = _agent(lambda state, runtime: model, mem, system="You are a travel agent.", **kw)
        for i, turn in enumerate(TURNS):
            agent.invoke({"messages": [HumanMessage(turn, id=f"h{i}")]}, THREAD)
        return model.received

    with _memory(tmp_path, embedder, "default") as default_mem, _memory(tmp_path, embedder, "as_is") as as_is_mem:
        _prefill(default_mem)
        _prefill(as_is_mem)
        default, as_is = inputs(default_mem), inputs(as_is_mem, system_messages="as_is")
    assert len(default) == len(_fake_script())
    assert _dumped(default) == _dumped(as_is)  # byte for byte what "as_is" sends
    assert any(isinstance(m, SystemMessage) and HEADERS["retrieved"] in m.text and i > 0
               and not isinstance(call[i - 1], SystemMessage) for call in default for i, m in enumerate(call))


def test_the_function_is_asked_once_more_a_call_with_the_runs_runtime(cold_memory: Memory,
                                                                      server: MessagesServer) -> None:
    claude = server.model().bind_tools([weather])
    seen: list[tuple[int, Any]] = []

    def pick(state: Any, runtime: Any) -> BaseChatModel:
        seen.append((len(state["messages"]), runtime.context))
        return claude  # type: ignore[return-value]

    _prefill(cold_memory)
    agent = _agent(pick, cold_memory)
    agent.invoke({"messages": [HumanMessage(TURNS[0])]}, THREAD, context={"user": "u1"})
    assert len(server.bodies) == 1
    # the hook's call (the state's one message) and the graph's (create_react_agent puts the
    # hook's input, system messages and retrieved turns with it, in the state's messages), both
    # with the run's context
    assert len(seen) == 2 and seen[0] == (1, {"user": "u1"}) and seen[1][1] == {"user": "u1"} and seen[1][0] > 1


def test_an_async_model_function_needs_a_form(cold_memory: Memory, server: MessagesServer) -> None:
    claude = server.model().bind_tools([weather])

    async def pick(state: Any, runtime: Any) -> Any:
        return claude

    assert model_function(pick) and not model_function(claude) and not model_function("anthropic:claude")
    with pytest.raises(ValidationError, match="async model function") as refused:
        TiermemHooks(cold_memory, CONVERSATION, model=pick)
    assert refused.value.field == "system_messages" and "pick" in str(refused.value)
    assert cold_memory.conversations() == []  # nothing written
    # given, it runs (ainvoke: an async model function is the graph's only in an async run)
    _prefill(cold_memory)
    agent = _agent(pick, cold_memory, system="You are a travel agent.", system_messages="in_turn")

    async def run() -> None:
        for turn in TURNS:
            await agent.ainvoke({"messages": [HumanMessage(turn)]}, THREAD)

    asyncio.run(run())
    _check_anthropic_requests(server.bodies)
