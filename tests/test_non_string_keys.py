"""A dict key that is no string, at any depth of a message, is refused naming where.

JSON's object keys are strings: a metadata `{"a": {2: 1}}` was stored as `{"a": {"2": 1}}`
and read back with another key than the one given (only the metadata's top-level keys
were refused, by pydantic), and the same in a body's payload, an Anthropic tool_use's
input or a LangChain tool call's args (written as JSON text), and what a Client sent
(its JSON encoder wrote the key's text). Now `tiers.models.check_keys` refuses it on every
way in, named by the location down to the key (pydantic's form, `...2.[key]`), nothing
written. The HTTP service and the MCP tools take JSON, whose keys are strings, and append
through `parse_message`. Real SQLite, a real served service for the Client, the real
`anthropic`, `langchain-core` and `openai-agents` packages.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from client_helpers import NS, TOKEN_ACME, served

from tiermem import Memory
from tiermem.client import Client
from tiermem.errors import ValidationError
from tiermem.tiers.embed_onnx import FastEmbedder

CONV = "k"
ASK = {"role": "user", "content": "Which fare?"}
WHY = ("Input should be a valid string (JSON object keys are strings: a key of another type would be "
       "stored as its text and read back as another key)")

# (metadata, the error's field); each refused whole, nothing written
METADATA_CASES: list[tuple[dict[Any, Any], str]] = [
    # the report's case: an int key one level down
    ({"a": {2: 1}}, "metadata.a.2.[key]"),
    # inside a list inside a dict
    ({"a": [{"ok": 1}, {3: "x"}]}, "metadata.a.1.3.[key]"),
    # a bool key (JSON writes true)
    ({"a": {"b": {True: 1}}}, "metadata.a.b.True.[key]"),
    # None (JSON writes null)
    ({"a": {None: 1}}, "metadata.a.None.[key]"),
    # a float key: not a plain name, quoted in the problem
    ({"a": {1.5: 1}}, "metadata.a"),
    # a tuple key (json.dumps refused it with a TypeError): named the same way
    ({"a": {("x",): 1}}, "metadata.a"),
    # the top level, as pydantic refused it before: the same field
    ({2: 1}, "metadata.2.[key]"),
]
METADATA_IDS = ["nested int", "in a list", "bool", "none", "float", "tuple", "top level"]


@pytest.fixture
def conv(cold_memory: Memory) -> Memory:
    cold_memory.append(CONV, ASK)
    return cold_memory


def _refused(mem: Memory, call: Any) -> str:
    with pytest.raises(ValidationError) as info:
        call()
    assert [m.body for m in mem.history(CONV)] == [ASK]  # nothing written
    return str(info.value)


@pytest.mark.parametrize(("metadata", "field"), METADATA_CASES, ids=METADATA_IDS)
def test_append_refuses_a_metadata_key_that_is_no_string(conv: Memory, metadata: dict[Any, Any],
                                                         field: str) -> None:
    error = _refused(conv, lambda: conv.append(CONV, {"role": "user", "content": "hi"}, metadata=metadata))
    assert error.startswith(f"{field}: ")
    assert error.endswith(WHY)


BODY_CASES: list[tuple[dict[Any, Any], str]] = [
    # a hosted-tool item's payload, stored verbatim
    ({"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", 2: "x"}},
     "action.2.[key]"),
    # a content part's own field
    ({"role": "user", "content": [{"type": "text", "text": "hi", 3: 4}]}, "content.0.3.[key]"),
    # metadata inside the message dict
    ({"role": "user", "content": "hi", "metadata": {"tags": [{7: "x"}]}}, "metadata.tags.0.7.[key]"),
]


@pytest.mark.parametrize(("message", "field"), BODY_CASES, ids=["hosted item", "part", "metadata in message"])
def test_append_many_refuses_it_in_a_body(conv: Memory, message: dict[Any, Any], field: str) -> None:
    error = _refused(conv, lambda: conv.append_many(CONV, [{"role": "user", "content": "ok"}, message]))
    assert error == f"messages[1].{field}: {WHY}"


def test_string_keys_at_every_depth_are_stored_as_given(conv: Memory) -> None:
    metadata = {"a": {"2": 1, "b": [{"c": {"d": None}}]}}
    conv.append(CONV, {"role": "user", "content": "hi"}, metadata=metadata)
    assert conv.history(CONV)[-1].metadata == metadata


def test_the_anthropic_adapter_refuses_it_in_a_tool_input() -> None:
    from tiermem.adapters.anthropic import from_anthropic

    reply = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "fares", "input": {"legs": {1: "LIS"}}}]}
    with pytest.raises(ValidationError) as info:
        from_anthropic(reply)  # its input becomes the arguments' JSON text
    assert str(info.value) == f"content[0].input.legs.1.[key]: {WHY}"


def test_the_langchain_history_refuses_it_writing_nothing(conv: Memory) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, ToolMessage

    from tiermem.adapters.langchain import TiermemChatMessageHistory

    history = TiermemChatMessageHistory(conv, CONV)
    call = AIMessage("", tool_calls=[{"name": "fares", "args": {"legs": {1: "LIS"}}, "id": "c1"}])
    error = _refused(conv, lambda: history.add_messages([call]))
    assert error == f"messages[0].tool_calls[0].args.legs.1.[key]: {WHY}"
    # an artifact (metadata): refused by append, not left out as one over the size limit
    result = ToolMessage("ok", tool_call_id="c1", artifact={"rows": {1: "x"}})
    error = _refused(conv, lambda: history.add_messages([result]))
    assert error == f"messages[0].metadata.langchain_artifact.rows.1.[key]: {WHY}"


def test_the_agents_session_refuses_it_writing_nothing(conv: Memory) -> None:
    pytest.importorskip("agents")
    from tiermem.adapters.openai_agents import TiermemSession

    item = {"type": "mcp_call", "id": "mcp_1", "server_label": "fares", "name": "find", "arguments": "{}",
            "output": None, "error": None, "approval_request_id": None, "status": "completed",
            "extra": {5: "x"}}
    error = _refused(conv, lambda: asyncio.run(TiermemSession(conv, CONV).add_items([item])))
    assert error == f"messages[0].extra.5.[key]: {WHY}"


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("keys") / "data", embedder) as url_mem:
        yield url_mem


CLIENT_CASES: list[tuple[str, Any, str]] = [
    # an OpenAI message's metadata (the encoder wrote "2")
    ("openai", [{"role": "user", "content": "hi", "metadata": {"a": {2: 1}}}], "messages[0].metadata.a.2.[key]"),
    # an Anthropic message, converted by the server's adapter from the JSON sent
    ("anthropic", [{"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "fares", "input": {"legs": {1: "LIS"}}}]}],
     "messages[0].content.0.input.legs.1.[key]"),
]


@pytest.mark.parametrize(("fmt", "messages", "field"), CLIENT_CASES, ids=["openai", "anthropic"])
def test_a_client_refuses_it_before_sending(url_mem: tuple[str, Memory], fmt: Any, messages: Any,
                                            field: str) -> None:
    url, _mem = url_mem
    with Client(url, token=TOKEN_ACME, namespace=NS) as client:
        conv = f"{CONV}-{fmt}"  # one server for the module
        client.append(conv, ASK)
        with pytest.raises(ValidationError) as info:
            client.append_many(conv, messages, format=fmt)
        assert str(info.value) == f"{field}: {WHY}"
        assert [m.body for m in client.history(conv)] == [ASK]  # nothing sent, nothing written
