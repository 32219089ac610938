"""The label-free reply recall's parts (`evals.attribution`): which earlier turns a reply
draws on, and the rank correlation used to validate it against LoCoMo's evidence recall."""

from __future__ import annotations

from typing import Any

import pytest

from tiermem.evals.attribution import RECENT_MESSAGES, ReplyScore, attribute, replies, spearman
from tiermem.tiers.embed_onnx import FastEmbedder

FACT = "My daughter Mirela starts violin lessons at the Brandt conservatory in Porto next April."
RESTATED = "Mirela's violin lessons at the Brandt conservatory in Porto start in April, right?"
FILLER = [f"Filler turn {i} about the weather being grey and rainy again today." for i in range(RECENT_MESSAGES + 2)]


def convo(early: str, reply: str, *, system: str | None = None, gap: int = len(FILLER)) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    msgs.append({"role": "user", "content": early})
    msgs.append({"role": "assistant", "content": "Noted."})
    for i, text in enumerate(FILLER[:gap]):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    msgs.append({"role": "user", "content": "Can you remind me about the lessons?"})
    msgs.append({"role": "assistant", "content": reply})
    return msgs


def sources_of_last(msgs: list[dict[str, Any]], embedder: FastEmbedder) -> list[int]:
    last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    return {r.user_index: r.sources for r in attribute(msgs, embedder)}[last_user]


# (the conversation, the expected sources of its last reply)
@pytest.mark.parametrize(("case", "want"), [
    ("restated", [0]),              # the reply restates the early fact: that turn is its source
    ("small_talk", []),             # "Great, thanks!" draws on nothing
    ("unrelated", []),              # a reply about something else shares no content
    ("within_recent", []),          # the fact is one of the RECENT_MESSAGES just before: never counted
    ("system_fact", [1]),           # the same fact in the system message is no source; the user turn is
])
def test_sources(case: str, want: list[int], embedder: FastEmbedder) -> None:
    msgs = {
        "restated": lambda: convo(FACT, RESTATED),
        "small_talk": lambda: convo(FACT, "Great, thanks so much, sounds lovely!"),
        "unrelated": lambda: convo(FACT, "Your parcel with the new keyboard ships on Monday by courier."),
        "within_recent": lambda: convo(FACT, RESTATED, gap=2),
        "system_fact": lambda: convo(FACT, RESTATED, system=FACT),
    }[case]()
    assert sources_of_last(msgs, embedder) == want


def test_the_reply_spans_assistant_messages_up_to_the_next_user_message() -> None:
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": None, "tool_calls": []},
            {"role": "tool", "tool_call_id": "x", "content": "r"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"}]
    assert replies(msgs) == {0: [1, 3], 4: []}  # the tool result is not the reply


def test_reply_score_averages_over_replies_with_sources() -> None:
    s = ReplyScore()
    s.add([3, 4], {3})        # half
    s.add([], {1, 2})         # no sources: not counted
    s.add([7], {7, 8})        # all
    assert s.summary() == {"reply_recall": 0.75, "replies_with_sources": 2, "reply_sources": 3,
                           "reply_sources_contained": 2}
    assert ReplyScore().summary()["reply_recall"] is None


# (xs, ys, expected Spearman rho)
@pytest.mark.parametrize(("xs", "ys", "want"), [
    ([1, 2, 3, 4], [10, 20, 30, 40], 1.0),       # same order
    ([1, 2, 3, 4], [4, 3, 2, 1], -1.0),          # reversed
    ([1, 2, 3, 4], [1, 3, 2, 4], 0.8),           # one swap: 1 - 6*2/(4*15)
    ([1, 1, 2, 3], [1, 2, 3, 4], 0.9487),        # a tie gets the average rank
    ([1, 2, 3], [5, 5, 5], None),                # one side constant: undefined
    ([1, 2], [1, 2], None),                      # under 3 points
])
def test_spearman(xs: list[float], ys: list[float], want: float | None) -> None:
    got = spearman(xs, ys)
    assert (got is None) if want is None else got == pytest.approx(want, abs=1e-4)
