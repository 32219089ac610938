"""`system_messages="before_latest"`: the caller's system message first, the turns in log
order, and every memory block (pins, summary, retrieved turns) in ONE system message
just before the latest user message. Checked in every provider format against the
openai SDK's request types, and for what it is for: a pin added between two calls
changes only that last part, so the previous context up to its memory message stays
the next one's prefix (with `as_is` the pinned block near the top changes instead)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sdk_corpus as corpus

from tiermem import Config, Memory
from tiermem.evals.cost import common_prefix_messages
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import message_text
from tiermem.tiers.tokens import messages_tokens

BUDGETS = [250, 400, 600, 900, 1400, 2200, 4000, 20000]
SYSTEM = "Be brief."
QUERY = "which flight and what weather?"


def _mem(tmp_path: Path, embedder: FastEmbedder, **kw: Any) -> Memory:
    return Memory(Config(data_dir=tmp_path / "d", **kw), embedder=embedder, hot=False, background_indexing=False)


def _is_system(m: dict[str, Any]) -> bool:
    return m.get("role") in ("system", "developer") and m.get("type") in (None, "message")


def _memory_indexes(messages: list[dict[str, Any]], stored_texts: set[str]) -> list[int]:
    """Indexes of the planner's memory messages: system messages that are neither the
    caller's system prompt (first) nor a system/developer message of the log."""
    return [i for i, m in enumerate(messages)
            if i > 0 and _is_system(m) and message_text(m) not in stored_texts]


# (context_format, conversation, validator): each family as stored and converted to the other
SHAPES = [
    ("as_stored", corpus.chat_conversation, corpus.valid_chat),
    ("as_stored", corpus.responses_conversation, corpus.valid_responses),
    ("chat", corpus.responses_conversation, corpus.valid_chat),
    ("responses", corpus.chat_conversation, corpus.valid_responses),
]


@pytest.mark.parametrize(("fmt", "conversation", "valid"), SHAPES, ids=[f"{f}-{c.__name__}" for f, c, _ in SHAPES])
def test_memory_is_one_message_before_the_latest_user_turn(
        tmp_path: Path, embedder: FastEmbedder, fmt: str, conversation: Any, valid: Any) -> None:
    with _mem(tmp_path, embedder, context_format=fmt, system_messages="before_latest") as mem:
        mem.append_many("c", conversation())
        stored_texts = {message_text(m.body) for m in mem.history("c")}
        with_memory = 0
        for budget in BUDGETS:
            ctx = mem.context("c", QUERY, budget, system=SYSTEM)
            assert ctx.tokens <= budget and ctx.tokens == messages_tokens(mem.tokens, ctx.messages), budget
            valid(ctx.messages)
            assert message_text(ctx.messages[0]) == SYSTEM  # the caller's system message stays first
            latest = max(i for i, m in enumerate(ctx.messages) if m.get("role") == "user")
            assert latest == len(ctx.messages) - 1  # the latest user message closes the context
            memory = _memory_indexes(ctx.messages, stored_texts)
            assert memory in ([], [latest - 1]), (budget, memory)
            if memory:
                with_memory += 1
                # the plan still names what the memory message holds, in the "memory" layer
                assert any(it.slice in ("pinned", "summary", "retrieved") for it in ctx.plan.items)
                # breakpoints index the returned messages, converted or not
                stable = [b for b in ctx.plan.breakpoints if b.layer == "stable"]
                assert stable and stable[-1].index == latest - 2, ctx.plan.breakpoints
        assert with_memory >= 2  # the corpus's pins and retrieval give a memory message at small budgets


