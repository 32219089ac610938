"""`GET /v1/limits` (real app over real HTTP on a real SQLite file): it answers the
server's own configured limits and the library's fixed ones under their names, needs a
valid token where auth is on (any tenant's), is served openly with auth off, is
documented in OpenAPI with a closed schema, and the client's `Limits` has exactly its
fields.

Fails on the code before: there was no such route (404)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from service_helpers import SCOPED_TOKENS, TOKEN_ALICE, TOKEN_GLOBEX, serve_in_thread

from tiermem import Config, Memory
from tiermem.client import Limits
from tiermem.memory import MAX_BATCH_MESSAGES, MAX_SEARCH_K
from tiermem.service.app import create_app
from tiermem.service.routes.limits import CONFIG_LIMITS, FIXED_LIMITS
from tiermem.service.schemas import LimitsOut
from tiermem.tiers.embed_onnx import FastEmbedder

# none of them the default, so that an answer of defaults fails
CONFIGURED = {"max_content_bytes": 3000, "max_metadata_bytes": 700, "max_body_bytes": 9000, "max_id_chars": 40}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("limits") / "data", auth_tokens=SCOPED_TOKENS, **CONFIGURED)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as base:
        yield base


@pytest.mark.parametrize("token", [
    TOKEN_ALICE,  # a token of a namespace below acme
    TOKEN_GLOBEX,  # another tenant's: the limits are the same for every one
])
def test_the_route_answers_the_servers_configured_and_fixed_limits(url: str, token: str) -> None:
    r = httpx.get(url + "/v1/limits", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    assert r.json() == {**CONFIGURED, **FIXED_LIMITS}
    assert r.json()["max_batch_messages"] == MAX_BATCH_MESSAGES and r.json()["max_search_k"] == MAX_SEARCH_K


@pytest.mark.parametrize("headers", [
    {},  # no token
    {"Authorization": "Bearer not-a-known-token-0123456789"},  # a token the service does not know
])
def test_without_a_valid_token_it_is_401(url: str, headers: dict[str, str]) -> None:
    r = httpx.get(url + "/v1/limits", headers=headers)
    assert r.status_code == 401 and r.json() == {"detail": "missing or invalid bearer token"}


def test_with_auth_off_it_is_served_to_anyone(tmp_path: Path, embedder: FastEmbedder) -> None:
    cfg = Config(data_dir=tmp_path / "data", max_id_chars=64)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem, auth=False) as base:
        assert httpx.get(base + "/v1/limits").json()["max_id_chars"] == 64


def test_openapi_documents_a_closed_answer_and_the_client_reads_every_field() -> None:
    spec = create_app(Config(auth_tokens=SCOPED_TOKENS), start_scheduler=False).openapi()
    op = spec["paths"]["/v1/limits"]["get"]
    assert set(op["responses"]) >= {"200", "401"} and op.get("security")
    schema = spec["components"]["schemas"]["LimitsOut"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(LimitsOut.model_fields) == set(CONFIG_LIMITS) | set(FIXED_LIMITS)
    assert all(p.get("description") for p in schema["properties"].values())
    assert [f.name for f in dataclasses.fields(Limits)] == list(LimitsOut.model_fields)
    # no secret of the config is named there
    assert not {"auth_tokens", "metrics_tokens", "data_dir", "redis_url"} & set(schema["properties"])
