"""`/metrics` is behind auth (issue 13, item 9): it counts every namespace (messages,
conversations, requests per route), so it needs a metrics token; a tenant's token is
refused (403); `metrics_public` opens it, but only on a loopback `http_host` and only
to loopback clients. Before the fix `/metrics` answered anyone, with global counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pydantic
import pytest
from service_helpers import TOKEN_ACME, TOKEN_GLOBEX, TOKEN_METRICS, bearer, serve_in_thread

from tiermem import Config, Memory
from tiermem.service import ServiceConfigError, create_app
from tiermem.tiers.embed_onnx import FastEmbedder

TOKENS = {TOKEN_ACME: "acme", TOKEN_GLOBEX: "globex"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("metrics") / "data", auth_tokens=TOKENS,
                 metrics_tokens=[TOKEN_METRICS])
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, serve_in_thread(cfg, mem) as u:
        r = httpx.post(f"{u}/v1/conversations/g-1/messages", headers=bearer(TOKEN_GLOBEX),
                       json={"role": "user", "content": "globex's activity"})
        assert r.status_code == 201
        yield u


# (headers, status) -- who may read /metrics on a server with auth on
WHO = [
    ({}, 401),  # nobody: the old code answered 200 with every namespace's counts
    (bearer("not-a-token-at-all-0123456789"), 401),  # a wrong token
    (bearer(TOKEN_ACME), 403),  # a tenant: the counts include other tenants
    ({"Authorization": TOKEN_METRICS}, 401),  # the right secret without the Bearer scheme
    (bearer(TOKEN_METRICS), 200),  # the scraper's token
]


@pytest.mark.parametrize(("headers", "status"), WHO)
def test_metrics_need_a_metrics_token(served: str, headers: dict[str, str], status: int) -> None:
    r = httpx.get(f"{served}/metrics", headers=headers)
    assert r.status_code == status, r.text
    if status == 200:
        assert "tiermem_messages" in r.text and "tiermem_http_request_duration_seconds" in r.text
    else:
        assert "tiermem_messages" not in r.text and "globex" not in r.text


def test_a_metrics_token_is_no_tenant(served: str) -> None:
    r = httpx.get(f"{served}/v1/conversations", headers=bearer(TOKEN_METRICS))
    assert r.status_code == 401


def test_public_metrics_only_on_loopback(tmp_path: Path, embedder: FastEmbedder) -> None:
    # refused at configuration time, naming the field, for a non-loopback host
    with pytest.raises(pydantic.ValidationError, match="metrics_public"):
        Config(data_dir=tmp_path / "d", metrics_public=True, http_host="0.0.0.0")
    # on loopback an unauthenticated scrape from this host works
    cfg = Config(data_dir=tmp_path / "data", auth_tokens=TOKENS, metrics_public=True)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, serve_in_thread(cfg, mem) as u:
        assert httpx.get(f"{u}/metrics").status_code == 200
        # and /v1 still needs a token
        assert httpx.get(f"{u}/v1/conversations").status_code == 401


def test_a_token_in_both_lists_is_refused(tmp_path: Path) -> None:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens=TOKENS, metrics_tokens=[TOKEN_ACME])
    with pytest.raises(ServiceConfigError, match="metrics_tokens"):
        create_app(cfg)
