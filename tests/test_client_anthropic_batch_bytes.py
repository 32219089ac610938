"""`Client.append_many(..., format="anthropic")` encodes each message once: the JSON it
checks a message by (the strictest encoding any httpx sends: f3a83e6) is the JSON it sends,
the batch's body built of those bytes, byte for byte what httpx makes of the same body
(compact UTF-8), `Content-Type: application/json`; a real server stores the batch as
before, conditions and session id included.

Fails on the code before (review of the HTTP contract, 2026-12-07): the call carried the
messages as objects (`json=`), encoded once to check them and again by httpx (a batch of
1.45 MB: about 18 ms/MB of client time before, 11 ms/MB after, median of 20 runs; see the
commit); the request it built carried no encoded body (`content` None).

A real app served by uvicorn in a thread, a real SQLite store, the real clients."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hash_embedder import HashEmbedder
from service_helpers import TOKEN_ACME, serve_in_thread

from tiermem import Config, Memory
from tiermem.adapters.anthropic import from_anthropic
from tiermem.client import AsyncClient, Client

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
# non-ASCII, a JSON escape, a line separator and a tool call: what the encodings differ on
BATCH: list[dict[str, Any]] = [
    {"role": "user", "content": "Le café coûte 3 € — \"ok\"?\u2028"},
    {"role": "assistant", "content": [{"type": "text", "text": "Checking ☕."},
                                      {"type": "tool_use", "id": "toolu_01", "name": "price",
                                       "input": {"item": "café", "n": 2, "tags": ["a", "b"]}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "3 €"}]},
]

# each case: the append's conditions and session id as passed, the body fields they add
CASES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({}, {}),  # the messages alone
    ({"session_id": "s-1"}, {"session_id": "s-1"}),  # a batch-wide session id, after the format
    ({"expect_position": 0}, {"expect_position": 0}),  # a conditional append (the server says it takes them)
]


def _converted(messages: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """What the library's `from_anthropic` makes of `messages`: (body, metadata) per row."""
    return [({k: v for k, v in c.items() if k != "metadata"}, c.get("metadata"))
            for m in messages for c in from_anthropic(m)]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("anthropic-batch-bytes") / "data", auth_tokens={TOKEN_ACME: NS})
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as base:
        yield base


@pytest.mark.parametrize(("kwargs", "fields"), CASES, ids=["plain", "session", "conditional"])
def test_the_checked_bytes_are_the_body_sent(url: str, kwargs: dict[str, Any], fields: dict[str, Any]) -> None:
    with Client(url, token=TOKEN_ACME, namespace=NS) as client:
        client.limits()  # a conditional append is sent only to a server that says it takes them
        call = client._calls.append_many("conv", BATCH, kwargs.get("session_id"), "anthropic", None,
                                         expect_position=kwargs.get("expect_position"))
        request = client._http.build_request(**client._request(call))
        # encoded once, here: what httpx would have made of the same body, byte for byte
        assert call.json is None and call.content is not None
        want = httpx.Request("POST", url, json={"messages": BATCH, "format": "anthropic", **fields}).content
        assert request.content == want
        assert request.headers["content-type"] == "application/json"
        assert request.headers["content-length"] == str(len(want))


@pytest.mark.parametrize(("kwargs", "fields"), CASES, ids=["plain", "session", "conditional"])
def test_the_server_stores_the_batch_as_the_library_would(url: str, kwargs: dict[str, Any],
                                                          fields: dict[str, Any]) -> None:
    conv = f"c-{'-'.join(fields) or 'plain'}"
    with Client(url, token=TOKEN_ACME, namespace=NS) as client:
        positions = client.append_many(conv, BATCH, format="anthropic", **kwargs)
        stored = client.history(conv)
    expected = _converted(BATCH)
    assert positions == list(range(len(expected)))
    assert [(m.body, m.metadata) for m in stored] == expected
    if "session_id" in fields:
        assert {m.session_id for m in stored} == {"s-1"}


def test_the_async_client_sends_the_same_bytes(url: str) -> None:
    async def run() -> tuple[bytes, list[int]]:
        async with AsyncClient(url, token=TOKEN_ACME, namespace=NS) as client:
            call = client._calls.append_many("conv-async", BATCH, None, "anthropic", None)
            sent = client._http.build_request(**client._request(call)).content
            positions = await client.append_many("conv-async", BATCH, format="anthropic")
            return sent, positions

    sent, positions = asyncio.run(run())
    assert sent == httpx.Request("POST", url, json={"messages": BATCH, "format": "anthropic"}).content
    assert positions == list(range(len(_converted(BATCH))))
