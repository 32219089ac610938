"""A long turn's keyword terms: stemmed once per distinct word, the same terms as word by word.

The turn cache's keyword index took each turn's terms word by word through the stem memo
(`tiers.lexical.doc_terms`): a 1 MB turn of ~185k words cost ~0.7 s of CPU, so the first
plan of a conversation of 10 such turns took 13 s (reviewer's stall.py). Each distinct
word is now stemmed (or found in the memo) once per text and the counting is done on the
words; the terms, their counts and their order must be what the word-by-word form gave,
and a long turn's words are found wherever they stand in it (the whole text is indexed)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tiermem.tiers import lexical
from tiermem.tiers.lexical import LexicalIndex, doc_term_counts, doc_terms
from tiermem.tiers.memo import remembered_for

_TOKEN = re.compile(r"[^\W_]+")  # unicode61's token characters, as the module's


def _word_by_word(text: str) -> list[str]:
    """The terms as doc_terms took them before: each word through `_term`."""
    return [lexical._term(w) for w in _TOKEN.findall(text.lower())]


# texts, one per way a word can be split, folded or stemmed
TEXTS = [
    "Ünïcödé naïve",  # diacritics removed, then stemmed
    "The KELVIN \u212a sign lowers to ASCII",  # a non-ASCII letter whose lower case is ASCII
    "a_b c-d 12ab x\u00a0y",  # underscore and no-break space split words
    "İstanbul ǅ ß straße",  # lower() that grows a combining mark, titlecase digraph
    "日本語のテキスト and english",  # non-Latin runs are words, unstemmed
    "running runs ran runner's RUNNING",  # one term from several words, any case
    "",  # no words
    "0 " + "lorem ipsum dolor sit amet " * 2_000,  # long, a word only once (the reviewer's turns)
]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
@pytest.mark.parametrize("warm", [False, True], ids=["fresh_memo", "warm_memo"])
def test_the_terms_are_the_word_by_word_terms(text: str, warm: bool) -> None:
    lexical.forget_terms()
    with remembered_for("test-scope"):
        if warm:  # the memo already holds some words (or all): the result may not depend on it
            _word_by_word(text[: len(text) // 2])
        want = _word_by_word(text)
        assert doc_terms(text) == want
        counts = doc_term_counts(text)
        assert counts == Counter(want)
        assert list(counts) == list(Counter(want))  # first-occurrence order: the same vocabulary ids


def test_a_long_turn_is_indexed_whole() -> None:
    filler = "lorem ipsum dolor sit amet " * 40_000  # ~1 MB
    texts: list[str | None] = ["zebra " + filler, filler + " quokka", "a short turn about a quokka", None]
    index = LexicalIndex()
    index.add_many(texts)
    assert [i for i, _s in index.search("zebra", 10)] == [0]  # its first word
    assert sorted(i for i, _s in index.search("quokka", 10)) == [1, 2]  # its last word, ~1 MB in
    total, lengths, found = index.postings(["lorem"])
    assert total == 4 and list(lengths) == [200_001, 200_001, 6, 0]
    (_t, docs, counts), = found
    assert list(docs) == [0, 1] and list(counts) == [40_000, 40_000]
