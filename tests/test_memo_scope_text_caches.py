"""The caches of caller text beside the embedder's never answer one tenant from another's.

The classifier's labels and correction cues, supersession's parses, the keyword stems and
the token counts were remembered per text, process-wide: a text another tenant had just
written came back faster (a tenancy hunt: tenant B appending tenant A's 150-word message
took a median 131 ms against 155 ms for a fresh one, faster in 58 of 80 pairs), so a
caller could time guesses of other tenants' messages. Each is now keyed by the memo
scope the embedder's memo uses (`tiers.memo.remembered_for`): found again in the scope
it was computed in, and only there. Asserted through the caches' own hit counters.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tiermem.consolidation import classify, supersede
from tiermem.tiers import lexical
from tiermem.tiers.memo import SCOPE_ENTRIES, ScopedMemo, memo_scope, remembered_for
from tiermem.tiers.tokens import BpeTokenCounter

SECRET = "Actually, the Globex merger closes on the 14th of March, not the 9th: tell nobody, my PIN is 4111."
A = memo_scope("db", "acme-board")
B = memo_scope("db", "evil-probe")
_counter = BpeTokenCounter()


def _hits_of(memo: ScopedMemo[object, object]) -> Callable[[], int]:
    return lambda: memo.hits


def _supersede_hits() -> int:
    return sum(c.cache_info().hits for c in (supersede._slots, supersede._content_items, supersede._inflected,
                                             supersede._holder, supersede._clauses))


CACHES: list[tuple[str, Callable[[str], object], Callable[[], int]]] = [
    # the correction cue: asked by the classifier and again by supersession's assertion check
    ("correction cue", lambda t: classify.correction_cue(classify.normalize(t)), _hits_of(classify._cue_memo)),
    # the rules-only label append computes for every turn
    ("label", lambda t: classify.TurnClassifier(None).classify(t, "user"), _hits_of(classify._label_memo)),
    # supersession's slots, content words, inflections, holders and clauses
    ("supersession parses", lambda t: (supersede.detect_slots(t), supersede._content(t),
                                       supersede._inflected(t), supersede._holder(t), supersede._clauses(t)),
     _supersede_hits),
    # the keyword stems, per word: a turn's (the turn cache's index) and a query's (search)
    ("keyword stems", lambda t: (lexical.doc_terms(t), lexical.query_words_terms(t)), _hits_of(lexical._terms)),
    # the token counts of short texts (the turn index at insert, the planner's budget)
    ("token count", _counter.count, lambda: _counter.memo_hits),
]


def _forget_all() -> None:
    """What Memory._forget calls after an erasure."""
    classify.clear_memo()
    supersede.clear_memo()
    lexical.forget_terms()
    _counter.clear_memo()


@pytest.fixture(autouse=True)
def _empty_caches() -> None:
    _forget_all()


def _gained(hits: Callable[[], int], compute: Callable[[str], object], scope: str | None) -> int:
    """The hits computing SECRET in `scope` scores (a text may repeat a word: those are hits
    within the one computation, in any scope)."""
    before = hits()
    with remembered_for(scope):
        compute(SECRET)
    return hits() - before


@pytest.mark.parametrize("name, compute, hits", CACHES, ids=[c[0] for c in CACHES])
def test_a_text_remembered_for_one_scope_is_no_hit_in_another(name: str, compute: Callable[[str], object],
                                                                 hits: Callable[[], int]) -> None:
    with remembered_for(A):
        first = compute(SECRET)
    with remembered_for(B):  # the same answer in another scope, computed afresh
        assert compute(SECRET) == first
    _forget_all()
    alone = _gained(hits, compute, "never used")  # what a first computation scores by itself
    _gained(hits, compute, A)
    assert _gained(hits, compute, B) == alone, name  # another tenant's conversation asks for it
    assert _gained(hits, compute, None) == alone, name  # outside any conversation: a scope of its own
    assert _gained(hits, compute, A) > alone, name  # its own conversation asks again: why it exists


@pytest.mark.parametrize("name, compute, hits", CACHES, ids=[c[0] for c in CACHES])
def test_an_erasure_clears_every_scope(name: str, compute: Callable[[str], object],
                                       hits: Callable[[], int]) -> None:
    alone = _gained(hits, compute, "never used")
    for scope in (A, B):
        _gained(hits, compute, scope)
    _forget_all()
    assert [_gained(hits, compute, scope) for scope in (A, B)] == [alone, alone], name


def test_a_pool_of_several_scopes_neither_answers_nor_remembers() -> None:
    """A catch-up's pool sets one scope per text for the embedder; a cache of one text at
    a time cannot tell whose a text is there, so it computes without remembering."""
    memo: ScopedMemo[str, int] = ScopedMemo(8)
    with remembered_for([A, B]):
        memo.put(SECRET, 1)
        assert memo.get(SECRET, None) is None
    assert len(memo) == 0


@pytest.mark.parametrize("entries, kept", [
    (3, 3),  # under the bound: every scope's results kept
    (4, 4),  # at the bound
    (5, 1),  # past it: emptied, then the latest remembered (over all scopes together)
])
def test_the_bound_counts_every_scope(entries: int, kept: int) -> None:
    memo: ScopedMemo[str, int] = ScopedMemo(4 + 2 * SCOPE_ENTRIES)  # 4 results and the two scopes' cost
    for i in range(entries):
        with remembered_for(f"scope-{i % 2}"):
            memo.put(f"text {i}", i)
    assert len(memo) == kept
