"""The LangGraph adapters' tests' shared set-up: a scripted fake chat model (answering from
its script, recording every input: `langchain_helpers.RecordingFakeModel`) and an agent
made with each adapter, checkpointed in LangGraph's `InMemorySaver`.

- `scripted(*replies)`: the model, its record empty (`received` is a pydantic field: set
  per instance, so no two tests' models share one list).
- `hooks_agent` / `middleware_agent`: `create_react_agent` with `TiermemHooks`' pre/post
  model hooks, `create_agent` with `TiermemMiddleware`; each with the given tools and
  budget and a checkpointer of its own.
- `adapter_agents(tools, budget)`: both, as `pytest.param`s (ids `langgraph-hooks`,
  `agent-middleware`) of a `build(model, mem)` parameter.

Real packages, no network. Import after the test module's
`pytest.importorskip("langchain.agents")`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage
from langchain_helpers import RecordingFakeModel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from tiermem import Memory
from tiermem.adapters.langchain_agent import TiermemMiddleware
from tiermem.adapters.langgraph import TiermemHooks

AgentBuild = Callable[[RecordingFakeModel, Memory], Any]


def scripted(*replies: BaseMessage) -> RecordingFakeModel:
    """A fake chat model answering `replies` in turn, its record of inputs empty."""
    model = RecordingFakeModel(messages=iter(replies))
    model.received = []
    return model


def hooks_agent(model: RecordingFakeModel, mem: Memory, tools: Sequence[Any] = (), *, budget: int) -> Any:
    """`create_react_agent` with `TiermemHooks(mem, budget=budget)` as its pre/post model hooks."""
    hooks = TiermemHooks(mem, budget=budget)
    return create_react_agent(model, list(tools), pre_model_hook=hooks.pre_model_hook,
                              post_model_hook=hooks.post_model_hook, checkpointer=InMemorySaver())


def middleware_agent(model: RecordingFakeModel, mem: Memory, tools: Sequence[Any] = (), *, budget: int) -> Any:
    """`create_agent` with `TiermemMiddleware(mem, budget=budget)`."""
    return create_agent(model, list(tools), middleware=[TiermemMiddleware(mem, budget=budget)],
                        checkpointer=InMemorySaver())


def adapter_agents(tools: Sequence[Any] = (), *, budget: int) -> list[Any]:
    """Both adapters' agents as `pytest.param`s of a `build(model, mem)` parameter."""

    def hooks(model: RecordingFakeModel, mem: Memory) -> Any:
        return hooks_agent(model, mem, tools, budget=budget)

    def middleware(model: RecordingFakeModel, mem: Memory) -> Any:
        return middleware_agent(model, mem, tools, budget=budget)

    return [pytest.param(hooks, id="langgraph-hooks"),  # create_react_agent's pre/post hooks
            pytest.param(middleware, id="agent-middleware")]  # create_agent's middleware
