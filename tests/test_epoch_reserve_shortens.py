"""A new epoch's reserve does not drop a turn much larger than what is still to free
(planner.epoch_policy.give_way, planner.build._leave_room): a trimmed tool output is
trimmed further by what is still to free; another turn stays when the fewest of the next
lowest-scored turns free it with fewer tokens.

Fails on the code before: the reserve left out its lowest-scored retrieved turns whole
(`epoch_policy.lowest`), so a 435-token trimmed tool output went to free the last ~125
tokens of a 150-token reserve, and a 400-token turn to free 15.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.planner import epoch_policy
from tiermem.planner.candidates import Candidate
from tiermem.tiers.embed import Embedder
from tiermem.tiers.tokens import messages_tokens

WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]
BUDGET = 1000
CHAT_TURNS = 32  # after the tool round: with it, a little more than the budget holds
TOOL_POSITION = 2
TRIMMED_TOKENS = 435  # the tool output's line at the default 400-token trim allowance, as packed


def cand(position: int, score: float, tokens: int, trimmed: bool = False) -> Candidate:
    text = f"[tool] head\n[... trimmed 900 tokens of this output; ...]\ntail {position}" if trimmed \
        else f"line {position}"
    return Candidate("retrieved", "c", position, score, "test", text, tokens=tokens,
                     fidelity="trimmed" if trimmed else "verbatim")


SMALL = [cand(1, 9.0, 10), cand(2, 8.0, 10), cand(3, 7.0, 10), cand(4, 6.0, 10)]
TOOL = cand(9, 1.0, 400, trimmed=True)  # the lowest-scored, a trimmed tool output
LONG = cand(9, 1.0, 400)  # the lowest-scored, a long chat turn (not shortenable)
WIDE = cand(9, 1.0, 120)  # the lowest-scored, 120 tokens


@pytest.mark.parametrize(("chosen", "tokens", "gone", "shortened", "by"), [
    (SMALL, 15, [4, 3], None, 0),  # short turns: the lowest-scored whole, as `lowest`
    ([*SMALL, TOOL], 50, [], 9, 50),  # a tool output 8x what is to free: trimmed by 50, nothing else goes
    ([*SMALL, TOOL], 250, [9], None, 0),  # it would keep under half of itself: whole
    ([*SMALL, LONG], 15, [4, 3], None, 0),  # a long chat turn stays: two 10-token turns free 15 instead
    ([*SMALL, LONG], 100, [9], None, 0),  # the other turns hold only 40: the long one goes whole
    ([*SMALL, WIDE], 50, [9], None, 0),  # 120 tokens keeping 70 of itself: under half is not much larger
    ([*SMALL, cand(9, 1.0, 60)], 5, [9], None, 0),  # 60 tokens would keep 55 (< 64, the floor): whole
    ([TOOL, cand(8, 0.5, 10)], 30, [8], 9, 20),  # what is lower-scored goes first, then the rest off the tool
])
def test_give_way(chosen: list[Candidate], tokens: int, gone: list[int], shortened: int | None, by: int) -> None:
    way = epoch_policy.give_way(chosen, tokens, lambda c: c.fidelity == "trimmed")
    assert [c.position for c in way.gone] == gone
    assert (way.shorten.position if way.shorten is not None else None) == shortened
    assert way.by == by
    assert way.freed() >= min(tokens, sum(c.tokens for c in chosen))


def test_a_new_epochs_value_counts_a_shortened_turn_as_shown() -> None:
    chosen = [*SMALL, TOOL]
    ranking = epoch_policy.ranked(chosen)
    shown = {("c", c.position) for c in chosen}
    assert epoch_policy.new_epoch_value(ranking, chosen, 50, lambda c: c.fidelity == "trimmed") \
        == pytest.approx(epoch_policy.value(ranking, shown))
    # not shortenable: it goes (the value of the four small turns)
    assert epoch_policy.new_epoch_value(ranking, chosen, 50) == pytest.approx(1 + 1 / 2 + 1 / 3 + 1 / 4)


def test_a_large_tool_output_is_trimmed_further_not_left_out(tmp_path: Path, embedder: Embedder) -> None:
    rnd = random.Random(5)
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("t", {"role": "user", "content": "Look up the reviews of the violin shop please."})
        mem.append("t", {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "reviews", "arguments": "{}"}}]})
        mem.append("t", {"role": "tool", "tool_call_id": "call_1",
                         "content": "violin shop reviews: " + "the violin shop in Paris is lovely, " * 200})
        mem.append("t", {"role": "assistant", "content": "The reviews are glowing."})
        for i in range(CHAT_TURNS):
            mem.append("t", {"role": "user" if i % 2 == 0 else "assistant",
                             "content": " ".join(rnd.sample(WORDS, 6)) + f" and so on ({i})"})
        first = "What did the violin shop reviews say?"
        mem.append("t", {"role": "user", "content": first})
        ctx = mem.context("t", first, BUDGET)  # fills the room, the tool output whole (trimmed)
        [tool] = [it for it in ctx.plan.items if it.positions == [TOOL_POSITION]]
        assert tool.fidelity == "trimmed" and tool.tokens == TRIMMED_TOKENS
        mem.append("t", {"role": "assistant", "content": "They loved it."})
        second = "And what about the glacier and the harbour?"
        mem.append("t", {"role": "user", "content": second})
        ctx = mem.context("t", second, BUDGET)
        # a new epoch on a new user message (the room was used up), leaving its reserve
        assert ctx.plan.cache.new_epoch
        assert ctx.tokens <= BUDGET - epoch_policy.reserve_tokens(BUDGET)
        assert messages_tokens(mem.tokens, ctx.messages) == ctx.tokens  # the plan's tokens are what is sent
        # the tool output, among the lowest-scored, stays: trimmed further, not left out
        [tool] = [it for it in ctx.plan.items if it.positions == [TOOL_POSITION]]
        assert tool.slice == "retrieved" and tool.fidelity == "trimmed"
        assert tool.tokens < TRIMMED_TOKENS and "trimmed further" in tool.reason
        sent = json.dumps(ctx.messages)
        assert f"the full text is position #{TOOL_POSITION} in the log" in sent
        assert f"#{TOOL_POSITION} (a tool output, {TRIMMED_TOKENS} tokens), trimmed further" in ctx.plan.retrieval
