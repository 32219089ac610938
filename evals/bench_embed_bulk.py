"""Bulk embedding on the ONNX runtime: what each knob buys, and the ceiling of these cores.

    python -m tiermem.evals.bench_embed_bulk [--data PATH] [--sample 512] [--rounds 3]
                                             [--variants NAME,...] [--json PATH]

One process, one sample of LoCoMo turns (the texts the vector index sees: speaker name and
text), every variant run over the same texts round after round (the order rotates each
round so that no variant always meets the warmer cache or the quieter moment); medians
over the rounds, load average before and after each run.

- `baseline` is the code before this work: the plain export, onnxruntime's default
  threads, no spinning, texts sorted by character length and cut into batches of 64,
  each batch tokenized on its own (what `FastEmbedder._compute` did);
- the other variants change one or more of: the graph (`fused`: onnxruntime's
  transformer optimizer, tiers.embed_onnx.fuse_graph; in bulk not shipped), threads per session, spinning,
  how texts are grouped (by token count after one tokenization of all texts) and cut
  (fixed count, or a budget of padded tokens per call), and two sessions' worth of
  workers (two threads calling one single-threaded session at once).

Every variant's vectors are compared with the baseline's (cosine, worst over the sample):
a variant that computes other vectors fails the run. The ceiling: the same graph on
fixed-width batches of real-length texts with nothing else (no tokenizing, no padding,
no variance in width), in tokens/s, and numpy's float32 GEMM at the model's feed-forward
shape in GFLOP/s; with the model's FLOPs per token (from its config) these say how many
LoCoMo turns per second these cores can embed at best. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tiermem.evals.bench import bounded, load_average, output_file, say
from tiermem.tiers.embed_onnx import BULK_MAX_TOKENS, fuse_graph

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent.parent / "shared" / "data" / "locomo-dev.json"
LEGACY_BATCH = 64  # the batch of the code before (Config.embedding_batch_size)
CEILING_S = float(os.environ.get("TIERMEM_BENCH_CEILING_S", "3"))  # seconds per ceiling measurement


def locomo_texts(path: Path) -> list[str]:
    """Every message's indexed text (what index_pending embeds), in log order."""
    from tiermem.config import Config
    from tiermem.evals.conversations import FIX_HINT, read_conversations
    from tiermem.tiers.models import search_text

    cfg = Config()
    data = read_conversations(path, max_content_bytes=cfg.max_content_bytes,
                              max_metadata_bytes=cfg.max_metadata_bytes, max_id_chars=cfg.max_id_chars,
                              strict=True, conversation_id=None, hint=FIX_HINT)
    return [search_text(m) for c in data.conversations for m in c.messages]


def flops_per_token(cfg: dict[str, Any], width: float) -> float:
    """Multiply-adds x 2 of one token through a BERT encoder at sequence length `width`:
    Q, K, V, output projections (4 h^2), feed-forward (2 h i), attention scores and
    weighted sum (2 width h), per layer."""
    h, i, layers = int(cfg["hidden_size"]), int(cfg["intermediate_size"]), int(cfg["num_hidden_layers"])
    return 2.0 * layers * (4 * h * h + 2 * h * i + 2 * width * h)


@dataclass
class Variant:
    name: str
    graph: str  # "plain" | "fused"
    threads: int | None  # None: onnxruntime's default
    spinning: bool
    group: str  # "chars": sort by characters, tokenize per batch | "tokens": tokenize once, sort by tokens
    batch: int  # texts per call at most
    max_tokens: int | None = None  # padded tokens per call at most (None: no budget)
    workers: int = 1  # threads calling the session at once


