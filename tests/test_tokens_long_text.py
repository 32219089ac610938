"""A long text's count: remembered per scope (a few), chunked with cuts found from the end.

A context over 1 MB turns counted the latest user message and the tail's turns several
times each (the fixed part's check, its room, the candidate, the rendered result): texts
past MEMO_MAX_CHARS were never remembered, and each count of 1 MB also spent half its time
finding chunk cuts match by match. Counts must stay exact: the same as counting whole
texts, found again only in the scope they were counted in, forgotten by `clear_memo`."""

from __future__ import annotations

import random
import re

import pytest

from tiermem.tiers import tokens
from tiermem.tiers.memo import remembered_for
from tiermem.tiers.tokens import CHUNK_CHARS, BpeTokenCounter, _chunks, _last_safe_cut

SCOPE = "db\0c\0conv"
OTHER = "db\0c\0other"
LONG = "0 " + ("lorem ipsum dolor sit amet " * 40_000)[:1_000_000]  # the reviewer's 1 MB turn


def _regex_cut(text: str, lo: int, hi: int) -> int:
    """The last safe cut as `_chunks` found it before: every match of the window in turn."""
    cut = -1
    for m in tokens._SAFE_CUT.finditer(text, lo, hi):
        cut = m.start()
    return cut


def test_the_last_safe_cut_is_the_regexs() -> None:
    rng = random.Random(7)
    # spaces, runs of them, other whitespace (no-break, ideographic, tab, newline) and words
    pieces = [" ", "  ", "\n", " \u00a0", "a", "bc", "\u3000", "x\t", " \u2003", "日本"]
    for _ in range(5_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        lo = rng.randint(0, len(text))
        hi = rng.randint(lo, len(text))
        assert _last_safe_cut(text, lo, hi) == _regex_cut(text, lo, hi), (text, lo, hi)


# long texts, one per way a chunk ends
TEXTS = [
    LONG,  # words: a cut in every window
    "x" * (CHUNK_CHARS * 3) + " tail",  # no safe cut: the chunk runs on to the next one
    ("word   " * 30_000),  # runs of spaces: cut only at a run's first space
    ("\u00a0".join(["mot"] * 60_000)),  # no-break spaces only: not a cut (\\S before a space)
]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_a_chunked_count_is_the_whole_count(text: str) -> None:
    counter = BpeTokenCounter()
    assert "".join(_chunks(text)) == text
    assert counter._count(text) == int(counter._tok.count(text))  # one call over the whole text


def test_a_long_count_is_remembered_in_its_scope_only() -> None:
    counter = BpeTokenCounter()
    with remembered_for(SCOPE):
        n = counter.count(LONG)
        assert counter.count(LONG) == n and counter.memo_hits == 1  # the second count: remembered
    with remembered_for(OTHER):  # another conversation's (another tenant's) call: counted afresh
        assert counter.count(LONG) == n and counter.memo_hits == 1
    counter.clear_memo()  # an erasure: no copy of the text kept
    assert LONG not in counter._long_memo and len(counter._long_memo) == 0
    with remembered_for(SCOPE):
        assert counter.count(LONG) == n and counter.memo_hits == 1


def test_the_long_memo_is_bounded() -> None:
    counter = BpeTokenCounter()
    with remembered_for(SCOPE):
        for i in range(tokens.LONG_MEMO_MAX_ENTRIES * 2):
            counter.count(f"{i} " + LONG[:10_000])
    assert 0 < len(counter._long_memo) <= tokens.LONG_MEMO_MAX_ENTRIES


def test_regex_whitespace_is_str_isspace() -> None:
    # `_last_safe_cut` tests str.isspace where the regex tested \\s: the same characters
    assert all(bool(re.match(r"\s", chr(c))) == chr(c).isspace() for c in range(0x110000))
