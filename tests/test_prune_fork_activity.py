"""prune takes conversations idle since before its cutoff, and a fork's creation is
activity (`tiers.dialect.PRUNE_IDLE_SQL`), on both engines. A fork carries its parent's
message times, so before, a fork made seconds ago from a 10-day-old prefix was erased by
`prune --older-than 1d` (review r_ops, 2026-12-07). A conversation whose own messages are
old is still as old as they are, however recently they were imported (an archive imported
with its times can be pruned), and a fork that is itself old goes like any other."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

DAY = 86_400.0
TEN_DAYS_AGO = time.time() - 10 * DAY


@pytest.fixture
def mem(engine_config: Config, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(engine_config, embedder=embedder, hot=False, background_indexing=False) as m:
        # a ticket from last week, imported now with its own time
        m.append("case-1", {"role": "user", "content": "ticket from last week", "created_at": TEN_DAYS_AGO})
        yield m


# (age given to prune, the conversations it erases); the fork is made seconds before
@pytest.mark.parametrize(("older_than", "erased"), [
    # a day: the old ticket goes, its fork made just now stays (erased before the fix)
    (dt.timedelta(days=1), ["case-1"]),
    # twenty days: neither is that old
    (dt.timedelta(days=20), []),
    # age 0 (everything idle up to now): both, a fork is no shield against an explicit cutoff
    (dt.timedelta(0), ["case-1", "case-1-branch"]),
], ids=["a-day", "twenty-days", "age-0"])
def test_a_fresh_fork_of_an_old_prefix_is_not_idle(mem: Memory, older_than: dt.timedelta, erased: list[str]) -> None:
    mem.fork("case-1", 0, new_id="case-1-branch")
    time.sleep(0.01)  # the age-0 cutoff is after the fork's creation on any clock resolution
    report = mem.prune(older_than)
    assert report.conversation_ids == erased
    survivors = sorted({"case-1", "case-1-branch"} - set(erased))
    assert mem.conversations() == survivors
    for conv in survivors:
        assert [m.text for m in mem.history(conv)] == ["ticket from last week"]

