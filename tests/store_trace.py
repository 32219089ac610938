"""The SQL statements a `ColdStore` call ran, as its connection traced them (parameters
inlined), for tests that check how a store operation reaches its rows."""

from __future__ import annotations

from collections.abc import Callable

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
