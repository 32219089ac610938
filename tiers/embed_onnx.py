"""The fast embedding runtime: the bundled sentence-transformers model exported to ONNX
and run with onnxruntime and the `tokenizers` library, without torch.

Invariants:

- **Same vectors.** Stored vectors are durable data, so a runtime that computes them must
  reproduce the reference pipeline (`SentenceTransformerEmbedder`, sentence-transformers
  on torch): at export the ONNX graph's vectors are compared with the pipeline's on the
  probe texts (short, truncated at the model's max length, non-ASCII) and refused below
  `MIN_COSINE`; the pipeline's probe vectors are kept in the cache's manifest, and every
  load compares again with them, so a cache from another build, a changed runtime or a
  corrupted file is refused before it embeds anything. A comparison that passed is
  remembered (`checked/` in the cache) under everything that could change its outcome:
  the export's files (path, device, `file_signature`), the onnxruntime, tokenizers and
  numpy versions, the CPU's model and flags and the session's thread count; a load that
  finds its key there skips the probes (~80 ms: one of them is max-length), any other
  runs them. (A file written in any way gets a new ctime, which no copy can keep, even
  one that keeps the mtime: `cp -p`, `rsync -a`, a restored backup. What this cannot see
  is a disk that alters bytes without one.)
- **Offline, exported once.** The export runs locally from the model's own files (torch
  and the `onnx` package, only then), at first use or by `tiermem model` at install,
  into the user's cache dir (or `embedding_cache_dir`), keyed by a hash of the model's
  files and `EXPORT_VERSION`. It writes to a temporary file, flushes it to disk and
  renames it (then flushes the directory), the graph before the manifest, under a file
  lock, so concurrent first uses export once, never read half a file, and a power loss
  leaves no short graph beside a complete manifest.
- **Repaired once.** An export (or its fused query graph) that fails its load check
  because a file is bad (a manifest that cannot be read; a graph missing, empty, not a
  protobuf or not a valid graph; wrong probe vectors: a file cut off or corrupted on
  disk) is made again, once per load, under the export lock. Any other error of
  onnxruntime (out of memory, a session option it refuses) says nothing of the file: it
  is raised as itself (`auto` falls back on it) and the export is left alone. A process
  that finds it already remade there by another (its files' `file_signature`s changed
  since its own failed check) loads that one. Only where the fresh one fails too does
  the load fail (`runtime="onnx"`) or fall back. The one model file the runtime reads
  itself (`tokenizer.json`) is the model's, not the export's: one missing or that cannot
  be parsed is said as the pipeline says its files' (FileNotFoundError,
  EmbeddingModelUnreadable), never as the tokenizers library's bare Exception, and
  nothing is exported again.
- **Lazy.** Constructing an embedder imports nothing heavy and reads no file; the first
  `embed` loads (and, once per model, exports). `loaded` says whether that happened, so
  callers can leave embedding to a process that has the model (see tiermem.memory).
- **Bulk.** A call with many texts tokenizes them once, sorts them by token count and
  cuts batches of at most `batch_size` texts and `BULK_MAX_TOKENS` padded tokens, run by
  `workers` threads on one session with one intra-op thread each; the vectors are those
  of one text per call (padding is masked), in the caller's order. Every pool of
  threads is sized or bounded by `usable_cpus`: the affinity mask and the CPU quota.
- **Long texts.** Only a text's first max_length tokens reach the model; a long text is
  tokenized from a head cut before a space (`text_head`), kept only where its own tokens
  overflow max_length, so the ids are the whole text's (tokenizers whose pre-tokenizer
  splits at spaces, `head_chars`; any other tokenizes the whole text): a 1 MB turn costs
  ~1 ms to tokenize, not ~0.5 s.
- **Queries.** One query at a time runs a second session (two threads, where a core is
  spare) of a fused copy of the export (`QUERY_MODEL_FILE`, made once beside it and probe
  checked like it): its vectors are within MIN_COSINE of the stored ones and are never
  remembered as stored ones; a cache where it cannot be made serves queries from the
  export itself. Its build runs on a thread that is not a daemon (onnxruntime aborts a
  process that finalizes while a daemon thread is inside session construction), and an
  exit waits for every build in flight and starts none (`_wait_for_builds_at_exit`): a
  background indexer stopped at exit may make the one-text call that would start one,
  after the interpreter has joined its non-daemon threads.
- **Fallback.** `runtime="auto"` uses the reference pipeline where onnxruntime or
  tokenizers is missing, or the export or its check fails, after one fresh export where
  the cached one was damaged (logged once per reason: a warning once the fallback has
  loaded, an info line where it fails too, whose error is raised to the caller);
  `runtime="onnx"` raises instead. A fallback whose own load failed too (the model
  directory gone or damaged) is not kept: the next load tries the fast runtime again, so
  a model that comes back is served by it. One that loaded serves until a restart:
  trying the fast runtime again then would mean an export (a torch start, ~15 s of CPU)
  for a failure that is most often lasting (onnxruntime missing, an export refused),
  and a runtime swapped under concurrent calls.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import json
import logging
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tiermem.tiers.embed import (
    DEFAULT_EMBED_DIM,
    PROBE_TEXTS,
    MemoAttributes,
    SentenceTransformerEmbedder,
    TextMemo,
    bundled_model_path,
    directory_identity,
    loaded_identity,
    model_dimension,
    quiet_loading,
    remembered_for,
)

# defined with the other errors (tiers.errors); importable from here, as it always was
from tiermem.tiers.errors import EmbeddingModelFailed, EmbeddingModelUnreadable, EmbeddingUnavailable
from tiermem.tiers.errors import EmbeddingRuntimeError as EmbeddingRuntimeError
from tiermem.tiers.xdg import xdg_base

log = logging.getLogger("tiermem.embed")

# Bump when the exported graph or the manifest changes: part of the cache key, so an old
# cache is never read by code that expects another graph.
EXPORT_VERSION = 1
# float32 paths differ only in summation order (measured: 0.9999998 at worst on the
# probes); below this the runtime is not computing the same vectors.
MIN_COSINE = 0.9999
ONNX_OPSET = 17
# A bulk call's texts are tokenized once, sorted by token count and cut into batches of
# at most `batch_size` texts and this many padded tokens. Measured on LoCoMo turns (2
# shared cores, evals/bench_embed_bulk.py): 512 and 1,024 embed ~1.6x more texts per
# CPU-second than the batches of 64 sorted by characters before (25% padding), 2,048
# less (~1.4x): small batches pad less and their activations stay in cache.
BULK_MAX_TOKENS = 512
# Threads per onnxruntime call (OMP_NUM_THREADS overrides): one. A bulk call runs one
# batch per worker thread instead (`FastEmbedder.workers`, default one per usable CPU),
# which needs no synchronisation between operators: 1.3x more texts per CPU-second than
# one call on two threads, and a query on one thread costs less CPU (6.0 against 7.3 ms
# at load 10) and less wall time on a busy machine (14-16 against 18-22 ms); idle it
# measured 3.7 against 2.3 ms.
SESSION_THREADS = 1
# Threads of the session that embeds one query at a time, beside the bulk session's one:
# two, where two CPUs are usable. Used only while everyone else's work leaves a core
# spare (`spare_core`): idle, a LoCoMo question took 4.08 ms on two threads against 4.92 on one
# (README, start-up); on a busy machine the second thread waits for a core and one is
# faster. Built in a background thread at the second one-text call, so no process that
# only bulk-embeds or asks one query (a CLI `context`) pays for it (~0.2 s, a second copy
# of the weights; the first build also fuses QUERY_MODEL_FILE, ~2.5 s, once per cache). It
# runs the fused graph; where that cannot be made or fails its check, the plain export,
# whose vectors are bit-identical to the one-thread session's (onnxruntime splits a
# GEMM's output between threads, never its sums), so it then embeds single texts to
# store too.
QUERY_THREADS = 2
# The query session's graph: the export through onnxruntime's transformer optimizer
# (`fuse_graph`: Attention, SkipLayerNormalization, BiasGelu and EmbedLayerNormalization:
# 62 nodes for the export's 532), derived once from the export (~2.5 s) and kept beside
# it. One query is ~15 tokens, where the hand-offs between operators cost as much as their
# FLOPs: fewer operators answer a LoCoMo question sooner (with spinning within the run,
# 1.19x: README, start-up); in bulk
# the same graph is 0.97x (docs/ingest.md), so batches and stored vectors keep the plain
# export. Its vectors pass the same probe check (cosine >= MIN_COSINE to the pipeline;
# measured 0.9999999), and are never remembered as stored ones.
QUERY_MODEL_FILE = "model.query.onnx"
# When a built query session answers one-text calls (FastEmbedder.query_session)
QuerySessionPolicy = Literal["spare", "always", "never"]
# A core counts as spare while the work of everyone but the calling thread, on the CPUs
# this process may use, leaves one free but for this much (`spare_core`).
SPARE_CORE_LOAD = 0.5
# `spare_core` reads the CPUs' busy time (/proc/stat) at most this often per thread and
# judges the window since that thread's last reading; between readings its verdict stands.
SPARE_SAMPLE_S = 0.25
# A thread's window older than this, or none yet, is not judged: the 1-minute load average
# answers instead, less the ~1 of the caller it counts (`load_average_others`).
SPARE_MAX_WINDOW_S = 60.0
RUNTIMES = ("auto", "onnx", "torch")
# Probe texts of the load-time check: the pipeline's own probes plus an empty text (all
# padding but the special tokens) and a CJK one (the tokenizer's non-Latin path).
PROBES = (*PROBE_TEXTS, "", "日本語のテキストと中文的句子。")
# The model cache holds the public model's export and digests, no user data: readable by
# all, so a cache exported at image build (as root) serves the unprivileged runtime user.
# (Everything that holds user data is 0600 in 0700 directories: tiers/files.py.)
CACHE_FILE_MODE = 0o644
MANIFEST = "manifest.json"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"  # in the model's directory: the fast runtime's tokenizer
# A long text is tokenized from a head, not whole: the tokenizer keeps only the first
# max_length tokens (256), and tokenizing all of a 1 MB turn to keep them cost ~0.5 s of
# CPU (10 such turns: ~5 s of the first context that embeds them). The head ends before a
# space, where the pre-tokenizer splits, so its tokens are the whole text's first ones; it
# is taken only where the head's own tokens overflow max_length (else twice as long, up to
# the whole text). First head: this many characters per token kept (LoCoMo turns and
# English prose average ~4-5; a head too short costs one more, twice as long, try).
HEAD_CHARS_PER_TOKEN = 8
# Pre-tokenizers that split at every space and normalizers that work char by char (a space
# composes with nothing before it): a head cut before a space gives the whole text's first
# tokens. Any other tokenizer (or left-side truncation) tokenizes the whole text.
HEAD_PRE_TOKENIZERS = frozenset({"BertPreTokenizer", "Whitespace", "WhitespaceSplit"})
HEAD_NORMALIZERS = frozenset({"NoneType", "BertNormalizer", "Lowercase", "StripAccents", "NFC", "NFD", "NFKC",
                              "NFKD", "Strip"})
CHECKED_DIR = "checked"  # in the cache dir: one empty-ish stamp per passed load check
STAMPS_DIR = "stamps"  # in the cache dir: each model directory's digest, under its files' stat
# hex digits of the model directory's path hash that start its stamps' names (and tell
# which stamps are its own, for pruning: `model_fingerprint`)
STAMP_DIR_KEY_CHARS = 16
# Files of a sentence-transformers directory that do not change what it computes.
_UNHASHED = {"README.md", ".gitattributes"}


def default_cache_dir() -> Path:
    """Where exports are kept: `$XDG_CACHE_HOME/tiermem/onnx` (~/.cache/tiermem/onnx; a
    relative XDG_CACHE_HOME is ignored, `xdg_base`)."""
    return xdg_base("XDG_CACHE_HOME", Path.home() / ".cache") / "tiermem" / "onnx"


def _model_files(model_path: Path) -> list[Path]:
    return sorted(p for p in model_path.rglob("*") if p.is_file() and p.name not in _UNHASHED)


def model_fingerprint(model_path: Path, cache_dir: Path) -> str:
    """sha256 over the model's files (relative names and contents).

    Hashing 90 MB costs ~0.15 s on every start, so the digest is remembered in the cache
    under the files' names and `file_signature`s: a file written in any way is hashed
    again. Nothing stands behind this: the load check compares the export with the
    probe vectors that the model's files computed when they were hashed, so a digest
    kept for files since replaced would serve their old model's vectors.

    A stamp is named by the directory's path hash and the files' signatures: one written
    replaces the directory's older ones, which can never match again (every change of a
    file moves its ctime forward). A change of permissions or owner alone re-hashes too:
    it sets the ctime as a `cp -p` onto the file does, with size, mtime and inode the
    same, and only reading the bytes tells those apart."""
    files = _model_files(model_path)
    if not files:  # an OSError, as for any unreadable file: `embedder_identity` leaves it to the load to say why
        raise FileNotFoundError(f"embedding model directory {model_path} "
                                f"{'holds no model files' if model_path.is_dir() else 'does not exist'}")
    stat_sig = hashlib.sha256()
    for f in files:
        stat_sig.update(f"{f.relative_to(model_path)}\0{file_signature(f.stat())}\n".encode())
    dir_key = hashlib.sha256(str(model_path.resolve()).encode()).hexdigest()[:STAMP_DIR_KEY_CHARS]
    stamp = cache_dir / STAMPS_DIR / f"{dir_key}-{stat_sig.hexdigest()}"
    with contextlib.suppress(OSError):
        known = stamp.read_text("ascii").strip()
        if len(known) == 64:
            return known
    digest = hashlib.sha256()
    for f in files:
        digest.update(str(f.relative_to(model_path)).encode() + b"\0")
        with f.open("rb") as fh:
            digest.update(hashlib.file_digest(fh, "sha256").digest())
    out = digest.hexdigest()
    with contextlib.suppress(OSError):
        stamp.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(stamp, out.encode())
        for old in stamp.parent.glob(f"{dir_key}-*"):
            if old.name != stamp.name:
                with contextlib.suppress(OSError):  # another process pruned it first
                    old.unlink()
    return out


def file_signature(st: os.stat_result) -> str:
    """What tells a file's contents apart without reading them, for the digests and
    checks remembered in the cache: size, mtime, inode and ctime. Not the mtime alone:
    copies that keep it (`cp -p` onto the file, `rsync -a`'s rename, a restored backup)
    put other bytes of the same size under the same mtime, but every write, rename or
    `utime` sets the ctime, which nothing can set back."""
    return f"{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\0{st.st_ctime_ns}"


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        _install(Path(tmp), path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    """Flush a directory's entries (a rename into it) to disk, where the system can."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # Windows opens no directory; its renames are flushed with the file
        return
    try:
        with contextlib.suppress(OSError):  # some file systems refuse to sync a directory
            os.fsync(fd)
    finally:
        os.close(fd)


def _install(tmp: Path, path: Path) -> None:
    """Put the written (and flushed) temporary file `tmp` in place as `path`, readable by
    all, the rename flushed too: after a power loss `path` is the old file or the whole
    new one, and what is written after this call (the manifest after the graph) is never
    on disk without it."""
    os.chmod(tmp, CACHE_FILE_MODE)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(np.sum(a * b, axis=1), dtype=np.float64)


def _cpu_signature() -> str:
    """The CPU's model name and flags (what onnxruntime's kernels dispatch on)."""
    import platform

    sig = platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text("utf-8", "replace").splitlines():
            if line.startswith(("model name", "flags", "Features")):
                sig += "\n" + line
                if line.startswith(("flags", "Features")):
                    break
    return sig


def check_key(out: Path, threads: int, graph: str = MODEL_FILE) -> str:
    """What a passed load check of the export in `out` (its `graph` file) is remembered
    under (see the module docstring): a sha256 over the files' identities and the runtime
    around them."""
    import onnxruntime
    import tokenizers

    parts = [f"v{EXPORT_VERSION}", f"threads={threads}", _cpu_signature(),
             f"onnxruntime={onnxruntime.__version__}", f"tokenizers={tokenizers.__version__}",
             f"numpy={np.__version__}"]
    if graph != MODEL_FILE:  # the export's own key is unchanged, so its stamps stay valid
        parts.append(f"graph={graph}")
    for name in (graph, MANIFEST):
        st = (out / name).stat()
        parts.append(f"{(out / name).resolve()}\0{st.st_dev}\0{file_signature(st)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


# What every load reads from a manifest (`export_model` writes them all)
MANIFEST_KEYS = ("export_version", "dim", "max_length", "lower_case", "pad_id", "inputs", "probes", "reference")


def read_manifest(model_path: Path, out: Path) -> dict[str, Any]:
    """The export's manifest in `out`; one that cannot be read, lacks a key, or was
    written for another version or other probes is damage (the directory's name has
    the version: a manifest of another one in it is not what an export wrote there)."""
    try:
        manifest = json.loads((out / MANIFEST).read_text("utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: cut off, or not UTF-8 (UnicodeDecodeError)
        raise EmbeddingRuntimeError(model_path, f"{out / MANIFEST} cannot be read ({type(exc).__name__}: {exc})",
                                    damaged=True) from exc
    if not isinstance(manifest, dict) or any(k not in manifest for k in MANIFEST_KEYS):
        raise EmbeddingRuntimeError(model_path, f"{out / MANIFEST} lacks what an export writes", damaged=True)
    if manifest["export_version"] != EXPORT_VERSION or manifest["probes"] != list(PROBES):
        raise EmbeddingRuntimeError(model_path, f"cache {out} was written by another version", damaged=True)
    return manifest


def export_dir(model_path: Path, cache_dir: Path) -> Path:
    return cache_dir / f"{model_fingerprint(model_path, cache_dir)[:32]}-v{EXPORT_VERSION}"


def export_model(model_path: Path, out_dir: Path) -> Path:
    """Export `model_path` (a Transformer + mean Pooling [+ Normalize] model) to
    `out_dir/model.onnx` with a manifest of the reference pipeline's probe vectors;
    refuses a graph whose vectors differ from the pipeline's. Needs torch and onnx."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import warnings

    # torch is imported after the reference loads: a model that cannot load (weights cut
    # off, `check_weights`) raises there without it, as the fallback's load does
    reference = SentenceTransformerEmbedder(model_path)
    reference.memo_size = 0
    # the probes are embedded for nobody: the first export often runs inside the caller's
    # embed, whose memo scope (one per text of its batch) must not apply to them
    with remembered_for(None):
        want = reference.embed(list(PROBES))
    model = reference._load()
    modules = [type(m).__name__ for m in model]
    if modules[:2] != ["Transformer", "Pooling"] or modules[2:] not in ([], ["Normalize"]):
        raise EmbeddingRuntimeError(model_path, f"modules {modules} are not Transformer, Pooling[, Normalize]")
    pool = model[1].get_config_dict()
    mode = pool.get("pooling_mode", "mean" if pool.get("pooling_mode_mean_tokens") else None)
    if mode != "mean" or any(
            pool.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                  "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                                  "pooling_mode_lasttoken")):
        raise EmbeddingRuntimeError(model_path, "only mean pooling is exported")
    import torch
    from transformers import AutoModel

    # eager attention: the SDPA path decides at trace time whether a mask is needed
    # (none when the example batch has no padding), which a graph cannot undo later
    with quiet_loading():
        net = AutoModel.from_pretrained(str(model_path), local_files_only=True, attn_implementation="eager").eval()
    inputs = list(model.tokenizer.model_input_names)

    class _Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, *args: Any) -> Any:
            feed = dict(zip(inputs, args, strict=True))
            hidden = self.net(**feed).last_hidden_state
            weights = feed["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    # an example with padding, so the mask's data path is traced
    example = model.tokenizer(["a longer example sentence for tracing", "short"], return_tensors="pt",
                              padding=True)
    args = tuple(example[name] for name in inputs)
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".model.", suffix=".onnx")
    os.close(fd)
    try:
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Pooled(), args, tmp, input_names=inputs, output_names=["embedding"],
                dynamic_axes={**{n: {0: "batch", 1: "tokens"} for n in inputs}, "embedding": {0: "batch"}},
                opset_version=ONNX_OPSET, dynamo=False,
            )
        manifest = {
            "export_version": EXPORT_VERSION,
            "model_path": str(model_path),
            "dim": int(want.shape[1]),
            "max_length": int(model.max_seq_length),
            "lower_case": bool(getattr(model[0], "do_lower_case", False)),
            "pad_id": int(model.tokenizer.pad_token_id or 0),
            "pad_token": str(model.tokenizer.pad_token or "[PAD]"),
            "inputs": inputs,
            "probes": list(PROBES),
            "reference": want.astype(float).tolist(),
        }
        session = OnnxSession(model_path, Path(tmp), manifest, threads=omp_threads() or usable_cpus())
        got = session.run(list(PROBES))
        worst = float(_cosines(got, want).min())
        if worst < MIN_COSINE:
            raise EmbeddingRuntimeError(model_path, f"exported graph reaches cosine {worst:.6f} to the pipeline, "
                                                    f"below {MIN_COSINE}")
        manifest["export_cosine_min"] = worst
        # readable by all: a model is no secret, and an image's export is written by root
        # and read by the service's own user; on disk before the manifest that vouches for it
        _fsync_file(Path(tmp))
        _install(Path(tmp), out_dir / MODEL_FILE)
        _write_atomic(out_dir / MANIFEST, json.dumps(manifest).encode())
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    log.info("exported %s to %s (cosine to the pipeline >= %.7f)", model_path, out_dir, worst)
    return out_dir / MODEL_FILE


def plan_batches(lengths: list[int], *, batch_size: int, max_tokens: int | None = None) -> list[list[int]]:
    """Indexes of `lengths` (token counts) cut into batches: sorted by length, so that a
    batch pads little, at most `batch_size` texts and, with `max_tokens`, at most that
    many padded tokens (the batch's longest x its size; a text alone may exceed it)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    out: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        # ascending: the text being added is the batch's longest
        if cur and (len(cur) >= batch_size or (max_tokens is not None and (len(cur) + 1) * lengths[i] > max_tokens)):
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    return out


# What a load saw of an export's files before checking them: each one's `file_signature`
# (None: missing). The same under the lock after a failed check: nobody has remade them.
ExportFiles = tuple[str | None, ...]


def export_files(out: Path, names: tuple[str, ...] = (MODEL_FILE, MANIFEST)) -> ExportFiles:
    """The `file_signature`s of the files `names` in the export dir `out` (see ExportFiles)."""
    sigs: list[str | None] = []
    for name in names:
        try:
            sigs.append(file_signature((out / name).stat()))
        except OSError:
            sigs.append(None)
    return tuple(sigs)


def ensure_export(model_path: Path, cache_dir: Path, *, damaged: ExportFiles | None = None) -> Path:
    """The export directory for `model_path`, exporting first if no valid one exists.
    `damaged`: `export_files` of the export as a load saw it before it failed its check;
    it is exported again unless another process has remade it meanwhile (its files'
    signatures differ from these by then). The fused query graph, made from the old
    export, goes with it."""
    out = export_dir(model_path, cache_dir)
    if damaged is None and (out / MANIFEST).is_file() and (out / MODEL_FILE).is_file():
        return out
    with _file_lock(cache_dir / ".export.lock"):
        # another process may have exported (or remade the damaged export) meanwhile
        if not ((out / MANIFEST).is_file() and (out / MODEL_FILE).is_file()) or (
                damaged is not None and export_files(out) == damaged):
            _remove_temporaries(out)
            if damaged is not None:
                (out / QUERY_MODEL_FILE).unlink(missing_ok=True)
            export_model(model_path, out)
    return out


def _remove_temporaries(out: Path) -> None:
    """Temporary files an export or a fusion killed mid-write left in `out` (its graph
    alone is ~90 MB). Only under the export lock: no one else writes there then."""
    if not out.is_dir():
        return
    for p in out.glob(".*"):
        if p.is_file():
            with contextlib.suppress(OSError):
                p.unlink()
                log.info("removed %s, left by an export that did not finish", p)


@contextlib.contextmanager
def _quiet_optimizer() -> Iterator[None]:
    """The transformer optimizer reports every fusion on loggers named after its own
    modules (`fusion_base`, `onnx_model_bert`, ...): errors only while it runs."""
    import logging

    import onnxruntime.transformers as ort_transformers

    names = {"onnxruntime.transformers"} | {p.stem for p in Path(ort_transformers.__file__).parent.glob("*.py")}
    loggers = [logging.getLogger(n) for n in sorted(names)]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def fuse_graph(plain: Path, out: Path, *, num_heads: int, hidden_size: int, opt_level: int | None = 0) -> dict[str, int]:
    """onnxruntime's transformer optimizer over an exported BERT graph: attention,
    LayerNorm, GELU, SkipLayerNorm and the embedding layer become single contrib
    operators (float32 kept; `opt_level` 0: its own fusions only, onnxruntime applies the
    rest at load). Writes `out` atomically (readable by all, as the export); returns the
    fused operators' counts. Needs onnx."""
    from onnxruntime.transformers.optimizer import optimize_model

    with _quiet_optimizer():
        model = optimize_model(str(plain), model_type="bert", num_heads=num_heads, hidden_size=hidden_size,
                               opt_level=opt_level, use_gpu=False)
        counts = {str(k): int(v) for k, v in model.get_fused_operator_statistics().items() if v}
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.")
    os.close(fd)
    try:
        model.save_model_to_file(tmp)
        _fsync_file(Path(tmp))
        _install(Path(tmp), out)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return counts


def ensure_query_graph(model_path: Path, out: Path, cache_dir: Path, *,
                       damaged: ExportFiles | None = None) -> Path:
    """`QUERY_MODEL_FILE` in the export directory `out`, fused from the export first if it
    is not there (under the export's lock: concurrent first uses fuse once). `damaged`:
    `export_files(out, (QUERY_MODEL_FILE,))` as a load saw it before it failed its check:
    fused again unless another process has meanwhile (as `ensure_export`). Raises where
    it cannot be made (no onnx, a read-only cache, a graph the optimizer refuses)."""
    target = out / QUERY_MODEL_FILE
    if damaged is None and target.is_file():
        return target
    with _file_lock(cache_dir / ".export.lock"):
        if not target.is_file() or (damaged is not None and export_files(out, (QUERY_MODEL_FILE,)) == damaged):
            _remove_temporaries(out)
            cfg = json.loads((model_path / "config.json").read_text("utf-8"))
            counts = fuse_graph(out / MODEL_FILE, target, num_heads=int(cfg["num_attention_heads"]),
                                hidden_size=int(cfg["hidden_size"]))
            log.info("fused the query graph %s (%s)", target, counts)
    return target


class OnnxSession:
    """One onnxruntime session and its tokenizer; `run(texts)` computes the vectors.

    `threads` None: `OMP_NUM_THREADS` if set, else onnxruntime's default (one per
    physical core, blind to a CPU quota: the runtime's own sessions all say how many).
    `spinning`: idle pool threads spin between operators instead of sleeping (faster
    for back-to-back bulk batches, wasteful on a request path that idles between calls).
    `spin_within_run`: they spin between one run's operators only, and stop when it ends
    (`session.force_spinning_stop`): the query session's hand-offs without the ~40 ms of
    a spinning core after each query."""

    def __init__(self, model_path: Path, onnx_file: Path, manifest: dict[str, Any], *,
                 threads: int | None = None, spinning: bool = False, spin_within_run: bool = False,
                 config: dict[str, str] | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.lower = bool(manifest["lower_case"])
        self.inputs = list(manifest["inputs"])
        tok = _read_tokenizer(Tokenizer, model_path)
        tok.enable_truncation(int(manifest["max_length"]))
        tok.no_padding()
        self.tokenizer = tok
        self.pad_id = int(manifest["pad_id"])
        opts = ort.SessionOptions()
        if threads is None:
            threads = omp_threads()
        if threads is not None:
            opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        # idle worker threads sleep instead of spinning by default: the cores are shared
        # with the web server, Redis and other processes
        opts.add_session_config_entry("session.intra_op.allow_spinning",
                                      "1" if spinning or spin_within_run else "0")
        if spin_within_run and not spinning:
            opts.add_session_config_entry("session.force_spinning_stop", "1")
        for key, value in (config or {}).items():
            opts.add_session_config_entry(key, value)
        try:
            self.session = ort.InferenceSession(str(onnx_file), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's errors (InvalidProtobuf, Fail, ...) share no base class
            if not graph_file_bad(exc, onnx_file):
                raise  # out of memory, a refused option: the file may be fine, nothing to export again
            raise EmbeddingRuntimeError(model_path, f"{onnx_file} cannot be loaded ({type(exc).__name__}: {exc})",
                                        damaged=True) from exc
        # the Rust tokenizer refuses concurrent use of one instance ("Already borrowed")
        self._tok_lock = threading.Lock()
        self._head_chars = head_chars(tok)

    def encode(self, texts: list[str]) -> list[Any]:
        """The tokenizer's encodings (ids, type ids), truncated, unpadded: a long text's
        from a head of it (HEAD_CHARS_PER_TOKEN), the same ids as from the whole text."""
        # what sentence-transformers' Transformer module does before tokenizing
        prepared = [t.strip().lower() if self.lower else t.strip() for t in texts]
        limit = self._head_chars
        with self._tok_lock:
            if limit is None:
                return list(self.tokenizer.encode_batch(prepared))
            heads = [text_head(t, limit) for t in prepared]
            encs = list(self.tokenizer.encode_batch(heads))
            while True:
                # a head whose tokens did not overflow max_length may hold fewer than the whole text's
                short = [i for i, e in enumerate(encs) if len(heads[i]) < len(prepared[i]) and not e.overflowing]
                if not short:
                    return encs
                limit *= 2
                for i in short:
                    heads[i] = text_head(prepared[i], limit)
                for i, e in zip(short, self.tokenizer.encode_batch([heads[i] for i in short]), strict=True):
                    encs[i] = e

    def run_encoded(self, encs: list[Any]) -> np.ndarray:
        """Vectors of encodings, padded to the longest of them."""
        width = max(len(e.ids) for e in encs)
        ids = np.full((len(encs), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        types = np.zeros((len(encs), width), dtype=np.int64)
        for i, e in enumerate(encs):
            n = len(e.ids)
            ids[i, :n] = e.ids
            mask[i, :n] = 1
            types[i, :n] = e.type_ids
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        out = self.session.run(None, {name: arrays[name] for name in self.inputs})[0]
        return np.ascontiguousarray(out, dtype=np.float32)

    def run(self, texts: list[str]) -> np.ndarray:
        return self.run_encoded(self.encode(texts))


def head_chars(tokenizer: Any) -> int | None:
    """The first head's length in characters for `tokenizer` (a `tokenizers.Tokenizer`,
    truncation on), or None where a head's tokens need not be the whole text's first ones
    (HEAD_PRE_TOKENIZERS, HEAD_NORMALIZERS, right-side truncation): it tokenizes texts whole."""
    trunc = tokenizer.truncation
    if not trunc or trunc.get("direction", "right") != "right":
        return None
    if type(tokenizer.pre_tokenizer).__name__ not in HEAD_PRE_TOKENIZERS:
        return None
    norm = tokenizer.normalizer
    parts = getattr(norm, "normalizers", None) if type(norm).__name__ == "Sequence" else [norm]
    if parts is None or any(type(n).__name__ not in HEAD_NORMALIZERS for n in parts):
        return None
    return int(trunc["max_length"]) * HEAD_CHARS_PER_TOKEN


def text_head(text: str, limit: int) -> str:
    """`text` cut before its last space within `limit` characters (or its first space
    after them, where none is within), the pre-tokenizer's split: every word of the head
    is a whole word of the text. The whole text where it is no longer or has no space."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    if cut <= 0:
        cut = text.find(" ", limit)
    return text if cut <= 0 else text[:cut]


def _read_tokenizer(tokenizer_class: Any, model_path: Path) -> Any:
    """The model's `tokenizer.json`, read by the `tokenizers` library (`tokenizer_class`,
    its Tokenizer), which says every failure (a file missing, cut off, not JSON) as a bare
    Exception: said here as a model file that cannot be used, FileNotFoundError for one
    missing, EmbeddingModelUnreadable (an OSError) for one it cannot read or parse, as
    the pipeline's load says its files' (`SentenceTransformerEmbedder._load`)."""
    path = model_path / TOKENIZER_FILE
    try:
        return tokenizer_class.from_file(str(path))
    except Exception as exc:
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, "the embedding model's tokenizer file does not exist",
                                    str(path)) from exc
        raise EmbeddingModelUnreadable(model_path, f"{path}: {type(exc).__name__}: {exc}") from exc


def graph_file_bad(exc: BaseException, onnx_file: Path) -> bool:
    """Whether onnxruntime's error `exc` (making or running a session of `onnx_file`)
    says the file itself is bad, so that exporting it again may mend it: missing, not a
    protobuf, not a valid graph, or empty (a rename that was never flushed: onnxruntime
    says "no graph", an InvalidArgument, which a bad argument raises too). Not an
    out-of-memory, a refused session option or any other runtime failure."""
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidGraph, InvalidProtobuf, NoSuchFile

    if isinstance(exc, (InvalidProtobuf, NoSuchFile, InvalidGraph, FileNotFoundError)):
        return True
    try:
        return onnx_file.stat().st_size == 0
    except FileNotFoundError:
        return True  # gone meanwhile


def _checked_session(path: Path, out: Path, manifest: dict[str, Any], threads: int,
                     cache_dir: Path, graph: str = MODEL_FILE,
                     spin_within_run: bool = False, config: dict[str, str] | None = None) -> tuple[OnnxSession, str]:
    """A session of the export's `graph` on `threads` intra-op threads (and the
    session `config` entries) whose probe vectors match the manifest's (the check
    remembered under `check_key`), and how it was checked."""
    session = OnnxSession(path, out / graph, manifest, threads=threads, spin_within_run=spin_within_run,
                          config=config)
    stamp = cache_dir / CHECKED_DIR / check_key(out, threads, graph)
    if stamp.is_file():
        return session, "remembered"
    want = np.asarray(manifest["reference"], dtype=np.float32)
    try:
        # one at a time: together they would all be padded to the long probe's length
        got = np.concatenate([session.run([p]) for p in PROBES])
    except Exception as exc:  # a graph that loads but cannot run (cut off between its tensors)
        if not graph_file_bad(exc, out / graph):
            raise  # out of memory and the like: the file may be fine, nothing to export again
        raise EmbeddingRuntimeError(path, f"{out / graph} cannot be run ({type(exc).__name__}: {exc})",
                                    damaged=True) from exc
    worst = float(_cosines(got, want).min()) if got.shape == want.shape else -1.0
    if worst < MIN_COSINE:
        raise EmbeddingRuntimeError(path, f"{out / graph} computes cosine {worst:.6f} to the pipeline's "
                                          f"probe vectors, below {MIN_COSINE}", damaged=True)
    with contextlib.suppress(OSError):  # a read-only cache checks on every load
        stamp.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(stamp, f"{worst:.9f}\n".encode())
    return session, "probes"


# The session builds in flight (the query session's, a background model load), and
# whether the interpreter is exiting (then none starts): see the docstring's "Queries".
_builds_lock = threading.Lock()
_builds: set[threading.Thread] = set()
_exiting = False


def start_build(target: Callable[[], None], name: str) -> threading.Thread | None:
    """Run `target`, which builds an onnxruntime session, on a new non-daemon thread
    unless the interpreter is exiting (then None). An exit waits for it
    (`_wait_for_builds_at_exit`)."""
    with _builds_lock:
        if _exiting:
            return None

        def run() -> None:
            try:
                target()
            finally:
                with _builds_lock:
                    _builds.discard(thread)

        thread = threading.Thread(target=run, name=name, daemon=False)
        try:
            thread.start()
        except RuntimeError:  # Python 3.12+ refuses new threads once finalization began
            return None
        _builds.add(thread)  # before `run` can discard it: it waits for this lock
    return thread


def _wait_for_builds_at_exit() -> None:
    """At exit: start no more builds, and wait for those in flight. Python joins the
    non-daemon threads before the exit handlers run, so a build started by one (a
    background indexer embedding its last turn while `tiermem.memory` stops it) would
    otherwise be inside onnxruntime while the interpreter finalizes."""
    global _exiting
    with _builds_lock:
        _exiting = True
        builds = list(_builds)
    for thread in builds:
        thread.join()


atexit.register(_wait_for_builds_at_exit)


def spare_core(cpus: int) -> bool:
    """Whether one of the `cpus` cores runs nobody else's work: where a second intra-op
    thread speeds the caller's query up instead of waiting for a busy core.

    Judged over the window since the calling thread's last reading (at least
    SPARE_SAMPLE_S): the busy time of the CPUs this process may use, less the calling
    thread's own CPU time, must leave a core free but for SPARE_CORE_LOAD. Not the 1-minute
    load average alone: it counts the caller's own thread (a process asking for contexts
    back to back sits at the threshold) and trails the machine by a minute. It answers
    only a thread's first call, after a long pause, and where /proc/stat cannot be read
    (not Linux)."""
    return others_cores() <= cpus - 1 - SPARE_CORE_LOAD


def others_cores() -> float:
    """Cores' worth of work by everyone but the calling thread, on the CPUs this process
    may use, over the window since this thread's last reading (see `spare_core`)."""
    now = time.monotonic()
    last: tuple[float, float, float, float] | None = getattr(_reading, "last", None)
    if last is not None and now - last[0] < SPARE_SAMPLE_S:
        return last[3]
    busy = _busy_cpu_seconds()
    own = time.thread_time()
    if busy is None or last is None or now - last[0] > SPARE_MAX_WINDOW_S:
        others = load_average_others()
    else:
        others = window_others(now - last[0], busy - last[1], own - last[2])
    if busy is not None:
        _reading.last = (now, busy, own, others)
    return others


def window_others(window_s: float, busy_s: float, own_s: float) -> float:
    """Cores' worth of everyone else's work in a window of `window_s` in which the CPUs
    were busy `busy_s` seconds, `own_s` of them the calling thread's (its clock ticks
    apart from theirs: never below 0); no window: infinite, nothing is known."""
    if window_s <= 0:
        return math.inf
    return max(0.0, busy_s - own_s) / window_s


# Where the cgroup file systems are mounted (a CPU quota is read there: `usable_cpus`),
# the file that names this process's cgroups, and the names cgroup v1's CPU controller is
# mounted under (alone, or joined with cpuacct as systemd and Docker mount it).
CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")
CGROUP_V1_CPU_MOUNTS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")
# per thread, `last`: its last reading's (monotonic time, busy CPU seconds of the usable
# CPUs, the thread's CPU seconds, others' cores then); gone with the thread
_reading = threading.local()
_CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# /proc/stat's per-CPU columns that are busy time: user, nice, system, (not idle, iowait),
# irq, softirq, steal (the hypervisor ran someone else: not ours either)
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)


def _busy_cpu_seconds() -> float | None:
    """Busy seconds since boot of the CPUs this process may use, from /proc/stat; None
    where it cannot be read."""
    try:
        with open("/proc/stat", "rb") as f:
            data = f.read()
        allowed = set(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        return None
    ticks = 0
    seen = False
    for line in data.splitlines():
        if not line.startswith(b"cpu"):
            if seen:
                break  # the per-CPU lines are all at the top
            continue
        name, *cols = line.split()
        if name == b"cpu":
            continue  # the all-CPU total
        seen = True
        try:
            cpu = int(name[3:])
            if cpu not in allowed:
                continue
            ticks += sum(int(cols[i]) for i in _BUSY_COLUMNS if i < len(cols))
        except ValueError:
            return None
    return ticks / _CLOCK_TICKS_PER_S if seen else None


def load_average_others() -> float:
    """Others' cores by the 1-minute load average, which counts the caller itself (~1
    while it runs); infinite where there is none."""
    try:
        return max(0.0, os.getloadavg()[0] - 1)
    except (OSError, AttributeError):  # none to read; Windows has no getloadavg
        return math.inf


def omp_threads() -> int | None:
    """The intra-op thread count `OMP_NUM_THREADS` asks for (None: unset or not a count)."""
    env = os.environ.get("OMP_NUM_THREADS", "")
    return int(env) if env.isdigit() and int(env) > 0 else None


def usable_cpus(cgroup_root: Path | None = None) -> int:
    """CPUs this process may use: those it may run on (its affinity mask, else the
    machine's count), fewer where its cgroup's CPU quota allows less (`cpu_quota`, read
    under `cgroup_root`, default CGROUP_ROOT). What sizes every pool of embedding
    threads: a container started with `--cpus=1` on a 16-CPU host has 16 CPUs in its
    mask but one CPU's time, which 16 threads would share, thrashing."""
    try:
        cpus = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        cpus = max(1, os.cpu_count() or 1)
    quota = cpu_quota(CGROUP_ROOT if cgroup_root is None else cgroup_root)
    return cpus if quota is None else min(cpus, quota)


def cpu_quota(cgroup_root: Path, self_cgroup: Path = SELF_CGROUP) -> int | None:
    """The CPUs' worth of time this process's cgroups allow it (`docker --cpus`, a
    Kubernetes CPU limit): quota / period rounded up, at least 1; None where no quota is
    set ("max", -1) or none can be read (no cgroup file system, not Linux). cgroup v2's
    `cpu.max` first, then v1's `cpu.cfs_quota_us` / `cpu.cfs_period_us`, in the cgroup
    `self_cgroup` names (/proc/self/cgroup) and in each above it, up to `cgroup_root`:
    a parent's quota bounds its children's, so the tightest applies. (Walking up also
    finds a container's own quota where its cgroup's path is the host's but its mount
    shows the container's cgroup at the top.)"""
    v2_path, v1_path = "/", "/"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        for line in self_cgroup.read_text("utf-8").splitlines():
            ident, _, rest = line.partition(":")
            controllers, _, path = rest.partition(":")
            if ident == "0" and controllers == "":
                v2_path = path
            elif "cpu" in controllers.split(","):
                v1_path = path
    v2 = [_cpu_max(d / "cpu.max") for d in _cgroup_chain(cgroup_root, v2_path)]
    found = [q for q in v2 if q is not None]
    if not found:
        for mount in CGROUP_V1_CPU_MOUNTS:
            if (cgroup_root / mount).is_dir():
                found = [q for q in (_cfs_quota(d) for d in _cgroup_chain(cgroup_root / mount, v1_path))
                         if q is not None]
                break
    return min(found) if found else None


def _cgroup_chain(mount: Path, path: str) -> list[Path]:
    """The directories of cgroup `path` under `mount` and of each cgroup above it."""
    parts = [p for p in path.split("/") if p and p not in (".", "..")]
    return [mount.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]


def _quota_cpus(quota_us: int, period_us: int) -> int | None:
    if quota_us < 0 or period_us <= 0:  # -1: no quota (v1)
        return None
    return max(1, math.ceil(quota_us / period_us))


def _cpu_max(path: Path) -> int | None:
    """cgroup v2's `cpu.max` ("$QUOTA $PERIOD" in microseconds, "max" for no quota)."""
    try:
        quota, period = path.read_text("ascii").split()
        return None if quota == "max" else _quota_cpus(int(quota), int(period))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _cfs_quota(cgroup: Path) -> int | None:
    """cgroup v1's CFS quota of the cgroup directory `cgroup` (-1: none)."""
    try:
        return _quota_cpus(int((cgroup / "cpu.cfs_quota_us").read_text("ascii")),
                           int((cgroup / "cpu.cfs_period_us").read_text("ascii")))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def runtime_available() -> bool:
    """Whether onnxruntime and tokenizers are installed (checked without importing)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tokenizers"))


class FastEmbedder(MemoAttributes):
    """The bundled model (or `model_path`) on onnxruntime, exported on first use; see the
    module docstring. Same interface and vectors as `SentenceTransformerEmbedder`."""

    def __init__(self, model_path: Path | None = None, *, batch_size: int = 64, dim: int = DEFAULT_EMBED_DIM,
                 runtime: str = "auto", cache_dir: Path | None = None, query_precision: str = "auto",
                 workers: int | None = None, fused_queries: bool = True) -> None:
        if runtime not in ("auto", "onnx"):
            raise ValueError(f"runtime must be 'auto' or 'onnx', not {runtime!r}")
        self.model_path = Path(model_path) if model_path is not None else None
        self.batch_size = batch_size
        # known before the load, as SentenceTransformerEmbedder's
        self.dim = (model_dimension(self.model_path) or dim) if self.model_path is not None else dim
        self.runtime = runtime
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.query_precision = query_precision  # for the torch fallback's query path
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        # threads that run a bulk call's batches at once (each on a one-thread session call)
        self.workers = workers or usable_cpus()
        self._session: OnnxSession | None = None
        # (path, export dir, manifest, cache dir) of the loaded export, for the query session
        self._opened: tuple[Path, Path, dict[str, Any], Path] | None = None
        # the one-text session on QUERY_THREADS threads: None until built, False when
        # there is none to build (one CPU, OMP_NUM_THREADS set, or its build failed)
        self._query: OnnxSession | bool | None = None
        self.query_threads = QUERY_THREADS
        # the graph the query session runs: the fused one (QUERY_MODEL_FILE) unless
        # `fused_queries` is off or it cannot be made; None until the session is built
        self.fused_queries = fused_queries
        self.query_graph: str | None = None
        # its pool threads spin between one query's operators (OnnxSession.spin_within_run)
        self.query_spin = True
        # onnxruntime session config entries (`add_session_config_entry`) every session
        # of this embedder gets, on top of its own
        self.session_config: dict[str, str] = {}
        # when a built query session answers one-text calls: "spare" (while the load
        # average leaves a core spare), "always" or "never" (benchmarks and evals that
        # measure one path on purpose, whatever their own load)
        self.query_session: QuerySessionPolicy = "spare"
        self._one_text_calls = 0
        self._fallback: SentenceTransformerEmbedder | None = None
        # the fallback whose own load failed: the next load tries the fast runtime again
        self._failed_fallback: SentenceTransformerEmbedder | None = None
        self._identity: str | None = None
        self._lock = threading.Lock()
        self._memo = TextMemo()
        self.load_error: str | None = None  # why auto fell back to the pipeline, if it did
        # the last fallback logged: why, and whether it loaded (each said once, see load)
        self._fallback_said: tuple[str, bool] | None = None
        # how the last load checked the export: "probes" (ran them), "remembered" (a
        # passed check with the same key, see the module docstring), None (not loaded)
        self.load_check: str | None = None

    @property
    def loaded(self) -> bool:
        return self._session is not None or (self._fallback is not None and self._fallback.loaded)

    def model_identity(self) -> str:
        """The model directory's (`directory_identity`, keyed in this embedder's cache):
        the export and the pipeline compute the same vectors, so the runtime is not part
        of it. Once loaded, the model's as it loaded: taken after the export passed its
        check, or the fallback loaded (see `Embedder`)."""
        fallback = self._fallback
        if self._session is None and fallback is not None and fallback.loaded:
            return fallback.model_identity()
        if self._identity is None:
            self._identity = directory_identity(self.model_path or bundled_model_path(), self.cache_dir)
        return self._identity

    @property
    def active_runtime(self) -> str:
        """"onnx", "torch" (the fallback) or "unloaded"."""
        if self._session is not None:
            return "onnx"
        return "torch" if self._fallback is not None else "unloaded"

    def load(self) -> str:
        """Load now (export first if needed); returns the runtime in use."""
        made_for: str | None = None  # why this call made the fallback, if it did
        with self._lock:
            if self._fallback is not None and self._fallback is self._failed_fallback:
                # its load failed (the model gone or damaged): the fast runtime may load now
                self._fallback = self._failed_fallback = None
            if self._session is None and self._fallback is None:
                try:
                    self._session = self._open()
                    self._identity = loaded_identity(self.model_path or bundled_model_path(), self.cache_dir)
                except Exception as exc:
                    if self.runtime == "onnx":
                        raise
                    made_for = self.load_error = f"{type(exc).__name__}: {exc}"
                    self._fallback = SentenceTransformerEmbedder(
                        self.model_path, batch_size=self.batch_size, dim=self.dim,
                        query_precision=self.query_precision, cache_dir=self.cache_dir)
        fallback = self._fallback
        if fallback is not None:
            try:
                fallback._load()
            except Exception as exc:
                # not one still loading in another thread: only this one, failed, is dropped
                self._failed_fallback = fallback
                self._say_fallback(made_for, None if made_for is None else f"{type(exc).__name__}: {exc}")
                raise
            self._say_fallback(made_for, None)
            self.dim = fallback.dim
        return self.active_runtime

    def _say_fallback(self, reason: str | None, failed: str | None) -> None:
        """Log the fallback this call made for `reason` (None: it made none), once per
        reason and outcome, not at each retry while a model stays lost: a warning once it
        loaded; where it failed too (`failed`: its error, raised to the caller, who says
        it: Memory as a degraded embedder) an info line, as "using sentence-transformers"
        would not be so."""
        if reason is None or self._fallback_said == (reason, failed is None):
            return
        self._fallback_said = (reason, failed is None)
        if failed is None:
            log.warning("fast embedding runtime unavailable (%s); using sentence-transformers", reason)
        else:
            log.info("fast embedding runtime unavailable (%s), and the sentence-transformers fallback cannot "
                     "load either (%s)", reason, failed)

    def _open(self) -> OnnxSession:
        path = self.model_path or bundled_model_path()
        if not path.is_dir():
            raise FileNotFoundError(f"embedding model directory {path} does not exist")
        if not runtime_available():
            raise EmbeddingRuntimeError(path, "onnxruntime or tokenizers is not installed")
        cache_dir = self.cache_dir or default_cache_dir()
        out = ensure_export(path, cache_dir)
        threads = omp_threads() or SESSION_THREADS
        seen = export_files(out)
        try:
            manifest = read_manifest(path, out)
            session, self.load_check = _checked_session(path, out, manifest, threads, cache_dir,
                                                        config=self.session_config)
        except EmbeddingRuntimeError as exc:
            if not exc.damaged:
                raise
            log.warning("%s; exporting it again", exc)
            try:
                ensure_export(path, cache_dir, damaged=seen)
                manifest = read_manifest(path, out)
                session, self.load_check = _checked_session(path, out, manifest, threads, cache_dir,
                                                            config=self.session_config)
            except Exception as again:
                raise EmbeddingRuntimeError(path, f"{exc.problem}; exporting it again failed too "
                                                  f"({type(again).__name__}: {again})") from again
        self._opened = (path, out, manifest, cache_dir)
        self.dim = int(manifest["dim"])
        return session

    def _spare_query_session(self) -> OnnxSession | None:
        """The query session when it is built and a core is spare, else None; the second
        one-text call starts building it (see QUERY_THREADS)."""
        query = self._query
        if isinstance(query, OnnxSession):
            use = self.query_session == "always" or (self.query_session == "spare" and spare_core(self.workers))
            return query if use else None
        if query is None:
            self._one_text_calls += 1
            if self._one_text_calls < 2:
                return None
            with self._lock:
                if self._query is None:
                    self._query = False  # until built: one build at a time
                    if (self.query_threads > 1 and usable_cpus() > 1 and self._opened is not None
                            and not os.environ.get("OMP_NUM_THREADS")
                            and start_build(self._build_query_session, "tiermem-query-session") is None):
                        self._query = None  # the interpreter is exiting: no build
        return None

    def _build_query_session(self) -> None:
        assert self._opened is not None
        path, out, manifest, cache_dir = self._opened
        threads = min(self.query_threads, usable_cpus())
        if self.fused_queries:
            try:
                query = self._fused_query_session(path, out, manifest, threads, cache_dir)
            except Exception as exc:  # the plain export serves queries as before
                log.info("no fused query graph (%s: %s); queries run the plain export", type(exc).__name__, exc)
            else:
                self.query_graph = QUERY_MODEL_FILE
                self._query = query
                return
        try:
            query, _how = _checked_session(path, out, manifest, threads, cache_dir,
                                           spin_within_run=self.query_spin, config=self.session_config)
        except Exception:  # the one-thread session goes on serving queries
            log.warning("no %d-thread query session; queries stay on one thread", self.query_threads, exc_info=True)
            return
        self.query_graph = MODEL_FILE
        self._query = query

    def _fused_query_session(self, path: Path, out: Path, manifest: dict[str, Any], threads: int,
                             cache_dir: Path) -> OnnxSession:
        """A checked session of QUERY_MODEL_FILE, fused first where it is missing, and
        fused again once where it fails its check (as the export: see "Repaired once")."""
        ensure_query_graph(path, out, cache_dir)
        seen = export_files(out, (QUERY_MODEL_FILE,))
        try:
            return _checked_session(path, out, manifest, threads, cache_dir, QUERY_MODEL_FILE,
                                    spin_within_run=self.query_spin, config=self.session_config)[0]
        except EmbeddingRuntimeError as exc:
            if not exc.damaged:
                raise
            log.warning("%s; fusing it again", exc)
        ensure_query_graph(path, out, cache_dir, damaged=seen)
        return _checked_session(path, out, manifest, threads, cache_dir, QUERY_MODEL_FILE,
                                spin_within_run=self.query_spin, config=self.session_config)[0]

    def prepare_query_graph(self) -> str | None:
        """Load, then fuse and check the query session's graph now (`tiermem model` does,
        at install, so no serving process spends the ~2.5 s): the graph file queries will
        run, or None on the torch fallback."""
        self.load()
        if self._opened is None:
            return None
        with self._lock:
            build = self._query is None
            if build:
                self._query = False  # one build at a time, as in _spare_query_session
        if build:
            self._build_query_session()
        return self.query_graph

    def clear_memo(self) -> None:
        """Forget the remembered vectors, the torch fallback's too."""
        self._memo.clear()
        if self._fallback is not None:
            self._fallback.clear_memo()

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._memo.through(texts, self._compute, dim=self.dim)

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """Vectors to search with. One text on a spare core runs the query session (the
        fused graph: float32, cosine >= MIN_COSINE to the stored vectors' pipeline); its
        vector is not remembered, so `embed` never hands it out for storage. Anything
        else takes the stored vectors' path (and finds them remembered)."""
        fallback = self._fallback
        if self._session is None and fallback is not None and fallback.loaded:
            return fallback.embed_query(texts)
        from_query_graph = False

        def compute(missing: list[str]) -> np.ndarray:
            nonlocal from_query_graph
            session = self._session
            if len(missing) == 1 and session is not None:
                query = self._spare_query_session()  # counts this call, once
                if query is not None:
                    from_query_graph = self.query_graph != MODEL_FILE
                    return query.run(missing)
                return session.run(missing)
            return self._compute(missing)

        return self._memo.through(texts, compute, dim=self.dim, remember=lambda: not from_query_graph)

    def _compute(self, texts: list[str]) -> np.ndarray:
        if not self.loaded:
            self.load()
        if self._session is None:
            assert self._fallback is not None
            # the pipeline's own computation, not its `embed`: these are the texts this
            # embedder's memo did not know (each once), and its memo scope is the caller's,
            # one per text of the whole call where a catch-up scopes each text apart
            return self._fallback.compute(texts)
        session = self._session
        if len(texts) <= 1:
            # a single text to store: the query session only where it runs the export itself
            query = self._spare_query_session()
            return (query if query is not None and self.query_graph == MODEL_FILE else session).run(texts)
        # tokenized once, grouped by token count: each call pads to its longest text only
        encs = session.encode(texts)
        batches = plan_batches([len(e.ids) for e in encs], batch_size=self.batch_size, max_tokens=BULK_MAX_TOKENS)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        # the costliest batches first, each taken by the next free worker: they finish together
        todo = sorted(batches, key=lambda b: -len(b) * len(encs[b[-1]].ids))
        lock = threading.Lock()
        failed: list[BaseException] = []

        def work() -> None:
            while True:
                with lock:
                    if not todo or failed:
                        return
                    idx = todo.pop(0)
                try:
                    out[idx] = session.run_encoded([encs[i] for i in idx])
                except BaseException as exc:  # re-raised in the caller's thread
                    with lock:
                        failed.append(exc)
                    return

        workers = [threading.Thread(target=work, name=f"tiermem-embed-{i}", daemon=True)
                   for i in range(min(self.workers, len(batches)) - 1)]
        for w in workers:
            w.start()
        work()  # the caller's thread is a worker too
        for w in workers:
            w.join()
        if failed:
            raise failed[0]
        return out


def build_embedder(model_path: Path | None = None, *, runtime: str = "auto", batch_size: int = 64,
                   query_precision: str = "auto", cache_dir: Path | None = None) -> Any:
    """The embedder `runtime` asks for (nothing is loaded yet): "torch" is the
    sentence-transformers pipeline, "onnx" the fast runtime, "auto" the fast runtime with
    the pipeline as fallback."""
    if runtime not in RUNTIMES:
        raise ValueError(f"embedding_runtime must be one of {', '.join(RUNTIMES)}, not {runtime!r}")
    if runtime == "torch":
        return SentenceTransformerEmbedder(model_path, batch_size=batch_size, query_precision=query_precision,
                                           cache_dir=cache_dir)
    return FastEmbedder(model_path, batch_size=batch_size, runtime=runtime, cache_dir=cache_dir,
                        query_precision=query_precision)


# onnxruntime's errors that say a session cannot be built or run here (a graph file
# missing or not a model, out of memory, a provider that fails), not that its caller
# fed it wrongly (InvalidArgument, NotImplemented: a bug, raised as itself); their
# module has no common base (`Exception`), and a name a release lacks is skipped
ORT_ERRORS_MODULE = "onnxruntime.capi.onnxruntime_pybind11_state"
ORT_UNAVAILABLE_ERRORS = ("Fail", "NoSuchFile", "NoModel", "EngineError", "RuntimeException", "InvalidProtobuf",
                          "ModelLoaded", "InvalidGraph", "EPFail", "ModelLoadCanceled", "ModelRequiresCompilation",
                          "NotFound", "DeviceReset")


def model_unavailable_errors() -> tuple[type[BaseException], ...]:
    """The errors of an embedder's call that mean its model cannot be loaded or run: a
    file missing or unreadable (OSError, EmbeddingModelUnreadable: one a library cannot
    parse), a runtime not installed (ImportError), the fast runtime refused
    (EmbeddingRuntimeError), torch failing to compute (EmbeddingModelFailed: out of
    memory, tensors that do not fit), onnxruntime's own (ORT_UNAVAILABLE_ERRORS), and a
    caller's own embedder saying so (EmbeddingUnavailable: one backed by a remote service
    that is down, say; the public way to ask for keyword ranking). A caller that
    goes on without vectors (Memory: keyword ranking) catches these alone: any other
    (ValueError, TypeError, KeyError, AssertionError...) is a bug, raised as itself.
    onnxruntime's are named only once it is imported: it cannot have raised them before,
    and importing it here would load it for a process that never embeds."""
    errors: list[type[BaseException]] = [OSError, ImportError, EmbeddingRuntimeError, EmbeddingModelUnreadable,
                                         EmbeddingModelFailed, EmbeddingUnavailable]
    ort = sys.modules.get(ORT_ERRORS_MODULE)
    if ort is not None:
        errors += [cls for name in ORT_UNAVAILABLE_ERRORS
                   if isinstance(cls := getattr(ort, name, None), type) and issubclass(cls, BaseException)]
    return tuple(errors)


def embedder_loaded(embedder: object) -> bool:
    """Whether `embedder` has its model in memory. Embedders that do not say (a test's
    hash embedder, a remote one) count as loaded: they cost nothing to call."""
    return bool(getattr(embedder, "loaded", True))
