"""Keyword search within a scope: `ColdStore.search_bm25` (the scope's own statistics)
against FTS5's `bm25()` over the whole table, the ranking SQLite used before (it let one
tenant's text reorder another's results; kept here only as the speed baseline), run in
the same process on the same file, interleaved per query.

    python -m tiermem.evals.bench_search_scope [--data FILE] [--json OUT]

One database file: tenant "bench/alice" has a 10k-turn conversation; tenant "bench/bob" a
namespace of 5 conversations x 2,000 turns; tenant "other" 10k turns of the same kind of
text (LoCoMo turns cycled, as evals/bench_cold.py builds them), so the FTS5 doclists hold
every query word outside each scope too. Queries: the file's questions, at depth 30 (what
`ColdStore.search` gives each retriever), for the conversation scope and the namespace
scope with `exclude`. The first search of a freshly opened store (the scope's turns
counted once) is timed apart. Prints medians, p99s and the ratios to the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tiermem.evals.bench import dist, output_file
from tiermem.evals.bench_cold import DEFAULT_DATA, batches, load_corpus, synthetic_messages
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.schema import connect
from tiermem.tiers.search import fts_query
from tiermem.tiers.tokens import BpeTokenCounter

LONG_TURNS = 10_000
NS_CONVERSATIONS = 5
NS_TURNS = 2_000
OTHER_TURNS = 10_000
DEPTH = 30
QUERIES = 200
WARMUP = 5


def table_wide_bm25(con: Any, query: str, k: int, *, conversation_id: str | None = None,
                    namespace: str | None = None, exclude: str | None = None) -> list[tuple[str, int, float]]:
    """The baseline: SQLite's search_bm25 before the scope fix (tiers/cold.py at d038055,
    on a connection of its own): FTS5's bm25(), whose statistics span the whole table."""
    q = fts_query(query)
    if q is None:
        return []
    if conversation_id is not None:
        match = f'scope : "c{conversation_id.encode().hex()}" AND text : ({q})'
        rows = con.execute(
            "SELECT m.conversation_id, m.position, h.s FROM (SELECT rowid, bm25(messages_fts, 1.0, 0.0) AS s "
            "FROM messages_fts WHERE messages_fts MATCH ? ORDER BY s LIMIT ?) h "
            "JOIN messages m ON m.id = h.rowid WHERE m.conversation_id = ? ORDER BY h.s, m.id",
            (match, k, conversation_id),
        ).fetchall()
    else:
        assert namespace is not None
        scope = f'scope : "n{namespace.encode().hex()}"'
        if exclude is not None:
            scope = f'({scope} NOT scope : "c{exclude.encode().hex()}")'
        rows = con.execute(
            "SELECT m.conversation_id, m.position, h.s FROM (SELECT rowid, bm25(messages_fts, 1.0, 0.0) AS s "
            "FROM messages_fts WHERE messages_fts MATCH ? ORDER BY s LIMIT ?) h "
            "JOIN messages m ON m.id = h.rowid JOIN conversations c ON c.id = m.conversation_id "
            "WHERE c.namespace = ? AND m.conversation_id IS NOT ? ORDER BY h.s, m.id",
            (f"{scope} AND text : ({q})", k, namespace, exclude),
        ).fetchall()
    return [(r[0], int(r[1]), float(r[2])) for r in rows]


