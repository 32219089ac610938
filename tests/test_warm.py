"""Warm tier: versioned summary views in SQLite (and their Redis cache), and the view
maintainer that computes them (rolling + fold, constraint extract, session views)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis

from tiermem.consolidation.summarize import ExtractiveSummarizer, SourceTurn
from tiermem.consolidation.views import ViewMaintainer
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.errors import SummarizerError, ValidationError
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import (
    ERRORS_KEPT_PER_VIEW,
    Sentence,
    SummaryView,
    WarmStore,
    escape_id,
    render,
    staleness,
)

DATA = Path(__file__).resolve().parent.parent / "evals" / "data" / "intent_labels.jsonl"
T0 = 1_800_000_000.0


def msg(role: str, text: str, *, session: str | None = None, at: float | None = None) -> Message:
    extra: dict[str, Any] = {"tool_call_id": "call_1"} if role == "tool" else {}
    return Message(role=role, content=text, session_id=session, created_at=at, **extra)  # type: ignore[arg-type]


def load_labeled(
    cold: ColdStore, conv: str, n: int, *, sessions: int = 1, at: float = T0, label: bool = True
) -> list[dict[str, Any]]:
    """Append the first n turns of the labeled set (split into `sessions` sessions) and
    write their labels, as the lead's append path does."""
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()][:n]
    per = max(1, -(-n // sessions))
    cold.append_many(
        conv, [msg(r["role"], r["text"], session=f"s{i // per}", at=at + i) for i, r in enumerate(rows)]
    )
    if label:
        cold.set_labels(
            conv,
            [
                (i, r["intent"], bool(r["load_bearing"]), 5 if r["load_bearing"] else 0, "test")
                for i, r in enumerate(rows)
            ],
        )
    return rows


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def warm(cold: ColdStore) -> WarmStore:
    return WarmStore(cold)


def maintainer(
    cold: ColdStore,
    warm: WarmStore,
    counter: BpeTokenCounter,
    *,
    clock: Clock | None = None,
    summarizer: Any = None,
    **kw: Any,
) -> ViewMaintainer:
    kw.setdefault("target_tokens", 120)
    kw.setdefault("max_turns_behind", 10)
    kw.setdefault("max_seconds_behind", 300.0)
    return ViewMaintainer(
        cold,
        warm,
        summarizer or ExtractiveSummarizer(counter, cold.embedder),
        counter,
        clock=clock or Clock(T0 + 10_000),
        **kw,
    )


def assert_provenance(cold: ColdStore, view: SummaryView, *, extractive: bool = True) -> None:
    """Every position exists in the log and (extractive) its turn's text contains the sentence."""
    last = cold.last_position(view.conversation_id)
    texts = {m.position: m.text for m in cold.history(view.conversation_id)}
    for s in view.sentences:
        assert s.positions, s
        for p in s.positions:
            assert 0 <= p <= last and p in texts
            assert view.start_position <= p <= view.end_position
        if extractive:
            assert any(s.text in texts[p] for p in s.positions), (s, [texts[p] for p in s.positions])


def raw_rows(cold: ColdStore, conv: str) -> list[tuple[Any, ...]]:
    return [
        tuple(r) for r in cold._read("SELECT * FROM summaries WHERE conversation_id = ? ORDER BY id", (conv,))
    ]


# ---------------------------------------------------------------------------------------
# storage


def test_schema_and_prune_clears_views(cold: ColdStore, warm: WarmStore) -> None:
    tables = {r[0] for r in cold._read("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")}
    assert {"summaries", "summary_errors", "turns_load_bearing"} <= tables
    cold.append("c", msg("user", "hello world", at=1.0))
    warm.put(SummaryView("c", "rolling", "", 0, 0, 0, (Sentence("hello world", (0,)),), 0, "x", 1.0))
    warm.record_error("c", "rolling", "", "boom")
    report = cold.prune(older_than=2.0, all_namespaces=True)
    assert report.conversations == 1
    assert cold._read("SELECT COUNT(*) FROM summaries")[0][0] == 0
    assert cold._read("SELECT COUNT(*) FROM summary_errors")[0][0] == 0


def test_put_adds_versions_and_never_rewrites(
    cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter
) -> None:
    cold.append_many("c", [msg("user", f"fact number {i}.") for i in range(5)])
    v1 = warm.put(
        SummaryView("c", "rolling", "", 99, 0, 2, (Sentence("fact number 1.", (1,)),), 999, "x", 1.0)
    )
    assert v1.version == 1 and v1.tokens == counter.count("fact number 1.")
    before = raw_rows(cold, "c")
    v2 = warm.put(
        SummaryView(
            "c",
            "rolling",
            "",
            0,
            0,
            4,
            (Sentence("fact number 3.", (3,)), Sentence("fact number 4.", (4,))),
            0,
            "x",
            2.0,
        )
    )
    assert v2.version == 2
    assert raw_rows(cold, "c")[:1] == before  # version 1 untouched
    assert warm.versions("c", "rolling") == [1, 2]
    assert warm.latest("c", "rolling") == v2
    assert warm.version("c", "rolling", "", 1) == v1
    assert v2.text() == "fact number 3.\nfact number 4."
    assert v2.positions() == [3, 4]
    # rows are never updated: no UPDATE statement exists in the module
    src = Path(__file__).resolve().parent.parent.joinpath("tiers", "warm.py").read_text()
    assert "UPDATE summaries" not in src


def test_put_refuses_a_write_behind_the_current_version(cold: ColdStore, warm: WarmStore) -> None:
    cold.append_many("c", [msg("user", f"t{i}") for i in range(6)])
    ahead = warm.put(SummaryView("c", "rolling", "", 0, 0, 5, (Sentence("t5", (5,)),), 0, "x", 1.0))
    behind = warm.put(SummaryView("c", "rolling", "", 0, 0, 3, (Sentence("t3", (3,)),), 0, "x", 2.0))
    assert behind == ahead and warm.versions("c", "rolling") == [1]


@pytest.mark.parametrize(
    ("view", "field"),
    [
        (SummaryView("c", "weekly", "", 0, 0, 1, (), 0, "x", 1.0), "kind"),
        (SummaryView("c", "session", "", 0, 0, 1, (), 0, "x", 1.0), "key"),
        (SummaryView("c", "rolling", "s1", 0, 0, 1, (), 0, "x", 1.0), "key"),
        (SummaryView("c", "rolling", "", 0, 0, 9, (), 0, "x", 1.0), "end_position"),
        (SummaryView("c", "rolling", "", 0, 2, 1, (), 0, "x", 1.0), "end_position"),
        (SummaryView("c", "rolling", "", 0, 0, 1, (Sentence("a", ()),), 0, "x", 1.0), "sentences"),
        (SummaryView("c", "rolling", "", 0, 0, 1, (Sentence("a", (2,)),), 0, "x", 1.0), "sentences"),
        (SummaryView("c", "session", "s", 0, 1, 2, (Sentence("a", (0,)),), 0, "x", 1.0), "sentences"),
        (SummaryView("c", "rolling", "", 0, 0, 1, (Sentence("a\nb", (1,)),), 0, "x", 1.0), "sentences"),
        (
            SummaryView("c", "rolling", "", 0, 0, 1, (Sentence("a", (1,), "retracted"),), 0, "x", 1.0),
            "sentences",
        ),
    ],
)
def test_put_refuses_bad_views_and_writes_nothing(
    cold: ColdStore, warm: WarmStore, view: SummaryView, field: str
) -> None:
    cold.append_many("c", [msg("user", "a"), msg("user", "b"), msg("user", "c")])
    with pytest.raises(ValidationError) as err:
        warm.put(view)
    assert err.value.field == field
    assert cold._read("SELECT COUNT(*) FROM summaries")[0][0] == 0


def test_record_error_is_bounded_and_separate(cold: ColdStore, warm: WarmStore) -> None:
    cold.append("c", msg("user", "hi"))
    for i in range(ERRORS_KEPT_PER_VIEW + 7):
        warm.record_error("c", "rolling", "", f"error {i} " + "x" * 5000)
    errs = warm.errors("c", "rolling", limit=100)
    assert len(errs) == ERRORS_KEPT_PER_VIEW
    assert errs[0][0].startswith(f"error {ERRORS_KEPT_PER_VIEW + 6} ") and len(errs[0][0]) == 2000
    assert warm.latest("c", "rolling") is None  # an error is never a summary


def test_corrupt_rows_are_salvaged(cold: ColdStore, warm: WarmStore) -> None:
    cold.append_many("c", [msg("user", "one"), msg("user", "two")])
    good = warm.put(SummaryView("c", "rolling", "", 0, 0, 0, (Sentence("one", (0,)),), 0, "x", 1.0))
    with cold._tx() as c:
        c.execute(
            "INSERT INTO summaries(conversation_id, kind, key, version, start_position, end_position, body, "
            "tokens, summarizer, created_at) VALUES ('c', 'rolling', '', 2, 0, 1, '{not json', 1, 'x', 2.0)"
        )
    assert warm.latest("c", "rolling") == good
    assert warm.salvaged == 1


def test_sessions_latest_per_key(cold: ColdStore, warm: WarmStore) -> None:
    cold.append_many("c", [msg("user", f"t{i}", session="a" if i < 3 else "b") for i in range(6)])
    warm.put(SummaryView("c", "session", "b", 0, 3, 4, (Sentence("t4", (4,)),), 0, "x", 1.0))
    warm.put(SummaryView("c", "session", "a", 0, 0, 2, (Sentence("t1", (1,)),), 0, "x", 1.0))
    warm.put(SummaryView("c", "session", "b", 0, 3, 5, (Sentence("t5", (5,)),), 0, "x", 2.0))
    got = warm.sessions("c")
    assert [(v.key, v.version, v.end_position) for v in got] == [("a", 1, 2), ("b", 2, 5)]
    assert warm.session_ends("c") == {"a": 2, "b": 5}


@pytest.mark.parametrize(
    ("end", "last", "now", "created", "first", "expect"),
    [
        (9, 9, 100.0, 50.0, None, (0, 0.0, False)),  # covers everything
        (5, 9, 100.0, 50.0, 90.0, (4, 10.0, False)),  # within both budgets
        (5, 9, 200.0, 50.0, 90.0, (4, 110.0, True)),  # oldest missing turn waited too long
        (-1, 20, 100.0, 0.0, 95.0, (21, 5.0, True)),  # too many turns
        (5, 9, 100.0, 50.0, None, (4, 50.0, False)),  # no first time: the view's age bounds it
    ],
)
def test_staleness(
    end: int, last: int, now: float, created: float, first: float | None, expect: tuple[int, float, bool]
) -> None:
    view = None if end < 0 else SummaryView("c", "rolling", "", 1, 0, end, (), 0, "x", created)
    st = staleness(
        view,
        last_position=last,
        last_message_at=now,
        max_turns=10,
        max_seconds=100.0,
        now=now,
        first_uncovered_at=first,
    )
    assert (st.turns_behind, st.seconds_behind, st.over_budget) == expect


# ---------------------------------------------------------------------------------------
# Redis cache (a real redis-server)


@pytest.fixture
def redis_client(tmp_path: Path) -> Iterator[redis.Redis]:
    from tiermem.tiers.redis_server import EmbeddedRedis, RedisBinaryNotFound

    server = EmbeddedRedis(tmp_path / "r")
    try:
        url = server.ensure()
    except RedisBinaryNotFound:
        pytest.skip("no redis-server binary")
    client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=0.5)
    yield client
    client.close()
    server.stop()


def test_redis_cache_serves_latest_and_never_regresses(cold: ColdStore, redis_client: redis.Redis) -> None:
    warm = WarmStore(cold, redis_client)
    cold.append_many("c{x}", [msg("user", f"t{i}") for i in range(3)])
    v1 = warm.put(SummaryView("c{x}", "rolling", "", 0, 0, 1, (Sentence("t1", (1,)),), 0, "x", 1.0))
    v2 = warm.put(SummaryView("c{x}", "rolling", "", 0, 0, 2, (Sentence("t2", (2,)),), 0, "x", 2.0))
    key = warm.cache_key("c{x}", "rolling")
    assert key.startswith("{tm:c%7Bx%7D}") and redis_client.hget(key, "v") == "2"
    warm._cache_set(v1)  # a slower process writing an older version loses
    assert redis_client.hget(key, "v") == "2"
    assert warm.latest("c{x}", "rolling") == v2
    assert 0 < redis_client.ttl(key) <= 3600
    # another database sharing the Redis never reads this entry
    other = WarmStore(cold, redis_client)
    other.cold = type("FakeCold", (), {"db_uuid": "other", "_read": cold._read, "salvaged": 0})()  # type: ignore
    assert other._cache_get("c{x}", "rolling", "") is None
    # the cache is only a cache: drop it and cold answers (and refills it)
    warm.invalidate("c{x}", "rolling")
    assert warm.latest("c{x}", "rolling") == v2 and redis_client.hget(key, "v") == "2"


def test_redis_down_falls_back_to_cold(cold: ColdStore) -> None:
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    dead = redis.Redis(
        unix_socket_path="/nonexistent/redis.sock",
        socket_timeout=0.1,
        socket_connect_timeout=0.1,
        retry=Retry(NoBackoff(), 0),
    )
    warm = WarmStore(cold, dead)
    cold.append("c", msg("user", "hello"))
    v = warm.put(SummaryView("c", "rolling", "", 0, 0, 0, (Sentence("hello", (0,)),), 0, "x", 1.0))
    assert warm.latest("c", "rolling") == v and warm.cache_errors >= 2


def test_cache_tag_matches_the_hot_tier() -> None:
    from tiermem.tiers.hot import HotTier

    hot = HotTier.__new__(HotTier)  # only its key naming is used: no client
    hot.key_prefix = "tm"
    for cid in ["plain", "with space", "br{ace}s", "ünïcode", "a/b:c@d-e.f_g~h"]:
        tag = hot.tag(cid)
        assert WarmStore(None, key_prefix="tm").cache_key(cid, "rolling").startswith(tag + ":")  # type: ignore[arg-type]
        assert "{" not in tag[1:-1] and "}" not in tag[1:-1] and escape_id(cid) in tag


# ---------------------------------------------------------------------------------------
# views


def test_rolling_refresh_versions_and_folds(
    cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter
) -> None:
    load_labeled(cold, "c", 60)
    m = maintainer(cold, warm, counter)
    v1 = m.refresh("c", "rolling")
    assert v1 is not None and v1.version == 1 and (v1.start_position, v1.end_position) == (0, 59)
    assert counter.count(v1.text()) <= 120 and v1.tokens == counter.count(v1.text())
    assert_provenance(cold, v1)
    cp = cold.latest_checkpoint("c")
    assert cp is not None and cp.position == 59 and cp.summary == v1.text()
    assert cp.metadata is not None
    assert {k: v for k, v in cp.metadata.items() if k != "lines"} == {
        "source": "warm", "kind": "rolling", "version": 1, "summarizer": "extractive"}
    # each line of the fold with the positions of the sentence it renders
    lines = cp.lines()
    assert lines is not None and [(ln.text, ln.positions) for ln in lines] == [
        (s.text, s.positions) for s in v1.sentences]
    # a fresh view is returned as is, no new version
    assert m.refresh("c", "rolling") == v1
    # the fold deleted nothing: history is whole, active() is the suffix after it
    rows_v1 = raw_rows(cold, "c")
    extra = load_labeled_more(cold, "c", 60, 90)
    v2 = m.refresh("c", "rolling")
    assert v2 is not None and v2.version == 2 and v2.end_position == 89
    assert raw_rows(cold, "c")[: len(rows_v1)] == rows_v1
    assert len(cold.history("c")) == 90 and extra == 30
    checkpoint, active = cold.active("c")
    assert checkpoint is not None and checkpoint.position == 89 and active == []
    assert_provenance(cold, v2)


def load_labeled_more(cold: ColdStore, conv: str, start: int, stop: int, *, at: float = T0) -> int:
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()][start:stop]
    cold.append_many(conv, [msg(r["role"], r["text"], at=at + start + i) for i, r in enumerate(rows)])
    cold.set_labels(
        conv,
        [
            (start + i, r["intent"], bool(r["load_bearing"]), 5 if r["load_bearing"] else 0, "t")
            for i, r in enumerate(rows)
        ],
    )
    return len(rows)


