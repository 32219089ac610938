"""The tests' PostgreSQL schemas go away at the end of the test (or module) that made them
(tests/pg_server.py `schemas_dropped_at_end`, conftest's autouse fixtures): kept, a worker's
server held every schema of a CI run, and the erasure tests ran 10-20x slower after a dozen
PostgreSQL test files than alone (an erasure rewrites pg_statistic, all the schemas'
statistics; a CHECKPOINT writes all their pages).

What must hold: a test's schema is dropped at its end, a module fixture's only at the
module's end (the module's tests share it), a child process's at the module's end (it
records nothing in this process), and a schema whose tables another session holds locked
is left in place with a warning, within the drop's lock timeout, never a hang of the
teardown. Real embedded PostgreSQL, real child process.
"""

from __future__ import annotations

import subprocess
import sys
import time

import psycopg
import pytest
from pg_server import DROP_LOCK_TIMEOUT_MS, fresh_schema, schemas_dropped_at_end

# a drop that waits on a held lock gives up after DROP_LOCK_TIMEOUT_MS; the rest of the
# block's end (a connection, the other drops) is well inside this
DROP_GIVE_UP_SLACK_S = 5.0
CHILD_S = 60  # a child that imports psycopg and creates one schema


def create(url: str, schema: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".t (x int)')


def exists(url: str, schema: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is not None


@pytest.fixture(scope="module")
def module_schema(pg_url: str) -> str:
    """A schema every test of the module uses: it must outlive each of them."""
    schema = fresh_schema()
    create(pg_url, schema)
    return schema


@pytest.mark.parametrize("turn", ["first", "second"])  # the second runs after the first's teardown
def test_a_module_fixtures_schema_outlives_each_test(pg_url: str, module_schema: str, turn: str) -> None:
    assert exists(pg_url, module_schema), turn


def test_a_blocks_schemas_are_dropped_at_its_end_and_no_enclosing_ones(pg_url: str) -> None:
    with schemas_dropped_at_end():
        outer = fresh_schema()
        create(pg_url, outer)
        with schemas_dropped_at_end():
            inner = fresh_schema()
            create(pg_url, inner)
        assert not exists(pg_url, inner)
        assert exists(pg_url, outer)  # the enclosing block's: not the inner one's to drop
    assert not exists(pg_url, outer)


def test_an_empty_inner_block_leaves_the_enclosing_one_owning_new_names(pg_url: str) -> None:
    # two empty blocks compare equal: the inner one's end must take itself off, not the outer
    with schemas_dropped_at_end():
        with schemas_dropped_at_end():
            pass
        later = fresh_schema()
        create(pg_url, later)
    assert not exists(pg_url, later)


def test_a_sweeping_block_drops_a_child_processs_schema(pg_url: str) -> None:
    with schemas_dropped_at_end(sweep=True):
        kept_apart = fresh_schema()  # not named by this process's fresh_schema: recorded nowhere
        code = ("import sys, psycopg\n"
                "with psycopg.connect(sys.argv[1], autocommit=True) as c:\n"
                "    c.execute(f'CREATE SCHEMA \"{sys.argv[2]}\"')\n")
        with schemas_dropped_at_end():  # the child's name is not this inner block's either
            pass
        done = subprocess.run([sys.executable, "-c", code, pg_url, kept_apart], capture_output=True, text=True,
                              timeout=CHILD_S)
        assert done.returncode == 0, done.stderr
        assert exists(pg_url, kept_apart)
    assert not exists(pg_url, kept_apart)


def test_a_schema_another_session_holds_locked_is_left_with_a_warning(pg_url: str) -> None:
    holder = psycopg.connect(pg_url, autocommit=False)
    held = ""
    try:
        with pytest.warns(UserWarning, match="left in place") as warned, schemas_dropped_at_end():
            held, free = fresh_schema(), fresh_schema()
            create(pg_url, held)
            create(pg_url, free)
            holder.execute(f'SELECT count(*) FROM "{held}".t').fetchone()  # its read lock, kept
            started = time.monotonic()
        assert time.monotonic() - started < DROP_LOCK_TIMEOUT_MS / 1000 + DROP_GIVE_UP_SLACK_S
        left = [str(w.message) for w in warned if "left in place" in str(w.message)]
        assert len(left) == 1 and held in left[0], left
        assert exists(pg_url, held)
        assert not exists(pg_url, free)  # the others still dropped
    finally:
        holder.rollback()
        holder.close()
        if held:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{held}" CASCADE')