def build(path: Path, counter: BpeTokenCounter, data: Path) -> tuple[str, str]:
    corpus = load_corpus(data)
    cold = ColdStore(path, tokens=counter)
    try:
        for chunk in batches(synthetic_messages(corpus, LONG_TURNS), 500):
            long_key = cold.append_batch("long", list(chunk), namespace="bench/alice").key
        first = ""
        for c in range(NS_CONVERSATIONS):
            for chunk in batches(synthetic_messages(corpus, NS_TURNS, start=20_000 + c * NS_TURNS), 500):
                key = cold.append_batch(f"conv{c}", list(chunk), namespace="bench/bob").key
            first = first or key
        for chunk in batches(synthetic_messages(corpus, OTHER_TURNS, start=50_000), 500):
            cold.append_batch("secret", list(chunk), namespace="other")
    finally:
        cold.close()
    return long_key, first


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"LoCoMo-format file (default {DEFAULT_DATA})")
    ap.add_argument("--json", type=output_file(), default=None)
    args = ap.parse_args()
    counter = BpeTokenCounter()
    corpus = load_corpus(args.data)
    step = max(1, len(corpus.questions) // QUERIES)
    qs = [corpus.questions[(i * step) % len(corpus.questions)] for i in range(QUERIES)]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bench.db"
        t0 = time.perf_counter()
        long_key, first = build(path, counter, args.data)
        build_s = time.perf_counter() - t0
        scopes: dict[str, dict[str, Any]] = {
            "conversation": {"conversation_id": long_key},
            "namespace": {"namespace": "bench/bob", "exclude": first},
        }
        out: dict[str, Any] = {"build_s": round(build_s, 1), "turns": {"long": LONG_TURNS,
                               "namespace": NS_CONVERSATIONS * NS_TURNS, "other_tenant": OTHER_TURNS},
                               "depth": DEPTH, "queries": len(qs), "load_before": os.getloadavg()}
        # the first call on a fresh store: the scope's turns are counted once
        first_call: dict[str, float] = {}
        for name, kw in scopes.items():
            cold = ColdStore(path, tokens=counter)
            t = time.perf_counter()
            cold.search_bm25(qs[0], DEPTH, **kw)
            first_call[name] = round((time.perf_counter() - t) * 1e3, 2)
            t = time.perf_counter()
            cold.search_bm25(qs[0], DEPTH, **kw)
            first_call[name + "_second"] = round((time.perf_counter() - t) * 1e3, 2)
            cold.close()
        out["new_first_call_ms"] = first_call
        cold = ColdStore(path, tokens=counter)
        con = connect(path)
        try:
            times: dict[str, list[float]] = {f"{s}_{v}": [] for s in scopes for v in ("old", "new")}
            overlap: dict[str, list[float]] = {s: [] for s in scopes}
            matches: dict[str, list[int]] = {s: [] for s in scopes}
            for q in qs[:WARMUP]:
                for kw in scopes.values():
                    table_wide_bm25(con, q, DEPTH, **kw)
                    cold.search_bm25(q, DEPTH, **kw)
            clock = time.perf_counter_ns
            for i, q in enumerate(qs):
                for name, kw in scopes.items():
                    order = ("old", "new") if i % 2 == 0 else ("new", "old")
                    got: dict[str, list[tuple[str, int, float]]] = {}
                    for v in order:
                        fn = table_wide_bm25 if v == "old" else None
                        a = clock()
                        got[v] = fn(con, q, DEPTH, **kw) if fn else cold.search_bm25(q, DEPTH, **kw)
                        times[f"{name}_{v}"].append((clock() - a) / 1e6)
                    o = {(c, p) for c, p, _ in got["old"][:10]}
                    n = {(c, p) for c, p, _ in got["new"][:10]}
                    if o or n:
                        overlap[name].append(len(o & n) / max(len(o), len(n)))
            # how many rows of the scope each query matches (what the new cost follows)
            from tiermem.tiers.lexical import query_words_terms
            for name, kw in scopes.items():
                for q in qs:
                    words = query_words_terms(q)
                    if not words:
                        continue
                    mq = " OR ".join(f'"{w}"' for w, _ in words)
                    if "conversation_id" in kw:
                        sc = f'scope : "c{kw["conversation_id"].encode().hex()}"'
                    else:
                        sc = (f'(scope : "n{kw["namespace"].encode().hex()}" NOT scope : '
                              f'"c{kw["exclude"].encode().hex()}")')
                    matches[name].append(con.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH ?",
                                                     (f"{sc} AND text : ({mq})",)).fetchone()[0])
        finally:
            con.close()
            cold.close()
        out["ms"] = {k: dist(v) for k, v in times.items()}
        out["ratio_new_over_old"] = {s: {"p50": round(out["ms"][f"{s}_new"]["p50"] / out["ms"][f"{s}_old"]["p50"], 2),
                                         "p99": round(out["ms"][f"{s}_new"]["p99"] / out["ms"][f"{s}_old"]["p99"], 2)}
                                     for s in scopes}
        out["top10_overlap_old_new_mean"] = {s: round(statistics.fmean(v), 3) for s, v in overlap.items() if v}
        out["matches_in_scope"] = {s: {"p50": statistics.median(v), "max": max(v)} for s, v in matches.items()}
        out["load_after"] = os.getloadavg()
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
