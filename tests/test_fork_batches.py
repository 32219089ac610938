"""A fork of a long prefix copies it in batches (SQLite), the store's lock free between
them: one transaction held SQLite's write lock for the whole copy (5.8 s for a
30,000-turn prefix), stalling every other tenant of the process and failing other
processes' appends past their busy timeout. The child stays invisible until one short
transaction publishes it (DESIGN invariant 7: whole or not at all, to every reader); a
process killed mid-way leaves nothing reachable, and the next open deletes its rows. Real
files, a real second open, a real SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cold_helpers import raw, rewrite_stored

import tiermem.tiers.cold as cold_module
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import ConversationNotFound, PositionOutOfRange
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

ROOT = Path(__file__).resolve().parent.parent
TURNS = 260
UP_TO = 209  # 210 positions: the top batch and at least three more
BATCH = 50  # FORK_BATCH_MESSAGES here: small, so a few hundred turns take several batches
CANARY = "zq9canary-fork-medlar"
TABLES = ("messages", "turns", "messages_fts", "messages_vec")


def fill(store: ColdStore) -> str:
    texts = [f"turn {t} of the long ticket about the boiler" for t in range(TURNS)]
    texts[5] += f" code {CANARY}"
    store.append_many("long", [Message(role="user", content=t) for t in texts], namespace="acme")
    store.append("mine", Message(role="user", content="my own ticket about the boiler"), namespace="other")
    store.index_pending()
    return store.key_of("acme", "long") or ""


def rows_of(db: Path, key: str) -> dict[str, int]:
    """Rows under `key` in every table a fork copies into, its owed record and key."""
    with raw(db) as conn:
        one = lambda sql: conn.execute(sql, (key,)).fetchone()[0]  # noqa: E731
        return {
            "conversations": one("SELECT COUNT(*) FROM conversations WHERE id = ?"),
            "messages": one("SELECT COUNT(*) FROM messages WHERE conversation_id = ?"),
            "turns": one("SELECT COUNT(*) FROM turns WHERE conversation_id = ?"),
            "messages_fts": conn.execute(
                "SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH ?",
                ("scope:c" + key.encode().hex(),)).fetchone()[0],
            "messages_vec": one("SELECT COUNT(*) FROM messages_vec WHERE conversation_id = ?"),
            "owed": one("SELECT COUNT(*) FROM erase_owed WHERE key = ?"),
            "key": one("SELECT COUNT(*) FROM conversation_keys WHERE key = ?"),
        }


def child_key(db: Path) -> str:
    """The key of the one unpublished fork (its owed record)."""
    with raw(db) as conn:
        return str(conn.execute("SELECT key FROM erase_owed WHERE reason = 'fork'").fetchone()[0])


def lock_files(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.iterdir() if p.name.endswith(".lock"))


@pytest.fixture
def store(tmp_path: Path, counter: BpeTokenCounter, embedder: Embedder,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[ColdStore]:
    monkeypatch.setattr(cold_module, "FORK_BATCH_MESSAGES", BATCH, raising=False)
    s = ColdStore(tmp_path / "tiermem.db", tokens=counter, embedder=embedder)
    try:
        yield s
    finally:
        s.close()


def test_the_lock_is_free_between_its_batches_and_no_read_reaches_the_child(store: ColdStore) -> None:
    parent = fill(store)
    seen: list[dict[str, object]] = []

    def step(name: str) -> None:
        if name != "fork:batch":
            return
        out: dict[str, object] = {}

        def other_tenant() -> None:
            # another thread's calls get the store between two batches: its writes go
            # through, and no way a caller reaches a conversation finds the child
            out["appended"] = store.append("mine", Message(role="user", content="and the radiator"), namespace="other")
            out["key"] = store.key_of("acme", "copy")
            out["listed"] = store.list_conversations("acme")
            out["found"] = {h.conversation_id for h in store.search(CANARY, 5, namespace="acme")}

        t = threading.Thread(target=other_tenant)
        t.start()
        t.join(30)
        out["ran"] = not t.is_alive()
        seen.append(out)

    store._fault = step
    child = store.fork(parent, UP_TO, new_id="copy")
    store._fault = None
    # before: one transaction, no step between its batches
    assert len(seen) >= 3  # the top batch, then batches of BATCH
    for s in seen:
        assert s["ran"] and s["key"] is None and s["listed"] == [parent] and s["found"] == {parent}
    # published whole: the prefix, its index rows and vectors, nothing owed, no lock left
    assert rows_of(store.path, child) == {"conversations": 1, "messages": UP_TO + 1, "turns": UP_TO + 1,
                                          "messages_fts": UP_TO + 1, "messages_vec": UP_TO + 1, "owed": 0, "key": 1}
    assert [(m.position, m.body) for m in store.history(child)] == [
        (m.position, m.body) for m in store.history(parent)][:UP_TO + 1]
    assert store.pending_embeddings(child) == 0
    assert {h.conversation_id for h in store.search(CANARY, 5, namespace="acme")} == {parent, child}
    assert store.conversation(child)["fork_position"] == UP_TO  # type: ignore[index]
    assert lock_files(store.path) == []
    # the other tenant's appends went in between the batches, in order
    assert [m.text for m in store.history(store.key_of("other", "mine") or "")][1:] == [
        "and the radiator"] * len(seen)


class Boom(RuntimeError):
    pass


# (the failure, when, what the fork raises)
FAILURES = [
    ("a batch fails", "fork:index", Boom),  # a later batch's transaction raises mid-way
    ("parent erased", "erase", ConversationNotFound),  # its parent erased between two batches
]


@pytest.mark.parametrize("what,when,error", FAILURES, ids=[f[0] for f in FAILURES])
def test_a_failed_fork_leaves_nothing(store: ColdStore, what: str, when: str, error: type[Exception]) -> None:
    parent = fill(store)
    batches: list[str] = []

    def step(name: str) -> None:
        if name == "fork:batch":
            batches.append(name)
            if when == "erase" and len(batches) == 2:
                t = threading.Thread(target=store.delete_conversation, args=(parent,))
                t.start()
                t.join(30)
        elif name == when and len(batches) == 2:
            raise Boom(name)

    store._fault = step
    with pytest.raises(error):
        store.fork(parent, UP_TO, new_id="copy")
    store._fault = None
    assert len(batches) == 2  # the premise: it failed after two batches were committed
    key = "copy"  # the first use of the name: the key the fork was given
    # no rows, no record, and the key handed back (no reader ever met it)
    assert rows_of(store.path, key) == dict.fromkeys(("conversations", *TABLES, "owed", "key"), 0)
    assert lock_files(store.path) == []
    if when == "erase":  # the copy of erased text is scrubbed too
        assert not any(CANARY.encode() in p.read_bytes() for p in (store.path, Path(f"{store.path}-wal"))
                       if p.exists())
    else:  # and a retry succeeds under the same key
        assert store.fork(parent, UP_TO, new_id="copy") == "copy"
        assert rows_of(store.path, "copy")["messages"] == UP_TO + 1


CHILD = f"""
import sys, time
from pathlib import Path
import tiermem.tiers.cold as cold
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.tokens import BpeTokenCounter