def test_fold_can_be_turned_off(cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter) -> None:
    load_labeled(cold, "c", 20)
    assert maintainer(cold, warm, counter, fold=False).refresh("c", "rolling") is not None
    assert cold.latest_checkpoint("c") is None


@pytest.mark.parametrize("target", [16, 40, 120, 400])
def test_every_view_within_target_with_valid_provenance(
    cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter, target: int
) -> None:
    load_labeled(cold, "c", 150, sessions=3)
    cold.index_pending()
    m = maintainer(cold, warm, counter, target_tokens=target, chunk_tokens=600)
    views = m.refresh_all("c")
    kinds = sorted((v.kind, v.key) for v in views)
    assert kinds == [
        ("constraints", ""),
        ("rolling", ""),
        ("session", "s0"),
        ("session", "s1"),
        ("session", "s2"),
    ]
    for v in views:
        assert counter.count(v.text()) <= target, (v.kind, v.key)
        assert v.tokens == counter.count(v.text())
        assert_provenance(cold, v)
    for v in warm.sessions("c"):
        sessions = {t.session_id for t in cold.turns("c") if t.position in v.positions()}
        assert sessions <= {v.key}


def test_session_views_follow_session_boundaries(
    cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter
) -> None:
    load_labeled(cold, "c", 40, sessions=2)
    m = maintainer(cold, warm, counter)
    a = m.refresh("c", "session", "s0")
    b = m.refresh("c", "session", "s1")
    assert a is not None and (a.start_position, a.end_position) == (0, 19)
    assert b is not None and (b.start_position, b.end_position) == (20, 39)
    # a resumed session grows its own view only
    cold.append("c", msg("user", "Back again: please always reply in French from now on.", session="s0"))
    a2 = m.refresh("c", "session", "s0")
    assert a2 is not None and a2.version == 2 and (a2.start_position, a2.end_position) == (0, 40)
    assert m.refresh("c", "session", "s1") == b


