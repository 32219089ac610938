"""Two processes pinning one conversation: how often their hot-tier pin scripts reach
Redis in the other order than their log writes, and what that costs (tiers.hot, pin
versions; tiermem.hotlink PIN_GAP_WAIT_S).

A conversation of `--turns` turns under a small hot budget (so pins change members) is
pinned and unpinned at random (`UNPIN_SHARE` unpins) over its first `--width` positions
(default all; a small width makes both processes work on the same turns) by two child
processes for `--seconds`, each a full Memory on one data dir and tiermem's own Redis
(SQLite), or on one PostgreSQL schema (`--cold-url`). Each child reports its pins, its
hot link's rebuilds and the seconds spent in them, its waits for another pin's script,
and its pin latencies; the parent then compares the stored set's pin flags with the
log's (every pinned member at the log's priority, every log pin a member or demoted).

On the code before the wait (`tiers.hot` answered STALE 'pins' and the pinner rebuilt
the set from the log at once), at 2,000 turns and load 6 on 2 cores: SQLite 267 rebuilds
in 1,421 pins, 12.0 of 16.1 s of pin time; PostgreSQL 249 in 847, 10.7 of 15.2 s. After:
no rebuild, 3,639 and 2,360 pins in the same 10 s, p99 16-19 ms (was 140-180 ms).

Run: ``python -m tiermem.evals.bench_pin_order [--turns 2000] [--seconds 10] [--width N]
[--cold-url URL --cold-schema NAME] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tiermem.config import Config
from tiermem.hotlink import HotLink, pin_state
from tiermem.memory import Memory

CONV = "c"
PINNERS = 2
DEFAULT_TURNS = 2000
DEFAULT_SECONDS = 10.0
UNPIN_SHARE = 0.4  # of each child's operations
MAX_PRIORITY = 100
# small, so that pins change members (as tests/hot_pin_race_child.py)
HOT = {"hot_budget_tokens": 400, "head_protect": 1, "tail_protect": 3}
CHILD_EXIT_S = 120.0  # for a child to finish its call, report and close once told to stop
MS_PER_S = 1000.0
P99 = 0.99


def child(config_json: str, seed: int, stop: Path, width: int) -> dict[str, Any]:
    """One pinning process: pins and unpins until `stop` exists; its report."""
    cfg = Config.model_validate_json(config_json)
    spent = [0.0]
    real = HotLink._rebuild

    def timed(link: HotLink, conversation_id: str) -> Any:
        # the bench's own timer around the rebuild it counts (this process only)
        t = time.perf_counter()
        try:
            return real(link, conversation_id)
        finally:
            spent[0] += time.perf_counter() - t

    setattr(HotLink, "_rebuild", timed)  # noqa: B010 (a method replaced for this process's timing)
    rnd = random.Random(seed)
    lat: list[float] = []
    with Memory(cfg, background_indexing=False) as mem:
        assert mem.hot is not None
        while not stop.exists():
            position = rnd.randrange(width)
            t = time.perf_counter()
            if rnd.random() < UNPIN_SHARE:
                mem.unpin(CONV, position)
            else:
                mem.pin(CONV, position, priority=rnd.randint(1, MAX_PRIORITY))
            lat.append(time.perf_counter() - t)
        lat.sort()
        return {"pins": len(lat), "rebuilds": mem.hot.rebuilds, "rebuild_s": round(spent[0], 3),
                "gap_waits": getattr(mem.hot, "pin_gap_waits", None), "pin_s": round(sum(lat), 3),
                "p50_ms": round(statistics.median(lat) * MS_PER_S, 2) if lat else None,
                "p99_ms": round(lat[min(int(len(lat) * P99), len(lat) - 1)] * MS_PER_S, 1) if lat else None,
                "last_error": mem.hot.last_error}


def run(turns: int, seconds: float, width: int | None, cold_url: str | None, cold_schema: str | None
        ) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="tiermem-pin-order-"))
    try:
        extra: dict[str, Any] = {"cold_url": cold_url, "cold_schema": cold_schema} if cold_url else {}
        cfg = Config(data_dir=work / "data", **HOT, **extra)
        with Memory(cfg, background_indexing=False) as mem:
            assert mem.hot is not None
            mem.append_many(CONV, [{"role": "user", "content": f"seed {j} filler words here"} for j in range(turns)])
            key = mem.cold.key_of("default", CONV)
            assert key is not None
            mem.hot.read(key)  # built: the steady state
            stop = work / "stop"
            procs = [subprocess.Popen([sys.executable, "-m", "tiermem.evals.bench_pin_order", "--child",
                                       cfg.model_dump_json(), str(seed), str(stop), str(width or turns)],
                                      stdout=subprocess.PIPE, text=True) for seed in range(PINNERS)]
            time.sleep(seconds)
            stop.touch()
            reports = [json.loads(p.communicate(timeout=CHILD_EXIT_S)[0].strip().splitlines()[-1]) for p in procs]
            hs = mem.hot.tier.read(key)
            assert hs is not None
            log = {r.position: pin_state(r) for r in mem.cold.turns(key)}
            wrong = [t.position for t in hs.turns
                     if t.pinned != log[t.position][0] or (t.pinned and t.priority != log[t.position][1])]
            # every demoted pin (a read lists a bounded few: tiers.hot READ_DEMOTED_LISTED)
            held = {t.position for t in hs.turns} | set(mem.hot.tier.demoted_pins(key))
            missing = [p for p, (pinned, _) in log.items() if pinned and p not in held]
        return {"turns": turns, "seconds": seconds, "width": width or turns,
                "engine": "postgres" if cold_url else "sqlite", "children": reports,
                "pins": sum(r["pins"] for r in reports), "rebuilds": sum(r["rebuilds"] for r in reports),
                "rebuild_s": round(sum(r["rebuild_s"] for r in reports), 2),
                "pin_s": round(sum(r["pin_s"] for r in reports), 2),
                "flags_unlike_log": wrong, "log_pins_missing": missing}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "--child":
        print(json.dumps(child(args[1], int(args[2]), Path(args[3]), int(args[4]))), flush=True)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=DEFAULT_TURNS)
    ap.add_argument("--seconds", type=float, default=DEFAULT_SECONDS)
    ap.add_argument("--width", type=int, default=None, help="pin among the first N positions (default: all)")
    ap.add_argument("--cold-url", default=None, help="a PostgreSQL URL (default: SQLite in a temp dir)")
    ap.add_argument("--cold-schema", default="tm_bench_pin_order")
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args(args)
    got = run(ns.turns, ns.seconds, ns.width, ns.cold_url, ns.cold_schema if ns.cold_url else None)
    if ns.json:
        print(json.dumps(got, indent=1))
        return
    print(f"{got['engine']} {got['turns']} turns, width {got['width']}, {got['seconds']} s: {got['pins']} pins, "
          f"{got['rebuilds']} rebuilds ({got['rebuild_s']} s of {got['pin_s']} s pinning); per child p50/p99 ms "
          + ", ".join(f"{r['p50_ms']}/{r['p99_ms']}" for r in got["children"])
          + f"; gap waits {[r['gap_waits'] for r in got['children']]}; set flags unlike the log "
          f"{len(got['flags_unlike_log'])}, log pins missing {len(got['log_pins_missing'])}")


if __name__ == "__main__":
    main()
