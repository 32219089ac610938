"""Cold-tier benchmarks: append, bulk ingest with embeddings, search in a 10k-turn conversation.

    python -m tiermem.evals.bench_cold [--quick] [--data PATH] [--json]

1. Append without the embedding (ColdStore(embedder=None)), one message per
   transaction, for `synchronous=NORMAL` and `FULL`: p50/p99 in µs and throughput; plus
   `append_many` in batches of 500. Baseline: a raw sqlean INSERT of the same JSON body
   into a plain table keyed (conversation_id, position), with the same pragmas and the
   same position statement (`INSERT ... SELECT COALESCE(MAX(position)+1, 0)`), timed
   interleaved with the appends (one raw insert, one append) so that load drift hits both.
   Why NORMAL is the default: in WAL mode NORMAL loses at most the last transactions
   on a power cut, never the database's consistency; FULL fsyncs every commit and pays
   for it in every append.
2. Bulk ingest of a LoCoMo-format file (default `../shared/data/locomo-dev.json`)
   through `Memory.append_many` (one batch per session, as `tiermem eval locomo` does;
   labels and supersession included, hot tier off) and `Memory.catch_up` (the
   embeddings): turns/s. Baseline: `embedder.embed` over the same texts in batches of
   the configured size, i.e. what the model alone costs.
3. Search in a 10k-turn conversation (synthetic but varied text: LoCoMo turns cycled,
   each later cycle with a sentence from another turn appended, sessions of 25 turns a
   day apart; real embeddings, computed in batches), with LoCoMo questions as queries:
   hybrid (`ColdStore.search`, query embedding included), the same with the vector
   given (the database part), bm25 only and dense only; baseline: the query embedding
   alone. Interleaved per query.

Targets (issue 2): append p50 <= 0.5 ms; hybrid search p50 <= 20 ms in a 10k-turn
conversation, query embedding included.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tiermem.evals.baselines import without_memo
from tiermem.evals.bench import (
    DEFAULT_TORCH_THREADS,
    Row,
    bounded,
    dist,
    environment,
    load_average,
    ratio,
    row,
    say,
    set_torch_threads,
)
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed import Embedder, query_embedding
from tiermem.tiers.errors import ValidationError, shown
from tiermem.tiers.models import Message, search_text
from tiermem.tiers.tokens import BpeTokenCounter

DEFAULT_DATA = Path("../shared/data/locomo-dev.json")
FALLBACK_DATA = Path(__file__).resolve().parent / "data" / "intent_labels.jsonl"
APPEND_P50_TARGET_US = 500.0
SEARCH_P50_TARGET_MS = 20.0
SESSION_TURNS = 25
DAY_S = 86_400.0
T0 = 1_672_531_200.0  # 2023-01-01, so that session dates look like LoCoMo's
SEARCH_K = 10
QUICK_TURNS, FULL_TURNS = 300, 10_000  # the measured conversation's turns, --quick's and the default
MIN_TURNS = 1  # a conversation of no turns measures nothing, as bench.bounded refuses on the command line
# used when no LoCoMo file is at hand (a clean clone in CI): generic recall questions
FALLBACK_QUESTIONS = [
    "what did we decide about the deployment?", "when did the build start failing?",
    "which database did we pick and why?", "what was the budget for the trip?",
    "who reviewed the migration?", "how long ago did we change the schedule?",
    "what did I say about the tests?", "where did we land on the naming?",
]


# ---------------------------------------------------------------------------------------
# Text: LoCoMo turns, or the labeled turn set when no LoCoMo file is at hand


@dataclass(frozen=True)
class SourceTurn:
    role: str  # user | assistant
    name: str | None
    text: str


@dataclass(frozen=True)
class Corpus:
    turns: list[SourceTurn]
    questions: list[str]
    temporal: list[str]  # questions of LoCoMo category 2 ("when ...")
    source: str


def load_corpus(data: Path | None) -> Corpus:
    """Turns and questions from a LoCoMo-format file; the labeled turn set otherwise."""
    if data is not None and Path(data).is_file():
        from tiermem.evals.locomo import load_samples, turn_content

        turns: list[SourceTurn] = []
        questions: list[str] = []
        temporal: list[str] = []
        for s in load_samples(Path(data)):
            for sess in s.sessions:
                for t in sess.turns:
                    role = "assistant" if t.speaker == s.speaker_b else "user"
                    text = turn_content(t).strip()
                    if text:
                        turns.append(SourceTurn(role, t.speaker or None, text))
            for q in s.qa:
                if q.question.strip():
                    (temporal if q.category == 2 else questions).append(q.question.strip())
        if turns and questions:
            return Corpus(turns, questions, temporal or questions, str(data))
    rows = [json.loads(line) for line in FALLBACK_DATA.read_text().splitlines() if line.strip()]
    turns = [SourceTurn("assistant" if r["role"] == "assistant" else "user", None, r["text"])
             for r in rows if r["role"] in ("user", "assistant") and r["text"].strip()]
    temporal = [q for q in FALLBACK_QUESTIONS if q.startswith(("when", "how long"))]
    return Corpus(turns, FALLBACK_QUESTIONS, temporal, str(FALLBACK_DATA))


_SENTENCE = re.compile(r"[^.!?]+[.!?]?")


def _first_sentence(text: str) -> str:
    m = _SENTENCE.match(text.strip())
    return (m.group(0) if m else text).strip()[:200]


def synthetic_turn(corpus: Corpus, i: int) -> SourceTurn:
    """Turn `i` of the synthetic conversation: corpus turns cycled; from the second
    cycle on, each carries a sentence of another turn, so no two texts repeat."""
    n = len(corpus.turns)
    base = corpus.turns[i % n]
    cycle = i // n
    if cycle == 0:
        return base
    other = corpus.turns[(i * 31 + cycle * 97 + 7) % n]
    return SourceTurn(base.role, base.name, f"{base.text} {_first_sentence(other.text)}")


def synthetic_messages(corpus: Corpus, n: int, *, start: int = 0) -> list[Message]:
    out = []
    for i in range(start, start + n):
        t = synthetic_turn(corpus, i)
        session = i // SESSION_TURNS
        out.append(Message.model_validate({
            "role": t.role, "content": t.text, "name": t.name, "session_id": f"s{session}",
            "created_at": T0 + session * DAY_S + (i % SESSION_TURNS) * 30.0}))
    return out


def batches(seq: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


# ---------------------------------------------------------------------------------------
# Embeddings of the synthetic corpus, computed once per process


_VEC_CACHE: dict[str, np.ndarray] = {}


class CachedEmbedder:
    """Serves the synthetic corpus' vectors from a per-process cache (so the 10k-turn
    conversations of several benchmarks embed their texts once), computing misses with
    the real model in batches. `use_cache = False` turns it into the real model, which
    is what every timed query goes through."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        inner.embed(["warm up"])  # load the model; its dim is known after loading
        self.dim: int = inner.dim
        self.use_cache = True

    def embed(self, texts: list[str]) -> np.ndarray:
        if not self.use_cache:
            return self.inner.embed(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in _VEC_CACHE]
        for chunk in batches(missing, 256):
            for t, v in zip(chunk, self.inner.embed(list(chunk)), strict=True):
                _VEC_CACHE[t] = v
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([_VEC_CACHE[t] for t in texts]).astype(np.float32, copy=False)

    def embed_query(self, texts: list[str]) -> np.ndarray:
        if not self.use_cache:
            return query_embedding(self.inner)(texts)
        return self.embed(texts)

    def prime(self, texts: Sequence[str]) -> tuple[int, float]:
        """Embed what the cache lacks; returns (texts embedded, seconds)."""
        missing = [t for t in dict.fromkeys(texts) if t not in _VEC_CACHE]
        t0 = time.perf_counter()
        for i, chunk in enumerate(batches(missing, 512)):
            self.embed(list(chunk))
            if i % 4 == 3:
                say(f"  embedded {min(len(missing), (i + 1) * 512)}/{len(missing)} corpus texts")
        return len(missing), time.perf_counter() - t0


