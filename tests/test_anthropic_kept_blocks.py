"""`from_anthropic` takes the Anthropic SDK's blocks that OpenAI's chat form has no part for:
a reply with a server tool's call and its result (`server_tool_use` with
`web_search_tool_result`, `web_fetch_tool_result`, `code_execution_tool_result`), a user
turn's `document` (a PDF as data, plain text, custom content, a URL) and `search_result`,
a `container_upload`. Before, each was refused ("content[0].type: 'server_tool_use' is not
a block type tiermem converts"), so an agent with web search or documents could store
none of those turns, while the LangChain history kept the same blocks. Now each is kept
whole in metadata (`anthropic_blocks`) with a text part holding its words in the stored
body (a PDF given as data: a `file` part), so search and the planner read them, and
`to_anthropic` sends it back as given, a server call with its result in the same
assistant turn (a call without its result only in the request's last message: a reply
that stopped with `pause_turn`). Real anthropic SDK types (replies built with
`Message.model_validate`, requests checked against `MessageParam` with extra keys
forbidden), a real Memory; no network."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import sdk_corpus as corpus
from anthropic.types import Message, MessageParam
from pydantic import ConfigDict, TypeAdapter

from tiermem import Config, Memory
from tiermem.adapters.anthropic import BLOCKS_KEY, EXTRA_KEY, from_anthropic, to_anthropic
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import ValidationError

pytestmark = pytest.mark.usefixtures("clean_env")

_PARAM = TypeAdapter(MessageParam, config=ConfigDict(extra="forbid"))
PDF = base64.b64encode(b"%PDF-1.4 quarterly figures").decode()
BUDGET = 20_000  # tokens: every conversation here whole
QUESTION = "What did you find?"


def _reply(content: list[dict[str, Any]], stop: str = "end_turn") -> Message:
    return Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": stop,
        "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}, "content": content})


WEB_SEARCH = [
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "lisbon weather"}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
        {"type": "web_search_result", "url": "https://meteo.test/lisbon", "title": "Zanzibar forecast desk",
         "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1jZjBm", "page_age": "April 30, 2025"}]},
    {"type": "text", "text": "It is sunny.", "citations": [
        {"type": "web_search_result_location", "url": "https://meteo.test/lisbon", "title": "Zanzibar forecast desk",
         "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0", "cited_text": "sunny all week"}]},
]
WEB_FETCH = [
    {"type": "server_tool_use", "id": "srvtoolu_2", "name": "web_fetch", "input": {"url": "https://docs.test/page"}},
    {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_2", "content": {
        "type": "web_fetch_result", "url": "https://docs.test/page", "retrieved_at": "2025-08-25T10:30:02",
        "content": {"type": "document", "title": "Fetched page", "citations": {"enabled": True},
                    "source": {"type": "text", "media_type": "text/plain", "data": "the fetched marmalade recipe"}}}},
    {"type": "text", "text": "Fetched it."},
]
CODE_EXECUTION = [
    {"type": "thinking", "thinking": "Run it.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA"},
    {"type": "server_tool_use", "id": "srvtoolu_3", "name": "code_execution", "input": {"code": "print(6*7)"}},
    {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_3", "content": {
        "type": "code_execution_result", "stdout": "42\n", "stderr": "", "return_code": 0, "content": []}},
    {"type": "text", "text": "The answer is 42."},
]

# (case, the message as the SDK gives it, words its stored body must hold)
ACCEPTED: list[tuple[str, Any, list[str]]] = [
    # a reply with web search: the call, its results (encrypted), cited text
    ("web_search_reply", _reply(WEB_SEARCH), ["lisbon weather", "Zanzibar forecast desk", "It is sunny."]),
    # the same as model_dump(): every unset field written as null
    ("web_search_reply_dump", _reply(WEB_SEARCH).model_dump(), ["lisbon weather", "Zanzibar forecast desk"]),
    # web fetch: the fetched document's text is its words
    ("web_fetch_reply", _reply(WEB_FETCH), ["https://docs.test/page", "the fetched marmalade recipe"]),
    # code execution after thinking: the program and its output
    ("code_execution_reply", _reply(CODE_EXECUTION), ["print(6*7)", "42", "The answer is 42."]),
    # a plain-text document with citations enabled
    ("text_document", {"role": "user", "content": [
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "the grapefruit clause"},
         "title": "Contract", "citations": {"enabled": True}}, {"type": "text", "text": "Cite it."}]},
     ["Contract", "the grapefruit clause", "Cite it."]),
    # a custom-content document and one by URL
    ("content_and_url_documents", {"role": "user", "content": [
        {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "chunk of kumquat"}]}},
        {"type": "document", "source": {"type": "url", "url": "https://docs.test/annual.pdf"}}]},
     ["chunk of kumquat", "https://docs.test/annual.pdf"]),
    # a search result block (RAG with citations)
    ("search_result", {"role": "user", "content": [
        {"type": "search_result", "source": "https://kb.test/refunds", "title": "Refund policy",
         "content": [{"type": "text", "text": "refunds within thirty days"}], "citations": {"enabled": True}},
        {"type": "text", "text": "Use it."}]},
     ["Refund policy", "https://kb.test/refunds", "refunds within thirty days"]),
    # a file uploaded to the code execution container
    ("container_upload", {"role": "user", "content": [
        {"type": "text", "text": "Analyse this CSV."}, {"type": "container_upload", "file_id": "file_011CNha8"}]},
     ["Analyse this CSV.", "[container_upload]"]),
]


def _given(message: Any) -> dict[str, Any]:
    """The message as a request param: a reply's role and blocks, no nulls, no marks."""
    d = message.model_dump(exclude_none=True) if isinstance(message, Message) else message
    content = [{"type": "text", "text": d["content"]}] if isinstance(d["content"], str) else d["content"]
    return {"role": d["role"], "content": _plain(content)}


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if x is not None and k != "cache_control"}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _valid(req_messages: list[dict[str, Any]]) -> None:
    for m in req_messages:
        json.dumps(_PARAM.validate_python(m), default=list)  # walks the lazy iterables too