VARIANTS = {v.name: v for v in [
    Variant("baseline", "plain", None, False, "chars", 64),
    Variant("tokens-64", "plain", None, False, "tokens", 64),
    Variant("fused", "fused", None, False, "chars", 64),
    Variant("fused-tokens-16", "fused", None, False, "tokens", 16),
    Variant("fused-tokens-32", "fused", None, False, "tokens", 32),
    Variant("fused-tokens-64", "fused", None, False, "tokens", 64),
    Variant("fused-tokens-128", "fused", None, False, "tokens", 128),
    Variant("fused-budget-1024", "fused", None, False, "tokens", 64, 1024),
    Variant("fused-budget-2048", "fused", None, False, "tokens", 128, 2048),
    Variant("fused-budget-1024-spin", "fused", None, True, "tokens", 64, 1024),
    Variant("fused-budget-1024-1thread", "fused", 1, False, "tokens", 64, 1024),
    Variant("fused-budget-1024-2workers", "fused", 1, False, "tokens", 64, 1024, 2),
    Variant("budget-1024-1thread", "plain", 1, False, "tokens", 64, 1024),
    Variant("budget-1024-spin", "plain", None, True, "tokens", 64, 1024),
    Variant("budget-1024-2workers", "plain", 1, False, "tokens", 64, 1024, 2),
    Variant("budget-512-2workers", "plain", 1, False, "tokens", 64, 512, 2),
    Variant("budget-2048-2workers", "plain", 1, False, "tokens", 64, 2048, 2),
    Variant("fused-budget-512-2workers", "fused", 1, False, "tokens", 64, 512, 2),
    Variant("fused-budget-2048-2workers", "fused", 1, False, "tokens", 64, 2048, 2),
    # what FastEmbedder.embed does now (tiers/embed_onnx.py), through the class itself
    Variant("shipped", "plain", 1, False, "shipped", 64),
]}
DEFAULT_VARIANTS = ("baseline", "shipped", "tokens-64", "fused", "budget-1024-1thread", "budget-1024-spin",
                    "budget-512-2workers", "budget-1024-2workers", "budget-2048-2workers", "fused-budget-512-2workers")


def plan(lengths: list[int], batch: int, max_tokens: int | None) -> list[list[int]]:
    from tiermem.tiers.embed_onnx import plan_batches

    return plan_batches(lengths, batch_size=batch, max_tokens=max_tokens)


def _embed(v: Variant, session: Any, texts: list[str]) -> tuple[np.ndarray, int, list[int]]:
    """(vectors in input order, padded tokens through the model, width of each call)."""
    out = np.empty((len(texts), 384), dtype=np.float32)
    widths: list[int] = []
    if v.group == "shipped":  # `session` is a FastEmbedder; its batches are its own business
        return session.embed(texts), 0, []
    if v.group == "chars":
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), v.batch):
            idx = order[start:start + v.batch]
            encs = session.encode([texts[i] for i in idx])
            widths.append(max(len(e.ids) for e in encs) * len(idx))
            out[idx] = session.run_encoded(encs)
        return out, sum(widths), widths
    encs = session.encode(texts)
    batches = plan([len(e.ids) for e in encs], v.batch, v.max_tokens)
    widths = [max(len(encs[i].ids) for i in b) * len(b) for b in batches]

    def work(mine: list[list[int]]) -> None:
        for b in mine:
            out[b] = session.run_encoded([encs[i] for i in b])

    if v.workers == 1:
        work(batches)
    else:  # the largest batches first, dealt round-robin: the workers finish together
        by_cost = sorted(range(len(batches)), key=lambda k: -widths[k])
        shares = [[batches[k] for k in by_cost[w::v.workers]] for w in range(v.workers)]
        threads = [threading.Thread(target=work, args=(s,)) for s in shares]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return out, sum(widths), widths


def _shipped_export() -> tuple[Path, Path, dict[str, Any]]:
    """The bundled model, its export directory (exported first if missing: the graph the
    runtime runs) and the export's manifest."""
    from tiermem.tiers.embed import bundled_model_path
    from tiermem.tiers.embed_onnx import MANIFEST, default_cache_dir, ensure_export

    model = bundled_model_path()
    out = ensure_export(model, default_cache_dir())
    return model, out, json.loads((out / MANIFEST).read_text("utf-8"))


def _key(v: Variant) -> tuple[str, int | None, bool]:
    return ("shipped", None, False) if v.group == "shipped" else (v.graph, v.threads, v.spinning)