def test_constraint_then_correction(cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter) -> None:
    cold.append_many(
        "c",
        [
            msg("system", "You are a travel assistant."),
            msg("user", "Book me a flight to Denver on Tuesday."),
            msg("assistant", "Sure, looking at Tuesday flights."),
            msg("user", "No red-eyes, ever."),
            msg("user", "Actually, make it Wednesday."),
            msg("user", "lol thanks"),
        ],
    )
    cold.set_labels(
        "c",
        [
            (0, "instruction", True, 9, "system"),
            (1, "instruction", True, 6, "request"),
            (2, "statement", False, 0, ""),
            (3, "instruction", True, 8, "constraint"),
            (4, "correction", True, 7, "actually"),
            (5, "chitchat", False, 0, ""),
        ],
    )
    cold.set_superseded("c", [(1, 4)])
    v = maintainer(cold, warm, counter).refresh("c", "constraints")
    assert v is not None and v.summarizer == "constraints"
    got = [(s.text, s.positions, s.status, s.label) for s in v.sentences]
    assert got == [
        ("You are a travel assistant.", (0,), "current", "instruction"),
        ("Book me a flight to Denver on Tuesday.", (1,), "superseded", "instruction"),
        ("No red-eyes, ever.", (3,), "current", "instruction"),
        ("Actually, make it Wednesday.", (4,), "current", "correction"),
    ]
    assert "(superseded) Book me a flight to Denver on Tuesday." in v.text()
    assert "Tuesday" not in v.current_text()
    assert_provenance(cold, v)
    # the rolling summary states the current value only
    r = maintainer(cold, warm, counter).refresh("c", "rolling")
    assert r is not None and "Tuesday." not in r.text() and "Wednesday" in r.text()


