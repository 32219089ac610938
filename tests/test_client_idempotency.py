"""The client's idempotency keys and the retries they make safe, over real HTTP: the real
app on a real SQLite file, behind a real TCP proxy (`flaky_proxy`) that forwards an append
and then loses its answer (closes the connection, holds it until the client times out,
or answers a gateway's 502/504).

- A key given to `append`/`append_many` is checked before sending with the library's
  check (same field, same message; nothing sent) and sent as `Idempotency-Key`: the same
  request again is stored once, the first positions answered; another request under it
  raises `IdempotencyKeyReused`, as the library does.
- `retries=2` against a server that says it honours keys: an append without a key gets
  one, and after each failure the proxy makes it is sent again under that same key: the
  caller gets the original position and the conversation one copy. `retries=0` raises
  the failure (and the message was stored once).
- A server that does not say it (its /v1/limits without the flag, or without the route):
  an append is not sent again after a read timeout, key or none.
- A connection refused before anything was sent is retried for any request.
- `AsyncClient` the same.

Fails on the code before: the clients took no `idempotency_key`, sent no header, and sent
no append again after a lost answer (`retries=2` raised the failure)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from client_helpers import NS, served
from flaky_proxy import BAD_GATEWAY, CLOSE, GATEWAY_TIMEOUT, HOLD, Fault, flaky_proxy
from service_helpers import TOKEN_ACME

from tiermem import Memory
from tiermem.client import IDEMPOTENCY_HEADER, AsyncClient, Client
from tiermem.service.schemas import IDEMPOTENCY_HEADER as SERVICE_IDEMPOTENCY_HEADER
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import IdempotencyKeyReused, ServiceError, ValidationError
from tiermem.tiers.models import MAX_IDEMPOTENCY_KEY_CHARS, check_idempotency_key

RETRIES = 2
HOLD_TIMEOUT_S = 1.5  # the client's read timeout where the proxy holds the answer
NO_WAIT_S = 0.0  # max_retry_wait_s: retries at once, the test's time is not the policy's
MSG = {"role": "user", "content": "Book the 9:40 to Lisbon, please."}
OTHER = {"role": "user", "content": "Book the 11:15 instead."}
HIDDEN = ("idempotency_keys", "max_idempotency_key_chars")  # what a server older than keys did not say


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("client-idem") / "data", embedder) as got:
        yield got


@pytest.fixture(scope="module")
def old_url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("client-idem-old") / "data", embedder,
                drop_paths=["/v1/limits"]) as got:
        yield got


def _count(mem: Memory, conv: str) -> int:
    return len(mem.history(conv, namespace=NS)) if conv in mem.conversations(NS) else 0


def _client(url: str, **kw: Any) -> Client:
    return Client(url, token=TOKEN_ACME, namespace=NS, max_retry_wait_s=NO_WAIT_S, **kw)


def test_the_header_is_the_services() -> None:
    assert IDEMPOTENCY_HEADER == SERVICE_IDEMPOTENCY_HEADER


@pytest.mark.parametrize("send", [
    lambda c, conv, m, key: c.append(conv, m, idempotency_key=key),  # one message
    lambda c, conv, m, key: c.append_many(conv, [m, m], idempotency_key=key)[0],  # a batch
])
def test_a_key_given_stores_once_and_reused_for_another_request_raises(
        url_mem: tuple[str, Memory], send: Callable[..., int]) -> None:
    url, mem = url_mem
    conv = f"given-{id(send)}"
    with _client(url) as client:
        first = send(client, conv, MSG, "req-1")
        count = _count(mem, conv)
        assert send(client, conv, MSG, "req-1") == first and _count(mem, conv) == count
        with pytest.raises(IdempotencyKeyReused) as got:
            send(client, conv, OTHER, "req-1")
    assert got.value.field == "idempotency_key" and got.value.first == first
    assert _count(mem, conv) == count


@pytest.mark.parametrize("key", [
    "",  # empty
    "k" * (MAX_IDEMPOTENCY_KEY_CHARS + 1),  # one past the limit
    "two words",  # a space
    "caf\u00e9",  # outside ASCII
    7,  # not a string
])
def test_a_malformed_key_is_refused_before_sending_as_the_library_refuses_it(
        url_mem: tuple[str, Memory], key: Any) -> None:
    url, _mem = url_mem
    with pytest.raises(ValidationError) as library:
        check_idempotency_key(key)
    sent: list[httpx.Request] = []
    with httpx.Client(event_hooks={"request": [sent.append]}) as http, _client(url, http_client=http) as client:
        for call in (lambda: client.append("bad-key", MSG, idempotency_key=key),
                     lambda: client.append_many("bad-key", [MSG], idempotency_key=key)):
            with pytest.raises(ValidationError) as got:
                call()
            assert (got.value.field, str(got.value)) == (library.value.field, str(library.value))
    assert sent == []


@pytest.mark.parametrize(("fault", "raised"), [
    (CLOSE, httpx.RemoteProtocolError),  # the connection closed after the append, no answer
    (HOLD, httpx.ReadTimeout),  # no answer until the client gives up
    (BAD_GATEWAY, ServiceError),  # a proxy's 502 after it forwarded the append
    (GATEWAY_TIMEOUT, ServiceError),  # a proxy's 504 after it forwarded the append
])
def test_a_lost_answer_is_retried_under_one_key_and_stored_once(
        url_mem: tuple[str, Memory], fault: Fault, raised: type[Exception]) -> None:
    url, mem = url_mem
    with _client(url) as direct:
        before = direct.append(f"lost-{fault}", {"role": "user", "content": "before"})
    with flaky_proxy(url, fault) as proxy, _client(proxy.url, retries=RETRIES, timeout_s=HOLD_TIMEOUT_S) as client:
        position = client.append(f"lost-{fault}", MSG)
        positions = client.append_many(f"lost-{fault}-batch", [MSG, OTHER])
    assert position == before + 1 and positions == [0, 1]  # the original positions
    assert [m.body for m in mem.history(f"lost-{fault}", namespace=NS)][-1] == MSG
    assert (_count(mem, f"lost-{fault}"), _count(mem, f"lost-{fault}-batch")) == (2, 2)  # one copy each
    # the append was sent twice under one generated key (the batch once: the proxy failed one append)
    assert len(proxy.appends) == 3 and proxy.appends[0] == proxy.appends[1] is not None
    assert check_idempotency_key(proxy.appends[0]) and proxy.appends[2] not in (None, proxy.appends[0])


@pytest.mark.parametrize(("fault", "raised"), [
    (CLOSE, httpx.RemoteProtocolError),  # the connection closed after the append, no answer
    (HOLD, httpx.ReadTimeout),  # no answer until the client gives up
    (GATEWAY_TIMEOUT, ServiceError),  # a proxy's 504
])
def test_without_retries_the_failure_is_raised_and_the_message_was_stored_once(
        url_mem: tuple[str, Memory], fault: Fault, raised: type[Exception]) -> None:
    url, mem = url_mem
    conv = f"no-retry-{fault}"
    with flaky_proxy(url, fault) as proxy, _client(proxy.url, timeout_s=HOLD_TIMEOUT_S) as client, \
            pytest.raises(raised):
        client.append(conv, MSG)
    assert proxy.appends == [None]  # no key made up: nothing will be sent again
    assert _count(mem, conv) == 1


@pytest.mark.parametrize("key", [
    None,  # none given: none made up for a server that would ignore it
    "req-old-1",  # given: sent, but not relied on
])
def test_a_server_that_does_not_say_it_honours_keys_gets_no_retry_of_an_append(
        url_mem: tuple[str, Memory], old_url_mem: tuple[str, Memory], key: str | None) -> None:
    for (url, mem), hide, conv in ((url_mem, HIDDEN, f"unsaid-{key}"),  # /v1/limits without the flag
                                   (old_url_mem, (), f"no-limits-{key}")):  # no /v1/limits at all (404)
        with flaky_proxy(url, HOLD, hide=hide) as proxy, \
                _client(proxy.url, retries=RETRIES, timeout_s=HOLD_TIMEOUT_S) as client:
            with pytest.raises(httpx.ReadTimeout):
                client.append(conv, MSG, idempotency_key=key)
            limits = client.limits()
        assert limits is None or not limits.idempotency_keys
        assert proxy.appends == [key]  # sent once, never again
        assert _count(mem, conv) == 1


def test_a_refused_connection_is_retried_for_any_request() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    sent: list[httpx.Request] = []
    with httpx.Client(event_hooks={"request": [sent.append]}) as http, \
            _client(url, retries=RETRIES, http_client=http) as client:
        for call in (lambda: client.history("any"), lambda: client.pin("any", 0)):
            sent.clear()
            with pytest.raises(httpx.ConnectError):
                call()
            assert len(sent) == 1 + RETRIES


def test_the_async_client_retries_a_lost_answer_under_one_key_too(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem

    async def run(proxy_url: str, retries: int, conv: str) -> Any:
        async with AsyncClient(proxy_url, token=TOKEN_ACME, namespace=NS, retries=retries,
                               max_retry_wait_s=NO_WAIT_S, timeout_s=HOLD_TIMEOUT_S) as client:
            try:
                return await client.append(conv, MSG)
            except httpx.TransportError as exc:
                return type(exc)

    with flaky_proxy(url, CLOSE) as proxy:
        assert asyncio.run(run(proxy.url, RETRIES, "async-lost")) == 0
    assert len(proxy.appends) == 2 and proxy.appends[0] == proxy.appends[1] is not None
    with flaky_proxy(url, HOLD) as proxy:
        assert asyncio.run(run(proxy.url, 0, "async-no-retry")) is httpx.ReadTimeout
    with flaky_proxy(url, HOLD, hide=HIDDEN) as proxy:
        assert asyncio.run(run(proxy.url, RETRIES, "async-unsaid")) is httpx.ReadTimeout
    assert proxy.appends == [None]
    assert [_count(mem, c) for c in ("async-lost", "async-no-retry", "async-unsaid")] == [1, 1, 1]
