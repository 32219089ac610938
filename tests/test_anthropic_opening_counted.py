"""The user message an Anthropic request opens with where its context opens with a reply
(`CONTINUED_TEXT`: the API refuses an assistant opening) is sent, so it is counted and
planned for: `to_anthropic`'s `tokens` holds it (with a note where it takes the request
past the budget), and the contexts planned for Anthropic (HTTP and MCP `format:
"anthropic"`, the LangChain adapters' `in_turn` form) keep room for it
(`opening_tokens`), so the request stays within the budget (docs/design.md invariant 5).

Fails on the code before: `tokens` left the opening out, and a context filled to within
9 tokens of its budget was sent over it (budget 150: 149 planned, 158 sent)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from service_helpers import serve_in_thread

from tiermem import Config, Memory
from tiermem.adapters.anthropic import CONTINUED_TEXT, opening_tokens, to_anthropic
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.tokens import BpeTokenCounter, messages_tokens

CONV = "c"
QUERY = "what did we say about dolor?"
SYSTEM = "Be brief."
# budgets from where the context opens with a reply (the latest turns of varied length)
BUDGETS = list(range(150, 330, 3))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("opening") / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem, auth=False) as u:
        for i in range(30):  # turns of varied length, so that some budgets end the tail on a reply
            mem.append_many(CONV, [{"role": "user", "content": f"question {i} " + "lorem ipsum dolor " * (5 + 13 * (i % 7))},
                                   {"role": "assistant", "content": f"ok {i}"}])
        mem.append(CONV, {"role": "user", "content": "and now?"})
        yield u, mem


def _opens(messages: list[dict[str, Any]]) -> bool:
    return messages[0]["content"][0].get("text") == CONTINUED_TEXT


def test_the_opening_is_counted_and_noted(served: tuple[str, Memory]) -> None:
    mem = served[1]
    opened = past = 0
    for budget in BUDGETS:
        ctx = mem.context(CONV, QUERY, budget, system=SYSTEM, record=False)
        req = to_anthropic(ctx, mem)
        if not _opens(req.messages):
            assert req.tokens == ctx.tokens
            continue
        opened += 1
        assert req.tokens == ctx.tokens + opening_tokens(mem)  # sent, so counted
        assert (req.tokens > budget) == any("opening user message" in n for n in req.notes)
        past += req.tokens > budget
    assert opened and past  # the scenario holds both: openings, and some that a full plan sends over


def test_planned_with_room_the_request_stays_within(served: tuple[str, Memory]) -> None:
    mem = served[1]
    for budget in BUDGETS:
        ctx = mem.context(CONV, QUERY, budget, system=SYSTEM, record=False, pending_tokens=opening_tokens(mem))
        assert to_anthropic(ctx, mem).tokens <= budget, budget


def test_http_anthropic_stays_within(served: tuple[str, Memory]) -> None:
    url, mem = served
    opened = 0
    for budget in BUDGETS:
        r = httpx.post(f"{url}/v1/conversations/{CONV}/context", timeout=60, json={
            "query": QUERY, "budget": budget, "system": SYSTEM, "format": "anthropic"})
        assert r.status_code == 200, r.text
        got = r.json()
        assert got["tokens"] <= budget and not got["notes"], (budget, got["tokens"], got["notes"])
        if _opens(got["messages"]):  # what is sent: the plan's messages and the opening
            opened += 1
            assert got["plan"]["tokens"] + opening_tokens(mem) <= budget, budget
    assert opened


def test_langchain_in_turn_stays_within(served: tuple[str, Memory]) -> None:
    pytest.importorskip("langchain_core")
    from tiermem.adapters._langchain_sync import ConversationSync
    from tiermem.adapters.langchain import to_openai

    mem = served[1]
    counter = BpeTokenCounter()
    opened = 0
    for budget in BUDGETS:
        sync = ConversationSync(mem, CONV, budget=budget, system=SYSTEM, system_messages="in_turn")
        sent = sync.context_messages(QUERY)
        assert messages_tokens(counter, to_openai(sent)) <= budget, budget
        opened += sent[1].content == CONTINUED_TEXT
    assert opened
