"""The shared epoch state's JSON both ways (planner.epoch.state_json, state_from_json,
RedisEpochs), on a real redis-server and two Memory objects (two processes).

Writing: a state JSON cannot carry is this process's own, not a Redis failure. On the
code before (9ec5001) the JSON was built inside the Redis `try` as UTF-8: a lone
surrogate (older rows may hold one) or a message nested deeper than the encoder goes
counted as a failed write and left every conversation of the process unshared for
REDIS_RETRY_AFTER_S. Now the JSON is ASCII (a surrogate travels as an escape), and a
state it cannot carry stays in process, Redis holding a marker without text.

Reading: whatever Redis holds, the read never raises and a value that is not a state is a
missing one (a new epoch). On the code before `1e400` in an integer field raised
OverflowError through `Memory.context`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hot_fixtures import own_redis

from tiermem import Config, Memory
from tiermem.planner.epoch import EpochState, RedisEpochs, state_from_json, state_json
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("shared_vectors")

BUDGET = 3000
TOO_DEEP = 5000  # levels of nesting: past the JSON encoder's recursion limit (~1,000)
PLACEHOLDER = "CORRUPT-HERE"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    with own_redis(tmp_path / "redis") as srv:
        yield srv


@pytest.fixture
def two(tmp_path: Path, server: EmbeddedRedis, embedder: FastEmbedder) -> Iterator[tuple[Memory, Memory]]:
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url)
    with Memory(cfg, embedder=embedder, background_indexing=False) as a, \
            Memory(cfg, embedder=embedder, background_indexing=False) as b:
        for conv in ("c", "good"):
            a.append_many(conv, [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{conv} turn {i}"}
                                 for i in range(4)])
        yield a, b


def store_of(mem: Memory) -> RedisEpochs:
    store = mem.planner._epochs
    assert isinstance(store, RedisEpochs)
    return store


def planned(mem: Memory, conv: str) -> tuple[str, EpochState]:
    """`conv`'s key and the state of a context just planned on it."""
    mem.context(conv, "what was said?", BUDGET)
    key = mem.cold.key_of("default", conv)
    assert key is not None
    state = store_of(mem).get(key)
    assert state is not None
    return key, state


def with_message(state: EpochState, content: object) -> EpochState:
    seg = state.segments[-1]
    return dataclasses.replace(state, segments=(*state.segments[:-1], dataclasses.replace(
        seg, message={**seg.message, "content": content})), calls=state.calls + 1)


def nested(depth: int) -> object:
    value: object = "deep"
    for _ in range(depth):
        value = [value]
    return value


def test_a_lone_surrogate_round_trips_and_marks_nothing_down(
        two: tuple[Memory, Memory], server: EmbeddedRedis) -> None:
    a, b = two
    key, state = planned(a, "c")
    store = store_of(a)
    store.put(key, with_message(state, "an older row's text x\ud800 with a lone surrogate"))
    assert store.errors == 0
    # the other process reads it as written, surrogate included
    assert store_of(b).get(key) == store.local.get(key)
    good, _ = planned(a, "good")  # the next conversation's state is shared at once
    assert redis.Redis.from_url(server.url).exists(store.key(good))


def test_a_state_json_cannot_carry_stays_in_process_and_marks_nothing_down(
        two: tuple[Memory, Memory], server: EmbeddedRedis) -> None:
    a, b = two
    key, state = planned(a, "c")
    store = store_of(a)
    deep = with_message(state, nested(TOO_DEEP))
    store.put(key, deep)
    assert store.errors == 0 and store.withheld == 1
    probe = redis.Redis.from_url(server.url)
    held = probe.get(store.key(key))
    assert held is not None and b"turn" not in held  # a marker, without the text
    assert store.get(key) == store.local.get(key) and store.get(key) is not None  # this process keeps it
    found = store_of(b).lookup(key)
    assert found.state is None and "JSON cannot carry it" in found.why_none
    good, _ = planned(a, "good")
    assert probe.exists(store.key(good))


def _corrupted(state: EpochState, uuid: str, path: tuple[int, ...], token: str) -> str:
    """`state`'s JSON with the field at `path` (indices into its arrays) replaced by `token`."""
    d = json.loads(state_json(state, uuid))
    at = d
    for i in path[:-1]:
        at = at[i]
    at[path[-1]] = PLACEHOLDER
    return json.dumps(d).replace(json.dumps(PLACEHOLDER), token)


# (field path in the state's arrays, JSON text put there): every value must read as no state
CORRUPT = [
    pytest.param((2, 0), "1e400", id="budget-overflows-int"),  # OverflowError before
    pytest.param((3,), "1e400", id="epoch-overflows-int"),  # OverflowError before
    pytest.param((6,), "[1e999]", id="pinned-position-overflows-int"),  # the reviewer's, OverflowError before
    pytest.param((9,), "-1e400", id="read-position-negative-infinity"),  # OverflowError before
    pytest.param((10,), "NaN", id="latest-user-nan"),  # ValueError: read as none before too
    pytest.param((4,), '"seven"', id="calls-not-a-number"),  # ValueError: before too
    pytest.param((2,), "7", id="key-not-a-list"),  # TypeError: before too
    pytest.param((5,), '"abc"', id="segments-a-string"),  # ValueError: before too
    pytest.param((5,), "[[1]]", id="segment-too-short"),  # ValueError: before too
    pytest.param((5,), '[["tail",' + "[" * TOO_DEEP + "]" * TOO_DEEP + ",[]]]",
                 id="nested-past-the-decoder"),  # ValueError (loads_stored's bound): before too
]


@pytest.mark.parametrize(("path", "token"), CORRUPT)
def test_whatever_redis_holds_a_context_comes_from_a_new_epoch(
        two: tuple[Memory, Memory], server: EmbeddedRedis, path: tuple[int, ...], token: str) -> None:
    a, b = two
    key, state = planned(a, "c")
    raw = _corrupted(state, a.cold.db_uuid, path, token)
    assert state_from_json(raw, a.cold.db_uuid) is None
    redis.Redis.from_url(server.url).set(store_of(a).key(key), raw)
    ctx = b.context("c", "and now?", BUDGET)  # b keeps no copy of its own: Redis's is all it has
    assert ctx.plan.cache.new_epoch and ctx.messages


# the fields this layout added (the write time, the withheld marker), garbled the same way:
# (leading fields of a real state kept, the JSON texts that follow them)
NEW_FIELDS = [
    pytest.param(15, ["NaN"], id="written-at-nan"),  # a time no state was written at
    pytest.param(15, ["1e400"], id="written-at-infinite"),  # infinity: not finite
    pytest.param(15, ['"noon"'], id="written-at-text"),
    pytest.param(2, ['"withheld"', "1e400", "1.0"], id="marker-size-overflows-int"),
    pytest.param(2, ['"withheld"', "12", "Infinity"], id="marker-time-infinite"),
]


@pytest.mark.parametrize(("keep", "tail"), NEW_FIELDS)
def test_the_new_fields_garbled_read_as_no_state(two: tuple[Memory, Memory], keep: int, tail: list[str]) -> None:
    a, _b = two
    _key, state = planned(a, "c")
    uuid = a.cold.db_uuid
    fields = [json.dumps(v) for v in json.loads(state_json(state, uuid))]
    assert state_from_json("[" + ",".join([*fields[:keep], *tail]) + "]", uuid) is None
