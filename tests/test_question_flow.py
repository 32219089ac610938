"""A flow of questions (issue 22's long-history session): epochs by marginal evidence
(planner/epoch_policy.py).

Fails on the code before: a broad recall on a new user message filled the whole room,
so the next question could append nothing and every question rebuilt its context (738
new epochs in 757 questions on the LoCoMo session); the context's end was never marked
for caching; and an extension needed 80% of a fresh context's retrieved tokens, whatever
their rank.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tiermem import Memory
from tiermem.planner import epoch_policy
from tiermem.planner.candidates import Candidate
from tiermem.tiers.tokens import messages_tokens

# the same seeded history in two tests and LoCoMo's first conversation (in two other
# modules too): their vectors are computed once a session (conftest.shared_vectors)
pytestmark = pytest.mark.usefixtures("shared_vectors")

WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]
BUDGET = 2000
DEV = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo-dev.json"


def cand(position: int, score: float, tokens: int = 10) -> Candidate:
    return Candidate("retrieved", "c", position, score, "test", f"line {position}", tokens=tokens)


RANKING = [cand(1, 9.0), cand(2, 8.0), cand(3, 7.0), cand(4, 6.0)]


@pytest.mark.parametrize(("shown", "expected"), [
    ({1}, 1.0),  # the best candidate weighs 1
    ({2, 4}, 1 / 2 + 1 / 4),  # then 1 / (rank + 1)
    ({1, 2, 3, 4}, 1 + 1 / 2 + 1 / 3 + 1 / 4),
    (set(), 0.0),  # nothing of the ranking shown
    ({9}, 0.0),  # a shown turn outside the ranking weighs nothing
])
def test_value_weighs_the_ranked_turns_shown(shown: set[int], expected: float) -> None:
    assert epoch_policy.value(epoch_policy.ranked(reversed(RANKING)), {("c", p) for p in shown}) \
        == pytest.approx(expected)


@pytest.mark.parametrize(("tokens", "gone"), [
    (0, []),  # nothing to free
    (10, [4]),  # the lowest-scored first
    (15, [4, 3]),  # until their tokens reach it
    (100, [4, 3, 2, 1]),  # all of them when they do not
])
def test_lowest_frees_tokens_from_the_bottom(tokens: int, gone: list[int]) -> None:
    # turns no larger than what is left to free go whole, lowest-scored first (give_way)
    assert [c.position for c in epoch_policy.give_way(RANKING, tokens).gone] == gone


def test_a_new_epochs_value_and_when_an_extension_is_enough() -> None:
    full = epoch_policy.value(RANKING, {("c", p) for p in (1, 2, 3, 4)})
    # the reserve leaves out the two lowest
    assert epoch_policy.new_epoch_value(RANKING, RANKING, 15) == pytest.approx(1 + 1 / 2)
    assert epoch_policy.new_epoch_value(RANKING, RANKING, 0) == pytest.approx(full)
    share = epoch_policy.EXTEND_MIN_VALUE_SHARE
    assert epoch_policy.enough(share * full, full) and not epoch_policy.enough(share * full - 1e-6, full)


def history(memory: Memory, n: int) -> None:
    rnd = random.Random(7)
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                              "content": " ".join(rnd.choices(WORDS, k=12)) + f" and so on ({i})"} for i in range(n)])


def ask(memory: Memory, question: str) -> object:
    memory.append("c", {"role": "user", "content": question})
    return memory.context("c", question, budget=BUDGET)


def test_a_new_epoch_on_a_new_question_leaves_room_and_marks_its_end(memory: Memory) -> None:
    history(memory, 300)
    first = ask(memory, "what did we say about the pottery and the tunnel?")
    assert first.plan.cache.new_epoch and first.tokens > BUDGET - epoch_policy.reserve_tokens(BUDGET)
    ctx = ask(memory, "what did we say about the violin and the glacier?")
    assert ctx.plan.cache.new_epoch  # a different subject: the previous turns give way
    # the broad recall leaves its lowest-scored turns out, so the next questions can append
    assert ctx.tokens <= BUDGET - epoch_policy.reserve_tokens(BUDGET), ctx.tokens
    assert "stay free for the next calls" in ctx.plan.retrieval
    assert messages_tokens(memory.tokens, ctx.messages) == ctx.tokens
    # the whole context is marked: the next question is likely to extend it
    assert ctx.plan.breakpoints[-1].index == len(ctx.messages) - 1
    assert ctx.plan.breakpoints[-1].layer == "context"
    nxt = ask(memory, "what did we say about the glacier and the violin?")
    assert not nxt.plan.cache.new_epoch, nxt.plan.cache.reason  # it extends the epoch
    assert nxt.tokens <= BUDGET
    prefix = [m for m in ctx.messages]
    assert list(nxt.messages[:len(prefix) - 1]) == prefix[:-1]  # the previous context stays as it was


def test_another_query_on_the_same_log_keeps_the_whole_room(memory: Memory) -> None:
    """Nothing was appended (as in the standard LoCoMo eval, which asks each question on
    the same log): no reserve, the question gets the room it always had."""
    history(memory, 300)
    ask(memory, "what did we say about the pottery and the tunnel?")
    ctx = memory.context("c", "what did we say about the walrus and the canyon?", budget=BUDGET)
    assert ctx.tokens > BUDGET - epoch_policy.reserve_tokens(BUDGET), ctx.tokens
    assert "stay free" not in ctx.plan.retrieval


@pytest.mark.skipif(not DEV.is_file(), reason=f"LoCoMo dev file not found at {DEV.resolve()}")
def test_questions_extend_by_the_weight_of_what_they_show(memory: Memory) -> None:
    """LoCoMo's first conversation, then its first questions one after another: some
    extend the epoch because the context already shows the best of their ranking."""
    from tiermem.evals.locomo import load_samples, session_times, turn_message

    s = load_samples(DEV)[0]
    times, _ = session_times(s)
    for session, start in zip(s.sessions, times, strict=True):
        batch = [turn_message(t, s, session, start + i)[0] for i, t in enumerate(session.turns)]
        if batch:
            memory.append_many("c", batch)
    memory.catch_up("c")
    reasons = []
    for qa in s.qa[:40]:
        memory.append("c", {"role": "user", "content": qa.question})
        memory.catch_up("c")
        ctx = memory.context("c", qa.question, budget=BUDGET)
        assert ctx.tokens <= BUDGET
        reasons.append(ctx.plan.cache.reason)
    by_value = [r for r in reasons if "of the ranked turns' weight" in r]
    assert by_value, reasons
    assert sum(1 for r in reasons if r.startswith("room used up")) < len(reasons) - len(by_value)
