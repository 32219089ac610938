"""Hot-tier latency against baselines measured in the same run, on the embedded server.

    python -m tiermem.evals.bench_hot [--n 2000] [--quick] [--json]
    python -m tiermem.evals.bench_hot --demoted [--n 200] [--quick] [--json]

Measures admit p50/p99 (a steady state with evictions, defaults of Config), a read of a
2k-token hot set, a rebuild of a 10k-turn conversation, and the counts of `STATS_SETS`
sets as stats read them (`summaries`, pipelined) against a whole `read` of each (what
stats did before); and, over the same unix
socket and client settings, a raw redis-py pipeline (ZADD + HSET) and PING, so that the
ratios say what the Lua script costs on top of the round trip. Targets: admit p50 <=
0.4 ms, rebuild of 10k turns <= 200 ms.

`--demoted` measures instead what a read (every `context()` reads its conversation's set)
costs as a conversation of many pins grows: conversations of DEMOTED_TURNS turns, a
DEMOTED_PIN_SHARE of them pinned, admitted as appends would, so that every pin the budget
cannot hold is demoted and stays in the demoted hash `T:d` (which grows with the log, not
the budget); per size, the hash's entries, the read script's reply bytes, the EVALSHA
timed in process (p50, p99), the script's Redis time (INFO commandstats, usec per call)
and `HotTier.read` (p50, p99), against a baseline in the same run: the same window of a
conversation without pins.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tiermem.evals.bench import bounded
from tiermem.tiers.hot import READ_DEMOTED_LISTED, HotTier, HotTurn, make_client
from tiermem.tiers.redis_server import EmbeddedRedis

ADMIT_P50_TARGET_US = 400.0
REBUILD_10K_TARGET_MS = 200.0
# Config defaults, so the numbers describe what users get.
BUDGET, HEAD, TAIL, BIAS = 4000, 2, 8, 0.25
STATS_SETS = 1000  # a namespace's conversations, each a set of STATS_SET_TURNS turns
STATS_SET_TURNS = 20
STATS_RUNS = 7
DEFAULT_SAMPLES = 2000  # per latency figure
# --demoted: conversation sizes (turns), the share of turns pinned, reads timed per size
DEMOTED_TURNS = (1_000, 10_000, 40_000)
DEMOTED_TURNS_QUICK = (1_000, 10_000)
DEMOTED_PIN_SHARE = 0.5
DEMOTED_READS = 200


def _turns(n: int, seed: int, start: int = 0) -> list[HotTurn]:
    rng = random.Random(seed)
    out = []
    for i in range(start, start + n):
        tokens = rng.randint(20, 200)
        pinned = rng.random() < 0.005
        out.append(HotTurn(i, tokens, pinned, rng.randint(0, 3) if pinned else 0, "w" * (tokens * 4)))
    return out


def _pinned_turns(n: int, seed: int, pin_share: float) -> list[HotTurn]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        tokens = rng.randint(20, 200)
        pinned = rng.random() < pin_share
        out.append(HotTurn(i, tokens, pinned, rng.randint(0, 3) if pinned else 0, "w" * (tokens * 4)))
    return out


def _time_us(fn: Callable[[int], object], n: int) -> list[float]:
    samples = []
    clock = time.perf_counter_ns
    for i in range(n):
        t0 = clock()
        fn(i)
        samples.append((clock() - t0) / 1000)
    return samples


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(n: int = DEFAULT_SAMPLES, quick: bool = False, url: str | None = None) -> dict[str, Any]:
    """Run the benchmark and return its figures (µs unless the key says ms).

    `url` benchmarks an existing server instead of a fresh embedded one; `quick` cuts the
    sample counts for smoke runs.
    """
    if quick:
        n = min(n, 300)
    rebuild_runs = 3 if quick else 7
    with tempfile.TemporaryDirectory(prefix="tm-bench-") as tmp:
        server = None
        if url is None:
            server = EmbeddedRedis(Path(tmp))
            url = server.ensure()
        client = make_client(url)
        try:
            return _run(client, n, rebuild_runs)
        finally:
            client.close()
            if server is not None:
                server.stop()


def _run(client: Any, n: int, rebuild_runs: int) -> dict[str, Any]:
    hot = HotTier(client, budget_tokens=BUDGET, head_protect=HEAD, tail_protect=TAIL, eviction_bias=BIAS)
    tag = f"bench-{random.getrandbits(32):08x}"
    warm = _turns(200, seed=1)
    # Fill the window first, so every timed admit evicts: the steady state of a long chat.
    conv = f"{tag}-admit"
    hot.admit_many(conv, warm, generation="b")
    admits = _turns(n, seed=2, start=len(warm))
    gc.collect()
    admit_us = _time_us(lambda i: hot.admit(conv, admits[i], generation="b"), n)
    state = hot.read(conv)
    assert state is not None and state.total_tokens <= BUDGET + state.overflow_tokens

    # read of a 2k-token hot set
    read_tier = HotTier(client, budget_tokens=2000, head_protect=HEAD, tail_protect=TAIL, eviction_bias=BIAS)
    rconv = f"{tag}-read"
    read_tier.admit_many(rconv, _turns(300, seed=3), generation="b")
    rstate = read_tier.read(rconv)
    assert rstate is not None
    read_us = _time_us(lambda i: read_tier.read(rconv), n)

    # rebuild of a 10k-turn conversation
    log = _turns(10_000, seed=4)
    bconv = f"{tag}-rebuild"
    hot.rebuild(bconv, log[:100], generation="b")
    rebuild_ms = []
    for _ in range(rebuild_runs):
        t0 = time.perf_counter()
        rebuilt = hot.rebuild(bconv, log, generation="b")
        rebuild_ms.append((time.perf_counter() - t0) * 1000)
    assert rebuilt.last_position == 9_999

    # the counts of many sets, as stats read them, against a whole read of each
    sets = [f"{tag}-s{i}" for i in range(STATS_SETS)]
    for i, c in enumerate(sets):
        hot.admit_many(c, _turns(STATS_SET_TURNS, seed=100 + i), generation="b")
    whole_ms, counts_ms = [], []
    for _ in range(rebuild_runs if rebuild_runs < STATS_RUNS else STATS_RUNS):
        t0 = time.perf_counter()
        whole = [hot.read(c) for c in sets]
        whole_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        counted = hot.summaries(sets)
        counts_ms.append((time.perf_counter() - t0) * 1000)
    assert len(counted) == STATS_SETS and sum(s.members for s in counted.values()) == sum(
        len(w.turns) for w in whole if w is not None)
    for c in sets:
        hot.drop(c)

    # baselines on the same connection settings
    zkey, hkey = f"{{{tag}}}:bz", f"{{{tag}}}:bh"

    def pipeline(i: int) -> None:
        pipe = client.pipeline(transaction=False)
        pipe.zadd(zkey, {str(i): i})
        pipe.hset(hkey, str(i), admits[i].payload)
        pipe.execute()

    pipe_us = _time_us(pipeline, n)
    ping_us = _time_us(lambda i: client.ping(), n)
    for key in (zkey, hkey):
        client.delete(key)
    for c in (conv, rconv, bconv):
        hot.drop(c)

    out: dict[str, Any] = {
        "n": n,
        "redis_version": client.info("server").get("redis_version", "?") if hasattr(client, "info") else "?",
        "admit_p50_us": _pct(admit_us, 0.5),
        "admit_p99_us": _pct(admit_us, 0.99),
        "read_2k_tokens": rstate.total_tokens,
        "read_2k_members": len(rstate.turns),
        "read_2k_p50_us": _pct(read_us, 0.5),
        "read_2k_p99_us": _pct(read_us, 0.99),
        "rebuild_10k_ms": statistics.median(rebuild_ms),
        "rebuild_10k_min_ms": min(rebuild_ms),
        "rebuild_10k_members": len(rebuilt.turns),
        "pipeline_zadd_hset_p50_us": _pct(pipe_us, 0.5),
        "pipeline_zadd_hset_p99_us": _pct(pipe_us, 0.99),
        "stats_sets": STATS_SETS,
        "stats_whole_reads_ms": statistics.median(whole_ms),
        "stats_summaries_ms": statistics.median(counts_ms),
        "ping_p50_us": _pct(ping_us, 0.5),
        "ping_p99_us": _pct(ping_us, 0.99),
    }
    out["admit_vs_pipeline"] = out["admit_p50_us"] / out["pipeline_zadd_hset_p50_us"]
    out["admit_vs_ping"] = out["admit_p50_us"] / out["ping_p50_us"]
    out["read_vs_ping"] = out["read_2k_p50_us"] / out["ping_p50_us"]
    out["stats_ratio"] = out["stats_whole_reads_ms"] / out["stats_summaries_ms"]
    out["admit_p50_ok"] = out["admit_p50_us"] <= ADMIT_P50_TARGET_US
    out["rebuild_10k_ok"] = out["rebuild_10k_ms"] <= REBUILD_10K_TARGET_MS
    return out


def run_demoted(n: int = DEMOTED_READS, quick: bool = False, url: str | None = None) -> dict[str, Any]:
    """The read's cost against the demoted hash's size (`--demoted`, module docstring)."""
    sizes = DEMOTED_TURNS_QUICK if quick else DEMOTED_TURNS
    if quick:
        n = min(n, 30)
    with tempfile.TemporaryDirectory(prefix="tm-bench-") as tmp:
        server = None
        if url is None:
            server = EmbeddedRedis(Path(tmp))
            url = server.ensure()
        client = make_client(url)
        try:
            return _run_demoted(client, sizes, n)
        finally:
            client.close()
            if server is not None:
                server.stop()


def _evalsha_usec(client: Any) -> tuple[int, int]:
    """(calls, usec) of EVALSHA so far, from INFO commandstats."""
    got = client.info("commandstats").get("cmdstat_evalsha", {})
    return int(got.get("calls", 0)), int(got.get("usec", 0))


def _run_demoted(client: Any, sizes: tuple[int, ...], n: int) -> dict[str, Any]:
    hot = HotTier(client, budget_tokens=BUDGET, head_protect=HEAD, tail_protect=TAIL, eviction_bias=BIAS)
    tag = f"bench-{random.getrandbits(32):08x}"
    # the baseline first: the same window of a conversation without pins (nothing demoted)
    cases = [("baseline, no pins", sizes[0], 0.0), *((f"{s:,} turns", s, DEMOTED_PIN_SHARE) for s in sizes)]
    rows = [_demoted_case(client, hot, f"{tag}-{i}", label, size, share, n)
            for i, (label, size, share) in enumerate(cases)]
    return {"n": n, "budget": BUDGET, "pin_share": DEMOTED_PIN_SHARE, "rows": rows,
            "redis_version": client.info("server").get("redis_version", "?")}


def _demoted_case(client: Any, hot: HotTier, conv: str, label: str, size: int, share: float, n: int
                  ) -> dict[str, Any]:
    """One conversation of `size` turns, `share` of them pinned: its read, timed."""
    turns = _pinned_turns(size, seed=size, pin_share=share)
    hot.admit_many(conv, turns, generation="b")
    keys = hot._live_keys(conv)
    args = [hot.idle_ttl_ms, READ_DEMOTED_LISTED]  # as `HotTier.read` runs it
    reply = hot._run("read", keys, args)
    state = hot.read(conv)
    assert state is not None and reply
    gc.collect()
    calls0, usec0 = _evalsha_usec(client)
    evalsha_us = _time_us(lambda i: hot._run("read", keys, args), n)
    calls1, usec1 = _evalsha_usec(client)
    read_us = _time_us(lambda i: hot.read(conv), n)
    row = {
        "case": label, "turns": size, "pins": sum(t.pinned for t in turns),
        "demoted_entries": int(client.hlen(hot.keys(conv)[5])), "members": len(state.turns),
        "reply_bytes": len(reply), "evalsha_p50_us": _pct(evalsha_us, 0.5), "evalsha_p99_us": _pct(evalsha_us, 0.99),
        "redis_us_per_read": (usec1 - usec0) / max(1, calls1 - calls0),
        "read_p50_us": _pct(read_us, 0.5), "read_p99_us": _pct(read_us, 0.99),
    }  # fmt: skip
    hot.drop(conv)
    return row


def format_demoted(r: dict[str, Any]) -> str:
    head = ("case", "T:d entries", "members", "reply bytes", "EVALSHA p50/p99 us", "Redis us/read",
            "read() p50/p99 us")
    rows = [(x["case"], f"{x['demoted_entries']:,}", str(x["members"]), f"{x['reply_bytes']:,}",
             f"{x['evalsha_p50_us']:.0f} / {x['evalsha_p99_us']:.0f}", f"{x['redis_us_per_read']:.0f}",
             f"{x['read_p50_us']:.0f} / {x['read_p99_us']:.0f}") for x in r["rows"]]
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    lines = [f"hot read against demoted pins, redis {r['redis_version']}, budget {r['budget']}, "
             f"{r['pin_share']:.0%} of turns pinned, n={r['n']} reads a case"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [head, *rows]]
    return "\n".join(lines)


def format_table(r: dict[str, Any]) -> str:
    def ok(flag: bool) -> str:
        return "ok" if flag else "MISSED"

    rows = [
        ("admit (steady state, evicting)", f"{r['admit_p50_us']:.0f} µs", f"{r['admit_p99_us']:.0f} µs",
         f"{r['admit_vs_ping']:.2f}x PING, {r['admit_vs_pipeline']:.2f}x pipeline; "
         f"target p50 <= {ADMIT_P50_TARGET_US:.0f} µs: {ok(r['admit_p50_ok'])}"),
        (f"read ({r['read_2k_tokens']} tokens, {r['read_2k_members']} turns)",
         f"{r['read_2k_p50_us']:.0f} µs", f"{r['read_2k_p99_us']:.0f} µs", f"{r['read_vs_ping']:.2f}x PING"),
        ("rebuild, 10k turns", f"{r['rebuild_10k_ms']:.1f} ms", f"min {r['rebuild_10k_min_ms']:.1f} ms",
         f"median of runs; target <= {REBUILD_10K_TARGET_MS:.0f} ms: {ok(r['rebuild_10k_ok'])}"),
        (f"counts of {r['stats_sets']} sets (stats)", f"{r['stats_summaries_ms']:.1f} ms", "",
         f"median of runs; a whole read of each: {r['stats_whole_reads_ms']:.1f} ms "
         f"({r['stats_ratio']:.1f}x)"),
        ("baseline: pipeline ZADD + HSET", f"{r['pipeline_zadd_hset_p50_us']:.0f} µs",
         f"{r['pipeline_zadd_hset_p99_us']:.0f} µs", "redis-py, same socket"),
        ("baseline: PING", f"{r['ping_p50_us']:.0f} µs", f"{r['ping_p99_us']:.0f} µs",
         "redis-py, same socket"),
    ]  # fmt: skip
    head = ("operation", "p50", "p99", "notes")
    widths = [max(len(str(row[i])) for row in [head, *rows]) for i in range(3)]
    lines = [
        f"hot tier on redis {r['redis_version']}, budget {BUDGET}, head {HEAD}, tail {TAIL}, "
        f"bias {BIAS}, n={r['n']}",
        "  ".join(h.ljust(w) for h, w in zip(head[:3], widths, strict=True)) + "  " + head[3],
    ]
    for row in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=bounded(1, unit="samples"), default=None,
                        help=f"samples per latency figure (default {DEFAULT_SAMPLES}; --demoted: {DEMOTED_READS})")
    parser.add_argument("--quick", action="store_true", help="fewer samples, for smoke runs")
    parser.add_argument("--url", default=None, help="benchmark this Redis instead of an embedded one")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--demoted", action="store_true",
                        help="measure a read against the demoted-pin hash's size instead (module docstring)")
    args = parser.parse_args(argv)
    if args.demoted:
        demoted = run_demoted(args.n or DEMOTED_READS, quick=args.quick, url=args.url)
        print(json.dumps(demoted, indent=2) if args.json else format_demoted(demoted))
        return 0
    result = run(args.n or DEFAULT_SAMPLES, quick=args.quick, url=args.url)
    print(json.dumps(result, indent=2) if args.json else format_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
