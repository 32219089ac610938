"""A store an older tiermem wrote before `secure_delete` (schema < 13) holds deleted text
in free pages and in the unused space of live pages, which no later delete overwrites:
the upgrade flags it (m031, or `migrate` crossing version 13) and the open's scrub
rewrites the file once (VACUUM), so neither what the old code erased nor what an erasure
after the upgrade deletes stays in the file. A reviewer found 8 copies of a conversation
erased after the upgrade of a b5cad16 store, with `scrubbed=True`.

The old state is built directly (CI may have no old commit to run): the schema as the
old migrations made it, rows written and deleted with `secure_delete` off, as that code
did."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cold_helpers import ROOT, raw

from tiermem.tiers import cold, schema
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

# the version of the code before secure_delete (its migrations end before m013)
VERSION_BEFORE_SECURE_DELETE = schema.MIGRATIONS.index(schema.m013_conversation_incarnations)
# the version before this fix's steps (by name, so this file runs on the code before it too)
VERSION_BEFORE_FIX = next(i for i, f in enumerate(schema.MIGRATIONS) if f.__name__ == "m030_fork_parent_owed") + 1
TURNS = 120  # per conversation: enough text (~40 KB) to split pages of `messages`
PADDING = "lorem ipsum dolor sit amet " * 10  # ~270 bytes a turn beside its canary
RESIDUE_META = "residue_before_secure_delete"  # schema.RESIDUE_KEY (by value, as above)
BEFORE_RELEASE = 1_700_000_000.0  # 2023: a key issued long before secure_delete existed


def _canary(conv: str, i: int) -> str:
    return f"zq{conv}canary{i:04d}"


def _copies(db: Path, conv: str) -> int:
    """Copies of `conv`'s canaries in the file and its WAL."""
    files = [p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists()]
    return sum(f.count(f"zq{conv}canary".encode()) for f in files)


def _old_store(db: Path) -> None:
    """A file as the code before m013 left it: its schema, conversations `kept`, `olderased`
    and `later` written, and `olderased` erased, with secure_delete off (SQLite's
    default then)."""
    with raw(db) as conn:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA secure_delete = OFF")
        for version, step in enumerate(schema.MIGRATIONS[:VERSION_BEFORE_SECURE_DELETE]):
            conn.execute("BEGIN IMMEDIATE")
            step(conn)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        now = time.time()
        next_id = 1
        for turn in range(TURNS):  # interleaved, as conversations grow side by side: shared pages
            for conv in ("kept", "olderased", "later"):
                if turn == 0:
                    conn.execute("INSERT INTO conversations(id, namespace, created_at, last_message_at) "
                                 "VALUES (?, 'default', ?, ?)", (conv, now, now))
                text = f"{_canary(conv, turn)} {PADDING}"
                body = json.dumps({"role": "user", "content": text}, separators=(",", ":"))
                conn.execute("INSERT INTO messages(conversation_id, position, id, role, body, created_at) "
                             "VALUES (?, ?, ?, 'user', ?, ?)", (conv, turn, next_id, body, now))
                next_id += 1
        # the old erasure: its rows deleted, their bytes left where they were
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO prune_guard(armed) VALUES (1)")  # (messages are append-only otherwise)
        conn.execute("DELETE FROM messages WHERE conversation_id = 'olderased'")
        conn.execute("DELETE FROM prune_guard")
        conn.execute("DELETE FROM conversations WHERE id = 'olderased'")
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert _copies(db, "olderased") > 0  # the residue this test is about is there


def test_the_upgrade_of_a_store_written_before_secure_delete_rewrites_it(
        tmp_path: Path, counter: BpeTokenCounter) -> None:
    db = tmp_path / "tiermem.db"
    _old_store(db)
    store = ColdStore(db, tokens=counter)  # migrates, then runs the scrub the migration owes
    try:
        # what the old code erased is gone at the open, before any erasure
        assert _copies(db, "olderased") == 0
        report = store.delete_conversation("later")
        assert report.messages == TURNS and report.scrubbed
        assert _copies(db, "later") == 0  # (b5cad16's upgrade: 8 copies, scrubbed True)
        kept = store.history("kept")
        assert len(kept) == TURNS and str(kept[-1].body["content"]).startswith(_canary("kept", TURNS - 1))
        with store.reading() as conn:  # done once: the flag and the scrub's marker are gone
            assert conn.execute("SELECT key FROM meta WHERE key IN (?, 'scrub_pending')",
                                (RESIDUE_META,)).fetchall() == []
    finally:
        store.close()


def _residue_in_live_page(db: Path, canary: str) -> None:
    """Text deleted with secure_delete off from a table whose page stays live (meta, beside
    db_uuid): its bytes stay in the page's unused space, where no later delete reaches."""
    with raw(db) as conn:
        conn.execute("PRAGMA secure_delete = OFF")
        conn.execute("INSERT INTO meta(key, value) VALUES ('zz_old', ?)", (canary * 20,))
        conn.execute("DELETE FROM meta WHERE key = 'zz_old'")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


