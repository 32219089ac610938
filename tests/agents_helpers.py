"""The Agents SDK `model_input_filter` tests' shared parts: a memory as those tests open
it, the filter's run configuration, and one turn run streamed or not. Import after the
test module's `pytest.importorskip("agents")`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner

from tiermem.adapters.openai_agents import TiermemSession
from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder


def open_memory(data: Path, embedder: FastEmbedder) -> Memory:
    """A Memory without the hot tier or background indexing: what a turn stores is
    planned at the next model call, whatever the machine's load."""
    return Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False)


def filter_config(session: TiermemSession, budget: int, **settings: Any) -> RunConfig:
    """A run configuration with the session's `model_input_filter(budget)`, no tracing."""
    return RunConfig(call_model_input_filter=session.model_input_filter(budget), tracing_disabled=True, **settings)


async def run_turn(agent: Agent[Any], text: str, session: Any, config: RunConfig, *, streamed: bool) -> None:
    """One turn over `session`: `Runner.run_streamed`, its events read to the end, or `Runner.run`."""
    if streamed:
        result = Runner.run_streamed(agent, text, session=session, run_config=config)
        async for _event in result.stream_events():
            pass
    else:
        await Runner.run(agent, text, session=session, run_config=config)
