"""What tests/test_vector_width_conflict.py and test_embedding_model_conflict.py share: the
store both processes open, the winner (a real child process, tests/width_child.py) and
the loser this test's Memory, open before the winner and still running after it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pg_server import fresh_schema
from width_child import SizedHashEmbedder, config

from tiermem import Config, Memory

TESTS = Path(__file__).parent
CHILD = TESTS / "width_child.py"
CHILD_TIMEOUT_S = 120
TEXTS = ["my sister adopted a beagle", "the report is due friday", "we met in lisbon"]


def store(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Config, list[str]]:
    """The store's config and the child's arguments after DATA_DIR and DIM[:MODEL]."""
    if engine == "postgres":
        url, schema = request.getfixturevalue("pg_url"), fresh_schema()
        return config(tmp_path / "data", url, schema), [url, schema]
    return config(tmp_path / "data", None, None), []


def winner(cfg: Config, spec: str, extra: list[str]) -> int:
    """The other process (`spec`: DIM[:MODEL]), opened now: how many turns it embedded."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(CHILD), str(cfg.data_dir), spec, *extra],
                          capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stdout.strip().splitlines()[-1])


@contextmanager
def loser_after_switch(cfg: Config, embedder: SizedHashEmbedder, spec: str, extra: list[str]) -> Iterator[Memory]:
    """The loser: TEXTS appended to "c" and embedded by `embedder`, then the winner
    (`spec`) opened, re-embedding every turn with its model."""
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as loser:
        loser.append_many("c", [{"role": "user", "content": t} for t in TEXTS])
        assert loser.catch_up("c") == len(TEXTS)
        assert winner(cfg, spec, extra) == len(TEXTS)  # every turn re-embedded by the winner's model
        yield loser