def test_correction_not_labeled_load_bearing_is_still_the_current_value(
    cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter
) -> None:
    cold.append_many(
        "c",
        [
            msg("user", "Ship to 12 Elm Street."),
            msg("user", "no wait, 14 Elm Street"),
            msg("user", "sorry, 16 Elm Street"),
        ],
    )
    cold.set_labels(
        "c",
        [(0, "instruction", True, 5, ""), (1, "correction", False, 0, ""), (2, "correction", False, 0, "")],
    )
    cold.set_superseded("c", [(0, 1), (1, 2)])
    v = maintainer(cold, warm, counter).refresh("c", "constraints")
    assert v is not None
    assert [(s.positions[0], s.status) for s in v.sentences] == [
        (0, "superseded"),
        (1, "superseded"),
        (2, "current"),
    ]


def test_constraints_over_target_drop_superseded_then_low_priority(
    cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter
) -> None:
    texts = [
        f"Constraint number {i} says the widget must be exactly {i} centimetres wide." for i in range(12)
    ]
    cold.append_many("c", [msg("user", t) for t in texts])
    cold.set_labels("c", [(i, "instruction", True, i, "") for i in range(12)])
    cold.set_superseded("c", [(11, 10)])
    m = maintainer(cold, warm, counter, constraint_target_tokens=80)
    v = m.refresh("c", "constraints")
    assert v is not None and counter.count(v.text()) <= 80
    kept = [s.positions[0] for s in v.sentences]
    assert 11 not in kept  # superseded goes first
    assert kept == sorted(kept) and kept[-1] == 10 and min(kept) > 3  # then the lowest priorities
    assert all(s.status == "current" for s in v.sentences)


