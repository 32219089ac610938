"""prune: the one deletion in the system (invariant 3). Whole conversations whose last
message is older than the cutoff go, with every row derived from them, in one
transaction; the space goes back to the file system; forks keep their copies."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from cold_helpers import conversation_rows, file_sizes, raw, table_rows

from tiermem.tiers import cold as cold_module
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

DAY = 86_400.0
OLD = time.time() - 30 * DAY
CUTOFF = time.time() - 7 * DAY


# 40 stems x 1000 numbers: random words that neither compress nor repeat much in the index
WORDS = [f"{a}{b}{k}" for a in ("ka", "lo", "mi", "nu", "pe", "ra", "so", "tu") for b in ("x", "yn", "zor", "q", "wa")
         for k in range(1000)]


WORDS_PER_TURN = 375  # ~2.6 kB of text a turn


def _words(rng: random.Random, n: int) -> str:
    # one draw a word from the whole list (rng.choices): the same words as a choice of
    # stem and then of number, without two Python-level draws per word (150,000 words)
    return " ".join(rng.choices(WORDS, k=n))


def test_prune_shrinks_the_file_and_its_wal(tmp_path: Path, counter: BpeTokenCounter,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # No pause between the erasure's batches: the pause leaves the lock to other writers,
    # and there are none here. Long turns hold each batch long (FTS deletes), so the
    # conversations after the first are detached and purged in several batches, each
    # followed by a pause as long: ~8 s of a ~23 s test spent asleep at 1,500 words a turn.
    # The batches, their sizes and the scrub are unchanged (the lock free between batches:
    # test_erasure_batches.py, test_erasure_detached.py)
    monkeypatch.setattr(cold_module, "ERASE_PAUSE_MAX_S", 0.0)
    db = tmp_path / "data" / "tiermem.db"
    store = ColdStore(db, tokens=counter, embedder=None)
    try:
        rng = random.Random(7)
        # about 1 MB of text in old conversations (400 turns, so the erasure still runs in
        # batches), a little in a recent one: the file ends at under half only if the freed
        # pages go back (4 MB took 4 times as long to write and erase, for the same check)
        for c in range(4):
            store.append_many(f"old-{c}", [Message(role="user", content=_words(rng, WORDS_PER_TURN),
                                                   created_at=OLD + i) for i in range(100)])
        store.append("recent", Message(role="user", content="still here"))
        before = file_sizes(db)
        assert before["db"] + before["-wal"] > 750_000

        report = store.prune(CUTOFF, all_namespaces=True)

        after = file_sizes(db)
        assert report.conversations == 4 and report.messages == 400
        assert after["-wal"] == 0  # wal_checkpoint(TRUNCATE)
        # the database file itself gave the pages back, not just the WAL
        assert after["db"] < before["db"] / 2
        assert after["db"] + after["-wal"] + after["-shm"] < (before["db"] + before["-wal"] + before["-shm"]) / 2
        assert report.bytes_before == sum(before.values())
        assert report.bytes_after == sum(after.values())
        assert report.bytes_reclaimed == report.bytes_before - report.bytes_after
        assert [m.text for m in store.history("recent")] == ["still here"]
    finally:
        store.close()


@pytest.fixture
def aged(cold: ColdStore) -> ColdStore:
    """An old conversation with a checkpoint and a pin, a fork of it that kept going,
    and a recent conversation."""
    cold.append_many("old", [Message(role="user", content=f"old topic {t}", created_at=OLD + i)
                             for i, t in enumerate(["kayaks", "lanterns", "marmalade", "nectarines"])])
    cold.checkpoint("old", "about kayaks and lanterns", 1)
    cold.set_pin("old", 2, 70)
    cold.fork("old", 2, new_id="old-fork")
    cold.append("old-fork", Message(role="user", content="the fork goes on today"))
    cold.append("recent", Message(role="user", content="recent topic: origami"))
    cold.index_pending()
    return cold


def test_pruned_conversation_leaves_no_row(aged: ColdStore) -> None:
    with raw(aged.path) as conn:
        assert conversation_rows(conn, "old") == {"conversations": 1, "messages": 4, "turns": 4, "fts": 4,
                                                  "checkpoints": 1, "pins": 1, "vectors": 4}
        before = table_rows(conn)
    report = aged.prune(CUTOFF, all_namespaces=True)
    assert report.conversation_ids == ["old"] and report.messages == 4
    with raw(aged.path) as conn:
        assert set(conversation_rows(conn, "old").values()) == {0}
        after = table_rows(conn)
    # exactly the old conversation's rows are gone, from every table
    assert {t: before[t] - after[t] for t in before} == {
        "conversations": 1, "messages": 4, "turns": 4, "messages_fts": 4, "checkpoints": 1, "pins": 1,
        "messages_vec": 4}
    assert aged.conversation("old") is None
    assert aged.history("old") == []
    assert aged.search("kayaks", k=5, namespace="default") == [] or all(
        h.conversation_id != "old" for h in aged.search("kayaks", k=5, namespace="default"))
    integrity = aged.integrity()
    assert integrity["messages"] == integrity["turns"] == integrity["fts"] == integrity["vectors"]


def test_fork_of_pruned_parent_keeps_its_history(aged: ColdStore) -> None:
    before = [(m.position, m.body) for m in aged.history("old-fork")]
    cp = aged.latest_checkpoint("old-fork")
    aged.prune(CUTOFF, all_namespaces=True)
    assert aged.conversation("old") is None
    info = aged.conversation("old-fork")
    assert info is not None and info["parent_id"] == "old"  # provenance stays, as a name
    assert [(m.position, m.body) for m in aged.history("old-fork")] == before
    assert aged.latest_checkpoint("old-fork") == cp
    assert [t.pinned_priority for t in aged.turns("old-fork")] == [None, None, 70, None]
    # its copied index rows and vectors survive too
    hits = aged.search("kayaks", k=3, conversation_id="old-fork")
    assert hits[0].position == 0 and set(hits[0].ranks) == {"dense", "bm25"}


@pytest.mark.parametrize(
    ("cutoff", "pruned"),
    [
        (OLD - DAY, []),  # before every message: nothing is old enough
        (CUTOFF, ["old"]),  # a week: only the conversation whose last message is 30 days old
        (OLD + 2.5, []),  # between the old conversation's messages: its *last* message decides
        (time.time() + DAY, ["old", "old-fork", "recent"]),  # in the future: everything
    ],
    ids=["before-all", "a-week", "between-messages", "future"],
)
def test_cutoff_is_by_last_message(aged: ColdStore, cutoff: float, pruned: list[str]) -> None:
    report = aged.prune(cutoff, all_namespaces=True)
    assert sorted(report.conversation_ids) == pruned
    survivors = sorted({"old", "old-fork", "recent"} - set(pruned))
    assert aged.list_conversations("default") == survivors
    for conv in survivors:
        assert aged.history(conv)


def test_prune_is_confined_to_a_namespace(cold: ColdStore) -> None:
    cold.append("alice-old", Message(role="user", content="a", created_at=OLD), namespace="alice")
    cold.append("bob-old", Message(role="user", content="b", created_at=OLD), namespace="bob")
    report = cold.prune(CUTOFF, namespace="alice")
    assert report.conversation_ids == ["alice-old"]
    assert cold.list_conversations("bob") == ["bob-old"]


def test_prune_by_a_store_opened_before_the_vectors_existed(tmp_path: Path, counter: BpeTokenCounter,
                                                            embedder: FastEmbedder) -> None:
    # e.g. `tiermem prune` started while the service had not embedded anything yet
    db = tmp_path / "data" / "tiermem.db"
    early = ColdStore(db, tokens=counter, embedder=None)
    service = ColdStore(db, tokens=counter, embedder=embedder)
    try:
        service.append_many("old", [Message(role="user", content=f"old {i}", created_at=OLD) for i in range(3)])
        service.append("recent", Message(role="user", content="recent"))
        service.index_pending()  # creates the vector table after `early` opened
        assert early.prune(CUTOFF, all_namespaces=True).conversation_ids == ["old"]
        with raw(db) as conn:
            assert conversation_rows(conn, "old")["vectors"] == 0
            assert table_rows(conn)["messages_vec"] == 1
    finally:
        early.close()
        service.close()
