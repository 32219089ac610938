"""A turn that is not a recall retrieves narrowly and cheaply (issue 22, planner.build):
nothing when it asks nothing and points to nothing said before (a remark, a request:
planner.classify.tells_only); else only clearly related turns, at most
NARROW_RETRIEVED_SHARE of the budget a call (no leftovers, no top-up), and within an
epoch they are appended as far as they fit: they never rewind an earlier block or end
the epoch.

Fails on the code before: a remark retrieved, and took every clearly related turn the room could hold
(the leftovers of the room went to it), and within an epoch one whose related turns did
not fit ended the epoch ("room used up"), a full cache miss on small talk."""

from __future__ import annotations

import random

import pytest

from tiermem import Memory
from tiermem.planner.build import NARROW_RETRIEVED_SHARE

# the same seeded history and chat texts in every test (and module): their vectors are
# computed once a session (conftest.shared_vectors)
pytestmark = pytest.mark.usefixtures("shared_vectors")

BUDGET = 2000
TOPIC = "I love painting sunsets with watercolors down by the lake"
# a question put to the other party, not a recall: narrow retrieval
REMARK = "Painting sunsets with watercolors by the lake is still my favourite thing. Do you paint too?"
TELLS = "Painting sunsets with watercolors by the lake is still my favourite thing."  # asks nothing
VOCAB = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon",
         "chess", "ferry", "quartz", "tractor", "meadow", "saxophone", "igloo", "jigsaw", "kayak", "noodle"]


def filler(n: int, seed: int) -> list[dict[str, str]]:
    rnd = random.Random(seed)
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": " ".join(rnd.sample(VOCAB, 5)) + f" #{i}"}
            for i in range(n)]


def history(memory: Memory) -> None:
    """Forty turns about one topic, far back, then unrelated talk the tail shows."""
    memory.append_many("c", filler(40, seed=1))
    memory.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{TOPIC}, day {i}."}
                             for i in range(40)])
    memory.append_many("c", filler(300, seed=2))


def retrieved_tokens(ctx) -> int:  # type: ignore[no-untyped-def]
    return sum(it.tokens for it in ctx.plan.items if it.slice == "retrieved")


def test_a_remark_that_asks_nothing_retrieves_nothing(memory: Memory) -> None:
    history(memory)
    memory.append("c", {"role": "user", "content": TELLS})
    ctx = memory.context("c", TELLS, budget=BUDGET)
    assert ctx.plan.query_class == "default" and ctx.plan.retrieval.startswith("none"), ctx.plan.retrieval
    assert retrieved_tokens(ctx) == 0
    # one that points back at what was said keeps its narrow retrieval
    back = "As I mentioned, painting sunsets with watercolors by the lake is my favourite thing."
    memory.append("c", {"role": "user", "content": back})
    ctx = memory.context("c", back, budget=BUDGET)
    assert ctx.plan.retrieval.startswith("narrow") and retrieved_tokens(ctx) > 0, ctx.plan.explain()


def test_a_follow_up_on_what_was_just_said_retrieves_nothing(memory: Memory) -> None:
    history(memory)
    q = "Wow, what a lovely painting! Was it painted by the lake at sunset?"
    memory.append("c", {"role": "user", "content": q})
    ctx = memory.context("c", q, budget=BUDGET)
    assert ctx.plan.class_reason.startswith("rule:follow-up") and ctx.plan.retrieval.startswith("none")
    assert retrieved_tokens(ctx) == 0


def test_a_question_that_is_no_recall_retrieves_at_most_its_share(memory: Memory) -> None:
    history(memory)
    memory.append("c", {"role": "user", "content": REMARK})
    ctx = memory.context("c", REMARK, budget=BUDGET)
    assert ctx.plan.query_class == "default" and ctx.plan.retrieval.startswith("narrow")
    got = retrieved_tokens(ctx)
    assert 0 < got <= NARROW_RETRIEVED_SHARE * BUDGET, ctx.plan.explain()  # clearly related turns, capped
    # a recall question about the same topic still gets the room
    q = "what did I say about painting sunsets at the lake?"
    memory.append("c", {"role": "user", "content": q})
    recall = memory.context("c", q, budget=BUDGET)
    assert recall.plan.query_class == "targeted_recall"
    assert retrieved_tokens(recall) > 2 * NARROW_RETRIEVED_SHARE * BUDGET, recall.plan.explain()


def test_a_remark_whose_related_turns_do_not_fit_extends_the_epoch(memory: Memory) -> None:
    # the extension rule itself: an epoch close to the budget, which small talk reaches only
    # without middle eviction (planner/middle.py evicts before 80% of the budget)
    memory.planner.settings.evict_middle = False
    history(memory)
    rnd = random.Random(5)
    # small talk until the epoch's context is close to the budget
    ctx = None
    for i in range(200):
        memory.append("c", {"role": "assistant", "content": " ".join(rnd.sample(VOCAB, 4)) + f" ({i})"})
        text = " ".join(rnd.sample(VOCAB, 4)) + f" ({i})"
        memory.append("c", {"role": "user", "content": text})
        ctx = memory.context("c", text, budget=BUDGET)
        if not ctx.plan.cache.new_epoch and BUDGET - 120 < ctx.tokens <= BUDGET - 40:
            break  # room for the next two messages, not for the remark's related turns as well
    assert ctx is not None and BUDGET - 120 < ctx.tokens <= BUDGET - 40, "the epoch never got close to the budget"
    memory.append("c", {"role": "assistant", "content": "ok"})
    memory.append("c", {"role": "user", "content": REMARK})
    nxt = memory.context("c", REMARK, budget=BUDGET)
    assert nxt.tokens <= BUDGET
    c = nxt.plan.cache
    # the related turns do not fit beside the appended ones: what fits is appended, the epoch goes on
    assert not c.new_epoch, c
    assert "rewind" not in c.reason, c
    assert nxt.messages[:len(ctx.messages)] == ctx.messages  # the previous context is the prefix
