"""Warm-tier cost: view refresh time, and what the in-process scheduler does to appends.

    python -m tiermem.evals.bench_warm [--quick] [--no-embeddings] [--json]
    python -m tiermem.evals.bench_warm --outdated [--quick] [--json]
    python -m tiermem.evals.bench_warm --pop [--quick] [--json]

1. Refresh cost per 100 turns, per view kind, with the extractive summarizer, on a
   conversation built from the labeled turn set (evals/data/intent_labels.jsonl,
   cycled; labels written with the append, sessions of 50 turns):
   - `initial`: the first refresh over the whole conversation, divided per 100 turns;
   - `incremental`: a refresh after 100 new turns (the steady state: what the
     scheduler pays each time a view goes over its turn budget), median of rounds.
   With embeddings (default), turn vectors are indexed before timing, as the cold tier
   does in the background, and the summarizer uses them (it runs no model itself);
   `--no-embeddings` leaves it the bag-of-words vectors only.
2. Append latency (ColdStore.append from a thread, paced at one append every
   `PACE_MS`) without and with a ConsolidationScheduler in the same process whose
   budgets (max 1 turn behind, 10 ms interval) keep it refreshing all the time: the
   worst case of an in-process scheduler. Reported: p50/p99 and the ratios.

`--outdated` (only this): the sweep's per-conversation cost (`stale_views_detailed`, one
conversation in the store) after an ordinary load-bearing append, no correction, at 2,000
and 20,000 turns (sessions of 10 turns, so 200 and 2,000 session views, every view
refreshed first by `refresh_all`). The sweep checks whether a view shows a corrected or
retracted line (`_stale_outdated`) when the conversation's marks moved since its last
check: `baseline` keys them on the pin version, which that append moves (the check of
every view, each time), `current` on the supersession version, which it does not (two
index reads). Both maintainers sweep the same store after each append, in alternating
order; median and p99 over the rounds, in milliseconds.

`--pop` (only this): the rolling view's refresh after 100 new turns, at 2,000 and 20,000
turns (embeddings off), when a retraction among them pops a correction (the turn it
superseded is added to the refresh's sources, `ViewMaintainer._restored`: a read of the
range's turns in the database), pops a turn that superseded nothing (the same read,
nothing added), or pops nothing (the steady state); and, for comparison, a full refresh
of the view (the alternative that would also bring the old value back). Median over the rounds, ms; and
how many restoring refreshes gave the summarizer the popped correction's target (whether
it keeps that turn is its choice, as for any source).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TypeVar

from tiermem.consolidation.scheduler import ConsolidationScheduler
from tiermem.consolidation.summarize import ExtractiveSummarizer
from tiermem.consolidation.views import ViewMaintainer
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed import Embedder
from tiermem.tiers.formats import RETRACT_TYPE
from tiermem.tiers.models import Message, TurnRow
from tiermem.tiers.statements import Hidden
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import SummaryView, WarmStore

DATA = Path(__file__).resolve().parent / "data" / "intent_labels.jsonl"
SESSION_TURNS = 50
TARGET_TOKENS = 300
PACE_MS = 2.0
M = TypeVar("M", bound=ViewMaintainer)


def _rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


def _message(r: dict[str, Any], i: int, session_turns: int = SESSION_TURNS
             ) -> tuple[Message, tuple[str, bool, int, str]]:
    extra: dict[str, Any] = {"tool_call_id": f"call_{i}"} if r["role"] == "tool" else {}
    m = Message(role=r["role"], content=r["text"], session_id=f"s{i // session_turns}",
                created_at=time.time(), **extra)
    return m, (r["intent"], bool(r["load_bearing"]), 5 if r["load_bearing"] else 0, "bench")


def _append(cold: ColdStore, conv: str, start: int, n: int, rows: list[dict[str, Any]],
            session_turns: int = SESSION_TURNS) -> None:
    pairs = [_message(rows[(start + i) % len(rows)], start + i, session_turns) for i in range(n)]
    cold.append_many(conv, [p[0] for p in pairs], labels=[p[1] for p in pairs])


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _maintainer(cold: ColdStore, counter: BpeTokenCounter, embedder: Embedder | None, **kw: Any) -> ViewMaintainer:
    return _maintainer_of(ViewMaintainer, cold, counter, embedder, **kw)


def _maintainer_of(cls: type[M], cold: ColdStore, counter: BpeTokenCounter, embedder: Embedder | None,
                   **kw: Any) -> M:
    kw.setdefault("max_turns_behind", 20)
    kw.setdefault("max_seconds_behind", 300.0)
    # The summarizer reads the turn vectors the cold tier stored; it is given no model of
    # its own, so a refresh never runs inference (the background indexer embeds turns).
    del embedder
    return cls(cold, WarmStore(cold), ExtractiveSummarizer(counter, None), counter,
               target_tokens=TARGET_TOKENS, label_grace_s=0.0, **kw)


def refresh_cost(root: Path, counter: BpeTokenCounter, embedder: Embedder | None, *, turns: int,
                 rounds: int) -> dict[str, Any]:
    rows = _rows()
    cold = ColdStore(root / "refresh.db", tokens=counter, embedder=embedder)
    try:
        _append(cold, "c", 0, turns, rows)
        cold.index_pending()
        m = _maintainer(cold, counter, embedder)
        out: dict[str, Any] = {}

        def timed(fn: Any) -> float:
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1000

        def sessions_after(first: int) -> list[str]:
            return sorted({t.session_id for t in cold.turns("c", start=first) if t.session_id})

        initial = {
            "rolling": timed(lambda: m.refresh("c", "rolling")),
            "constraints": timed(lambda: m.refresh("c", "constraints")),
            "session": timed(lambda: [m.refresh("c", "session", s) for s in sessions_after(0)]),
        }
        incr: dict[str, list[float]] = {"rolling": [], "constraints": [], "session": []}
        for r in range(rounds):
            start = turns + 100 * r
            _append(cold, "c", start, 100, rows)
            cold.index_pending()
            incr["rolling"].append(timed(lambda: m.refresh("c", "rolling")))
            incr["constraints"].append(timed(lambda: m.refresh("c", "constraints")))
            sids = sessions_after(start)
            incr["session"].append(timed(lambda sids=sids: [m.refresh("c", "session", s) for s in sids]))
        for kind in initial:
            out[kind] = {"initial": round(initial[kind] * 100 / turns, 2),
                         "incremental": round(statistics.median(incr[kind]), 2)}
        rolling = m.warm.latest("c", "rolling")
        out["rolling_tokens"] = rolling.tokens if rolling else 0
        out["versions"] = {k: len(m.warm.versions("c", k)) for k in ("rolling", "constraints")}
        return out
    finally:
        cold.close()


def append_latency(root: Path, counter: BpeTokenCounter, embedder: Embedder | None, *, appends: int,
                   with_scheduler: bool) -> dict[str, Any]:
    rows = _rows()
    name = "sched" if with_scheduler else "base"
    cold = ColdStore(root / f"append-{name}.db", tokens=counter, embedder=embedder)
    sched: ConsolidationScheduler | None = None
    try:
        # some history, so refreshes have real work to do
        _append(cold, "c", 0, 400, rows)
        cold.index_pending()
        if with_scheduler:
            # a 10 ms interval overlaps runs on purpose; APScheduler logs each skip
            logging.getLogger("apscheduler").setLevel(logging.ERROR)
            m = _maintainer(cold, counter, embedder, max_turns_behind=1, max_seconds_behind=1e9)
            sched = ConsolidationScheduler(m, interval_s=0.01, max_views_per_run=50)
            sched.start(run_now=True)
            time.sleep(0.2)
        samples: list[float] = []

        def writer() -> None:
            pace = PACE_MS / 1000
            nxt = time.perf_counter()
            for i in range(appends):
                msg, label = _message(rows[(400 + i) % len(rows)], 400 + i)
                t0 = time.perf_counter()
                cold.append_many("c", [msg], labels=[label])
                samples.append((time.perf_counter() - t0) * 1000)
                nxt += pace
                delay = nxt - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)

        t = threading.Thread(target=writer, name="bench-appender")
        t.start()
        t.join()
        out: dict[str, Any] = {"p50_ms": round(_pct(samples, 0.50), 3),
                               "p99_ms": round(_pct(samples, 0.99), 3),
                               "max_ms": round(max(samples), 3), "appends": len(samples)}
        if sched is not None:
            sched.shutdown(wait=True)
            out["scheduler_runs"] = sched.stats.runs
            out["views_refreshed"] = sched.stats.refreshed_total
        return out
    finally:
        if sched is not None:
            sched.shutdown(wait=True)
        cold.close()


OUTDATED_SESSION_TURNS = 10  # 2,000 session views at 20,000 turns, as the figure of 414785d


class _TimedCheck(ViewMaintainer):
    """A maintainer that times its sweep's check for corrected lines (`_stale_outdated`)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.check_ms: list[float] = []

    def _stale_outdated(self, conv: str, created_at: float) -> set[tuple[str, str]]:
        t0 = time.perf_counter()
        try:
            return super()._stale_outdated(conv, created_at)
        finally:
            self.check_ms.append((time.perf_counter() - t0) * 1000)


