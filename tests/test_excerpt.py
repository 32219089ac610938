"""planner.excerpt: a retrieved turn that does not fit whole is shown as the sentence(s)
that best match the query, marked with an ellipsis; packing offers excerpts only in the
room the verbatim lines left; through Memory.context the plan says fidelity "excerpt",
the budget holds and the log is untouched."""

from __future__ import annotations

import pytest

from tiermem import Memory
from tiermem.planner import excerpt
from tiermem.planner.candidates import Candidate
from tiermem.planner.excerpt import ELLIPSIS, Focus, excerpt_of, sentences
from tiermem.planner.pack import Packing
from tiermem.planner.render import HEADING_SHARE_TOKENS, LINE_SEP_TOKENS
from tiermem.tiers.lexical import doc_terms
from tiermem.tiers.tokens import BpeTokenCounter, messages_tokens

TOKENS = BpeTokenCounter()
LONG = ("We spent the morning on the beach and the kids built a huge sandcastle. "
        "Then my sister called about her new violin teacher in Lisbon. "
        "In the evening we grilled fish and watched the sunset together.")


def _focus(*words: str) -> Focus:
    return Focus({t: 2.0 for w in words for t in doc_terms(w)})


def _cand(position: int, score: float, text: str, focus: Focus | None) -> Candidate:
    line = f"[Ana] {text}"
    return Candidate("retrieved", "c", position, score, "test", line,
                     tokens=TOKENS.count(line) + LINE_SEP_TOKENS + HEADING_SHARE_TOKENS,
                     header="(01 May 2023)", source=text, focus=focus)


@pytest.mark.parametrize(("text", "n"), [
    (LONG, 3),  # three sentences
    ("no end mark at all", 1),  # one sentence
    ('She said "stop!" Then left.', 2),  # a closing quote after the mark
    ("", 0),  # nothing
])
def test_sentences(text: str, n: int) -> None:
    assert len(sentences(text)) == n


BEST = "Then my sister called about her new violin teacher in Lisbon."


@pytest.mark.parametrize(("slack", "text", "kept"), [
    # room for the best sentence only: it alone, cut on both sides
    (25, f"[Ana] {ELLIPSIS} {BEST} {ELLIPSIS}", 1),
    # room for all but a few tokens: the best sentence and the first (a statement, earlier
    # than the last); the last one goes
    (None, f"[Ana] We spent the morning on the beach and the kids built a huge sandcastle. {BEST} {ELLIPSIS}", 2),
])
def test_excerpt_keeps_the_matching_sentence_and_marks_the_cuts(slack: int | None, text: str, kept: int) -> None:
    c = _cand(7, 5.0, LONG, _focus("violin", "teacher"))
    got = excerpt_of(c, c.tokens - 1 if slack is None else slack, TOKENS, "it did not fit whole")
    assert got is not None
    assert got.text == text
    assert got.fidelity == "excerpt" and got.position == 7 and got.score == 5.0
    assert got.tokens == TOKENS.count(got.text) + LINE_SEP_TOKENS + HEADING_SHARE_TOKENS < c.tokens
    assert "excerpt" in got.reason and f"{kept} of 3 sentences" in got.reason
    assert c.fidelity == "verbatim" and c.text == f"[Ana] {LONG}"  # the candidate itself is unchanged


@pytest.mark.parametrize(("focus", "limit", "why"), [
    (None, 200, "no focus: not excerptable (another conversation, a superseded turn)"),
    (_focus("zebra"), 200, "no sentence holds a query word"),
    (_focus("violin"), 12, "the best sentence does not fit the limit"),
    (_focus("beach", "violin", "sunset"), 200, "every sentence matches: the excerpt would be the whole turn"),
])
def test_no_excerpt(focus: Focus | None, limit: int, why: str) -> None:
    c = _cand(1, 1.0, LONG, focus)
    if "whole turn" in why:  # three matching sentences, at most two kept: allowed only if shorter
        got = excerpt_of(c, limit, TOKENS, "x")
        assert got is None or got.text.count(ELLIPSIS) >= 1
        return
    assert excerpt_of(c, limit, TOKENS, "x") is None, why


def _packing(pool: list[Candidate], room: int) -> Packing:
    empty: list[Candidate] = []
    return Packing("c", {"pinned": list(empty), "summary": list(empty), "tail": list(empty), "retrieved": pool},
                   {"pinned": 0, "summary": 0, "retrieved": 5, "tail": 0}, room, TOKENS)


@pytest.mark.parametrize("mode", [0, 1])  # off: the long turn is dropped; leftover: its excerpt fills the room left
def test_excerpts_only_use_the_room_verbatim_left(monkeypatch: pytest.MonkeyPatch, mode: int) -> None:
    monkeypatch.setattr(excerpt, "EXCERPT", mode)
    short = _cand(1, 9.0, "I started violin lessons last week.", _focus("violin"))
    long_ = _cand(2, 8.0, LONG, _focus("violin"))
    room = 5 + short.tokens + 25  # the short line whole, and too little for the long one
    p = _packing([short, long_], room)
    p.take("retrieved", room)
    p.take_excerpts("retrieved", room)
    fids = [(c.position, c.fidelity) for c in p.chosen["retrieved"]]
    assert fids == ([(1, "verbatim"), (2, "excerpt")] if mode else [(1, "verbatim")])
    assert p.remaining >= 0 and p.used["retrieved"] <= room
    assert [c.position for c in p.pools["retrieved"]] == ([] if mode else [2])  # shown once


