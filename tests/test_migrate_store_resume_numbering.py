"""`migrate-store` into PostgreSQL: a resumed run moves the target's id sequence past the
ids it copies. The copy keeps each message's source id (plus the offset,
tiers/migrate_store.py's docstring) and only the first run's whole-store transaction moved
the sequence, up to the source's top as that run read it. When the source grew between an
interrupted run and its resume, the resume copied rows with ids above the sequence, and
each later append to the target drew a taken id: psycopg's UniqueViolation (a 5xx
through the service), at every append until the sequence passed them. Every run with
conversations to copy now reserves up to the source's top as it reads it.

Real SQLite files (the source), a real PostgreSQL (tests/pg_server.py, the target)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from pg_server import fresh_schema

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.migrate_store import migrate_store
from tiermem.tiers.models import Message
from tiermem.tiers.postgres import PostgresStore
from tiermem.tiers.tokens import BpeTokenCounter

NS = "ns"
NAMES = ("a", "b")
MESSAGES_EACH = 2  # per conversation before the first run
GROWN_BY = 3  # messages the source gains between the runs


class Interrupted(Exception):
    """The operator's ^C inside the second conversation's transaction."""


def _grow_uncopied(store: ColdStore, uncopied: str) -> None:
    for i in range(GROWN_BY):
        store.append(uncopied, Message(role="user", content=f"later {i}"), namespace=NS)


def _begin_another(store: ColdStore, uncopied: str) -> None:
    for i in range(GROWN_BY):
        store.append("c", Message(role="user", content=f"new conversation {i}"), namespace=NS)


GROWTHS: list[tuple[str, Callable[[ColdStore, str], None]]] = [
    # the conversation the interrupted run did not copy gains messages in the source
    ("uncopied-grows", _grow_uncopied),
    # a conversation is begun in the source after the interrupted run (passed before
    # too: its new key made the resume write the whole-store transaction, which moved
    # the sequence then)
    ("new-conversation", _begin_another),
]


def _name_of(store: ColdStore, key: str) -> str:
    return next(n for n in NAMES if store.key_of(NS, n) == key)


@pytest.mark.parametrize("grow", [g for _n, g in GROWTHS], ids=[n for n, _g in GROWTHS])
def test_an_append_after_a_resumed_copy_draws_a_free_id(tmp_path: Path, pg_url: str,
                                                        counter: BpeTokenCounter,
                                                        grow: Callable[[ColdStore, str], None]) -> None:
    source, schema = tmp_path / "src.db", fresh_schema()
    store = ColdStore(source, tokens=counter)
    try:
        for name in NAMES:
            for i in range(MESSAGES_EACH):
                store.append(name, Message(role="user", content=f"{name} {i}"), namespace=NS)
    finally:
        store.close()
    seen: list[str] = []

    def interrupt_second(step: str) -> None:
        if step.startswith("close:"):
            return
        seen.append(step)
        if len(seen) == len(NAMES):
            raise Interrupted

    with pytest.raises(Interrupted):
        migrate_store(source, pg_url, tokens=counter, target_schema=schema, fault=interrupt_second)
    store = ColdStore(source, tokens=counter)
    try:
        grow(store, _name_of(store, seen[-1]))
    finally:
        store.close()
    resumed = migrate_store(source, pg_url, tokens=counter, target_schema=schema)
    assert (resumed.resumed, resumed.copied) == (True, len(seen) - 1 + (grow is _begin_another))
    target = PostgresStore(pg_url, tokens=counter, schema=schema)
    try:  # before: UniqueViolation, the sequence behind the rows the resume copied
        target.append("after", Message(role="user", content="first append after the move"), namespace=NS)
        target.append("after", Message(role="user", content="and another"), namespace=NS)
    finally:
        target.close()
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(f'SET search_path TO "{schema}"')
        after_ids = [r[0] for r in c.execute("SELECT m.id FROM messages m JOIN conversations c "
                                             "ON c.id = m.conversation_id WHERE c.name = 'after' ORDER BY m.id")]
        copied_top = c.execute("SELECT MAX(m.id) FROM messages m JOIN conversations c "
                               "ON c.id = m.conversation_id WHERE c.name <> 'after'").fetchone()[0]
    assert len(after_ids) == 2 and min(after_ids) > copied_top  # the appends come after every copied row