class _PinKeyed(_TimedCheck):
    """The sweep's check keyed as before: on the pin version, which every load-bearing
    append moves (`--outdated`'s baseline)."""

    def _marks(self, conv: str, hidden: Hidden) -> tuple[int, frozenset[int]]:
        return self.cold.pin_version(conv), frozenset(hidden.positions)


def outdated_check_cost(root: Path, counter: BpeTokenCounter, *, turns: int, rounds: int) -> dict[str, Any]:
    """`--outdated` at one conversation length (module docstring)."""
    rows = _rows()
    # a user's instruction (a system row would also lengthen the control-row read every sweep makes)
    ordinary = next(r for r in rows if r["load_bearing"] and r["role"] == "user" and r["intent"] == "instruction")
    cold = ColdStore(root / f"outdated-{turns}.db", tokens=counter)
    try:
        _append(cold, "c", 0, turns, rows, OUTDATED_SESSION_TURNS)
        cold.index_pending()  # labels and supersession decided for the history
        build = time.perf_counter()
        sweepers: dict[str, _TimedCheck] = {"baseline": _maintainer_of(_PinKeyed, cold, counter, None),
                                            "current": _maintainer_of(_TimedCheck, cold, counter, None)}
        views = sweepers["current"].refresh_all("c")
        build_s = time.perf_counter() - build
        samples: dict[str, list[float]] = {k: [] for k in sweepers}
        found: dict[str, set[Any]] = {k: set() for k in sweepers}
        for r in range(-1, rounds):  # round -1: each one's first check, of every view, not timed
            pin, sup = cold.pin_version("c"), cold.supersession_version("c")
            # an ordinary load-bearing turn, no correction decided (no index_pending)
            at = turns + 1 + r
            msg, label = _message(ordinary, at, OUTDATED_SESSION_TURNS)
            cold.append_many("c", [msg], labels=[label])
            if cold.pin_version("c") == pin or cold.supersession_version("c") != sup:
                raise RuntimeError("the append was not an ordinary load-bearing one")
            order = list(sweepers) if r % 2 == 0 else list(reversed(sweepers))
            if r == 0:
                for m in sweepers.values():
                    m.check_ms.clear()  # round -1's first checks
            for name in order:
                t0 = time.perf_counter()
                got = sweepers[name].stale_views_detailed(100)
                if r >= 0:
                    samples[name].append((time.perf_counter() - t0) * 1000)
                found[name].update(k for k, _ in got)
        if found["baseline"] != found["current"]:
            raise RuntimeError(f"the sweeps disagree: {found}")
        out: dict[str, Any] = {"turns": turns, "views": len(views), "rounds": rounds,
                               "build_s": round(build_s, 1)}
        for name, ms in samples.items():
            check = sweepers[name].check_ms
            out[name] = {"p50_ms": round(statistics.median(ms), 3), "p99_ms": round(_pct(ms, 0.99), 3),
                         "check_p50_ms": round(statistics.median(check), 3),
                         "check_p99_ms": round(_pct(check, 0.99), 3)}
        return out
    finally:
        cold.close()


