"""Migration m020: a store that erased turns written in batches before m017 (plain FTS
deletes, then a merge of the whole index) kept erased terms in a live leaf of the merged
segment; the upgrade rebuilds the index and scrubs, so no erased term is left in the
file or its WAL. A store that never erased anything is not rebuilt."""

from __future__ import annotations

import random
from pathlib import Path

from cold_helpers import raw

from tiermem.tiers import cold
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.schema import MIGRATIONS, m020_fts_rebuild_after_plain_erasures
from tiermem.tiers.tokens import BpeTokenCounter

WORDS = ("router refund invoice billing password shipping warranty printer battery screen keyboard "  # noqa: SIM905
         "subscription renewal payment receipt address ticket escalate laptop tablet network").split()
VERSION_BEFORE = MIGRATIONS.index(m020_fts_rebuild_after_plain_erasures)


class PlainErasure(ColdStore):
    """The FTS delete of the code before m017: one plain statement (the table's
    'secure-delete' is off, as it was), the merge after the commit removing the rest."""

    def _delete_fts_rows(self, c, ids, **_how):  # type: ignore[no-untyped-def]
        c.executemany("DELETE FROM messages_fts WHERE rowid = ?", ids)

    def delete_namespace(self, namespace, **kw):  # type: ignore[no-untyped-def]
        # in one transaction, as it was: one batch as large as the namespace
        saved, cold.ERASE_BATCH_MESSAGES = cold.ERASE_BATCH_MESSAGES, 10**9
        try:
            return super().delete_namespace(namespace, **kw)
        finally:
            cold.ERASE_BATCH_MESSAGES = saved


def _left(db: Path, terms: list[str]) -> list[str]:
    files = [p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists()]
    return [t for t in terms if any(t.encode() in f for f in files)]


def _store_with_old_erasure(db: Path, counter: BpeTokenCounter) -> list[str]:
    rnd = random.Random(11)
    canaries = [f"zq{c:02d}" + "".join(rnd.choice("abcdefghijklmnopqrstuvwxy") for _ in range(8)) for c in range(10)]
    store = PlainErasure(db, tokens=counter)
    try:
        with store.reading() as conn:
            conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('secure-delete', 0)")
        for c, canary in enumerate(canaries):
            texts = [" ".join(rnd.choice(WORDS) for _ in range(25)) for _ in range(150)]
            texts[75] += f" my code is {canary}"
            store.append_many(f"c{c}", [Message(role="user", content=t) for t in texts], namespace="big")
        store.append("mine", Message(role="user", content="my printer is the zqkeptterm model"), namespace="other")
        store.delete_namespace("big")
    finally:
        store.close()
    with raw(db) as conn:  # as m017 and the versions before this one left it
        conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('secure-delete', 1)")
        conn.execute(f"PRAGMA user_version = {VERSION_BEFORE}")
    return canaries


def test_the_upgrade_removes_what_an_old_erasure_left(tmp_path: Path, counter: BpeTokenCounter) -> None:
    db = tmp_path / "tiermem.db"
    canaries = _store_with_old_erasure(db, counter)
    assert _left(db, canaries) != []  # the premise: the old erasure left terms in the file
    store = ColdStore(db, tokens=counter)  # migrates, then finishes the scrub it marked
    try:
        assert store.version == len(MIGRATIONS)
        assert _left(db, canaries) == []
        assert store.search_bm25("zqkeptterm", 5, conversation_id="mine")
        with store.reading() as conn:
            assert conn.execute("SELECT v FROM messages_fts_config WHERE k = 'secure-delete'").fetchone()[0] == 1
    finally:
        store.close()


def test_a_store_that_never_erased_is_not_rebuilt(tmp_path: Path, counter: BpeTokenCounter) -> None:
    db = tmp_path / "tiermem.db"
    store = ColdStore(db, tokens=counter)
    store.append("mine", Message(role="user", content="hello"), namespace="other")
    store.close()
    with raw(db) as conn:
        conn.execute(f"PRAGMA user_version = {VERSION_BEFORE}")
        log: list[str] = []
        conn.set_trace_callback(log.append)
        m020_fts_rebuild_after_plain_erasures(conn)
    assert not any("rebuild" in s for s in log)
