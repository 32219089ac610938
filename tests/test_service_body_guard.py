"""The body guard checks the raw body whatever the headers say (issue 13, item 6).

Before the fix the guard read the *last* Content-Type while FastAPI parsed by the
*first*: `application/json` then `text/plain` skipped `check_json_body`, and metadata
nested hundreds of levels deep was stored (201), after which `history` answered 500 on
every call; NaN and lone surrogates passed the same way. Every request here is written
byte for byte on a socket (clients normalise repeated headers away) to a real uvicorn
serving the real app, and every refusal is checked to have written nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from service_helpers import TOKEN_ACME, bearer, raw_request, serve_in_thread

from tiermem import Config, Memory
from tiermem.service import MAX_JSON_DEPTH
from tiermem.tiers.embed_onnx import FastEmbedder

AUTH = ("Authorization", f"Bearer {TOKEN_ACME}")
JSON = ("Content-Type", "application/json")
CONV = "guarded"
DEEP_LEVELS = 300  # the issue stored 260-900 levels


def deep(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


def message(metadata: str = '{"k": 1}', content: str = '"hello"') -> bytes:
    return f'{{"role": "user", "content": {content}, "metadata": {metadata}}}'.encode()


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("guard") / "data", auth_tokens={TOKEN_ACME: "acme"})
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, serve_in_thread(cfg, mem) as u:
        yield u


def stored(url: str) -> int:
    r = httpx.get(f"{url}/v1/conversations/{CONV}/history", headers=bearer(TOKEN_ACME))
    assert r.status_code in (200, 404), r.text  # never 500
    return 0 if r.status_code == 404 else len(r.json()["messages"])


# (headers, body, expected status, what the answer must mention) -- each row a way around the old guard
REFUSED = [
    # the attack: a second Content-Type made the guard skip; deep metadata was stored
    ([JSON, ("Content-Type", "text/plain")], message(deep(DEEP_LEVELS)), 400, "content-type"),
    # the same two headers the other way round
    ([("Content-Type", "text/plain"), JSON], message(deep(DEEP_LEVELS)), 400, "content-type"),
    # a second Content-Type carrying NaN past the guard
    ([JSON, ("Content-Type", "text/plain")], message('{"x": NaN}'), 400, "content-type"),
    # two Authorization headers: the guard and the route could each read another token
    ([JSON, ("Authorization", "Bearer someone-else")], message(), 400, "authorization"),
    # two namespace headers: the same ambiguity for the namespace
    ([JSON, ("X-Tiermem-Namespace", "acme"), ("X-Tiermem-Namespace", "acme/x")], message(), 400, "namespace"),
    # one odd Content-Type: not JSON at all
    ([("Content-Type", "text/plain")], message(deep(DEEP_LEVELS)), 415, "application/json"),
    # JSON, but in a charset the guard does not decode
    ([("Content-Type", "application/json; charset=latin-1")], message(), 415, "application/json"),
    # a form type, as `curl -d` sends
    ([("Content-Type", "application/x-www-form-urlencoded")], message(), 415, "application/json"),
    # the checks themselves, through every accepted spelling of JSON: depth ...
    ([JSON], message(deep(DEEP_LEVELS)), 422, f"deeper than {MAX_JSON_DEPTH}"),
    ([("Content-Type", "APPLICATION/JSON; charset=UTF-8")], message(deep(MAX_JSON_DEPTH + 1)), 422, "deeper"),
    ([("Content-Type", "application/vnd.tiermem+json")], message(deep(DEEP_LEVELS)), 422, "deeper"),
    # ... NaN and Infinity ...
    ([JSON], message('{"x": NaN}'), 422, "NaN"),
    ([], message('{"x": -Infinity}'), 422, "Infinity"),  # no Content-Type at all
    # ... and lone surrogates, in a value and in a key
    ([JSON], message(content='"\\ud800"'), 422, "surrogate"),
    ([JSON], message(metadata='{"\\udfff": 1}'), 422, "surrogate"),
]


@pytest.mark.parametrize(("headers", "body", "status", "mentions"), REFUSED)
def test_the_guard_cannot_be_skipped(url: str, headers: list[tuple[str, str]], body: bytes, status: int,
                                     mentions: str) -> None:
    before = stored(url)
    code, resp_headers, doc = raw_request(url, "POST", f"/v1/conversations/{CONV}/messages", [AUTH, *headers], body)
    assert code == status, (code, doc)
    assert mentions.lower() in json.dumps(doc).lower(), doc
    assert resp_headers["content-type"] == "application/json"
    assert stored(url) == before  # nothing written
    # and the conversation still reads (the history answered 500 from then on)
    r = httpx.get(f"{url}/v1/conversations/{CONV}/active", headers=bearer(TOKEN_ACME))
    assert r.status_code in (200, 404), r.text


def test_a_well_formed_body_is_still_accepted(url: str) -> None:
    """The guard refuses only what it must: one JSON Content-Type, in any spelling."""
    n = stored(url)
    for headers in ([JSON], [("Content-Type", "application/json; charset=utf-8")]):
        code, _, doc = raw_request(url, "POST", f"/v1/conversations/{CONV}/messages", [AUTH, *headers],
                                   message(deep(MAX_JSON_DEPTH - 4)))
        assert code == 201, doc
        n += 1
    assert stored(url) == n
    # a body-less request with an odd Content-Type has nothing to check
    code, _, doc = raw_request(url, "GET", f"/v1/conversations/{CONV}/history", [AUTH, ("Content-Type", "text/plain")])
    assert code == 200 and len(doc["messages"]) == n


def test_the_guard_runs_before_routes_without_auth_too(url: str, tmp_path: Path) -> None:
    """Unauthenticated routes get the same checks (no route may parse an unchecked body)."""
    code, _, doc = raw_request(url, "POST", "/healthz", [JSON, ("Content-Type", "text/plain")], b"{}")
    assert code == 400, doc
    code, _, doc = raw_request(url, "POST", "/healthz", [JSON], deep(DEEP_LEVELS).encode())
    assert code == 422, doc
