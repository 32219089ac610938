"""`tiermem config --export`: the effective config written in sections loads back to the
identical Config (TOML and JSON), secrets left out unless asked for, the file private.
There was no export before (`--export` was a usage error)."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tiermem.cli import CliState, cli
from tiermem.config import Config

SECRET = "s3cret-token.value+x"  # not a TOML bare key: the writer must quote it
# a setting away from its default in every section, some only through env
SOURCE_TOML = f"""
hot_budget_tokens = 3000
[retrieval]
k = 7
[planner]
context_format = "chat"
[planner.slice_shares.new_subtask]
retrieved = 0.05
[warm]
max_seconds_behind = 120.5
[service]
host = "0.0.0.0"
metrics_tokens = ["{SECRET}"]
[service.auth_tokens]
"{SECRET}" = "team-a/user-1"
[pricing]
input_per_mtok = 1.25
"""
ENV = {"TIERMEM_EMBEDDING__BATCH_SIZE": "16", "TIERMEM_REDIS_URL": f"redis://u:{SECRET}@localhost:6390/0"}


pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


def export(tmp_path: Path, target: str, *extra: str) -> Result:
    src = tmp_path / "src.toml"
    src.write_text(SOURCE_TOML)
    return CliRunner().invoke(cli, ["--config", str(src), "--data-dir", str(tmp_path / "d"), "config", "--export",
                                    target, *extra], obj=CliState(), env=ENV, catch_exceptions=False)


def effective(tmp_path: Path) -> dict[str, Any]:
    src = tmp_path / "src.toml"
    src.write_text(SOURCE_TOML)
    old = {k: os.environ.get(k) for k in ENV}
    os.environ.update(ENV)
    try:
        return Config.load(src, data_dir=tmp_path / "d").model_dump(mode="json")
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# (file name: the format follows it)
@pytest.mark.parametrize("name", ["out.toml", "out.json"])
def test_export_loads_back_identical(name: str, tmp_path: Path) -> None:
    want = effective(tmp_path)
    target = tmp_path / name
    res = export(tmp_path, str(target), "--with-secrets")
    assert res.exit_code == 0, res.output
    # loaded with no env at all: every value is in the file
    assert Config.load(target).model_dump(mode="json") == want
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # it holds bearer tokens
    raw = json.loads(target.read_text()) if name.endswith(".json") else tomllib.loads(target.read_text())
    # written in sections, not flat
    assert raw["hot"]["budget_tokens"] == 3000 and raw["retrieval"]["k"] == 7
    assert raw["embedding"]["batch_size"] == 16 and "hot_budget_tokens" not in raw


def test_secrets_are_left_out_unless_asked(tmp_path: Path) -> None:
    want = effective(tmp_path)
    target = tmp_path / "out.toml"
    res = export(tmp_path, str(target))
    assert res.exit_code == 0, res.output
    text = target.read_text()
    assert SECRET not in text
    assert "left out" in res.stderr and "auth_tokens" in res.stderr and "redis_url" in res.stderr
    got = Config.load(target).model_dump(mode="json")
    for k in ("auth_tokens", "metrics_tokens", "redis_url"):
        assert got[k] != want[k]
        got.pop(k), want.pop(k)
    assert got == want  # everything else identical


def test_export_to_stdout_is_toml_in_sections(tmp_path: Path) -> None:
    res = export(tmp_path, "-")
    assert res.exit_code == 0, res.output
    data = tomllib.loads(res.stdout)
    assert data["planner"]["slice_shares"]["new_subtask"]["retrieved"] == 0.05
    assert data["pricing"]["input_per_mtok"] == 1.25 and data["warm"]["max_seconds_behind"] == 120.5
