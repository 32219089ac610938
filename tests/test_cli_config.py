"""`tiermem config`: the effective config, each value's source, secrets redacted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.config import REDACTED, explain_sources

SECRET = "s3cret-token-value"


pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


def rows(args: list[str], env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    res = CliRunner().invoke(cli, [*args, "config", "--json"], obj=CliState(), env=env, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return {r["key"]: r for r in json.loads(res.stdout)}


def test_sources_of_each_kind(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text("hot_budget_tokens = 1234\n[slice_shares.new_subtask]\nretrieved = 0.03\n")
    got = rows(["--config", str(f), "--data-dir", str(tmp_path / "d")],
               env={"TIERMEM_SLICE_SHARES__DEFAULT__RETRIEVED": "0.05"})
    # (key, value, source): one of each source kind
    table = [
        ("data_dir", str(tmp_path / "d"), "--data-dir"),
        ("hot_budget_tokens", 1234, f"file {f}"),
        ("slice_shares.new_subtask.retrieved", 0.03, f"file {f}"),
        ("slice_shares.default.retrieved", 0.05, "env TIERMEM_SLICE_SHARES__DEFAULT__RETRIEVED"),
        ("retrieval_k", 20, "default"),
        ("pricing.cached_input_ratio", 0.1, "default"),
    ]
    for key, value, source in table:
        assert (got[key]["value"], got[key]["source"]) == (value, source), key


def test_data_dir_from_its_env_var_is_named(tmp_path: Path) -> None:
    got = rows([], env={"TIERMEM_DATA_DIR": str(tmp_path / "e")})
    assert got["data_dir"]["source"] == "env TIERMEM_DATA_DIR"


def test_secrets_are_redacted(tmp_path: Path) -> None:
    env = {
        "TIERMEM_AUTH_TOKENS": json.dumps({SECRET: "team-a"}),
        "TIERMEM_METRICS_TOKENS": json.dumps([SECRET]),
        "TIERMEM_REDIS_URL": f"redis://user:{SECRET}@localhost:6379/0",
    }
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config", "--json"], obj=CliState(), env=env)
    assert res.exit_code == 0, res.output
    assert SECRET not in res.stdout
    got = {r["key"]: r for r in json.loads(res.stdout)}
    assert got["auth_tokens"]["value"] == {f"{REDACTED}#1": "team-a"}  # the namespace stays visible
    assert got["metrics_tokens"]["value"] == [REDACTED]
    assert got["redis_url"]["value"] == f"redis://user:{REDACTED}@localhost:6379/0"
    table = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config"], obj=CliState(), env=env)
    assert table.exit_code == 0 and SECRET not in table.stdout and "auth_tokens" in table.stdout


def test_keyword_arguments_are_labelled(tmp_path: Path) -> None:
    got = {r["key"]: r for r in explain_sources(data_dir=tmp_path, retrieval_k=5)}
    assert (got["retrieval_k"]["value"], got["retrieval_k"]["source"]) == (5, "argument")


# (file content, what the one-line error names)
@pytest.mark.parametrize(("content", "named"), [
    ("retrieval_k = 0\n", "retrieval_k"),                                   # below its minimum
    ("no_such_field = 1\n", "no_such_field"),                               # an unknown field
    ("[slice_shares.new_subtask]\nretreived = 0.2\n", "slice_shares.new_subtask.retreived"),  # a typo, nested
    ("retrieval_k = = 3\n", "is not valid TOML"),                           # not TOML at all
])
def test_check_names_the_bad_field(content: str, named: str, tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(content)
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config", "--check", str(f)], obj=CliState())
    assert res.exit_code == 1 and named in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.output


def test_check_a_good_file_shows_its_values(tmp_path: Path) -> None:
    f = tmp_path / "good.toml"
    f.write_text("retrieval_k = 7\n")
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config", "--check", str(f), "--json"],
                             obj=CliState())
    assert res.exit_code == 0, res.output
    by_key = {r["key"]: r for r in json.loads(res.stdout)}
    assert (by_key["retrieval_k"]["value"], by_key["retrieval_k"]["source"]) == (7, f"file {f}")
