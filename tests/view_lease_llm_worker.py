"""A child process of tests/test_view_lease_llm.py: one refresher of a conversation's
rolling view on a shared SQLite file, with the LLM summarizer on the test's local
endpoint, as a second service worker or `consolidate --watch` would be.

    python view_lease_llm_worker.py DB LLM_URL CLAIM_TTL_S TIMEOUT_S CONV

CLAIM_TTL_S stands in for `VIEW_CLAIM_TTL_S` (600 s): the test cannot wait past the
real one, so it shortens the lease's slack and makes the endpoint answer slower than
that instead. Prints the version the refresh answered (0: none)."""

from __future__ import annotations

import sys
from pathlib import Path

from tiermem.consolidation import views
from tiermem.consolidation.summarize import LLMSummarizer
from tiermem.consolidation.views import ViewMaintainer
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.tokens import BpeTokenCounter
from tiermem.tiers.warm import WarmStore

TARGET_TOKENS = 120


def main(db: str, url: str, claim_ttl_s: str, timeout_s: str, conv: str) -> None:
    views.VIEW_CLAIM_TTL_S = float(claim_ttl_s)
    tokens = BpeTokenCounter()
    cold = ColdStore(Path(db), tokens=tokens)
    summarizer = LLMSummarizer(url, "m", api_key_env="", timeout_s=float(timeout_s), retries=0, tokens=tokens)
    m = ViewMaintainer(cold, WarmStore(cold), summarizer, tokens, target_tokens=TARGET_TOKENS,
                       max_turns_behind=1, max_seconds_behind=1.0, label_grace_s=0)
    view = m.refresh(conv, "rolling")
    print(view.version if view is not None else 0)
    cold.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
