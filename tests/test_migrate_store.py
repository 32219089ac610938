"""`tiermem migrate-store`: a SQLite log copied into PostgreSQL and back, verified by
digests of every conversation incarnation, the issued keys and the tombstones; resumable;
refusing (and writing nothing) where it cannot copy faithfully. Real SQLite files and a
real PostgreSQL (tests/pg_server.py); the source is built through Memory, so every table
a user's actions touch is in it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.cli import cli
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import MigrationMismatch, MigrationRefused
from tiermem.tiers.migrate_store import migrate_store
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter


def build_source(data: Path, embedder: Embedder) -> Path:
    """A SQLite data dir with what users leave behind: namespaces, vectors, labels, a pin,
    a checkpoint, warm summaries, plans, a fork, an erased conversation (a tombstone and
    an issued key) and a new incarnation of its name."""
    cfg = Config(data_dir=data, store_plans=True)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("trip", [
            {"role": "system", "content": "You plan trips."},
            {"role": "user", "content": "I am allergic to peanuts, never suggest them.", "name": "ana"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "search", "arguments": '{"q": "porto"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "Porto: 3 hotels"},
            *[{"role": "user", "content": f"note {i}: é weather in Porto", "metadata": {"i": i}}
              for i in range(20)],
        ], namespace="acme/ana")
        mem.catch_up()
        mem.pin("trip", 1, namespace="acme/ana")
        mem.checkpoint("trip", "Ana plans Porto; no peanuts.", 5, namespace="acme/ana")
        mem.consolidate("trip", namespace="acme/ana")
        mem.context("trip", "which snacks?", 600, namespace="acme/ana")
        mem.fork("trip", 3, new_id="trip-b", namespace="acme/ana")
        mem.append("secret", {"role": "user", "content": "my code is 1234"}, namespace="acme/bob")
        mem.delete_conversation("secret", namespace="acme/bob")
        mem.append("secret", {"role": "user", "content": "a new beginning"}, namespace="acme/bob")
        mem.append("x", {"role": "user", "content": "other tenant"}, namespace="globex")
        mem.catch_up()
    return data / cfg.db_filename


@pytest.fixture(scope="module")
def source_template(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    return build_source(tmp_path_factory.mktemp("src") / "data", embedder)


def copy_db(src: Path, dst: Path) -> Path:
    """SQLite's own backup: a consistent copy of a WAL database."""
    from tiermem.tiers.schema import sqlite3  # the store's driver

    dst.parent.mkdir(parents=True, exist_ok=True)
    a, b = sqlite3.connect(str(src)), sqlite3.connect(str(dst))
    try:
        a.backup(b)
    finally:
        a.close()
        b.close()
    return dst


@pytest.fixture
def source(source_template: Path, tmp_path: Path) -> Path:
    """A private copy of the source file (tests may tamper with theirs)."""
    return copy_db(source_template, tmp_path / "src" / "tiermem.db")


@pytest.fixture
def schema() -> str:
    return fresh_schema()


TOKENS = BpeTokenCounter()


def run(src: Path | str, dst: Path | str, **kw: Any) -> Any:
    return migrate_store(src, dst, tokens=TOKENS, **kw)


def snapshot(store: Any) -> dict[str, Any]:
    """What a user can observe of a store, through the store interface only."""
    out: dict[str, Any] = {"tombstones": [{k: v for k, v in t.items()} for t in store.tombstones()]}
    for key in store.all_keys():
        ns, name = store.name_of(key)
        conv = store.conversation(key)
        out[f"{ns}/{name}"] = {
            "key": key, "parent": conv["parent_id"], "fork": conv["fork_position"],
            "history": [(m.position, m.body, m.session_id, m.metadata, m.created_at, m.tokens)
                        for m in store.history(key)],
            "turns": store.turns(key), "pinned": [t.position for t in store.pinned_turns(key)],
            "checkpoint": store.latest_checkpoint(key),
            "summaries": store.latest_summaries(key, "rolling", "", 10),
            "plans": len(store.plans(key)),
            "vectors": {p: v.tobytes() for p, v in store.embeddings(key, list(range(30))).items()},
        }
    return out


def pg_rows(url: str, schema: str, sql: str) -> list[Any]:
    with psycopg.connect(url, autocommit=True) as c:
        if c.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None:
            return []
        c.execute(f'SET search_path TO "{schema}", public')
        return list(c.execute(sql).fetchall())