class Failing:
    name = "failing"

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, turns: Sequence[SourceTurn], *, target_tokens: int) -> list[Sentence]:
        self.calls += 1
        raise SummarizerError(self.name, "endpoint said no")


class Switchable:
    """Extractive until `fail` is set."""

    def __init__(self, counter: BpeTokenCounter) -> None:
        self.inner = ExtractiveSummarizer(counter)
        self.name = "switchable"
        self.fail = False

    def summarize(self, turns: Sequence[SourceTurn], *, target_tokens: int) -> list[Sentence]:
        if self.fail:
            raise SummarizerError(self.name, "HTTP 503 (3 attempts)")
        return self.inner.summarize(turns, target_tokens=target_tokens)


def test_failing_summarizer_keeps_previous_version_and_records_error(
    cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter
) -> None:
    load_labeled(cold, "c", 30, sessions=1)
    s = Switchable(counter)
    m = maintainer(cold, warm, counter, summarizer=s)
    v1 = m.refresh("c", "rolling")
    s1 = m.refresh("c", "session", "s0")
    assert v1 is not None and s1 is not None
    checkpoints = cold.stats()["checkpoints"]
    load_labeled_more(cold, "c", 30, 40)
    s.fail = True
    assert m.refresh("c", "rolling") == v1  # no raise, previous version
    assert warm.versions("c", "rolling") == [1]
    assert cold.stats()["checkpoints"] == checkpoints  # no fold of a failed refresh
    errs = warm.errors("c", "rolling")
    assert len(errs) == 1 and "HTTP 503" in errs[0][0]
    bodies = [r[0] for r in cold._read("SELECT body FROM summaries")]
    assert not any("503" in b or "SummarizerError" in b for b in bodies)
    # recovery: the next refresh writes version 2
    s.fail = False
    v2 = m.refresh("c", "rolling")
    assert v2 is not None and v2.version == 2 and v2.end_position == 39