def run_outdated(quick: bool = False) -> dict[str, Any]:
    """`--outdated`: the figures (milliseconds) at each conversation length."""
    counter = BpeTokenCounter()
    sizes = ((300, 20),) if quick else ((2000, 100), (20000, 40))
    with tempfile.TemporaryDirectory(prefix="tiermem-bench-warm-outdated-") as tmp:
        return {"outdated": [outdated_check_cost(Path(tmp), counter, turns=t, rounds=n) for t, n in sizes]}


def format_outdated(r: dict[str, Any]) -> str:
    lines = ["sweep per conversation after an ordinary load-bearing append (no correction), ms:",
             "the whole sweep, and its check for corrected lines (_stale_outdated)",
             "  turns   views        baseline p50      p99      current p50      p99"]
    for f in r["outdated"]:
        for what, p50, p99 in (("sweep", "p50_ms", "p99_ms"), ("check", "check_p50_ms", "check_p99_ms")):
            b, c = f["baseline"], f["current"]
            lines.append(f"  {f['turns']:>5} {f['views']:>7} {what} {b[p50]:>10.3f} {b[p99]:>8.3f}"
                         f" {c[p50]:>16.3f} {c[p99]:>8.3f}")
    return "\n".join(lines)


POP_NEW_TURNS = 100  # turns appended (the retraction among them) before each timed refresh


