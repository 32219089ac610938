"""`TiermemSession.add_items` stores a turn whose tool output holds a lone surrogate.

A tool that lists a directory returns a file name decoded with `surrogateescape`
(`caf\\udce9.txt`). The SDK's `SQLiteSession` stores the turn; the store refuses the
string (not UTF-8), so the session kept the run's question and lost its call, output and
reply (the reviewer's repro_surrogate_tool_output.py). Now the adapter stores every such
string with U+FFFD in its place and logs one warning per add
(`openai_agents.without_lone_surrogates`); the library still refuses it, named by its
field (tests/test_lone_surrogate_field_name.py). Real SQLite, the real `openai-agents`
Runner, streamed and not, with and without the filter, with its ScriptedModel.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
from agents import Agent, RunConfig, SQLiteSession, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from agents_helpers import filter_config, open_memory, run_turn

from tiermem.adapters.openai_agents import TiermemSession, without_lone_surrogates
from tiermem.tiers.embed_onnx import FastEmbedder

BAD_NAME = "caf\udce9.txt"  # b"caf\xe9.txt" decoded as UTF-8 with surrogateescape
STORED_NAME = "caf\ufffd.txt"
BUDGET_TOKENS = 2000
LOGGER = "tiermem.adapters.openai_agents"


@function_tool
def ls(path: str) -> str:
    """List a directory."""
    return f"files: {BAD_NAME}, notes.md"


def shape(items: list[Any]) -> list[str]:
    return [dict(i).get("type") or dict(i)["role"] for i in items]


async def two_turns(session: Any, *, streamed: bool, filtered: bool) -> list[Any]:
    model = ScriptedModel([[function_call("ls", {"path": "/"}, call_id="call_1")], [assistant_message("Two files.")],
                           [assistant_message("ok")]])
    agent = Agent(name="a", instructions="x", model=model, tools=[ls])
    config = (filter_config(session, BUDGET_TOKENS) if filtered
              else RunConfig(tracing_disabled=True))
    await run_turn(agent, "List /", session, config, streamed=streamed)
    await run_turn(agent, "Thanks.", session, config, streamed=streamed)
    return list(await session.get_items())


@pytest.mark.parametrize("filtered", [False, True])
@pytest.mark.parametrize("streamed", [False, True])
def test_a_tool_output_with_a_lone_surrogate_is_stored_whole(tmp_path: Path, embedder: FastEmbedder,
                                                             caplog: pytest.LogCaptureFixture, streamed: bool,
                                                             filtered: bool) -> None:
    sqlite = asyncio.run(two_turns(SQLiteSession("s", str(tmp_path / "s.db")), streamed=streamed, filtered=False))
    with open_memory(tmp_path / "d", embedder) as mem, caplog.at_level(logging.WARNING, logger=LOGGER):
        got = asyncio.run(two_turns(TiermemSession(mem, "c"), streamed=streamed, filtered=filtered))
    # the whole turn, as the SDK's own session stores it (before: the question alone, then
    # the second turn; the call, its output and the reply lost)
    assert shape(got) == shape(sqlite) == ["user", "function_call", "function_call_output", "message", "user",
                                           "message"]
    assert got[2]["output"] == f"files: {STORED_NAME}, notes.md"
    warned = [r for r in caplog.records if r.name == LOGGER and "lone surrogate" in r.getMessage()]
    assert len(warned) == 1  # once, for the add that held it


# (case, the items as `_plain` gives them, as stored, the strings changed)
SCRUBS: list[tuple[str, list[Any], list[Any], int]] = [
    # nothing to replace: the items themselves
    ("clean", [{"role": "user", "content": "café"}], [{"role": "user", "content": "café"}], 0),
    # a lone low surrogate in a nested part
    ("nested part", [{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text",
                                                                                  "text": BAD_NAME}]}],
     [{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": STORED_NAME}]}], 1),
    # a key and a value, each counted
    ("key and value", [{"role": "user", "content": "a\ud800", "metadata": {"k\udfff": 1}}],
     [{"role": "user", "content": "a\ufffd", "metadata": {"k\ufffd": 1}}], 2),
    # a pair written as two code points: joined into its character, as JSON decodes one
    ("surrogate pair", [{"role": "user", "content": "\ud83d\ude00 hi"}], [{"role": "user", "content": "\U0001f600 hi"}],
     1),
]


@pytest.mark.parametrize(("label", "items", "stored", "changed"), SCRUBS, ids=[c[0] for c in SCRUBS])
def test_without_lone_surrogates(label: str, items: list[Any], stored: list[Any], changed: int) -> None:
    out, n = without_lone_surrogates(items)
    assert (out, n) == (stored, changed)
    if not changed:
        assert out is items  # not copied where nothing changes
