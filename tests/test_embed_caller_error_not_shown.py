"""What a caller's own embedder says when it is down reaches the operator only: a scoped
tenant's plan, search and the unauthenticated /healthz name `EmbeddingUnavailable`, a
fixed type, and the embedder's own words stay in the server's log and `stats()`.

Since 4c14649 a caller's embedder raising EmbeddingUnavailable degrades to keyword
ranking, and its `error` was copied as it was into the plan's `retrieval` (POST
/v1/conversations/{id}/context: `plan` and `explain`), a search's `degraded` and
/healthz's reason. That `error` is the caller's free text, unchecked: a client library's
message naming the service's URL with its key, or the inputs of a batch the embedder
sent for several tenants at once. One Memory embeds for every tenant, so another
tenant's text and an internal key reached an HTTP caller. On the code before, every
tenant-visible row fails (the secret and the other tenant's text in the answer).

The real service (create_app, a scoped tenant token), real SQLite; the embedder is a
caller's object, a stand-in for a remote embedding service that is down.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from service_helpers import bearer

from tiermem import Config, Memory
from tiermem.errors import EmbeddingUnavailable
from tiermem.service import create_app

DIM = 384  # the width a remote MiniLM would answer with
TOKEN = "tenant-acme-token"
QUERY = "When does my flight to Lisbon leave?"
FLIGHT = "My flight to Lisbon leaves at 9:40 from gate B12."
SECRET = "sk-live-4f9a1c"  # the embedding service's key, in the URL its client library names
OTHER_TENANTS_TEXT = "globex payroll: Dana 182,000"  # a turn of another tenant, in the same batch
SAID = f"HTTPError for https://embed.internal/v1?key={SECRET} inputs=['{OTHER_TENANTS_TEXT}']"
FIXED = "EmbeddingUnavailable"


class DownEmbedder:
    """A caller's embedder whose service is down, saying so in the service's own words."""

    dim = DIM

    def __init__(self) -> None:
        self.up = True

    def embed(self, texts: list[str]) -> np.ndarray:
        if not self.up:
            raise EmbeddingUnavailable(SAID, f"{SAID}: 503 Service Unavailable")
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, Memory, DownEmbedder]]:
    remote = DownEmbedder()
    cfg = Config(data_dir=tmp_path / "data", auth_tokens={TOKEN: "acme"})
    with Memory(cfg, embedder=remote, hot=False, background_indexing=False) as mem:
        mem.append("c1", {"role": "user", "content": FLIGHT}, namespace="acme")
        remote.up = False
        with TestClient(create_app(cfg, mem, start_scheduler=False), base_url="http://127.0.0.1") as client:
            yield client, mem, remote


def _hidden(text: str) -> None:
    assert SECRET not in text and OTHER_TENANTS_TEXT not in text, text


def test_the_tenants_plan_names_the_fixed_type(served: tuple[TestClient, Memory, DownEmbedder]) -> None:
    client, _mem, _remote = served
    r = client.post("/v1/conversations/c1/context", json={"query": QUERY, "budget": 500}, headers=bearer(TOKEN))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert body["plan"]["tiers"]["embedder"] == "degraded"  # still said: keyword ranking only
    assert body["plan"]["retrieval"].endswith(f"({FIXED})")
    _hidden(r.text)  # plan and explain


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_the_tenants_search_names_the_fixed_type(served: tuple[TestClient, Memory, DownEmbedder],
                                                 method: str) -> None:
    client, _mem, _remote = served
    query = {"q": QUERY, "conversation_id": "c1"}
    r = (client.get("/v1/search", params=query, headers=bearer(TOKEN)) if method == "GET"
         else client.post("/v1/search", json=query, headers=bearer(TOKEN)))
    assert r.status_code == 200, r.text
    assert [h["position"] for h in r.json()["hits"]] == [0]  # keyword ranking answers
    assert f"({FIXED})" in r.json()["degraded"]
    _hidden(r.text)


def test_healthz_names_the_fixed_type(served: tuple[TestClient, Memory, DownEmbedder]) -> None:
    client, _mem, _remote = served
    client.post("/v1/conversations/c1/context", json={"query": QUERY}, headers=bearer(TOKEN))  # found down
    r = client.get("/healthz")  # no auth: anyone who reaches the port
    assert r.json()["tiers"]["embedder"] == "degraded"
    assert f"({FIXED})" in r.json()["reasons"]["embedder"]
    _hidden(r.text)


def test_the_operator_keeps_what_the_embedder_said(served: tuple[TestClient, Memory, DownEmbedder],
                                                   caplog: pytest.LogCaptureFixture) -> None:
    client, mem, _remote = served
    with caplog.at_level(logging.WARNING):
        client.post("/v1/conversations/c1/context", json={"query": QUERY}, headers=bearer(TOKEN))
    assert mem.stats()["embedder"]["reason"].startswith(f"{FIXED}: HTTPError for https://embed.internal")
    assert any(SECRET in r.getMessage() or (r.exc_info and SECRET in str(r.exc_info[1])) for r in caplog.records)