def test_sqlite_to_postgres_and_back_keeps_everything(source: Path, pg_url: str, schema: str,
                                                      tmp_path: Path, embedder: Embedder) -> None:
    there = run(source, pg_url, target_schema=schema)
    assert (there.conversations, there.copied, there.resumed) == (4, 4, False)
    assert there.tombstones == 1 and there.keys == 5 and there.vectors == there.messages
    back = run(pg_url, tmp_path / "back", source_schema=schema)
    # same content, same digest: what went out came back
    assert back.digest == there.digest and back.conversations == 4
    a = ColdStore(source, tokens=TOKENS)
    b = PostgresStore(pg_url, tokens=TOKENS, schema=schema)
    c = ColdStore(tmp_path / "back" / "tiermem.db", tokens=TOKENS)
    try:
        want = snapshot(a)
        assert snapshot(b) == want and snapshot(c) == want
        assert want["acme/ana/trip"]["pinned"] and want["acme/ana/trip"]["checkpoint"] is not None
        assert want["acme/ana/trip"]["summaries"] and want["acme/ana/trip"]["vectors"]
        assert want["acme/bob/secret"]["key"] != "secret"  # the second incarnation
        # the counter row continues where the log ends; the erased key stays issued
        assert b.append("trip", Message(role="user", content="next"),
                        namespace="acme/ana") == 24
        b.delete_conversation(b.key_of("acme/bob", "secret") or "")
        again = b.append_batch("secret", [Message(role="user", content="z")],
                               namespace="acme/bob")
        assert again.key not in {"secret", want["acme/bob/secret"]["key"]}
    finally:
        a.close()
        b.close()
        c.close()
    # Memory on the copy: search and context work on the migrated indexes
    cfg = Config(data_dir=tmp_path / "m", cold_url=pg_url, cold_schema=schema)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        assert mem.cold.pending_embeddings() == 2  # only the two appended just now
        assert mem.search("trip", "peanut allergy", 1, namespace="acme/ana")[0].position == 1
        ctx = mem.context("trip", "which snacks should I pack?", 500, namespace="acme/ana")
        assert "peanuts" in json.dumps(ctx.messages)


def test_a_rerun_is_idempotent_and_writes_nothing(source: Path, pg_url: str, schema: str) -> None:
    first = run(source, pg_url, target_schema=schema)
    meta = pg_rows(pg_url, schema, "SELECT key, value FROM meta ORDER BY key")
    second = run(source, pg_url, target_schema=schema)
    assert (second.resumed, second.copied, second.already_present) == (True, 0, 4)
    assert second.digest == first.digest
    assert pg_rows(pg_url, schema, "SELECT key, value FROM meta ORDER BY key") == meta
    assert pg_rows(pg_url, schema, "SELECT COUNT(*) FROM tombstones") == [(1,)]
    assert pg_rows(pg_url, schema, "SELECT COUNT(*) FROM messages")[0][0] == first.messages


def test_an_interrupted_copy_resumes_where_it_stopped(source: Path, pg_url: str, schema: str,
                                                      tmp_path: Path) -> None:
    seen: list[str] = []

    def crash_on_third(key: str) -> None:
        seen.append(key)
        if len(seen) == 3:
            raise KeyboardInterrupt  # the operator's ^C inside the third conversation's transaction

    with pytest.raises(KeyboardInterrupt):
        run(source, pg_url, target_schema=schema, fault=crash_on_third)
    # two whole conversations, none of the third, every key already issued
    assert pg_rows(pg_url, schema, "SELECT COUNT(*) FROM conversations") == [(2,)]
    assert pg_rows(pg_url, schema, "SELECT COUNT(*) FROM conversation_keys") == [(5,)]
    assert pg_rows(pg_url, schema, f"SELECT COUNT(*) FROM messages WHERE conversation_id = '{seen[2]}'") == [(0,)]
    resumed = run(source, pg_url, target_schema=schema)
    assert (resumed.resumed, resumed.copied, resumed.already_present) == (True, 2, 2)
    clean = run(source, pg_url, target_schema=fresh_schema())  # the same copy, never interrupted
    assert resumed.digest == clean.digest


def _seed(url: str, schema: str) -> None:
    store = PostgresStore(url, tokens=TOKENS, schema=schema)
    try:
        store.append("theirs", Message(role="user", content="already here"), namespace="globex")
    finally:
        store.close()


