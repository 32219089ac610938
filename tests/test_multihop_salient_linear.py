"""multihop.salient_terms reads a text in one pass: whether a word sits inside a sentence
is decided from the text between it and the previous word, never by searching the whole
text before it again (that was quadratic: ~12 s of one context() over a tool round of
10 x 100 kB outputs). Its answers are the same as the old function's, kept here as the
reference, over texts with punctuation, abbreviations, unicode, whitespace of every kind,
empty and large ones."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from tiermem.planner import multihop
from tiermem.planner.multihop import (
    ENTITY_SHARE,
    HOP_TERMS,
    MIN_LINK_TURNS,
    MIN_RARE_TURNS,
    MIN_TERM_CHARS,
    RARE_SHARE,
    salient_terms,
)
from tiermem.tiers.lexical import LexicalIndex, doc_terms, query_terms
from tiermem.tiers.search import STOPWORDS
from tiermem.tiers.turncache import TurnTable

_WORD = re.compile(r"[^\W_]+")
_SENTENCE_END = re.compile(r"[.!?:;\"'()\[\]]\s*$")


def old_salient_terms(text: str, query: Sequence[str], table: TurnTable, limit: int = HOP_TERMS) -> list[str]:
    """The function as it was before the one-pass rewrite (verbatim but for the names)."""
    if table.lexical is None or not text:
        return []
    n = len(table)
    skip = set(query)
    entity: dict[str, bool] = {}
    for m in _WORD.finditer(text):
        w = m.group(0)
        low = w.lower()
        if low in STOPWORDS or (len(w) < MIN_TERM_CHARS and not w.isdigit()):
            continue
        terms = doc_terms(w)
        if not terms or terms[0] in skip:
            continue
        inside = m.start() > 0 and not _SENTENCE_END.search(text[:m.start()])
        is_entity = (w[0].isupper() and inside) or any(ch.isdigit() for ch in w)
        entity[terms[0]] = entity.get(terms[0], False) or is_entity
    if not entity:
        return []
    total, _lengths, found = table.lexical.postings(list(entity), n)
    if not total:
        return []
    rare = max(MIN_RARE_TURNS, math.floor(RARE_SHARE * total))
    common = max(MIN_RARE_TURNS, math.floor(ENTITY_SHARE * total))
    kept = [(not entity[t], docs.shape[0], t) for t, docs, _tf in found
            if MIN_LINK_TURNS <= docs.shape[0] <= (common if entity[t] else rare)]
    kept.sort()
    return [t for _e, _df, t in kept[:limit]]


def _table(texts: list[str]) -> TurnTable:
    n = len(texts)
    lexical = LexicalIndex()
    lexical.add_many(list(texts))
    return TurnTable("c", np.arange(n, dtype=np.int64), np.full(n, 20, dtype=np.int64),
                     np.arange(n, dtype=np.float64), np.arange(n, dtype=np.int64) % 4, None,
                     np.zeros(n, dtype=bool), lexical=lexical)


# pieces of text: names after sentence ends of every kind and inside sentences, abbreviations,
# digits, underscores, unicode letters whose lower case changes length, unicode whitespace
# (str.isspace and the regex's \s both), quotes and brackets
PIECES = [
    "Ann", "Sweden", "Paris", "Zoë", "İstanbul", "ÉCOLE", "straße", "Straße", "3rd", "2024", "v2",
    "foo_Bar", "_Oslo", "Dr.", "Mr.", "e.g.", "U.S.", "etc.", "moved", "necklace", "grandma",
    "logs", "status", "value", "line", "the", "of", "a", "ok", "Ok", "Ｆｕｌｌ", "日本", "Ωmega",
    ".", "!", "?", ":", ";", '"', "'", "(", ")", "[", "]", ",", "-", "...", "…", "。", "»", "«",
    " ", "  ", "\n", "\t", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u2028",
    "\u3000", "\u200b",
]
_rng = random.Random(34)
TEXTS = ["".join(_rng.choice(PIECES) + (" " if _rng.random() < 0.6 else "") for _ in range(_rng.randint(1, 60)))
         for _ in range(300)]
CORPUS = [
    *TEXTS,
    "I moved here from Sweden four years ago. Ann said so.",
    "my grandma back in Sweden sent me a necklace",
    "Ann went to Paris; Paris was cold. 3rd time there (Zoë too).",
]


@pytest.fixture(scope="module")
def table() -> TurnTable:
    return _table(CORPUS)


# (text, query): hand-written cases, each with what it exercises
CASES = [
    ("", ""),  # empty text
    ("   ", ""),  # whitespace only, no word
    ("Sweden", ""),  # a capitalised word at the very start (not inside)
    ("  Sweden", ""),  # after leading whitespace only: inside
    (". Sweden", ""),  # after a sentence end
    (".\n\n  \t Sweden", ""),  # a sentence end, then whitespace of several kinds
    (".\xa0\u2028\x1c Sweden", ""),  # unicode whitespace the regex's \s takes too
    (".\u200b Sweden", ""),  # zero-width space: not whitespace, so inside
    ("Dr. Ann moved to Paris. Ann stayed", ""),  # an abbreviation ends a sentence for the rule
    ("e.g. Paris, U.S. Sweden", ""),  # dots inside words
    ("moved (Sweden) and [Paris]", ""),  # brackets count as ends
    ("'Ann' said \"Paris\"", ""),  # quotes count as ends
    ("foo_Bar _Oslo foo_Sweden", ""),  # underscores are no word characters and no ends
    ("Zoë İstanbul ÉCOLE straße Straße", ""),  # unicode letters, case changing length
    ("I moved here from Sweden four years ago. Ann said so.", "where did Ann move from"),  # query terms left out
    ("Ann went to Paris; Paris was cold. 3rd time there (Zoë too).", "Paris"),  # a query term
    ("value 2024 v2 3rd status", ""),  # digits make a word entity-like wherever it is
    ("sweden. Sweden sweden", ""),  # the same term entity-like at one place only
]


@pytest.mark.parametrize(("text", "query"), CASES)
def test_the_same_terms_as_before_on_written_cases(table: TurnTable, text: str, query: str) -> None:
    q = query_terms(query)
    assert salient_terms(text, q, table) == old_salient_terms(text, q, table)


def test_the_same_terms_as_before_on_generated_texts(table: TurnTable) -> None:
    # every generated text against the table that holds them all, with and without a query,
    # with the default limit and a large one (the order of all kept terms compared)
    differ = []
    for i, text in enumerate(TEXTS):
        for q in ([], query_terms(TEXTS[(i + 1) % len(TEXTS)])):
            for limit in (HOP_TERMS, 1000):
                if salient_terms(text, q, table, limit) != old_salient_terms(text, q, table, limit):
                    differ.append((i, q, limit))
    assert not differ
    # and the cases hold entity-like and plain terms both, so the comparison means something
    got = [salient_terms(t, [], table, 1000) for t in TEXTS]
    assert sum(1 for g in got if g) > len(TEXTS) // 2


def test_the_same_terms_as_before_on_a_large_text(table: TurnTable) -> None:
    # ~15 kB: large enough for many sentence ends and words, small enough for the
    # reference's quadratic search to stay fast
    text = " ".join(TEXTS)[:15_000]
    for limit in (HOP_TERMS, 1000):
        assert salient_terms(text, [], table, limit) == old_salient_terms(text, [], table, limit)


class _Counting:
    """The real pattern, counting the characters each search is given to scan."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.scanned = 0

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> Any:
        end = len(text) if endpos is None else endpos
        self.scanned += end - pos
        return self.pattern.search(text, pos, end)


@pytest.mark.parametrize("words", [
    2_000,  # ~9 kB of log lines
    8_000,  # ~38 kB: the old search scanned hundreds of times the text, growing with its square
])
def test_the_sentence_rule_scans_the_text_about_once(table: TurnTable, monkeypatch: pytest.MonkeyPatch,
                                                     words: int) -> None:
    text = " ".join(f"line {j} of file: status Ok value {j * 7 % 101}." for j in range(words // 8))
    counting = _Counting(multihop._SENTENCE_END)
    monkeypatch.setattr(multihop, "_SENTENCE_END", counting)
    salient_terms(text, [], table)
    assert 0 < counting.scanned <= len(text), (counting.scanned, len(text))
