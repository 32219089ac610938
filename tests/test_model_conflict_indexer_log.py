"""The losing process's background indexer (another live process opened the store with
another `embedding_model`: tests/test_embedding_model_conflict.py) logs the conflict once,
at WARNING, naming `embedding_model` and both models, and again only when the conflict
changes (another winner's model), not at every wake. Before, each wake (every
INDEXER_WAKE_S idle, and at every append) logged "background embedding failed" at ERROR
with a traceback: a losing process left running filled its log.

The winners are real child processes (tests/width_child.py); the loser this test's Memory,
its real indexer thread, on SQLite."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from width_child import NamedHashEmbedder, config
from width_conflict_helpers import TEXTS, winner

from tiermem import Memory
from tiermem import memory as memory_module

DIM = 384  # the models' width (MiniLM's)
LOSER_MODEL = "a1" * 32  # the process open first
WINNER_MODEL = "b2" * 32  # the process opened after it
THIRD_MODEL = "c3" * 32  # a third, opened after the second: the conflict changes
WAKE_S = 0.05  # the indexer's idle wake, shortened so that a second covers many wakes
WAKES_S = 1.5  # seconds of wakes watched after each switch's first record (about 30 wakes)
FIRST_WITHIN_S = 60.0  # the most a loaded runner's indexer takes to wake and fail once after an append
MEMORY_LOG = "tiermem"  # memory.py's logger


def _conflict_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    # whatever the indexer logged of a failed catch-up (the conflict's, or the generic line)
    return [r for r in caplog.records if r.name == MEMORY_LOG and (
        "embedding_model" in r.getMessage() or "background embedding failed" in r.getMessage())]


def _after_the_first(caplog: pytest.LogCaptureFixture, seen: int) -> list[logging.LogRecord]:
    """The conflict records past the `seen` first ones, once a new one has come (at most
    FIRST_WITHIN_S) and WAKES_S more of the indexer's wakes have passed: the wakes that
    must not log it again are watched after it, however late a busy runner's first wake."""
    deadline = time.monotonic() + FIRST_WITHIN_S
    while len(_conflict_records(caplog)) <= seen and time.monotonic() < deadline:
        time.sleep(WAKE_S)
    time.sleep(WAKES_S)
    return _conflict_records(caplog)[seen:]


def test_the_losers_indexer_logs_each_conflict_once(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_module, "INDEXER_WAKE_S", WAKE_S)
    caplog.set_level(logging.INFO, logger=MEMORY_LOG)
    cfg = config(tmp_path / "data", None, None)
    with Memory(cfg, embedder=NamedHashEmbedder(DIM, LOSER_MODEL), hot=False, background_indexing=True) as loser:
        loser.append_many("c", [{"role": "user", "content": t} for t in TEXTS])
        loser.catch_up("c")  # embedded by its model (the indexer may have done it first)
        assert winner(cfg, f"{DIM}:{WINNER_MODEL}", []) == len(TEXTS)  # every turn re-embedded by it
        loser.append("c", {"role": "user", "content": "a turn the loser appends"})  # pending: its catch-up fails
        first = _after_the_first(caplog, 0)
        # one record for the conflict, a warning that names the setting and both models
        assert len(first) == 1, [r.getMessage()[:80] for r in first]
        assert first[0].levelno == logging.WARNING
        assert "embedding_model" in first[0].getMessage()
        assert LOSER_MODEL in first[0].getMessage() and WINNER_MODEL in first[0].getMessage()
        # another process with a third model: the conflict changed, logged once more
        assert winner(cfg, f"{DIM}:{THIRD_MODEL}", []) >= len(TEXTS)
        loser.append("c", {"role": "user", "content": "another turn the loser appends"})
        second = _after_the_first(caplog, len(first))
        assert len(second) == 1, [r.getMessage()[:80] for r in second]
        assert second[0].levelno == logging.WARNING and THIRD_MODEL in second[0].getMessage()
