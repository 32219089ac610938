"""The turn cache reads and derives a conversation under that conversation's own lock,
not the lock of the whole cache: the first call on a 20,000-turn conversation (seconds of
per-turn derivation) held every other conversation's `context()` of the process waiting
3.5-7.8 s (audit of one huge conversation, 2026-12-05). A derive step that blocks until
released stands in for the slow load, so the tests do not depend on timing."""

from __future__ import annotations

import threading

from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.turncache import TurnCache

SLOW = "slowmarker"
WAIT_S = 30  # a bound on a wait that should end at once


def blocking_cache(cold: ColdStore) -> tuple[TurnCache, threading.Event, threading.Event]:
    """A cache whose derive step blocks on the slow conversation's turns until `release`."""
    entered, release = threading.Event(), threading.Event()

    def derive(text: str | None, created: float, _zone: object) -> tuple[tuple[float, float] | None, bool]:
        if text and SLOW in text:
            entered.set()
            release.wait(WAIT_S)
        return None, False

    return TurnCache(cold, derive=derive), entered, release


def fill(cold: ColdStore) -> None:
    cold.append_many("big", [Message(role="user", content=f"{SLOW} turn {i}") for i in range(5)])
    cold.append_many("small", [Message(role="user", content=f"quick turn {i}") for i in range(3)])


def test_a_slow_load_delays_only_its_own_conversation(cold: ColdStore) -> None:
    fill(cold)
    cache, entered, release = blocking_cache(cold)
    loader = threading.Thread(target=lambda: cache.get("big"))
    loader.start()
    try:
        assert entered.wait(WAIT_S)
        done: list[int] = []
        other = threading.Thread(target=lambda: done.append(len(cache.get("small"))))
        other.start()
        other.join(WAIT_S / 3)
        # before: blocked behind the whole cache's lock until the slow load ended
        assert done == [3] and loader.is_alive()
        assert cache.stats()["conversations"] == 1  # the slow one is not in yet
    finally:
        release.set()
        loader.join(WAIT_S)
    assert cache.stats()["conversations"] == 2
    assert len(cache.get("big")) == 5


def test_two_callers_of_one_conversation_load_it_once(cold: ColdStore) -> None:
    fill(cold)
    cache, entered, release = blocking_cache(cold)
    got: list[int] = []
    first = threading.Thread(target=lambda: got.append(len(cache.get("big"))))
    first.start()
    assert entered.wait(WAIT_S)
    entered.clear()
    second = threading.Thread(target=lambda: got.append(len(cache.get("big"))))
    second.start()
    second.join(0.5)
    assert second.is_alive() and not entered.is_set()  # waiting for the first, not deriving again
    release.set()
    first.join(WAIT_S)
    second.join(WAIT_S)
    assert got == [5, 5] and cache.stats()["reloads"] == 0


def test_an_entry_dropped_while_it_loads_is_not_kept(cold: ColdStore) -> None:
    # an erasure forgets the conversation while a call is reading it: the call gets what
    # it read, and no copy stays in the cache
    fill(cold)
    cache, entered, release = blocking_cache(cold)
    got: list[int] = []
    loader = threading.Thread(target=lambda: got.append(len(cache.get("big"))))
    loader.start()
    assert entered.wait(WAIT_S)
    cache.drop("big")
    release.set()
    loader.join(WAIT_S)
    assert got == [5] and cache.stats()["conversations"] == 0
