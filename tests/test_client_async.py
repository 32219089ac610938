"""`AsyncClient` answers what `Client` answers, method for method, errors included (the
two share every request and every reading of an answer). Real HTTP to `tiermem serve`'s
app on a real SQLite file.

Fails on the code before: there was no `tiermem.client`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from client_helpers import BUDGET, CONV, NS, QUERY, served
from service_helpers import TOKEN_ACME, TOKEN_GLOBEX

from tiermem import Memory
from tiermem.client import AsyncClient, Client
from tiermem.errors import ConversationNotFound, ServiceAuthError, ValidationError
from tiermem.tiers.embed_onnx import FastEmbedder


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("client-async") / "data", embedder) as got:
        yield got


@pytest.fixture
def url(url_mem: tuple[str, Memory]) -> str:
    return url_mem[0]


def _both(url: str, call: Callable[[Any], Any], token: str = TOKEN_ACME) -> tuple[Any, Any]:
    """What `call` answers on a Client and on an AsyncClient (its coroutine awaited):
    the result, or the exception's class and message."""
    def outcome(run: Callable[[], Any]) -> Any:
        try:
            return run()
        except Exception as exc:
            return type(exc), str(exc)

    async def on_async() -> Any:
        async with AsyncClient(url, token=token, namespace=NS) as client:
            awaited: Awaitable[Any] = call(client)
            return await awaited

    with Client(url, token=token, namespace=NS) as client:
        sync = outcome(lambda: call(client))
    return sync, outcome(lambda: asyncio.run(on_async()))


# (the call) -- reads, which answer the same however often they are made
READS: list[Callable[[Any], Any]] = [
    lambda c: c.history(CONV),
    lambda c: c.history_page(CONV, after=1, limit=2),
    lambda c: c.active(CONV),
    lambda c: c.facts(CONV),
    lambda c: c.search(CONV, "hotel in Alfama", 3),
    lambda c: c.search(None, "airline card"),  # the namespace's
    lambda c: c.conversations(),
    lambda c: c.conversations_page(limit=1),
    lambda c: c.history("nowhere"),  # a missing conversation
    lambda c: c.pin(CONV, 0, priority=101),  # refused at the edge
]


@pytest.mark.parametrize("call", READS)
def test_the_async_client_answers_as_the_client(url: str, call: Callable[[Any], Any]) -> None:
    sync, async_ = _both(url, call)
    assert sync == async_


def test_their_errors_are_the_same_exceptions(url: str) -> None:
    assert _both(url, lambda c: c.history("nowhere"))[1][0] is ConversationNotFound
    assert _both(url, lambda c: c.stats(), token=TOKEN_GLOBEX)[1][0] is ServiceAuthError
    assert _both(url, lambda c: c.context(CONV, "q", 0))[1][0] is ValidationError


def test_the_async_client_plans_and_writes(url: str) -> None:
    async def run() -> tuple[Any, ...]:
        async with AsyncClient(url, token=TOKEN_ACME, namespace=NS) as client:
            ctx = await client.context(CONV, QUERY, BUDGET)
            child = await client.fork(CONV, 1, new_id="trip-1-short")
            await client.pin(child, 0)
            await client.unpin(child, 0)
            cp = await client.checkpoint(child, "Lisbon on the 14th, no red-eyes.", 1)
            erased = await client.delete_conversation(child)
            health = await client.health()
            return ctx, child, cp, erased, health

    ctx, child, cp, erased, health = asyncio.run(run())
    assert ctx.tokens <= BUDGET and ctx.plan.conversation_id == CONV
    assert child == "trip-1-short" and cp.position == 1 and cp.conversation_id == child
    assert erased.conversations == 1 and erased.messages == 2 and erased.conversation_ids == [child]
    assert health["status"] == "ok"
    with Client(url, token=TOKEN_ACME, namespace=NS) as client:
        assert client.conversations() == [CONV]


def test_the_records_are_the_librarys(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem
    with Client(url, token=TOKEN_ACME, namespace=NS) as client:
        assert client.history(CONV) == mem.history(CONV, namespace=NS)
        assert client.history_page(CONV, limit=2) == mem.history_page(CONV, namespace=NS, limit=2)
        assert client.search(CONV, "hotel in Alfama", 3) == mem.search(CONV, "hotel in Alfama", 3, namespace=NS)
        assert client.conversations_page(limit=1) == mem.conversations_page(NS, limit=1)
        assert client.active(CONV) == mem.active(CONV, namespace=NS)
        assert client.stats()["cold"]["messages"] == mem.stats(namespace=NS)["cold"]["messages"]
