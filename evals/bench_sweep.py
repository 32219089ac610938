"""The scheduler's sweep against the number of conversations in the store.

    python -m tiermem.evals.bench_sweep [--conversations 2000,10000] [--rounds 30] [--json]

Each store is a SQLite file of N conversations of `TURNS` labeled turns in one session,
whose three views (rolling, constraints, session) a scheduler refreshed, so every view
covers its log: a service's steady state, where most conversations are idle. Timed,
`--rounds` times each, in this process:

- `before`: the statement every sweep ran before migration m019 (`SWEEP_BEFORE_SQL`:
  the frontier of every conversation), under the store's lock as the sweep held it.
  The old sweep did more than this statement (a session scan per conversation), so
  this is a floor of what it cost.
- `idle`: `ViewMaintainer.stale_views_detailed`, the whole sweep, with every view current.
- `active`: the same with `ACTIVE` conversations appended to and within their budgets
  (read each sweep, refreshed by none).

Every sweep holds the store's lock while it reads (each statement), so its time is
also the longest stall it can put on another call of the same process. Printed:
p50 / p99 in ms and the ratio before / idle.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tiermem.consolidation.scheduler import ConsolidationScheduler
from tiermem.consolidation.summarize import ExtractiveSummarizer
from tiermem.consolidation.views import ViewMaintainer
from tiermem.evals.baselines import percentiles
from tiermem.evals.bench import bounded, int_list
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.models import Message
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import WarmStore

TURNS = 4
ACTIVE = 10
MAX_TURNS_BEHIND = 20
MAX_SECONDS_BEHIND = 300.0
OLD_TURNS_AGE_S = 3600.0  # the built turns are this old: every view over budget at once
LABEL = ("statement", False, 0, "bench")

# tiers/dialect.py view_frontier before m019: every conversation, every sweep
SWEEP_BEFORE_SQL = (
    "SELECT c.id, (SELECT MAX(position) FROM messages m WHERE m.conversation_id = c.id) AS lastpos, "
    "c.last_message_at, c.created_at, "
    "(SELECT end_position FROM summaries s WHERE s.conversation_id = c.id AND s.kind = 'rolling' "
    " AND s.key = '' ORDER BY version DESC LIMIT 1), "
    "(SELECT end_position FROM summaries s WHERE s.conversation_id = c.id AND s.kind = 'constraints' "
    " AND s.key = '' ORDER BY version DESC LIMIT 1) "
    "FROM conversations c")


def _maintainer(store: ColdStore, counter: BpeTokenCounter) -> ViewMaintainer:
    return ViewMaintainer(store, WarmStore(store), ExtractiveSummarizer(counter), counter, target_tokens=120,
                          max_turns_behind=MAX_TURNS_BEHIND, max_seconds_behind=MAX_SECONDS_BEHIND)


def build(path: Path, n: int, counter: BpeTokenCounter) -> tuple[ColdStore, float]:
    """The store of `n` conversations with every view current; (store, seconds to build)."""
    t0 = time.perf_counter()
    store = ColdStore(path, tokens=counter)
    at = time.time() - OLD_TURNS_AGE_S
    for c in range(n):
        store.append_many(f"c{c}", [
            Message(role="user" if t % 2 == 0 else "assistant", session_id="s1", created_at=at,
                    content=f"Ticket {c}, turn {t}: the router in room {c % 97} drops its link every {t + 2} hours.")
            for t in range(TURNS)], namespace=f"tenant{c % 50}", labels=[LABEL] * TURNS)
    sched = ConsolidationScheduler(_maintainer(store, counter), interval_s=30.0, max_views_per_run=3 * n + 10)
    sched.run_once()  # refresh every view
    sched.run_once()  # find them current
    return store, time.perf_counter() - t0


def _time(fn: Any, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def measure(n: int, rounds: int, counter: BpeTokenCounter) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tiermem-sweep-") as tmp:
        store, built_s = build(Path(tmp) / "tiermem.db", n, counter)
        try:
            def before() -> None:
                with store.reading() as conn:
                    conn.execute(SWEEP_BEFORE_SQL).fetchall()

            m = _maintainer(store, counter)
            behind_idle = len(WarmStore(store).frontier())
            idle = _time(lambda: m.stale_views_detailed(50), rounds)
            base = _time(before, rounds)
            for c in range(0, n, max(1, n // ACTIVE)):
                store.append(f"c{c}", Message(role="user", content="One more thing about that router."),
                             namespace=f"tenant{c % 50}")
            behind_active = len(WarmStore(store).frontier())
            active = _time(lambda: m.stale_views_detailed(50), rounds)
        finally:
            store.close()
    p_base, p_idle, p_active = percentiles(base), percentiles(idle), percentiles(active)
    return {"conversations": n, "build_s": round(built_s, 1), "rounds": rounds,
            "behind_idle": behind_idle, "behind_active": behind_active,
            "before_ms": p_base, "idle_ms": p_idle, "active_ms": p_active,
            "ratio_p50": round(statistics.median(base) / max(statistics.median(idle), 1e-6), 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # argparse converts a text default with `type` too: args.conversations is always a list
    ap.add_argument("--conversations", type=int_list(unit="conversations"), default="2000,10000",
                    help="store sizes, comma-separated")
    ap.add_argument("--rounds", type=bounded(1, unit="rounds"), default=30)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    counter = BpeTokenCounter()
    rows = [measure(n, args.rounds, counter) for n in args.conversations]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("| conversations | before p50 / p99 ms | idle sweep p50 / p99 ms | "
          f"{ACTIVE} active p50 / p99 ms | before / idle (p50) | read idle / active |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        b, i, a = r["before_ms"], r["idle_ms"], r["active_ms"]
        print(f"| {r['conversations']:,} | {b['p50']} / {b['p99']} | {i['p50']} / {i['p99']} | "
              f"{a['p50']} / {a['p99']} | {r['ratio_p50']}x | {r['behind_idle']} / {r['behind_active']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
