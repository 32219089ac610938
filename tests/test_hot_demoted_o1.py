"""The append script's work on the demoted-pin hash `T:d` does not grow with the
conversation. `T:d` keeps every pin ever pushed out of the hot set (until it is unpinned
or comes back), so it grows with the conversation, not with the budget; the script read
it whole (HGETALL) on every append and deleted and rewrote it whole on every demotion
(a scale review: 19,950 entries, 56 ms of Redis per append at 40,100 turns). Measured
here as the commands the script sends to `T:d`, seen by MONITOR on a real redis-server,
not as time: a demoting append after 300 demotions touches the same fields as one after
10. Stats list a bounded number of demoted positions and count them all."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from hot_fixtures import own_redis

from tiermem.tiers.errors import HotStale
from tiermem.tiers.hot import SUMMARY_DEMOTED_LISTED, HotTier, HotTurn, make_client

GEN = "gen-1"
BUDGET_TOKENS = 100
PIN_TOKENS = 40  # three pins pass the budget: from the third pinned turn on, each admit demotes one
FEW_DEMOTIONS = 10
MANY_DEMOTIONS = 300  # past Redis's small-hash (listpack) size too: HSCAN pages it
# commands that read or replace a whole hash: each touches every demoted entry
WHOLE_HASH_COMMANDS = {"hgetall", "hkeys", "hvals", "del", "unlink", "rename"}
# a demoting admit may read one entry (HGET of the admitted position), check the size
# (HLEN), and write the one demoted entry (HSET): a handful of arguments whatever the size
MAX_D_ARGS_PER_APPEND = 8
SENTINEL = "tiermem-test-monitor-end"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[redis.Redis]:
    with own_redis(tmp_path_factory.mktemp("hot-demoted")) as srv:
        c = make_client(srv.url)
        assert isinstance(c, redis.Redis)
        yield c
        c.close()


def tier(client: redis.Redis) -> HotTier:
    return HotTier(client, budget_tokens=BUDGET_TOKENS, head_protect=1, tail_protect=1, eviction_bias=0.25,
                   idle_ttl_s=600.0)


def pinned(pos: int) -> HotTurn:
    # equal priorities: the oldest pin goes first
    return HotTurn(pos, PIN_TOKENS, True, 50, f"turn {pos}")


def demoted_set(client: redis.Redis, demotions: int) -> tuple[HotTier, str, str]:
    """A conversation of pinned turns with `demotions` pins demoted; its demoted hash key."""
    hot, conv = tier(client), f"c-{uuid.uuid4().hex}"
    hot.admit_many(conv, [pinned(p) for p in range(demotions + 2)], generation=GEN)
    d_key = hot.keys(conv)[5]
    assert client.hlen(d_key) == demotions  # the premise
    return hot, conv, d_key


def script_commands(client: redis.Redis, action: Any) -> list[list[str]]:
    """The commands Lua scripts ran on the server while `action` ran (MONITOR)."""
    seen: list[list[str]] = []
    ready = threading.Event()

    def listen() -> None:
        with client.monitor() as mon:
            ready.set()
            while True:
                cmd = mon.next_command()
                if SENTINEL in cmd["command"]:
                    return
                if cmd.get("client_type") == "lua":
                    seen.append(cmd["command"].split(" "))

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    assert ready.wait(10)
    client.ping()  # the MONITOR connection is registered before the action runs
    action()
    client.echo(SENTINEL)
    t.join(30)
    assert not t.is_alive()
    return seen


def d_commands(client: redis.Redis, demotions: int) -> list[list[str]]:
    """The commands on the demoted hash of one demoting append after `demotions` demotions."""
    hot, conv, d_key = demoted_set(client, demotions)
    cmds = script_commands(client, lambda: hot.admit_many(conv, [pinned(demotions + 2)], generation=GEN))
    assert client.hlen(d_key) == demotions + 1  # this append demoted one more
    return [c for c in cmds if len(c) > 1 and c[1] == d_key]


@pytest.mark.parametrize("demotions", [
    FEW_DEMOTIONS,  # a short conversation
    MANY_DEMOTIONS,  # a long one: the cost must be the same
])
def test_a_demoting_append_touches_only_its_own_entries(client: redis.Redis, demotions: int) -> None:
    cmds = d_commands(client, demotions)
    assert not [c for c in cmds if c[0].lower() in WHOLE_HASH_COMMANDS], cmds
    assert sum(len(c) - 2 for c in cmds) <= MAX_D_ARGS_PER_APPEND, cmds
    # the one new entry is written by itself
    assert [c[0].lower() for c in cmds if c[0].lower() in {"hset", "hdel"}] == ["hset"]


def test_the_work_is_the_same_for_a_short_and_a_long_conversation(client: redis.Redis) -> None:
    def shape(cmds: list[list[str]]) -> list[tuple[str, int]]:
        return [(c[0].lower(), len(c)) for c in cmds]
    assert shape(d_commands(client, FEW_DEMOTIONS)) == shape(d_commands(client, MANY_DEMOTIONS))


def test_unpinning_a_demoted_pin_deletes_only_its_entry_and_keeps_the_counts(client: redis.Redis) -> None:
    hot, conv, d_key = demoted_set(client, MANY_DEMOTIONS)
    gone = 7  # a demoted pin, neither the first nor the last
    cmds = script_commands(client, lambda: hot.unpin(conv, gone, generation=GEN))
    mine = [c for c in cmds if len(c) > 1 and c[1] == d_key]
    assert not [c for c in mine if c[0].lower() in WHOLE_HASH_COMMANDS], mine
    assert [c[1:] for c in mine if c[0].lower() in {"hset", "hdel"}] == [[d_key, str(gone)]]  # one HDEL
    assert client.hlen(d_key) == MANY_DEMOTIONS - 1
    whole = hot.read(conv)  # a read checks the meta's counts and tokens against the hash
    assert whole is not None and whole.demoted_count == MANY_DEMOTIONS - 1
    assert gone not in hot.demoted_pins(conv) and len(hot.demoted_pins(conv)) == MANY_DEMOTIONS - 1
    assert whole.demoted_tokens == PIN_TOKENS * (MANY_DEMOTIONS - 1)


def test_a_set_without_the_count_stamp_is_read_whole_once_and_restamped(client: redis.Redis) -> None:
    # written by a version before the counts: its meta's figures are not trusted
    hot, conv, _ = demoted_set(client, FEW_DEMOTIONS)
    meta_key = hot.keys(conv)[0]
    client.hdel(meta_key, "counted")
    client.hset(meta_key, "demoted_tokens", 1)  # a figure the old writer could have left wrong
    hot.admit_many(conv, [pinned(FEW_DEMOTIONS + 2)], generation=GEN)
    whole = hot.read(conv)
    assert whole is not None and whole.demoted_tokens == PIN_TOKENS * (FEW_DEMOTIONS + 1)
    assert client.hget(meta_key, "counted") is not None


def test_a_lost_demoted_hash_is_found_by_its_size(client: redis.Redis) -> None:
    # maxmemory evicts single keys: the meta's count against HLEN tells, nothing written
    hot, conv, d_key = demoted_set(client, FEW_DEMOTIONS)
    client.delete(d_key)
    last = client.hget(hot.keys(conv)[0], "last")
    with pytest.raises(HotStale, match="inconsistent"):
        hot.admit_many(conv, [pinned(FEW_DEMOTIONS + 2)], generation=GEN)
    assert client.hget(hot.keys(conv)[0], "last") == last


def test_stats_count_every_demoted_pin_and_list_a_bounded_few(client: redis.Redis) -> None:
    hot, conv, _ = demoted_set(client, MANY_DEMOTIONS)
    got = hot.summaries([conv])[conv]
    assert got.demoted_count == MANY_DEMOTIONS
    assert 0 < len(got.demoted) <= SUMMARY_DEMOTED_LISTED and got.demoted == sorted(got.demoted)
    assert set(got.demoted) <= set(range(MANY_DEMOTIONS))
