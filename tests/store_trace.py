"""The SQL statements a `ColdStore` call ran, as its connection traced them (parameters
inlined), for tests that check how a store operation reaches its rows; and those a
`Memory`'s store sends inside a block, on SQLite or PostgreSQL (`recording`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from tiermem import Memory
from tiermem.tiers.cold import ColdStore


def traced(store: ColdStore, action: Callable[[], object]) -> list[str]:
    """The statements `action` ran on the store's connection, with their parameters."""
    log: list[str] = []
    store._conn.set_trace_callback(log.append)
    try:
        action()
    finally:
        store._conn.set_trace_callback(None)
    return log


class _Recorder:
    """A pooled PostgreSQL connection whose statements are noted, then sent as they were."""

    def __init__(self, inner: Any, sent: list[str]) -> None:
        self._inner, self._sent = inner, sent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def execute(self, sql: Any, *args: Any, **kw: Any) -> Any:
        self._sent.append(sql if isinstance(sql, str) else sql.as_string(self._inner))
        return self._inner.execute(sql, *args, **kw)


@contextlib.contextmanager
def recording(mem: Memory, engine: str) -> Iterator[list[str]]:
    """The statements `mem`'s store sends inside the block. SQLite ("sqlite"): the
    connection's trace callback. PostgreSQL (any other engine): reads and transactions
    alike check out a pooled connection through `_conn`, each recorded as it is sent."""
    sent: list[str] = []
    store: Any = mem.cold
    if engine == "sqlite":
        with store.reading() as db:
            db.set_trace_callback(sent.append)
        try:
            yield sent
        finally:
            with store.reading() as db:
                db.set_trace_callback(None)
        return
    real = store._conn

    @contextlib.contextmanager
    def conn() -> Iterator[Any]:
        with real() as c:
            yield _Recorder(c, sent)

    store._conn = conn
    try:
        yield sent
    finally:
        del store._conn  # the class's method again
