"""What the tests of `tiermem.client` share: the real app served over HTTP on loopback
(`service_helpers.serve_in_thread`) on a real SQLite file, with the scoped tokens of
`service_helpers`, and a conversation in `acme` the tests read.

`MAX_CONTENT_BYTES` is small, so that a test text can pass the server's limit while the
client (which does not know the server's configuration) lets it through.

`both`: the same adapter scenario over the server's Memory and over a `Client`, each in
its own namespace under `acme` (so that neither's namespace recall sees the other's
turns), for tests that hold the two results equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from service_helpers import SCOPED_TOKENS, TOKEN_ACME, serve_in_thread

from tiermem import Config, Memory
from tiermem.adapters._common import MemoryLike
from tiermem.client import Client
from tiermem.tiers.embed_onnx import FastEmbedder

NS = "acme"
CONV = "trip-1"
QUERY = "Which flight should I book to Lisbon?"
BUDGET = 600
MAX_CONTENT_BYTES = 4096
NS_VIA_MEMORY = "acme/via-memory"
NS_VIA_CLIENT = "acme/via-client"
TRIP: list[dict[str, Any]] = [
    {"role": "user", "content": "I am flying to Lisbon on the 14th. No red-eyes, please."},
    {"role": "assistant", "content": "Noted: no overnight flights. Any airline preference?"},
    {"role": "user", "content": "TAP or easyJet; I have a TAP Miles&Go card, number 4471."},
    {"role": "assistant", "content": "Got it. I will look for daytime TAP flights first."},
    {"role": "user", "content": "Also I need a hotel near Alfama for three nights."},
    {"role": "assistant", "content": "I will search for hotels in Alfama from the 14th to the 17th."},
]


@contextmanager
def served(data_dir: Path, embedder: FastEmbedder, *, drop_paths: Iterable[str] = (),
           **config: Any) -> Iterator[tuple[str, Memory]]:
    """The service over a Memory holding `TRIP` as `CONV` in `NS`; yields (URL, Memory).
    `drop_paths`: routes it serves without (an older server)."""
    cfg = Config(data_dir=data_dir, auth_tokens=SCOPED_TOKENS, max_content_bytes=MAX_CONTENT_BYTES, **config)
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem, drop_paths=drop_paths) as url:
        with Client(url, token=TOKEN_ACME, namespace=NS) as client:
            client.append_many(CONV, TRIP)
        yield url, mem


@contextmanager
def both(url: str, mem: Memory) -> Iterator[tuple[MemoryLike, MemoryLike]]:
    """The server's Memory as a view of `NS_VIA_MEMORY`, and a Client (`TOKEN_ACME`) of
    `NS_VIA_CLIENT` on the same server."""
    with Client(url, token=TOKEN_ACME, namespace=NS_VIA_CLIENT) as client:
        yield mem.namespaced(NS_VIA_MEMORY), client
