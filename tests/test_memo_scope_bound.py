"""A `ScopedMemo`'s bound holds its memory however thinly results spread over scopes.

`tiers.lexical` promised its stem memo ~20 MB at most (MAX_STEM_MEMO = 200,000 words),
but since b2c32da each scope holds its own table, and the bound counted results only:
200,000 one-word scopes (200,000 conversations of one new word each) took 88 MB against
31 MB in one scope. A scope now counts as `SCOPE_ENTRIES` results (its table and name
cost about two short results), so the worst spread costs what one scope does.
"""

from __future__ import annotations

import tracemalloc

import pytest

from tiermem.tiers.memo import SCOPE_ENTRIES, ScopedMemo, memo_scope, remembered_for

BOUND = 20_000  # a tenth of the stem memo's: the same bytes per entry, a tenth of the time
DB = "0f3c2a9e-aaaa-bbbb-cccc-000000000000"  # a database id as long as a real one
# the thin spread may cost this much more than one scope (measured: 0.9x; 2.8x before)
MAX_SPREAD_RATIO = 1.2


def _peak_bytes(scopes: int, per_scope: int) -> int:
    """The peak memory of filling a memo of BOUND with `per_scope` words in each of
    `scopes` conversations' scopes (words and stems as the stem memo holds them)."""
    memo: ScopedMemo[str, str] = ScopedMemo(BOUND)
    tracemalloc.start()
    try:
        for s in range(scopes):
            with remembered_for(memo_scope(DB, f"conv-{s:08d}")):
                for w in range(per_scope):
                    memo.put(f"word{s}x{w}", f"term{s}x{w}")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_one_word_scopes_cost_what_one_scope_does() -> None:
    dense = _peak_bytes(1, BOUND)
    thin = _peak_bytes(BOUND, 1)
    assert thin <= MAX_SPREAD_RATIO * dense, (thin, dense)


@pytest.mark.parametrize("puts, kept, scopes", [
    # one scope: its results and its own cost fill the bound exactly
    ([("a", f"w{i}") for i in range(12 - SCOPE_ENTRIES)], 12 - SCOPE_ENTRIES, 1),
    # one past that: emptied, then the latest remembered
    ([("a", f"w{i}") for i in range(13 - SCOPE_ENTRIES)], 1, 1),
    # one result per scope: each costs 1 + SCOPE_ENTRIES, so 12 // 3 of them fit
    ([(f"s{i}", "w") for i in range(12 // (1 + SCOPE_ENTRIES))], 12 // (1 + SCOPE_ENTRIES),
     12 // (1 + SCOPE_ENTRIES)),
    # one more such scope empties the memo first
    ([(f"s{i}", "w") for i in range(12 // (1 + SCOPE_ENTRIES) + 1)], 1, 1),
    # a result remembered again in its scope costs nothing more: the bound is not reached
    ([("a", f"w{i}") for i in range(12 - SCOPE_ENTRIES)] + [("a", "w0")], 12 - SCOPE_ENTRIES, 1),
], ids=["one scope full", "one scope past full", "one-result scopes full", "one-result scopes past full",
        "a result again"])
def test_the_bound_charges_each_scope(puts: list[tuple[str, str]], kept: int, scopes: int) -> None:
    memo: ScopedMemo[str, int] = ScopedMemo(12)
    for i, (scope, key) in enumerate(puts):
        with remembered_for(scope):
            memo.put(key, i)
    assert len(memo) == kept
    assert sum(_found(memo, scope) for scope in {s for s, _k in puts}) == scopes


def _found(memo: ScopedMemo[str, int], scope: str) -> bool:
    with remembered_for(scope):
        return bool(memo.table())
