"""A prune keeps a conversation written to while it runs (SQLite: `ColdStore._erase`
commits in batches, pausing between them). The prune lists the idle conversations once;
before, each batch only checked that a listed key still existed, so a conversation
appended to between two batches was erased with the appends already acknowledged,
counted in its tombstone, and began again at position 0 (review r_tenant, 2026-12-07).
Now each batch checks `PRUNE_IDLE_SQL` again in the transaction that erases, and the
report and tombstones count only what was erased. An erasure on request (a namespace's)
still takes every conversation it listed. The append is made by another handle on the
same file (another process's connection) from the hook between two batches."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tiermem.tiers.cold import ERASE_BATCH_MESSAGES, ColdStore
from tiermem.tiers.models import ErasureReport, Message
from tiermem.tiers.tokens import BpeTokenCounter

NS = "t"
TURNS = 80  # per conversation: the first batch takes "a" and "b", "c" comes in the next
assert 2 * TURNS <= ERASE_BATCH_MESSAGES < 3 * TURNS
DAY_S = 86_400.0
OLD = time.time() - DAY_S  # the conversations' messages: a day old
CUTOFF_AGE_S = 3_600.0  # the prune takes what has been idle for an hour

Erase = Callable[[ColdStore], ErasureReport]
PRUNE: Erase = lambda s: s.prune(time.time() - CUTOFF_AGE_S, namespace=NS)  # noqa: E731
DELETE_NAMESPACE: Erase = lambda s: s.delete_namespace(NS)  # noqa: E731


# (erasure, the conversation appended to after the first batch and that message's time
#  (None: now), what the erasure reports erased, each survivor's messages afterwards,
#  the messages the report and tombstones count)
CASES: list[tuple[str, Erase, str | None, float | None, list[str], dict[str, int], int]] = [
    # the race: "c" is no longer idle when its batch comes, so it stays whole with the
    # acknowledged append at position 80 (before: erased, 241 counted, the append lost)
    ("fresh-append", PRUNE, "c", None, ["a", "b"], {"c": TURNS + 1}, 2 * TURNS),
    # an import with the old time leaves "c" as idle as before: erased, and its tombstone
    # counts the message erased with it
    ("old-dated-append", PRUNE, "c", OLD, ["a", "b", "c"], {}, 3 * TURNS + 1),
    # "a" went in the first batch: the append starts a new incarnation, which the prune
    # did not list and keeps
    ("append-after-its-erasure", PRUNE, "a", None, ["a", "b", "c"], {"a": 1}, 3 * TURNS),
    # nothing written: every listed conversation goes
    ("no-append", PRUNE, None, None, ["a", "b", "c"], {}, 3 * TURNS),
    # an erasure on request takes what it listed, written to since or not
    ("delete-namespace", DELETE_NAMESPACE, "c", None, ["a", "b", "c"], {}, 3 * TURNS + 1),
]


@pytest.mark.parametrize(("case", "erase", "to", "at", "erased", "kept", "counted"), CASES,
                         ids=[c[0] for c in CASES])
def test_a_prune_keeps_a_conversation_written_to_between_its_batches(
        tmp_path: Path, counter: BpeTokenCounter, case: str, erase: Erase, to: str | None, at: float | None,
        erased: list[str], kept: dict[str, int], counted: int) -> None:
    db = tmp_path / "tiermem.db"
    store = ColdStore(db, tokens=counter)
    other = ColdStore(db, tokens=counter)  # another process's handle on the file
    try:
        keys = {}
        for name in ("a", "b", "c"):
            got = store.append_batch(name, [Message(role="user", content=f"{name} turn {t}", created_at=OLD)
                                            for t in range(TURNS)], namespace=NS)
            keys[name] = got.key
        appended: list[tuple[str, list[int]]] = []

        def step(name: str) -> None:
            if name == "erase:batch" and to is not None and not appended:
                got = other.append_batch(to, [Message(role="user", content="acknowledged", created_at=at)],
                                         namespace=NS)
                appended.append((got.key, got.positions))

        store._fault = step
        report = erase(store)
        store._fault = None

        assert report.conversation_ids == erased
        assert report.conversations == len(erased) == len(report.tombstones)
        assert report.messages == counted == sum(t["messages"] for t in report.tombstones)
        assert sorted((t["id"], t["messages"]) for t in store.tombstones(NS)) == sorted(
            (t["id"], t["messages"]) for t in report.tombstones)
        for name in ("a", "b", "c"):
            key = store.key_of(NS, name)
            if name not in kept:
                assert key is None
                continue
            assert key is not None
            texts = [m.text for m in store.history(key)]
            assert len(texts) == kept[name] and texts[-1] == "acknowledged"
            # the append's incarnation and positions are the ones it was acknowledged with
            assert appended == [(key, [kept[name] - 1])]
            assert (key == keys[name]) == (name not in erased)  # kept whole, or a new incarnation
    finally:
        other.close()
        store.close()
