"""What the tests of an add or sync written in chunks share (test_langchain_history_long_add,
test_langgraph_long_first_sync): a long imported history, a real server whose body limit
is small enough that a few hundred messages need several chunks, the same server as an
older one (behind a proxy hiding `conditional_appends`), and a `Client` whose own
`http_client` records each batch request and lets another writer act between two chunks.

- `imported_messages(n, tag)`: n LangChain messages, user and assistant in turn, each with
  an id (`h<tag><i>` / `a<tag><i>`), about 90 bytes each on the wire.
- `small_server(data_dir, embedder)`: `client_helpers.served` with `MAX_BODY_BYTES`; yields
  its URL.
- `as_older(url, older)`: `url` itself, or (`older`) a proxy's URL hiding
  `conditional_appends` from /v1/limits, so the chunks go unconditional.
- `recording(base, on_batch, before_batch)`: a Client over `base` and the body sizes and
  statuses of its batch requests; `before_batch()` runs as each is sent, `on_batch(k)` once
  the k-th (from 1) is stored.
- `after_first_chunk(count, act)`: an `on_batch` hook for `recording` that, once the first
  chunk is stored and the second not sent yet, records `count()` (what the log holds then)
  in the list it returns and runs `act()` (another writer's), once.
- `hash_memory(data_dir)`: a local Memory with the hash embedder, for the case past the
  library's batch limit, where what is measured is the batch, not the model.

Imported explicitly by the test modules (the lead owns conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from client_helpers import served
from flaky_proxy import CLOSE, flaky_proxy
from hash_embedder import HashEmbedder
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from service_helpers import TOKEN_ACME

from tiermem import Config, Memory
from tiermem.client import Client
from tiermem.tiers.embed_onnx import FastEmbedder

MAX_BODY_BYTES = 8192  # the server's: at least its max_content_bytes (client_helpers' 4096)
# a history of LONG messages of about 90 bytes each on the wire: 5 or more chunks under it
LONG = 400
BATCH_PATH = "/messages:batch"


def imported_messages(n: int, tag: str = "") -> list[BaseMessage]:
    return [HumanMessage(f"imported question {tag}{i}: what about item {i}?", id=f"h{tag}{i}") if i % 2 == 0
            else AIMessage(f"imported answer {tag}{i}: item {i} is fine.", id=f"a{tag}{i}") for i in range(n)]


def hash_memory(data_dir: Path) -> Memory:
    return Memory(Config(data_dir=data_dir), embedder=HashEmbedder(), hot=False, background_indexing=False)


@contextmanager
def small_server(data_dir: Path, embedder: FastEmbedder) -> Iterator[str]:
    with served(data_dir, embedder, max_body_bytes=MAX_BODY_BYTES) as (got, _):
        yield got


@contextmanager
def as_older(url: str, older: bool) -> Iterator[str]:
    if older:
        with flaky_proxy(url, CLOSE, times=0, hide=("conditional_appends",)) as proxy:
            yield proxy.url
    else:
        yield url


def after_first_chunk(count: Callable[[], int], act: Callable[[], None]) -> tuple[Callable[[int], None], list[int]]:
    fired: list[int] = []

    def between(k: int) -> None:
        if k == 1 and not fired:  # the first chunk is stored, the second not sent yet
            fired.append(count())
            act()

    return between, fired


def recording(base: str, on_batch: Callable[[int], None] = lambda _n: None,
              before_batch: Callable[[], None] = lambda: None) -> tuple[Client, list[int], list[int]]:
    """A Client whose http_client records each batch request's body size and its answer's
    status, calls `before_batch()` as each is sent, and `on_batch(k)` once the k-th
    batch (from 1) is stored."""
    sizes: list[int] = []
    statuses: list[int] = []

    def request(r: httpx.Request) -> None:
        if r.url.path.endswith(BATCH_PATH):
            sizes.append(len(r.content))
            before_batch()

    def response(r: httpx.Response) -> None:
        if r.request.url.path.endswith(BATCH_PATH):
            statuses.append(r.status_code)
            if r.is_success:
                on_batch(len(sizes))

    http = httpx.Client(event_hooks={"request": [request], "response": [response]})
    return Client(base, token=TOKEN_ACME, http_client=http), sizes, statuses
