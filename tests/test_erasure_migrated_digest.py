"""An erasure leaves nothing of a conversation `migrate-store` copied into the store: the
meta row the copy recorded for it (`migrated_digest:<key>`, since 816e9e5) goes in the
erasure's transaction, on both engines. That row names the conversation (its key is its
id, `id~<hex>` where the id was taken) and holds a sha256 over every copied field of it
(bodies, metadata, times, labels, vectors): a derived byte of the erased content, which
the README's erasure guarantee ("every derived byte") covers; it stayed after
`delete_conversation`, `delete_namespace` and `prune`, in the meta table and the data
files. A conversation of the store that was not erased keeps its row (a rerun of the
migration still tells a source change from a target writer's there).

Real SQLite files and a real PostgreSQL (tests/pg_server.py, its data files read after a
CHECKPOINT, its WAL excluded as tests/test_erasure_postgres.py says), in both directions."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_server import Where, copied_sides, opened
from psycopg.conninfo import conninfo_to_dict

from tiermem.tiers.cold import ERASE_BATCH_MESSAGES
from tiermem.tiers.migrate_store import COPIED_DIGEST
from tiermem.tiers.models import Message
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter

GONE_NS, KEPT_NS = "gone", "kept"  # the target erases the first namespace's conversation
NAME = "a"
MESSAGES_EACH = 3
PRUNE_MARGIN_S = 60.0  # prune everything of the namespace older than now + this


def _sides(tmp_path: Path, pg_url: str, counter: BpeTokenCounter,
           to_postgres: bool, size: int) -> tuple[Where, Where]:
    """(source, target): NAME in each namespace (`size` messages in GONE_NS's), copied
    and verified."""

    def fill(store: ColdLog) -> None:
        for ns, n in ((GONE_NS, size), (KEPT_NS, MESSAGES_EACH)):
            store.append_many(NAME, [Message(role="user", content=f"{ns} {i}") for i in range(n)], namespace=ns)

    return copied_sides(tmp_path, pg_url, counter, to_postgres, fill)


def _digest_rows(store: Any) -> dict[str, str]:
    """The store's COPIED_DIGEST rows: key -> digest."""
    with store.reading() as c:
        rows = c.execute(store.dialect.sql("SELECT key, value FROM meta WHERE key LIKE ?"),
                         (COPIED_DIGEST + "%",)).fetchall()
    return {str(k)[len(COPIED_DIGEST):]: str(v) for k, v in rows}


def _files_with(where: Where, needle: bytes) -> list[str]:
    """Where the store's bytes hold `needle`: the SQLite file and its WAL, or the
    PostgreSQL cluster's data files after a CHECKPOINT (its WAL excluded)."""
    engine, at = where
    if engine == "sqlite":
        return [p.name for p in (Path(at), Path(f"{at}-wal")) if p.exists() and needle in p.read_bytes()]
    url = at.rsplit("#", 1)[0]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
    pgdata = Path(str(conninfo_to_dict(url)["host"]))
    return [str(p.relative_to(pgdata)) for p in pgdata.rglob("*")
            if p.is_file() and "pg_wal" not in p.relative_to(pgdata).parts and needle in p.read_bytes()]


Erase = Callable[[ColdLog, str], Any]
ERASURES = [
    # erasure of one conversation on request
    pytest.param(lambda s, k: s.delete_conversation(k), id="delete_conversation"),
    # erasure of its whole namespace
    pytest.param(lambda s, k: s.delete_namespace(GONE_NS), id="delete_namespace"),
    # retention by age
    pytest.param(lambda s, k: s.prune(time.time() + PRUNE_MARGIN_S, namespace=GONE_NS), id="prune"),
]
DIRECTIONS = [
    # SQLite -> PostgreSQL: the erasure on PostgreSQL
    pytest.param(True, id="erased-in-postgres"),
    # PostgreSQL -> SQLite: the erasure on SQLite
    pytest.param(False, id="erased-in-sqlite"),
]

SIZES = [
    # erased in one transaction with its rows
    pytest.param(MESSAGES_EACH, id="small"),
    # larger than an erasure's batch: on SQLite detached first, its rows deleted after
    pytest.param(ERASE_BATCH_MESSAGES + 1, id="detached"),
]


@pytest.mark.parametrize("to_postgres", DIRECTIONS)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("erase", ERASURES)
def test_an_erasure_leaves_no_copied_digest(tmp_path: Path, pg_url: str, counter: BpeTokenCounter,
                                            to_postgres: bool, size: int, erase: Erase) -> None:
    _src, dst = _sides(tmp_path, pg_url, counter, to_postgres, size)
    with opened(dst, counter) as store:
        key, kept = store.key_of(GONE_NS, NAME), store.key_of(KEPT_NS, NAME)
        before = _digest_rows(store)
        assert set(before) == {key, kept}  # the copy recorded both
        needle = before[key].encode()
        assert _files_with(dst, needle)  # the probe finds it before
        report = erase(store, key)
        assert report.keys == [key]
        # before: the row stayed, naming the conversation and digesting its content
        assert _digest_rows(store) == {kept: before[kept]}
    assert _files_with(dst, needle) == []
