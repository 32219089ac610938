"""Room for Anthropic's opening message is kept whatever form the opening turn is stored in.

`to_anthropic` opens a request whose first turn is the model's with a user message
(`CONTINUED_TEXT`), and the planner keeps room for it where the round the question came after
(pack `loop_after`) is shown (`Planner._opening_room`). Which turn is the model's was read from a
chat message's `role` alone, so a round stored as Responses items (`function_call`, no role)
opening the context got no room and the request went up to 9 tokens over the budget (review r_c8:
2,262 sent at 2,261). The role is read as the turn index reads it (`tiers.formats.canonical_role`).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tiermem.planner.build import Planner
from tiermem.planner.candidates import Candidate
from tiermem.planner.pack import Packing, loop_after
from tiermem.tiers.tokens import BpeTokenCounter

OPENING_TOKENS = 9  # what the shim says the opening message costs

CALL_ITEM = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
OUTPUT_ITEM = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
CHAT_CALL = {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
CHAT_RESULT = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
QUESTION = {"role": "user", "content": "And tomorrow?"}


def _room(call: dict[str, Any], result: dict[str, Any], opening: list[dict[str, Any]]) -> int:
    round_ = Candidate("tail", "c", 1, 0.0, "tail", body={"messages": [call, result]}, tokens=10, group=[1, 2])
    pools: dict[str, list[Candidate]] = {"pinned": [], "summary": [], "tail": [round_], "retrieved": []}
    packing = Packing("c", pools, {"pinned": 0, "summary": 0, "retrieved": 0, "tail": 0}, 1000, BpeTokenCounter())
    packing.latest_user = 3
    packing.loop_after = loop_after(pools["tail"], 3)
    packing.chosen["tail"] = [round_]
    shim = SimpleNamespace(_opening_tokens=lambda: OPENING_TOKENS)
    return Planner._opening_room(shim, packing, [*opening, call, result, QUESTION])  # type: ignore[arg-type]


@pytest.mark.parametrize(("call", "result", "opening", "room"), [
    # the review's case: the round stored as Responses items opens the context
    (CALL_ITEM, OUTPUT_ITEM, [], OPENING_TOKENS),
    # the same after a system prompt and a developer message, which Anthropic's form lifts out
    (CALL_ITEM, OUTPUT_ITEM, [{"role": "system", "content": "s"}, {"role": "developer", "content": "d"}],
     OPENING_TOKENS),
    # chat form: kept before too
    (CHAT_CALL, CHAT_RESULT, [], OPENING_TOKENS),
    # a user turn opens the context: no opening message, no room
    (CALL_ITEM, OUTPUT_ITEM, [{"role": "user", "content": "earlier"}], 0),
])
def test_opening_room(call: dict[str, Any], result: dict[str, Any], opening: list[dict[str, Any]],
                      room: int) -> None:
    assert _room(call, result, opening) == room
