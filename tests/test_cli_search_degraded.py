"""`tiermem search` says when its hits were ranked by keywords only.

With the embedding model lost, `Memory.search` ranks by BM25 alone and says so in
`SearchHits.degraded` (HTTP and MCP hand it on), but the CLI printed the hits as if
ranked by meaning too. Now a one-line note goes to stderr (stdout stays the hits, for
scripts) and `--json` gives each hit the search's `degraded` (null otherwise: the output
stays a list of hits). The note gives the reason in full (the error's message names the
model's path: the CLI's user is the operator), the JSON the error's type only, as the
library's `degraded` (test_cli_embed_degraded_one_line: the one line of a real process).
A real copy of the bundled model under tmp_path, its weights then cut off (a directory
gone at a CLI run's start is refused by the config, naming `embedding_model`:
test_config_embedding_model_refused.py); the real CLI through click's runner; real SQLite.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from export_cache import copy_export_cache

from tiermem.cli import cli
from tiermem.tiers.embed import bundled_model_path
from tiermem.tiers.redis_server import EmbeddedRedis

TURNS = [{"role": "user", "content": "My flight to Lisbon leaves at 9:40 from gate B12."},
         {"role": "user", "content": "The tomatoes need water."}]
QUERY = "flight to Lisbon"
NOTE = "keyword (BM25) ranking only"
UNREADABLE = "EmbeddingModelUnreadable"  # the load's error for weights it cannot parse
WEIGHTS = "model.safetensors"


def cut_off(model: Path) -> None:
    os.truncate(model / WEIGHTS, (model / WEIGHTS).stat().st_size // 2)


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the bundled model the CLI is configured with, and its conversation."""
    for key in list(os.environ):
        if key.startswith("TIERMEM_"):
            monkeypatch.delenv(key)
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    monkeypatch.setenv("TIERMEM_EMBEDDING_MODEL", str(model))
    monkeypatch.setenv("TIERMEM_EMBEDDING_RUNTIME", "onnx")
    monkeypatch.setenv("TIERMEM_EMBEDDING_CACHE_DIR", str(copy_export_cache(tmp_path)))
    appended = _cli(tmp_path, "append", "c1", input=json.dumps(TURNS))
    assert appended.exit_code == 0, appended.output
    yield model
    EmbeddedRedis(tmp_path / "data").stop()  # a no-op unless a command started it


def _cli(tmp_path: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), *args], input=input,
                              catch_exceptions=False)


@pytest.mark.parametrize("as_json", [
    False,  # the table
    True,  # --json
])
def test_search_says_when_it_ranked_by_keywords_only(tmp_path: Path, model: Path, as_json: bool) -> None:
    extra = ["--json"] if as_json else []
    healthy = _cli(tmp_path, "search", QUERY, "-c", "c1", *extra)
    assert healthy.exit_code == 0 and NOTE not in healthy.stderr
    if as_json:
        assert json.loads(healthy.stdout)[0]["degraded"] is None

    cut_off(model)  # a copy that stopped mid-file: the directory is there, the load fails
    r = _cli(tmp_path, "search", QUERY, "-c", "c1", *extra)
    assert r.exit_code == 0, r.output
    # before: nothing said anywhere
    note = [line for line in r.stderr.splitlines() if NOTE in line]
    assert len(note) == 1 and f"({UNREADABLE}: embedding model {model} cannot be loaded (" in note[0]
    if as_json:
        hits = json.loads(r.stdout)
        assert hits[0]["position"] == 0 and hits[0]["ranks"] == {"bm25": 1}
        # the library's `degraded`: the error's type only, the note's words before its reason
        (degraded,) = {h["degraded"] for h in hits}
        assert degraded.endswith(f"({UNREADABLE})") and str(model) not in r.stdout
        assert note[0].startswith("note: " + degraded.removesuffix(f"({UNREADABLE})"))
    else:
        assert "Lisbon" in r.stdout and NOTE not in r.stdout  # what a script reads stays the hits
