"""The inspector's plan page shows what each provider's prompt cache is expected to serve
(`plan.cache.openai_cached_tokens`, `anthropic_cached_tokens`, ceef915/d76d006) beside the
tokens of the messages shared with the previous call (`expected_cached_tokens`), each
labelled with what it counts: the page showed only the shared tokens, as "Expected cached
tokens", which is neither provider's figure (they count rendered tokens, from a
1,024-token minimum, OpenAI in 128-token steps).

Real parts: a Memory on a real SQLite file, the real app through FastAPI's TestClient.

Fails on the code before: 1 of 1 (no provider figures on the page; the shared tokens
labelled "Expected cached tokens")."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hash_embedder import HashEmbedder
from inspector_helpers import TOKEN_ACME, TOKENS

from tiermem import Config, Memory
from tiermem.service import create_app

HX = {"HX-Request": "true"}
CONV = "lisbon"
NS = "acme"
QUERY = "what is the plan?"
BUDGET = 8000  # tokens: every message fits, so the second call extends the first
MESSAGES = 40  # ~90 tokens each: ~3,600 shared, past both providers' 1,024-token minimum


def _text(i: int) -> str:
    return f"message {i}: " + " ".join(f"word{j} about the trip to Lisbon" for j in range(12))


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path, auth_tokens=TOKENS), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as m:
        m.append_many(CONV, [{"role": "user" if i % 2 == 0 else "assistant", "content": _text(i)}
                             for i in range(MESSAGES)], namespace=NS)
        m.context(CONV, QUERY, BUDGET, namespace=NS)  # the previous call the plan is compared with
        yield m


def test_plan_page_shows_each_providers_cached_tokens(mem: Memory) -> None:
    with TestClient(create_app(mem.config, mem, start_scheduler=False), base_url="http://127.0.0.1") as client:
        assert client.post("/ui/login", json={"token": TOKEN_ACME}, headers=HX).status_code == 200
        r = client.post(f"/ui/c/{CONV}/plan", json={"query": QUERY, "budget": BUDGET}, headers=HX)
    assert r.status_code == 200, r.text
    # the same plan the library makes (a what-if records nothing: repeatable)
    c = mem.context(CONV, QUERY, BUDGET, namespace=NS, record=False).plan.cache
    # three different figures here, so a value shown under another's label is caught
    assert len({c.expected_cached_tokens, c.openai_cached_tokens, c.anthropic_cached_tokens}) == 3, c
    assert min(c.openai_cached_tokens, c.anthropic_cached_tokens) > 0, c
    cache = re.search(r'<dl class="figures" id="cache">.*?</dl>', r.text, re.S)
    assert cache, r.text
    figures = {m["id"]: (unescape(m["label"]), int(m["value"]))
               for m in re.finditer(r'<dt>(?P<label>[^<]*)</dt><dd id="(?P<id>[a-z-]+)">(?P<value>\d+)', cache[0])}
    # (the dd's id, a word its label must hold, the figure) -- each label says what it counts
    for dd, word, value in [
        ("cached-tokens", "shared with the previous call", c.expected_cached_tokens),  # message tokens
        ("openai-cached-tokens", "OpenAI", c.openai_cached_tokens),  # rendered, 128-token steps
        ("anthropic-cached-tokens", "Anthropic", c.anthropic_cached_tokens),  # at the breakpoints
    ]:
        assert dd in figures, figures
        label, shown = figures[dd]
        assert word in label and shown == value, (dd, label, shown)
    assert "Expected cached tokens" not in unescape(r.text)  # neither provider's figure goes by that name
