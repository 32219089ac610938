"""What a LangChain/LangGraph sync costs per model call on a long conversation.

    python -m tiermem.evals.bench_langchain_sync [--messages 5000] [--rounds 30] [--copies] [--json]

A `ConversationSync` (what `TiermemHooks` and the chat history run before each model call)
over a SQLite store holding `--messages` messages, then `--rounds` syncs that each add
one new message, the agent's steady state. Timed in this process, alternating call by
call so the machine's drift falls on both alike:

- `sync`: the shipped sync, which reads the log only from the last row it read and
  looks one by one only at the messages after the state its last sync ended with.
- `before`: the same sync plus one read of every visible row (`adapters._common.visible`),
  which is what each appending sync also did before d47e36d (`ConversationSync._batch`
  read the whole log and kept the rows only for an edit).

Each sync is given the state's message objects the last one saw plus the new one (one run
of a graph), or with `--copies` a checkpoint's copies of them (`model_copy(deep=True)`,
made before the clock starts: what a new run of a graph with a checkpointer holds).

Printed: p50 / p99 in ms of each and the ratio before / sync, with the load average.
No model is loaded: the store's embedder is lazy and background indexing is off.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tiermem import Config, Memory
from tiermem.adapters._common import visible
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.evals.bench import bounded, load_average, pct

DEFAULT_MESSAGES = 5_000
DEFAULT_ROUNDS = 30
MS_PER_S = 1000.0


def _message(i: int, prefix: str) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage

    kind = HumanMessage if i % 2 == 0 else AIMessage
    return kind(f"{prefix} {i}: a line of an agent's conversation", id=f"{prefix}{i}")


def run(messages: int, rounds: int, *, copies: bool = False) -> dict[str, Any]:
    load_before = load_average()
    with tempfile.TemporaryDirectory() as d, \
            Memory(Config(data_dir=Path(d)), hot=False, background_indexing=False) as mem:
        sync = ConversationSync(mem, "c")
        state = [_message(i, "m") for i in range(messages)]
        sync.sync(state)
        times: dict[str, list[float]] = {"sync": [], "before": []}
        for k in range(2 * rounds):
            side = "sync" if k % 2 == 0 else "before"
            state.append(_message(k, "n"))
            if copies:
                state = [m.model_copy(deep=True) for m in state]
            t = time.perf_counter()
            sync.sync(state)
            if side == "before":
                visible(mem, "c")
            times[side].append((time.perf_counter() - t) * MS_PER_S)
    out: dict[str, Any] = {"messages": messages, "rounds": rounds, "copies": copies,
                           "load_average": {"before": load_before, "after": load_average()}}
    for side, xs in times.items():
        out[side] = {"p50": round(statistics.median(xs), 2), "p99": round(pct(xs, 99), 2)}
    out["ratio_before_over_sync"] = round(out["before"]["p50"] / out["sync"]["p50"], 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=bounded(1, unit="messages"), default=DEFAULT_MESSAGES,
                    help="messages stored before the timed syncs")
    ap.add_argument("--rounds", type=bounded(1, unit="syncs"), default=DEFAULT_ROUNDS,
                    help="timed syncs of each side")
    ap.add_argument("--copies", action="store_true",
                    help="give each sync a checkpoint's copies of the state, not the objects synced before")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    r = run(args.messages, args.rounds, copies=args.copies)
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        copied = ", a checkpoint's copies each" if r["copies"] else ""
        print(f"{r['messages']} messages, {r['rounds']} syncs a side{copied}, load {r['load_average']}")
        for side in ("sync", "before"):
            print(f"  {side:7s} p50 {r[side]['p50']:8.2f} ms  p99 {r[side]['p99']:8.2f} ms")
        print(f"  before / sync (p50): {r['ratio_before_over_sync']}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
