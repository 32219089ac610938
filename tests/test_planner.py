"""The per-turn planner through Memory.context(): budget, recall, stability, safety."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiermem import Config, Memory
from tiermem.errors import BudgetTooSmall, ValidationError
from tiermem.tiers.redis_server import EmbeddedRedis
from tiermem.tiers.tokens import messages_tokens

FILLER = [
    "haha that's funny", "the weather is nice today", "I watched a movie last night", "ok cool",
    "I had pasta for lunch", "my cat knocked over a plant", "traffic was terrible this morning",
    "did you see the game?", "I might go for a run later", "that sounds good",
]


def chitchat(n: int, seed: int = 0) -> list[dict[str, str]]:
    rnd = random.Random(seed)
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{rnd.choice(FILLER)} ({i})"}
            for i in range(n)]


def text_of(messages: list[dict]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def test_recent_recall_returns_the_last_turns_verbatim(memory: Memory) -> None:
    memory.append_many("c", chitchat(80))
    memory.append("c", {"role": "user", "content": "I parked on level 3, spot B12."})
    memory.append("c", {"role": "assistant", "content": "Noted: level 3, spot B12."})
    memory.append("c", {"role": "user", "content": "what did I just say?"})
    ctx = memory.context("c", "what did I just say?", budget=400)
    assert ctx.plan.query_class == "recent_recall"
    assert ctx.messages[-1] == {"role": "user", "content": "what did I just say?"}
    # the tail's share does not depend on the class (issue 22): the newest turns it does
    # not reach come verbatim in the per-turn part, just before the question
    text = text_of(ctx.messages[-4:])
    assert "I parked on level 3, spot B12." in text and "Noted: level 3, spot B12." in text
    shown = {p for i in ctx.plan.items if i.fidelity == "verbatim" for p in i.positions}
    assert {80, 81} <= shown


def test_constraint_at_turn_3_survives_500_turns_at_1000_tokens(memory: Memory) -> None:
    memory.append_many("c", chitchat(3, seed=1))
    memory.append("c", {"role": "user", "content": "Never book me on red-eye flights, I can't sleep on planes."})
    memory.append_many("c", chitchat(500, seed=2))
    memory.append("c", {"role": "user", "content": "Please find me a flight to Denver next Friday."})
    ctx = memory.context("c", "Please find me a flight to Denver next Friday.", budget=1000)
    assert ctx.tokens <= 1000
    assert "red-eye" in text_of(ctx.messages)
    pinned = [i for i in ctx.plan.items if i.slice == "pinned"]
    assert any(3 in i.positions for i in pinned)


def test_a_retracted_constraint_is_never_presented_as_current(memory: Memory) -> None:
    memory.append("c", {"role": "user", "content": "My budget for the trip is $2,000."})
    memory.append_many("c", chitchat(60, seed=3))
    memory.append("c", {"role": "user", "content": "Actually, my budget is $1,500 now."})
    memory.append_many("c", chitchat(20, seed=4))
    memory.append("c", {"role": "user", "content": "What is my budget for the trip?"})
    ctx = memory.context("c", "What is my budget for the trip?", budget=1000)
    assert "$1,500" in text_of(ctx.messages)
    for m in ctx.messages:
        for line in str(m.get("content") or "").splitlines():
            if "$2,000" in line:
                assert "SUPERSEDED" in line, line
    assert any("superseded" in i.reason for i in ctx.plan.left_out + ctx.plan.items)


def test_tool_call_pairs_stay_intact_and_latest_user_message_is_present(memory: Memory) -> None:
    memory.append_many("c", chitchat(30, seed=5))
    memory.append("c", {"role": "user", "content": "What's the weather in Oslo?"})
    memory.append("c", {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}}]})
    memory.append("c", {"role": "tool", "tool_call_id": "call_1", "content": "Oslo: 4C, light rain. " * 300})
    memory.append("c", {"role": "assistant", "content": "It's 4C and raining in Oslo."})
    memory.append("c", {"role": "user", "content": "Thanks! Should I bring an umbrella?"})
    for budget in (120, 200, 300, 600, 1200):
        ctx = memory.context("c", "Should I bring an umbrella?", budget=budget)
        assert ctx.tokens <= budget
        assert ctx.messages[-1] == {"role": "user", "content": "Thanks! Should I bring an umbrella?"}
        roles = [m["role"] for m in ctx.messages]
        for i, m in enumerate(ctx.messages):
            if m["role"] == "tool":  # a tool result always follows its call
                assert i > 0 and ctx.messages[i - 1].get("tool_calls"), roles
            if m.get("tool_calls"):  # a call is always followed by its results
                assert i + 1 < len(ctx.messages) and ctx.messages[i + 1]["role"] == "tool", roles
        tool = [m for m in ctx.messages if m["role"] == "tool"]
        if tool:  # the long output is trimmed, with a marker saying how to get it back
            assert "trimmed" in tool[0]["content"] and "#" in tool[0]["content"]


def test_consecutive_turns_share_their_leading_messages(memory: Memory) -> None:
    memory.append("c", {"role": "user", "content": "Never use American spellings in your answers."})
    memory.append_many("c", chitchat(100, seed=6))
    previous = None
    shared = []
    for i in range(6):
        memory.append("c", {"role": "user", "content": f"tell me something nice ({i})"})
        memory.append("c", {"role": "assistant", "content": f"here is something nice ({i})"})
        ctx = memory.context("c", f"tell me something nice ({i})", budget=800, system="You are a helpful assistant.")
        if previous is not None:
            n = 0
            while n < min(len(previous), len(ctx.messages)) and previous[n] == ctx.messages[n]:
                n += 1
            shared.append(len(previous) - n)  # messages of the previous context not reused
            assert n >= 2  # the system prompt and the pinned block, even when the tail's anchor moves
        previous = ctx.messages
    # the tail's start is anchored: most turns keep everything but the newest messages
    # (and the retrieved block, which sits just before the latest user message)
    assert sum(1 for lost in shared if lost <= 3) >= 3, shared


def test_redis_flushed_during_a_rebuild_degrades_one_call(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    # FLUSHALL (or a restart) in the middle of a rebuild: between the Lua replay and its
    # publish (the scratch keys gone), or between the one-script load of a replay made
    # in Python (hotlink's path since the huge-conversation audit) and its read-back.
    # That is Redis failing, not the request: degraded, never an error (it was an HTTP
    # 500 once in the Redis-failure soak)
    memory.append_many("c", chitchat(30))
    assert memory.hot is not None
    tier = memory.hot.tier
    real_run = tier._run

    def lose_scratch(name: str, keys: list[str], args: list[object]) -> object:
        if name == "finish":
            tier.client.flushall()
        out = real_run(name, keys, args)
        if name == "load":
            tier.client.flushall()
        return out

    tier.client.flushall()  # the next read finds no hot set and rebuilds it
    monkeypatch.setattr(tier, "_run", lose_scratch)
    ctx = memory.context("c", "what did we say?", budget=300)
    assert ctx.plan.degraded and ctx.plan.tiers["hot"] == "degraded"
    assert ctx.tokens <= 300 and ctx.messages
    monkeypatch.undo()
    ctx = memory.context("c", "what did we say?", budget=300)
    assert not ctx.plan.degraded and ctx.plan.tiers["hot"] == "rebuilt"


def test_context_with_redis_down_is_degraded_not_failed(tmp_path: Path, embedder) -> None:
    # an external Redis that we kill: the embedded one would be restarted by tiermem
    server = EmbeddedRedis(tmp_path / "external")
    url = server.ensure()
    mem = Memory(Config(data_dir=tmp_path / "d", redis_url=url), embedder=embedder, background_indexing=False)
    try:
        mem.append_many("c", chitchat(20))
        server.stop()
        mem.append("c", {"role": "user", "content": "are you still there?"})
        ctx = mem.context("c", "are you still there?", budget=300)
        assert ctx.plan.degraded and ctx.plan.tiers["hot"] == "degraded"
        assert ctx.messages[-1]["content"] == "are you still there?"
        assert "DEGRADED" in ctx.plan.explain()
        server.ensure()
        ctx = mem.context("c", "are you still there?", budget=300)
        assert not ctx.plan.degraded
    finally:
        mem.close()
        server.stop()


@pytest.mark.parametrize(
    ("budget", "error"),
    [
        (0, ValidationError),  # not a positive budget
        (-5, ValidationError),  # negative
        (10**12, ValidationError),  # absurdly large
        (5, BudgetTooSmall),  # cannot hold the latest user message
    ],
)
def test_bad_budgets_are_refused(cold_memory: Memory, budget: int, error: type[Exception]) -> None:
    cold_memory.append("c", {"role": "user", "content": "a message that needs more than five tokens to hold"})
    with pytest.raises(error, match="budget"):
        cold_memory.context("c", "x", budget=budget)


def test_truncating_the_latest_message_is_opt_in(cold_memory: Memory) -> None:
    cold_memory.append("c", {"role": "user", "content": "word " * 200})
    ctx = cold_memory.context("c", "x", budget=50, truncate_latest=True)
    assert ctx.tokens <= 50
    assert ctx.messages[-1]["role"] == "user"


def test_plan_explains_every_item(memory: Memory) -> None:
    memory.append("c", {"role": "user", "content": "We agreed to use Postgres, not MySQL."})
    memory.append_many("c", chitchat(40, seed=7))
    memory.append("c", {"role": "user", "content": "which database did we decide on?"})
    ctx = memory.context("c", "which database did we decide on?", budget=500)
    assert ctx.plan.items and all(i.reason and i.tier and i.fidelity for i in ctx.plan.items)
    assert sum(i.tokens for i in ctx.plan.items) > 0
    text = ctx.plan.explain()
    assert "query class" in text and "Postgres" in text_of(ctx.messages)
    json.dumps(ctx.plan.to_dict())  # serializable for the API and the plans table


message_st = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, st.text(min_size=1, max_size=300)),
    st.builds(lambda t: {"role": "assistant", "content": t}, st.text(min_size=1, max_size=300)),
    st.builds(lambda n: {"role": "user", "content": "Never do X number " + str(n)}, st.integers(0, 99)),
    st.just("toolpair"),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    msgs=st.lists(message_st, min_size=1, max_size=40),
    budget=st.integers(min_value=60, max_value=3000),
    sessions=st.booleans(),
    pin=st.booleans(),
)
def test_budget_is_never_exceeded(cold_memory: Memory, msgs: list, budget: int, sessions: bool, pin: bool) -> None:
    conv = f"h{random.randrange(10**9)}"
    for i, m in enumerate(msgs):
        session = f"s{i // 7}" if sessions else None
        if m == "toolpair":
            cid = f"call_{i}"
            cold_memory.append(conv, {"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, session_id=session)
            cold_memory.append(conv, {"role": "tool", "tool_call_id": cid, "content": "out " * 700},
                               session_id=session)
        else:
            cold_memory.append(conv, m, session_id=session)
    cold_memory.append(conv, {"role": "user", "content": "ok?"})
    if pin:
        cold_memory.pin(conv, 0, priority=90)
    ctx = cold_memory.context(conv, "what did we say about X?", budget=budget)
    assert ctx.tokens <= budget
    assert messages_tokens(cold_memory.tokens, ctx.messages) == ctx.tokens
    assert ctx.messages[-1] == {"role": "user", "content": "ok?"}


def test_a_query_naming_a_day_brings_back_that_days_turns(cold_memory: Memory) -> None:
    # ten days of small talk, one session a day; the query shares no words with any turn
    day0 = 1_709_251_200.0  # 1 March 2024, 00:00 UTC
    for d in range(10):
        batch = [{"role": "user" if i % 2 == 0 else "assistant", "content": FILLER[(d + i) % len(FILLER)],
                  "created_at": day0 + d * 86_400 + 3600 + i * 60} for i in range(12)]
        cold_memory.append_many("c", batch, session_id=f"day-{d}")
    cold_memory.append("c", {"role": "user", "content": "What did we talk about on 5 March 2024?"})
    ctx = cold_memory.context("c", "What did we talk about on 5 March 2024?", budget=600)
    items = sorted((i for i in ctx.plan.items if i.slice == "retrieved"), key=lambda i: -i.score)
    day4 = set(range(4 * 12, 5 * 12))  # the session of 5 March
    retrieved = {p for i in items for p in i.positions}
    assert day4 <= retrieved  # the whole day is in the context
    # the day is a tenth of the talk, but most of the best-scored turns (without the
    # date, the small talk of every day looks alike and one in ten would be from it)
    assert sum(set(i.positions) <= day4 for i in items[:6]) >= 4
    assert any("5 March 2024" in i.reason for i in ctx.plan.items if i.slice == "retrieved")


def test_context_starts_no_thread(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    import threading

    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append_many("c", chitchat(20))
        mem.context("c", "the weather?", budget=300)  # the first call loads the model (its tqdm monitor)
        before = {t.ident for t in threading.enumerate()}
        ctx = mem.context("c", "what did we say about the weather?", budget=300)
        assert ctx.tokens <= 300
        assert [t.name for t in threading.enumerate() if t.ident not in before] == []  # the query is embedded inline


@pytest.mark.parametrize("in_memory", [
    True,  # a namespace of a few conversations: scored from the turn cache
    False,  # a namespace too large for it: sqlite-vec and FTS5
])
def test_namespace_recall_finds_another_session_either_way(cold_memory: Memory, monkeypatch: pytest.MonkeyPatch,
                                                          in_memory: bool) -> None:
    import tiermem.planner.candidates as candidates

    if not in_memory:
        monkeypatch.setattr(candidates, "NAMESPACE_IN_MEMORY_CONVERSATIONS", 0)
    mem = cold_memory
    mem.append_many("monday", [*chitchat(30, seed=3),
                               {"role": "user", "content": "My locker combination at the gym is 31-07-22."},
                               *chitchat(30, seed=4)], namespace="ana")
    mem.append_many("tuesday", chitchat(40, seed=5), namespace="ana")
    mem.append_many("elsewhere", [{"role": "user", "content": "My locker combination at the gym is 99-99-99."}],
                    namespace="bob")  # another user's: never shown
    mem.append("tuesday", {"role": "user", "content": "what was my gym locker combination?"}, namespace="ana")
    mem.catch_up()  # what the background indexer does for every conversation
    ctx = mem.context("tuesday", "what was my gym locker combination?", budget=400, namespace="ana")
    found = [i for i in ctx.plan.items if i.slice == "retrieved" and i.conversation_id == "monday"]
    assert [i.positions for i in found][:1] == [[30]]
    assert "in this namespace" in found[0].reason
    assert "31-07-22" in text_of(ctx.messages)
    assert "99-99-99" not in text_of(ctx.messages)
    # without namespace recall the other session stays out
    alone = mem.context("tuesday", "what was my gym locker combination?", budget=400, namespace="ana",
                        namespace_recall=False)
    assert "31-07-22" not in text_of(alone.messages)
