"""Measure the system-message policies for prompt caching (not a test; run
`PYTHONPATH=$PWD python tests/measure_system_policies.py`): a conversation grows turn by
turn (a user question, the assistant's answer), a new pin every PIN_EVERY turns, and
each turn asks for a context under BUDGET tokens. For each policy it prints the share
of the previous context's tokens that the next context repeats as its exact prefix
(what a provider's prompt cache can serve), on average and on the turns right after a
pin was added, and how many contexts had a system message other than the first."""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from tiermem import Config, Memory
from tiermem.tiers.tokens import message_tokens

TURNS = 60
PIN_EVERY = 6
BUDGET = 1500
SYSTEM = "You are a logistics assistant."
POLICIES = ["as_is", "merge", "before_latest"]


def turn(i: int) -> tuple[dict[str, str], dict[str, str]]:
    return ({"role": "user", "content": f"Note {i}: the package for client {i} ships from depot {i % 7} on day {i}."},
            {"role": "assistant", "content": f"Recorded: client {i}, depot {i % 7}, day {i}."})


def run(policy: str, **config: object) -> tuple[float, float, int, float]:
    shares: list[float] = []
    reused: list[int] = []
    after_pin: list[float] = []
    mid_system = 0
    with Memory(Config(data_dir=tempfile.mkdtemp(), system_messages=policy, **config), hot=False,
                background_indexing=False) as mem:
        for i in range(8):  # some history first
            mem.append_many("c", list(turn(i)))
        prev: list[dict] | None = None
        for i in range(8, 8 + TURNS):
            pinned_now = i % PIN_EVERY == 0
            if pinned_now:
                mem.pin("c", 2 * (i - 8) // 2, priority=60)  # a user note becomes a standing fact
            user, answer = turn(i)
            mem.append("c", user)
            ctx = mem.context("c", user["content"], BUDGET, system=SYSTEM)
            msgs = ctx.messages
            mid_system += any(m.get("role") == "system" for m in msgs[1:])
            if prev is not None:
                k = 0
                for a, b in zip(prev, msgs, strict=False):
                    if a != b:
                        break
                    k += 1
                total = sum(message_tokens(mem.tokens, m) for m in prev)
                share = sum(message_tokens(mem.tokens, m) for m in prev[:k]) / total
                reused.append(sum(message_tokens(mem.tokens, m) for m in prev[:k]))
                shares.append(share)
                if pinned_now:
                    after_pin.append(share)
            prev = msgs
            mem.append("c", answer)
    return statistics.mean(shares), statistics.mean(after_pin), mid_system, statistics.mean(reused)


# (label, config): the default layer shares, and a tail-heavy split (a chat that mostly needs its recent turns)
SPLITS = [("default shares", {}), ("tail share 0.5", {"layer_shares": {"tail": 0.5}})]
print(f"{TURNS} turns, budget {BUDGET}, a new pin every {PIN_EVERY} turns")
for label, cfg in SPLITS:
    print(f"-- {label}")
    for p in POLICIES:
        mean, pin, mid, toks = run(p, **cfg)
        print(f"{p:14s} prefix reused: {mean:6.1%} of the previous context ({toks:5.0f} tokens) on average, "
              f"{pin:6.1%} right after a new pin; contexts with a system message after the first: {mid}/{TURNS}")
