"""Message formats (tiers.formats): every message the real `openai` SDK produces or accepts,
Chat Completions and Responses, appends, comes back equal from history(), and every
context built from them validates against the SDK's request types (unknown keys
forbidden, no orphaned tool result, a call never split from its results)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sdk_corpus as corpus

import tiermem
from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import IMAGE_LOW_DETAIL_TOKENS, IMAGE_TOKENS, message_text, wire_body
from tiermem.tiers.tokens import MESSAGE_OVERHEAD_TOKENS, BpeTokenCounter, message_tokens

BUDGETS = [250, 400, 600, 900, 1400, 2200, 4000, 20000]


def _json(v: Any) -> Any:
    return json.loads(json.dumps(v))


def _mem(tmp_path: Path, embedder: FastEmbedder, **kw: Any) -> Memory:
    return Memory(Config(data_dir=tmp_path / "d", **kw), embedder=embedder, hot=False, background_indexing=False)


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    with _mem(tmp_path, embedder) as m:
        yield m


CHAT = list(corpus.chat_corpus())


@pytest.mark.parametrize(("name", "body"), CHAT, ids=[n for n, _ in CHAT])
def test_every_chat_variant_round_trips(mem: Memory, name: str, body: dict[str, Any]) -> None:
    mem.append("c", body)
    (got,) = mem.history("c")
    assert got.body == _json(body)  # explicit nulls included: what went in comes out
    assert got.role in ("system", "user", "assistant", "tool")


def test_the_corpus_is_complete_and_all_of_it_round_trips(mem: Memory) -> None:
    chat, resp = corpus.chat_conversation(), corpus.responses_conversation()
    mem.append_many("chat", chat)
    mem.append_many("resp", resp)
    assert [m.body for m in mem.history("chat")] == _json(chat)
    assert [m.body for m in mem.history("resp")] == _json(resp)
    # every role and every Responses item kind in the corpus is present
    assert {b["role"] for b in chat} == {"system", "developer", "user", "assistant", "tool", "function"}
    assert {b.get("type", "message") for b in resp} >= {
        "message", "reasoning", "function_call", "function_call_output", "web_search_call", "custom_tool_call",
        "custom_tool_call_output", "mcp_approval_request", "mcp_approval_response"}


def test_a_pydantic_sdk_object_appends_as_its_model_dump(mem: Memory) -> None:
    msg = corpus.reply("annotations").choices[0].message
    mem.append("c", msg)
    assert mem.history("c")[0].body == msg.model_dump(mode="json")


@pytest.mark.parametrize("system_messages", ["as_is", "merge"])
def test_chat_contexts_are_valid_sdk_params_at_every_budget(
        tmp_path: Path, embedder: FastEmbedder, system_messages: str) -> None:
    with _mem(tmp_path, embedder, system_messages=system_messages) as mem:
        mem.append_many("chat", corpus.chat_conversation())
        for budget in BUDGETS:
            ctx = mem.context("chat", "which flight and what weather?", budget, system="Be brief.")
            assert ctx.tokens <= budget
            corpus.valid_chat(ctx.messages)
            systems = [i for i, m in enumerate(ctx.messages) if m["role"] in ("system", "developer")]
            if system_messages == "merge":
                assert systems == [0], budget
                assert ctx.messages[0]["content"].startswith("Be brief.")
        full = mem.context("chat", "which flight?", 20000)
        # at a roomy budget everything is there, as a valid request
        assert any(m.get("tool_calls") for m in full.messages)
        assert any(m["role"] == "function" for m in full.messages)


def test_merge_folds_what_as_is_leaves_in_the_middle(tmp_path: Path, embedder: FastEmbedder) -> None:
    with _mem(tmp_path / "a", embedder) as a, _mem(tmp_path / "m", embedder, system_messages="merge") as m:
        for mem in (a, m):
            mem.append_many("chat", corpus.chat_conversation())
        spread = a.context("chat", "which flight?", 20000, system="Be brief.").messages
        folded = m.context("chat", "which flight?", 20000, system="Be brief.").messages
    assert [i for i, x in enumerate(spread) if x["role"] in ("system", "developer")][1:]  # several, not only first
    assert [x for x in folded if x["role"] in ("system", "developer")] == [folded[0]]
    # the fold moves text, it does not lose it, and keeps every other message in order
    texts = [x["content"] for x in spread if x["role"] in ("system", "developer")]
    texts = [t if isinstance(t, str) else t[0]["text"] for t in texts]
    assert folded[0]["content"] == "\n\n".join(texts)
    assert folded[1:] == [x for x in spread if x["role"] not in ("system", "developer")]


def test_responses_contexts_are_valid_input_items_at_every_budget(mem: Memory) -> None:
    mem.append_many("resp", corpus.responses_conversation())
    for budget in [*BUDGETS, 6000]:
        ctx = mem.context("resp", "book the flight", budget)
        assert ctx.tokens <= budget
        corpus.valid_responses(ctx.messages)
        types = [m.get("type") for m in ctx.messages]
        if "reasoning" in types:  # it travels with the calls it produced
            assert types[types.index("reasoning") + 1] == "function_call"
        # parallel calls and their outputs are one unit: all four, or none
        calls = {m["call_id"] for m in ctx.messages if m.get("type") in ("function_call", "function_call_output")}
        assert calls in (set(), {"call_1", "call_2"}), (budget, calls)


def test_context_leaves_out_reply_only_fields_but_history_keeps_them(mem: Memory) -> None:
    reply = corpus.serializations(corpus.reply("annotations"))["model_dump"]
    audio = corpus.serializations(corpus.reply("audio"))["model_dump"]
    mem.append_many("c", [{"role": "user", "content": "fare?"}, reply, audio, {"role": "user", "content": "ok"}])
    ctx = mem.context("c", None, 5000)
    sent = [m for m in ctx.messages if m["role"] == "assistant"]
    assert sent == [{"role": "assistant", "content": reply["content"]},
                    {"role": "assistant", "audio": {"id": "audio_1"}}]
    assert mem.history("c")[1].body["annotations"] == reply["annotations"]
    assert wire_body(audio) == sent[1]


def test_text_inside_every_part_type_is_searchable(mem: Memory) -> None:
    mem.append_many("resp", corpus.responses_conversation())
    by_text = {h.position for h in mem.search("resp", "NH210", k=10)}
    # the function_call_output (#6) and the output_text message (#9) both mention it
    assert {6, 9} <= by_text
    texts = [m.text for m in mem.history("resp")]
    assert "search_flights({\"to\":\"HND\"})" in texts
    assert "Check fares first." in texts
    assert "[image]" in texts[2] and "[file itinerary.pdf]" in texts[2]


# (body, expected payload tokens beyond the text and the per-message overhead)
TOKEN_RULES: list[tuple[dict[str, Any], int]] = [
    # an image at low detail costs OpenAI's flat 85
    ({"role": "user", "content": [{"type": "image_url", "image_url": {"url": corpus.PNG, "detail": "low"}}]},
     IMAGE_LOW_DETAIL_TOKENS),
    # otherwise what a 1024x1024 high-detail image costs
    ({"role": "user", "content": [{"type": "input_image", "image_url": "https://example.com/x.png"}]}, IMAGE_TOKENS),
    # a plain text message costs nothing beyond its text
    ({"role": "user", "content": "hello"}, 0),
]


@pytest.mark.parametrize(("body", "extra"), TOKEN_RULES)
def test_non_text_parts_count_by_the_documented_rule(counter: BpeTokenCounter, body: dict[str, Any],
                                                     extra: int) -> None:
    text_only = MESSAGE_OVERHEAD_TOKENS + counter.count(message_text(body))
    assert message_tokens(counter, body) == text_only + extra


# (message, words the error must contain): each refused, nothing written
BAD: list[tuple[dict[str, Any], tuple[str, ...]]] = [
    # an image part without its url
    ({"role": "user", "content": [{"type": "image_url", "image_url": {}}]}, ("content[0].image_url.url",)),
    # an image part on a tool message (chat allows only text there)
    ({"role": "tool", "tool_call_id": "c", "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
     ("content[0].type", "image_url")),
    # a tool call of a type that does not exist
    ({"role": "assistant", "tool_calls": [{"id": "c", "type": "magic"}]}, ("tool_calls[0].type",)),
    # a tool call without an id cannot be paired with its result
    ({"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f"}}]}, ("tool_calls[0].id",)),
    # a function_call_output without the call it answers
    ({"type": "function_call_output", "output": "42"}, ("call_id",)),
    # a function_call whose arguments are not a string
    ({"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": 1}}, ("arguments", "string")),
    # an unknown top-level field on a Responses item is refused, like on a chat message
    ({"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "colour": "red"}, ("colour",)),
    # annotations on a user message (only assistant replies carry them)
    ({"role": "user", "content": "x", "annotations": []}, ("annotations",)),
    # a Responses message role that does not exist there
    ({"type": "message", "role": "tool", "content": "x"}, ("role",)),
    # an output_text part whose text is missing
    ({"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}, ("content[0].text",)),
    # an inline image over the content limit (the limit counts inline payloads)
    ({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 300}}]},
     ("content", "300")),
]


@pytest.mark.parametrize(("message", "words"), BAD)
def test_bad_variants_are_refused_naming_the_field(tmp_path: Path, embedder: FastEmbedder,
                                                   message: dict[str, Any], words: tuple[str, ...]) -> None:
    with _mem(tmp_path, embedder, max_content_bytes=300) as mem:
        mem.append("c", {"role": "user", "content": "keep"})
        with pytest.raises(tiermem.ValidationError) as info:
            mem.append("c", message)
        for w in words:
            assert w in str(info.value), (w, str(info.value))
        assert len(mem.history("c")) == 1


# (context_format, conversation, validator): each family converted to the other
SHAPES = [
    ("chat", corpus.responses_conversation, corpus.valid_chat),
    ("responses", corpus.chat_conversation, corpus.valid_responses),
    ("chat", corpus.chat_conversation, corpus.valid_chat),
    ("responses", corpus.responses_conversation, corpus.valid_responses),
]


@pytest.mark.parametrize(("fmt", "conversation", "valid"), SHAPES)
def test_context_format_converts_to_one_family(tmp_path: Path, embedder: FastEmbedder, fmt: str,
                                               conversation: Any, valid: Any) -> None:
    with _mem(tmp_path, embedder, context_format=fmt) as mem:
        mem.append_many("c", conversation())
        mem.append("mixed", corpus.chat_conversation()[2])
        mem.append_many("mixed", corpus.responses_conversation())  # both families in one conversation
        for conv in ("c", "mixed"):
            for budget in BUDGETS:
                ctx = mem.context(conv, "which flight?", budget)
                assert ctx.tokens <= budget
                valid(ctx.messages)


def test_explicit_nulls_of_the_first_model_still_append(mem: Memory) -> None:
    # callers that build every message with all keys ({"name": maybe_name, ...}) keep working;
    # the nulls are kept in history and left out of the context
    body = {"role": "user", "content": "hi", "name": None, "tool_calls": None, "tool_call_id": None}
    mem.append("c", body)
    assert mem.history("c")[0].body == body
    assert mem.context("c", None, 200).messages == [{"role": "user", "content": "hi"}]
    with pytest.raises(tiermem.ValidationError, match="tool_calls"):
        mem.append("c", {"role": "user", "content": "hi", "tool_calls": []})  # not null: refused
