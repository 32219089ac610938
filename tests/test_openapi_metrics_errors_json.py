"""/metrics answers its refusals (401 without a metrics token, 403 to a tenant's token)
as JSON, `{"detail": ...}`, and the OpenAPI document declares them so; its 200 stays
Prometheus text.

Fails on the code before (review of the HTTP contract, 2026-12-07): the route's
`response_class=PlainTextResponse` had FastAPI declare its 401 and 403 `text/plain`,
while the service sent `application/json`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hash_embedder import HashEmbedder
from service_helpers import TOKEN_ACME, TOKEN_METRICS, bearer, serve_in_thread

from tiermem import Config, Memory

pytestmark = pytest.mark.usefixtures("clean_env")

HTTP_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("metrics-json") / "data", auth_tokens={TOKEN_ACME: "acme"},
                 metrics_tokens=[TOKEN_METRICS])
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as base:
        yield base


def _media(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip()


# each case: the headers sent, the status answered
CASES: list[tuple[dict[str, str], int]] = [
    ({}, 401),  # no token
    (bearer(TOKEN_ACME), 403),  # a tenant's token: metrics count every namespace
    (bearer(TOKEN_METRICS), 200),  # the metrics token: Prometheus text (passes before and after)
]


@pytest.mark.parametrize(("headers", "status"), CASES, ids=["no-token", "tenant-token", "metrics-token"])
def test_the_answer_has_the_declared_media_type(url: str, headers: dict[str, str], status: int) -> None:
    spec: dict[str, Any] = httpx.get(url + "/openapi.json", timeout=HTTP_TIMEOUT_S).json()
    r = httpx.get(url + "/metrics", headers=headers, timeout=HTTP_TIMEOUT_S)
    assert r.status_code == status, r.text
    declared = spec["paths"]["/metrics"]["get"]["responses"][str(status)]["content"]
    assert _media(r.headers["content-type"]) in declared, (r.headers["content-type"], declared)  # was text/plain
    if status != 200:
        assert set(declared) == {"application/json"}
        ref = declared["application/json"]["schema"]["$ref"]
        schema = spec["components"]["schemas"][ref.rsplit("/", 1)[1]]
        assert set(r.json()) <= set(schema["properties"]) and "detail" in schema["required"]
