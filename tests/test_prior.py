"""planner.prior: the length prior lifts the turns that say more and lowers the short
replies, within MAX_LENGTH_Z standard deviations, and is nothing when off."""

from __future__ import annotations

import numpy as np
import pytest

from tiermem import Memory
from tiermem.planner import prior
from tiermem.planner.prior import length_prior

DAY = 1_700_000_000.0
SHORT = "Wow, cool!"
LONG = ("Last weekend my sister and I drove up to the lake cabin, fixed the old canoe, "
        "and paddled out to the island where we camped two nights and watched the stars.")
# a question whose words the short reply and the long turn share equally (one word each)
QUESTION = "What did we say about the cabin?"


def _talk(mem: Memory, texts: list[str]) -> list[int]:
    batch = [{"role": "user" if i % 2 == 0 else "assistant", "content": t, "created_at": DAY + i}
             for i, t in enumerate(texts)]
    return mem.append_many("c", batch, session_id="s0")


@pytest.mark.parametrize(("weight", "texts", "want"), [
    # longer turns up, shorter down, by the weight
    (1.0, [SHORT, LONG, "I went to the shop today for bread."], "ordered"),
    (0.0, [SHORT, LONG], "zeros"),  # off: nothing
    (1.0, ["same words here", "same words here"], "zeros"),  # one length: nothing to tell apart
])
def test_length_prior(cold_memory: Memory, monkeypatch: pytest.MonkeyPatch, weight: float, texts: list[str],
                      want: str) -> None:
    _talk(cold_memory, texts)
    monkeypatch.setattr(prior, "LENGTH_WEIGHT", weight)
    table = cold_memory.turns.get("c")
    got = length_prior(table)
    assert got.shape == (len(table),)
    if want == "zeros":
        assert not got.any()
        return
    order = np.argsort(table.tokens)
    assert (np.diff(got[order]) >= 0).all()  # monotone in the tokens
    assert got[int(np.argmax(table.tokens))] > 0 > got[int(np.argmin(table.tokens))]
    assert np.abs(got).max() <= weight * prior.MAX_LENGTH_Z
    assert not length_prior(table, period=True).any()  # a query naming a period: the date decides
    monkeypatch.setattr(prior, "LENGTH_MAX_ROOM_TOKENS", 600)
    assert length_prior(table, room=600).any() and not length_prior(table, room=601).any()  # the room gate


def test_length_prior_reorders_retrieved_turns(cold_memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    fillers = [f"Note {i}: the printer jammed and the train was late again." for i in range(80)]
    pos = _talk(cold_memory, [*fillers[:10], "The cabin? Wow, cool!", *fillers[10:20], LONG, *fillers[20:]])
    short_p, long_p = pos[10], pos[21]
    cold_memory.append("c", {"role": "user", "content": QUESTION, "created_at": DAY + 100})

    def rank_of() -> dict[int, float]:
        ctx = cold_memory.context("c", QUESTION, budget=600, record=False)
        return {p: i.score for i in ctx.plan.items + ctx.plan.left_out if i.slice == "retrieved"
                for p in i.positions}

    monkeypatch.setattr(prior, "LENGTH_WEIGHT", 0.0)
    off = rank_of()
    monkeypatch.setattr(prior, "LENGTH_WEIGHT", 1.0)
    on = rank_of()
    # the long turn gains on the short one by the prior's difference
    assert (on[long_p] - on[short_p]) > (off[long_p] - off[short_p]) + 1.0


@pytest.mark.parametrize(("budget", "applies"), [
    (500, True),  # a small room: the prior orders the retrieved turns
    (2000, False),  # more room than LENGTH_MAX_ROOM_TOKENS: as without it
])
def test_prior_only_at_small_rooms(cold_memory: Memory, monkeypatch: pytest.MonkeyPatch, budget: int,
                                   applies: bool) -> None:
    assert prior.LENGTH_WEIGHT == 0.0 and prior.LENGTH_MAX_ROOM_TOKENS == 600  # shipped off, with its gate
    monkeypatch.setattr(prior, "LENGTH_WEIGHT", 0.5)  # the weight chosen leave-one-out (README)
    fillers = [f"Note {i}: the printer jammed and the train was late again." for i in range(200)]
    _talk(cold_memory, [*fillers[:50], LONG, *fillers[50:]])
    cold_memory.append("c", {"role": "user", "content": QUESTION, "created_at": DAY + 300})
    ctx = cold_memory.context("c", QUESTION, budget=budget, record=False)
    reasons = [i.reason for i in ctx.plan.items + ctx.plan.left_out if i.slice == "retrieved"]
    assert reasons  # the question is a recall question: turns are retrieved
    assert any(", its length " in r for r in reasons) is applies
