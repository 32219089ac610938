"""Property: a valid generated conversation (text, images, parallel tool_use / tool_result,
thinking) stored with `from_anthropic` in a real Memory and read back with
`to_anthropic(ctx, mem, thinking="all")` is a request the API takes (user first, roles
alternating, every tool_use answered in the next user message, at most 4 cache_control
marks, no empty text block) and, with a budget that holds it all, what was sent.
Examples few (each embeds and writes); TIERMEM_FUZZ_EXAMPLES for more."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from anthropic_strategies import EXAMPLES, conversation
from hypothesis import HealthCheck, given, settings

from tiermem import Config, Memory
from tiermem.adapters.anthropic import from_anthropic, to_anthropic
from tiermem.planner.plan import MAX_BREAKPOINTS
from tiermem.tiers.embed_onnx import FastEmbedder

BUDGET = 50_000  # tokens: holds every generated conversation whole
ROUND_TRIP_EXAMPLES = max(1, EXAMPLES // 15)
_ids = itertools.count()


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path_factory.mktemp("rt") / "data"), embedder=embedder, hot=False,
                background_indexing=False) as m:
        yield m


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _strip(b: dict[str, Any]) -> dict[str, Any]:
    """`b` without `cache_control`, in a tool_result's content too: the adapter keeps a sent
    mark in metadata but never sends it back (the plan's breakpoints place the marks)."""
    out = {k: v for k, v in b.items() if k != "cache_control"}
    if b.get("type") == "tool_result" and isinstance(b.get("content"), list):
        out["content"] = [_strip(c) if isinstance(c, dict) else c for c in b["content"]]
    return out


@settings(max_examples=ROUND_TRIP_EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(conversation())
def test_round_trip(mem: Memory, convo: list[dict[str, Any]]) -> None:
    conv = f"rt-{next(_ids)}"  # one Memory across examples, a fresh conversation each
    for m in convo:
        mem.append_many(conv, from_anthropic(m))
    req = to_anthropic(mem.context(conv, None, BUDGET, namespace_recall=False), mem, thinking="all")
    msgs = req.messages
    assert msgs[0]["role"] == "user"
    assert all(a["role"] != b["role"] for a, b in itertools.pairwise(msgs))
    for i, m in enumerate(msgs):
        uses = {b["id"] for b in m["content"] if b["type"] == "tool_use"}
        if uses:
            answered = {b["tool_use_id"] for b in msgs[i + 1]["content"] if b["type"] == "tool_result"}
            assert uses <= answered
    blocks = [b for m in msgs for b in m["content"]] + req.system
    assert sum("cache_control" in b for b in blocks) <= MAX_BREAKPOINTS
    assert all(b["text"].strip() for b in blocks if b["type"] == "text")
    want = [{"role": m["role"], "content": [_strip(b) for b in _blocks(m["content"])]} for m in convo]
    assert [{"role": m["role"], "content": [_strip(b) for b in m["content"]]} for m in msgs] == want


def test_equal_messages_each_get_their_own_rows_metadata(mem: Memory) -> None:
    """Found by the property: two equal messages in the tail were both matched to the later
    row with Anthropic metadata (by their wire form), so the first came back with the
    second's citations (or, for two equal replies, with its thinking: a 400 from the API)."""
    cited = {"type": "text", "text": "0", "citations": [{"type": "char_location", "cited_text": "0",
                                                          "document_index": 0, "document_title": "w",
                                                          "start_char_index": 0, "end_char_index": 1}]}
    convo = [{"role": "user", "content": "0"}, {"role": "assistant", "content": "ok"},
             {"role": "user", "content": [cited]}]
    cid = "equal-messages"
    for m in convo:
        mem.append_many(cid, from_anthropic(m))
    req = to_anthropic(mem.context(cid, "0", 8000), mem)
    assert [[_strip(b) for b in m["content"]] for m in req.messages] == [
        [{"type": "text", "text": "0"}], [{"type": "text", "text": "ok"}], [cited]]


def test_a_hidden_row_does_not_shift_the_matches(mem: Memory) -> None:
    """A row the context does not show (here retracted) took its place in the n-th-row
    matching, so the shown "ok" came back with the hidden one's thinking (a wrong signature:
    a 400 from the API in a tool loop). Only the rows the tail shows are matched."""
    from tiermem.adapters._common import retract_latest

    sig = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDYXJlZnVsbHkgdGhpbmsiMHNpZ25lZA=="
    cid = "hidden-row"
    mem.append_many(cid, from_anthropic({"role": "user", "content": "hi"}))
    mem.append_many(cid, from_anthropic({"role": "assistant", "content": [
        {"type": "thinking", "thinking": "OLD", "signature": sig}, {"type": "text", "text": "ok"}]}))
    retract_latest(mem, cid)
    mem.append_many(cid, from_anthropic({"role": "assistant", "content": [
        {"type": "thinking", "thinking": "NEW", "signature": sig}, {"type": "text", "text": "ok"}]}))
    req = to_anthropic(mem.context(cid, None, 8000), mem, thinking="all")
    thinking = [b["thinking"] for m in req.messages for b in m["content"] if b["type"] == "thinking"]
    assert thinking == ["NEW"]