cold.FORK_BATCH_MESSAGES = {BATCH}
batches = []
def step(name):
    if name == "fork:batch":
        batches.append(name)
        if len(batches) == 2:
            print("COPYING", flush=True)
            time.sleep(600)

store = ColdStore(Path(sys.argv[1]), tokens=BpeTokenCounter())
store._fault = step
store.fork(store.key_of("acme", "long"), {UP_TO}, new_id="copy")
print("NOT KILLED", flush=True)
"""


def test_a_kill_mid_fork_leaves_nothing_reachable_and_the_next_open_deletes_it(
        tmp_path: Path, counter: BpeTokenCounter, embedder: Embedder) -> None:
    db = tmp_path / "tiermem.db"
    store = ColdStore(db, tokens=counter, embedder=embedder)
    parent = fill(store)
    store.close()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(db)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "COPYING"
        key = child_key(db)
        # the premise: part of the prefix copied, under a key bound to no name
        part = rows_of(db, key)
        assert part["owed"] == 1 and part["conversations"] == 0 and 0 < part["messages"] < UP_TO + 1
        # an open while it copies (another process's start) leaves it alone: it is in progress
        other = ColdStore(db, tokens=counter, embedder=embedder)
        try:
            assert other.key_of("acme", "copy") is None and other.list_conversations("acme") == [parent]
            assert rows_of(db, key) == part
        finally:
            other.close()
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(30)
    store = ColdStore(db, tokens=counter, embedder=embedder)  # the next open deletes it
    try:
        assert store.key_of("acme", "copy") is None and store.list_conversations("acme") == [parent]
        assert rows_of(db, key) == dict.fromkeys(("conversations", *TABLES, "owed", "key"), 0)
        assert lock_files(db) == []
        assert len(store.history(parent)) == TURNS
        assert store.fork(parent, UP_TO, new_id="copy") == key  # nothing in the way of a retry
        assert rows_of(db, key)["messages_vec"] == UP_TO + 1
    finally:
        store.close()


# (up_to past the parent's end) -- the transaction refuses it; before, the walk down over
# the undecodable rows took one read per empty batch of 2,000 positions from `up_to`
FAR = [TURNS, 10**9, 2**62]  # TURNS: one past the last position


@pytest.mark.parametrize("up_to", FAR)
def test_a_fork_past_the_end_is_refused_at_once(store: ColdStore, up_to: int) -> None:
    parent = fill(store)
    out: list[BaseException] = []

    def fork() -> None:
        try:
            store.fork(parent, up_to, new_id="too-far")
        except BaseException as exc:  # what the fork raised is the result
            out.append(exc)

    worker = threading.Thread(target=fork, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive()  # before: 2**62 / 2,000 reads, effectively forever
    assert len(out) == 1 and isinstance(out[0], PositionOutOfRange)
    assert store.key_of("acme", "too-far") is None


def test_a_text_time_in_the_parent_does_not_fail_the_fork(tmp_path: Path, counter: BpeTokenCounter) -> None:
    """A message row an older version or a hand edit left with `created_at` as text: the
    batched fork converted each batch's newest time with float() and raised where the fork
    before it (one MAX over the prefix, stored as the column holds it) succeeded."""
    db = tmp_path / "tiermem.db"
    s = ColdStore(db, tokens=counter)
    key = s.append_batch("c", [Message(role="user", content=f"turn {i}") for i in range(5)]).key
    s.close()
    rewrite_stored(db, key, [(2, "created_at", "not a time")])
    s = ColdStore(db, tokens=counter)
    try:
        child = s.fork(key, 3)
        info = s.conversation(child)
        assert info is not None and info["messages"] == 4
        # the odd row is salvaged on read, in the parent as in the child
        assert [m.position for m in s.history(child)] == [m.position for m in s.history(key, end=3)]
    finally:
        s.close()
