"""A context call that comes longer after the conversation's previous one than a provider
keeps a prompt cache (`cache_ttl_s`, by the created_at of the newest log message each call
read) starts a new epoch, saying so in `plan.cache`: extending the old context would be all
misses anyway, and a new epoch is smaller and fresher. A gap within the TTL (or equal to
it), or the setting off (0), extends the epoch as before. With a hot tier the previous
call's time travels in the shared state: another process (a second Memory on the same
Redis) decides by it too.

On the code before there was no such setting (Config refused `cache_ttl_s`) and every
gap extended the epoch."""

from __future__ import annotations

import calendar
from collections.abc import Iterator
from pathlib import Path

import pytest
from hot_fixtures import own_redis
from pydantic import ValidationError

from tiermem import Config, Memory
from tiermem.config import DEFAULT_CACHE_TTL_S, MAX_CACHE_TTL_S
from tiermem.evals.cost import TTL_EXPIRE, TTL_INSIDE, planner_ttl
from tiermem.planner import build
from tiermem.planner.plan import Context
from tiermem.tiers.embed import Embedder
from tiermem.tiers.redis_server import EmbeddedRedis

pytestmark = pytest.mark.usefixtures("shared_vectors")

BUDGET = 2000  # tokens: room to extend an epoch by one exchange
HOUR_S = 3600.0
DAY_S = 86_400.0
START = float(calendar.timegm((2026, 12, 4, 10, 0, 0)))  # the first turn's created_at
TURNS = 6  # turns before the first call, one second apart


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    with own_redis(tmp_path / "redis") as srv:
        yield srv


def _history(mem: Memory) -> float:
    """A short conversation ending in a user message; returns the newest turn's time."""
    mem.append_many("c", [{"role": "user" if i % 2 == 0 else "assistant",
                           "content": f"turn {i}: the night train to Vienna leaves from platform {i + 3}",
                           "created_at": START + i} for i in range(TURNS)])
    mem.append("c", {"role": "user", "content": "Which platform was the train?", "created_at": START + TURNS})
    return START + TURNS


def _next_turn(mem: Memory, last: float, gap_s: float) -> None:
    """The assistant's reply a second after `last`, then a new user message `gap_s` after `last`."""
    mem.append("c", {"role": "assistant", "content": "Platform 5, I think.", "created_at": last + 1})
    mem.append("c", {"role": "user", "content": "And when does it leave?", "created_at": last + gap_s})


def _expired(gap_s: float, ttl_s: float) -> str:
    return (f"the provider's cache has expired ({gap_s:,.0f} s since the previous call > "
            f"cache_ttl_s = {ttl_s:,.0f} s)")


# (config's cache_ttl_s (None: the default), seconds from the first call's newest turn to
# the second call's, the second call's epoch reason when it starts a new one ("" extends))
CASES = [
    # a minute later: the cache is warm, the epoch goes on
    pytest.param(None, 60.0, "", id="default-a-minute"),
    # exactly the TTL: still cached (a provider keeps it that long), the epoch goes on
    pytest.param(None, HOUR_S, "", id="default-gap-equal-to-ttl"),
    # a second past an hour: every token would be a miss, a new epoch says why
    pytest.param(None, HOUR_S + 1, _expired(HOUR_S + 1, DEFAULT_CACHE_TTL_S), id="default-gap-over-ttl"),
    # the next day (a LoCoMo session boundary): a new epoch
    pytest.param(None, DAY_S, _expired(DAY_S, DEFAULT_CACHE_TTL_S), id="default-next-day"),
    # Anthropic's 5 minutes configured: 400 s is past it
    pytest.param(300.0, 400.0, _expired(400.0, 300.0), id="five-minutes-gap-400s"),
    # ... and 200 s is not
    pytest.param(300.0, 200.0, "", id="five-minutes-gap-200s"),
    # 0: never assume expiry, a week's gap extends the epoch as before the setting
    pytest.param(0.0, 7 * DAY_S, "", id="off-a-week"),
]