def _open(tmp_path: Any, embedder: FastEmbedder, **config: Any) -> Memory:
    return Memory(Config(data_dir=tmp_path / "data", **config), embedder=embedder, hot=False,
                  background_indexing=False)


@pytest.mark.parametrize(("case", "message", "words"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_kept_blocks_are_stored_searched_and_sent_back_as_given(tmp_path: Any, embedder: FastEmbedder, case: str,
                                                                 message: Any, words: list[str]) -> None:
    reply = isinstance(message, Message) or message.get("type") == "message"
    convo = ([{"role": "user", "content": QUESTION}, message, {"role": "user", "content": "Thanks."}] if reply
             else [message, {"role": "assistant", "content": "Done."}, {"role": "user", "content": QUESTION}])
    with _open(tmp_path, embedder) as mem:
        for m in convo:
            mem.append_many("c", from_anthropic(m))
        at = 1 if reply else 0
        row = mem.history("c")[at]
        text = json.dumps(row.body, ensure_ascii=False)
        assert all(json.dumps(w, ensure_ascii=False)[1:-1] in text for w in words), row.body
        assert row.metadata is not None and BLOCKS_KEY in row.metadata
        req = to_anthropic(mem.context("c", QUESTION, BUDGET), mem, thinking="all")
        _valid(req.messages)
        assert [_plain(m) for m in req.messages] == [_given(m) for m in convo]  # each block as given
        # no memory: the words as text blocks, a request the API takes
        bare = to_anthropic(mem.context("c", QUESTION, BUDGET))
        _valid(bare.messages)
        assert all(b["type"] in ("text", "document", "tool_use", "tool_result") for m in bare.messages
                   for b in m["content"])
    # the OpenAI form of the same rows: valid chat messages
    with _open(tmp_path, embedder, context_format="chat") as mem:
        corpus.valid_chat(mem.context("c", QUESTION, BUDGET).messages)


def test_search_finds_a_turn_by_its_kept_words(cold_memory: Memory) -> None:
    # "Zanzibar" is only in a web search result's title: the reply's text part holds it
    cold_memory.append_many("c", from_anthropic({"role": "user", "content": "Weather?"}))
    cold_memory.append_many("c", from_anthropic(_reply(WEB_SEARCH)))
    hits = cold_memory.search("c", "Zanzibar forecast", 3)
    assert hits and hits[0].position == 1


def test_a_pdf_document_is_a_file_part_and_goes_back_as_the_block(cold_memory: Memory) -> None:
    doc = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
           "title": "Q3 report", "context": "internal", "citations": {"enabled": True}}
    [stored] = from_anthropic({"role": "user", "content": [doc, {"type": "text", "text": "Summarize."}]})
    # the PDF once, in the body (the metadata keeps only what the file part has no field for)
    assert stored["content"][0] == {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{PDF}",
                                                             "filename": "Q3 report.pdf"}}
    assert stored["metadata"] == {EXTRA_KEY: [[0, {"title": "Q3 report", "context": "internal",
                                                   "citations": {"enabled": True}}]]}
    cold_memory.append_many("c", [stored])
    req = to_anthropic(cold_memory.context("c", None, BUDGET), cold_memory)
    _valid(req.messages)
    assert [_plain(b) for b in req.messages[0]["content"]] == [doc, {"type": "text", "text": "Summarize."}]


