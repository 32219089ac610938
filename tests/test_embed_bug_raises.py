"""A bug in embedding a query is raised; only a model that cannot be loaded or run
degrades `context` and `search` to keyword ranking.

Memory turned any exception of the embedder into EmbeddingUnavailable, so a genuine bug
(the ValueError '6 memo scopes for 2 texts' of 9ad6939, a TypeError of a caller's
embedder) silently became keyword ranking and a `degraded` embedder, where the planner
promises that any other error of `embed` is raised. Now only
`model_unavailable_errors` degrade (a file missing or unreadable, a runtime missing, the
runtimes' load and run failures); a model whose files its library cannot parse (a cut
JSON file: a ValueError of the library's) is said as EmbeddingModelUnreadable, an
OSError, and still degrades.

The bug-shaped failures come through the public `Memory(embedder=...)` hook: a caller's
embedder whose query path raises, as any embedder a caller brings may. No shipped
embedder has such a bug left to provoke (9ad6939 fixed the last one), and reintroducing
one would mean patching tiermem's internals. The missing and damaged models are real
copies of the bundled one under tmp_path; the store is real SQLite.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from export_cache import copy_export_cache
from hash_embedder import HashEmbedder

from tiermem import Config, Memory
from tiermem.tiers.embed import bundled_model_path

QUERY = "When does my flight to Lisbon leave?"
FLIGHT = "My flight to Lisbon leaves at 9:40 from gate B12."
KEYWORDS_ONLY = "keyword (BM25) ranking only"


class _QueryFails(HashEmbedder):
    """A caller's embedder: stores by hash vectors; its query path raises `error`."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def embed_query(self, texts: list[str]) -> np.ndarray:
        raise self.error


@pytest.mark.parametrize("error", [
    ValueError("6 memo scopes for 2 texts"),  # 9ad6939's bug, as it was raised
    TypeError("unsupported operand type(s) for +: 'int' and 'str'"),  # a caller's embedder's bug
    KeyError("input_ids"),  # a lookup that should not fail
    AssertionError("the session is built"),  # an invariant broken
])
def test_a_bug_in_the_query_embedding_is_raised_not_degraded(tmp_path: Path, error: BaseException) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=_QueryFails(error), hot=False,
                background_indexing=False) as mem:
        mem.append_many("c1", [{"role": "user", "content": FLIGHT}])
        with pytest.raises(type(error)):  # before: a context ranked by keywords, the bug unseen
            mem.context("c1", query=QUERY)
        with pytest.raises(type(error)):
            mem.search("c1", QUERY, 3)
        assert mem.stats()["embedder"]["state"] == "ok"  # a bug is not a degraded model


def test_a_model_server_that_refuses_still_degrades(tmp_path: Path) -> None:
    # a caller's embedder calling a model server that is down: the model cannot be run
    refused = _QueryFails(ConnectionRefusedError(111, "Connection refused"))
    with Memory(Config(data_dir=tmp_path / "data"), embedder=refused, hot=False, background_indexing=False) as mem:
        mem.append_many("c1", [{"role": "user", "content": FLIGHT}])
        ctx = mem.context("c1", query=QUERY)
        assert ctx.plan.tiers["embedder"] == "degraded" and ctx.plan.retrieval.endswith("(ConnectionRefusedError)")
        assert KEYWORDS_ONLY in str(mem.search("c1", QUERY, 3).degraded)  # type: ignore[attr-defined]


def _removed(model: Path) -> None:
    model.rename(model.with_name("away"))  # FileNotFoundError at the load


def _cut(name: str) -> Callable[[Path], None]:
    def cut(model: Path) -> None:
        os.truncate(model / name, (model / name).stat().st_size // 2)

    cut.__name__ = f"cut_{name}"  # the case's id
    return cut


@pytest.mark.parametrize(("damage", "error"), [
    (_removed, "FileNotFoundError"),  # the directory gone
    (_cut("model.safetensors"), "EmbeddingModelUnreadable"),  # safetensors' own error at the load
    (_cut("modules.json"), "EmbeddingModelUnreadable"),  # a JSONDecodeError (a ValueError) at the load
    (_cut("config.json"), "OSError"),  # transformers says it as an OSError itself
])
def test_a_model_that_cannot_be_loaded_still_degrades(
        tmp_path: Path, damage: Callable[[Path], None], error: str) -> None:
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    config = Config(data_dir=tmp_path / "data", embedding_model=model, embedding_runtime="onnx",
                    embedding_cache_dir=copy_export_cache(tmp_path))
    damage(model)  # after the config's check: a directory gone at the start is refused there
    with Memory(config, hot=False, background_indexing=False) as mem:
        mem.append_many("c1", [{"role": "user", "content": FLIGHT}])
        ctx = mem.context("c1", query=QUERY)
        assert ctx.plan.tiers["embedder"] == "degraded" and ctx.plan.retrieval.endswith(f"({error})")
        hits = mem.search("c1", QUERY, 3)
        assert hits[0].position == 0 and error in str(hits.degraded)  # type: ignore[attr-defined]
        assert mem.stats()["embedder"]["state"] == "degraded"
