"""The Memory facade over the cold log: a fold moves a read boundary and deletes nothing
(invariant 4), fork copies a prefix, a namespaced view sees only its own namespace, and
rebuild() recomputes every derived index from the messages (invariant 2)."""

from __future__ import annotations

import pytest
from cold_helpers import raw

import tiermem
from tiermem import Memory

TURNS = [
    ("user", "I want to fly from Lisbon to Tokyo in October."),
    ("assistant", "Noted: Lisbon to Tokyo, October. Any airline preference?"),
    ("user", "No red-eye flights, and I prefer a window seat."),
    ("assistant", "Understood: no red-eyes, window seat."),
    ("user", "My budget is 1800 euros for the return ticket."),
    ("assistant", "I will search within 1800 euros."),
]


@pytest.fixture
def mem(cold_memory: Memory) -> Memory:
    cold_memory.append_many("trip", [{"role": r, "content": c} for r, c in TURNS])
    return cold_memory


def _texts(messages: list[tiermem.StoredMessage]) -> list[str]:
    return [m.text for m in messages]


def test_history_returns_everything_in_order(mem: Memory) -> None:
    got = mem.history("trip")
    assert [m.position for m in got] == list(range(len(TURNS)))
    assert [(m.role, m.text) for m in got] == TURNS
    assert all(m.tokens > 3 for m in got)  # the turn index's count, overhead included
    assert got[0].to_openai() == {"role": "user", "content": TURNS[0][1]}


def test_checkpoint_folds_without_deleting(mem: Memory) -> None:
    view = mem.active("trip")
    assert view.checkpoint is None and len(view.messages) == len(TURNS)

    cp = mem.checkpoint("trip", "Lisbon to Tokyo in October; no red-eyes; window seat.", 3)
    assert (cp.conversation_id, cp.position) == ("trip", 3)
    # the fold moved the read boundary: active is the suffix after it
    view = mem.active("trip")
    assert view.checkpoint is not None and view.checkpoint.summary.startswith("Lisbon to Tokyo")
    assert [m.position for m in view.messages] == [4, 5]
    # and deleted nothing: history still has every message
    assert [(m.role, m.text) for m in mem.history("trip")] == TURNS
    assert mem.stats()["cold"]["messages"] == len(TURNS)

    # a later fold wins; one covering the whole conversation leaves an empty suffix
    mem.checkpoint("trip", "everything so far", 5)
    view = mem.active("trip")
    assert view.checkpoint is not None and view.checkpoint.position == 5 and view.messages == []
    # new turns land after the fold
    mem.append("trip", {"role": "user", "content": "Also, vegetarian meals."})
    assert _texts(mem.active("trip").messages) == ["Also, vegetarian meals."]
    assert len(mem.history("trip")) == len(TURNS) + 1


@pytest.mark.parametrize(
    ("conv", "summary", "position", "error"),
    [
        ("trip", "s", -1, tiermem.ValidationError),  # before the first message
        ("trip", "s", len(TURNS), tiermem.ValidationError),  # past the last message
        ("trip", "   ", 2, tiermem.ValidationError),  # an empty summary
        ("nowhere", "s", 0, tiermem.ConversationNotFound),  # no such conversation
        ("../trip", "s", 0, tiermem.ValidationError),  # a bad id
    ],
)
def test_bad_checkpoint_writes_nothing(mem: Memory, conv: str, summary: str, position: int,
                                       error: type[Exception]) -> None:
    with pytest.raises(error):
        mem.checkpoint(conv, summary, position)
    assert mem.stats()["cold"]["checkpoints"] == 0


def test_fork_through_memory(mem: Memory) -> None:
    mem.checkpoint("trip", "Lisbon to Tokyo, October", 1)
    mem.checkpoint("trip", "plus: no red-eyes, window seat, 1800 euros", 4)
    child = mem.fork("trip", 3)
    assert child != "trip" and child in mem.conversations()
    assert [(m.role, m.text) for m in mem.history(child)] == TURNS[:4]
    # the child's fold is the latest one at or before the fork point
    view = mem.active(child)
    assert view.checkpoint is not None and view.checkpoint.position == 1
    assert [m.position for m in view.messages] == [2, 3]
    # the two go their own ways
    assert mem.append(child, {"role": "user", "content": "Actually, make it Osaka."}) == 4
    assert len(mem.history("trip")) == len(TURNS)
    assert mem.search(child, "Osaka", k=1)[0].position == 4
    assert all(h.text != "Actually, make it Osaka." for h in mem.search("trip", "Osaka", k=5))
    # a chosen id, and its validation
    assert mem.fork("trip", 0, new_id="trip-alt") == "trip-alt"
    with pytest.raises(tiermem.ValidationError, match="new_id"):
        mem.fork("trip", 0, new_id="trip-alt")
    with pytest.raises(tiermem.ValidationError, match="new_id"):  # the argument given, by its name
        mem.fork("trip", 0, new_id="../escape")
    with pytest.raises(tiermem.ValidationError, match="up_to"):
        mem.fork("trip", "3")  # type: ignore[arg-type]


