"""A caller's own embedder that says it is unavailable degrades like the bundled model:
keyword ranking, and the embedder reported degraded; a bug of that embedder is raised.

`tiermem.errors.EmbeddingUnavailable` is public and is what a caller's `embed` raises to
have a context ranked by keywords (a custom embedder backed by a remote service that is
down), but it was not one of `model_unavailable_errors`: Memory passed it on as it would
a bug. The planner and `search` caught it on its way out, so they ranked by keywords, but
the failure was never recorded: `stats()` (and /healthz, and the CLI's note) said the
embedder was "ok" throughout, no episode was logged, and a warm-up that found the service
down left it "ok" too. The embedder here is a caller's object (a stand-in for a remote
embedding service, switched down and up); the store is real SQLite.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from tiermem import Config, Memory
from tiermem.errors import EmbeddingUnavailable

DIM = 384  # the width a remote MiniLM would answer with
QUERY = "When does my flight to Lisbon leave?"
FLIGHT = "My flight to Lisbon leaves at 9:40 from gate B12."
KEYWORDS_ONLY = "keyword (BM25) ranking only"
DOWN_REASON = "ConnectionError: embed.internal:443 refused the connection"


class RemoteEmbedder:
    """A caller's embedder: vectors from a service, which says `error` while it is down."""

    dim = DIM

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.up = True

    def embed(self, texts: list[str]) -> np.ndarray:
        if not self.up:
            raise self.error
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


def test_an_unavailable_custom_embedder_degrades_to_keyword_ranking(tmp_path: Path) -> None:
    remote = RemoteEmbedder(EmbeddingUnavailable("ConnectionError", DOWN_REASON))
    with Memory(Config(data_dir=tmp_path / "data"), embedder=remote, hot=False, background_indexing=False) as mem:
        remote.up = False
        mem.append_many("c1", [{"role": "user", "content": FLIGHT}])  # stored; its vector waits
        ctx = mem.context("c1", query=QUERY)
        assert ctx.plan.tiers["embedder"] == "degraded"
        # a fixed type, not the error it named: that is the caller's free text (the
        # tenant-visible side is tests/test_embed_caller_error_not_shown.py)
        assert ctx.plan.retrieval.endswith("(EmbeddingUnavailable)")
        hits = mem.search("c1", QUERY, 3)
        assert [h.position for h in hits] == [0]
        assert KEYWORDS_ONLY in str(hits.degraded)  # type: ignore[attr-defined]
        embedder = mem.stats()["embedder"]
        assert embedder["state"] == "degraded"  # before: "ok"
        assert embedder["reason"] == f"EmbeddingUnavailable: {DOWN_REASON}"  # the operator's detail, as said

        remote.up = True  # the service is back: vectors again
        assert "embedder" not in mem.context("c1", query=QUERY).plan.tiers  # said only when degraded
        assert mem.search("c1", QUERY, 3).degraded is None  # type: ignore[attr-defined]
        assert mem.stats()["embedder"]["state"] == "ok"


@pytest.mark.parametrize(("reason", "recorded"), [
    # `type: message`, as the class asks: kept as it is, after the fixed type /healthz reads
    (DOWN_REASON, f"EmbeddingUnavailable: {DOWN_REASON}"),
    # led by its error
    ("embed.internal:443 refused", "EmbeddingUnavailable: ConnectionError: embed.internal:443 refused"),
], ids=["type_and_message", "message_only"])
def test_a_warm_up_that_finds_the_service_down_reports_it(tmp_path: Path, reason: str, recorded: str) -> None:
    remote = RemoteEmbedder(EmbeddingUnavailable("ConnectionError", reason))
    remote.up = False
    with Memory(Config(data_dir=tmp_path / "data"), embedder=remote, hot=False, background_indexing=False) as mem:
        with pytest.raises(EmbeddingUnavailable):  # a server's warm-up logs it and goes on
            mem.warm_up()
        assert mem.stats()["embedder"]["state"] == "degraded"  # before: "ok"
        assert mem.embedding_failure == recorded  # what /healthz and the CLI say


@pytest.mark.parametrize("error", [
    ValueError("shapes (2,384) and (3,) not aligned"),  # a bug of the caller's embedder
    TypeError("expected str, got NoneType"),  # a bug of the caller's embedder
    RuntimeError("the session is closed"),  # a plain RuntimeError says nothing of a model
])
def test_a_bug_of_a_custom_embedder_is_still_raised(tmp_path: Path, error: BaseException) -> None:
    remote = RemoteEmbedder(error)
    with Memory(Config(data_dir=tmp_path / "data"), embedder=remote, hot=False, background_indexing=False) as mem:
        mem.append_many("c1", [{"role": "user", "content": FLIGHT}])
        remote.up = False
        with pytest.raises(type(error)):
            mem.context("c1", query=QUERY)
        with pytest.raises(type(error)):
            mem.search("c1", QUERY, 3)
        assert mem.stats()["embedder"]["state"] == "ok"  # a bug is not a degraded model
