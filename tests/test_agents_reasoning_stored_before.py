"""An Agents run over a store the previous release wrote gets no provider 400: since
593097c a reasoning item's `summary` is required on append, and a row stored before with
`summary: null` (or none) is read and sent by a context with `summary: []`, but
`TiermemSession.get_items` returned it verbatim (`to_responses_rows(verbatim=True)`), so
the SDK sent `summary: null` (or no summary) to the model, which the provider refuses.
get_items now returns it in the form append admits (`tiers.formats.as_appended`), and
every other row as stored, as the SDK's `SQLiteSession` returns it. Real SQLite, the old
row written behind tiermem's back, the real `openai-agents` Runner with its ScriptedModel.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
from agents import Agent, RunConfig, Runner, SQLiteSession
from agents.testing import ScriptedModel, assistant_message
from cold_helpers import rewrite_stored

from tiermem.adapters.openai_agents import TiermemSession
from tiermem.config import Config
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

CONV = "c"
ASK = {"role": "user", "content": "Which fare is cheaper?"}
# a current row with explicit nulls besides the summary: returned as stored, nulls kept
KEPT = {"type": "reasoning", "id": "r0", "summary": [], "encrypted_content": None, "status": None}
CURRENT = {"type": "reasoning", "id": "r", "summary": []}  # the form append admits today
REPLY = {"role": "assistant", "content": "The Tuesday one."}
REASONING_AT = 2  # the old reasoning row's position
TURN = "And the return leg?"

# the row as the release before 593097c stored it
STORED_BEFORE = {
    # an explicit null (an SDK reply's model_dump() of a reasoning item with no summary)
    "null": '{"type": "reasoning", "id": "r", "summary": null}',
    # no summary at all
    "absent": '{"type": "reasoning", "id": "r"}',
}


def _open(data: Path, embedder: FastEmbedder) -> Memory:
    return Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False)


def old_store(data: Path, embedder: FastEmbedder, stored_json: str) -> None:
    """A store with the reasoning row as the older release stored it."""
    with _open(data, embedder) as mem:
        mem.append_many(CONV, [ASK, KEPT, CURRENT, REPLY])
        key = mem.cold.key_of("default", CONV)
        assert key is not None
    rewrite_stored(Config(data_dir=data).db_path, key, [(REASONING_AT, "body", stored_json)])


async def run_turn(session: Any) -> list[dict[str, Any]]:
    """One agent turn over the session; the input the model received."""
    model = ScriptedModel([[assistant_message("Also Tuesday.", item_id="msg_1")]])
    agent = Agent(name="fares", instructions="Be brief.", model=model)
    await Runner.run(agent, TURN, session=session, run_config=RunConfig(tracing_disabled=True))
    (call,) = model.calls
    return [dict(i) for i in call.input]


@pytest.mark.parametrize("stored_json", STORED_BEFORE.values(), ids=STORED_BEFORE.keys())
def test_the_model_receives_it_with_an_empty_summary(tmp_path: Path, embedder: FastEmbedder,
                                                     stored_json: str) -> None:
    old_store(tmp_path / "d", embedder, stored_json)
    with _open(tmp_path / "d", embedder) as mem:
        session = TiermemSession(mem, CONV)
        sent = asyncio.run(run_turn(session))
        assert [i for i in sent if i.get("type") == "reasoning"] == [KEPT, CURRENT]
        assert asyncio.run(session.get_items(limit=-1))[:REASONING_AT + 2] == [ASK, KEPT, CURRENT, REPLY]
        # the log keeps the row as stored
        assert mem.history(CONV)[REASONING_AT].body == json.loads(stored_json)


def test_every_other_row_is_returned_as_the_sdks_own_session_returns_it(tmp_path: Path,
                                                                       embedder: FastEmbedder) -> None:
    # a store this release wrote: get_items and the model's input equal SQLiteSession's
    with _open(tmp_path / "d", embedder) as mem:
        ours = TiermemSession(mem, CONV)
        ref = SQLiteSession("ref")
        for s in (ours, ref):
            asyncio.run(s.add_items([ASK, KEPT, CURRENT, REPLY]))
        assert asyncio.run(ours.get_items()) == asyncio.run(ref.get_items()) == [ASK, KEPT, CURRENT, REPLY]
        assert asyncio.run(run_turn(ours)) == asyncio.run(run_turn(ref))
