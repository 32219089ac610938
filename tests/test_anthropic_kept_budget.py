"""A block `from_anthropic` keeps whole (`anthropic_blocks`: a server tool's call and
result, a document given by URL, ...) is stored as a text part of its words, and the
planner counts those words; `to_anthropic(ctx, memory)` sent the block itself, so a web
search result whose five results hold 4 KB of `encrypted_content` each, counted at 100
tokens, was sent at 3,987 (`kept_block_tokens`: the rule of `tiers.formats` for what is
not text), and a context planned at 181 tokens for a budget of 1,000 went out at 5,124
(the budget is hard: docs/design.md). Now a kept block is counted as what it sends, and where the
context with each one whole would pass the plan's budget, the newest go back as their
words (a server call with its results), so that the earlier messages stay as the previous
call of the epoch sent them (tests/test_anthropic_kept_prefix.py). Real Memory, real anthropic SDK
types; what is sent is counted here from the request itself."""

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
from tiermem.adapters.anthropic import (
    DOCUMENT_REFERENCE_TOKENS,
    from_anthropic,
    kept_block_tokens,
    to_anthropic,
)
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import FILE_BYTES_PER_TOKEN
from tiermem.tiers.tokens import BpeTokenCounter

pytestmark = pytest.mark.usefixtures("clean_env")

_PARAM = TypeAdapter(MessageParam, config=ConfigDict(extra="forbid"))
META_BYTES = 256 * 1024  # five 4 KB encrypted results pass the default 16 KiB of metadata
ENCRYPTED_BYTES = 3000  # decoded bytes of one result's encrypted page (4,000 base64 characters)
QUESTION = "Thanks, what next?"


def _b64(n: int, seed: int) -> str:
    return base64.b64encode(bytes((seed + 7 * i) % 256 for i in range(n))).decode()


RESULTS = [{"type": "web_search_result", "url": f"https://site{i}.test/lisbon-weather-{i}",
            "title": f"Lisbon harbour forecast {i}", "encrypted_content": _b64(ENCRYPTED_BYTES, i),
            "page_age": "May 1, 2025"} for i in range(5)]
SEARCH_REPLY = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "end_turn",
    "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}, "content": [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "lisbon weather"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": RESULTS},
        {"type": "text", "text": "It is sunny all week in Lisbon."}]}
URL_DOC = {"type": "document", "source": {"type": "url", "url": "https://files.test/q3-report.pdf"},
           "title": "Q3 report"}
