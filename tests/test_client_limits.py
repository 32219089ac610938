"""`Client.limits()` / `AsyncClient.limits()` over real HTTP (the real app on a real SQLite
file): one request per client however often asked; once read, a message past the
server's content or metadata limit, or a conversation id past its `max_id_chars`, is
refused before sending with exactly the error the server gives (field and message);
a server without the route (an older one, 404) is "unknown" and everything is left to it;
any other refusal (a bad token) is raised and not kept.

Fails on the code before: the clients had no `limits()`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from client_helpers import MAX_CONTENT_BYTES, NS, served
from service_helpers import TOKEN_ACME

from tiermem.client import AsyncClient, Client, Limits
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import ServiceAuthError, ValidationError

MAX_ID_CHARS = 40  # the server's, below the client's own MAX_ID_CHARS_LIMIT
MAX_METADATA_BYTES = 300
LIMITS_PATH = "/v1/limits"
CALLS = 5


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("client-limits") / "data", embedder, max_id_chars=MAX_ID_CHARS,
                max_metadata_bytes=MAX_METADATA_BYTES) as (base, _mem):
        yield base


@pytest.fixture(scope="module")
def old_url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("client-limits-old") / "data", embedder, drop_paths=[LIMITS_PATH],
                max_id_chars=MAX_ID_CHARS) as (base, _mem):
        yield base


def _counting() -> tuple[httpx.Client, list[str]]:
    sent: list[str] = []
    return httpx.Client(event_hooks={"request": [lambda r: sent.append(f"{r.method} {r.url.path}")]}), sent


def test_limits_are_read_once_per_client(url: str) -> None:
    http, sent = _counting()
    with http, Client(url, token=TOKEN_ACME, namespace=NS, http_client=http) as client:
        got = [client.limits() for _ in range(CALLS)]
    assert sent == [f"GET {LIMITS_PATH}"]
    assert got[0] == got[-1] and isinstance(got[0], Limits)
    assert (got[0].max_content_bytes, got[0].max_id_chars, got[0].max_metadata_bytes) == \
        (MAX_CONTENT_BYTES, MAX_ID_CHARS, MAX_METADATA_BYTES)


def test_the_async_client_reads_them_once_too(url: str) -> None:
    sent: list[str] = []

    async def hook(r: httpx.Request) -> None:
        sent.append(f"{r.method} {r.url.path}")

    async def run() -> list[Limits | None]:
        async with httpx.AsyncClient(event_hooks={"request": [hook]}) as http, \
                AsyncClient(url, token=TOKEN_ACME, http_client=http) as client:
            return [await client.limits() for _ in range(CALLS)]

    got = asyncio.run(run())
    assert sent == [f"GET {LIMITS_PATH}"] and got[0] is not None and got[0].max_id_chars == MAX_ID_CHARS


# each a call past one of the server's configured limits (within the client's own)
PAST_A_LIMIT: list[Callable[[Client], Any]] = [
    # content past max_content_bytes
    lambda c: c.append("limits-1", {"role": "user", "content": "x" * (MAX_CONTENT_BYTES + 1)}),
    # metadata past max_metadata_bytes, in a batch: the field names the message
    lambda c: c.append_many("limits-1", [{"role": "user", "content": "ok"},
                                         {"role": "user", "content": "ok", "metadata": {"k": "v" * MAX_METADATA_BYTES}}]),
    # a conversation id past max_id_chars, on a write (a read is not refused: the id may
    # name a conversation made before the limit was lowered, tests/test_id_limit_lowered.py)
    lambda c: c.append("c" * (MAX_ID_CHARS + 1), {"role": "user", "content": "hi"}),
]


@pytest.mark.parametrize("call", PAST_A_LIMIT)
def test_once_read_the_limits_refuse_before_sending_with_the_servers_error(url: str, call: Callable[[Client], Any]
                                                                          ) -> None:
    with Client(url, token=TOKEN_ACME, namespace=NS) as fresh, pytest.raises(ValidationError) as by_server:
        call(fresh)
    http, sent = _counting()
    with http, Client(url, token=TOKEN_ACME, namespace=NS, http_client=http) as client:
        client.limits()
        with pytest.raises(ValidationError) as here:
            call(client)
    assert sent == [f"GET {LIMITS_PATH}"]  # the refused call sent nothing
    assert (here.value.field, here.value.problem) == (by_server.value.field, by_server.value.problem)


def test_an_older_server_leaves_the_limits_unknown_and_checks_them_itself(old_url: str) -> None:
    http, sent = _counting()
    with http, Client(old_url, token=TOKEN_ACME, namespace=NS, http_client=http) as client:
        assert [client.limits() for _ in range(CALLS)] == [None] * CALLS
        with pytest.raises(ValidationError) as exc:
            client.append("c" * (MAX_ID_CHARS + 1), {"role": "user", "content": "hi"})
    assert exc.value.field == "conversation_id"
    assert [s.split(" ")[1] for s in sent] == [LIMITS_PATH, f"/v1/conversations/{'c' * (MAX_ID_CHARS + 1)}/messages"]


def test_a_refusal_other_than_404_is_raised_and_not_kept(url: str) -> None:
    http, sent = _counting()
    with http, Client(url, token="tok-not-known-0123456789", http_client=http) as client:
        for _ in range(2):
            with pytest.raises(ServiceAuthError):
                client.limits()
    assert sent == [f"GET {LIMITS_PATH}"] * 2
