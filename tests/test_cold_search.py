"""Hybrid search: vec0 KNN and FTS5 bm25 fused by RRF. A planted turn is found by
meaning and by keyword, every hit says which retriever found it, no user text can
break the FTS5 query syntax, and a namespace's search never leaves the namespace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import tiermem
from tiermem import Memory
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import Message
from tiermem.tiers.search import MAX_FTS_TERMS, fts_query
from tiermem.tiers.tokens import BpeTokenCounter

FILLER = [
    "Let's plan the team offsite for the second week of June.",
    "The quarterly report needs two more charts about churn.",
    "Can you recommend a good Italian restaurant near the office?",
    "I switched the CI runners to the larger machine type.",
    "The dog needs to go to the vet for its annual vaccination.",
    "We should refactor the billing module before adding coupons.",
    "My sister is visiting from Toronto next weekend.",
    "Remind me to water the tomato plants in the evening.",
    "The concert tickets go on sale Friday at ten.",
    "Please draft a polite reply declining the sponsorship request.",
    "The new espresso machine in the kitchen makes terrible coffee.",
    "I am learning to play the cello, slowly.",
]
PLANTED = "My passport expires on 14 March 2027; the document number is X7Q-4417."
PLANTED_AT = 7


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, counter: BpeTokenCounter,
          embedder: FastEmbedder) -> Iterator[ColdStore]:
    """One indexed conversation for the whole module: every test here only reads."""
    cold = ColdStore(tmp_path_factory.mktemp("search") / "tiermem.db", tokens=counter, embedder=embedder)
    texts = [*FILLER[:PLANTED_AT], PLANTED, *FILLER[PLANTED_AT:]]
    cold.append_many("conv", [Message(role="user", content=t) for t in texts])
    cold.index_pending()
    yield cold
    cold.close()


def test_found_by_meaning(store: ColdStore) -> None:
    # no word in common with the planted turn: only the embedding can find it
    query = "When does my travel ID run out?"
    assert store.search_bm25(query, 10, conversation_id="conv") == []
    hits = store.search(query, k=3, conversation_id="conv")
    assert hits[0].position == PLANTED_AT
    assert set(hits[0].ranks) == {"dense"} and hits[0].ranks["dense"] == 1


def test_found_by_keyword(store: ColdStore) -> None:
    # an identifier means nothing to the embedding; bm25 has it
    hits = store.search("X7Q-4417", k=3, conversation_id="conv")
    assert hits[0].position == PLANTED_AT
    assert hits[0].ranks["bm25"] == 1


def test_found_by_both(store: ColdStore) -> None:
    hits = store.search("passport expiry", k=3, conversation_id="conv")
    assert hits[0].position == PLANTED_AT
    assert hits[0].ranks == {"dense": 1, "bm25": 1}
    # RRF: both first, so 2 / (60 + 1), the best score possible
    assert hits[0].score == pytest.approx(2 / 61)


def test_every_hit_reports_its_retrievers(store: ColdStore) -> None:
    hits = store.search("coffee machine in the kitchen", k=10, conversation_id="conv")
    assert len(hits) == 10
    for h in hits:
        assert h.ranks and set(h.ranks) <= {"dense", "bm25"}
        assert all(r >= 1 for r in h.ranks.values())
        assert h.score == pytest.approx(sum(1 / (60 + r) for r in h.ranks.values()))
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


HOSTILE = [
    ('"', False),  # a lone quote
    ('"passport', True),  # an unterminated phrase
    ('passport"4417', True),  # a quote inside a word
    ("NEAR(", False),  # an unfinished NEAR group
    ("NEAR(passport document, 2)", True),  # a real NEAR expression, taken as words
    ("pass*", False),  # a prefix query: only the word "pass", which is not there
    ("*", False),  # a bare star
    ("-passport", True),  # a leading minus (NOT in some syntaxes)
    ("passport:", True),  # a trailing colon
    (":", False),  # a bare colon
    ("text:passport", True),  # a column filter on the real column
    ("col:term", False),  # a column filter on a column that does not exist
    ("{text content}: passport", True),  # a column-set filter
    ("AND OR NOT", False),  # only operators
    ("passport AND", True),  # a dangling operator
    ("NOT passport", True),  # a leading NOT
    ("((passport", True),  # unbalanced open parens
    ("passport))", True),  # unbalanced close parens
    ("^passport", True),  # an initial-token anchor
    ("passport + document", True),  # a plus
    ("", False),  # the empty string
    ("   \t\n", False),  # whitespace only
    ("the and of to", False),  # only stopwords
    ("\x00passport", True),  # a NUL byte
    ("'; DROP TABLE messages; --", False),  # SQL, as text
    ("passport " + "word " * (MAX_FTS_TERMS * 3), True),  # more terms than are sent
    ("🛂 passport", True),  # an emoji
]


@pytest.mark.parametrize(("query", "finds_planted"), HOSTILE, ids=[repr(q)[:40] for q, _ in HOSTILE])
def test_fts_syntax_in_queries_never_raises(store: ColdStore, query: str, finds_planted: bool) -> None:
    bm25 = store.search_bm25(query, 5, conversation_id="conv")
    if finds_planted:
        assert bm25 and bm25[0][1] == PLANTED_AT
    else:
        assert all(pos != PLANTED_AT for _, pos, _ in bm25)
    store.search(query, k=5, conversation_id="conv")  # hybrid, for the conversation
    store.search(query, k=5, namespace="default")  # and for the namespace


@pytest.mark.parametrize("query", [q for q, _ in HOSTILE])
def test_fts_query_output_is_always_valid(store: ColdStore, query: str) -> None:
    # the escaped form, run as a raw MATCH, is valid FTS5 whatever the input
    q = fts_query(query)
    if q is not None:
        store._read("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH ?", (q,))


def test_namespace_search_stays_in_its_namespace(cold_memory: Memory) -> None:
    alice, bob = cold_memory.namespaced("alice"), cold_memory.namespaced("bob")
    alice.append("alice-trip", {"role": "user", "content": "Book the zebra safari in Kenya for me."})
    alice.append("alice-work", {"role": "user", "content": "The zebra crossing near work is repainted."})
    bob.append("bob-trip", {"role": "user", "content": "I also want the zebra safari, in Tanzania."})
    cold_memory.append("default-conv", {"role": "user", "content": "zebra zebra zebra"})

    for found in (alice.search(None, "zebra safari", k=10),
                  cold_memory.search(None, "zebra safari", k=10, namespace="alice")):
        assert {h.conversation_id for h in found} == {"alice-trip", "alice-work"}
        assert found[0].conversation_id == "alice-trip"
        assert "safari" in found[0].text
    assert {h.conversation_id for h in bob.search(None, "zebra", k=10)} == {"bob-trip"}
    # the default namespace is a namespace like the others
    assert {h.conversation_id for h in cold_memory.search(None, "zebra", k=10)} == {"default-conv"}
    # and a namespace with no conversations finds nothing, quietly
    assert cold_memory.namespaced("carol").search(None, "zebra", k=10) == []


def test_search_on_another_namespaces_conversation_is_not_found(cold_memory: Memory) -> None:
    cold_memory.append("bob-trip", {"role": "user", "content": "zebra safari"}, namespace="bob")
    with pytest.raises(tiermem.ConversationNotFound):
        cold_memory.namespaced("alice").search("bob-trip", "zebra", k=5)
    with pytest.raises(tiermem.ConversationNotFound):
        cold_memory.search("bob-trip", "zebra", k=5, namespace="alice")
    with pytest.raises(tiermem.ConversationNotFound):
        cold_memory.search("nobody", "zebra", k=5)
    # the owner, or the unscoped facade, may search it
    assert cold_memory.namespaced("bob").search("bob-trip", "zebra", k=5)[0].position == 0


@pytest.mark.parametrize(
    ("query", "k", "field"),
    [
        ("x", 0, "k"),  # k below 1
        ("x", 10_000, "k"),  # k above the cap
        ("x", True, "k"),  # a bool is not a count
        (None, 5, "query"),  # not a string
    ],
)
def test_bad_search_arguments(cold_memory: Memory, query: object, k: object, field: str) -> None:
    cold_memory.append("conv", {"role": "user", "content": "x"})
    with pytest.raises(tiermem.ValidationError, match=field):
        cold_memory.search("conv", query, k=k)  # type: ignore[arg-type]


def test_memory_search_embeds_what_is_pending(cold_memory: Memory) -> None:
    # background indexing is off here: search catches up the conversation itself
    cold_memory.append("conv", {"role": "user", "content": "The wifi password is on the fridge."})
    assert cold_memory.cold.pending_embeddings("conv") == 1
    hits = cold_memory.search("conv", "where can I find the network credentials", k=1)
    assert hits[0].position == 0 and "dense" in hits[0].ranks
    assert cold_memory.cold.pending_embeddings("conv") == 0
