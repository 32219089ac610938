"""`migrate-store`'s error stays the one raised when closing a side fails after it, and
the rest of the cleanup is still done.

After an error (the target cannot be opened, the preflight refuses, the copy fails) the
run closes both sides and, when it refused, removes the target it created. A close that
raised there replaced the run's error (why the copy was refused, what failed) with its
own, and skipped what came after it: the other side's close, or (the target's close
being the first step of its removal) the DROP of the schema the run made. Now the run's
error is raised, each failed close is logged and noted on it, and the cleanup goes on.

Neither engine's close fails for real today (psycopg's close ends with libpq's PQfinish,
which reports nothing, after a killed backend or a stopped server as well; SQLite's
sqlite3_close_v2 returns OK), so the close fails through migrate_store's `fault` hook
("close:source", "close:target"; the store is closed all the same). The run's own errors
are real: a target server that refuses connections, a source row PostgreSQL cannot hold,
a failure inside a conversation's transaction (the hook, as test_migrate_store's ^C).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from pg_server import fresh_schema
from test_migrate_store_refused_cleanup import nul_source

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.errors import MigrationRefused, StoreUnavailable
from tiermem.tiers.migrate_store import migrate_store
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter

CLOSED_PORT_URL = "postgresql://postgres@127.0.0.1:1/postgres"  # nothing listens on port 1
COPY = "copy"  # the fault's step for any conversation's transaction (its key)


class CloseFailed(RuntimeError):
    """What the fault hook raises in place of a close's failure."""


class CopyFailed(RuntimeError):
    """What the fault hook raises inside a conversation's transaction."""


def failing(steps: set[str]) -> Callable[[str], None]:
    def fault(step: str) -> None:
        if step in steps:
            raise CloseFailed(f"{step} failed")
        if COPY in steps and not step.startswith("close:"):
            raise CopyFailed(f"writing {step} failed")
    return fault


def plain_source(path: Path, counter: BpeTokenCounter) -> Path:
    store = ColdStore(path, tokens=counter)
    try:
        for name in ("a", "b"):
            store.append(name, Message(role="user", content=f"hello from {name}"), namespace="ns")
    finally:
        store.close()
    return path


def schema_exists(url: str, schema: str) -> bool:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is not None


CASES = [
    # the target's server refuses connections; the source's close fails after it
    ("target_unreachable", {"close:source"}, StoreUnavailable, "unavailable"),
    # the preflight refuses (a NUL in a body); the source's close fails, the target's removal still runs
    ("refused", {"close:source"}, MigrationRefused, "cannot hold"),
    # the preflight refuses; the target's own close fails: its schema is still dropped
    ("refused", {"close:target"}, MigrationRefused, "cannot hold"),
    # a conversation's transaction fails; both closes fail after it, each is noted
    ("copy_fails", {COPY, "close:source", "close:target"}, CopyFailed, "writing .* failed"),
]


@pytest.mark.parametrize(("run", "steps", "raised", "says"), CASES,
                         ids=["unreachable-source", "refused-source", "refused-target", "copy-both"])
def test_the_runs_error_is_raised_and_the_cleanup_done_when_a_close_fails(
        run: str, steps: set[str], raised: type[BaseException], says: str, tmp_path: Path, pg_url: str,
        counter: BpeTokenCounter, caplog: pytest.LogCaptureFixture) -> None:
    source = (nul_source if run == "refused" else plain_source)(tmp_path / "src.db", counter)
    schema = fresh_schema()
    target = CLOSED_PORT_URL if run == "target_unreachable" else pg_url
    with caplog.at_level(logging.WARNING, logger="tiermem.migrate_store"), \
            pytest.raises(raised, match=says) as err:
        migrate_store(source, target, tokens=counter, target_schema=schema, fault=failing(steps))
    closes = sorted(step.removeprefix("close:") for step in steps if step.startswith("close:"))
    notes = getattr(err.value, "__notes__", [])
    # each failed close is noted on the run's error, naming the side, and logged
    assert sorted(n.split()[2] for n in notes if n.startswith("closing the ")) == closes, notes
    for side in closes:
        assert any(f"closing the {side}" in r.getMessage() and f"close:{side} failed" in r.getMessage()
                   for r in caplog.records), caplog.records
    if run == "refused":  # the schema the refused run made is gone (before: kept where the target's close failed)
        assert not schema_exists(pg_url, schema)
        assert not any(n.startswith("cleaning up the target failed") for n in notes)