def _sessions(variants: list[Variant], workdir: Path) -> tuple[dict[tuple[str, int | None, bool], Any], dict[str, Any]]:
    from tiermem.tiers.embed_onnx import MODEL_FILE, OnnxSession

    model, plain, manifest = _shipped_export()
    cfg = json.loads((model / "config.json").read_text("utf-8"))
    graphs = {"plain": plain / MODEL_FILE}
    info: dict[str, Any] = {"config": cfg, "manifest": {k: manifest[k] for k in ("max_length", "inputs")}}
    if any(v.graph == "fused" for v in variants):
        graphs["fused"] = workdir / "fused.onnx"
        t0 = time.perf_counter()
        info["fused_ops"] = fuse_graph(graphs["plain"], graphs["fused"], num_heads=int(cfg["num_attention_heads"]),
                                       hidden_size=int(cfg["hidden_size"]), opt_level=None)
        info["fuse_s"] = round(time.perf_counter() - t0, 2)
    sessions: dict[tuple[str, int | None, bool], Any] = {}
    if any(v.group == "shipped" for v in variants):
        from tiermem.tiers.embed_onnx import FastEmbedder

        shipped = FastEmbedder(runtime="onnx")
        shipped.memo_size = 0
        shipped.load()
        sessions[("shipped", None, False)] = shipped
    for v in variants:
        key = ("shipped", None, False) if v.group == "shipped" else (v.graph, v.threads, v.spinning)
        if key not in sessions:
            sessions[key] = OnnxSession(model, graphs[v.graph], manifest, threads=v.threads, spinning=v.spinning)
    info["graphs"] = {k: str(p) for k, p in graphs.items()}
    return sessions, info


