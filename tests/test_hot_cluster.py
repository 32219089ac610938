"""The hot-tier suite on both deployments: the embedded standalone server and a real local
3-master Redis Cluster started from the same binary."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hot_fixtures import LocalCluster, kill_hard, replay, start_local_cluster
from redis.cluster import RedisCluster

from tiermem.tiers.hot import HotStale, HotTier, HotTurn, HotTurnNotResident, RedisClient, make_client
from tiermem.tiers.redis_server import EmbeddedRedis

GEN = "g"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_local_cluster(tmp_path_factory.mktemp("cluster"))
    yield c
    c.stop()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    srv = EmbeddedRedis(tmp_path_factory.mktemp("standalone"))
    srv.ensure()
    yield srv
    pid = srv.pid
    srv.stop()
    if pid is not None:
        kill_hard(pid)


@pytest.fixture(scope="module", params=["standalone", "cluster"])
def client(request: pytest.FixtureRequest) -> Iterator[RedisClient]:
    if request.param == "cluster":
        url = request.getfixturevalue("cluster").url
    else:
        url = request.getfixturevalue("standalone").url
    c = make_client(url)
    assert isinstance(c, RedisCluster) == (request.param == "cluster")
    yield c
    c.close()


def tier(client: RedisClient, budget: int = 120, head: int = 1, tail: int = 2, bias: float = 0.25) -> HotTier:
    return HotTier(client, budget_tokens=budget, head_protect=head, tail_protect=tail, eviction_bias=bias)


def turns(n: int, pin_every: int = 0) -> list[HotTurn]:
    out = []
    for i in range(n):
        pinned = bool(pin_every) and i % pin_every == pin_every - 1
        out.append(HotTurn(i, 7 + (i * 13) % 23, pinned, i % 4 if pinned else 0, f"message {i}"))
    return out


def test_admit_read_evict(client: RedisClient) -> None:
    hot = tier(client)
    conv = f"admit-{uuid.uuid4().hex}"
    ts = turns(60, pin_every=9)
    ref = replay(ts, 120, 1, 2, 0.25)
    live = replay([], 120, 1, 2, 0.25)
    for t in ts:
        res = hot.admit(conv, t, generation=GEN)
        assert (res.evicted, res.demoted) == live.admit(t)
    s = hot.read(conv)
    assert s is not None
    assert s.turns == ref.hot() and s.evictions == ref.evictions and s.demoted == sorted(ref.demoted)
    assert s.total_tokens == ref.total and s.last_position == 59 and s.generation == GEN
    assert hot.generation(conv) == GEN


def test_admit_many_pin_unpin(client: RedisClient) -> None:
    hot = tier(client, budget=60, head=0, tail=1, bias=1.0)
    conv = f"pin-{uuid.uuid4().hex}"
    ts = [HotTurn(i, 10, False, 0, f"m{i}") for i in range(8)]
    res = hot.admit_many(conv, ts, generation=GEN)
    assert res.evicted == [0, 1] and res.total_tokens == 60
    hot.pin(conv, 2, 3, generation=GEN)
    assert hot.admit(conv, HotTurn(8, 10, False, 0, "m8"), generation=GEN).evicted == [3]
    with pytest.raises(HotTurnNotResident):
        hot.pin(conv, 0, 1, generation=GEN)
    assert hot.pin(conv, 0, 1, generation=GEN, turn=ts[0]).evicted == [4]
    assert hot.unpin(conv, 2, generation=GEN).evicted == []
    assert hot.admit(conv, HotTurn(9, 10, False, 0, "m9"), generation=GEN).evicted == [2]
    s = hot.read(conv)
    assert s is not None
    assert [(t.position, t.pinned) for t in s.turns] == [
        (0, True),
        (5, False),
        (6, False),
        (7, False),
        (8, False),
        (9, False),
    ]


def test_rebuild_and_stale(client: RedisClient) -> None:
    hot = tier(client, budget=200, head=2, tail=3)
    conv = f"rebuild-{uuid.uuid4().hex}"
    ts = turns(2500, pin_every=50)  # more than one replay chunk
    hot.admit_many(conv, ts, generation=GEN)
    live = hot.read(conv)
    assert live is not None
    hot.drop(conv)
    assert hot.read(conv) is None and hot.generation(conv) is None
    with pytest.raises(HotStale):
        hot.admit(conv, HotTurn(2500, 1, False, 0, "x"), generation=GEN)
    assert hot.rebuild(conv, ts, generation=GEN) == live
    with pytest.raises(HotStale):
        hot.admit(conv, HotTurn(2500, 1, False, 0, "x"), generation="other")


def test_keys_share_one_slot_and_spread_over_masters(
    client: RedisClient, request: pytest.FixtureRequest
) -> None:
    hot = tier(client)
    convs = [f"spread-{{{i}}}-{uuid.uuid4().hex}" for i in range(30)]
    for conv in convs:
        hot.admit(conv, HotTurn(0, 5, False, 0, conv), generation=GEN)
        hot.pin(conv, 0, 1, generation=GEN)
        s = hot.read(conv)
        assert s is not None and s.turns[0].payload == conv
    if not isinstance(client, RedisCluster):
        return
    cluster: LocalCluster = request.getfixturevalue("cluster")
    slots_per_conv = [{client.keyslot(k) for k in hot.keys(c)} for c in convs]
    assert all(len(s) == 1 for s in slots_per_conv)
    # Conversations land on every master, so the scripts really ran on all three.
    holders = [n for n in cluster.nodes if any(True for _ in n.scan_iter(match="{tm:spread-*", count=1000))]
    assert len(holders) == 3


def test_summaries_read_sets_on_every_master(client: RedisClient) -> None:
    # one pipeline spans every slot: the cluster client routes each set's reads
    hot = tier(client)
    convs = [f"count-{{{i}}}-{uuid.uuid4().hex}" for i in range(30)]
    for i, conv in enumerate(convs):
        hot.admit_many(conv, turns(3 + i % 5, pin_every=2), generation=GEN)
    got = hot.summaries([*convs, "count-never-written"])
    assert list(got) == convs
    for conv in convs:
        whole = hot.read(conv)
        assert whole is not None
        s = got[conv]
        assert (s.members, s.pins, s.total_tokens, s.evictions) == (
            len(whole.turns), sum(t.pinned for t in whole.turns), whole.total_tokens, whole.evictions)


def test_scripts_reload_after_script_flush(client: RedisClient, request: pytest.FixtureRequest) -> None:
    hot = tier(client)
    conv = f"noscript-{uuid.uuid4().hex}"
    hot.admit(conv, HotTurn(0, 5, False, 0, "a"), generation=GEN)
    if isinstance(client, RedisCluster):
        for node in request.getfixturevalue("cluster").nodes:
            node.script_flush()
    else:
        client.script_flush()
    hot.admit(conv, HotTurn(1, 5, False, 0, "b"), generation=GEN)  # NOSCRIPT -> EVAL / reload
    s = hot.read(conv)
    assert s is not None and [t.payload for t in s.turns] == ["a", "b"]
    assert hot.ping()


def test_cluster_url_forms(cluster: LocalCluster) -> None:
    port = cluster.ports[1]
    for url in (f"redis+cluster://127.0.0.1:{port}", f"redis://127.0.0.1:{port}/0?cluster=1"):
        c = make_client(url)
        try:
            assert isinstance(c, RedisCluster) and c.ping()
        finally:
            c.close()
    plain = make_client(f"redis://127.0.0.1:{port}")
    try:
        assert isinstance(plain, redis.Redis)
    finally:
        plain.close()


def test_local_cluster_is_torn_down(tmp_path: Path) -> None:
    # The helper's own teardown: every node process is gone after stop().
    c = start_local_cluster(tmp_path / "c")
    procs = list(c.procs)
    c.stop()
    assert all(p.poll() is not None for p in procs)
