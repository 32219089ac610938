"""Unanswered user questions sink in retrieval (planner/unanswered.py, issue 22's session).

A user asking one question after another leaves a log of questions that no reply
followed; each is about as close to the next question as a turn can be and says nothing
that answers it. Before this rule they took the retrieved room (about 40% of it on the
LoCoMo session eval) and pushed the turns that hold the answer out: the flow test below
fails on the code before (the answer was left out, the retrieved block was questions).
"""

from __future__ import annotations

import random

import pytest

from tiermem import Memory
from tiermem.planner.unanswered import UNANSWERED_QUESTION_PENALTY, unanswered

WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]
ANSWER = "Melanie painted a sunset over the lake last May, in bright orange and purple."
QUESTIONS = ["What did Melanie paint over the lake?", "What did Melanie paint at the lake last May?",
             "Which sunset did Melanie paint over the lake?", "What colours did Melanie paint the lake sunset in?",
             "When did Melanie paint the sunset over the lake?", "What did Melanie paint, the lake or the sunset?"]


def history(memory: Memory, n: int, answer_at: int) -> int:
    """`n` alternating user/assistant turns of filler, the answer (an assistant turn) at
    `answer_at`; its position."""
    rnd = random.Random(3)
    msgs = [{"role": "user" if i % 2 == 0 else "assistant",
             "content": ANSWER if i == answer_at else " ".join(rnd.sample(WORDS, 6)) + f" and so on ({i})"}
            for i in range(n)]
    positions = memory.append_many("c", msgs)
    return positions[answer_at]


@pytest.mark.parametrize(("roles", "flagged"), [
    # a user question, then another user message: nobody answered it
    (["user:What did Melanie paint?", "user:And when was that?"], {0}),
    # a user question with a reply after it keeps its score
    (["user:What did Melanie paint?", "assistant:A sunset over the lake."], set()),
    # the assistant's question, then the user's answer: not the user's unanswered question
    (["assistant:What did you paint?", "user:What do you mean?"], set()),
    # a user statement followed by another user message is no question
    (["user:I painted the lake today.", "user:It took me all day."], set()),
    # the newest turn has nothing after it yet: it is not judged
    (["assistant:Hello there.", "user:What did Melanie paint?"], set()),
])
def test_which_turns_are_unanswered_questions(memory: Memory, roles: list[str], flagged: set[int]) -> None:
    msgs = [{"role": r.split(":", 1)[0], "content": r.split(":", 1)[1]} for r in roles]
    positions = memory.append_many("c", msgs)
    memory.catch_up("c")
    rows = {r.position: r for r in memory.cold.turns_at("c", positions)}
    assert unanswered(memory.cold, "c", rows) == {positions[i] for i in flagged}


def test_a_flow_of_questions_does_not_crowd_out_the_answer(memory: Memory) -> None:
    answer = history(memory, 200, answer_at=41)
    # the user asks about it again and again, nobody answers (as in a QA session)
    for q in QUESTIONS * 4:
        memory.append("c", {"role": "user", "content": q})
    query = "What did Melanie paint over the lake last May?"
    memory.append("c", {"role": "user", "content": query})
    memory.catch_up("c")
    ctx = memory.context("c", query, budget=300)
    retrieved = [it for it in ctx.plan.items if it.slice == "retrieved"]
    shown = {p for it in ctx.plan.items for p in it.positions}
    assert answer in shown, [it.reason for it in retrieved]
    ranked = sorted(retrieved, key=lambda it: -it.score)
    at = next(i for i, it in enumerate(ranked) if answer in it.positions)
    # no unanswered question ranks above the answer, and those shown say why they sank
    assert not any("no reply followed" in it.reason for it in ranked[:at]), [it.reason for it in ranked[:at]]
    sunk = [it for it in retrieved if "no reply followed" in it.reason]
    assert all(f"{-UNANSWERED_QUESTION_PENALTY:+.2f}" in it.reason for it in sunk)
    assert ctx.tokens <= 300


def test_answered_questions_keep_their_rank(memory: Memory) -> None:
    """The same flow with a reply after every question: nothing sinks (a chat's questions,
    and the LoCoMo histories', whose speakers alternate, rank as before)."""
    history(memory, 200, answer_at=41)
    for q in QUESTIONS:
        memory.append_many("c", [{"role": "user", "content": q}, {"role": "assistant", "content": "Let me think."}])
    query = "What did Melanie paint over the lake last May?"
    memory.append("c", {"role": "user", "content": query})
    memory.catch_up("c")
    ctx = memory.context("c", query, budget=300)
    retrieved = [it for it in ctx.plan.items if it.slice == "retrieved"]
    assert retrieved and not [it for it in retrieved + ctx.plan.left_out if "no reply followed" in it.reason]
