"""`system_messages="before_latest"`: the plan's cache report says what happened to the
previous call's turns. There are no epochs to extend (the memory message moves), so
the report reads the kept tail: while the turns from the previous call's start are sent
again as they were, the epoch goes on ("the turns from #N are kept"); when they are not,
a new epoch starts and the reason says why and where the turns start now.

Before: a previous call that showed no turn before its latest user message (a small
budget), asked again, sent the same turns and was reported as a new epoch, every call a
new one; and a tail re-anchored because it outgrew its room was explained as "epochs are
off (messages are converted or moved ...)", which names the setting, not what happened.
Real SQLite, the real model, no hot tier (process-only epoch state)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

SYSTEM = "Be brief."
SMALL_BUDGET = 150  # tokens: the system prompt and the latest user message, no turn before it
GROWING_BUDGET = 1000  # tokens: a kept tail that outgrows its room within 30 turns
REPEATS = 3  # the same call again, with nothing appended between


def _turns(n: int, repeat: int = 1) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        out.append({"role": "user", "content": f"Note {i}: the package for client {i} ships from depot {i % 7}. "
                    * repeat})
        out.append({"role": "assistant", "content": f"Recorded note {i} about depot {i % 7} and client {i}. "
                    * repeat})
    return out


def _mem(tmp_path: Path, embedder: FastEmbedder) -> Memory:
    return Memory(Config(data_dir=tmp_path / "d", system_messages="before_latest"), embedder=embedder, hot=False,
                  background_indexing=False)


def test_the_same_turns_sent_again_go_on_in_the_epoch(tmp_path: Path, embedder: FastEmbedder) -> None:
    with _mem(tmp_path, embedder) as mem:
        mem.append_many("c", _turns(10, repeat=3))
        mem.append("c", {"role": "user", "content": "Which depot?"})
        contexts = [mem.context("c", None, SMALL_BUDGET, system=SYSTEM) for _ in range(REPEATS)]
    first = contexts[0]
    assert [m["role"] for m in first.messages] == ["system", "user"]  # the premise: no turn before the latest
    assert first.plan.cache.new_epoch
    for n, ctx in enumerate(contexts[1:], start=2):
        assert ctx.messages == first.messages  # the same context again
        cache = ctx.plan.cache
        assert not cache.new_epoch, cache.reason  # a new epoch every call before
        assert (cache.epoch, cache.epoch_calls) == (first.plan.cache.epoch, n)
        assert "the turns from #20 are kept" in cache.reason, cache.reason
        assert "(new epoch)" not in ctx.plan.explain()


def test_a_re_anchored_tail_says_why(tmp_path: Path, embedder: FastEmbedder) -> None:
    re_anchored = 0
    with _mem(tmp_path, embedder) as mem:
        mem.append_many("c", _turns(10))
        for i in range(10, 30):
            user, answer = _turns(i + 1)[-2:]
            mem.append("c", user)
            ctx = mem.context("c", str(user["content"]), GROWING_BUDGET, system=SYSTEM)
            cache = ctx.plan.cache
            if cache.new_epoch and cache.epoch > 1:
                re_anchored += 1
                # the tail from the previous start no longer fits: said, with the new start
                found = re.fullmatch(r"before_latest: the tail starts anew at #(\d+): the turns from #(\d+) grew to "
                                     r"(\d+) tokens, past the (\d+) they may take \(.*\)", cache.reason)
                assert found, cache.reason  # "epochs are off (messages are converted or moved ...)" before
                start, grew, room = int(found[1]), int(found[3]), int(found[4])
                assert grew > room and start > int(found[2])
                assert start == min(p for it in ctx.plan.items if it.slice == "tail" for p in it.positions)
                assert cache.reason in ctx.plan.explain()
            mem.append("c", answer)
    assert re_anchored >= 2  # the premise: the tail re-anchors within these turns