def _check(first: Context, second: Context, reason: str) -> None:
    a, b = first.plan.cache, second.plan.cache
    assert b.new_epoch is bool(reason), b.reason
    if reason:
        assert b.reason == reason
        assert (b.epoch, b.epoch_calls) == (a.epoch + 1, 1)
    else:
        assert b.epoch == a.epoch and "expired" not in b.reason
        # extended: the previous context is kept byte for byte
        assert second.messages[:len(first.messages) - 1] == first.messages[:-1]


@pytest.mark.parametrize(("ttl_s", "gap_s", "reason"), CASES)
def test_a_gap_past_the_cache_ttl_starts_a_new_epoch(tmp_path: Path, embedder: Embedder, ttl_s: float | None,
                                                     gap_s: float, reason: str) -> None:
    cfg = Config(data_dir=tmp_path / "data", **({} if ttl_s is None else {"cache_ttl_s": ttl_s}))
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        last = _history(mem)
        first = mem.context("c", "Which platform was the train?", budget=BUDGET)
        assert first.plan.cache.new_epoch  # the conversation's first call
        _next_turn(mem, last, gap_s)
        second = mem.context("c", "And when does it leave?", budget=BUDGET)
        _check(first, second, reason)


@pytest.mark.parametrize(("ttl_s", "gap_s", "reason"), [CASES[1], CASES[2], CASES[6]])
def test_another_process_decides_by_the_shared_state_time(tmp_path: Path, embedder: Embedder,
                                                          server: EmbeddedRedis, ttl_s: float | None,
                                                          gap_s: float, reason: str) -> None:
    """The first call in one process, the second in another on the same Redis: the second
    has no copy of its own, so only the shared state's time can tell it the gap."""
    cfg = Config(data_dir=tmp_path / "data", redis_url=server.url,
                 **({} if ttl_s is None else {"cache_ttl_s": ttl_s}))
    with Memory(cfg, embedder=embedder, background_indexing=False) as a, \
            Memory(cfg, embedder=embedder, background_indexing=False) as b:
        last = _history(a)
        first = a.context("c", "Which platform was the train?", budget=BUDGET)
        _next_turn(a, last, gap_s)
        second = b.context("c", "And when does it leave?", budget=BUDGET)
        _check(first, second, reason)


def test_the_config_and_the_planner_default_agree() -> None:
    # tiermem.config does not import the planner (numpy): the two constants are kept equal here
    assert DEFAULT_CACHE_TTL_S == build.DEFAULT_CACHE_TTL_S == HOUR_S
    assert Config().cache_ttl_s == DEFAULT_CACHE_TTL_S


# (value given, in a section or flat): refused with the field named, or the value read
@pytest.mark.parametrize(("given", "error"), [
    ({"cache_ttl_s": -1}, "greater than or equal to 0"),  # a negative lifetime
    ({"cache_ttl_s": MAX_CACHE_TTL_S + 1}, "less than or equal to"),  # past a week: no provider keeps it
    ({"cache_ttl_s": float("inf")}, "cache_ttl_s"),  # not finite
    ({"cache_ttl_s": "an hour"}, "cache_ttl_s"),  # not a number
])
def test_a_bad_cache_ttl_is_refused_naming_the_field(given: dict[str, object], error: str) -> None:
    with pytest.raises(ValidationError) as info:
        Config(**given)  # type: ignore[arg-type]
    assert "cache_ttl_s" in str(info.value) and error in str(info.value)


def test_the_planner_section_sets_it(tmp_path: Path) -> None:
    path = tmp_path / "tiermem.toml"
    path.write_text("[planner]\ncache_ttl_s = 300\n", encoding="utf-8")
    assert Config.load(path).cache_ttl_s == 300.0


