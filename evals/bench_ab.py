"""context() latency of two planner settings on one built conversation, interleaved.

    python -m tiermem.evals.bench_ab --old excerpt=0 --new excerpt=2 [--rounds 2] [--quick]

A change that costs a millisecond or two is invisible between two separate runs of
`evals.bench_context` on a shared machine (its load moves by more). This builds the
10k-turn conversation of bench_context once and times its query mix under the `old`
setting, then the `new` one, then again (`--rounds` times), so that both see the same
load over time. A setting is recall_rounds' variant syntax without a name (its knobs;
every knob it does not name keeps its shipped value here, unlike recall_rounds' off
defaults for the experimental weights). Reported per round and setting: context p50 /
p99, the search baseline's p50 (a load gauge) and over-budget calls.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

import tiermem.evals.bench_context as bc
from tiermem.evals.bench import bounded
from tiermem.evals.recall_rounds import KNOBS, parse_variant


@contextlib.contextmanager
def knobs(values: dict[str, float]) -> Iterator[None]:
    """The named knobs set for the block, every other one as shipped."""
    saved = {k: getattr(mod, attr) for k, (mod, attr) in KNOBS.items()}
    try:
        for k, v in values.items():
            mod, attr = KNOBS[k]
            setattr(mod, attr, type(saved[k])(v))
        yield
    finally:
        for k, (mod, attr) in KNOBS.items():
            setattr(mod, attr, saved[k])


def run(old: dict[str, float], new: dict[str, float], rounds: int, quick: bool) -> dict[str, Any]:
    measure = bc._measure
    res: dict[str, Any] = {}

    def interleaved(mem: Any, mix: Any, k: int) -> Any:
        last: Any = None
        for rnd in range(rounds):
            for label, values in (("old", old), ("new", new)):
                with knobs(values):
                    last = measure(mem, mix, k)
                res[f"{label}{rnd}"] = {"p50": last["context_ms"]["p50"], "p99": last["context_ms"]["p99"],
                                        "search_p50": last["search_ms"]["p50"], "over_budget": last["over_budget"]}
                bc.say(f"{label} {rnd}: {res[f'{label}{rnd}']}")
        return last

    bc._measure = interleaved
    try:
        out = bc.run(quick=quick)
    finally:
        bc._measure = measure
    return {"old": old, "new": new, "ab": res, "load_avg": out.get("load_avg")}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tiermem.evals.bench_ab", description=__doc__.split("\n")[0])
    ap.add_argument("--old", default="", help="KEY=V,... (recall_rounds knobs; empty: as shipped)")
    ap.add_argument("--new", default="", help="KEY=V,...")
    ap.add_argument("--rounds", type=bounded(1, unit="rounds"), default=2)
    ap.add_argument("--quick", action="store_true", help="a 300-turn conversation (a smoke run)")
    args = ap.parse_args(argv)
    old, new = parse_variant(f"old:{args.old}").values, parse_variant(f"new:{args.new}").values
    print(json.dumps(run(old, new, args.rounds, args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
