"""`embedding_runtime = "torch"` is reported as "torch".

`tiermem model`, `tiermem index`, `Memory.stats()` and `Memory.warm_up()` name the
runtime by the embedder's `active_runtime`, which only the ONNX embedder had: with the
torch pipeline configured they all said "external" (the word for an embedder the caller
brought), so `tiermem model` printed `runtime=external` for the runtime it had just
loaded.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tiermem import Config, Memory
from tiermem.cli import cli
from tiermem.tiers.embed import SentenceTransformerEmbedder


def test_tiermem_model_names_the_torch_runtime(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "model", "--json"],
                                env={"TIERMEM_EMBEDDING_RUNTIME": "torch"})
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["runtime"] == "torch" and report["dim"] == 384


def test_stats_and_warm_up_name_the_torch_runtime(tmp_path: Path,
                                                   reference_embedder: SentenceTransformerEmbedder) -> None:
    emb = SentenceTransformerEmbedder()
    assert emb.active_runtime == "unloaded"  # constructing loads nothing
    with Memory(Config(data_dir=tmp_path / "data"), embedder=reference_embedder, hot=False,
                background_indexing=False) as mem:
        assert mem.warm_up() == "torch"
        embedder = mem.stats()["embedder"]
        assert (embedder["loaded"], embedder["runtime"], embedder["state"]) == (True, "torch", "ok")
