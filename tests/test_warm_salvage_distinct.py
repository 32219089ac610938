"""`WarmStore.salvaged` counts distinct bad view rows, as the cold store's
`salvaged_rows` counts distinct bad message, checkpoint and plan rows. Before (a review,
2026-12-06) it counted reads: one bad view row read ten times counted ten. A row is
known by its conversation, kind, key and version. Real SQLite, the bad rows written
behind tiermem's back with SQL.
"""

from __future__ import annotations

import pytest

from tiermem import Memory
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.warm import Sentence, SummaryView, WarmStore

READS = 10  # reads of the same view; each meets every bad row again


def _bad_row(cold: ColdStore, kind: str, key: str, version: int, *, conversation: str = "c") -> None:
    with cold._tx() as c:
        c.execute(
            "INSERT INTO summaries(conversation_id, kind, key, version, start_position, end_position, body, "
            "tokens, summarizer, created_at) VALUES (?, ?, ?, ?, 0, 1, '{not json', 1, 'x', 2.0)",
            (conversation, kind, key, version),
        )


@pytest.mark.parametrize(("bad", "expected"), [
    # one bad version: the same row however often it is read
    ([("rolling", "", 2)], 1),
    # two bad versions of one view: two rows
    ([("rolling", "", 2), ("rolling", "", 3)], 2),
    # the same version number in two views: distinct rows
    ([("rolling", "", 2), ("constraints", "", 2)], 2),
])
def test_a_bad_view_row_counts_once(cold: ColdStore, bad: list[tuple[str, str, int]], expected: int) -> None:
    warm = WarmStore(cold)
    cold.append_many("c", [Message(role="user", content="one"), Message(role="user", content="two")])
    good = {kind: warm.put(SummaryView("c", kind, "", 0, 0, 0, (Sentence("one", (0,)),), 0, "x", 1.0))
            for kind, _key, _version in bad}
    for kind, key, version in bad:
        _bad_row(cold, kind, key, version)
    for _ in range(READS):
        for kind in good:
            assert warm.latest("c", kind) == good[kind]
    assert warm.salvaged == expected


def test_bad_view_rows_show_in_stats_and_leave_with_their_conversation(cold_memory: Memory) -> None:
    # before, WarmStore.salvaged was reported nowhere: stats() and /metrics showed only the
    # log's bad rows, and an erased conversation's bad view rows stayed counted
    mem = cold_memory
    mem.append("c", {"role": "user", "content": "one"})
    mem.append("c", {"role": "user", "content": "two"})
    key = mem.cold.key_of("default", "c")
    assert key is not None
    warm = mem.warm
    good = warm.put(SummaryView(key, "rolling", "", 0, 0, 0, (Sentence("one", (0,)),), 0, "x", 1.0))
    _bad_row(mem.cold, "rolling", "", 2, conversation=key)
    for _ in range(READS):
        assert warm.latest(key, "rolling") == good
    assert mem.stats()["warm"]["salvaged_rows"] == 1
    mem.delete_conversation("c")
    assert mem.stats()["warm"]["salvaged_rows"] == 0
