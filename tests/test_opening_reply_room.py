"""A context that opens with the model's reply keeps room for Anthropic's opening message.

`to_anthropic` opens a request whose first turn is the assistant's with a user message
(`CONTINUED_TEXT`: the API refuses that opening), and that message is sent, so it is
counted. The planner kept room for it only where a round the question came after opened
the context; a context whose older tail gave way so that a plain reply opens it (a tool
round, its reply, then the question) was planned to the budget and sent over it (review
r_c8: 594 planned of 599, 603 sent). Now `Planner._opening_room` keeps the room wherever
the context opens with the model's turn (docs/design.md invariant 5), in every stored form
and context format, in a context planned anew and in one that extends an epoch.
Real SQLite, the real tokenizer, the real adapter.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.adapters.anthropic import CONTINUED_TEXT, to_anthropic

pytestmark = pytest.mark.usefixtures("shared_vectors")

CHAT = "We talked about the trip itinerary and the hotel near the station. "
OUTPUT = "ERROR line 42: connection refused to db-primary:5432; " * 40
# budgets from where the reply opens the context to where older turns come in
BUDGETS = range(180, 560, 12)
QUERY = "what did we say about the hotel near the station?"  # a recall: retrieved turns fill the room


def _log(mem: Memory) -> None:
    """Turns of varied length, a tool round, its reply, then a question."""
    for i in range(6):
        mem.append_many("t", [{"role": "user", "content": f"turn {i}: " + CHAT * (1 + i % 4)},
                              {"role": "assistant", "content": f"answer {i}: " + CHAT * (1 + (3 * i) % 5)}])
    mem.append_many("t", [
        {"role": "user", "content": "Check the logs for the outage please"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "logs", "arguments": json.dumps({"q": "db"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": OUTPUT},
        {"role": "assistant", "content": "Here is what I found: the primary refused connections."},
        {"role": "user", "content": "What's the capital of France?"}])


def _opens_with_reply(req: Any) -> bool:
    first = req.messages[0]["content"]
    return isinstance(first, list) and first[0].get("text") == CONTINUED_TEXT


@pytest.mark.parametrize(("fmt", "record"), [
    # review r_c8's case: the stored form, each call planned anew
    ("as_stored", False),
    # converted to Responses items: the planned messages are counted as sent
    ("responses", False),
    # recorded calls of one epoch: a call may extend the previous context
    ("as_stored", True),
])
def test_the_request_stays_within_the_budget(tmp_path: Path, fmt: str, record: bool) -> None:
    opened = 0
    with Memory(Config(data_dir=tmp_path, context_format=fmt), hot=False, background_indexing=False) as mem:
        _log(mem)
        for budget in BUDGETS:
            for _ in range(2 if record else 1):  # recorded: the second call extends the first
                ctx = mem.context("t", QUERY, budget, record=record)
                req = to_anthropic(ctx, mem)
                assert ctx.tokens <= budget
                assert req.tokens <= budget, (budget, ctx.tokens, req.tokens)
                assert not any("opening user message" in n for n in req.notes), req.notes
                opened += _opens_with_reply(req)
    assert opened  # the sweep holds contexts that open with the reply