def ceiling(session: Any, texts: list[str], cfg: dict[str, Any], seconds: float = CEILING_S) -> dict[str, Any]:
    """Tokens/s of `session` on fixed-width batches of real tokens (the sample's median
    length, 64 rows, no padding), and numpy's float32 GEMM at the feed-forward shape."""
    encs = session.encode(texts)
    lengths = sorted(len(e.ids) for e in encs)
    width = lengths[len(lengths) // 2]
    # a call of the size the bulk path makes (tiers/embed_onnx.py BULK_MAX_TOKENS)
    rows = [e for e in encs if len(e.ids) >= width][:max(1, BULK_MAX_TOKENS // width)]
    ids = np.array([e.ids[:width] for e in rows], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    feed = {k: feed[k] for k in session.inputs}
    session.session.run(None, feed)
    per_call: list[float] = []
    cpu_call: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        c0, t0 = time.process_time(), time.perf_counter()
        session.session.run(None, feed)
        per_call.append(time.perf_counter() - t0)
        cpu_call.append(time.process_time() - c0)
    tokens = ids.size
    best, med = min(per_call), statistics.median(per_call)
    h, i = int(cfg["hidden_size"]), int(cfg["intermediate_size"])
    a = np.random.default_rng(0).standard_normal((tokens, h), dtype=np.float32)
    w = np.random.default_rng(1).standard_normal((h, i), dtype=np.float32)
    gemm: list[float] = []
    gemm_cpu: list[float] = []
    # one BLAS thread: a multi-threaded BLAS's spinning waits count as CPU time and would
    # understate what one core computes
    try:
        from threadpoolctl import threadpool_limits
        limit: Any = threadpool_limits(limits=1, user_api="blas")
    except ImportError:  # pragma: no cover - a dependency of the model's libraries
        limit = contextlib.nullcontext()
    with limit:
        a @ w
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            c0, t0 = time.process_time(), time.perf_counter()
            a @ w
            gemm.append(time.perf_counter() - t0)
            gemm_cpu.append(time.process_time() - c0)
    gemm_gflops = 2.0 * tokens * h * i / min(gemm) / 1e9
    gemm_cpu_gflops = 2.0 * tokens * h * i / statistics.median(gemm_cpu) / 1e9
    fpt = flops_per_token(cfg, width)
    return {"width": width, "rows": len(rows), "calls": len(per_call),
            "tokens_per_s_best": round(tokens / best), "tokens_per_s_p50": round(tokens / med),
            "tokens_per_cpu_s_p50": round(tokens / statistics.median(cpu_call)),
            "model_gflops_best": round(tokens * fpt / best / 1e9, 1),
            "model_gflop_per_cpu_s": round(tokens * fpt / statistics.median(cpu_call) / 1e9, 1),
            "numpy_gemm_gflops_best": round(gemm_gflops, 1), "numpy_gemm_gflop_per_cpu_s": round(gemm_cpu_gflops, 1),
            "flops_per_token": fpt}


class LegacyEmbedder:
    """The bulk path of the code before this work, for same-process baselines: the same
    exported graph on onnxruntime's default threads, texts sorted by characters and cut
    into batches of 64, each tokenized on its own. Same vectors (cosine >= 0.9999)."""

    loaded = True

    def __init__(self, batch_size: int = LEGACY_BATCH) -> None:
        from tiermem.tiers.embed_onnx import MODEL_FILE, OnnxSession

        model, out, manifest = _shipped_export()
        self.session = OnnxSession(model, out / MODEL_FILE, manifest)
        self.batch_size = batch_size
        self.dim = 384

    def load(self) -> str:
        return "onnx (before: default threads, batches of 64 by characters)"

    def clear_memo(self) -> None:
        """No memo: nothing to forget."""

    def embed(self, texts: list[str]) -> np.ndarray:
        if len(texts) <= self.batch_size:
            return self.session.run(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            out[idx] = self.session.run([texts[i] for i in idx])
        return out


def locomo_questions(path: Path, n: int) -> list[str]:
    """The first `n` LoCoMo questions (what a query embedding sees); other files: turns."""
    try:
        doc = json.loads(path.read_text("utf-8"))
    except ValueError:  # JSONL: not LoCoMo
        doc = None
    qs = [str(q["question"]) for sample in doc for q in sample.get("qa", []) if q.get("question")] \
        if isinstance(doc, list) and all(isinstance(x, dict) for x in doc) else []
    return qs[:n] or locomo_texts(path)[:n]  # without questions: the turns themselves


def query_latency(session: Any, questions: list[str]) -> dict[str, float]:
    """One question per call, as a context() query: wall and CPU ms, p50 and p99."""
    for q in questions[:10]:
        session.run([q])
    wall: list[float] = []
    cpu: list[float] = []
    for q in questions:
        c0, t0 = time.process_time(), time.perf_counter()
        session.run([q])
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    wall.sort()
    cpu.sort()
    return {"wall_ms_p50": round(statistics.median(wall), 2), "wall_ms_p99": round(wall[int(0.99 * len(wall))], 2),
            "cpu_ms_p50": round(statistics.median(cpu), 2), "cpu_ms_p99": round(cpu[int(0.99 * len(cpu))], 2),
            "load_after": load_average()[0]}


def reference_texts(texts: list[str], n_random: int = 100) -> dict[str, list[str]]:
    """Real LoCoMo texts for the comparison with the reference pipeline: the shortest,
    the longest, the non-ASCII ones, a random draw, and runs of consecutive turns joined
    until the tokenizer truncates them (at 256 tokens)."""
    uniq = sorted(set(texts), key=len)
    rng = random.Random(7)
    joined = [" ".join(texts[i:i + 30]) for i in range(0, 30 * 20, 30)]
    return {"shortest": uniq[:20], "longest": uniq[-20:],
            "non_ascii": [t for t in uniq if not t.isascii()][:50],
            "random": rng.sample(texts, min(n_random, len(texts))), "truncated": joined}


def reference_check(sessions: dict[tuple[str, int | None, bool], Any], texts: list[str]) -> dict[str, Any]:
    """Worst cosine of each graph's vectors (batched as the bulk path batches them, and
    one text per call) to the sentence-transformers pipeline's, per kind of text."""
    from tiermem.tiers.embed import SentenceTransformerEmbedder

    groups = reference_texts(texts)
    flat = [t for g in groups.values() for t in g]
    ref = SentenceTransformerEmbedder()
    ref.memo_size = 0
    want = ref.embed(flat)
    out: dict[str, Any] = {"texts": {k: len(v) for k, v in groups.items()}}
    for graph in ("plain", "fused", "shipped"):
        session = sessions.get((graph, None, False))
        if session is None:
            continue
        if graph == "shipped":  # the FastEmbedder: its own bulk path, and one text per call (the query path)
            batched = session.embed(flat)
            single = np.concatenate([session.embed_query([t]) for t in flat])
        else:
            batched, _p, _w = _embed(Variant("check", graph, None, False, "tokens", 64, BULK_MAX_TOKENS), session, flat)
            single = np.concatenate([session.run([t]) for t in flat])
        res: dict[str, float] = {}
        start = 0
        for k, g in groups.items():
            sl = slice(start, start + len(g))
            start += len(g)
            res[k] = round(float(min(np.min(np.sum(batched[sl] * want[sl], axis=1)),
                                     np.min(np.sum(single[sl] * want[sl], axis=1)))), 7)
        out[graph] = res
    return out


def run(data: Path, *, sample: int, rounds: int, names: list[str], reference: bool = False) -> dict[str, Any]:
    texts = locomo_texts(data)
    rng = random.Random(17)
    picked = texts if sample <= 0 or sample >= len(texts) else rng.sample(texts, sample)
    variants = [VARIANTS[n] for n in names]
    if variants[0].name != "baseline":
        variants.insert(0, VARIANTS["baseline"])
    with tempfile.TemporaryDirectory(prefix="tiermem-bulk-") as tmp:
        sessions, info = _sessions(variants, Path(tmp))
        cfg = info["config"]
        any_session = sessions[(variants[0].graph, variants[0].threads, variants[0].spinning)]
        real = sum(len(e.ids) for e in any_session.encode(picked))
        say(f"{len(picked)} texts ({real} tokens, mean {real / len(picked):.1f}) of {len(texts)}; "
            f"load average {load_average()}; fused ops: {info.get('fused_ops')}")
        for v in variants:  # warm-up: first calls allocate
            _embed(v, sessions[_key(v)], picked[:64])
        runs: dict[str, list[dict[str, Any]]] = {v.name: [] for v in variants}
        ref: np.ndarray | None = None
        worst: dict[str, float] = {}
        for r in range(rounds):
            order = variants[r % len(variants):] + variants[:r % len(variants)]
            for v in order:
                la0 = load_average()
                c0, t0 = time.process_time(), time.perf_counter()
                vecs, padded, widths = _embed(v, sessions[_key(v)], picked)
                s, cpu = time.perf_counter() - t0, time.process_time() - c0
                if v.name == "baseline" and ref is None:
                    ref = vecs
                runs[v.name].append({"s": s, "cpu_s": cpu, "texts_per_s": len(picked) / s,
                                     "texts_per_cpu_s": len(picked) / cpu, "padded_tokens": padded,
                                     "calls": len(widths), "load_before": la0, "load_after": load_average()})
                if ref is not None:
                    worst[v.name] = min(worst.get(v.name, 1.0), float(np.min(np.sum(vecs * ref, axis=1))))
                say(f"round {r + 1}/{rounds} {v.name}: {len(picked) / s:.1f} texts/s, "
                    f"{len(picked) / cpu:.1f} texts/CPU-s, {padded} padded tokens, "
                    f"{len(widths)} calls; load {la0} -> {load_average()}")
        # the baseline's first vectors were measured after some variants in round 1: recheck them
        for v in variants:
            if v.name not in worst:
                vecs, _p, _w = _embed(v, sessions[_key(v)], picked)
                assert ref is not None
                worst[v.name] = float(np.min(np.sum(vecs * ref, axis=1)))
        cap = {f"{g} graph, {'default' if t is None else t} thread(s)": ceiling(sessions[(g, t, False)], picked, cfg)
               for g in ("plain", "fused") for t in (None, 1) if (g, t, False) in sessions}
        questions = locomo_questions(data, 200)
        queries: dict[str, list[dict[str, float]]] = {}
        for _ in range(2):  # interleaved: every session once, then again
            for g in ("plain", "fused"):
                for t in (None, 1):
                    if (g, t, False) in sessions:
                        queries.setdefault(f"{g} graph, {'default' if t is None else t} thread(s)", []).append(
                            query_latency(sessions[(g, t, False)], questions))
        checked = reference_check(sessions, texts) if reference else None
    base = statistics.median(x["texts_per_s"] for x in runs["baseline"])
    base_cpu = statistics.median(x["texts_per_cpu_s"] for x in runs["baseline"])
    summary = {}
    for v in variants:
        rs = runs[v.name]
        med = statistics.median(x["texts_per_s"] for x in rs)
        med_cpu = statistics.median(x["texts_per_cpu_s"] for x in rs)
        summary[v.name] = {"texts_per_s_p50": round(med, 1), "vs_baseline": round(med / base, 2),
                           "texts_per_cpu_s_p50": round(med_cpu, 1), "cpu_vs_baseline": round(med_cpu / base_cpu, 2),
                           "padded_tokens": rs[0]["padded_tokens"], "calls": rs[0]["calls"],
                           "worst_cosine_to_baseline": round(worst[v.name], 7),
                           "load": [rs[0]["load_before"], rs[-1]["load_after"]], "variant": v.__dict__}
    bad = {n: s["worst_cosine_to_baseline"] for n, s in summary.items() if s["worst_cosine_to_baseline"] < 0.9999}
    if bad:
        raise SystemExit(f"variants that compute other vectors: {bad}")
    return {"texts": len(picked), "real_tokens": real, "rounds": rounds, "info": {k: v for k, v in info.items()
                                                                                   if k != "config"},
            "summary": summary, "ceiling": cap, "queries": queries, "reference": checked, "runs": runs}


def markdown(rep: dict[str, Any]) -> str:
    mean = rep["real_tokens"] / rep["texts"]
    lines = [f"{rep['texts']} LoCoMo texts ({rep['real_tokens']} tokens, mean {mean:.1f}), {rep['rounds']} rounds, "
             "median texts/s; vectors equal to the baseline's within the cosine shown", "",
             "| variant | texts/s p50 | vs baseline | texts per CPU-second p50 | vs baseline | padded tokens | calls "
             "| worst cosine | load average |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, s in rep["summary"].items():
        lines.append(f"| {name} | {s['texts_per_s_p50']} | {s['vs_baseline']}x | {s['texts_per_cpu_s_p50']} "
                     f"| {s['cpu_vs_baseline']}x | {s['padded_tokens']} | {s['calls']} "
                     f"| {s['worst_cosine_to_baseline']} | {s['load'][0]} -> {s['load'][1]} |")
    lines += ["", "| ceiling (fixed-width batches, nothing else) | width | tokens/s best / p50 | tokens per CPU-s "
              "| model GFLOP per CPU-s | numpy GEMM (1 thread, feed-forward shape) GFLOP per CPU-s | LoCoMo turns/s on 2 idle cores at best |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for g, c in rep["ceiling"].items():
        lines.append(f"| {g} | {c['width']} | {c['tokens_per_s_best']} / {c['tokens_per_s_p50']} | "
                     f"{c['tokens_per_cpu_s_p50']} | {c['model_gflop_per_cpu_s']} | {c['numpy_gemm_gflop_per_cpu_s']} "
                     f"| {2 * c['tokens_per_cpu_s_p50'] / mean:.0f} |")
    lines += ["", "query embedding, one LoCoMo question per call (2 runs of 200 each, interleaved; no spinning):", "",
              "| session | wall ms p50 | wall ms p99 | CPU ms p50 | CPU ms p99 | load after |", "|---|---:|---:|---:|---:|---:|"]
    for g, runs in rep["queries"].items():
        for q in runs:
            lines.append(f"| {g} | {q['wall_ms_p50']} | {q['wall_ms_p99']} | {q['cpu_ms_p50']} | {q['cpu_ms_p99']} "
                         f"| {q['load_after']} |")
    if rep.get("reference"):
        r = rep["reference"]
        lines += ["", "worst cosine to the sentence-transformers pipeline (batched and one by one), texts: "
                  + ", ".join(f"{k} {n}" for k, n in r["texts"].items()), ""]
        kinds = list(r["texts"])
        lines += ["| graph | " + " | ".join(kinds) + " |", "|---|" + "---:|" * len(kinds)]
        for g in ("plain", "fused", "shipped"):
            if g in r:
                lines.append(f"| {g} | " + " | ".join(str(r[g][k]) for k in kinds) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sample", type=bounded(0, unit="texts; 0: all"), default=512, help="texts drawn from the file (0: all)")
    ap.add_argument("--rounds", type=bounded(1, unit="rounds"), default=3)
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                    help=f"comma-separated, of: {', '.join(VARIANTS)}")
    ap.add_argument("--reference", action="store_true",
                    help="also compare each graph with the sentence-transformers pipeline on real texts (loads torch)")
    ap.add_argument("--json", type=output_file(), default=None)
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}")
    from tiermem.tiers.errors import DataFileError

    try:
        rep = run(args.data, sample=args.sample, rounds=args.rounds, names=names, reference=args.reference)
    except DataFileError as exc:  # a file `tiermem import` would refuse too: one line, exit 1
        raise SystemExit(f"error: {exc}") from None
    if args.json is not None:
        args.json.write_text(json.dumps(rep, indent=2, default=str))
    print(markdown(rep))


if __name__ == "__main__":
    main()
