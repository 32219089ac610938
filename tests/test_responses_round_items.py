"""Responses items: one response's round of calls may hold other items among its calls (a
hosted tool's call, a message, reasoning), and the round goes on through them. A
`web_search_call` between two parallel function calls started a new round, so when the
first call's id was a repeat (`call_0` every round) it went out renamed (`call_0_2`) and
its output kept `call_0`: the call unanswered and the earlier round's `call_0` answered
twice, which the Responses API refuses. The renamer (`unique_item_call_ids`, which the
Agents SDK session's `get_items` and `to_responses` use) and `_RoundCalls` (output types)
read rounds alike."""

from __future__ import annotations

from typing import Any

import pytest

from tiermem.tiers.formats import unique_item_call_ids


def call(cid: str, n: int = 0) -> dict[str, Any]:
    return {"type": "function_call", "call_id": cid, "name": "f", "arguments": f'{{"n": {n}}}'}


def output(cid: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": cid, "output": text}


ROUND_ONE = [{"role": "user", "content": "q1"}, call("call_0"), output("call_0", "r1"),
             {"role": "user", "content": "q2"}]
WEB = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}}
SAID = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]}
THOUGHT = {"type": "reasoning", "id": "rs_1", "summary": []}


@pytest.mark.parametrize("between", [
    WEB,    # a hosted tool's call among the response's calls (the reported case)
    SAID,   # an assistant message among them
    THOUGHT,  # reasoning among them (kept the round before too)
])
def test_an_item_among_one_rounds_calls_keeps_the_round(between: dict[str, Any]) -> None:
    items = [*ROUND_ONE, call("call_0", 2), between, call("call_1"), output("call_0", "r2"), output("call_1", "r3")]
    sent = [(i["type"], i["call_id"]) for i in unique_item_call_ids(items) if "call_id" in i]
    assert sent == [("function_call", "call_0"), ("function_call_output", "call_0"),
                    ("function_call", "call_0_2"), ("function_call", "call_1"),
                    ("function_call_output", "call_0_2"), ("function_call_output", "call_1")]


def test_a_user_message_after_an_unanswered_round_starts_a_new_one() -> None:
    # round one's call never answered (a run stopped there); the user asks again and the
    # next response numbers its call call_0 again: its output answers the new call
    items = [{"role": "user", "content": "q1"}, call("call_0"), {"role": "user", "content": "q2"},
             call("call_0", 2), output("call_0", "r2")]
    sent = [(i["type"], i["call_id"]) for i in unique_item_call_ids(items) if "call_id" in i]
    assert sent == [("function_call", "call_0"), ("function_call", "call_0_2"), ("function_call_output", "call_0_2")]
