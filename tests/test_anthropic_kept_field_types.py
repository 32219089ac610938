"""A block `from_anthropic` keeps whole is sent back verbatim by `to_anthropic`, so a field
of the wrong type stored there (a document's `source.data: 5`, a web search result's
`content: 5`, a search result's `content: ["x", 3]`) would have every later request of the
conversation refused by the API. The fields sent back are now checked by the types of the
anthropic SDK's param TypedDicts and a wrong one refused naming it (`ValidationError`),
nothing returned to append; the shapes the SDK takes still pass and are sent back as
given. Checked against the SDK's MessageParam with a real Memory."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import MessageParam
from pydantic import ConfigDict, TypeAdapter

from tiermem import Config, Memory
from tiermem.adapters.anthropic import from_anthropic, to_anthropic
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import ValidationError

pytestmark = pytest.mark.usefixtures("clean_env")

_PARAM = TypeAdapter(MessageParam, config=ConfigDict(extra="forbid"))
RESULT = {"type": "web_search_result", "url": "https://a.test", "title": "A", "encrypted_content": "EqgfCioI"}


def _search(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "srv1", "name": "web_search", "input": {"query": "q"}},
        {"type": "web_search_tool_result", "tool_use_id": "srv1", "content": content}]}


def _doc(source: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "document", "source": source, **fields}]}


def _code(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "srv2", "name": "code_execution", "input": {"code": "print(1)"}},
        {"type": "code_execution_tool_result", "tool_use_id": "srv2", "content": content}]}


# (case, message, the field named)
REFUSED: list[tuple[str, dict[str, Any], str]] = [
    # a web search's content: a list of results or an error object, never a string or a number
    ("search_content_int", _search(5), "content[1].content"),
    ("search_content_str", _search("oops"), "content[1].content"),
    ("search_result_not_block", _search(["a", 1]), "content[1].content[0]"),
    # each result's url, title and encrypted page: strings (the API reads them back)
    ("encrypted_content_int", _search([{**RESULT, "encrypted_content": 5}]), "content[1].content[0].encrypted_content"),
    ("result_title_missing", _search([{k: v for k, v in RESULT.items() if k != "title"}]),
     "content[1].content[0].title"),
    # any other server result's content: an object with a type
    ("code_content_list", _code([1]), "content[1].content"),
    # a document's source, by its type: base64 and text data strings, of their media type
    ("pdf_data_int", _doc({"type": "base64", "media_type": "application/pdf", "data": 5}), "content[0].source.data"),
    ("base64_not_pdf", _doc({"type": "base64", "media_type": "text/plain", "data": "aGk="}),
     "content[0].source.media_type"),
    ("text_data_list", _doc({"type": "text", "media_type": "text/plain", "data": ["x"]}), "content[0].source.data"),
    ("url_int", _doc({"type": "url", "url": 5}), "content[0].source.url"),
    ("file_id_missing", _doc({"type": "file"}), "content[0].source.file_id"),
    ("unknown_source", _doc({"type": "s3", "url": "s3://b/k"}), "content[0].source.type"),
    ("content_items_not_blocks", _doc({"type": "content", "content": ["x"]}), "content[0].source.content[0]"),
    ("content_int", _doc({"type": "content", "content": 5}), "content[0].source.content"),
    ("title_int", _doc({"type": "url", "url": "https://a.test/r.pdf"}, title=5), "content[0].title"),
    ("context_list", _doc({"type": "url", "url": "https://a.test/r.pdf"}, context=["c"]), "content[0].context"),
    # a search result's content: text blocks
    ("search_result_content_mixed", {"role": "user", "content": [
        {"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text", "text": "x"}, 3]}]},
     "content[0].content[1]"),
    ("search_result_text_int", {"role": "user", "content": [
        {"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text", "text": 3}]}]},
     "content[0].content[0].text"),
]


@pytest.mark.parametrize(("case", "message", "named"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_kept_field_of_the_wrong_type_is_refused_naming_it(case: str, message: dict[str, Any], named: str) -> None:
    with pytest.raises(ValidationError) as e:
        from_anthropic(message)
    assert e.value.field == named  # before: stored, and sent back as it was


# (case, message): the shapes the SDK's param types take
ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("search_results", _search([RESULT])),
    ("search_error", _search({"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"})),
    ("search_no_results", _search([])),
    ("code_result", _code({"type": "code_execution_result", "stdout": "1", "stderr": "", "return_code": 0,
                           "content": []})),
    ("text_document", _doc({"type": "text", "media_type": "text/plain", "data": "notes"}, title="Notes")),
    ("content_document_str", _doc({"type": "content", "content": "hello"})),
    ("content_document_blocks", _doc({"type": "content", "content": [
        {"type": "text", "text": "hi"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]})),
    ("url_document", _doc({"type": "url", "url": "https://a.test/r.pdf"}, context="Q3")),
    ("file_document", _doc({"type": "file", "file_id": "file_1"})),
]


@pytest.mark.parametrize(("case", "message"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_the_sdk_shapes_are_kept_and_sent_back(tmp_path: Any, embedder: FastEmbedder, case: str,
                                               message: dict[str, Any]) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        opening = [] if message["role"] == "user" else [{"role": "user", "content": "go"}]
        mem.append_many("c", opening + from_anthropic(message) + [{"role": "user", "content": "next"}])
        req = to_anthropic(mem.context("c", "next", 100_000), mem)
        for m in req.messages:
            _PARAM.validate_python(m)
        sent = [{k: v for k, v in b.items() if k != "cache_control"} for m in req.messages for b in m["content"]]
        for block in message["content"]:
            assert block in sent  # whole, as given
