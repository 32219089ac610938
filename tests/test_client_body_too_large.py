"""The service's 413 for a request over its `max_body_bytes`, sent by a
`tiermem.client` that has not read the server's limits, raises `RequestTooLarge` (a
`LimitExceeded` naming `body`, the bytes sent and the limit), as the library refuses an
over-limit message in process (`LimitExceeded`), nothing written.

It was `ServiceError(413)`: an `except LimitExceeded` written against the library missed
it, and the limit was only in the text. A 413 that is not the service's (a proxy's own
page) stays `ServiceError(413)`.

Real HTTP to the real app on a real SQLite file, with a small body limit; the proxy is a
real ASGI app served on loopback answering every request with its own 413 page.

The guard's 413 text is `tiers.errors.body_limit_detail`, the format the client reads the
limit back from (`body_limit_of`), on both of the guard's ways to refuse (a Content-Length
past the limit; a chunked body counted past it as it streams): were the two to drift, the
client would raise ServiceError again and these cases fail.

Fails on the code before: the two client types raise ServiceError on each of the two
over-limit requests (4 cases)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hash_embedder import HashEmbedder
from service_helpers import SCOPED_TOKENS, TOKEN_ACME, bearer, serve_app, serve_in_thread

from tiermem import Config, Memory
from tiermem.client import AsyncClient, Client
from tiermem.tiers.errors import (
    ConversationNotFound,
    LimitExceeded,
    RequestTooLarge,
    ServiceError,
    body_limit_detail,
    body_limit_of,
)

NS = "acme"
MAX_BODY_BYTES = 8192  # the server's: the least a config takes is its max_content_bytes
MAX_CONTENT_BYTES = 4096
# each within the content limit, together past the body limit
BATCH = [{"role": "user", "content": f"{i}: " + "x" * 3000} for i in range(4)]
OVER_CONTENT = {"role": "user", "content": "y" * 10_000}  # one message past both limits

REQUESTS: list[tuple[str, Callable[[Any, str], Any]]] = [
    ("batch", lambda c, conv: c.append_many(conv, BATCH)),  # a batch of messages each fine alone
    ("one message", lambda c, conv: c.append(conv, OVER_CONTENT)),  # one message: Memory's own refusal too
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Memory]]:
    cfg = Config(data_dir=tmp_path_factory.mktemp("client-413") / "data", auth_tokens=SCOPED_TOKENS,
                 max_body_bytes=MAX_BODY_BYTES, max_content_bytes=MAX_CONTENT_BYTES)
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url:
        yield url, mem


def _sent_sizes() -> tuple[list[int], dict[str, list[Any]]]:
    sizes: list[int] = []
    return sizes, {"request": [lambda r: sizes.append(len(r.content))]}


def _raised(client_type: type, url: str, call: Callable[[Any, str], Any], conv: str) -> tuple[Exception, list[int]]:
    """What `call` raises from a fresh client (it has not read the server's limits), and
    the bytes of each request it sent."""
    sizes, hooks = _sent_sizes()
    if client_type is Client:
        with Client(url, token=TOKEN_ACME, namespace=NS, http_client=httpx.Client(event_hooks=hooks)) as client:
            try:
                call(client, conv)
            except Exception as exc:  # what it raises is the subject
                return exc, sizes
        raise AssertionError("nothing raised")

    async def run() -> Exception:
        async def hook(r: httpx.Request) -> None:
            sizes.append(len(r.content))

        http = httpx.AsyncClient(event_hooks={"request": [hook]})
        async with AsyncClient(url, token=TOKEN_ACME, namespace=NS, http_client=http) as client:
            try:
                await call(client, conv)
            except Exception as exc:
                return exc
        raise AssertionError("nothing raised")

    return asyncio.run(run()), sizes


@pytest.mark.parametrize("client_type", [Client, AsyncClient])
@pytest.mark.parametrize(("label", "call"), REQUESTS)
def test_the_services_413_is_a_limit_exceeded(served: tuple[str, Memory], tmp_path: Path, client_type: type,
                                              label: str, call: Callable[[Any, str], Any]) -> None:
    url, mem = served
    conv = f"c-{tmp_path.name}"
    err, sizes = _raised(client_type, url, call, conv)
    assert isinstance(err, RequestTooLarge) and isinstance(err, LimitExceeded), repr(err)
    assert (err.field, err.value, err.limit, err.unit) == ("body", sizes[-1], MAX_BODY_BYTES, "bytes")
    assert sizes[-1] > MAX_BODY_BYTES
    assert str(err) == (f"body: the request takes {sizes[-1]} bytes, over the server's max_body_bytes of "
                        f"{MAX_BODY_BYTES} bytes; nothing was written: send fewer or smaller messages in one call, "
                        "or raise the server's max_body_bytes")
    with pytest.raises(ConversationNotFound):  # nothing written
        mem.history(conv, namespace=NS)
    if label == "one message":  # what the library raises in process for it: a LimitExceeded too
        with pytest.raises(LimitExceeded):
            call(mem.namespaced(NS), conv)


OVER_BODY = b'{"role":"user","content":"' + b"z" * MAX_BODY_BYTES + b'"}'  # past the limit however framed
STREAM_PIECE_BYTES = 1024  # a chunked body's pieces: the guard counts them as they come


@pytest.mark.parametrize("framing", [
    "content-length",  # refused from the header, before a byte of the body is read
    "chunked",  # no length declared: refused once the bytes counted pass the limit
])
def test_the_guards_413_is_the_detail_the_client_reads(served: tuple[str, Memory], framing: str) -> None:
    url, _mem = served
    content: bytes | Iterator[bytes] = OVER_BODY if framing == "content-length" else \
        iter([OVER_BODY[i:i + STREAM_PIECE_BYTES] for i in range(0, len(OVER_BODY), STREAM_PIECE_BYTES)])
    r = httpx.post(f"{url}/v1/conversations/c-{framing}/messages", content=content,
                   headers={**bearer(TOKEN_ACME, NS), "Content-Type": "application/json"})
    assert ("content-length" in r.request.headers) == (framing == "content-length")
    assert r.status_code == 413 and r.json() == {"detail": body_limit_detail(MAX_BODY_BYTES)}
    assert body_limit_of(r.json()["detail"]) == MAX_BODY_BYTES


async def _proxy_413(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A proxy's own refusal: its HTML page, not the service's detail."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 413, "headers": [(b"content-type", b"text/html")]})
    await send({"type": "http.response.body", "body": b"<html><body>413 Request Entity Too Large</body></html>"})


def test_a_proxys_413_stays_a_service_error(tmp_path: Path) -> None:
    with serve_app(_proxy_413, lifespan="off") as url, Client(url, token=TOKEN_ACME) as client, \
            pytest.raises(ServiceError) as err:
        client.append_many("c", BATCH)
    assert err.value.status == 413 and not isinstance(err.value, LimitExceeded)
