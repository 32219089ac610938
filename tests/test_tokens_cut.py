"""A cut of a token sequence decodes, whatever characters it splits (tiers.tokens).

The planner cuts token ids to trim a long tool output (head and tail kept) and to
truncate the latest user message (`truncate_latest`). A character whose UTF-8 bytes span
several tokens (a flag emoji, a math letter) could be split by the cut, the strict decode
raised ValueError, and every context() of that conversation failed (an HTTP 500) until
the output left the tail.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import BudgetTooSmall
from tiermem.tiers.tokens import BpeTokenCounter

TEXTS = [
    "Paris 🇫🇷 " * 20,  # flags: two regional indicators, several tokens each
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 " * 20,  # mathematical letters outside the BMP
    "日本語のテキスト、絵文字👩‍👩‍👧も " * 10,  # CJK and a joined emoji sequence
    "plain ascii words only " * 10,  # control: every cut decodes already
]


@pytest.mark.parametrize("text", TEXTS, ids=["flags", "math letters", "cjk and zwj", "ascii"])
def test_every_prefix_and_suffix_decodes_to_a_piece_of_the_text(counter: BpeTokenCounter, text: str) -> None:
    ids = counter.encode(text)
    for k in range(len(ids) + 1):
        head, tail = counter.decode(ids[:k]), counter.decode(ids[k:])
        assert text.startswith(head) and text.endswith(tail)
        assert counter.count(head) <= k and counter.count(tail) <= len(ids) - k


def test_a_tool_output_with_flags_is_trimmed_not_fatal(tmp_path: Path, embedder: Embedder) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("t", {"role": "user", "content": "Look up the reviews please."})
        mem.append("t", {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "reviews", "arguments": "{}"}}]})
        mem.append("t", {"role": "tool", "tool_call_id": "call_1", "content": "a " + "Paris 🇫🇷 " * 400})
        mem.append("t", {"role": "user", "content": "Summarize them."})
        for budget in (500, 2000, 8000):
            ctx = mem.context("t", "Summarize them.", budget)
            assert ctx.tokens <= budget and "trimmed" in json.dumps(ctx.messages)


def test_a_latest_message_with_flags_truncates_at_every_budget(tmp_path: Path, embedder: Embedder) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("u", {"role": "user", "content": "Bonjour 🇫🇷 " * 300})
        for budget in range(20, 60):
            try:
                ctx = mem.context("u", None, budget, truncate_latest=True)
            except BudgetTooSmall:
                continue  # too small even for a cut message: the documented answer
            assert ctx.tokens <= budget
            assert ("Bonjour 🇫🇷 " * 300).startswith(ctx.messages[-1]["content"])
