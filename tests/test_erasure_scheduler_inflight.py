"""A scheduled refresh under way when its process drops an erased conversation's copies
keeps no erased text once it returns.

The consolidation scheduler's thread refreshes warm views outside any public call, so it
ran outside the in-flight guard (tiermem.memory `Memory._erasures_during`) that every
call filling a cache runs in: a refresh whose summarizer was answering (an LLM can take
minutes) when the conversation was erased, and the process dropped its copies (its own
erasure, or another thread's check of another process's erasure), counted the summary it
got after the drop: the token counter's memo kept the erased text, and the process's mark
had moved past the erasure, so nothing dropped it again. The summary itself is refused by
the store (`put_summary`, no row, no Redis cache entry): that part held before and is
asserted too. Now each view a scheduled run refreshes runs within the guard
(`ConsolidationScheduler`'s `guard`, which `Memory.make_scheduler` gives it), and each run
first drops what others erased (`check`), as `Memory.consolidate()`'s sweep does.

The real local LLM endpoint holds the erased conversation's request while the erasure
runs and then answers a summary quoting the erased text; a real SQLite file, two Memory
objects on it (two processes), the real model; with the hot tier on the real embedded
Redis (the warm views' cache), whose every key and value is searched for the canary. A
walk over every object reachable in this process (tests/erasure_child.py `held`) finds
the canary.

The six cases run one after another in one child process (this file run as a script),
once per module, as they ran in a test worker: a walk costs time in proportion to the
heap it searches, and a worker holds the whole suite's (~6-8 s a walk on a loaded
runner); a bare child with the model loaded walks in about a second. Each case runs its
checks there and its test asserts that its row of the child's report holds no failure.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import threading
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from erasure_child import held
from llm_endpoint import HOLD_S, LLMEndpoint, Reply, Request, completion

from tiermem import Config, Memory
from tiermem.tiers import memo
from tiermem.tiers.embed import Embedder
from tiermem.tiers.redis_server import EmbeddedRedis

ERASED_TURNS = 8  # more than the kept one: the most behind, refreshed first
KEPT_TURNS = 4
MAX_TURNS_BEHIND = 1  # every view of both conversations is over budget
MAX_VIEWS_PER_RUN = 10  # all of them in one run
TIMEOUT_S = 20.0  # the summarizer's; longer than the erasure takes
# the child's cases: a model load, six held requests and walks, minutes at most loaded
CHILD_S = 300.0


class HeldQuoting:
    """The endpoint's reply: holds the first request until `gate` is set (`asked` says it
    came), then answers a summary quoting the secret; later requests get a plain one. The
    secret is kept reversed, so that this object holds no copy of it for the walk."""

    def __init__(self, secret: str) -> None:
        self.reversed = secret[::-1]
        self.asked = threading.Event()
        self.gate = threading.Event()

    def __call__(self, req: Request) -> Reply:
        if not self.asked.is_set():
            self.asked.set()
            self.gate.wait(HOLD_S)
            return completion(f"The passport number is {self.reversed[::-1]}. [#0]")
        return completion("The user gave some details. [#0]")


class Pair:
    """The process whose scheduler runs (`mem`) and another one on the same store (`other`)."""

    def __init__(self, config: Config, embedder: Embedder, *, hot: bool) -> None:
        self.mem = Memory(config, embedder=embedder, hot=hot, background_indexing=False)
        self.other = Memory(config, embedder=embedder, hot=hot, background_indexing=False)

    def close(self) -> None:
        self.other.close()
        self.mem.close()


# the warm views' cache: none, or the hot tier on the embedded Redis
CACHES: list[tuple[str, bool]] = [("no-redis", False), ("redis-cache", True)]


def _in_thread(fn: Callable[[], object]) -> None:
    t = threading.Thread(target=fn)
    t.start()
    t.join()


# who drops this process's copies while the scheduled refresh waits on the summarizer
DROPPERS: list[tuple[str, Callable[[Pair], None]]] = [
    # another process erases; another thread of this one (the indexer's idle check, a
    # request) reads the erasure
    ("other-process-then-this-thread", lambda p: (p.other.delete_conversation("gone"),
                                                  _in_thread(p.mem._catch_erasures))),
    # a request thread of this process erases it itself
    ("this-process-erases", lambda p: _in_thread(lambda: p.mem.delete_conversation("gone"))),
]


def _turns(n: int, text: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"Line {i}: {text}"} for i in range(n)]


def _memos_with(needle: str) -> list[str]:
    """The remembered texts of every memo of caller text (tiers.memo) that hold `needle`:
    the walk (`held`) does not see them, as a dict whose keys are all str shows the
    garbage collector its values only."""
    return [f"{type(m).__name__} key of {len(repr(k))}" for m in list(memo._memos) for k in m if needle in repr(k)]


def _redis_with(config: Config, needle: bytes) -> list[bytes]:
    """Every Redis key whose name or value holds `needle`."""
    client = redis.Redis.from_url(EmbeddedRedis(config.data_dir).url)
    try:
        hits = []
        for key in client.scan_iter(count=1000):
            kind = client.type(key)
            value = {b"string": client.get, b"hash": client.hgetall, b"zset": lambda k: client.zrange(k, 0, -1),
                     b"set": client.smembers, b"list": lambda k: client.lrange(k, 0, -1)}.get(kind, lambda k: None)(key)
            if needle in key or needle in repr(value).encode():
                hits.append(key)
        return hits
    finally:
        client.close()


def _refreshed_under_way(pair: Pair, reply: HeldQuoting, endpoint: LLMEndpoint, canary: str, *,
                         drop: Callable[[Pair], None]) -> None:
    """`drop` erases while the scheduled refresh waits on the summarizer."""
    mem = pair.mem
    mem.append_many("gone", _turns(ERASED_TURNS, f"my passport number is {canary}."))
    mem.append_many("kept", _turns(KEPT_TURNS, "we booked the hotel in Lisbon for three nights."))
    gone, kept = mem._key("gone", None)[2], mem._key("kept", None)[2]
    sched = mem.make_scheduler()  # as start_scheduler builds it; the test runs the one run itself
    refreshed: list[int] = []
    run = threading.Thread(target=lambda: refreshed.append(sched.run_once()))
    run.start()
    try:
        assert reply.asked.wait(TIMEOUT_S)  # the erased conversation's rolling view is in flight
        # the premise: the held request is the erased conversation's (then no copy kept)
        assert canary in endpoint.requests[0].prompt
        endpoint.requests.clear()
        drop(pair)
        assert mem.cold.key_of("default", "gone") is None
    finally:
        reply.gate.set()
        run.join(HOLD_S)
    assert not run.is_alive()
    # the run went on with the kept conversation, and counted no error
    assert refreshed and refreshed[0] >= 1 and sched.stats.errors == 0
    assert mem.warm.latest(kept, "rolling") is not None
    # no summary row of the erased conversation (the store refused it), none cached
    assert mem.warm.latest(gone, "rolling") is None
    if mem.hot is not None:
        assert _redis_with(mem.config, canary.encode()) == []
    assert _memos_with(canary) == []
    found = held(canary)
    assert found == [], found


def _run_after_erasure(pair: Pair, reply: HeldQuoting, endpoint: LLMEndpoint, canary: str) -> None:
    """Another process erases and no thread of this one reads it while the refresh runs:
    the refresh's memo keeps the text until this process's next check, which the
    scheduler's next run is (as an idle indexer's wake would be)."""
    mem = pair.mem
    mem.append_many("gone", _turns(ERASED_TURNS, f"my passport number is {canary}."))
    sched = mem.make_scheduler()
    run = threading.Thread(target=sched.run_once)
    run.start()
    try:
        assert reply.asked.wait(TIMEOUT_S)
        endpoint.requests.clear()  # (the walk would find the request's copy)
        pair.other.delete_conversation("gone")
    finally:
        reply.gate.set()
        run.join(HOLD_S)
    assert not run.is_alive()
    # the premise: the refresh counted the summary after the erasure, and this process
    # has not read the erasure yet
    assert _memos_with(canary) != []
    sched.run_once()  # nothing over budget is left; the run checks the erasures first
    assert _memos_with(canary) == []
    found = held(canary)
    assert found == [], found


def _case(root: Path, embedder: Embedder, hot: bool,
          body: Callable[[Pair, HeldQuoting, LLMEndpoint, str], None]) -> None:
    """In the child: one case on a fresh store and endpoint, checked before they close."""
    canary = f"zq7canary{uuid.uuid4().hex}medlar"
    reply = HeldQuoting(canary)
    endpoint = LLMEndpoint(reply)
    try:
        config = Config(data_dir=root / "data", summarizer="llm", llm_base_url=endpoint.url, llm_model="m",
                        llm_api_key_env="", llm_timeout_s=TIMEOUT_S, warm_max_turns_behind=MAX_TURNS_BEHIND,
                        scheduler_max_views_per_run=MAX_VIEWS_PER_RUN)
        pair = Pair(config, embedder, hot=hot)
        try:
            body(pair, reply, endpoint, canary)
        finally:
            pair.close()
            if hot:
                EmbeddedRedis(config.data_dir).stop()
    finally:
        endpoint.close()


# the child's cases past the droppers': another process erases, nobody reads it
FIRST = "first"


def _row(cache: str, case: str) -> str:
    return f"{cache}/{case}"


def _run_each(root: Path) -> dict[str, str]:
    """Each case's failure ("" where it passed)."""
    from tiermem.tiers.embed_onnx import build_embedder

    embedder = build_embedder()
    embedder.query_session = "never"  # as the suite's session embedder (conftest)
    embedder.embed(["warm-up"])  # loaded: as the suite's session embedder
    bodies = [(who, functools.partial(_refreshed_under_way, drop=drop)) for who, drop in DROPPERS] + [(FIRST, _run_after_erasure)]
    report: dict[str, str] = {}
    n = 0
    for cache, hot in CACHES:
        for case, body in bodies:
            n += 1
            try:
                _case(root / str(n), embedder, hot, body)
                report[_row(cache, case)] = ""
            except Exception:  # reported as the case's failure, the rest still run
                report[_row(cache, case)] = traceback.format_exc()
    return report


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("scheduler-inflight")
    done = subprocess.run([sys.executable, __file__, str(root)], capture_output=True, text=True, timeout=CHILD_S)
    assert done.returncode == 0, done.stderr
    got: dict[str, str] = json.loads(done.stdout.splitlines()[-1])
    return got


@pytest.mark.parametrize("who", [d[0] for d in DROPPERS])
@pytest.mark.parametrize("cache", [c[0] for c in CACHES])
def test_a_scheduled_refresh_under_way_keeps_no_erased_text_once_it_returns(
        report: dict[str, str], cache: str, who: str) -> None:
    failure = report[_row(cache, who)]
    assert failure == "", failure


@pytest.mark.parametrize("cache", [c[0] for c in CACHES])
def test_a_scheduled_run_drops_what_another_process_erased_first(report: dict[str, str], cache: str) -> None:
    """Another process erases and no thread of this one reads it while the refresh runs:
    the refresh's memo keeps the text until this process's next check, which the
    scheduler's next run is (as an idle indexer's wake would be)."""
    failure = report[_row(cache, FIRST)]
    assert failure == "", failure


if __name__ == "__main__":
    print(json.dumps(_run_each(Path(sys.argv[1]))))