class _CountRestored(ViewMaintainer):
    """A maintainer that counts the turns its refreshes added as restored by a pop."""

    restored: list[int]

    def _restored(self, conv: str, prev: SummaryView | None, session_id: str | None = None) -> list[TurnRow]:
        out = super()._restored(conv, prev, session_id)
        self.restored = [*getattr(self, "restored", []), *(r.position for r in out)]
        return out


def pop_refresh_cost(root: Path, counter: BpeTokenCounter, *, turns: int, rounds: int) -> dict[str, Any]:
    """`--pop` at one conversation length (module docstring)."""
    rows = _rows()
    cold = ColdStore(root / f"pop-{turns}.db", tokens=counter)
    try:
        _append(cold, "c", 0, turns, rows)
        m = _maintainer_of(_CountRestored, cold, counter, None)
        m.refresh("c", "rolling")
        samples: dict[str, list[float]] = {"none": [], "noop": [], "restoring": [], "full": []}
        restored = 0  # restoring refreshes whose summarizer was given the popped correction's target
        for r in range(rounds):
            for case in ("none", "noop", "restoring"):
                at = cold.last_position("c") + 1
                old = r * 7 + 3  # a turn early in the log: far from every cited one
                if case == "restoring":
                    # a correction decided now (as supersession records it), absorbed by a refresh
                    _append(cold, "c", at, 1, rows)
                    cold.set_superseded("c", [(old, at)])
                    m.refresh("c", "rolling")
                    at += 1
                popped = {"none": None, "noop": at - 2, "restoring": at - 1}[case]
                n = POP_NEW_TURNS
                if popped is not None:
                    cold.append_many("c", [Message(type=RETRACT_TYPE, position=popped)])
                    n -= 1
                _append(cold, "c", cold.last_position("c") + 1, n, rows)
                m.restored = []
                t0 = time.perf_counter()
                m.refresh("c", "rolling")
                samples[case].append((time.perf_counter() - t0) * 1000)
                if m.restored != ([old] if case == "restoring" else []):
                    raise RuntimeError(f"{case}: restored {m.restored}")
                restored += case == "restoring"
            t0 = time.perf_counter()
            m.refresh("c", "rolling", full=True)
            samples["full"].append((time.perf_counter() - t0) * 1000)
        out: dict[str, Any] = {"turns": turns, "rounds": rounds, "restored": restored}
        out.update({k: round(statistics.median(v), 2) for k, v in samples.items()})
        return out
    finally:
        cold.close()


def run_pop(quick: bool = False) -> dict[str, Any]:
    """`--pop`: the figures (milliseconds) at each conversation length."""
    counter = BpeTokenCounter()
    sizes = ((300, 3),) if quick else ((2000, 7), (20000, 5))
    with tempfile.TemporaryDirectory(prefix="tiermem-bench-warm-pop-") as tmp:
        return {"pop": [pop_refresh_cost(Path(tmp), counter, turns=t, rounds=n) for t, n in sizes]}


