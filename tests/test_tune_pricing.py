"""`tiermem tune` bills each candidate under its own `pricing` (Config.pricing): the
cached-input ratio prices the cached prefix of tiermem's contexts and of full context's
alike, and the input price gives the bill in USD. The cost model had OpenAI's default
prices fixed, so a grid over `pricing.cached_input_ratio` billed every candidate the same."""

from __future__ import annotations

from pathlib import Path

import pytest
from convo_fixtures import write_jsonl
from unrelated_turns import FILLERS

from tiermem.config import Config
from tiermem.evals.conversations import read_conversations
from tiermem.evals.tune import candidates, parse_grid, run_candidate
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

BUDGET = 4000  # holds the whole conversation: the contexts grow by appends and cache well
TURNS = 16  # of about 90 tokens: the last contexts pass the 1,024-token minimum cached prefix
FILLERS_PER_TURN = 10
USD_PER_MTOK = 2.0  # the base config's input price
FREE, FULL_PRICE = 0.0, 1.0  # cached input at no cost / at the full input price


def test_each_candidate_is_billed_at_its_own_pricing(tmp_path: Path, shared_vectors: FastEmbedder) -> None:
    embedder = shared_vectors  # both candidates replay the same turns: embedded once (conftest.shared_vectors)
    data = write_jsonl(tmp_path / "chat.jsonl", [
        {"conversation_id": "c", "role": "user" if i % 2 == 0 else "assistant",
         "content": f"Note {i}: " + " ".join(FILLERS[(i + k) % len(FILLERS)] for k in range(FILLERS_PER_TURN))}
        for i in range(TURNS)])
    base = tmp_path / "base.toml"
    base.write_text(f"[pricing]\ninput_per_mtok = {USD_PER_MTOK}\n")
    cfg = Config.load(None)
    dataset = read_conversations(data, max_content_bytes=cfg.max_content_bytes,
                                 max_metadata_bytes=cfg.max_metadata_bytes)
    # the candidates as `tiermem tune --config base.toml --grid ...` makes them; the hot
    # tier off, to start no Redis (this is about the prices, both candidates see the same)
    cands = candidates(base, parse_grid([f"pricing.cached_input_ratio={FREE},{FULL_PRICE}"]))
    free, full_price = (run_candidate(c, dataset, [BUDGET], embedder=embedder, hot=False) for c in cands)
    assert free["values"] == {"pricing.cached_input_ratio": FREE}
    a, b = free["budgets"][str(BUDGET)], full_price["budgets"][str(BUDGET)]
    assert a["total_tokens"] == b["total_tokens"]  # the same contexts, priced differently
    # cached input at the full price: the bill is every input token, for both methods
    assert b["total_billed"] == b["total_tokens"]
    assert full_price["full_context"]["total_billed"] == full_price["full_context"]["total_tokens"]
    # free cached input: the cached prefixes cost nothing
    assert a["total_billed"] < a["total_tokens"]
    assert free["full_context"]["total_billed"] < free["full_context"]["total_tokens"]
    assert free["full_context"]["total_tokens"] == full_price["full_context"]["total_tokens"]
    for c in (free, full_price):
        got = c["budgets"][str(BUDGET)]
        assert got["total_billed_usd"] == pytest.approx(got["total_billed"] * USD_PER_MTOK / 1e6)
        assert c["full_context"]["total_billed_usd"] == pytest.approx(
            c["full_context"]["total_billed"] * USD_PER_MTOK / 1e6)
        assert got["billed_vs_full"] == round(got["total_billed"] / c["full_context"]["total_billed"], 4)
