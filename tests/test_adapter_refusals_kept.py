"""What the adapters over a memory leave to the memory's own refusals. A LangChain tool
artifact is left out of a batch only when the store refuses it for its size (a review of
f5db1db: the retry also swallowed a refusal a local Memory raised before, such as metadata
nested too deep, and stored the message without its artifact); a size refusal over HTTP
keeps its numbers (`LimitExceeded`, as the library raises it); `to_anthropic` refuses an
`AsyncClient` as every other adapter does, naming `memory`, where it failed deep inside
with a TypeError. Real SQLite files, the real langchain-core, a real `tiermem serve`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")
from client_helpers import MAX_CONTENT_BYTES, NS, served
from langchain_core.messages import HumanMessage, ToolMessage
from service_helpers import TOKEN_ACME

from tiermem import Config, Memory
from tiermem.adapters.anthropic import to_anthropic
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.client import AsyncClient, Client
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import LimitExceeded, ValidationError

MAX_METADATA_BYTES = 512
CONTENT_LIMIT = MAX_CONTENT_BYTES  # the helper's server's


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"k": value}
    return value


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("refusals") / "data", embedder, max_metadata_bytes=MAX_METADATA_BYTES) as (base, _mem):
        yield base


def test_an_artifact_nested_too_deep_is_refused_not_dropped(tmp_path: Path, embedder: FastEmbedder) -> None:
    # small in bytes, too deep in levels: the library's depth refusal, raised as before f5db1db
    with Memory(Config(data_dir=tmp_path / "d"), embedder=embedder, hot=False, background_indexing=False) as mem:
        history = TiermemChatMessageHistory(mem, "deep")
        with pytest.raises(ValidationError, match="nested") as got:
            history.add_messages([HumanMessage("Weather?", id="h1"),
                                  ToolMessage("sunny", tool_call_id="c1", id="t1", artifact=_nested(40))])
        assert got.value.field.startswith("messages[1].metadata")
        assert "deep" not in mem.conversations()  # nothing written


def test_a_size_refusal_over_http_keeps_its_numbers(url: str) -> None:
    with Client(url, token=TOKEN_ACME, namespace=NS) as client, pytest.raises(LimitExceeded) as got:
        client.append("big", {"role": "user", "content": "x" * (CONTENT_LIMIT + 1)})
    assert (got.value.limit, got.value.value, got.value.unit) == (CONTENT_LIMIT, CONTENT_LIMIT + 1, "bytes")


def test_to_anthropic_refuses_an_async_client(url: str, tmp_path: Path, embedder: FastEmbedder) -> None:
    with Memory(Config(data_dir=tmp_path / "d"), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": "hello"})
        ctx = mem.context("c", "hello", 500)
    with pytest.raises(ValidationError) as got:
        to_anthropic(ctx, AsyncClient(url, token=TOKEN_ACME, namespace=NS))  # type: ignore[arg-type]
    assert got.value.field == "memory"