def test_failing_summarizer_with_no_previous_version(
    cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter
) -> None:
    load_labeled(cold, "c", 10)
    m = maintainer(cold, warm, counter, summarizer=Failing())
    assert m.refresh("c", "rolling") is None
    assert warm.latest("c", "rolling") is None and len(warm.errors("c", "rolling")) == 1
    assert m.failures == 1


def test_misbehaving_summarizer_cannot_break_invariants(
    cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter
) -> None:
    class Liar:
        name = "liar"

        def summarize(self, turns: Sequence[SourceTurn], *, target_tokens: int) -> list[Sentence]:
            return [
                Sentence("made up", (999,)),
                *[Sentence("word " * 50, (turns[0].position,))] * 10,
                Sentence("fine", (turns[-1].position,)),
            ]

    load_labeled(cold, "c", 10)
    v = maintainer(cold, warm, counter, summarizer=Liar(), target_tokens=60).refresh("c", "rolling")
    assert v is not None and counter.count(v.text()) <= 60
    assert all(p < 10 for s in v.sentences for p in s.positions)


def test_young_unlabeled_tail_waits_for_labels(
    cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter
) -> None:
    clock = Clock(T0 + 100)
    load_labeled(cold, "c", 10, at=T0)
    cold.append_many(
        "c", [msg("user", "Never use tabs.", at=T0 + 99), msg("user", "Or spaces.", at=T0 + 99.5)]
    )
    m = maintainer(cold, warm, counter, clock=clock, label_grace_s=10.0)
    v = m.refresh("c", "constraints")
    assert v is not None and v.end_position == 9  # the unlabeled, 1 s old turns wait
    clock.now = T0 + 120
    v2 = m.refresh("c", "constraints")
    assert v2 is not None and v2.end_position == 11  # after the grace they are covered anyway