@pytest.mark.parametrize(("ttl", "during"), [
    (TTL_INSIDE, None),  # every build inside the TTL: the planner assumes no expiry either
    (TTL_EXPIRE, 300.0),  # caches expire: the config's lifetime stays
])
def test_the_inside_replay_turns_the_planner_ttl_off(tmp_path: Path, embedder: Embedder, ttl: str,
                                                     during: float | None) -> None:
    cfg = Config(data_dir=tmp_path / "data", cache_ttl_s=300.0)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        with planner_ttl([mem], ttl):
            assert mem.planner.settings.cache_ttl_s == during
        assert mem.planner.settings.cache_ttl_s == 300.0  # restored after the replay


# The epoch clock never goes backwards: a message stamped by another clock (a client's, an
# import's) costs at most one new epoch, never one per step. Each step is the messages
# appended, then one context call, STEP_S of server time after the previous step; a message
# is (role, its created_at minus the server's time then).
STEP_S = 10.0  # seconds of server time between calls: all well inside the TTL
SKEW_S = 2 * HOUR_S  # a client clock two hours off (local time read as UTC)
FAR_FUTURE = float(calendar.timegm((2100, 1, 1, 0, 0, 0)))
Step = list[tuple[str, float]]


def _tool_loop(user_skew_s: float, turns: int) -> list[Step]:
    """`turns` user messages stamped `user_skew_s` off the server, each followed by a call
    and then a tool round trip (assistant and tool result, stamped by the server) and a call."""
    return [step for _ in range(turns) for step in ([("user", user_skew_s)], [("assistant", 0.0), ("tool", 0.0)])]


SERVER = [("assistant", 0.0), ("user", 0.0)]  # a normal exchange, both stamped by the server
# (steps after the history, new epochs after the conversation's first call)
SKEW_CASES = [
    # user messages 2 h ahead, tool results by the server: the first step ahead is a gap
    # past the TTL (one new epoch), then the clock stays ahead (before: a restart every turn)
    pytest.param(_tool_loop(SKEW_S, 4), 1, id="client-ahead"),
    # user messages 2 h behind: behind the clock, assumed warm; the server's next stamp is
    # no gap (before: every tool result restarted the epoch)
    pytest.param(_tool_loop(-SKEW_S, 4), 0, id="client-behind"),
    # one message imported with yesterday's stamp, then live traffic (before: the next
    # live call restarted)
    pytest.param([[("user", 0.0)], [("user", -DAY_S)], SERVER, SERVER], 0, id="one-backdated-import"),
    # one far-future stamp (a typo, milliseconds): one new epoch, none after it
    pytest.param([[("user", 0.0)], [("user", FAR_FUTURE - START)], SERVER, SERVER], 1, id="far-future-stamp"),
    # the clock behind, then a real two-hour pause: still one new epoch for the real gap
    pytest.param([[("user", -SKEW_S)], SERVER, [("assistant", 0.0), ("user", SKEW_S)], SERVER], 1,
                 id="behind-then-a-real-gap"),
]


@pytest.mark.parametrize(("steps", "new_epochs"), SKEW_CASES)
def test_a_clock_stamped_off_the_server_restarts_at_most_once(tmp_path: Path, embedder: Embedder,
                                                              steps: list[Step], new_epochs: int) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        server = _history(mem)
        first = mem.context("c", "Which platform was the train?", budget=BUDGET)
        reasons: list[str] = []
        for i, step in enumerate(steps):
            server += STEP_S
            for j, (role, skew_s) in enumerate(step):
                msg: dict[str, object] = {"role": role, "content": f"step {i}: {role} {j} on the night train",
                                          "created_at": server + skew_s}
                if role == "tool":
                    msg["tool_call_id"] = f"call_{i}"
                mem.append("c", msg)
            cache = mem.context("c", f"step {i}: which platform?", budget=BUDGET).plan.cache
            if cache.new_epoch:
                reasons.append(cache.reason)
        # every restart is the TTL's, and there are no more than the table says
        assert len(reasons) == new_epochs and all("cache has expired" in r for r in reasons), reasons
        assert cache.epoch == first.plan.cache.epoch + new_epochs