@pytest.mark.parametrize(("issued_at", "rewritten"), [
    (BEFORE_RELEASE, True),  # a conversation from before secure_delete existed: the upgrade rewrites the file
    (None, False),           # keys issued now (a store made with secure_delete): nothing to rewrite
])
def test_a_store_an_earlier_tiermem_upgraded_is_told_by_its_keys(
        tmp_path: Path, counter: BpeTokenCounter, issued_at: float | None, rewritten: bool) -> None:
    db = tmp_path / "tiermem.db"
    store = ColdStore(db, tokens=counter)
    store.append("c", Message(role="user", content="hello"))
    store.close()
    canary = "zqlivepagecanary"
    _residue_in_live_page(db, canary)
    with raw(db) as conn:  # as the tiermem before this fix left it: past m013, not flagged
        if issued_at is not None:
            conn.execute("UPDATE conversation_keys SET issued_at = ?", (issued_at,))
        conn.execute(f"PRAGMA user_version = {VERSION_BEFORE_FIX}")
    store = ColdStore(db, tokens=counter)
    try:
        assert (_copies_of(db, canary) == 0) is rewritten
        assert [m.body["content"] for m in store.history("c")] == ["hello"]
    finally:
        store.close()


def _copies_of(db: Path, text: str) -> int:
    files = [p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists()]
    return sum(f.count(text.encode()) for f in files)


def test_an_erasure_is_not_scrubbed_while_the_rewrite_is_owed(tmp_path: Path, counter: BpeTokenCounter,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # the rewrite owed and kept from running (another connection's write lock from the
    # moment the erasure's scrub comes to it): the erasure reports not scrubbed, the text
    # the old code left stays, and the next open rewrites the file and clears the flag
    db = tmp_path / "tiermem.db"
    store = ColdStore(db, tokens=counter, busy_timeout_ms=200)
    for conv in ("kept", "gone"):
        store.append(conv, Message(role="user", content=f"{conv} text"))
    store.close()
    canary = "zqowedrewritecanary"
    _residue_in_live_page(db, canary)
    with raw(db) as conn:  # as an open that could not rewrite it leaves the flag (its marker too)
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, '1')", (RESIDUE_META,))
    # an open that leaves it to the erasure (the file counted too large for an open to rewrite)
    monkeypatch.setattr(cold, "REWRITE_AT_OPEN_MAX_BYTES", 0)
    store = ColdStore(db, tokens=counter, busy_timeout_ms=200)
    monkeypatch.undo()
    with raw(db) as holder:
        def lock_before_rewrite(step: str) -> None:
            if step == "reclaim:residue":
                holder.execute("BEGIN IMMEDIATE")
        store._fault = lock_before_rewrite
        try:
            report = store.delete_conversation("gone")
        finally:
            store._fault = None
            if holder.in_transaction:
                holder.execute("ROLLBACK")
        store.close()
    assert report.messages == 1 and not report.scrubbed
    assert _copies_of(db, canary) > 0  # not rewritten: still readable in the file
    store = ColdStore(db, tokens=counter)  # the open after it: the rewrite it still owes
    try:
        assert _copies_of(db, canary) == 0
        with store.reading() as conn:
            assert conn.execute("SELECT 1 FROM meta WHERE key = ?", (RESIDUE_META,)).fetchone() is None
        assert [m.body["content"] for m in store.history("kept")] == ["kept text"]
    finally:
        store.close()


# a child erases with the rewrite owed; it stops where the rewrite would start (the kill's timing)
KILLED_CHILD = """
import sys, time
from pathlib import Path
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.tokens import BpeTokenCounter

def stall(step):
    if step == "reclaim:residue":
        print("COMMITTED", flush=True)
        time.sleep(600)

from tiermem.tiers import cold
cold.REWRITE_AT_OPEN_MAX_BYTES = 0  # the open leaves the rewrite to the erasure
store = ColdStore(Path(sys.argv[1]), tokens=BpeTokenCounter())
store._fault = stall
store.delete_conversation("gone")
"""
CHILD_START_TIMEOUT_S = 60  # the child's imports and open on a loaded CI machine


def test_a_process_killed_before_the_rewrite_leaves_it_owed(tmp_path: Path, counter: BpeTokenCounter) -> None:
    db = tmp_path / "tiermem.db"
    store = ColdStore(db, tokens=counter)
    for conv in ("kept", "gone"):
        store.append(conv, Message(role="user", content=f"{conv} text"))
    store.close()
    canary = "zqkilledrewritecanary"
    _residue_in_live_page(db, canary)
    with raw(db) as conn:  # owed, as an open that could not rewrite it leaves it
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, '1')", (RESIDUE_META,))
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, str(db)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "COMMITTED"  # the erasure committed, the rewrite not begun
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=CHILD_START_TIMEOUT_S)
    assert _copies_of(db, canary) > 0
    with raw(db) as conn:
        owed = {r[0] for r in conn.execute("SELECT key FROM meta WHERE key IN (?, 'scrub_pending')", (RESIDUE_META,))}
    assert owed == {RESIDUE_META, "scrub_pending"}
    store = ColdStore(db, tokens=counter)  # the next open: the rewrite it owes
    try:
        assert _copies_of(db, canary) == 0
        assert [m.body["content"] for m in store.history("kept")] == ["kept text"]
        assert store.key_of("default", "gone") is None  # the erasure itself had committed
    finally:
        store.close()