def default_embedder(embedder: Embedder | None) -> Embedder:
    if embedder is not None:
        return embedder
    from tiermem.tiers.embed_onnx import build_embedder

    return build_embedder()  # the default runtime, as Memory() builds it


# ---------------------------------------------------------------------------------------
# 1. append


def _raw_connection(path: Path, synchronous: str) -> Any:
    """A plain sqlean connection with the pragmas `tiers.cold.connect` sets."""
    import sqlean

    from tiermem.tiers.schema import DEFAULT_BUSY_TIMEOUT_MS, DEFAULT_CACHE_KIB

    conn = sqlean.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {DEFAULT_BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute(f"PRAGMA cache_size = -{DEFAULT_CACHE_KIB}")
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute(
        "CREATE TABLE log(conversation_id TEXT NOT NULL, position INTEGER NOT NULL, body TEXT NOT NULL, "
        "created_at REAL NOT NULL, PRIMARY KEY (conversation_id, position))"
    )
    return conn


def append_bench(root: Path, corpus: Corpus, counter: BpeTokenCounter, synchronous: str, n: int,
                 batch_n: int) -> dict[str, Any]:
    msgs = synthetic_messages(corpus, n + 50)
    bodies = [json.dumps(m.body(), ensure_ascii=False, separators=(",", ":")) for m in msgs]
    cold = ColdStore(root / f"append-{synchronous}.db", tokens=counter, embedder=None, synchronous=synchronous)
    raw = _raw_connection(root / f"raw-{synchronous}.db", synchronous)
    sql = ("INSERT INTO log(conversation_id, position, body, created_at) SELECT ?1, COALESCE(MAX(position) + 1, 0), "
           "?2, ?3 FROM log WHERE conversation_id = ?1")
    try:
        for i in range(50):  # warm up: page cache, statement cache, the BPE's caches
            cold.append("warm", msgs[i])
            raw.execute(sql, ("warm", bodies[i], time.time()))
        app_us: list[float] = []
        raw_us: list[float] = []
        clock = time.perf_counter_ns
        for i in range(50, n + 50):
            t0 = clock()
            raw.execute(sql, ("c", bodies[i], time.time()))
            t1 = clock()
            cold.append("c", msgs[i])
            t2 = clock()
            raw_us.append((t1 - t0) / 1000)
            app_us.append((t2 - t1) / 1000)
        # throughput of bulk appends, still without the embedding
        many = synthetic_messages(corpus, batch_n, start=n)
        start = time.perf_counter()
        for chunk in batches(many, 500):
            cold.append_many("bulk", chunk)
        many_s = time.perf_counter() - start
    finally:
        cold.close()
        raw.close()
    out: dict[str, Any] = {
        "synchronous": synchronous,
        "append_us": dist(app_us, 1),
        "raw_insert_us": dist(raw_us, 1),
        "append_per_s": round(len(app_us) / (sum(app_us) / 1e6)),
        "raw_insert_per_s": round(len(raw_us) / (sum(raw_us) / 1e6)),
        "append_many_500_per_s": round(batch_n / many_s),
    }
    out["ratio_p50"] = ratio(out["append_us"]["p50"], out["raw_insert_us"]["p50"])
    out["ratio_p99"] = ratio(out["append_us"]["p99"], out["raw_insert_us"]["p99"])
    out["p50_ok"] = out["append_us"]["p50"] <= APPEND_P50_TARGET_US
    return out


# ---------------------------------------------------------------------------------------
# 2. bulk ingest of a LoCoMo file with embeddings


def ingest_bench(root: Path, data: Path, embedder: Embedder, limit_turns: int | None) -> dict[str, Any]:
    from tiermem import Config, Memory
    from tiermem.evals.locomo import load_samples, session_times, turn_message

    samples = load_samples(data)
    plan: list[tuple[str, list[dict[str, Any]]]] = []  # (conversation, one session's messages)
    total = 0
    for s in samples:
        times, _ = session_times(s)
        for sess, start in zip(s.sessions, times, strict=True):
            if limit_turns is not None and total >= limit_turns:
                break
            msgs = [turn_message(t, s, sess, start + i)[0] for i, t in enumerate(sess.turns)]
            if limit_turns is not None:
                msgs = msgs[: limit_turns - total]
            if msgs:
                plan.append((f"ingest-{s.sample_id}", msgs))
                total += len(msgs)
    texts = [search_text({"role": m["role"], "content": m["content"], "name": m.get("name")})
             for _, msgs in plan for m in msgs]
    cfg = Config(data_dir=root / "ingest")
    embedder.embed(["warm up"])

    def embed_only(part: list[str]) -> float:
        """The baseline: the model alone over texts, in the configured batches."""
        start = time.perf_counter()
        for chunk in batches(part, cfg.embedding_batch_size):
            embedder.embed(list(chunk))
        return time.perf_counter() - start

    # half the baseline before the ingest and half after, so that a change of load
    # during the minutes this takes weighs on both sides alike
    embed_s = embed_only(texts[0::2])
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        t0 = time.perf_counter()
        for conv, msgs in plan:
            mem.append_many(conv, msgs, namespace="ingest")
        append_s = time.perf_counter() - t0
        # (appends may already embed a few turns: supersession looks correction targets up by meaning)
        mem.catch_up()
        total_s = time.perf_counter() - t0
        pending = mem.cold.pending_embeddings()
        embedded = mem.cold.integrity()["vectors"]
    embed_s += embed_only(texts[1::2])
    out: dict[str, Any] = {
        "data": str(data),
        "conversations": len({c for c, _ in plan}),
        "turns": total,
        "embedded": embedded,
        "pending_after": pending,
        # the append phase includes the embeddings that supersession checks trigger
        # (Memory embeds a conversation's pending turns before a search by meaning)
        "append_s": round(append_s, 2),
        "catch_up_s": round(total_s - append_s, 2),
        "total_s": round(total_s, 2),
        "turns_per_s": round(total / total_s, 1),
        "append_only_turns_per_s": round(total / append_s, 1),
        "embed_only_texts_per_s": round(len(texts) / embed_s, 1),
        "batch_size": cfg.embedding_batch_size,
    }
    out["ratio_vs_embed_only"] = ratio(out["turns_per_s"], out["embed_only_texts_per_s"])
    return out


# ---------------------------------------------------------------------------------------
# 3. search in a long conversation


def build_search_store(root: Path, corpus: Corpus, counter: BpeTokenCounter, cached: CachedEmbedder,
                       turns: int) -> tuple[ColdStore, dict[str, Any]]:
    msgs = synthetic_messages(corpus, turns)
    n_new, embed_s = cached.prime([search_text(m.body()) for m in msgs])
    cold = ColdStore(root / "search.db", tokens=counter, embedder=cached)
    t0 = time.perf_counter()
    for chunk in batches(msgs, 500):
        cold.append_many("long", chunk, namespace="bench")
    cold.index_pending(batch=500)
    build_s = time.perf_counter() - t0
    return cold, {"turns": turns, "corpus_texts_embedded": n_new, "corpus_embed_s": round(embed_s, 1),
                  "build_s": round(build_s, 1)}


def queries(corpus: Corpus, n: int) -> list[str]:
    pool = corpus.questions + corpus.temporal
    step = max(1, len(pool) // max(1, n))
    return [pool[(i * step) % len(pool)] for i in range(n)]


def search_bench(root: Path, corpus: Corpus, counter: BpeTokenCounter, embedder: Embedder, turns: int,
                 n_queries: int) -> dict[str, Any]:
    cached = CachedEmbedder(embedder)
    cold, built = build_search_store(root, corpus, counter, cached, turns)
    try:
        cached.use_cache = False  # every query from here on goes through the model
        without_memo(cached)
        depth = max(3 * SEARCH_K, 20)  # what ColdStore.search gives each retriever
        qs = queries(corpus, n_queries)
        for q in qs[:5]:  # warm up
            cold.search(q, SEARCH_K, conversation_id="long")
        t: dict[str, list[float]] = {"embed": [], "hybrid": [], "hybrid_given_vector": [], "bm25": [], "dense": []}
        hits = 0
        clock = time.perf_counter_ns
        for q in qs:
            t0 = clock()
            qv = query_embedding(embedder)([q])[0]
            t1 = clock()
            res = cold.search(q, SEARCH_K, conversation_id="long")
            t2 = clock()
            cold.search(q, SEARCH_K, conversation_id="long", query_vec=qv)
            t3 = clock()
            cold.search_bm25(q, depth, conversation_id="long")
            t4 = clock()
            cold.search_dense(qv, depth, conversation_id="long")
            t5 = clock()
            hits += len(res)
            for name, a, b in (("embed", t0, t1), ("hybrid", t1, t2), ("hybrid_given_vector", t2, t3),
                               ("bm25", t3, t4), ("dense", t4, t5)):
                t[name].append((b - a) / 1e6)
        vectors = cold.integrity()["vectors"]
    finally:
        cold.close()
    out: dict[str, Any] = {**built, "vectors": vectors, "queries": len(qs), "k": SEARCH_K, "depth": depth,
                           "mean_hits": round(hits / len(qs), 1)}
    out["ms"] = {name: dist(s) for name, s in t.items()}
    e = out["ms"]["embed"]["p50"]
    out["ratio_vs_embed"] = {name: ratio(out["ms"][name]["p50"], e) for name in t if name != "embed"}
    out["hybrid_p50_ok"] = out["ms"]["hybrid"]["p50"] <= SEARCH_P50_TARGET_MS
    return out


# ---------------------------------------------------------------------------------------


def resolve_turns(field: str, turns: int | None, quick: bool) -> int:
    """The turns of the measured conversation of a run (this benchmark's and bench_context's):
    None is the default (--quick's where `quick`); a count below MIN_TURNS is a
    ValidationError naming `field` and the limit, as the command line's --turns refuses it.
    `turns or ...` read 0 as the default: `run(search_turns=0)` built the 10k-turn conversation."""
    if turns is not None and turns < MIN_TURNS:
        raise ValidationError(field, f"must be an integer of at least {MIN_TURNS}, got {shown(turns)}")
    if turns is not None:
        return turns
    return QUICK_TURNS if quick else FULL_TURNS


def run(quick: bool = False, *, data: Path | None = DEFAULT_DATA, embedder: Embedder | None = None,
        search_turns: int | None = None, torch_threads: int | None = DEFAULT_TORCH_THREADS) -> dict[str, Any]:
    """Run the cold-tier benchmarks; figures in µs, ms, or per second as keys say.
    `search_turns` as `resolve_turns` reads it: a bad one refused before anything runs."""
    search_turns = resolve_turns("search_turns", search_turns, quick)
    threads = set_torch_threads(torch_threads)
    appends, bulk = (200, 500) if quick else (3000, 10_000)
    ingest_limit = 40 if quick else None
    n_queries = 10 if quick else 200
    la0 = load_average()
    corpus = load_corpus(data)
    counter = BpeTokenCounter()
    emb = default_embedder(embedder)
    out: dict[str, Any] = {"quick": quick, "corpus": corpus.source, "torch_threads": threads}
    with tempfile.TemporaryDirectory(prefix="tiermem-bench-cold-") as tmp:
        root = Path(tmp)
        say(f"cold: append x{appends} per mode")
        out["append"] = {s.lower(): append_bench(root, corpus, counter, s, appends, bulk) for s in ("NORMAL", "FULL")}
        if data is not None and Path(data).is_file():
            say("cold: bulk ingest of " + str(data) + (f" (first {ingest_limit} turns)" if ingest_limit else ""))
            out["ingest"] = ingest_bench(root, Path(data), emb, ingest_limit)
        else:
            out["ingest"] = {"skipped": f"no LoCoMo file at {data}"}
        say(f"cold: search in a {search_turns}-turn conversation")
        out["search"] = search_bench(root, corpus, counter, emb, search_turns, n_queries)
    out["load_avg"] = {"start": la0, "end": load_average()}
    out["environment"] = environment()
    return out


def rows(r: dict[str, Any]) -> list[Row]:
    out: list[Row] = []
    for mode, a in r["append"].items():
        out.append(row("cold", f"append, synchronous={mode.upper()}", a["append_us"]["p50"], a["append_us"]["p99"],
                       "µs", baseline="raw sqlean INSERT", baseline_p50=a["raw_insert_us"]["p50"],
                       target=f"p50 <= {APPEND_P50_TARGET_US:.0f} µs", ok=a["p50_ok"]))
        out.append(row("cold", f"append throughput, {mode.upper()} (append_many x500: "
                       f"{a['append_many_500_per_s']:,}/s)", a["append_per_s"], None, "/s",
                       baseline="raw INSERT", baseline_p50=a["raw_insert_per_s"]))
    ing = r.get("ingest", {})
    if "turns_per_s" in ing:
        out.append(row("cold", f"ingest LoCoMo with embeddings ({ing['turns']} turns)", ing["turns_per_s"], None,
                       "/s", baseline="embed only", baseline_p50=ing["embed_only_texts_per_s"]))
    s = r["search"]
    ms = s["ms"]
    e = ms["embed"]["p50"]
    label = f"{s['turns'] // 1000}k" if s["turns"] >= 1000 else str(s["turns"])
    out.append(row("cold", f"search hybrid, {label}-turn conversation (incl. query embedding)", ms["hybrid"]["p50"],
                   ms["hybrid"]["p99"], "ms", baseline="query embedding", baseline_p50=e,
                   target=f"p50 <= {SEARCH_P50_TARGET_MS:.0f} ms", ok=s["hybrid_p50_ok"]))
    for name, what in (("hybrid_given_vector", "search hybrid, vector given"), ("bm25", "search bm25 only"),
                       ("dense", "search dense only (KNN)")):
        out.append(row("cold", f"{what}, {label}-turn conversation", ms[name]["p50"], ms[name]["p99"], "ms",
                       baseline="query embedding", baseline_p50=e))
    return out


def format_table(r: dict[str, Any]) -> str:
    from tiermem.evals.bench import text_table

    la = r["load_avg"]
    return text_table(rows(r)) + f"\nload average (1/5/15 min): start {la['start']}, end {la['end']}"


def model_bench_main(argv: list[str] | None, *, doc: str | None, turns_help: str,
                     run_bench: Callable[[bool, Path, int | None, int], dict[str, Any]],
                     fmt: Callable[[dict[str, Any]], str]) -> int:
    """The command line shared by the benchmarks that run the model over a LoCoMo-derived
    corpus: --quick, --data, --turns, --torch-threads, --json."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--quick", action="store_true", help="small sizes, for smoke runs")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"LoCoMo-format file (default {DEFAULT_DATA})")
    parser.add_argument("--turns", type=bounded(1, unit="turns"), default=None, help=turns_help)
    parser.add_argument("--torch-threads", type=bounded(0, unit="threads; 0: torch's default"),
                        default=DEFAULT_TORCH_THREADS,
                        help="torch intra-op threads for the model (0: torch's default)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    result = run_bench(args.quick, args.data, args.turns, args.torch_threads)
    print(json.dumps(result, indent=2) if args.json else fmt(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    return model_bench_main(
        argv, doc=__doc__, turns_help=f"turns in the search conversation (default {FULL_TURNS})",
        run_bench=lambda quick, data, turns, threads: run(quick, data=data, search_turns=turns,
                                                         torch_threads=threads),
        fmt=format_table)


if __name__ == "__main__":
    raise SystemExit(main())
