"""What `to_anthropic(ctx, memory)` puts back from metadata besides kept blocks was sent
without a count: a web search answer's text blocks with their `citations` (each a
`web_search_result_location` with an `encrypted_index`: 16 of them sent at a budget of 300
for a context planned at about 100 tokens) and a `tool_result`'s content kept whole
(`anthropic_content`: an image and a PDF, about 5,100 tokens, sent for a context planned at
34). The plan counted the text the stored message holds (the text without its citations,
the result's text), so "the budget holds for the request" was false. Now each is counted
in the same guard as the kept blocks, by the same rule (`kept_block_tokens`: its JSON as
text, payloads by their decoded bytes), and where it does not fit it goes as the plan
counted it. Counted here from the request itself; real Memory; requests checked against
the SDK's MessageParam."""

from __future__ import annotations

import base64
import copy
import json
import math
from typing import Any

import pytest
from anthropic.types import MessageParam
from pydantic import ConfigDict, TypeAdapter

from tiermem import Config, Memory
from tiermem.adapters.anthropic import from_anthropic, to_anthropic
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import FILE_BYTES_PER_TOKEN
from tiermem.tiers.tokens import TokenCounter

pytestmark = pytest.mark.usefixtures("clean_env")

_PARAM = TypeAdapter(MessageParam, config=ConfigDict(extra="forbid"))
META_BYTES = 256 * 1024
INDEX_BYTES = 300  # decoded bytes of a citation's encrypted index: 75 tokens
CITED = "The harbour forecast says sunny skies with light winds all week long, temperatures around 24 degrees."
PAYLOAD_BYTES = 10_240  # an image's and a PDF's decoded bytes: 2,560 tokens each


def _b64(n: int, seed: int) -> str:
    return base64.b64encode(bytes((seed + 7 * i) % 256 for i in range(n))).decode()


def _cost(counter: TokenCounter, block: dict[str, Any]) -> int:
    """A block as sent: its JSON counted as text, less its payloads (encrypted strings and
    base64 data), each counted at its decoded bytes / FILE_BYTES_PER_TOKEN."""
    shown = copy.deepcopy({k: v for k, v in block.items() if k != "cache_control"})
    payload = 0
    stack: list[Any] = [shown]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, dict):
            for k in list(v):
                if k in ("encrypted_index", "encrypted_content") or (k == "data" and v.get("type") == "base64"):
                    payload += math.ceil(len(v[k]) * 3 // 4 / FILE_BYTES_PER_TOKEN)
                    v[k] = ""
                else:
                    stack.append(v[k])
    return counter.count(json.dumps(shown, ensure_ascii=False, separators=(",", ":"))) + payload


CITED_REPLY = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "end_turn",
    "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
    "content": [{"type": "text", "text": f"Point {k}: it is sunny.", "citations": [
        {"type": "web_search_result_location", "url": f"https://news{k}-{j}.test/article", "title": f"Article {k}.{j}",
         "encrypted_index": _b64(INDEX_BYTES, k * 3 + j), "cited_text": CITED} for j in range(2)]} for k in range(8)]}
CITED_TALK: list[Any] = [{"role": "user", "content": "Weather in Lisbon?"}, CITED_REPLY,
                         {"role": "user", "content": "Thanks, and tomorrow?"}]
RESULT_TALK: list[Any] = [
    {"role": "user", "content": "Take a screenshot and fetch the report."},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
        {"type": "text", "text": "here"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _b64(PAYLOAD_BYTES, 1)}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                        "data": _b64(PAYLOAD_BYTES, 2)}}]}]},
    {"role": "assistant", "content": "Done."},
    {"role": "user", "content": "Thanks."},
]


def _extra(counter: TokenCounter, req: Any) -> tuple[int, int]:
    """(the tokens sent beyond what the plan counted, the blocks sent with restored data):
    a text block's citations, a tool result's content beyond its text ("here")."""
    extra = n = 0
    for m in req.messages:
        for b in m["content"]:
            if b["type"] == "text" and b.get("citations"):
                extra += _cost(counter, b) - _cost(counter, {"type": "text", "text": b["text"]})
                n += 1
            elif b["type"] == "tool_result" and isinstance(b["content"], list):
                extra += _cost(counter, b) - _cost(counter, {**b, "content": "here"})
                n += 1
    return extra, n


# (case, the conversation, budget in tokens, blocks sent with their restored data)
CASES: list[tuple[str, list[Any], int, int]] = [
    # no room for one block's citations (about 260 tokens each with its two encrypted indexes):
    # before, all 8 went, about 2,000 tokens past the plan's count
    ("citations_no_room", CITED_TALK, 300, 0),
    # room for the first three answers' citations, the later ones as plain text
    ("citations_some_room", CITED_TALK, 1_000, 3),
    ("citations_room", CITED_TALK, 100_000, 8),  # every block with its citations
    ("tool_result_no_room", RESULT_TALK, 1_000, 0),  # before: image and PDF sent, about 5,100 past the plan's 34
    ("tool_result_room", RESULT_TALK, 100_000, 1),  # the image and the PDF go back whole
]


@pytest.mark.parametrize(("case", "talk", "budget", "restored"), CASES, ids=[c[0] for c in CASES])
def test_restored_citations_and_results_stay_within_the_budget(tmp_path: Any, embedder: FastEmbedder, case: str,
                                                              talk: list[Any], budget: int, restored: int) -> None:
    with Memory(Config(data_dir=tmp_path / "data", max_metadata_bytes=META_BYTES), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        for m in talk:
            mem.append_many("c", from_anthropic(m, max_metadata_bytes=META_BYTES))
        ctx = mem.context("c", talk[-1]["content"], budget)
        req = to_anthropic(ctx, mem)
        for m in req.messages:
            _PARAM.validate_python(m)
        extra, n = _extra(mem.tokens, req)
        assert n == restored
        assert ctx.tokens + extra <= budget
        if case.startswith("tool_result") and not restored:  # the result as its stored text
            assert [b["content"] for m in req.messages for b in m["content"] if b["type"] == "tool_result"] == ["here"]