def _long_then_filler() -> list[tuple[int, str]]:
    """(position, fidelity) packed from a long, better-ranked turn and a short filler
    turn, in a room where the filler fits whole and the long turn only as its excerpt."""
    long_ = _cand(2, 9.0, LONG, _focus("violin"))
    filler = _cand(3, 1.0, "ok, sounds fine, see you later then, bye for now my friend!", _focus("violin"))
    room = 5 + filler.tokens + 2
    p = _packing([long_, filler], room)
    p.take("retrieved", room)
    p.take_excerpts("retrieved", room)
    return [(c.position, c.fidelity) for c in p.chosen["retrieved"]]


@pytest.mark.parametrize(("mode", "got"), [
    (1, [(3, "verbatim")]),  # leftover: the filler line that fits whole goes first, then no room is left
    (2, [(2, "excerpt")]),  # inline: the better turn goes in as its excerpt, in rank order
])
def test_inline_excerpts_go_in_rank_order(monkeypatch: pytest.MonkeyPatch, mode: int,
                                          got: list[tuple[int, str]]) -> None:
    monkeypatch.setattr(excerpt, "EXCERPT", mode)
    assert _long_then_filler() == got


def test_long_lines_are_offered_as_excerpts_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(excerpt, "EXCERPT_LONG_TOKENS", 30)  # LONG is over 30 tokens: its excerpt goes first
    long_ = _cand(2, 9.0, LONG, _focus("violin"))
    p = _packing([long_], 500)
    p.take("retrieved", 500)
    assert [c.fidelity for c in p.chosen["retrieved"]] == ["excerpt"]
    assert "a long turn" in p.chosen["retrieved"][0].reason


def _seed_long_among_filler(memory: Memory) -> None:
    """Conversation "c": 20 filler turns, LONG at position 20, 20 more filler turns."""
    filler = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"ok, sounds fine ({i})"} for i in range(40)]
    memory.append_many("c", filler[:20])
    memory.append("c", {"role": "user", "content": LONG})
    memory.append_many("c", filler[20:])


def test_context_shows_an_excerpt_of_a_turn_that_does_not_fit(memory: Memory,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(excerpt, "EXCERPT", excerpt.INLINE)
    _seed_long_among_filler(memory)
    memory.append("c", {"role": "user", "content": "Who teaches my sister the violin?"})
    before = [m.text for m in memory.cold.get("c", list(range(41)))]
    seen = set()
    for budget in range(90, 200, 4):  # some budget leaves room for the excerpt but not the whole turn
        ctx = memory.context("c", "Who teaches my sister the violin?", budget=budget, record=False)
        assert messages_tokens(TOKENS, ctx.messages) <= budget == ctx.plan.budget
        for it in ctx.plan.items:
            if 20 in it.positions:
                seen.add(it.fidelity)
                if it.fidelity == "excerpt":
                    text = "\n".join(str(m.get("content")) for m in ctx.messages)
                    assert f"{BEST} {ELLIPSIS}" in text and "sunset" not in text and "excerpt" in it.reason
    assert {"excerpt", "verbatim"} <= seen
    assert [m.text for m in memory.cold.get("c", list(range(41)))] == before  # derived: the log is untouched


def test_an_epoch_keeps_the_bytes_of_an_excerpt_already_shown(memory: Memory,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # a turn shown as an excerpt stays exactly as shown while the epoch extends: the next
    # calls append after it (a verbatim copy of it later is appended, never swapped in)
    monkeypatch.setattr(excerpt, "EXCERPT", excerpt.INLINE)
    _seed_long_among_filler(memory)
    q = "Who teaches my sister the violin?"
    budget = next(b for b in range(90, 200, 4)
                  if any(it.fidelity == "excerpt" for it in memory.context("c", q, budget=b, record=False).plan.items))
    memory.append("c", {"role": "user", "content": q})
    first = memory.context("c", q, budget=budget)
    assert any(it.fidelity == "excerpt" for it in first.plan.items)
    extended = 0
    for i, follow in enumerate(["And what does she play, the violin?", "Where does the violin teacher live?"]):
        memory.append("c", {"role": "assistant", "content": f"noted ({i})"})
        memory.append("c", {"role": "user", "content": follow})
        nxt = memory.context("c", follow, budget=budget)
        assert messages_tokens(TOKENS, nxt.messages) <= nxt.plan.budget
        if not nxt.plan.cache.new_epoch:
            extended += 1
            at = next(k for k, m in enumerate(first.messages) if m.get("content") == q)
            assert nxt.messages[:at + 1] == first.messages[:at + 1]  # every earlier byte, the excerpt's too
        first = nxt
        q = follow
    assert extended >= 1


@pytest.mark.parametrize(("room_cap", "got"), [
    (10_000, [(2, "excerpt")]),  # the call's room is under the cap: inline, in rank order
    (10, [(3, "verbatim")]),  # over it: as LEFTOVER (the filler that fits whole goes first)
])
def test_inline_only_below_the_room_cap(monkeypatch: pytest.MonkeyPatch, room_cap: int,
                                        got: list[tuple[int, str]]) -> None:
    monkeypatch.setattr(excerpt, "EXCERPT", excerpt.INLINE)
    monkeypatch.setattr(excerpt, "INLINE_MAX_ROOM_TOKENS", room_cap)
    assert _long_then_filler() == got