def test_namespaced_view_cannot_see_other_namespaces(cold_memory: Memory) -> None:
    alice, bob = cold_memory.namespaced("alice"), cold_memory.namespaced("bob")
    alice.append("a-trip", {"role": "user", "content": "alice's secret plan"})
    alice.checkpoint("a-trip", "alice's summary", 0)
    bob.append("b-trip", {"role": "user", "content": "bob's plan"})

    assert alice.conversations() == ["a-trip"]
    assert bob.conversations() == ["b-trip"]
    # every read and write of another namespace's conversation: not found
    for call in (lambda: bob.history("a-trip"), lambda: bob.active("a-trip"),
                 lambda: bob.checkpoint("a-trip", "bob was here", 0), lambda: bob.fork("a-trip", 0),
                 lambda: bob.search("a-trip", "secret", k=3), lambda: bob.pin("a-trip", 0)):
        with pytest.raises(tiermem.ConversationNotFound):
            call()
    # ids are per namespace: bob's append to the same id is bob's own conversation,
    # and alice's is untouched
    assert bob.append("a-trip", {"role": "user", "content": "bob's own a-trip"}) == 0
    assert _texts(alice.history("a-trip")) == ["alice's secret plan"]
    assert _texts(bob.history("a-trip")) == ["bob's own a-trip"]
    assert alice.active("a-trip").checkpoint is not None
    assert bob.active("a-trip").checkpoint is None
    # a namespace's stats count its own rows only
    assert bob.stats()["cold"]["conversations"] == 2 and bob.stats()["cold"]["messages"] == 2
    # a fork stays in its parent's namespace
    child = alice.fork("a-trip", 0)
    assert alice.conversations() == sorted(["a-trip", child])
    with pytest.raises(tiermem.ConversationNotFound):
        bob.history(child)


def test_rebuild_recomputes_every_derived_index(mem: Memory) -> None:
    mem.catch_up()
    before = {t.position: (t.role, t.tokens, t.content_hash) for t in mem.cold.turns("trip")}
    assert mem.search("trip", "seat by the window", k=1)[0].ranks.keys() == {"dense", "bm25"}

    # lose all three derived indexes behind tiermem's back
    with raw(mem.cold.path) as conn:
        conn.execute("DROP TABLE messages_vec")
        conn.execute("DELETE FROM turns")
        conn.execute("DELETE FROM messages_fts")

    report = mem.rebuild()
    assert report["turns"] == len(TURNS) and report["embedded"] == len(TURNS)
    assert mem.cold.integrity() == dict.fromkeys(("messages", "turns", "fts", "vectors"), len(TURNS))
    assert {t.position: (t.role, t.tokens, t.content_hash) for t in mem.cold.turns("trip")} == before
    assert mem.stats()["cold"]["pending_embeddings"] == 0
    # search works again, by meaning and by keyword
    hit = mem.search("trip", "seat by the window", k=1)[0]
    assert hit.position in (2, 3) and hit.ranks.keys() == {"dense", "bm25"}  # both mention the seat
    hit = mem.search("trip", "in which month do I travel?", k=1)[0]
    assert hit.position in (0, 1) and "dense" in hit.ranks


def test_rebuild_after_only_the_vector_table_is_dropped(mem: Memory) -> None:
    mem.catch_up()
    with raw(mem.cold.path) as conn:
        conn.execute("DROP TABLE messages_vec")
    # degraded, not broken: before anything re-embeds, keyword search still answers
    hits = mem.cold.search("return ticket", k=1, conversation_id="trip")
    assert hits[0].position == 4 and hits[0].ranks.keys() == {"bm25"}
    mem.rebuild()
    hits = mem.search("trip", "return ticket", k=1)
    assert hits[0].position == 4 and hits[0].ranks.keys() == {"dense", "bm25"}


def test_a_lost_vector_table_heals_without_rebuild(mem: Memory) -> None:
    # invariant 2: losing an index loses speed, never the ability to answer
    mem.catch_up()
    with raw(mem.cold.path) as conn:
        conn.execute("DROP TABLE messages_vec")
    mem.append("trip", {"role": "user", "content": "Please add travel insurance."})
    hit = mem.search("trip", "insurance", k=1)[0]
    assert hit.position == len(TURNS) and hit.ranks.keys() == {"dense", "bm25"}
    # every vector was recomputed, not just the new turn's
    assert mem.cold.integrity()["vectors"] == len(TURNS) + 1
    assert mem.stats()["cold"]["pending_embeddings"] == 0
    # fork and prune work on the healed store
    child = mem.fork("trip", 2)
    assert mem.cold.integrity()["vectors"] == len(TURNS) + 1 + 3
    assert mem.prune(0).conversations == 2  # everything is older than "now"
    assert mem.cold.integrity() == dict.fromkeys(("messages", "turns", "fts", "vectors"), 0)
    assert child not in mem.conversations()


def test_fork_and_prune_with_the_vector_table_lost(mem: Memory) -> None:
    mem.catch_up()
    with raw(mem.cold.path) as conn:
        conn.execute("DROP TABLE messages_vec")
    # neither the copy nor the one deletion in the system may depend on a derived index
    child = mem.fork("trip", 2)
    assert len(mem.history(child)) == 3
    assert mem.prune(0).messages == len(TURNS) + 3