def test_a_paused_server_call_goes_back_only_as_the_last_message(cold_memory: Memory) -> None:
    # stop_reason pause_turn: the reply ends in a server call the API has not answered yet
    paused = _reply([{"type": "text", "text": "Searching."}, WEB_SEARCH[0]], stop="pause_turn")
    for m in ({"role": "user", "content": "Weather?"}, paused):
        cold_memory.append_many("c", from_anthropic(m))
    req = to_anthropic(cold_memory.context("c", None, BUDGET), cold_memory)
    _valid(req.messages)
    # sent back as it is, for the API to go on with it
    assert [_plain(b) for b in req.messages[-1]["content"]] == [{"type": "text", "text": "Searching."}, WEB_SEARCH[0]]
    # once a user turn follows, the unanswered call is left out (the API refuses it there)
    cold_memory.append_many("c", from_anthropic({"role": "user", "content": "Go on."}))
    req = to_anthropic(cold_memory.context("c", None, BUDGET), cold_memory)
    _valid(req.messages)
    assert [_plain(m) for m in req.messages] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Searching."}]},
        {"role": "user", "content": [{"type": "text", "text": "Go on."}]}]


# (case, message, the field the error names): refused, nothing returned to append
REFUSED: list[tuple[str, dict[str, Any], str]] = [
    # a reply cannot hold a user's document
    ("document_in_a_reply", {"role": "assistant", "content": [
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}]},
     "content[0].type"),
    # a user turn cannot hold a server tool's call
    ("server_call_from_the_user", {"role": "user", "content": [WEB_SEARCH[0]]}, "content[0].type"),
    # a server call without its id (its result names it)
    ("server_call_without_id", {"role": "assistant", "content": [
        {"type": "server_tool_use", "name": "web_search", "input": {}}]}, "content[0].id"),
    # a server call whose input is not an object
    ("server_call_input_text", {"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "s", "name": "web_search", "input": "q"}]}, "content[0].input"),
    # a result without the id of its call
    ("result_without_tool_use_id", {"role": "assistant", "content": [
        {"type": "web_search_tool_result", "content": []}]}, "content[0].tool_use_id"),
    # a search result without its content list
    ("search_result_without_content", {"role": "user", "content": [
        {"type": "search_result", "source": "s", "title": "t"}]}, "content[0].content"),
    # an upload without its file id
    ("upload_without_file_id", {"role": "user", "content": [{"type": "container_upload"}]}, "content[0].file_id"),
]


@pytest.mark.parametrize(("case", "message", "field"), REFUSED, ids=[c[0] for c in REFUSED])
def test_malformed_kept_blocks_are_refused_naming_the_field(case: str, message: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        from_anthropic(message)
    assert err.value.field == field, err.value


def test_kept_blocks_over_max_metadata_bytes_are_refused_naming_the_block() -> None:
    # many results with their encrypted content: past the default 16 KiB of metadata
    big = [dict(WEB_SEARCH[1]["content"][0], encrypted_content="E" * 4096) for _ in range(5)]
    reply = _reply([WEB_SEARCH[0], {**WEB_SEARCH[1], "content": big}, WEB_SEARCH[2]])
    with pytest.raises(ValidationError) as err:
        from_anthropic(reply)
    assert err.value.field == "content[1]" and "max_metadata_bytes" in err.value.problem
    # taken where the memory allows it
    assert from_anthropic(reply, max_metadata_bytes=64 * 1024)[0]["metadata"][BLOCKS_KEY][1][1]["content"] == big
