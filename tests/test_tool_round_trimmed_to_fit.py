"""The latest tool round (the latest user message, then the model's latest tool-call
message and its results, in order) is always sent: where it does not fit whole, the older
rounds of the loop, the pins and the older turns give way, then its tool outputs are trimmed
further, one allowance shared among them (planner.pack `Packing.fit_round`), and where not
even the least trim fits, the call fails with BudgetTooSmall naming the round and the
tokens needed, never the question without it. The older rounds of a long loop give way
oldest first (named in `plan.left_out`): the loop runs on with its recent rounds.

On the code before, the tail read too few rows to reach the round's call (its outputs,
counted at their trim allowance, passed the budget), so each result was left out as "a tool
result whose call is not shown" and the model got the question alone: it called the same
tools again, one paid call after another, up to the agent's recursion limit; and at a
budget that held the question and its round exactly, a pin was kept and the round dropped.
Real SQLite files, the real embedder and tokenizer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.planner.candidates import ORPHAN_RESULT
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import BudgetTooSmall
from tiermem.tiers.tokens import messages_tokens

pytestmark = pytest.mark.usefixtures("shared_vectors")

ASK = "Compare the weather in these cities"
WORDS_PER_CHAR = 1 / 20  # " city3 line17 temp" is about 20 characters
# a long agent loop: this many rounds of one ~2 kB output each (about 700 tokens untrimmed,
# 400 at the usual trim), read at a budget that holds two or three of them
LONG_ROUNDS, LONG_BUDGET = 30, 1500


def _mem(tmp_path: Path, embedder: FastEmbedder) -> Memory:
    return Memory(Config(data_dir=tmp_path / "d"), embedder=embedder, hot=False, background_indexing=False)


def _round(k: int, chars: int, first: int = 0) -> list[dict[str, Any]]:
    """One assistant message with `k` parallel calls, then their results of about `chars`
    characters each (ids first..first+k-1)."""
    ids = range(first, first + k)
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function", "function": {"name": "fetch", "arguments": json.dumps({"city": f"c{i}"})}}
        for i in ids]}
    return [call, *({"role": "tool", "tool_call_id": f"call_{i}",
                     "content": " ".join(f"city{i} line{j} temp" for j in range(int(chars * WORDS_PER_CHAR)))}
                    for i in ids)]


def _answered_in_order(messages: list[dict[str, Any]], ids: list[str]) -> None:
    """The question, then each call followed by the results of all its calls, in order."""
    i = next(n for n, m in enumerate(messages) if m["role"] == "user" and m["content"] == ASK)
    assert i == len(messages) - 1 - sum(1 + len(m.get("tool_calls") or []) for m in messages[i + 1:]
                                        if m["role"] == "assistant")
    seen: list[str] = []
    waiting: list[str] = []
    for m in messages[i + 1:]:
        if m["role"] == "assistant":
            assert not waiting
            waiting = [c["id"] for c in m["tool_calls"]]
        else:
            assert m["role"] == "tool" and m["tool_call_id"] == waiting.pop(0)
            seen.append(m["tool_call_id"])
    assert not waiting and seen == ids


@pytest.mark.parametrize(("budget", "rounds", "below"), [
    # 6 parallel calls of ~10 kB (each trimmed to 400 tokens: 2,400 in all, past the room)
    pytest.param(2000, [(6, 10_000)], True, id="6x10kB@2000"),
    # 12 parallel calls of ~4 kB at 4,000 tokens
    pytest.param(4000, [(12, 4_000)], True, id="12x4kB@4000"),
    # 2 calls of ~2 kB at a budget of 300: each output gets about a hundred tokens
    pytest.param(300, [(2, 2_000)], True, id="2x2kB@300"),
    # one call whose output is under the usual trim, still past a small budget
    pytest.param(250, [(1, 2_000)], True, id="1x2kB@250"),
    # three rounds one after the other (the agent called again after each): the latest
    # fits at the usual trim (about 870 tokens), the two before it do not fit beside it
    pytest.param(1500, [(2, 6_000), (2, 6_000), (2, 6_000)], False, id="3 rounds of 2x6kB@1500"),
    # the same at 600: the older rounds give way, then the latest's outputs are trimmed further
    pytest.param(600, [(2, 6_000), (2, 6_000), (2, 6_000)], True, id="3 rounds of 2x6kB@600"),
])
def test_the_round_is_sent_its_outputs_trimmed_to_fit(tmp_path: Path, embedder: FastEmbedder, budget: int,
                                                      rounds: list[tuple[int, int]], below: bool) -> None:
    """The latest round is sent (`below`: its outputs trimmed under the usual trim, the
    plan saying to how many tokens); an older round that does not fit beside it is left
    out, named in the plan, never the latest."""
    with _mem(tmp_path, embedder) as mem:
        mem.append("t", {"role": "user", "content": ASK})
        first = 0
        for k, chars in rounds:
            mem.append_many("t", _round(k, chars, first))
            first += k
        ctx = mem.context("t", ASK, budget)
        assert ctx.tokens <= budget and ctx.tokens == messages_tokens(mem.tokens, ctx.messages)
        _answered_in_order(ctx.messages, [f"call_{i}" for i in range(first - rounds[-1][0], first)])
        # each output trimmed (the marker names where the whole text is), none dropped
        assert all("trimmed" in m["content"] for m in ctx.messages if m["role"] == "tool")
        left = ctx.plan.left_out
        assert not [it for it in left if it.reason == ORPHAN_RESULT], left
        assert bool([it for it in ctx.plan.items if "latest tool round" in it.reason]) == below, ctx.plan.items
        if len(rounds) > 1:  # the round before the latest (the question at 0) is named as left out
            before = 1 + sum(1 + k for k, _ in rounds[:-2])
            assert [it for it in left if it.slice == "tail" and it.positions[0] == before], left


def test_a_long_loop_runs_on_with_its_recent_rounds(tmp_path: Path, embedder: FastEmbedder) -> None:
    """Dozens of rounds after one user message (a coding agent) at a fixed budget: each
    call sends the newest rounds that fit, the latest always, and never fails (on the code
    before, every call sent the whole loop, its outputs trimmed shorter each round, and
    from the 30th round on, where not even the least trim fit, failed with BudgetTooSmall)."""
    with _mem(tmp_path, embedder) as mem:
        mem.append("t", {"role": "user", "content": ASK})
        for n in range(LONG_ROUNDS):
            mem.append_many("t", _round(1, 2_000, n))
            if n % 10 == 9:  # a context before some of the model calls (each is an agent step)
                ctx = mem.context("t", ASK, LONG_BUDGET)
                assert ctx.tokens <= LONG_BUDGET and ctx.tokens == messages_tokens(mem.tokens, ctx.messages)
                ids = [m["tool_call_id"] for m in ctx.messages if m["role"] == "tool"]
                # the newest rounds, contiguous, the latest among them, each with its result
                assert ids and ids == [f"call_{i}" for i in range(n + 1 - len(ids), n + 1)], ids
                _answered_in_order(ctx.messages, ids)
                assert len(ids) < n + 1  # the older rounds gave way


@pytest.mark.parametrize(("budget", "k", "chars"), [
    # 12 calls: even at the least trim the calls and outputs take about 660 tokens
    pytest.param(300, 12, 4_000, id="12 calls@300"),
    # 40 calls at 1,000 tokens
    pytest.param(1000, 40, 1_000, id="40 calls@1000"),
])
def test_a_round_that_cannot_fit_is_the_budgets_error(tmp_path: Path, embedder: FastEmbedder, budget: int,
                                                      k: int, chars: int) -> None:
    """Not even the least trim fits: BudgetTooSmall names the round and the budget it
    needs, and at that budget the whole round is sent."""
    with _mem(tmp_path, embedder) as mem:
        mem.append("t", {"role": "user", "content": ASK})
        mem.append_many("t", _round(k, chars))
        with pytest.raises(BudgetTooSmall) as got:
            mem.context("t", ASK, budget)
        exc = got.value
        assert exc.part == BudgetTooSmall.PART_ROUND and exc.needed > budget, exc.problem
        assert f"raise the budget to at least {exc.needed}" in exc.problem
        assert BudgetTooSmall.from_problem(exc.problem) is not None  # a service's 422 reads it back
        ctx = mem.context("t", ASK, exc.needed)
        assert ctx.tokens <= exc.needed
        _answered_in_order(ctx.messages, [f"call_{i}" for i in range(k)])


def test_the_round_outranks_a_pin(tmp_path: Path, embedder: FastEmbedder) -> None:
    """At a budget that holds the question and its round exactly, a pinned system prompt
    too long to fit beside the round even with its output at ROUND_MIN_RESULT_TOKENS gives
    way (on the code before it was kept and the round dropped); a short one stays beside
    the round, its output trimmed (tests/test_tool_round_keeps_top_pin.py)."""
    with _mem(tmp_path, embedder) as mem:
        mem.append("c", {"role": "system",
                         "content": "You are a travel agent. Always check the airline policy tool. " * 20})
        for i in range(30):
            mem.append("c", {"role": "user", "content": f"Question {i} about airline baggage rules for trip {i}. " * 3})
            mem.append("c", {"role": "assistant", "content": f"Answer {i}: the airline allows two bags. " * 3})
        latest = {"role": "user", "content": "Now about the airline baggage fee for my new trip: " + "details. " * 150}
        call = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "policy", "arguments": "{\"airline\": \"X\"}"}}]}
        result = {"role": "tool", "tool_call_id": "call_1", "content": "Fee: 30 EUR per bag. " * 15}
        mem.append_many("c", [latest, call, result])
        need = messages_tokens(mem.tokens, [latest, call, result])
        for budget in (need, need + 20):  # the pin does not fit beside the round: the round wins
            ctx = mem.context("c", latest["content"], budget, record=False)
            assert ctx.tokens <= budget
            assert [it for it in ctx.plan.left_out if it.slice == "pinned" and it.positions == [0]], \
                ctx.plan.left_out  # the plan names the pin it does not show
            sent = ctx.messages[-3:]
            # the round whole (its call's null content is not sent)
            assert sent == [latest, {k: v for k, v in call.items() if v is not None}, result], \
                [m["role"] for m in ctx.messages]