def test_stale_views_ranks_and_bounds(cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter) -> None:
    clock = Clock(T0 + 1000)
    load_labeled(cold, "big", 60, at=T0 + 900, sessions=2)  # 60 turns behind, 100 s old
    load_labeled(cold, "small", 3, at=T0 + 990)  # 3 turns, 10 s old: within budget
    load_labeled(cold, "old", 3, at=T0)  # 3 turns, 1000 s old
    m = maintainer(cold, warm, counter, clock=clock, max_turns_behind=10, max_seconds_behind=300)
    got = m.stale_views(100)
    assert ("small", "rolling", "") not in got
    assert set(got) == {
        ("big", "rolling", ""),
        ("big", "constraints", ""),
        ("big", "session", "s0"),
        ("big", "session", "s1"),
        ("old", "rolling", ""),
        ("old", "constraints", ""),
        ("old", "session", "s0"),
    }
    assert got[0][0] == "big" and got[0][1] in ("rolling", "constraints")  # 60/10 beats 1000/300
    assert len(m.stale_views(2)) == 2
    detailed = dict(m.stale_views_detailed(100))
    assert detailed[("big", "rolling", "")].turns_behind == 60
    assert detailed[("old", "rolling", "")].seconds_behind == pytest.approx(1000)
    for view in got:
        m.refresh(*view)
    assert m.stale_views(100) == []
    assert m.staleness("big", "rolling").turns_behind == 0


def test_refresh_of_missing_conversation_and_bad_keys(
    cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter
) -> None:
    m = maintainer(cold, warm, counter)
    assert m.refresh("nobody", "rolling") is None
    assert m.refresh("nobody", "constraints") is None
    assert m.refresh("nobody", "session", "s") is None
    with pytest.raises(ValidationError):
        m.refresh("c", "session")
    with pytest.raises(ValidationError):
        m.refresh("c", "digest")


