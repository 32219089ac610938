"""`TiermemMiddleware(..., timezone=)` (LangChain v1 `create_agent`) and
`TiermemHooks(..., timezone=)` (LangGraph `create_react_agent`): the model's input is
planned in the user's zone, against the real packages with langchain-core's fake chat
model. Before, neither had a zone of its own: every context was in the memory's (UTC)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("langchain.agents")
pytest.importorskip("langgraph")
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_helpers import RecordingFakeModel
from zone_helpers import BAD_ZONE, BUDGET, HEADINGS, LA, QUESTION, headings, seed

from tiermem import Memory
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.adapters.langgraph import TiermemHooks
from tiermem.tiers.errors import ValidationError


def _model() -> RecordingFakeModel:
    model = RecordingFakeModel(messages=iter([AIMessage("On Friday.")]))
    model.received = []
    return model


def _middleware(mem: Memory, zone: str | None, model: RecordingFakeModel) -> Any:
    return create_agent(model, [], middleware=[TiermemMiddleware(mem, "c", budget=BUDGET, timezone=zone)])


def _hooks(mem: Memory, zone: str | None, model: RecordingFakeModel) -> Any:
    from langgraph.prebuilt import create_react_agent

    hooks = TiermemHooks(mem, "c", budget=BUDGET, timezone=zone)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # create_react_agent, deprecated in LangGraph 1.x
        return create_react_agent(model, [], pre_model_hook=hooks.pre_model_hook,
                                  post_model_hook=hooks.post_model_hook)


AGENTS: dict[str, Callable[[Memory, str | None, RecordingFakeModel], Any]] = {
    "middleware": _middleware, "hooks": _hooks}


@pytest.mark.parametrize("zone", [
    LA,  # the agent's user is in Los Angeles: Friday evening, with its offset
    None,  # no zone: the memory's (UTC), as before
])
@pytest.mark.parametrize("kind", list(AGENTS))
def test_the_model_gets_a_context_in_the_agents_zone(cold_memory: Memory, kind: str, zone: str | None) -> None:
    seed(cold_memory, "c")
    model = _model()
    AGENTS[kind](cold_memory, zone, model).invoke({"messages": [HumanMessage(QUESTION)]})
    assert HEADINGS[zone] in headings(m.content for m in model.received[0])


@pytest.mark.parametrize("make", [
    lambda mem: TiermemMiddleware(mem, "c", timezone=BAD_ZONE),  # create_agent's middleware
    lambda mem: TiermemHooks(mem, "c", timezone=BAD_ZONE),  # LangGraph's hooks
])
def test_a_bad_zone_is_refused_when_the_adapter_is_made(cold_memory: Memory,
                                                         make: Callable[[Memory], object]) -> None:
    with pytest.raises(ValidationError) as e:
        make(cold_memory)
    assert e.value.field == "timezone" and BAD_ZONE in e.value.problem
    assert cold_memory.conversations() == []
