"""Command-line values the README calls usage errors are exit 2, before any work, and
an error names the CLI's option, not the library's keyword.

Before: `tune --budgets abc|0` and `--grid foo` were exit 1 after "tuning on the bundled
demo ..."; a well-formed `--grid` the Config refuses (`retrieval_kk=1,2`, `retrieval.k=-3`)
was exit 1 without naming `--grid`, a misspelt name without a "did you mean"; `serve --no-auth --host 0.0.0.0` was exit 1; `append --role tool` was offered
but always refused (exit 1: tool_call_id required) for want of a way to give the id;
`context -b 1` advised "pass truncate_latest=True"."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import tm
from click.testing import CliRunner

from tiermem import Config, Memory
from tiermem.cli import cli
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")


# (the arguments after --data-dir, what the usage error names)
USAGE_CASES = [
    (["tune", "--budgets", "abc"], "'abc' is not a comma-separated list of integers"),  # exit 1 after the run began
    (["tune", "--budgets", "0"], "give at least one positive number of tokens"),  # likewise
    (["tune", "--grid", "foo"], "'foo' is not KEY=V1,V2,..."),  # likewise
    # a well-formed spec the Config refuses: exit 1, "invalid configuration", no --grid, before
    (["tune", "--grid", "retrieval_kk=1,2"],
     "'--grid': retrieval_kk: no such setting (did you mean 'retrieval_k'?)"),  # a flat name misspelt
    (["tune", "--grid", "retrieval.kk=1,2"],
     "'--grid': retrieval.kk: no such setting in [retrieval]"),  # a section's key misspelt
    (["tune", "--grid", "layer_shares.tial=0.1"],
     "layer_shares.tial: no such setting (did you mean 'layer_shares.tail'?)"),  # a table's key misspelt
    (["tune", "--grid", "retrieval.k=abc"], "'--grid': retrieval.k: Input should be a valid integer"),  # no number
    (["tune", "--grid", "retrieval.k=-3"],
     "'--grid': retrieval.k: Input should be greater than or equal to 1"),  # below the limit, which is named
    (["tune", "--grid", "retrieval_k=1,2,3,4,5,6,7,8,9", "--grid", "rrf_k=1,2,3,4,5,6,7,8"],
     "'--grid': 72 candidates exceed the limit of 64"),  # too many combinations
    (["serve", "--no-auth", "--host", "0.0.0.0"], "--host '0.0.0.0' is not one"),  # exit 1
    (["append", "c1", "--role", "tool", "--content", "r"], "--role tool needs --tool-call-id"),  # exit 1 always
    (["append", "c1", "--role", "user", "--content", "r", "--tool-call-id", "call_1"],
     "--tool-call-id goes with --role tool"),  # an id a user message cannot carry
]


@pytest.mark.parametrize(("args", "said"), USAGE_CASES, ids=[" ".join(a[:3]) for a, _ in USAGE_CASES])
def test_usage_error_before_any_work(tmp_path: Path, args: list[str], said: str) -> None:
    data = tmp_path / "data"
    r = CliRunner().invoke(cli, ["--data-dir", str(data), *args])
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert said in r.output, r.output
    assert "tuning on the bundled demo" not in r.output  # refused before the run began
    assert not data.exists()  # nothing was opened or created


# (the environment, the config file's text, the --grid spec, what the error names) -- the base
# config's own fault is no --grid usage error: exit 1 "invalid configuration", as before
BASE_AT_FAULT = [
    ({"TIERMEM_RRF_K": "abc"}, None, "retrieval_k=1,2", "rrf_k: Input should be a valid integer"),  # env's
    ({}, "retrieval_k = 0\n", "rrf_k=5", "retrieval_k: Input should be greater than or equal to 1"),  # the file's
]


@pytest.mark.parametrize(("env", "text", "spec", "said"), BASE_AT_FAULT)
def test_a_bad_base_config_is_no_grid_error(tmp_path: Path, env: dict[str, str], text: str | None, spec: str,
                                            said: str) -> None:
    base: list[str] = []
    if text is not None:
        (tmp_path / "base.toml").write_text(text)
        base = ["--config", str(tmp_path / "base.toml")]
    data = tmp_path / "data"
    r = CliRunner().invoke(cli, ["--data-dir", str(data), "tune", *base, "--grid", spec], env=env)
    assert r.exit_code == 1, (r.exit_code, r.output)
    assert f"invalid configuration: {said}" in r.output and "--grid" not in r.output, r.output
    assert not data.exists()


def test_append_tool_result(tmp_path: Path) -> None:
    """`--role tool --tool-call-id ID` stores a tool result answering that call."""
    data = tmp_path / "data"
    r = CliRunner().invoke(cli, ["--data-dir", str(data), "append", "c1", "--role", "tool", "--content", "42",
                                 "--tool-call-id", "call_7"])
    assert r.exit_code == 0, r.output
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        stored = mem.history("c1")
    assert [(m.role, m.body["content"], m.body["tool_call_id"]) for m in stored] == [("tool", "42", "call_7")]


def test_context_budget_names_the_option(tmp_path: Path, embedder: FastEmbedder) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), hot=False, background_indexing=False) as mem:
        mem.append("c1", {"role": "user", "content": "which flights did I rule out?"})
    try:
        r = tm(tmp_path, embedder, "", "context", "c1", "-b", "1")
    finally:
        tm(tmp_path, embedder, "", "stop-redis")
    assert r.exit_code == 1, r.output
    # a budget of 1 holds not even a truncated message: the budget it needs, in the
    # command's words (test_budget_truncation_advice: no advice that cannot work)
    assert "raise the budget to at least" in r.output and "--truncate-latest cannot help" in r.output, r.output
    assert "truncate_latest=True" not in r.output