def test_schema_does_not_depend_on_importing_the_warm_tier(tmp_path: Path) -> None:
    """A process that never imports tiers.warm (e.g. `tiermem history`) opens a database
    that the warm tier has used, and creates the same schema on a new one."""
    import subprocess
    import sys

    code = (
        "import sys; from pathlib import Path; from tiermem.tiers.cold import ColdStore; from tiermem.tiers.schema import schema_version; "
        "from tiermem.tiers.tokens import BpeTokenCounter; "
        "s = ColdStore(Path(sys.argv[1]), tokens=BpeTokenCounter()); "
        "assert 'tiermem.tiers.warm' not in sys.modules; "
        "names = {r[0] for r in s._read('SELECT name FROM sqlite_master')}; "
        "assert 'summaries' in names, names; print(s.version, schema_version())"
    )
    db = tmp_path / "d.db"
    for _ in range(2):  # create, then reopen
        out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, check=True)
        version, supported = out.stdout.split()
        assert version == supported


def test_render_matches_text() -> None:
    sents = (Sentence("a", (0,)), Sentence("b", (1,), "superseded"))
    v = SummaryView("c", "constraints", "", 1, 0, 1, sents, 0, "x", time.time())
    assert v.text() == render(sents) == "a\n(superseded) b"
    assert v.current_text() == "a"


def test_stale_views_notices_a_pruned_and_recreated_conversation(
    cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter
) -> None:
    clock = Clock(T0 + 10_000)
    m = maintainer(cold, warm, counter, clock=clock, max_turns_behind=5)
    load_labeled(cold, "c", 30, at=T0, sessions=1)
    assert ("c", "session", "s0") in m.stale_views(10)
    for view in m.stale_views(10):
        m.refresh(*view)
    assert m.stale_views(10) == []
    assert cold.prune(older_than=T0 + 1e6, all_namespaces=True).conversations == 1
    assert m.stale_views(10) == [] and warm.latest("c", "rolling") is None
    time.sleep(0.01)  # a new conversation row, a new created_at
    cold.append_many("c", [msg("user", f"New life, fact {i}.", session="z", at=T0) for i in range(40)])
    key = cold.key_of("default", "c")  # the new incarnation: a key of its own
    assert key is not None and key != "c"
    assert set(m.stale_views(10)) == {(key, "rolling", ""), (key, "constraints", ""), (key, "session", "z")}


def test_incremental_constraints_see_a_later_correction_of_a_carried_constraint(
    cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter
) -> None:
    m = maintainer(cold, warm, counter)
    cold.append_many("c", [msg("user", "The meeting room is B12."), msg("assistant", "Noted.")])
    cold.set_labels("c", [(0, "statement", True, 4, ""), (1, "chitchat", False, 0, "")])
    v1 = m.refresh("c", "constraints")
    assert v1 is not None and [(s.positions, s.status) for s in v1.sentences] == [((0,), "current")]
    cold.append_many("c", [msg("user", f"filler {i}") for i in range(5)] + [msg("user", "sorry, it's B14")])
    cold.set_labels(
        "c", [(i, "statement", False, 0, "") for i in range(2, 7)] + [(7, "correction", False, 0, "")]
    )
    cold.set_superseded("c", [(0, 7)])
    v2 = m.refresh("c", "constraints")
    assert v2 is not None and v2.version == 2
    assert [(s.positions, s.status) for s in v2.sentences] == [((0,), "superseded"), ((7,), "current")]


def test_full_refresh_recomputes_from_the_whole_log(
    cold: ColdStore, warm: WarmStore, counter: BpeTokenCounter
) -> None:
    load_labeled(cold, "c", 40, sessions=2)
    m = maintainer(cold, warm, counter)
    before = {k: m.refresh("c", k) for k in ("rolling", "constraints")}
    # relabel: everything is now chitchat except one turn
    cold.set_labels("c", [(i, "chitchat", False, 0, "") for i in range(40)])
    cold.set_labels("c", [(7, "instruction", True, 9, "")])
    assert m.refresh("c", "constraints") == before["constraints"]  # nothing new: as is
    full = m.refresh("c", "constraints", full=True)
    assert full is not None and full.version == 2 and {s.positions for s in full.sentences} == {(7,)}
    r = m.refresh("c", "rolling", full=True)
    assert r is not None and r.version == 2 and r.end_position == 39
    s1 = m.refresh("c", "session", "s1", full=True)
    assert s1 is not None and s1.start_position == 20
