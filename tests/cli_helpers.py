"""The `tiermem` CLI run in-process on a test's data dir, with an optional config file."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from tiermem.cli import CliState, cli
from tiermem.tiers.embed_onnx import FastEmbedder


def tm(tmp_path: Path, embedder: FastEmbedder, toml: str, *args: str) -> Result:
    """`tiermem --data-dir tmp_path/data [--config tmp_path/c.toml] ARGS` (the config
    holding `toml`, when given) on the session's embedder."""
    pre = []
    if toml:
        (tmp_path / "c.toml").write_text(toml)
        pre = ["--config", str(tmp_path / "c.toml")]
    return CliRunner().invoke(cli, [*pre, "--data-dir", str(tmp_path / "data"), *args],
                              obj=CliState(embedder=embedder))
