"""A read of a hot set (every `context()` reads its conversation's set) does not grow with
the demoted-pin hash `T:d`. That hash keeps every pin ever pushed out of the hot set
(until it is unpinned or comes back), so it grows with the conversation, not with the
budget; READ_LUA HGETALLed it on every read and sent it whole (a scale review: 19,841
entries, 280,795 reply bytes and 33 ms of Redis per read at 40,000 turns, half of them
pinned). Measured here on a real redis-server, not as time: the commands the script sends
to `T:d` (MONITOR) and the bytes Redis sends back for a read (INFO stats
`total_net_output_bytes`). The read's invariants hold: one snapshot, and a set whose
demoted hash was lost (maxmemory evicts single keys) is no set."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis
from hot_fixtures import own_redis

from tiermem.tiers.hot import SUMMARY_DEMOTED_LISTED, HotTier, HotTurn, make_client

GEN = "gen-1"
BUDGET_TOKENS = 100
PIN_TOKENS = 40  # three pins pass the budget: from the third pinned turn on, each admit demotes one
LISTED = SUMMARY_DEMOTED_LISTED  # a read lists the demoted positions up to this many (as stats do)
FEW_DEMOTIONS = 5  # listed whole
PAST_LISTED = LISTED + 10  # just past the listing
MANY_DEMOTIONS = 300  # past Redis's small-hash (ziplist) size too
# what a read may send to `T:d`: its size, its TTL, and its names while they are listed
READ_D_COMMANDS = {"hlen", "pexpire"}
LISTING_COMMAND = "hkeys"
# Reply bytes that may differ between two reads of sets that differ only in how many pins
# were demoted: the digits of the meta's figures (last, total, evictions, tokens, counts)
# and of the two members' positions and texts
REPLY_SLACK_BYTES = 120
SENTINEL = "tiermem-test-monitor-end"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[redis.Redis]:
    with own_redis(tmp_path_factory.mktemp("hot-read-demoted")) as srv:
        c = make_client(srv.url)
        assert isinstance(c, redis.Redis)
        yield c
        c.close()


def tier(client: redis.Redis) -> HotTier:
    # an idle TTL, so that the read renews the keys' TTL as it does in production
    return HotTier(client, budget_tokens=BUDGET_TOKENS, head_protect=1, tail_protect=1, eviction_bias=0.25,
                   idle_ttl_s=600.0)


def demoted_set(client: redis.Redis, demotions: int) -> tuple[HotTier, str, str]:
    """A conversation of pinned turns (equal priorities: the oldest pin goes first) with
    `demotions` pins demoted; its demoted hash key."""
    hot, conv = tier(client), f"c-{uuid.uuid4().hex}"
    hot.admit_many(conv, [HotTurn(p, PIN_TOKENS, True, 50, f"turn {p}") for p in range(demotions + 2)],
                   generation=GEN)
    d_key = hot.keys(conv)[5]
    assert client.hlen(d_key) == demotions  # the premise
    return hot, conv, d_key


def script_commands(client: redis.Redis, action: Callable[[], object]) -> list[list[str]]:
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


def reply_bytes(client: redis.Redis, action: Callable[[], object]) -> int:
    """The bytes Redis sent while `action` ran (with one INFO reply, the same each time)."""
    before = int(client.info("stats")["total_net_output_bytes"])
    action()
    return int(client.info("stats")["total_net_output_bytes"]) - before


@pytest.mark.parametrize("demotions", [
    FEW_DEMOTIONS,  # a short conversation: its few demoted positions are listed
    PAST_LISTED,  # just past the listing: counted, not listed
    MANY_DEMOTIONS,  # a long one: the same work as just past the listing
])
def test_a_read_never_reads_the_demoted_hash_whole(client: redis.Redis, demotions: int) -> None:
    hot, conv, d_key = demoted_set(client, demotions)
    cmds = [c for c in script_commands(client, lambda: hot.read(conv)) if len(c) > 1 and c[1] == d_key]
    names = [c[0].lower() for c in cmds]
    allowed = READ_D_COMMANDS | ({LISTING_COMMAND} if demotions <= LISTED else set())
    assert set(names) <= allowed, cmds
    assert "hlen" in names, cmds  # its size is what tells a lost hash (below)


def read_bytes(client: redis.Redis, demotions: int) -> int:
    """The bytes Redis sends for a read of a set with `demotions` demoted pins."""
    hot, conv, _ = demoted_set(client, demotions)
    hot.read(conv)  # the script is loaded: the measured read sends it no second time
    return reply_bytes(client, lambda: hot.read(conv))


def test_a_read_sends_as_many_bytes_after_300_demotions_as_after_30(client: redis.Redis) -> None:
    sizes = {demotions: read_bytes(client, demotions) for demotions in (PAST_LISTED, MANY_DEMOTIONS)}
    assert abs(sizes[MANY_DEMOTIONS] - sizes[PAST_LISTED]) <= REPLY_SLACK_BYTES, sizes


@pytest.mark.parametrize("demotions", [
    0,  # nothing demoted
    FEW_DEMOTIONS,  # listed whole, ascending
    LISTED,  # the most a read lists
    LISTED + 1,  # one past: counted only
    MANY_DEMOTIONS,  # counted only
])
def test_a_read_counts_every_demoted_pin_and_lists_them_while_few(client: redis.Redis, demotions: int) -> None:
    hot, conv, _ = demoted_set(client, demotions)
    got = hot.read(conv)
    assert got is not None
    # the oldest pins went first: positions 0 .. demotions - 1
    assert (got.demoted_count, got.demoted_tokens) == (demotions, PIN_TOKENS * demotions)
    assert got.demoted == (list(range(demotions)) if demotions <= LISTED else [])
    # every one, on purpose (a whole read of the hash, for checks and tools)
    assert hot.demoted_pins(conv) == {p: PIN_TOKENS for p in range(demotions)}


@pytest.mark.parametrize("stamped", [
    True,  # the meta's counts hold: the hash's size against them tells
    False,  # written before the counts: its tokens are summed, as before
])
def test_a_set_that_lost_its_demoted_hash_is_no_set(client: redis.Redis, stamped: bool) -> None:
    hot, conv, d_key = demoted_set(client, MANY_DEMOTIONS)
    meta_key = hot.keys(conv)[0]
    if not stamped:
        client.hdel(meta_key, "counted")
        assert hot.read(conv) is not None  # the premise: whole without the stamp
    client.delete(d_key)  # maxmemory evicts single keys
    assert hot.read(conv) is None


@pytest.mark.parametrize("tokens_delta", [
    0,  # the tokens agree with the hash: a whole set
    1,  # a figure an older writer left wrong: no set (rebuilt from the log)
])
def test_a_set_without_the_count_stamp_has_its_demoted_tokens_checked(client: redis.Redis,
                                                                      tokens_delta: int) -> None:
    hot, conv, _ = demoted_set(client, FEW_DEMOTIONS)
    meta_key = hot.keys(conv)[0]
    client.hdel(meta_key, "counted")
    client.hset(meta_key, "demoted_tokens", PIN_TOKENS * FEW_DEMOTIONS + tokens_delta)
    got = hot.read(conv)
    assert (got is not None) == (tokens_delta == 0)
    assert got is None or got.demoted_count == FEW_DEMOTIONS
