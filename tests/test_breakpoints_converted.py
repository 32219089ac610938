"""Breakpoints index the messages the caller receives (issue 22), also when the context
is converted to one message family (`context_format`) or its system messages are folded
(`system_messages="merge"`): a conversion splits an assistant message with tool calls
into several Responses items, joins consecutive calls into one chat message, drops
reasoning items; a fold moves every system message into the first.

Fails on the code before: breakpoints indexed the planned messages, before conversion,
so an index could point past the end, at another layer's message, or at a message whose
content changes from call to call (a fold puts this call's retrieved block into the
first message, where a `cache_control` marker would write a prefix never read back).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sdk_corpus as corpus
from convo_fixtures import depot_notes

from tiermem import Config, Memory
from tiermem.planner.render import HEADERS
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.tokens import message_tokens

SYSTEM = "Be brief."
QUERIES = ("which flight and what weather?", "what did the tool say about Tokyo?")
BUDGETS = (400, 900, 2200)


def _mem(tmp_path: Path, embedder: FastEmbedder, **kw: Any) -> Memory:
    return Memory(Config(data_dir=tmp_path / "d", **kw), embedder=embedder, hot=False, background_indexing=False)


# (context_format, system_messages, conversation): each way the returned messages differ
# from the planned ones
CASES = [
    ("responses", "as_is", corpus.chat_conversation),  # an assistant turn with tool calls splits into items
    ("chat", "as_is", corpus.responses_conversation),  # calls join into one message, reasoning is dropped
    ("as_stored", "merge", depot_notes),  # the pinned block and the retrieved block fold into the first message
    ("chat", "merge", corpus.responses_conversation),  # both at once
]


@pytest.mark.parametrize(("fmt", "policy", "conversation"), CASES,
                         ids=[f"{f}-{p}-{c.__name__}" for f, p, c in CASES])
def test_breakpoints_index_the_returned_messages(tmp_path: Path, embedder: FastEmbedder, fmt: str,
                                                 policy: str, conversation: Any) -> None:
    with _mem(tmp_path, embedder, context_format=fmt, system_messages=policy) as mem:
        mem.append_many("c", conversation())
        for budget in BUDGETS:
            a, b = (mem.context("c", q, budget, system=SYSTEM) for q in QUERIES)
            for ctx in (a, b):
                marks = ctx.plan.breakpoints
                indexes = [m.index for m in marks]
                assert indexes == sorted(set(indexes)), marks  # increasing, one mark a message
                assert all(0 <= i < len(ctx.messages) for i in indexes), (len(ctx.messages), marks)
                for m in marks:  # tokens up to the mark, counted on what is returned
                    assert m.tokens == sum(message_tokens(mem.tokens, x) for x in ctx.messages[:m.index + 1]), m
                    if m.layer == "context":
                        assert m.index == len(ctx.messages) - 1
                latest = max(i for i, x in enumerate(ctx.messages) if x.get("role") == "user")
                for m in marks:
                    if m.layer == "stable":  # it ends where this call's own part begins
                        nxt = ctx.messages[m.index + 1]
                        assert m.index + 1 == latest or str(nxt.get("content")).startswith(HEADERS["retrieved"]), m
            # what a layer's mark says is stable is: another question on the same log
            # (another retrieved block) returns the same messages up to it
            for m in a.plan.breakpoints:
                if m.layer in ("system", "pinned", "summary"):
                    assert b.messages[:m.index + 1] == a.messages[:m.index + 1], (budget, m)


def test_a_fold_that_takes_the_retrieved_block_leaves_no_stable_mark_before_it(
        tmp_path: Path, embedder: FastEmbedder) -> None:
    with _mem(tmp_path, embedder, system_messages="merge") as mem:
        mem.append_many("c", depot_notes(40))
        ctx = mem.context("c", "which depot ships for client 3?", 900, system=SYSTEM)
        assert any(it.slice == "retrieved" for it in ctx.plan.items)  # a retrieved block exists
        first = str(ctx.messages[0]["content"])
        assert SYSTEM in first and "retrieved" in first  # ... and the fold put it into the first message
        # so nothing before the end is a stable prefix: only the whole context may be marked
        assert [m.layer for m in ctx.plan.breakpoints] in ([], ["context"]), ctx.plan.breakpoints
