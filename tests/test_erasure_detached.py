"""A conversation larger than an erasure batch (SQLite) is detached, then its rows deleted
in batches: one transaction held the store's write lock for the whole erasure (7.8 s for a
20,000-turn conversation in a 33k-turn store), stalling every other tenant of the process
and other processes' writes past their busy timeout. From the detaching commit on no read
reaches it and its id is free; a process killed, or a batch failing, between the batches
leaves its rows owed, and the next open or erasure deletes them. Real files, real Redis,
a real SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cold_helpers import raw
from conftest import full_memory

from tiermem import Config
from tiermem.tiers.cold import ERASE_BATCH_MESSAGES, ColdStore
from tiermem.tiers.embed import Embedder
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

ROOT = Path(__file__).resolve().parent.parent
TURNS = 450  # more than the first batch: detached, then at least two batches of rows
assert TURNS > 2 * ERASE_BATCH_MESSAGES
CANARY = "zq9canary-detach-quince"
OWED_TABLES = ("messages", "turns", "messages_fts", "messages_vec")


def fill(store: ColdStore) -> str:
    texts = [f"turn {t} of the long ticket about the boiler" for t in range(TURNS)]
    texts[7] += f" code {CANARY}"
    texts[TURNS - 3] += f" again {CANARY}"
    store.append_many("long", [Message(role="user", content=t) for t in texts], namespace="acme")
    store.append("mine", Message(role="user", content="my own ticket about the boiler"), namespace="other")
    store.index_pending()
    return store.key_of("acme", "long") or ""


def files_with(db: Path, needle: str) -> bool:
    return any(needle.encode() in p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists())


def rows_of(db: Path, key: str) -> dict[str, int]:
    with raw(db) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM messages WHERE conversation_id = ?", (key,))]
        out = {"messages": len(ids),
               "turns": conn.execute("SELECT COUNT(*) FROM turns WHERE conversation_id = ?", (key,)).fetchone()[0],
               "owed": conn.execute("SELECT COUNT(*) FROM erase_owed").fetchone()[0]}
        lo = min(ids) if ids else 0
        hi = max(ids) if ids else -1
        out["messages_fts"] = conn.execute("SELECT COUNT(*) FROM messages_fts WHERE rowid BETWEEN ? AND ?",
                                           (lo, hi)).fetchone()[0]
        has_vec = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'messages_vec'").fetchone()
        out["messages_vec"] = conn.execute("SELECT COUNT(*) FROM messages_vec WHERE rowid BETWEEN ? AND ?",
                                           (lo, hi)).fetchone()[0] if has_vec else 0
        return out


@pytest.fixture
def store(tmp_path: Path, counter: BpeTokenCounter, embedder: Embedder) -> Iterator[ColdStore]:
    s = ColdStore(tmp_path / "tiermem.db", tokens=counter, embedder=embedder)
    try:
        yield s
    finally:
        s.close()


def test_the_lock_is_free_between_its_batches_and_no_read_reaches_it(store: ColdStore) -> None:
    key = fill(store)
    seen: list[dict[str, object]] = []

    def step(name: str) -> None:
        if name not in ("erase:detached", "erase:purge"):
            return
        out: dict[str, object] = {"step": name}

        def other_tenant() -> None:
            # another thread's calls get the store between two batches and find nothing
            # of the conversation by any way a caller reaches one; its id is free at once
            if name == "erase:detached":
                out["new"] = store.append_batch("long", [Message(role="user", content="a new start")],
                                                namespace="acme").key
            out["key"] = store.key_of("acme", "long")
            out["listed"] = store.list_conversations("acme")
            out["found"] = [h.conversation_id for q in (CANARY, "the long ticket about the boiler")
                            for h in store.search(q, 5, namespace="acme")]
            out["mine"] = [m.text for m in store.history(store.key_of("other", "mine") or "")]

        reader = threading.Thread(target=other_tenant)
        reader.start()
        reader.join(30)
        out["ran"] = not reader.is_alive()
        seen.append(out)

    store._fault = step
    report = store.delete_conversation(key)
    store._fault = None
    # before: one transaction, no step between detaching and the rows' batches
    assert [s["step"] for s in seen][:2] == ["erase:detached", "erase:purge"]
    assert len([s for s in seen if s["step"] == "erase:purge"]) >= 2
    new = seen[0]["new"]
    assert new != key
    for s in seen:
        assert s["ran"] and s["key"] == new and s["listed"] == [new] and key not in s["found"]  # type: ignore[operator]
        assert s["mine"] == ["my own ticket about the boiler"]
    assert (report.conversations, report.messages, report.keys) == (1, TURNS, [key])
    assert [t["messages"] for t in store.tombstones("acme") if t["id"] == "long"] == [TURNS]
    assert report.scrubbed
    assert rows_of(store.path, key) == dict.fromkeys(("owed", *OWED_TABLES), 0)
    assert not files_with(store.path, CANARY)
    assert [m.text for m in store.history(str(new))] == ["a new start"]


CHILD = """
import sys, time
from pathlib import Path
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.tokens import BpeTokenCounter

