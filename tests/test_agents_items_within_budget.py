"""The Agents SDK adapter's items stay within the budget as SENT (docs/design.md invariant
5): a Chat Completions log plans as one assistant message with N tool calls, which as
Responses items is 1 + N items, each with a message's overhead, so the items sent took
more than the plan counted (2058 tokens at budget 2000). `context_items` and the model
input filter now count the items and plan with less room where they are over, the room
found by what-if plans (so the one recorded plan is not halved by a new epoch).

Fails on the code before: every budget below the whole log is overshot (budget 1500:
1538 sent, 2000: 2058, 2500: 2548)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("agents")

from tiermem import Memory
from tiermem.adapters.openai_agents import TiermemSession
from tiermem.tiers.tokens import REPLY_PRIMING_TOKENS, BpeTokenCounter, message_tokens

ROUNDS = 40  # each a question, a reply of CALLS tool calls, their outputs, a closing answer
CALLS = 4
QUESTION = "and the flights?"


def _log(i: int) -> list[dict[str, Any]]:
    calls = [{"id": f"c{i}_{k}", "type": "function", "function": {"name": "f", "arguments": json.dumps({"k": k})}}
             for k in range(CALLS)]
    return [{"role": "user", "content": f"question {i} about flights"},
            {"role": "assistant", "content": "Checking.", "tool_calls": calls},
            *({"role": "tool", "tool_call_id": f"c{i}_{k}", "content": "ok"} for k in range(CALLS)),
            {"role": "assistant", "content": "done"}]


def _sent(items: list[dict[str, Any]]) -> int:
    counter = BpeTokenCounter()  # the memory's own tokenizer
    return REPLY_PRIMING_TOKENS + sum(message_tokens(counter, i) for i in items)


# (budget) -- all below the whole log's ~2700 tokens as items; each overshot before
BUDGETS = [1500, 2000, 2500]


@pytest.mark.parametrize("budget", BUDGETS)
def test_context_items_within_budget(cold_memory: Memory, budget: int) -> None:
    for i in range(ROUNDS):
        cold_memory.append_many("c", _log(i))
    cold_memory.append("c", {"role": "user", "content": QUESTION})
    items = TiermemSession(cold_memory, "c").context_items(QUESTION, budget)
    sent = _sent(items)
    assert sent <= budget
    assert sent >= budget * 0.9  # planned once recorded: not halved by an epoch started again


@pytest.mark.parametrize("budget", BUDGETS)
def test_model_input_filter_within_budget(cold_memory: Memory, budget: int) -> None:
    # a non-streamed run: the SDK reads the history, saves the new question, then asks the
    # filter (`model_input_filter`'s `_filter_items`) for each model call's input
    session = TiermemSession(cold_memory, "c")
    for i in range(ROUNDS):
        cold_memory.append_many("c", _log(i))
    q = {"role": "user", "content": QUESTION}
    history = asyncio.run(session.get_items())
    asyncio.run(session.add_items([q]))
    for call in range(3):  # the first call starts an epoch; later ones extend it
        items = session._filter_items([*history, q], budget)
        sent = _sent(items)
        assert sent <= budget, (call, sent)
        assert items[-1]["content"] == QUESTION
        if call == 0:
            assert sent >= budget * 0.9
