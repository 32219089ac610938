"""The latest round's outputs are encoded once per call, and trimmed as before.

`Packing.fit_round` looks for the largest allowance at which the latest tool round fits by
bisection, each try trimming every output of the round anew (planner.build `_retrim`). Each
try re-encoded every whole output: 10 outputs of 100 kB at a 1,500-token budget took most
of a second per `context()`. Now each output is encoded on its first try and its tokens
kept for the call's later tries (planner.candidates `unit`'s `encoded`, planner.render
`Renderer.trim`'s `ids`). The result must be the same for every shape: this compares the
trim and the unit built from kept tokens with the algorithm before (kept here as the
reference: it encodes the text at every call), over texts of many kinds and allowances
tried in the orders a bisection tries them. Real tokenizer, real SQLite.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import pytest

from tiermem import Memory
from tiermem.planner.render import TRIM_HEAD_SHARE
from tiermem.tiers.formats import result_text_field, wire_body
from tiermem.tiers.models import StoredMessage
from tiermem.tiers.tokens import TokenCounter, message_tokens

SEED = 7  # the random allowance orders below: fixed, so a failure reproduces

TEXTS = {
    # plain words, well past any allowance
    "words": " ".join(f"line {j} status ok value {j * 7 % 101}" for j in range(600)),
    # no spaces: long tokens, where a cut falls inside what one word encodes
    "dense": "abcdefghij0123456789" * 400,
    # multi-byte: CJK and emoji, whose tokens need not decode to whole characters alone
    "unicode": "東京の天気は晴れ。🌧️ rain later ☂ " * 200,
    # runs of whitespace and newlines (a log, a table)
    "spaces": ("col1    col2\t\tcol3\n\n" + " " * 40 + "x\n") * 150,
    # JSON, as many tools answer
    "json": json.dumps([{"id": i, "name": f"item {i}", "tags": ["a", "b"], "ok": i % 3 == 0}
                        for i in range(300)]),
    # under every allowance tried: never trimmed
    "short": "21C and sunny",
    # empty output
    "empty": "",
}


def reference_trim(tokens: TokenCounter, text: str, limit: int, position: int) -> tuple[str, bool]:
    """planner.render `Renderer.trim` before its `ids`: encodes `text` at every call."""
    ids = tokens.encode(text)
    if len(ids) <= limit:
        return text, False
    head = int(limit * TRIM_HEAD_SHARE)
    tail = max(0, limit - head)
    cut = len(ids) - head - tail
    marker = (f"\n[... trimmed {cut} tokens of this output; the full text is position #{position} "
              f"in the log (history/get) ...]\n")
    return tokens.decode(ids[:head]) + marker + tokens.decode(ids[len(ids) - tail:]), True


def reference_unit(tokens: TokenCounter, g: Sequence[StoredMessage], limit: int) -> tuple[list[dict[str, Any]], int, str]:
    """planner.candidates `unit` before its `encoded`: bodies, tokens and fidelity."""
    bodies = []
    fid = "verbatim"
    for m in g:
        body = wire_body(m.body)
        key = result_text_field(m.body)
        if key is not None:
            text, trimmed = reference_trim(tokens, m.text, limit, m.position)
            if trimmed:
                body[key] = text
                fid = "trimmed"
        bodies.append(body)
    return bodies, sum(message_tokens(tokens, b) for b in bodies), fid


def _bisection_orders(top: int) -> list[list[int]]:
    """Allowance sequences as fit_round tries them: the floor, then a bisection towards
    each target; and shuffled ones (the kept tokens must not depend on the order)."""
    rng = random.Random(SEED)
    orders = []
    for target in (16, 17, 40, top // 2, top - 1, top):
        lo, hi, seq = 16, top + 1, [16]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            seq.append(mid)
            lo, hi = (mid, hi) if mid <= target else (lo, mid)
        orders.append(seq)
    for _ in range(3):
        orders.append(rng.sample(range(16, top + 2), 12))
    return orders


@pytest.mark.parametrize("name", sorted(TEXTS))
@pytest.mark.parametrize("limit", [
    16,    # ROUND_MIN_RESULT_TOKENS, the floor
    17,    # an odd allowance: head and tail shares round
    100,   # a mid allowance
    400,   # the usual tool_trim_tokens
    5000,  # past most texts: kept whole
])
def test_trim_from_kept_tokens_is_the_trim_before(cold_memory: Memory, name: str, limit: int) -> None:
    tokens = cold_memory.tokens
    text = TEXTS[name]
    render = cold_memory.planner.render
    want = reference_trim(tokens, text, limit, 12)
    assert render.trim(text, limit, 12) == want
    assert render.trim(text, limit, 12, tokens.encode(text)) == want


@pytest.mark.parametrize("shape", [
    # one output of each kind in one round (parallel calls)
    sorted(TEXTS),
    # many outputs of one kind
    ["words"] * 8,
    # a round whose outputs mostly fit whole, one long
    ["short", "short", "unicode", "empty"],
])
def test_a_round_trimmed_from_kept_tokens_is_the_round_before(cold_memory: Memory, shape: list[str]) -> None:
    """Each allowance of each bisection order, one `encoded` kept across the whole order
    (as one call keeps it): the unit is the unit built before, body for body."""
    tokens = cold_memory.tokens
    cold_memory.append("t", {"role": "user", "content": "check these"})
    cold_memory.append_many("t", [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
            for i in range(len(shape))]},
        *({"role": "tool", "tool_call_id": f"c{i}", "content": TEXTS[k]} for i, k in enumerate(shape))])
    g = cold_memory.history("t")[1:]
    cands = cold_memory.planner.candidates
    top = max(len(tokens.encode(m.text)) for m in g)
    for order in _bisection_orders(min(top, 600)):
        encoded: dict[int, list[int]] = {}
        for limit in order:
            got = cands.unit("t", g, limit, "round", encoded)
            bodies, toks, fid = reference_unit(tokens, g, limit)
            assert (got.body, got.tokens, got.fidelity) == ({"messages": bodies}, toks, fid), (order, limit)
        # each output with a text was encoded once, for every allowance after the first
        assert sorted(encoded) == [m.position for m in g if result_text_field(m.body) is not None]
