"""`migrate-store` with a target writer that was not stopped, writing while the run
copies: a conversation of the name the run copies next, created by another process
between the run's checks and that conversation's transaction, made the run fail with the
engine's raw error (psycopg's UniqueViolation on conversations_namespace_name_key, a
traceback from the CLI; the SQLite driver's IntegrityError). Now it is a MigrationRefused naming the
conversation and what to do; that conversation is rolled back, those copied before it
are kept, and the writer's row stays. The rerun refuses it by name before writing.

Real SQLite files, a real PostgreSQL (tests/pg_server.py) and a real second process
appending to the target, in both directions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pg_server import migrate, migration_sides, opened

from tiermem.tiers.errors import MigrationRefused
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

NS = "ns"
NAMES = ("a", "b")
MESSAGES_EACH = 2
WRITER_TEXT = "the target's own, written during the copy"
WRITER_TIMEOUT_S = 120  # the second process: an import of tiermem and one append

# the second process: the target's writer, appending `name` there through its own store
WRITER = """
import sys
from pathlib import Path
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter
engine, where, namespace, name, text = sys.argv[1:]
if engine == "sqlite":
    from tiermem.tiers.cold import ColdStore
    store = ColdStore(Path(where), tokens=BpeTokenCounter())
else:
    from tiermem.tiers.postgres import PostgresStore
    url, schema = where.rsplit("#", 1)
    store = PostgresStore(url, tokens=BpeTokenCounter(), schema=schema)
try:
    store.append(name, Message(role="user", content=text), namespace=namespace)
finally:
    store.close()
"""


DIRECTIONS = [
    # SQLite -> PostgreSQL: psycopg's UniqueViolation before
    pytest.param(True, id="to-postgres"),
    # PostgreSQL -> SQLite: the SQLite driver's (sqlean) IntegrityError before
    pytest.param(False, id="to-sqlite"),
]


@pytest.mark.parametrize("to_postgres", DIRECTIONS)
def test_a_target_writer_during_the_copy_is_a_clear_refusal(tmp_path: Path, pg_url: str,
                                                            counter: BpeTokenCounter, to_postgres: bool) -> None:
    src, dst = migration_sides(tmp_path, pg_url, to_postgres)
    with opened(src, counter) as store:
        for name in NAMES:
            for i in range(MESSAGES_EACH):
                store.append(name, Message(role="user", content=f"{name} {i}"), namespace=NS)
        # the run copies in key order: the second key's conversation is written after the writer's
        first, second = (store.name_of(k)[1] for k in sorted(store.all_keys()))

    def writer_after_the_first(done: int, _total: int) -> None:
        if done == 1:
            subprocess.run([sys.executable, "-c", WRITER, *dst, NS, second, WRITER_TEXT], check=True,
                           timeout=WRITER_TIMEOUT_S)

    # before: psycopg.errors.UniqueViolation / sqlean.dbapi2.IntegrityError, raw
    with pytest.raises(MigrationRefused, match=f"conversation '{second}' of namespace '{NS}'.*in the way.*"
                       "the 1 copied before it are kept; stop the target's writers and rerun"):
        migrate(src, dst, counter, progress=writer_after_the_first)
    with opened(dst, counter) as store:
        assert len(store.history(store.key_of(NS, first))) == MESSAGES_EACH  # kept
        [row] = store.history(store.key_of(NS, second))  # the writer's, alone
        assert row.body["content"] == WRITER_TEXT
    with pytest.raises(MigrationRefused, match=f"conversation '{second}' of namespace '{NS}' exists there under "
                       "another key"):
        migrate(src, dst, counter)