def _tamper_nul(source: Path) -> None:
    from tiermem.tiers.schema import sqlite3

    conn = sqlite3.connect(str(source), isolation_level=None)
    try:
        # a body holding a raw NUL (not JSON's escaped \u0000): SQLite stores it, PostgreSQL text cannot
        key = conn.execute("SELECT id FROM conversations WHERE name = 'x'").fetchone()[0]
        conn.execute("INSERT INTO messages(conversation_id, position, id, role, body, created_at) "
                     "VALUES (?, 7, 99999, 'user', 'raw' || char(0) || 'nul', 0)", (key,))
    finally:
        conn.close()


REFUSALS: list[tuple[str, Callable[[Path, str, str], None], str, bool]] = [
    # a target that already has a conversation of its own (its schema stays, untouched)
    ("non_empty", lambda src, url, schema: _seed(url, schema), "not empty", True),
    # a source row that PostgreSQL cannot store: refused, the schema this run made removed
    ("nul_row", lambda src, url, schema: _tamper_nul(src), "cannot hold", False),
]


@pytest.mark.parametrize(("case", "prepare", "message", "schema_stays"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals_write_nothing(source: Path, pg_url: str, schema: str, case: str,
                                prepare: Callable[[Path, str, str], None], message: str, schema_stays: bool) -> None:
    prepare(source, pg_url, schema)
    before = pg_rows(pg_url, schema, "SELECT (SELECT COUNT(*) FROM conversations), (SELECT COUNT(*) FROM messages), "
                                     "(SELECT COUNT(*) FROM conversation_keys), (SELECT COUNT(*) FROM meta)")
    with pytest.raises(MigrationRefused, match=message):
        run(source, pg_url, target_schema=schema)
    after = pg_rows(pg_url, schema, "SELECT (SELECT COUNT(*) FROM conversations), (SELECT COUNT(*) FROM messages), "
                                    "(SELECT COUNT(*) FROM conversation_keys), (SELECT COUNT(*) FROM meta)")
    assert after == before and bool(after) == schema_stays


def test_merging_refuses_a_name_or_key_in_use_and_copies_beside_others(source: Path, pg_url: str,
                                                                        schema: str) -> None:
    _seed(pg_url, schema)  # globex/theirs: no clash with the source
    merged = run(source, pg_url, target_schema=schema, into_non_empty=True)
    assert merged.copied == 4
    assert pg_rows(pg_url, schema, "SELECT COUNT(*) FROM conversations") == [(5,)]
    other = fresh_schema()
    store = PostgresStore(pg_url, tokens=TOKENS, schema=other)
    try:
        store.append("x", Message(role="user", content="a different globex/x"), namespace="globex")
    finally:
        store.close()
    with pytest.raises(MigrationRefused, match="'x' of namespace 'globex' is there already"):
        run(source, pg_url, target_schema=other, into_non_empty=True)
    assert pg_rows(pg_url, other, "SELECT COUNT(*) FROM conversations") == [(1,)]


def test_a_target_copy_that_drifted_is_reported_not_overwritten(source: Path, pg_url: str,
                                                                 schema: str) -> None:
    run(source, pg_url, target_schema=schema)
    store = PostgresStore(pg_url, tokens=TOKENS, schema=schema)
    try:
        key = store.key_of("acme/ana", "trip") or ""
        store.set_pin(key, 2, 9)  # the copy is no longer the source's
    finally:
        store.close()
    with pytest.raises(MigrationMismatch, match="'trip'"):
        run(source, pg_url, target_schema=schema)


def test_the_same_engine_on_both_sides_is_refused(source: Path, tmp_path: Path) -> None:
    with pytest.raises(MigrationRefused, match="same engine"):
        run(source, tmp_path / "other")
    assert not (tmp_path / "other" / "tiermem.db").exists()


def test_cli_migrates_and_reports(source: Path, pg_url: str, schema: str, tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["--data-dir", str(source.parent), "migrate-store", "--to", pg_url, "--schema", schema, "--json"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["conversations"] == 4 and report["copied"] == 4 and len(report["digest"]) == 64
    assert "password" not in report["target"]
    again = runner.invoke(cli, args[:-1])
    assert again.exit_code == 0 and "0 copied now, 4 already there" in again.output
    _seed(pg_url, schema2 := fresh_schema())
    refused = runner.invoke(cli, ["--data-dir", str(source.parent), "migrate-store", "--to", pg_url,
                                  "--schema", schema2])
    assert refused.exit_code == 1 and "error: migrate-store into" in refused.output and "not empty" in refused.output