PDF = _b64(20_000, 1)  # a PDF as data: a file part, counted by the plan as sent (not a kept block)
CONVERSATION: list[Any] = [
    {"role": "user", "content": [{"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                                 "data": PDF}}, {"type": "text", "text": "Summarize."}]},
    {"role": "assistant", "content": "The report shows growth."},
    {"role": "user", "content": [URL_DOC, {"type": "text", "text": "And this one?"}]},
    {"role": "assistant", "content": "Noted."},
    {"role": "user", "content": "What is the weather in Lisbon?"},
    SEARCH_REPLY,
    {"role": "user", "content": QUESTION},
]
KEPT = ("server_tool_use", "web_search_tool_result")


def _sent_tokens(counter: BpeTokenCounter, ctx_tokens: int, words: dict[str, str], req: Any) -> int:
    """What the request sends, counted: the plan's count, each kept block sent whole
    counted as its JSON's text less its payloads, which count by the rule of
    tiers.formats (decoded bytes at FILE_BYTES_PER_TOKEN; a URL document the estimate
    DOCUMENT_REFERENCE_TOKENS) instead of its words, which the plan counted."""
    total = ctx_tokens
    for m in req.messages:
        for b in m["content"]:
            if b["type"] in KEPT or (b["type"] == "document" and b["source"]["type"] == "url"):
                shown = copy.deepcopy(b)
                payload = 0
                if b["type"] == "web_search_tool_result":
                    for r in shown["content"]:
                        payload += math.ceil(len(r["encrypted_content"]) * 3 // 4 / FILE_BYTES_PER_TOKEN)
                        r["encrypted_content"] = ""
                if b["type"] == "document":
                    payload += DOCUMENT_REFERENCE_TOKENS
                total += counter.count(json.dumps(shown, separators=(",", ":"))) + payload
                total -= counter.count(words[b["type"]])
    return total


def _open(tmp_path: Any, embedder: FastEmbedder) -> Memory:
    return Memory(Config(data_dir=tmp_path / "data", max_metadata_bytes=META_BYTES), embedder=embedder, hot=False,
                  background_indexing=False)


# (budget in tokens, the kept blocks sent whole). The plan holds the turns after the PDF's
# (about 180 tokens: the PDF's turn does not fit in 5,000 with them), the search pair sent
# whole adds about 3,900, the URL document about 4,630 (DOCUMENT_REFERENCE_TOKENS: 4,600)
BUDGETS: list[tuple[int, list[str]]] = [
    (100_000, ["document", *KEPT]),  # room for every block whole
    # the oldest, the URL document, goes whole; the search pair after it no longer fits and goes
    # as its words (the newest first: the earlier messages stay as an earlier call sent them)
    (5_000, ["document"]),
    (1_000, []),  # none fits whole: every one as its words
    (300, []),  # the plan itself near the budget
]


@pytest.mark.parametrize(("budget", "whole"), BUDGETS, ids=[str(b[0]) for b in BUDGETS])
def test_what_to_anthropic_sends_stays_within_the_budget(tmp_path: Any, embedder: FastEmbedder, budget: int,
                                                        whole: list[str]) -> None:
    with _open(tmp_path, embedder) as mem:
        for m in CONVERSATION:
            mem.append_many("c", from_anthropic(m, max_metadata_bytes=META_BYTES))
        words = {"document": mem.history("c")[2].body["content"][0]["text"],
                 "server_tool_use": mem.history("c")[5].body["content"][0]["text"],
                 "web_search_tool_result": mem.history("c")[5].body["content"][1]["text"]}
        ctx = mem.context("c", QUESTION, budget)
        req = to_anthropic(ctx, mem)
        for m in req.messages:
            json.dumps(_PARAM.validate_python(m), default=list)
        blocks = [b for m in req.messages for b in m["content"]]
        sent = [b["type"] for b in blocks
                if b["type"] in KEPT or (b["type"] == "document" and b["source"]["type"] == "url")]
        assert sent == whole
        assert _sent_tokens(mem.tokens, ctx.tokens, words, req) <= budget  # before: 5,124 at 4,500 and 1,000, 4,055 at 300
        # a block not sent whole goes as its words, which the plan counted
        texts = "\n".join(b["text"] for b in blocks if b["type"] == "text")
        shown = {p for it in ctx.plan.items if it.slice == "tail" for p in it.positions}
        for kind, position in (("document", 2), ("server_tool_use", 5), ("web_search_tool_result", 5)):
            if kind not in whole and position in shown:
                assert words[kind] in texts
        # the words are what search reads, whatever is sent
        hits = mem.search("c", "harbour forecast", 3)
        assert 5 in [h.position for h in hits if h.ranks.get("bm25")]  # "harbour" is only in the titles


# (block, the tokens of its JSON text counted as text, the payload tokens by the rule)
RULE: list[tuple[str, dict[str, Any], int]] = [
    # five encrypted pages: 3,000 decoded bytes each at 4 bytes a token
    ("web_search_result", SEARCH_REPLY["content"][1], 5 * math.ceil(ENCRYPTED_BYTES / FILE_BYTES_PER_TOKEN)),
    # a document the API fetches: the estimate for a document given by URL (one PDF page)
    ("url_document", URL_DOC, DOCUMENT_REFERENCE_TOKENS),
    # a plain-text document: all of it text
    ("text_document", {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                                      "data": "the fetched marmalade recipe"}}, 0),
    # base64 data (a fetched PDF in a web_fetch result holds one): its decoded bytes, 3,000
    ("base64_document", {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                        "data": _b64(3000, 3)}, "cache_control": {"type": "ephemeral"},
                         "citations": {"enabled": True}}, 750),
]


@pytest.mark.parametrize(("case", "block", "payload"), RULE, ids=[c[0] for c in RULE])
def test_a_kept_block_costs_its_text_and_its_payloads(case: str, block: dict[str, Any], payload: int) -> None:
    counter = BpeTokenCounter()
    before = copy.deepcopy(block)
    text = copy.deepcopy({k: v for k, v in block.items() if k != "cache_control"})
    for r in text.get("content") or ():
        if isinstance(r, dict) and "encrypted_content" in r:
            r["encrypted_content"] = ""
    if text["type"] == "document" and text["source"]["type"] == "base64":
        text["source"]["data"] = ""
    assert kept_block_tokens(counter, block) == counter.count(json.dumps(text, separators=(",", ":"))) + payload
    assert block == before  # counted, not changed: the request sends it
