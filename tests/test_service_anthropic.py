"""The HTTP service speaks Anthropic's Messages format through the library's adapter: a
batch with `format: "anthropic"` is converted by `from_anthropic`, a context with
`format: "anthropic"` answered as `to_anthropic` builds it (thinking restored from the
request's namespace). Real HTTP to uvicorn serving the real app on a real SQLite file,
with scoped bearer tokens.

Fails on the code before: the batch route refused `format` (an unknown field), the
context route refused `format`, `thinking` and `max_breakpoints`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, get_args

import httpx
import pytest
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, TOKEN_ALICE, bearer, serve_in_thread

from tiermem import Config, Memory
from tiermem.adapters.anthropic import THINKING_SCOPES, from_anthropic, to_anthropic
from tiermem.planner.plan import MAX_BREAKPOINTS
from tiermem.service.schemas import ThinkingScope, finite
from tiermem.tiers.embed_onnx import FastEmbedder

NS = "acme"
LOOP_CONV = "weather-loop"
REFUSED_CONV = "refusals"
QUERY = "What's the weather in Tokyo?"
BUDGET = 8000
MAX_CONTENT_BYTES = 4096  # small, so that one test text can pass it
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDYXJlZnVsbHkgdGhpbmsiMHNpZ25lZA=="
THINKING = {"type": "thinking", "thinking": "I should call the weather tool.", "signature": SIGNATURE}

# An agent's tool loop with extended thinking, as the Anthropic SDK has it: the user's
# question, Claude's reply (thinking, then a tool call; a whole reply with id/model/usage),
# the tool's result. The reply's thinking must come back for the loop to continue.
TOOL_LOOP: list[dict[str, Any]] = [
    {"role": "user", "content": QUERY},
    {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
     "content": [THINKING, {"type": "text", "text": "Let me check."},
                 {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Tokyo"}}],
     "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 40, "output_tokens": 30}},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "sunny, 21 C",
                                  "is_error": False}]},
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("anthropic") / "data", auth_tokens=SCOPED_TOKENS,
                 max_content_bytes=MAX_CONTENT_BYTES)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, serve_in_thread(cfg, mem) as u:
        with httpx.Client(base_url=u, timeout=60, headers=bearer(TOKEN_ACME, NS)) as c:
            r = c.post(f"/v1/conversations/{REFUSED_CONV}/messages", json={"role": "user", "content": "hello"})
            assert r.status_code == 201, r.text
            r = c.post(f"/v1/conversations/{LOOP_CONV}/messages:batch",
                       json={"format": "anthropic", "messages": TOOL_LOOP})
            assert r.status_code == 201, r.text
        yield u, mem


@pytest.fixture
def http(served: tuple[str, Memory]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served[0], timeout=60, headers=bearer(TOKEN_ACME, NS)) as c:
        yield c


def _library_context(mem: Memory, **options: Any) -> dict[str, Any]:
    ctx = mem.context(LOOP_CONV, QUERY, BUDGET, namespace=NS, namespace_recall=False)
    req = to_anthropic(ctx, mem.namespaced(NS), **options)
    # `tokens`: what the request sends (the plan's and the thinking it adds), with its notes
    return {"format": "anthropic", "system": req.system, "messages": req.messages, "tokens": req.tokens,
            "notes": req.notes, "plan": finite(ctx.plan.to_dict()), "explain": ctx.plan.explain()}


def test_the_tool_loop_is_stored_as_the_library_converts_it(served: tuple[str, Memory], http: httpx.Client) -> None:
    rows = http.get(f"/v1/conversations/{LOOP_CONV}/history").json()["messages"]
    expected = [c for m in TOOL_LOOP for c in from_anthropic(m)]
    assert [{**r["message"], **({"metadata": r["metadata"]} if r["metadata"] else {})} for r in rows] == expected
    assert rows[1]["metadata"]["anthropic_reply"]["usage"] == {"input_tokens": 40, "output_tokens": 30}


# what two equal calls answer differently: the plan's timings and its count of the epoch's calls
TIMINGS = ("timings_ms", "stage_ms")
EPOCH_CALLS = "epoch_calls"
CALL_NUMBER = re.compile(r"call \d+")  # the same count in the plan's text
ANSWER = ("format", "system", "messages", "tokens", "notes")  # an Anthropic context's fields besides its plan
# (the context request's Anthropic options, what the library is given)
CONTEXT_OPTIONS = [
    # the adapter's defaults: the current loop's thinking, every breakpoint it may mark
    ({}, {}),
    # every turn's thinking, no cache marks
    ({"thinking": "all", "max_breakpoints": 0}, {"thinking": "all", "max_breakpoints": 0}),
]


@pytest.mark.parametrize(("sent", "library"), CONTEXT_OPTIONS)
def test_an_anthropic_context_is_the_librarys(served: tuple[str, Memory], http: httpx.Client,
                                              sent: dict[str, Any], library: dict[str, Any]) -> None:
    r = http.post(f"/v1/conversations/{LOOP_CONV}/context", json={
        "query": QUERY, "budget": BUDGET, "namespace_recall": False, "format": "anthropic", **sent})
    assert r.status_code == 200, r.text
    got = r.json()
    want = json.loads(json.dumps(_library_context(served[1], **library)))
    # the plan says how much each call shares with the one before (prompt-cache stability):
    # the two calls differ there only
    assert {k: got[k] for k in ANSWER} == {k: want[k] for k in ANSWER}
    assert got["plan"]["conversation_id"] == LOOP_CONV and got["explain"].startswith(f"context for {LOOP_CONV!r}")
    assistant = next(m for m in got["messages"] if m["role"] == "assistant")
    assert assistant["content"][0] == THINKING  # restored from the stored row, first in its message
    assert got["messages"][-1]["content"][0]["tool_use_id"] == "toolu_01"


def test_the_default_answer_is_unchanged(served: tuple[str, Memory], http: httpx.Client) -> None:
    mem = served[1]
    body = {"query": QUERY, "budget": BUDGET, "namespace_recall": False}
    for sent in (body, {**body, "format": "openai"}):
        # the plan reports what a call shares with the conversation's call before it: each
        # call after a first one that asked the same shares as much
        mem.context(LOOP_CONV, QUERY, BUDGET, namespace=NS, namespace_recall=False)
        ctx = mem.context(LOOP_CONV, QUERY, BUDGET, namespace=NS, namespace_recall=False)
        # what the route answered before `format` existed, field for field and in order
        before = {"messages": finite(ctx.messages), "tokens": ctx.tokens, "plan": finite(ctx.plan.to_dict()),
                  "explain": ctx.plan.explain()}
        r = http.post(f"/v1/conversations/{LOOP_CONV}/context", json=sent)
        assert r.status_code == 200, r.text
        got = r.json()
        for plan in (got["plan"], before["plan"]):
            for key in TIMINGS:
                plan.pop(key)
            plan["cache"].pop(EPOCH_CALLS)
        for answer in (got, before):
            answer["explain"] = CALL_NUMBER.sub("call N", answer["explain"])
        assert json.dumps(got) == json.dumps(before)  # the same keys in the same order, the same values


# the beta MCP connector's call: a block type the adapter neither converts nor keeps
UNKNOWN_BLOCK = {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "search", "server_name": "s", "input": {}}
TWO_RESULTS = {"role": "user", "content": [
    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "1"},
    {"type": "tool_result", "tool_use_id": "toolu_b", "content": "2"}]}
TWO_CALLS = {"role": "assistant", "content": [
    {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}},
    {"type": "tool_use", "id": "toolu_b", "name": "f", "input": {}}]}
BATCH = f"/v1/conversations/{REFUSED_CONV}/messages:batch"
CONTEXT = f"/v1/conversations/{REFUSED_CONV}/context"

# (route, body, the loc of the 422)
REFUSALS: list[tuple[str, dict[str, Any], list[str | int]]] = [
    # a block type the adapter does not convert, in the third message: named by index and block
    (BATCH, {"format": "anthropic", "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                                 {"role": "assistant", "content": [{"type": "text", "text": "c"},
                                                                                   UNKNOWN_BLOCK]}]},
     ["body", "messages", 2, "content", 1, "type"]),
    # a format that does not exist
    (BATCH, {"format": "gemini", "messages": [{"role": "user", "content": "a"}]}, ["body", "format"]),
    # an OpenAI tool message sent as Anthropic: a field a MessageParam has not
    (BATCH, {"format": "anthropic", "messages": [{"role": "tool", "tool_call_id": "x", "content": "1"}]},
     ["body", "messages", 0, "tool_call_id"]),
    # the caller's metadata under a key the adapter keeps blocks' data in
    (BATCH, {"format": "anthropic", "messages": [{"role": "user", "content": "a",
                                                  "metadata": {"anthropic_thinking": []}}]},
     ["body", "messages", 0, "metadata", "anthropic_thinking"]),
    # refused by Memory after conversion: named by the message as sent (the first became 3 stored)
    (BATCH, {"format": "anthropic", "messages": [TWO_CALLS, TWO_RESULTS,
                                                 {"role": "user", "content": "x" * (MAX_CONTENT_BYTES + 1)}]},
     ["body", "messages", 2, "content"]),
    # a thinking scope the adapter does not know
    (CONTEXT, {"query": "q", "format": "anthropic", "thinking": "some"}, ["body", "thinking"]),
    # more cache marks than Anthropic allows in a request
    (CONTEXT, {"query": "q", "format": "anthropic", "max_breakpoints": MAX_BREAKPOINTS + 1},
     ["body", "max_breakpoints"]),
    # an Anthropic option on an OpenAI context, where it means nothing
    (CONTEXT, {"query": "q", "thinking": "all"}, ["body", "thinking"]),
    # a context format that does not exist
    (CONTEXT, {"query": "q", "format": "claude"}, ["body", "format"]),
]


@pytest.mark.parametrize(("route", "body", "loc"), REFUSALS)
def test_refusals_name_the_field_and_write_nothing(http: httpx.Client, route: str, body: dict[str, Any],
                                                   loc: list[str | int]) -> None:
    before = http.get(f"/v1/conversations/{REFUSED_CONV}/history").json()["messages"]
    r = http.post(route, json=body)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == loc
    assert http.get(f"/v1/conversations/{REFUSED_CONV}/history").json()["messages"] == before


# (route, body) sent by acme/alice's token into acme: outside its prefix
OUTSIDE = [
    # an Anthropic batch, valid: the answer of a missing conversation, nothing written
    (f"/v1/conversations/{LOOP_CONV}/messages:batch", {"format": "anthropic", "messages": TOOL_LOOP[:1]}),
    # an Anthropic batch whose message the adapter would refuse: still 404, not 422
    (f"/v1/conversations/{LOOP_CONV}/messages:batch", {"format": "anthropic", "messages": [
        {"role": "user", "content": [UNKNOWN_BLOCK]}]}),
    # an Anthropic context: no thinking of acme's read back
    (f"/v1/conversations/{LOOP_CONV}/context", {"query": QUERY, "format": "anthropic"}),
]


@pytest.mark.parametrize(("route", "body"), OUTSIDE)
def test_a_token_stays_inside_its_prefix(served: tuple[str, Memory], http: httpx.Client, route: str,
                                         body: dict[str, Any]) -> None:
    before = http.get(f"/v1/conversations/{LOOP_CONV}/history").json()["messages"]
    with httpx.Client(base_url=served[0], timeout=60, headers=bearer(TOKEN_ALICE, NS)) as alice:
        r = alice.post(route, json=body)
        missing = alice.post(route.replace(LOOP_CONV, "never-was"), json=body)
    assert (r.status_code, r.json()) == (404, {"detail": f"conversation {LOOP_CONV!r} not found"})
    assert missing.json() == {"detail": "conversation 'never-was' not found"}
    assert http.get(f"/v1/conversations/{LOOP_CONV}/history").json()["messages"] == before


def test_openapi_describes_both_shapes(http: httpx.Client) -> None:
    spec = http.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    ok = spec["paths"]["/v1/conversations/{conversation_id}/context"]["post"]["responses"]["200"]
    refs = {s["$ref"].rsplit("/", 1)[1] for s in ok["content"]["application/json"]["schema"]["anyOf"]}
    assert refs == {"ContextOut", "AnthropicContextOut"}
    assert {"system", "messages", "tokens", "plan", "explain", "format"} <= set(schemas["AnthropicContextOut"]
                                                                                ["required"])
    ctx_in = schemas["ContextIn"]["properties"]
    assert ctx_in["format"]["enum"] == ["openai", "anthropic"] and ctx_in["format"]["default"] == "openai"
    assert ctx_in["max_breakpoints"]["anyOf"][0]["maximum"] == MAX_BREAKPOINTS
    assert ctx_in["thinking"]["anyOf"][0]["enum"] == list(THINKING_SCOPES)
    assert schemas["BatchIn"]["properties"]["format"]["enum"] == ["openai", "anthropic"]


def test_the_thinking_scopes_are_the_adapters() -> None:
    assert get_args(ThinkingScope) == THINKING_SCOPES
