"""The LangChain history over a `Client` checks artifacts against the server's own
metadata limit (`Client.limits()`, read once) before sending, as over a local Memory: one
batch request per `add_messages`, no refusal and resend, and the same rows. Over an older
server (no /v1/limits) it falls back to the refusal and resend, storing the same rows.
Real HTTP to the real app on a real SQLite file, the real langchain-core.

Fails on the code before: over a client every batch with an artifact over the limit was
sent twice (the server refused the first: 422)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("langchain_core")
from client_helpers import NS, served
from langchain_core.messages import HumanMessage, ToolMessage
from service_helpers import TOKEN_ACME

from tiermem import Memory
from tiermem.adapters.langchain import METADATA_ARTIFACT_KEY, TiermemChatMessageHistory
from tiermem.client import Client
from tiermem.tiers.embed_onnx import FastEmbedder

MAX_METADATA_BYTES = 512  # the server's: an artifact of ARTIFACT_BYTES is over it
ARTIFACT_BYTES = 2000
LIMITS_PATH = "/v1/limits"
BATCHES = 3  # add_messages calls, each with an artifact over the limit


@pytest.fixture(scope="module")
def url_mem(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[tuple[str, Memory]]:
    with served(tmp_path_factory.mktemp("lc-limits") / "data", embedder,
                max_metadata_bytes=MAX_METADATA_BYTES) as got:
        yield got


@pytest.fixture(scope="module")
def old_url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("lc-limits-old") / "data", embedder, drop_paths=[LIMITS_PATH],
                max_metadata_bytes=MAX_METADATA_BYTES) as (base, _mem):
        yield base


def _add(memory: Any, conv: str) -> list[Any]:
    h = TiermemChatMessageHistory(memory, conv)
    for i in range(BATCHES):
        h.add_messages([HumanMessage(f"Weather {i}?", id=f"h{i}"),
                        ToolMessage("sunny", tool_call_id=f"c{i}", id=f"t{i}", artifact={"raw": "x" * ARTIFACT_BYTES}),
                        ToolMessage("cloudy", tool_call_id=f"d{i}", id=f"s{i}", artifact={"raw": "small"})])
    return [(m.body, m.metadata) for m in memory.history(conv)]


def _sent(url: str) -> tuple[Client, httpx.Client, list[str]]:
    sent: list[str] = []
    http = httpx.Client(event_hooks={"request": [lambda r: sent.append(f"{r.method} {r.url.path}")]})
    return Client(url, token=TOKEN_ACME, namespace=NS, http_client=http), http, sent


def test_artifacts_are_checked_before_sending_one_batch_each(url_mem: tuple[str, Memory]) -> None:
    url, mem = url_mem
    want = _add(mem.namespaced("acme/local"), "artifacts")
    client, http, sent = _sent(url)
    with http, client:
        got = _add(client, "artifacts")
    assert got == want
    assert [m for _body, m in got][1] == {"langchain_id": "t0"}  # the big artifact alone left out
    assert [m for _body, m in got][2][METADATA_ARTIFACT_KEY] == {"raw": "small"}
    assert sent.count(f"GET {LIMITS_PATH}") == 1
    assert sum(s.endswith("/messages:batch") for s in sent) == BATCHES  # no refusal, no resend


def test_a_batch_without_artifacts_never_asks_for_the_limits(url_mem: tuple[str, Memory]) -> None:
    url, _mem = url_mem
    client, http, sent = _sent(url)
    with http, client:
        TiermemChatMessageHistory(client, "plain").add_messages([HumanMessage("Aisle seat.", id="p1")])
    assert f"GET {LIMITS_PATH}" not in sent


def test_an_older_server_still_gets_the_same_rows_through_its_refusal(url_mem: tuple[str, Memory],
                                                                      old_url: str) -> None:
    _url, mem = url_mem
    want = _add(mem.namespaced("acme/local-old"), "artifacts")
    client, http, sent = _sent(old_url)
    with http, client:
        got = _add(client, "artifacts")
    assert got == want
    assert sent.count(f"GET {LIMITS_PATH}") == 1  # asked once: unknown is kept too
    assert sum(s.endswith("/messages:batch") for s in sent) == 2 * BATCHES  # refused, then sent without it
