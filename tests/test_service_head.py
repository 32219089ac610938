"""HEAD on a path that takes GET answers what GET answers, status and headers, without the
body (HTTP: a server SHOULD answer HEAD wherever it answers GET), and the OpenAPI document
says so: each GET operation has a HEAD twin with the same statuses and headers and no
content, and `Allow` on such a path (a 405, test_service_method_not_allowed.py) names HEAD.

Fails on the code before (review of the HTTP contract, 2026-12-07, base 1be59d0): FastAPI's
routes take no HEAD (Starlette's own add it to a GET route, FastAPI's do not), so HEAD
was a 405 on every documented path, and the document had no HEAD operation.

The real app served by uvicorn, real sockets, a real SQLite store holding one conversation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hash_embedder import HashEmbedder
from service_helpers import READ_TIMEOUT_S, TOKEN_ACME, TOKEN_METRICS, serve_in_thread

from tiermem import Config, Memory

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
CID = "trip"
# (path, token, GET's status): each documented GET path, its parameters filled in
GETS = [
    ("/healthz", None, 200),  # no auth
    ("/metrics", TOKEN_METRICS, 200),  # its own token
    ("/v1/limits", TOKEN_ACME, 200),
    ("/v1/conversations", TOKEN_ACME, 200),
    ("/v1/stats", TOKEN_ACME, 200),
    ("/v1/search?q=lisbon", TOKEN_ACME, 200),
    (f"/v1/conversations/{CID}/history", TOKEN_ACME, 200),
    (f"/v1/conversations/{CID}/facts", TOKEN_ACME, 200),
    (f"/v1/conversations/{CID}/active", TOKEN_ACME, 200),
    ("/v1/conversations/nowhere/history", TOKEN_ACME, 404),  # a refusal: the same 404, no body
    ("/v1/limits", "tok-wrong-0123456789abcdef", 401),  # ... and the guard's 401
]
C = "/v1/conversations/{conversation_id}"
GET_TEMPLATES = {"/healthz", "/metrics", "/v1/limits", "/v1/conversations", "/v1/stats", "/v1/search",
                 f"{C}/history", f"{C}/facts", f"{C}/active"}
# headers that describe the answer, which HEAD must carry as GET does
SAME_HEADERS = ("content-type", "www-authenticate")
# those whose value is the same for two answers in a row (not /metrics's or /healthz's length)
STABLE_LENGTH_PATHS = {"/v1/limits", "/v1/conversations", "/v1/stats", f"/v1/conversations/{CID}/history"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any]]]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("head") / "data", auth_tokens={TOKEN_ACME: NS},
                 metrics_tokens=[TOKEN_METRICS])
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url:
        mem.append(CID, {"role": "user", "content": "We fly to Lisbon on Friday."}, namespace=NS)
        yield url, httpx.get(url + "/openapi.json", timeout=READ_TIMEOUT_S).json()


@pytest.mark.parametrize(("path", "token", "status"), GETS, ids=[f"{p} {s}" for p, _, s in GETS])
def test_head_answers_gets_status_and_headers_without_a_body(served: tuple[str, dict[str, Any]], path: str,
                                                             token: str | None, status: int) -> None:
    url, _ = served
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    got = httpx.get(url + path, headers=headers, timeout=READ_TIMEOUT_S)
    head = httpx.head(url + path, headers=headers, timeout=READ_TIMEOUT_S)
    assert got.status_code == status, got.text
    assert head.status_code == status, (path, head.status_code, head.headers.get("allow"))  # was 405
    assert head.content == b""
    for name in SAME_HEADERS:
        assert head.headers.get(name) == got.headers.get(name), (path, name)
    if path in STABLE_LENGTH_PATHS and status == 200:
        # the length of the body a GET answers, which HEAD leaves out
        assert head.headers["content-length"] == got.headers["content-length"] == str(len(got.content))


def test_the_document_gives_each_get_a_head_twin(served: tuple[str, dict[str, Any]]) -> None:
    _, spec = served
    gets = {p: item["get"] for p, item in spec["paths"].items() if "get" in item}
    assert set(gets) == GET_TEMPLATES
    ids = [op["operationId"] for item in spec["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids))  # each operation its own id
    for path, get in gets.items():
        head = spec["paths"][path].get("head")
        assert head is not None, path  # was absent
        assert set(head["responses"]) == set(get["responses"]), path
        for status, answer in head["responses"].items():
            assert "content" not in answer, (path, status)  # no body
            assert answer.get("headers") == get["responses"][status].get("headers"), (path, status)
        assert head.get("parameters") == get.get("parameters") and head.get("security") == get.get("security")
    # and no path takes HEAD without GET
    assert all("get" in item for item in spec["paths"].values() if "head" in item)
