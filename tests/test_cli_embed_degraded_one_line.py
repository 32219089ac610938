"""`tiermem search` and `tiermem context` with the embedding model lost say so in one
line on stderr, its reason in full; the traceback comes with `--debug`.

The library logs a degraded embedder's episode once in full (a traceback), which a
long-lived process does once; but each CLI run is a new process, so every `tiermem
search` or `context` printed the traceback, with the default runtime (`auto`) a warning
that it was "using sentence-transformers" (which failed too), and for `search` the note
besides. Now a run without --debug prints one line, `note: keyword (BM25) ranking only,
... (EmbeddingModelUnreadable: embedding model ... cannot be loaded (...))`.

Real processes (`python -m tiermem.cli`), since a run's logging is set up per process
(under pytest's own log handlers, click's runner would see none of it); a real copy of
the bundled model under tmp_path, its weights then cut off (a directory gone at a run's
start is refused by the config, naming `embedding_model`:
test_config_embedding_model_refused.py); real SQLite; `context` starts the embedded
Redis, stopped after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from export_cache import copy_export_cache

from tiermem import Config, Memory
from tiermem.tiers.embed import bundled_model_path
from tiermem.tiers.redis_server import EmbeddedRedis

TURNS = [{"role": "user", "content": "My flight to Lisbon leaves at 9:40 from gate B12."},
         {"role": "user", "content": "The tomatoes need water."}]
QUERY = "flight to Lisbon"
NOTE = "note: keyword (BM25) ranking only, no query vector: the embedding model cannot be used"
RUN_TIMEOUT_S = 120  # a cold start of the CLI on a loaded 2-core machine takes ~10 s


def _tiermem(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tiermem.cli", *args], capture_output=True, text=True, env=env,
                          timeout=RUN_TIMEOUT_S)


@pytest.fixture
def lost(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    """The CLI's environment on a data dir holding TURNS, its model copy's weights then cut off."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    cache = copy_export_cache(tmp_path)
    env |= {"TIERMEM_DATA_DIR": str(tmp_path / "data"), "TIERMEM_EMBEDDING_MODEL": str(model),
            "TIERMEM_EMBEDDING_CACHE_DIR": str(cache)}
    # stored by the library (an append loads no model): one CLI start less per case
    with Memory(Config(data_dir=tmp_path / "data", embedding_model=model, embedding_cache_dir=cache), hot=False,
                background_indexing=False) as mem:
        mem.append_many("c1", TURNS)
    weights = model / "model.safetensors"
    os.truncate(weights, weights.stat().st_size // 2)  # a copy that stopped mid-file: the load fails
    yield env, model
    EmbeddedRedis(tmp_path / "data").stop()  # a no-op unless a command started it


@pytest.mark.parametrize("command", [
    ["search", QUERY, "-c", "c1"],  # before: a warning, the fallback's warning, a traceback, then the note
    ["context", "c1", "-q", QUERY],  # before: a warning, the fallback's warning and a traceback, no note
])
def test_a_run_says_the_degradation_in_one_line(lost: tuple[dict[str, str], Path], command: list[str]) -> None:
    env, model = lost
    r = _tiermem(env, *command)
    assert r.returncode == 0, r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith(NOTE)
    # the reason in full: the CLI's user is the operator, on the machine that holds the model
    assert f"(EmbeddingModelUnreadable: embedding model {model} cannot be loaded (" in line and line.endswith("))")
    assert "Lisbon" in r.stdout


def test_debug_shows_the_traceback_too(lost: tuple[dict[str, str], Path]) -> None:
    env, _model = lost
    r = _tiermem(env, "--debug", "search", QUERY, "-c", "c1")
    assert r.returncode == 0, r.stderr
    assert "Traceback (most recent call last)" in r.stderr and "the embedding model is unavailable" in r.stderr
    assert len([line for line in r.stderr.splitlines() if line.startswith(NOTE)]) == 1
