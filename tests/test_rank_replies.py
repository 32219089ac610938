"""The reply credit of planner.rank: when the retrieved turns have little room, the turn
after a question that matches the query (its likely answer) takes REPLY of the question's
score, more than the plain neighbour credit; the turn cache marks which turns ask."""

from __future__ import annotations

import numpy as np
import pytest

from tiermem.planner import rank
from tiermem.planner.rank import NEIGHBOUR, REPLY, REPLY_MAX_ROOM_TOKENS, replies_apply, score_turns
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.turncache import TurnCache, TurnTable

T0 = 1_700_000_000.0


def unit(i: int, dim: int = 8) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    v[i] = 1.0
    return v


def asking_table(asks: list[bool]) -> TurnTable:
    # turn 4 matches the query; turns 3 and 5, either side of it, are alike and unlike it
    n = len(asks)
    vecs = np.stack([unit(1)] * n)
    vecs[4] = unit(0)
    return TurnTable("c", np.arange(n, dtype=np.int64), np.full(n, 20, dtype=np.int64),
                     np.array([T0 + i for i in range(n)]), np.arange(n, dtype=np.int64), vecs,
                     np.ones(n, dtype=bool), asks=np.array(asks, dtype=bool))


def test_the_reply_to_a_matching_question_outranks_the_turn_before_the_question() -> None:
    asks = [False] * 10
    asks[4] = True  # the matching turn asks; 5 is its reply, 3 the turn before it
    t = asking_table(asks)
    off = score_turns(t, unit(0), [])
    on = score_turns(t, unit(0), [], replies=True)
    base4 = off.total[4] - off.neighbour[4] - off.episode[4]
    # without the credit the two sides of the question tie
    assert off.total[5] == pytest.approx(off.total[3])
    assert on.neighbour[5] == pytest.approx(REPLY * base4)
    assert on.neighbour[3] == pytest.approx(off.neighbour[3])  # the turn before a question gains nothing
    assert on.total[5] > on.total[3]


def test_no_reply_credit_after_a_turn_that_does_not_ask() -> None:
    t = asking_table([False] * 10)
    off = score_turns(t, unit(0), [])
    on = score_turns(t, unit(0), [], replies=True)
    np.testing.assert_allclose(on.total, off.total)


def test_a_table_without_the_asks_array_scores_as_before() -> None:
    t = asking_table([True] * 10)
    bare = TurnTable(t.conversation_id, t.positions, t.tokens, t.created, t.groups, t.vectors, t.has_vec)
    np.testing.assert_allclose(score_turns(bare, unit(0), [], replies=True).total,
                               score_turns(bare, unit(0), []).total)


@pytest.mark.parametrize(("room", "expected"), [
    (400, True),  # a 500-token context's room
    (REPLY_MAX_ROOM_TOKENS, True),  # the gate is inclusive
    (REPLY_MAX_ROOM_TOKENS + 1, False),  # room enough for both the question and its reply
    (None, False),  # room unknown: the plain ranking
])
def test_the_room_gate(room: int | None, expected: bool) -> None:
    assert replies_apply(room) is expected


def test_a_reply_weight_at_or_below_the_neighbour_credit_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rank, "REPLY", NEIGHBOUR)
    assert replies_apply(100) is False


@pytest.mark.parametrize(("text", "asks"), [
    ("What did you paint last weekend?", True),  # a question
    ("Nice! Where was that? Looks lovely.", True),  # a question inside the turn
    ("I painted a sunset over the lake.", False),  # a statement
])
def test_the_turn_cache_marks_turns_that_ask(cold: ColdStore, text: str, asks: bool) -> None:
    cold.append_many("c", [Message(role="user", content="hello there"), Message(role="assistant", content=text)])
    t = TurnCache(cold).get("c")
    assert t.asks is not None
    assert [bool(a) for a in t.asks] == [False, asks]


def test_a_turn_that_asks_again_is_no_reply() -> None:
    # a flow of questions nobody answered: the next question takes no reply credit
    asks = [False] * 10
    asks[4] = asks[5] = True
    t = asking_table(asks)
    off = score_turns(t, unit(0), [])
    on = score_turns(t, unit(0), [], replies=True)
    assert on.neighbour[5] == pytest.approx(off.neighbour[5])
