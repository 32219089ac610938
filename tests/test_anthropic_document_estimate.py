"""A document the API fetches (given by URL or by file id) is kept whole and sent so where
the budget has room; tiermem never fetches it, so what it costs is an estimate. It was the
flat 1,024 of `tiers.formats.REFERENCE_TOKENS`, under the cost of one PDF page at
Anthropic's own rates (a page's text 1,500 to 3,000 tokens, and the page as an image, up
to about 1,600), and nothing said the count was a guess. Now it is a named setting,
`DOCUMENT_REFERENCE_TOKENS` (one page at the top of both: 4,600), that a caller who knows
its documents changes (`to_anthropic(document_tokens=...)`), and the request's `notes`
name each such document it sends whole as counted at that estimate. Real Memory, real
anthropic SDK types."""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic.types import MessageParam
from pydantic import ConfigDict, TypeAdapter

from tiermem import Config, Memory
from tiermem.adapters.anthropic import (
    DOCUMENT_REFERENCE_TOKENS,
    PDF_PAGE_IMAGE_TOKENS,
    PDF_PAGE_TEXT_TOKENS,
    from_anthropic,
    kept_block_tokens,
    to_anthropic,
)
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.tokens import BpeTokenCounter

pytestmark = pytest.mark.usefixtures("clean_env")

_PARAM = TypeAdapter(MessageParam, config=ConfigDict(extra="forbid"))
URL_DOC = {"type": "document", "source": {"type": "url", "url": "https://files.test/q3-report.pdf"},
           "title": "Q3 report"}
FILE_DOC = {"type": "document", "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"},
            "title": "Q4 report"}
QUESTION = "What changed between them?"


def _open(tmp_path: Any, embedder: FastEmbedder) -> Memory:
    return Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False)


def test_the_estimate_is_one_pdf_page_at_anthropics_rates() -> None:
    # before: 1,024, under the text of one page alone
    assert DOCUMENT_REFERENCE_TOKENS == PDF_PAGE_TEXT_TOKENS + PDF_PAGE_IMAGE_TOKENS == 4_600


# (document, document_tokens given or None for the default, what it costs above its JSON)
COSTS: list[tuple[dict[str, Any], int | None, int]] = [
    (URL_DOC, None, DOCUMENT_REFERENCE_TOKENS),  # by URL, the default estimate
    (FILE_DOC, None, DOCUMENT_REFERENCE_TOKENS),  # by file id: the same
    (URL_DOC, 30 * 2_300, 30 * 2_300),  # a caller's figure: a 30-page report at 2,300 a page
    (URL_DOC, 0, 0),  # a caller who counts it elsewhere
]


@pytest.mark.parametrize(("doc", "given", "payload"), COSTS, ids=["url", "file", "30 pages", "zero"])
def test_a_fetched_document_costs_the_estimate_given(doc: dict[str, Any], given: int | None, payload: int) -> None:
    counter = BpeTokenCounter()
    text = counter.count(json.dumps(doc, separators=(",", ":")))
    cost = kept_block_tokens(counter, doc) if given is None else kept_block_tokens(counter, doc,
                                                                                  document_tokens=given)
    assert cost == text + payload


# (budget, document_tokens or None, the documents sent whole, by title). The plan counts
# each document's words (about 15 tokens) and the turns' text, about 70 tokens in all
SENDS: list[tuple[int, int | None, list[str]]] = [
    (20_000, None, ["Q3 report", "Q4 report"]),  # room for both at 4,600 each
    # room for neither at 4,600 each: both as their words (before, at 1,024, both went whole)
    (4_000, None, []),
    (20_000, 25_000, []),  # a caller's 25,000 a document: neither fits
    (3_000, 1_000, ["Q3 report", "Q4 report"]),  # a caller's 1,000 a document: both fit
]


@pytest.mark.parametrize(("budget", "given", "whole"), SENDS, ids=["default room", "no room", "large", "small"])
def test_the_request_says_which_counts_are_estimates(tmp_path: Any, embedder: FastEmbedder, budget: int,
                                                      given: int | None, whole: list[str]) -> None:
    with _open(tmp_path, embedder) as mem:
        for m in ({"role": "user", "content": [URL_DOC, {"type": "text", "text": "Read this."}]},
                  {"role": "assistant", "content": "Read."},
                  {"role": "user", "content": [FILE_DOC, {"type": "text", "text": QUESTION}]}):
            mem.append_many("c", from_anthropic(m))
        ctx = mem.context("c", QUESTION, budget)
        req = to_anthropic(ctx, mem) if given is None else to_anthropic(ctx, mem, document_tokens=given)
        for m in req.messages:
            _PARAM.validate_python(m)
        sent = [(t, i, b) for t, m in enumerate(req.messages) for i, b in enumerate(m["content"])
                if b["type"] == "document"]
        assert [b["title"] for _t, _i, b in sent] == whole
        # one note for each document sent whole, naming where it is and the figure it was counted at
        tokens = DOCUMENT_REFERENCE_TOKENS if given is None else given
        assert [n for n in req.notes if "an estimate" in n] == [f"messages[{t}].content[{i}]: a document given by {b['source']['type']}, counted at "
                             f"{tokens} tokens, an estimate (its size is not known without fetching it: "
                             "to_anthropic's document_tokens)" for t, i, b in sent]


# (document_tokens, why it is refused)
BAD: list[tuple[Any, str]] = [
    (-1, "negative"),
    (True, "a bool is no count"),
    (1.5, "not an integer"),
    (10_000_001, "past the bound"),
]


@pytest.mark.parametrize(("given", "why"), BAD, ids=[b[1] for b in BAD])
def test_a_bad_estimate_is_refused_naming_it(tmp_path: Any, embedder: FastEmbedder, given: Any, why: str) -> None:
    with _open(tmp_path, embedder) as mem:
        mem.append_many("c", from_anthropic({"role": "user", "content": [URL_DOC, {"type": "text", "text": QUESTION}]}))
        ctx = mem.context("c", QUESTION, 2_000)
        with pytest.raises(ValidationError) as err:
            to_anthropic(ctx, mem, document_tokens=given)
        assert err.value.field == "document_tokens"
        assert "0..10000000" in str(err.value)
