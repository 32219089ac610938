"""PostgreSQL out of room or resources is the storage refusing, not a bug: disk_full
(SQLSTATE 53100, a data file that cannot be extended) is 507 with the body SQLite's
full disk gets, the rest of class 53 (insufficient resources: out of memory, too many
connections, a configuration limit) 503 with Retry-After. The errors are the server's:
a trigger on the store's `messages` raises them during a real append over HTTP (a
tablespace on a full file system is out of reach here). Before: SQLSTATE class 53 was
unrecognised, a 500 "internal error"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from pg_server import fresh_schema
from service_helpers import TOKEN_ACME, bearer, serve_in_thread

from tiermem import Config, Memory
from tiermem.service.handlers import STORAGE_RETRY_AFTER_S
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.files import storage_problem
from tiermem.tiers.schema import sqlite3

CONV = "full-1"


@pytest.fixture
def served(tmp_path: Path, pg_url: str, embedder: FastEmbedder) -> Iterator[tuple[httpx.Client, str]]:
    schema = fresh_schema()
    cfg = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=schema, auth_tokens={TOKEN_ACME: "acme"})
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url, httpx.Client(base_url=url, timeout=60) as http:
        yield http, schema


def refuse_inserts(pg_url: str, schema: str, errcode: str | None) -> None:
    """From now on every insert into the store's messages fails with `errcode`, raised
    by the server (None: inserts work again)."""
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'DROP TRIGGER IF EXISTS refuse ON "{schema}".messages')
        if errcode is None:
            return
        admin.execute(f"""CREATE OR REPLACE FUNCTION "{schema}".refuse() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'refused by the test' USING ERRCODE = '{errcode}'; END $$""")
        admin.execute(f'CREATE TRIGGER refuse BEFORE INSERT ON "{schema}".messages '
                      f'FOR EACH STATEMENT EXECUTE FUNCTION "{schema}".refuse()')


def sqlite_full_answer() -> str:
    problem = storage_problem(sqlite3.OperationalError("database or disk is full"))
    assert problem is not None and problem.status == 507
    return problem.detail


# (the condition the server raises, its SQLSTATE, the status) -- each was a 500 before
CASES = [
    ("disk_full", "53100", 507),  # a data file that cannot grow: as SQLite's full disk
    ("insufficient_resources", "53000", 503),
    ("out_of_memory", "53200", 503),
    ("too_many_connections", "53300", 503),
    ("configuration_limit_exceeded", "53400", 503),
]


@pytest.mark.parametrize(("errcode", "sqlstate", "status"), CASES, ids=[c[0] for c in CASES])
def test_a_server_out_of_room_or_resources_is_507_or_503(served: tuple[httpx.Client, str], pg_url: str,
                                                         errcode: str, sqlstate: str, status: int) -> None:
    http, schema = served
    h = bearer(TOKEN_ACME)
    path = f"/v1/conversations/{CONV}/messages"
    assert http.post(path, json={"role": "user", "content": "before"}, headers=h).status_code == 201
    refuse_inserts(pg_url, schema, errcode)
    r = http.post(path, json={"role": "user", "content": "refused"}, headers=h)
    assert r.status_code == status, r.text  # before: 500 "internal error"
    if status == 507:
        assert r.json()["detail"] == sqlite_full_answer()
    else:
        assert sqlstate in r.json()["detail"] and r.headers["retry-after"] == str(STORAGE_RETRY_AFTER_S)
    refuse_inserts(pg_url, schema, None)
    assert http.post(path, json={"role": "user", "content": "after"}, headers=h).status_code == 201
    got = http.get(f"/v1/conversations/{CONV}/history", headers=h).json()
    assert [m["message"]["content"] for m in got["messages"]] == ["before", "after"]  # nothing of the refused
