"""How long a process that exits without `close()` waits for its background indexer, with
a backlog of appended turns not yet embedded, and whether it exits cleanly.

Each run is a fresh process: it loads the model, appends the backlog in one
`append_many`, lets the indexer work for `--settle` seconds and ends without `close()`.
Its last exit handler prints how long the exit took after the script's last line; the
return code says whether it exited cleanly (134 / -6 is onnxruntime's abort). Then, in
this process, the turns left pending are caught up: that time is the baseline, what the
exit would have waited to finish the backlog (as it did before a stop ended the catch-up
at the next pool; past 30 s it then aborted).

Cases: chat turns (~60 characters each) and long texts (400 words, past the model's 256
word pieces: the costliest pool). Prints per case the median and p99 of the exit wait
(with few reps the p99 is the max), the return codes, the turns left pending and the
baseline's median.

Run: ``python -m tiermem.evals.bench_exit [--chat 4000] [--long 1000] [--reps 3] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tiermem.config import Config
from tiermem.evals.bench import bounded
from tiermem.memory import Memory

DEFAULT_CHAT = 4000  # turns of the chat backlog
DEFAULT_LONG = 1000  # texts of the long backlog
DEFAULT_REPS = 3
DEFAULT_SETTLE_S = 3.0  # the indexer works this long before the script ends
LONG_WORDS = 400
CHILD_TIMEOUT_S = 600

# argv: data dir, "chat" or "long", count, settle seconds, words per long text. The first exit handler
# registered runs last: it sees the whole exit.
CHILD = """
import atexit, random, sys, time
end = [0.0]
atexit.register(lambda: print(f"exit wait {time.time() - end[0]:.3f}", flush=True))
from tiermem import Config, Memory
data, kind, n, settle, n_words = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
m = Memory(Config(data_dir=data), hot=False)
m.append("c1", {"role": "user", "content": "hello"})
m.warm_up()
words = "the garden dog trip Lisbon holiday budget meeting project deadline report refund".split()
rng = random.Random(1)
if kind == "chat":
    texts = [f"note {i}: the garden, the dog and the trip to Lisbon next week" for i in range(n)]
else:
    texts = [" ".join(rng.choice(words) for _ in range(n_words)) + f" {i}" for i in range(n)]
m.append_many("c1", [{"role": "user", "content": t} for t in texts])
time.sleep(settle)
end[0] = time.time()
"""


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def _one(kind: str, n: int, settle_s: float) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="tiermem-bench-exit-"))
    try:
        env = dict(os.environ)
        env.pop("OMP_NUM_THREADS", None)  # as a user's process: the query session may start
        out = subprocess.run([sys.executable, "-c", CHILD, str(tmp / "data"), kind, str(n), str(settle_s), str(LONG_WORDS)],
                             env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
        waits = [float(line.split()[-1]) for line in out.stdout.splitlines() if line.startswith("exit wait")]
        with Memory(Config(data_dir=tmp / "data"), hot=False, background_indexing=False) as m:
            pending = m.cold.pending_embeddings()
            m.warm_up()
            t = time.perf_counter()
            m.catch_up()
            rest_s = time.perf_counter() - t
        return {"rc": out.returncode, "exit_wait_s": waits[0] if waits else None, "pending": pending,
                "catch_up_rest_s": rest_s, "aborted": "terminate called" in out.stderr}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(chat: int = DEFAULT_CHAT, long: int = DEFAULT_LONG, reps: int = DEFAULT_REPS,
        settle_s: float = DEFAULT_SETTLE_S) -> dict[str, Any]:
    out: dict[str, Any] = {"reps": reps, "settle_s": settle_s, "cases": {}}
    for kind, n in (("chat", chat), ("long", long)):
        runs = [_one(kind, n, settle_s) for _ in range(reps)]
        waits = [r["exit_wait_s"] for r in runs if r["exit_wait_s"] is not None]
        out["cases"][kind] = {
            "turns": n, "runs": runs, "rcs": [r["rc"] for r in runs],
            "clean": all(r["rc"] == 0 and not r["aborted"] for r in runs),
            "exit_wait_s": {"median": statistics.median(waits), "p99": _pct(waits, 0.99)} if waits else None,
            "pending": [r["pending"] for r in runs],
            "catch_up_rest_s": statistics.median(r["catch_up_rest_s"] for r in runs),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.bench_exit", description=__doc__.split("\n")[0])
    ap.add_argument("--chat", type=bounded(1, unit="turns"), default=DEFAULT_CHAT, help="turns of the chat backlog")
    ap.add_argument("--long", type=bounded(1, unit="texts"), default=DEFAULT_LONG, help=f"texts of {LONG_WORDS} words")
    ap.add_argument("--reps", type=bounded(1, unit="runs"), default=DEFAULT_REPS)
    ap.add_argument("--settle", type=bounded(0.0, unit="seconds"), default=DEFAULT_SETTLE_S, help="seconds the indexer works first")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = run(args.chat, args.long, args.reps, args.settle)
    if args.json:
        print(json.dumps(res))
        return 0
    print(f"exit without close() {res['settle_s']:.1f} s after appending a backlog, {res['reps']} runs per case "
          "(p99 of few runs = max):")
    for kind, c in res["cases"].items():
        w = c["exit_wait_s"]
        waited = f"median {w['median']:.1f} s  p99 {w['p99']:.1f} s" if w else "no exit handler ran"
        print(f"  {kind:5} {c['turns']:5} turns: exit wait {waited}  rc {c['rcs']}  "
              f"left pending {c['pending']}  catching those up: {c['catch_up_rest_s']:.1f} s (median)")
    return 0 if all(c["clean"] for c in res["cases"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