def format_pop(r: dict[str, Any]) -> str:
    lines = [f"rolling refresh after {POP_NEW_TURNS} new turns, extractive, embeddings off, median ms:",
             "  turns   no pop   pop (undoes nothing)   pop (restores a turn)   full refresh   restored"]
    for f in r["pop"]:
        lines.append(f"  {f['turns']:>5} {f['none']:>8.2f} {f['noop']:>22.2f} {f['restoring']:>23.2f}"
                     f" {f['full']:>14.2f}   {f['restored']}/{f['rounds']}")
    return "\n".join(lines)


def run(quick: bool = False, *, embeddings: bool = True) -> dict[str, Any]:
    """Run the benchmark; returns the figures (milliseconds)."""
    counter = BpeTokenCounter()
    embedder: Embedder | None = None
    if embeddings:
        from tiermem.tiers.embed_onnx import build_embedder

        embedder = build_embedder()  # the default runtime, as Memory() builds it
    turns, rounds, appends = (300, 3, 400) if quick else (2000, 5, 2000)
    with tempfile.TemporaryDirectory(prefix="tiermem-bench-warm-") as tmp:
        root = Path(tmp)
        refresh = refresh_cost(root, counter, embedder, turns=turns, rounds=rounds)
        base = append_latency(root, counter, embedder, appends=appends, with_scheduler=False)
        loaded = append_latency(root, counter, embedder, appends=appends, with_scheduler=True)
    return {
        "turns": turns,
        "embeddings": embeddings,
        "target_tokens": TARGET_TOKENS,
        "refresh_ms_per_100_turns": refresh,
        "append_latency": {
            "pace_ms": PACE_MS,
            "without_scheduler": base,
            "with_scheduler": loaded,
            "ratio_p50": round(loaded["p50_ms"] / base["p50_ms"], 2) if base["p50_ms"] else None,
            "ratio_p99": round(loaded["p99_ms"] / base["p99_ms"], 2) if base["p99_ms"] else None,
        },
    }


def format_table(r: dict[str, Any]) -> str:
    lines = [f"warm refresh, extractive, target {r['target_tokens']} tokens, {r['turns']}-turn conversation, "
             f"embeddings {'on' if r['embeddings'] else 'off'}",
             "  view          initial ms/100 turns   incremental ms per +100 turns"]
    for kind in ("rolling", "constraints", "session"):
        f = r["refresh_ms_per_100_turns"][kind]
        lines.append(f"  {kind:<13} {f['initial']:>20.2f}   {f['incremental']:>28.2f}")
    a = r["append_latency"]
    lines.append(f"append latency (one append every {a['pace_ms']} ms, from a thread)")
    for label, key in (("without scheduler", "without_scheduler"), ("with scheduler", "with_scheduler")):
        f = a[key]
        extra = (f"   ({f['scheduler_runs']} runs, {f['views_refreshed']} views refreshed)"
                 if "scheduler_runs" in f else "")
        lines.append(f"  {label:<18} p50 {f['p50_ms']:.3f} ms   p99 {f['p99_ms']:.3f} ms   "
                     f"max {f['max_ms']:.1f} ms{extra}")
    lines.append(f"  ratio              p50 x{a['ratio_p50']}   p99 x{a['ratio_p99']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a smaller conversation, for smoke runs")
    parser.add_argument("--no-embeddings", action="store_true",
                        help="bag-of-words vectors instead of the model")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--outdated", action="store_true",
                        help="only the sweep's check for corrected lines after an ordinary append")
    parser.add_argument("--pop", action="store_true",
                        help="only the rolling refresh after a retraction (a popped correction)")
    args = parser.parse_args(argv)
    if args.pop:
        popped = run_pop(args.quick)
        print(json.dumps(popped, indent=2) if args.json else format_pop(popped))
        return 0
    if args.outdated:
        result = run_outdated(args.quick)
        print(json.dumps(result, indent=2) if args.json else format_outdated(result))
        return 0
    result = run(args.quick, embeddings=not args.no_embeddings)
    print(json.dumps(result, indent=2) if args.json else format_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
