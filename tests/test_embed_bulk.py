"""The bulk embedding path (issue 17): texts tokenized once and grouped by token count into
batches that pad little, run by several worker threads on one session, with the
reference pipeline's vectors; an export whose graph computes other vectors is refused
at load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from export_cache import block_exports, copy_export_cache, perturb_feed_forward

from tiermem.tiers.embed import SentenceTransformerEmbedder, bundled_model_path
from tiermem.tiers.embed_onnx import (
    MIN_COSINE,
    MODEL_FILE,
    FastEmbedder,
    export_dir,
    plan_batches,
)
from tiermem.tiers.errors import EmbeddingRuntimeError


@pytest.mark.parametrize(("lengths", "batch", "max_tokens", "want"), [
    # sorted by length, then cut by count
    ([5, 1, 3, 2, 4], 2, None, [[1, 3], [2, 4], [0]]),
    # equal lengths keep their input order (a stable sort)
    ([2, 2, 2], 2, None, [[0, 1], [2]]),
    # the padded-token budget cuts before the count does: 3 x 4 > 10
    ([4, 4, 4, 1], 8, 10, [[3, 0], [1, 2]]),
    # a text longer than the budget still gets a batch of its own
    ([300, 1], 8, 100, [[1], [0]]),
    # nothing in, nothing out
    ([], 4, None, []),
])
def test_plan_batches(lengths: list[int], batch: int, max_tokens: int | None, want: list[list[int]]) -> None:
    got = plan_batches(lengths, batch_size=batch, max_tokens=max_tokens)
    assert got == want
    assert sorted(i for b in got for i in b) == list(range(len(lengths)))  # every text once


REFERENCE_STRIDE = 4
TRUNCATED = 5  # the index of the text past the model's 256 tokens below


def test_bulk_vectors_match_the_pipeline(reference_embedder: SentenceTransformerEmbedder) -> None:
    # short, long enough to be truncated, non-ASCII, and many lengths in one call, so the
    # bulk path cuts several batches of different widths
    texts = ["ok", "", "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
             "Melanie: 日本語のテキストと中文的句子。", "Δοκιμή ελληνικών και русский текст " * 3,
             "Ünïcödé, emoji 🎉 and code: def f(x): return x ** 2. " * 40]
    # 8 texts of each of 9 lengths: 9 batches, cut by count (16) and by BULK_MAX_TOKENS,
    # from 13 to 256 tokens wide, each holding a checked text (150 cut 15 for the same cuts)
    texts += [f"turn {i}: " + "we talked about the trip to the lake " * (i % 9) for i in range(72)]
    # the reference (torch, one thread) on the special texts and every REFERENCE_STRIDE-th
    # other: each batch of 16 (sorted by length) holds several of them, so a batch cut
    # wrong still shows, at a fraction of the reference's time
    checked = [*range(6), *range(6, len(texts), REFERENCE_STRIDE)]
    # the truncated text alone and the others in one call: with it, the pipeline's batch of
    # 64 would pad every text to its 256 tokens; one call a text costs the pipeline's
    # per-call overhead 44 times (~5x the reference's time for the same vectors)
    ref: dict[int, np.ndarray] = {}
    for group in ([i for i in checked if i != TRUNCATED], [TRUNCATED]):
        ref.update(zip(group, reference_embedder.embed([texts[i] for i in group]), strict=True))
    want = np.stack([ref[i] for i in checked])
    for workers in (1, 3):  # the caller's thread alone, and batches run at once
        fast = FastEmbedder(runtime="onnx", batch_size=16, workers=workers)
        fast.memo_size = 0
        got = fast.embed(texts)  # all of them in one call: the bulk path's batches
        assert got.shape == (len(texts), want.shape[1]) and got.dtype == np.float32
        assert float(np.min(np.sum(got[checked] * want, axis=1))) >= MIN_COSINE


@pytest.mark.parametrize("workers", [0, -1])  # no thread would run anything
def test_workers_below_one_are_refused(workers: int) -> None:
    with pytest.raises(ValueError, match="workers must be at least 1"):
        FastEmbedder(workers=workers)


def test_a_perturbed_graph_is_refused_at_load(tmp_path: Path) -> None:
    cache = copy_export_cache(tmp_path)
    perturb_feed_forward(export_dir(bundled_model_path(), cache) / MODEL_FILE)
    block_exports(cache)  # else it is exported again (tests/test_export_damaged.py)
    with pytest.raises(EmbeddingRuntimeError, match=r"below 0\.9999"):
        FastEmbedder(runtime="onnx", cache_dir=cache).load()
