"""The retrieved candidates read per call are sized by the conversation's own typical line
(planner.candidates.typical_line_tokens): on a conversation of short lines the read covers
the room, so a recall question's context fills its budget or leaves retrieved turns out.

Fails on the code before: the read was `room // TYPICAL_LINE_TOKENS + 20` with
TYPICAL_LINE_TOKENS = 35 (LoCoMo's lines average 42); on the eviction-pressure eval's
generated lines of 20-25 tokens the whole pool fitted and the rest of the room stayed empty
(its mean context at 2,000 tokens fell from 1,995 to 1,834, every plan holding 73-74
retrieved turns and leaving none out). Real SQLite, a real embedder.

An extension counts as the query's needs only what the read of TYPICAL_LINE_TOKENS lines
chose (the rest is `Candidate.fill_only`): fails on 857ad95, which sized the read alone,
where another query on the same log after a middle eviction wanted all 74 turns of the
longer read and started a new epoch ("room used up") instead of extending (CI's
test_late_pins), a cost change for short-line conversations."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tiermem import Memory
from tiermem.planner.candidates import (
    MIN_TYPICAL_LINE_TOKENS,
    RETRIEVED_LINE_OVERHEAD_TOKENS,
    TYPICAL_LINE_SAMPLE_TURNS,
    TYPICAL_LINE_TOKENS,
    typical_line_tokens,
)
from tiermem.planner.middle import MIDDLE_CAP_SHARE
from tiermem.tiers.turncache import TurnTable

TURNS = 600  # messages: far more than any of the budgets below can show
WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]
QUESTION = "What did I say about the violin and the harbour?"  # a recall question: the retrieved share fills


def _conversation(memory: Memory, words: int) -> None:
    """TURNS turns of `words` words each, every one naming some of the question's words."""
    rnd = random.Random(7)
    rows = [{"role": "user" if i % 2 == 0 else "assistant",
             "content": " ".join(["violin", "harbour"] + [rnd.choice(WORDS) for _ in range(words - 2)])}
            for i in range(TURNS)]
    memory.append_many("c", rows)


# (words per turn, budget): lines shorter than TYPICAL_LINE_TOKENS, and one of LoCoMo's length
CASES = [
    (12, 2000),  # ~20-token lines, as the pressure eval's: the case that regressed
    (12, 4000),  # the same at a larger room: the constant's read fell further short
    (8, 1000),  # very short lines at a small room
    (30, 2000),  # LoCoMo-length lines: the constant's read covers them (unchanged)
]


@pytest.mark.parametrize(("words", "budget"), CASES)
def test_short_lines_fill_the_room_or_leave_retrieved_turns_out(cold_memory: Memory, words: int,
                                                                 budget: int) -> None:
    _conversation(cold_memory, words)
    ctx = cold_memory.context("c", QUESTION, budget=budget)
    plan = ctx.plan
    shown = [it for it in plan.items if it.slice == "retrieved"]
    assert shown, plan.explain()
    longest = max(it.tokens for it in plan.items)
    left = [it for it in plan.left_out if it.slice == "retrieved"]
    # the room is full to within one line, or the read had more than fitted
    assert plan.tokens >= budget - longest or left, (plan.tokens, budget, longest, len(shown), plan.explain())


def _table(tokens: list[int]) -> TurnTable:
    n = len(tokens)
    return TurnTable("c", np.arange(n, dtype=np.int64), np.array(tokens, dtype=np.int64),
                     np.arange(n, dtype=np.float64), np.zeros(n, dtype=np.int64), None, np.zeros(n, dtype=bool))


# (message tokens of the turns, typical line expected)
TYPICAL = [
    ([40] * 50, TYPICAL_LINE_TOKENS),  # LoCoMo-length turns: the constant (their reads stay as they were)
    ([18] * 50, 18 + RETRIEVED_LINE_OVERHEAD_TOKENS),  # short turns: their own length plus the separator
    ([10] * 30 + [200] * 20, 10 + RETRIEVED_LINE_OVERHEAD_TOKENS),  # a median: a few long turns do not move it
    ([1] * 50, MIN_TYPICAL_LINE_TOKENS),  # tiny turns: the floor bounds the read
    ([], TYPICAL_LINE_TOKENS),  # no turns yet
    ([10] * TYPICAL_LINE_SAMPLE_TURNS + [40] * TYPICAL_LINE_SAMPLE_TURNS, TYPICAL_LINE_TOKENS),  # the newest only
]


@pytest.mark.parametrize(("tokens", "typical"), TYPICAL)
def test_the_typical_line(tokens: list[int], typical: int) -> None:
    assert typical_line_tokens(_table(tokens)) == typical


SMALL_TALK = ["ok cool", "haha nice", "sounds good", "great, thanks", "lovely"]
EPOCH_BUDGET = 2000
MAX_ROUNDS = 60  # small-talk rounds to wait for a middle eviction (about 30 in practice)


@pytest.mark.usefixtures("shared_vectors")  # the epoch rule is the subject, not the vectors
def test_another_query_on_short_lines_extends_the_epoch(memory: Memory) -> None:
    # ~20-token lines (six words and a number); small-talk rounds until a middle eviction
    # leaves the context part empty: room for the next query's retrieved turns
    rnd = random.Random(11)
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                              "content": " ".join(rnd.sample(WORDS, 6)) + f" and so on ({i})"} for i in range(300)])
    reason = ""
    for i in range(MAX_ROUNDS):
        memory.append("c", {"role": "assistant", "content": " ".join(rnd.choices(WORDS, k=30)) + f" ({i})"})
        text = f"{SMALL_TALK[i % len(SMALL_TALK)]} ({i})"
        memory.append("c", {"role": "user", "content": text})
        reason = memory.context("c", text, budget=EPOCH_BUDGET).plan.cache.reason
        if reason.startswith("evicts from the middle"):
            break
    assert reason.startswith("evicts from the middle"), reason
    # another query on the same log (a recall: it takes the room left)
    plan = memory.context("c", "glacier lantern marathon orchid pottery satellite and so on?",
                          budget=EPOCH_BUDGET).plan
    assert plan.query_class in ("targeted_recall", "temporal", "summarize"), plan.query_class
    # it extends the epoch: what the read of TYPICAL_LINE_TOKENS lines chose fits the room left
    assert not plan.cache.new_epoch and plan.cache.reason.startswith("extends the previous context"), plan.cache
    assert MIDDLE_CAP_SHARE * EPOCH_BUDGET < plan.tokens <= EPOCH_BUDGET, plan.tokens
    # the longer read found more than the room left holds: left out for room, not needed
    assert [it for it in plan.left_out if it.slice == "retrieved"], plan.explain()
