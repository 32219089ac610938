"""The inspector's hot figures of a conversation whose Redis keys were restored from an
older snapshot (the server restarted from an old dump.rdb): a set the log has moved away
from is shown as stale or behind, by the checks the next context call makes
(tiermem.hotlink `HotLink.staleness`: the set's last turn and pin version against the
log's), not as the current set; the next context call makes it current again. On a real
redis-server: the conversation's keys are dumped (DUMP) at the snapshot and put back
(RESTORE) after more work, as a restart from that snapshot puts them back.

On the code before, `hot_figures` compared only the set's generation, which a snapshot
of the same database shares: the restored set was shown as the current one, with the
pins and members of the snapshot (review r_redis, s6_inspector_restore.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from tiermem import Memory
from tiermem.inspector.data import HOT_BEHIND, HOT_STALE, hot_figures

# the fixtures admin, mem, server (hot_fixtures, by hot_server)
pytest_plugins = ["hot_server"]

FILLER = "paid by bank transfer from the account in Lisbon, reference attached"
QUERY = "which account?"
BUDGET = 3000


def _say(mem: Memory, text: str) -> int:
    return mem.append("a", {"role": "user", "content": f"{text}, {FILLER}"})


def _appended(mem: Memory) -> None:
    for i in range(2):
        _say(mem, f"after the snapshot {i}")


def _unpinned_and_appended(mem: Memory) -> None:
    mem.unpin("a", 1)
    _appended(mem)


def _pinned(mem: Memory) -> None:
    mem.pin("a", 2)


# (what was done after the snapshot, each followed by a context call; what the inspector
# shows once the snapshot is back)
CASES: list[tuple[str, Callable[[Memory], None], str]] = [
    # appends only: the restored set ends with a turn the log holds, and lacks the new ones
    ("appended", _appended, HOT_BEHIND),
    # an unpin and appends (s6): the set misses a pin change the log made before the appends
    ("unpinned and appended", _unpinned_and_appended, HOT_STALE),
    # a pin only: every turn is there, the pin is not
    ("pinned", _pinned, HOT_STALE),
    # nothing: the snapshot is the current set
    ("nothing", lambda mem: None, "ok"),
]


@pytest.mark.parametrize(("work", "shown"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_a_restored_set_is_shown_stale_until_the_next_context(mem: Memory, admin: redis.Redis,
                                                              work: Callable[[Memory], None], shown: str) -> None:
    assert mem.hot is not None
    for i in range(4):
        _say(mem, f"turn {i}")
    mem.pin("a", 1)
    mem.context("a", QUERY, BUDGET)
    key = mem.cold.key_of("default", "a")
    pattern = mem.hot.tier.tag(key) + "*"
    snapshot = {k: admin.dump(k) for k in admin.scan_iter(match=pattern)}
    assert hot_figures(mem, key).state == "ok"

    work(mem)
    mem.context("a", QUERY, BUDGET)
    assert hot_figures(mem, key).state == "ok"

    for k in list(admin.scan_iter(match=pattern)):  # the restart from the snapshot
        admin.delete(k)
    for k, value in snapshot.items():
        admin.restore(k, 0, value, replace=True)
    assert hot_figures(mem, key).state == shown

    mem.context("a", QUERY, BUDGET)
    now = hot_figures(mem, key)
    assert now.state == "ok"
    mem.hot.refresh(key)  # the set the log gives: what the context call made current
    assert hot_figures(mem, key) == now
