"""A client closes only what it opened: an `httpx.Client` (or `AsyncClient`) passed in
stays open and usable after the tiermem client is closed; one the client built is
closed with it. Real HTTP to `tiermem serve`'s app on a real SQLite file.

Fails on the code before: there was no `tiermem.client`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from client_helpers import CONV, NS, served
from service_helpers import TOKEN_ACME

from tiermem.client import AsyncClient, Client
from tiermem.errors import ValidationError
from tiermem.tiers.embed_onnx import FastEmbedder


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("client-http") / "data", embedder) as (u, _mem):
        yield u


def test_a_given_httpx_client_is_used_and_left_open(url: str) -> None:
    with httpx.Client() as http:
        with Client(url, token=TOKEN_ACME, namespace=NS, http_client=http) as client:
            assert len(client.history(CONV)) > 0
        assert not http.is_closed
        assert http.get(url + "/healthz").status_code == 200  # still usable


def test_an_own_httpx_client_is_closed_with_the_client(url: str) -> None:
    with Client(url, token=TOKEN_ACME, namespace=NS) as client:
        assert len(client.history(CONV)) > 0
    with pytest.raises(RuntimeError, match="closed"):  # httpx refuses to send on a closed client
        client.history(CONV)


def test_the_async_client_closes_only_what_it_opened(url: str) -> None:
    async def run() -> None:
        async with httpx.AsyncClient() as http:
            async with AsyncClient(url, token=TOKEN_ACME, namespace=NS, http_client=http) as client:
                assert len(await client.history(CONV)) > 0
            assert not http.is_closed
            assert (await http.get(url + "/healthz")).status_code == 200
        async with AsyncClient(url, token=TOKEN_ACME, namespace=NS) as own:
            assert len(await own.history(CONV)) > 0
        with pytest.raises(RuntimeError, match="closed"):
            await own.history(CONV)

    asyncio.run(run())


def test_the_wrong_kind_of_httpx_client_is_refused_naming_it() -> None:
    with httpx.Client() as sync_http, pytest.raises(ValidationError, match="http_client"):
        AsyncClient("http://127.0.0.1:1", http_client=sync_http)  # type: ignore[arg-type]
