"""Synthetic conversations for the cost replay's tests (test_cost_bound, test_cost_floor):
a ConvView as evals.cost builds one, of LoCoMo-like turns (20-40 words, ~40 tokens)."""

from __future__ import annotations

import random

from tiermem.evals.baselines import ConvView
from tiermem.tiers.tokens import TokenCounter, message_tokens

WORDS = ["garden", "violin", "harbour", "pancake", "glacier", "lantern", "marathon", "orchid", "pottery",
         "satellite", "tunnel", "umbrella", "volcano", "walrus", "yoga", "zeppelin", "bakery", "canyon"]


def view_of(counter: TokenCounter, n: int, seed: int) -> ConvView:
    """A chat of `n` turns of 20-40 words each, user and assistant in turn."""
    rnd = random.Random(seed)
    v = ConvView("c")
    for i in range(n):
        body = {"role": "user" if i % 2 == 0 else "assistant",
                "content": " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(20, 40)))}
        v.index[i] = i
        v.positions.append(i)
        v.bodies.append(body)
        v.tokens.append(message_tokens(counter, body))
    return v
