"""`GET /v1/limits` says the one integer limit (`max_json_int_digits`, the library's
`MAX_JSON_INT_DIGITS`, 34c6621), and the limit it says is the one the service holds; the
client's `Limits` reads it, and from an older server that does not say it, None (every
other limit still read, the client still holding the library's own limit itself).

It was left out: a client or adapter reading the server's limits (`max_body_bytes` and the
rest) could not learn that an integer of more than 1,000 digits is refused (422).

Real HTTP to the real app on a real SQLite file; the older server is the real one behind a
real proxy (`flaky_proxy`, no fault) dropping the field from its /v1/limits answers.

Fails on the code before (5 of 5): the route's answer has no such field (KeyError), nor
OpenAPI's `LimitsOut`, and the client's `Limits` has no such attribute."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from client_helpers import NS, served
from flaky_proxy import CLOSE, flaky_proxy
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, bearer

from tiermem import Config, Memory
from tiermem.client import AsyncClient, Client, Limits
from tiermem.service.app import create_app
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import ValidationError
from tiermem.tiers.models import MAX_JSON_INT_DIGITS

FIELD = "max_json_int_digits"
LIMITS_PATH = "/v1/limits"


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("limits-int") / "data", embedder) as got:
        yield got


def _append_raw(url: str, conv: str, n: int) -> httpx.Response:
    """An append of a message whose metadata holds `n`, sent as is (no client check)."""
    body = f'{{"role":"user","content":"amount","metadata":{{"n":{n}}}}}'.encode()
    return httpx.post(f"{url}/v1/conversations/{conv}/messages", content=body,
                      headers={**bearer(TOKEN_ACME, NS), "Content-Type": "application/json"})


def test_the_route_says_the_limit_the_service_holds(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem
    said = httpx.get(url + LIMITS_PATH, headers=bearer(TOKEN_ACME)).json()[FIELD]
    assert said == MAX_JSON_INT_DIGITS == 1_000
    at_limit, past = 10 ** said - 1, 10 ** said  # said digits, one more
    assert _append_raw(url, "int-limit", at_limit).status_code == 201
    assert _append_raw(url, "int-limit", -at_limit).status_code == 201  # the sign is not a digit
    r = _append_raw(url, "int-limit", past)
    assert r.status_code == 422, r.text
    (err,) = r.json()["detail"]
    assert err["loc"] == ["body", "metadata", "n"]
    assert err["msg"] == f"is an integer of {said + 1:,} digits, more than the limit of {said:,} (MAX_JSON_INT_DIGITS)"
    assert [m.metadata for m in mem.history("int-limit", namespace=NS)] == [{"n": at_limit}, {"n": -at_limit}]


def test_openapi_documents_it() -> None:
    schema = create_app(Config(auth_tokens=SCOPED_TOKENS), start_scheduler=False).openapi()[
        "components"]["schemas"]["LimitsOut"]
    assert schema["properties"][FIELD]["type"] == "integer"
    assert "422" in schema["properties"][FIELD]["description"]
    assert FIELD in schema["required"]


@pytest.mark.parametrize("client_type", [
    Client,  # the sync client
    AsyncClient,  # and the async one: one reader of the answer (`_limits`)
])
def test_the_client_reads_it(url_mem: tuple[str, Memory], client_type: type) -> None:
    url, _mem = url_mem
    if client_type is Client:
        with Client(url, token=TOKEN_ACME, namespace=NS) as client:
            got = client.limits()
    else:
        async def run() -> Limits | None:
            async with AsyncClient(url, token=TOKEN_ACME, namespace=NS) as client:
                return await client.limits()
        got = asyncio.run(run())
    assert got is not None and got.max_json_int_digits == MAX_JSON_INT_DIGITS


def test_an_older_server_that_does_not_say_it_is_unknown_not_a_crash(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem
    with flaky_proxy(url, CLOSE, times=0, hide=(FIELD,)) as proxy, \
            Client(proxy.url, token=TOKEN_ACME, namespace=NS) as client:
        raw: dict[str, Any] = httpx.get(proxy.url + LIMITS_PATH, headers=bearer(TOKEN_ACME)).json()
        assert FIELD not in raw  # the proxy hides it
        got = client.limits()
        assert got is not None and got.max_json_int_digits is None
        assert got.max_body_bytes == raw["max_body_bytes"]  # the rest read as ever
        assert client.append("older", {"role": "user", "content": "hi", "metadata": {"n": 10 ** 77}}) == 0
        with pytest.raises(ValidationError) as exc:  # the client's own limit, held before sending
            client.append("older", {"role": "user", "content": "hi", "metadata": {"n": 10 ** MAX_JSON_INT_DIGITS}})
    assert exc.value.field == "metadata.n"
    assert [m.metadata for m in mem.history("older", namespace=NS)] == [{"n": 10 ** 77}]
