"""What a keyword index says it holds (tiers/lexical.py `LexicalIndex.nbytes`, counted
against turn_cache_mb) is what it holds, by tracemalloc. On the code before it counted
about half (6 bytes a posting, 120 a vocabulary entry: 1.9-2.2x under, scale review of
2026-12-07), so a turn cache of turn_cache_mb held up to twice that."""

from __future__ import annotations

import gc
import itertools
import random
import tracemalloc

import pytest

from tiermem.tiers.lexical import LexicalIndex

# tolerated error of the count against the traced bytes (the fit's residual is ~5%)
TOLERANCE = 0.2
WORDS = 6000  # a chat's vocabulary: common words and rarer names, codes and numbers


def texts(turns: int, seed: int) -> list[str | None]:
    rng = random.Random(seed)
    vocab = [f"{''.join(rng.choice('bcdfghjklmnprstvwz') + rng.choice('aeiou') for _ in range(rng.randint(2, 4)))}"
             for _ in range(WORDS)]
    # Zipf-like: a few words in most turns, most words in few. Cumulative weights, summed
    # once: `choices(vocab, weights)` sums all WORDS of them again on every call (4.6 of the
    # 5000-turn case's set-up seconds under load), and draws the very same words from these
    cum_weights = list(itertools.accumulate(1.0 / (r + 1) for r in range(WORDS)))
    return [" ".join(rng.choices(vocab, cum_weights=cum_weights, k=rng.randint(8, 40)))
            + f" order {rng.randint(1, 10**6)}" for _ in range(turns)]


@pytest.mark.parametrize(
    "turns",
    [
        # a short conversation: vocabulary entries dominate
        300,
        # a long one: postings dominate
        5000,
    ],
)
def test_nbytes_matches_the_memory_held(turns: int) -> None:
    batch = texts(turns, turns)
    LexicalIndex().add_many(["warm up the stemmer 123"])  # module memos outside the count
    gc.collect()
    tracemalloc.start()
    try:
        idx = LexicalIndex()
        idx.add_many(batch)
        gc.collect()
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert abs(idx.nbytes() / held - 1.0) <= TOLERANCE, (idx.nbytes(), held)
