"""A context answered in Anthropic's format (HTTP `format: "anthropic"`, the MCP `context`
tool, the Python `Client`) says what the request SENDS: `tokens` is `to_anthropic`'s
count (the plan's tokens and the current tool loop's thinking blocks, which the API
requires), `notes` are its notes (the thinking taking the request past the budget), and
`/metrics`' budget use observes the sent tokens, so a request past its budget shows
there (above the 1.0 bucket). The plan's own count stays `plan.tokens`, within budget.

Fails on the code before: `tokens` was the plan's count (31 where 392 are sent at budget
300), the notes were dropped, and the budget-use histogram saw the plan's 31/300."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from service_helpers import TOKEN_ACME, TOKEN_METRICS, bearer, serve_in_thread

from tiermem import Config, Memory
from tiermem.adapters.anthropic import AnthropicRequest, from_anthropic, to_anthropic
from tiermem.client import AnthropicContext, Client
from tiermem.tiers.embed_onnx import FastEmbedder

pytest.importorskip("mcp")
from mcp import Client as MCPClient

from tiermem.adapters.mcp_server import build_server

NS = "acme"
CONV = "loop"
QUERY = "weather?"
# a long thinking block in the tool loop still open: the API requires it back, whatever the budget
THINKING = {"type": "thinking", "thinking": "Let me reason at length. " * 60, "signature": "EqQBCgIY" * 10}
LOOP: list[dict[str, Any]] = [
    {"role": "user", "content": "What's the weather in Tokyo?"},
    {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
     "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 40, "output_tokens": 25},
     "content": [THINKING, {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Tokyo"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "sunny, 21C"}]},
]

# (budget, whether the thinking takes the request past it)
BUDGETS = [
    (300, True),  # the plan fits in 31 tokens; the thinking (~360) takes the request to ~390: a note says so
    (4000, False),  # all of it fits: the request sends more than the plan, within the budget, no note
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("sent-tokens") / "data", auth_tokens={TOKEN_ACME: NS},
                 metrics_tokens=[TOKEN_METRICS])
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, serve_in_thread(cfg, mem) as u:
        for m in LOOP:
            mem.append_many(CONV, from_anthropic(m), namespace=NS)
        yield u, mem


def _library(mem: Memory, budget: int) -> AnthropicRequest:
    ctx = mem.context(CONV, QUERY, budget, namespace=NS, namespace_recall=False, record=False)
    req = to_anthropic(ctx, mem.namespaced(NS))
    assert ctx.tokens <= budget < req.tokens or req.tokens <= budget  # the scenario is as the table says
    assert req.tokens > ctx.tokens  # the thinking is sent beyond the plan
    return req


def _budget_use(url: str) -> tuple[float, float]:
    """The budget-use histogram's (sum, count of observations above 1.0)."""
    text = httpx.get(f"{url}/metrics", headers=bearer(TOKEN_METRICS)).text
    values = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
              if line.startswith("tiermem_context_budget_use_ratio")}
    total = values["tiermem_context_budget_use_ratio_count"]
    return values["tiermem_context_budget_use_ratio_sum"], total - values[
        'tiermem_context_budget_use_ratio_bucket{le="1.0"}']


@pytest.mark.parametrize(("budget", "past"), BUDGETS)
def test_http_answers_and_observes_the_sent_tokens(served: tuple[str, Memory], budget: int, past: bool) -> None:
    url, mem = served
    want = _library(mem, budget)
    assert bool(want.notes) == past
    before = _budget_use(url)
    r = httpx.post(f"{url}/v1/conversations/{CONV}/context", headers=bearer(TOKEN_ACME, NS), timeout=60,
                   json={"query": QUERY, "budget": budget, "format": "anthropic", "namespace_recall": False})
    assert r.status_code == 200, r.text
    got = r.json()
    assert (got["tokens"], got["notes"]) == (want.tokens, want.notes)
    assert got["plan"]["tokens"] <= budget  # the plan's own count, within the budget
    after = _budget_use(url)
    assert after[0] - before[0] == pytest.approx(want.tokens / budget)
    assert after[1] - before[1] == (1 if past else 0)  # over budget shows past the 1.0 bucket


def test_openai_format_observes_the_plan(served: tuple[str, Memory]) -> None:
    # the default answer sends the plan's messages: its tokens and budget use are the plan's
    url, _mem = served
    before = _budget_use(url)
    r = httpx.post(f"{url}/v1/conversations/{CONV}/context", headers=bearer(TOKEN_ACME, NS), timeout=60,
                   json={"query": QUERY, "budget": 300, "namespace_recall": False})
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["tokens"] == got["plan"]["tokens"] <= 300 and "notes" not in got
    assert _budget_use(url)[0] - before[0] == pytest.approx(got["tokens"] / 300)


@pytest.mark.parametrize(("budget", "past"), BUDGETS)
def test_the_client_answers_the_sent_tokens(served: tuple[str, Memory], budget: int, past: bool) -> None:
    url, mem = served
    want = _library(mem, budget)
    with Client(url, token=TOKEN_ACME, namespace=NS) as client:
        got = client.context(CONV, QUERY, budget, format="anthropic", namespace_recall=False)
    assert isinstance(got, AnthropicContext)
    assert (got.tokens, got.notes, bool(got.notes)) == (want.tokens, want.notes, past)


@pytest.mark.parametrize(("budget", "past"), BUDGETS)
def test_mcp_answers_the_sent_tokens(served: tuple[str, Memory], budget: int, past: bool) -> None:
    _url, mem = served
    want = _library(mem, budget)

    async def run() -> Any:
        async with MCPClient(build_server(mem.namespaced(NS))) as client:
            return await client.call_tool("context", {"conversation_id": CONV, "query": QUERY, "budget": budget,
                                                      "format": "anthropic", "namespace_recall": False})

    r = asyncio.run(run())
    assert not r.is_error, r.content
    got = r.structured_content
    assert (got["tokens"], got["notes"], bool(got["notes"])) == (want.tokens, want.notes, past)


def test_openapi_documents_the_notes(served: tuple[str, Memory]) -> None:
    schema = httpx.get(f"{served[0]}/openapi.json").json()["components"]["schemas"]["AnthropicContextOut"]
    assert "notes" in schema["properties"]
    assert "sends" in schema["properties"]["tokens"]["description"]