def _turns(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        out.append({"role": "user", "content": f"Note {i}: the package for client {i} ships from depot {i % 7}."})
        out.append({"role": "assistant", "content": f"Recorded note {i} about depot {i % 7} and client {i}."})
    return out


# (policy, how much of the first context the second one repeats as its prefix)
PIN_CASES = [
    ("before_latest", "up to the memory message"),  # the new pin lands in the last part
    ("as_is", "the system message only"),  # the pinned block after the system message changes
]


@pytest.mark.parametrize(("policy", "expected"), PIN_CASES)
def test_a_new_pin_leaves_the_prefix_alone(tmp_path: Path, embedder: FastEmbedder,
                                           policy: str, expected: str) -> None:
    with _mem(tmp_path, embedder, system_messages=policy) as mem:
        mem.append_many("c", _turns(40))
        mem.pin("c", 4, priority=90)
        mem.append("c", {"role": "user", "content": "Which depot ships client 2?"})
        first = mem.context("c", None, 700, system=SYSTEM).messages
        mem.append_many("c", [{"role": "assistant", "content": "Depot 2."},
                              {"role": "user", "content": "And which depot ships client 3?"}])
        mem.pin("c", 6, priority=80)  # a new standing fact between the two calls
        second = mem.context("c", None, 700, system=SYSTEM).messages
    k = common_prefix_messages(first, second)
    if expected == "the system message only":
        assert k == 1
    else:
        stored = {message_text(b) for b in _turns(40)}
        (at,) = _memory_indexes(first, stored)
        assert k == at >= 5  # the system message and every tail turn before the memory message
        (at2,) = _memory_indexes(second, stored)
        assert "client 3" in message_text(second[at2]) or "Note 3" in message_text(second[at2])  # pinned #6


def test_the_turns_are_kept_and_grow_by_appends_until_re_anchored(
        tmp_path: Path, embedder: FastEmbedder) -> None:
    """Without epochs (the memory message moves), the turns before it are what caches:
    each call keeps the previous call's tail start while the tail fits TAIL_GROWTH
    times its share, so the previous context up to its memory message is the prefix."""
    with _mem(tmp_path, embedder, system_messages="before_latest") as mem:
        mem.append_many("c", _turns(10))
        stored: set[str] = set()
        prev: list[dict[str, Any]] | None = None
        kept = 0
        for i in range(10, 40):
            user, answer = _turns(i + 1)[-2:]
            mem.append("c", user)
            ctx = mem.context("c", str(user["content"]), 1000, system=SYSTEM)
            stored = {message_text(m.body) for m in mem.history("c")}
            if prev is not None and ctx.plan.cache.reason.startswith("before_latest: the turns from"):
                kept += 1
                memory = _memory_indexes(prev, stored)
                cut = memory[0] if memory else len(prev) - 1  # up to the memory message (else the latest)
                assert ctx.messages[:cut] == prev[:cut], i
                assert not ctx.plan.cache.new_epoch
            prev = ctx.messages
            mem.append("c", answer)
        assert kept >= 20  # of 29 follow-up calls: re-anchoring is the exception
        # another budget is another plan: nothing is kept across it
        other = mem.context("c", "anything?", 1200, system=SYSTEM)
        assert other.plan.cache.new_epoch and "budget changed" in other.plan.cache.reason


# every output shape the config offers: (context_format, system_messages) x both families
SHAPE_GRID = [(f, p) for f in ("as_stored", "chat", "responses") for p in ("as_is", "merge", "before_latest")]


@pytest.mark.parametrize(("fmt", "policy"), SHAPE_GRID, ids=[f"{f}-{p}" for f, p in SHAPE_GRID])
def test_every_shape_and_policy_is_a_valid_sdk_request(tmp_path: Path, embedder: FastEmbedder,
                                                       fmt: str, policy: str) -> None:
    with _mem(tmp_path, embedder, context_format=fmt, system_messages=policy) as mem:
        mem.append_many("chat", corpus.chat_conversation())
        mem.append_many("resp", corpus.responses_conversation())
        for conv in ("chat", "resp"):
            valid = {"chat": corpus.valid_chat, "responses": corpus.valid_responses}.get(fmt) or (
                corpus.valid_chat if conv == "chat" else corpus.valid_responses)
            for budget in (300, 900, 4000):
                ctx = mem.context(conv, QUERY, budget, system=SYSTEM)
                assert ctx.tokens <= budget
                valid(ctx.messages)
                systems = [i for i, m in enumerate(ctx.messages) if _is_system(m)]
                if policy == "merge":
                    assert systems == [0]
