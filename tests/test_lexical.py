"""The planner's in-memory keyword index (tiers/lexical.py) matches words the way FTS5's
tokenizer does and ranks them with FTS5's bm25 formula."""

from __future__ import annotations

import math

import pytest

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.lexical import BM25_B, BM25_K1, LexicalIndex, doc_terms, query_terms
from tiermem.tiers.models import Message

DOCS = [
    "We booked the flight to Denver for Friday.",
    "I was running late because of the traffic.",
    "The café on the corner serves great espresso.",
    "Runners should stretch before they run.",
    "Let's talk about the budget for the Denver trip.",
    "ok",
    "",
]


def index(docs: list[str]) -> LexicalIndex:
    lex = LexicalIndex()
    lex.add_many(list(docs))
    return lex


@pytest.mark.parametrize(("query", "expected_first"), [
    ("was running late", 1),  # Porter stems: running -> run
    ("runner", 3),  # ... and runners -> runner
    ("cafe", 2),  # diacritics removed: café -> cafe
    ("DENVER flight", 0),  # case folded; two matching words beat one
    ("budget denver", 4),
])
def test_words_match_as_fts5_would(query: str, expected_first: int) -> None:
    hits = index(DOCS).search(query, 3)
    assert hits and hits[0][0] == expected_first


@pytest.mark.parametrize("query", [
    "",  # nothing to search
    "what is the",  # stopwords only
    "zeppelin",  # a word no turn has
    "!!! ???",  # punctuation only
])
def test_no_match_is_an_empty_list(query: str) -> None:
    assert index(DOCS).search(query, 5) == []


def test_scores_follow_fts5_bm25_formula() -> None:
    docs = ["apple apple banana", "apple cherry", "cherry cherry cherry date", "banana"]
    got = dict(index(docs).search("apple", 10))
    lengths = [3, 2, 4, 1]
    avgdl = sum(lengths) / 4
    idf = math.log((4 - 2 + 0.5) / (2 + 0.5))
    idf = idf if idf > 0 else 1e-6  # FTS5's floor: a word in half the turns
    for doc, tf in ((0, 2), (1, 1)):
        want = idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * lengths[doc] / avgdl))
        assert got[doc] == pytest.approx(-want)  # negative like FTS5's: lower is better
    assert set(got) == {0, 1}


def test_a_snapshot_sees_only_its_turns_and_ties_go_to_the_earlier() -> None:
    lex = index(["the denver plan", "the denver plan"])
    hits = lex.search("denver", 5)
    assert [d for d, _ in hits] == [0, 1]  # equal scores: log order
    lex.add("denver denver denver")
    assert [d for d, _ in lex.search("denver", 5, n=2)] == [0, 1]  # an older snapshot's view
    assert lex.search("denver", 1)[0][0] == 2
    assert len(lex.search("denver", 2)) == 2  # k caps the answer


def test_query_terms_are_distinct_and_capped() -> None:
    terms = query_terms("run running runs RUN " + " ".join(f"word{i}" for i in range(100)))
    assert terms[0] == "run" and terms.count("run") == 1
    assert len(terms) == 32
    assert doc_terms("Ünïcödé naïve") == ["unicod", "naiv"]  # folded, then stemmed


def test_agrees_with_fts5_on_the_best_match(cold: ColdStore) -> None:
    cold.append_many("c", [Message(role="user", content=d or "(empty)") for d in DOCS])
    lex = index([d or "(empty)" for d in DOCS])
    for q in ("running late", "cafe espresso", "denver budget", "flight friday"):
        fts = cold.search_bm25(q, 3, conversation_id="c")
        mine = lex.search(q, 3)
        assert fts and mine and fts[0][1] == mine[0][0], q