purges = []
def step(name):
    if name == "erase:purge":
        purges.append(name)
        print("PURGED", flush=True)
        time.sleep(600)

store = ColdStore(Path(sys.argv[1]), tokens=BpeTokenCounter())
store._fault = step
store.delete_conversation(store.key_of("acme", "long"))
print("NOT KILLED", flush=True)
"""


def test_a_kill_between_its_batches_leaves_its_rows_to_the_next_open(tmp_path: Path, counter: BpeTokenCounter,
                                                                      embedder: Embedder) -> None:
    db = tmp_path / "tiermem.db"
    store = ColdStore(db, tokens=counter, embedder=embedder)
    key = fill(store)
    store.close()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(db)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "PURGED"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(30)
    # the premise: killed with part of its rows deleted and the rest owed
    left = rows_of(db, key)
    assert left["owed"] == 1 and 0 < left["messages"] < TURNS
    store = ColdStore(db, tokens=counter, embedder=embedder)  # the next open finishes and scrubs
    try:
        assert store.key_of("acme", "long") is None
        assert [t["messages"] for t in store.tombstones("acme")] == [TURNS]
        assert rows_of(db, key) == dict.fromkeys(("owed", *OWED_TABLES), 0)
        assert not files_with(db, CANARY)
        assert [m.text for m in store.history(store.key_of("other", "mine") or "")] == [
            "my own ticket about the boiler"]
    finally:
        store.close()


class PurgeFailed(RuntimeError):
    pass


def test_a_failed_batch_leaves_its_rows_to_the_next_erasure(tmp_path: Path, embedder: Embedder) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    with full_memory(cfg, embedder) as mem:
        texts = [f"turn {t} of the long ticket about the boiler" for t in range(TURNS)]
        texts[TURNS - 3] += f" again {CANARY}"
        mem.append_many("long", [{"role": "user", "content": t} for t in texts], namespace="acme")
        mem.append("short", {"role": "user", "content": "a short one"}, namespace="acme")
        key = mem.cold.key_of("acme", "long") or ""
        assert mem.hot is not None and mem.hot.tier.read(key) is not None  # the premise: a hot set

        def fail(name: str) -> None:
            if name == "erase:purge":
                raise PurgeFailed("a batch of its rows failed")

        mem.cold._fault = fail  # type: ignore[attr-defined]
        with pytest.raises(PurgeFailed):
            mem.delete_conversation("long", namespace="acme")
        mem.cold._fault = None  # type: ignore[attr-defined]
        # detached: unreachable, its hot set dropped at the detaching commit, its rows owed
        assert mem.cold.key_of("acme", "long") is None and mem.hot.tier.read(key) is None
        assert rows_of(cfg.db_path, key)["owed"] == 1
        mem.delete_conversation("short", namespace="acme")  # the next erasure deletes them
        assert rows_of(cfg.db_path, key) == dict.fromkeys(("owed", *OWED_TABLES), 0)
        assert not files_with(cfg.db_path, CANARY)
        assert sorted(t["id"] for t in mem.tombstones(namespace="acme")) == ["long", "short"]
