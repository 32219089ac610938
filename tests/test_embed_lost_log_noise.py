"""A lost embedding model is logged once per episode, not at every context.

Each degraded `context()` logged a full traceback ("could not embed pending turns"):
an agent calling it every turn filled the log with the same stack. Now the traceback is
logged once, when the embedder turns degraded; while it stays so, one short line at most
every DEGRADED_LOG_INTERVAL_S; and an info line when it answers again. A real copy of
the bundled model under tmp_path, removed and put back; real SQLite.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from export_cache import copy_export_cache

import tiermem.memory
from tiermem import Config, Memory
from tiermem.tiers.embed import bundled_model_path

QUERY = "When does my flight to Lisbon leave?"
CALLS = 5  # degraded contexts within one interval


def test_a_degraded_episode_logs_one_traceback_then_short_lines(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    config = Config(data_dir=tmp_path / "data", embedding_model=model, embedding_runtime="onnx",
                    embedding_cache_dir=copy_export_cache(tmp_path))
    model.rename(tmp_path / "away")
    with Memory(config, hot=False, background_indexing=False) as mem:
        mem.append_many("c1", [{"role": "user", "content": "My flight to Lisbon leaves at 9:40."}])
        with caplog.at_level(logging.INFO, logger="tiermem"):
            for _ in range(CALLS):  # every one with a turn waiting for its vector
                assert mem.context("c1", query=QUERY).plan.tiers["embedder"] == "degraded"
            assert len([r for r in caplog.records if r.exc_info]) == 1  # before: one per call (and more)
            assert [r.levelno for r in caplog.records] == [logging.WARNING]

            caplog.clear()
            monkeypatch.setattr(tiermem.memory, "DEGRADED_LOG_INTERVAL_S", 0.0)  # the interval has passed
            mem.context("c1", query=QUERY)
            (line,) = caplog.records
            assert line.levelno == logging.WARNING and not line.exc_info and "still" in line.getMessage()

            caplog.clear()
            (tmp_path / "away").rename(model)
            assert "embedder" not in mem.context("c1", query=QUERY).plan.tiers
            (back,) = caplog.records
            assert back.levelno == logging.INFO and "again" in back.getMessage()
