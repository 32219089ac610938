"""Supersession cost per batch: `append_many` of a 1,000-message batch full of update cues
("actually", "now", "change", "instead": corrections, questions and statements mixed,
about 100 bytes each, a 100 kB body) against the same number of plain statements of the
same size, in the same process, each into a fresh conversation.

Prints the median and p99 (over `--reps` batches; with few reps the p99 is the max) of
both, their ratio, and the Superseder's own share (`Superseder.find` over the stored
batch), wall clock and process CPU (all threads: the embedding model's included).
Target (issue 13, item 11): the cue batch in at most 3 s on the dev machine (it took
27.4 s of server CPU before supersession was batched).

Run: ``python -m tiermem.evals.bench_supersede [--messages 1000] [--reps 5] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tiermem.config import Config
from tiermem.consolidation.supersede import Appended
from tiermem.evals.bench import bounded
from tiermem.memory import Memory

DEFAULT_MESSAGES = 1000
DEFAULT_REPS = 5
MESSAGE_BYTES = 100  # each message is padded to about this size
TARGET_S = 3.0
_CUES = (
    "My budget for project {i} is {v} EUR in total for this quarter, flights and hotel included.",
    "Actually, update: the budget for project {i} is now {w} EUR, please note that down for later.",
    "What about the schedule for item {i} now, can you actually check it for me before noon?",
    "Change the meeting for team {i} to Thursday instead, the room moved to the second floor.",
    "I switched the vendor for order {i} to Globex {i} from now on; Initech is out of the picture.",
    "Forget the red-eye rule for trip {i}, I sleep fine on planes these days, honestly.",
)
_PLAIN = "The shipment for order {i} left the warehouse on time and the tracking page shows it."


def _pad(text: str) -> str:
    return (text + " " + "." * MESSAGE_BYTES)[:MESSAGE_BYTES] if len(text) < MESSAGE_BYTES else text


def batch(n: int, *, cues: bool) -> list[dict[str, Any]]:
    out = []
    for k in range(n):
        i = k // len(_CUES)
        text = _CUES[k % len(_CUES)] if cues else _PLAIN
        out.append({"role": "user" if cues or k % 2 == 0 else "assistant",
                    "content": _pad(text.format(i=i, v=1000 + i, w=2000 + i))})
    return out


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def run(messages: int = DEFAULT_MESSAGES, reps: int = DEFAULT_REPS) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="tiermem-bench-supersede-"))
    try:
        with Memory(Config(data_dir=tmp), hot=False, background_indexing=False) as mem:
            mem.warm_up()  # the model loaded, as in a server: appends no longer load it
            times: dict[str, list[float]] = {"plain": [], "cues": []}
            cpu: dict[str, list[float]] = {"plain": [], "cues": []}
            find_s: list[float] = []
            pairs = 0
            for r in range(reps):
                for kind in ("plain", "cues"):
                    msgs = batch(messages, cues=kind == "cues")
                    conv = f"{kind}-{r}"
                    t, c = time.perf_counter(), time.process_time()
                    mem.append_many(conv, msgs)
                    times[kind].append(time.perf_counter() - t)
                    cpu[kind].append(time.process_time() - c)
                    if kind == "cues":
                        rows = mem.cold.turns(conv)
                        texts = {m.position: m.text for m in mem.cold.history(conv)}
                        pairs = sum(1 for x in rows if x.superseded_by is not None)
                        appended = [Appended(x.position, x.role, texts[x.position], x.intent or "statement",
                                             x.load_bearing) for x in rows]
                        t = time.perf_counter()
                        mem.superseder.find(conv, appended)  # decides again (nothing recorded)
                        find_s.append(time.perf_counter() - t)
        med = {k: statistics.median(v) for k, v in times.items()}
        return {
            "messages": messages, "reps": reps, "body_bytes": sum(len(m["content"]) for m in batch(messages, cues=True)),
            "plain_s": {"median": med["plain"], "p99": _pct(times["plain"], 0.99)},
            "cues_s": {"median": med["cues"], "p99": _pct(times["cues"], 0.99)},
            "ratio_median": med["cues"] / med["plain"],
            "plain_cpu_s": {"median": statistics.median(cpu["plain"]), "p99": _pct(cpu["plain"], 0.99)},
            "cues_cpu_s": {"median": statistics.median(cpu["cues"]), "p99": _pct(cpu["cues"], 0.99)},
            "superseder_find_s": {"median": statistics.median(find_s), "p99": _pct(find_s, 0.99)},
            "superseded_pairs_per_batch": pairs,
            "target_s": TARGET_S, "within_target": _pct(times["cues"], 0.99) <= TARGET_S,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.bench_supersede", description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=bounded(1, unit="messages"), default=DEFAULT_MESSAGES)
    ap.add_argument("--reps", type=bounded(1, unit="runs"), default=DEFAULT_REPS)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = run(args.messages, args.reps)
    if args.json:
        print(json.dumps(res))
        return 0
    print(f"append_many of {res['messages']} messages ({res['body_bytes']} bytes), {res['reps']} reps "
          "(p99 of few reps = max):")
    print(f"  plain statements   median {res['plain_s']['median']:.3f} s  p99 {res['plain_s']['p99']:.3f} s")
    print(f"  with update cues   median {res['cues_s']['median']:.3f} s  p99 {res['cues_s']['p99']:.3f} s  "
          f"ratio {res['ratio_median']:.2f}x  ({res['superseded_pairs_per_batch']} superseded per batch)")
    print(f"  CPU (all threads)  plain median {res['plain_cpu_s']['median']:.3f} s, cues median "
          f"{res['cues_cpu_s']['median']:.3f} s  p99 {res['cues_cpu_s']['p99']:.3f} s")
    print(f"  Superseder.find    median {res['superseder_find_s']['median']:.3f} s  "
          f"p99 {res['superseder_find_s']['p99']:.3f} s")
    print(f"  target {res['target_s']:.1f} s: {'met' if res['within_target'] else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
