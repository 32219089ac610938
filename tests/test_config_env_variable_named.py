"""A bad value from the environment is refused naming the variable that gave it as well as
the setting: `retrieval_k: Input should be a valid integer ... (from env
TIERMEM_RETRIEVAL_K)`. Before, the error named only the setting, and `tiermem tune` with a
bad TIERMEM_* value its grid does not override (or `config --check FILE`, or any command)
left the user to find which of the file, the environment or an option had given it.

A value a keyword argument (a `tune --grid` value, an --option) or nothing from env gave
is not said to be env's, and a table keyed by bearer tokens is named by its own variable,
never by a name that holds a token. Real Config, real CLI (click's runner, in process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.config import Config

pytestmark = pytest.mark.usefixtures("clean_env")  # only the TIERMEM_* variables a case sets

TOKEN = "s3cret-bearer-token"  # an auth_tokens key: the token itself, never in an error

# (the environment, keyword arguments, the setting as the error names it, the variable it names)
CASES: list[tuple[dict[str, str], dict[str, Any], str, str]] = [
    # the flat name: not a number
    ({"TIERMEM_RETRIEVAL_K": "garbage"}, {}, "retrieval_k", "TIERMEM_RETRIEVAL_K"),
    # the sectioned name, below the setting's least
    ({"TIERMEM_RETRIEVAL__K": "0"}, {}, "retrieval.k", "TIERMEM_RETRIEVAL__K"),
    # a nested leaf by its own variable
    ({"TIERMEM_LAYER_SHARES__TAIL": "x"}, {}, "layer_shares.tail", "TIERMEM_LAYER_SHARES__TAIL"),
    # the same leaf inside a table given as JSON: the table's variable
    ({"TIERMEM_LAYER_SHARES": '{"tail": "x"}'}, {}, "layer_shares.tail", "TIERMEM_LAYER_SHARES"),
    # a boolean's text
    ({"TIERMEM_SCHEDULER_ENABLED": "maybe"}, {}, "scheduler_enabled", "TIERMEM_SCHEDULER_ENABLED"),
    # a keyword argument wins over env's bad retrieval_k (no error); env's other bad value is named
    ({"TIERMEM_RETRIEVAL_K": "garbage", "TIERMEM_HOT__BUDGET_TOKENS": "x"}, {"retrieval_k": 3},
     "hot.budget_tokens", "TIERMEM_HOT__BUDGET_TOKENS"),
    # a bearer token's table: its own variable, the token left out
    ({"TIERMEM_AUTH_TOKENS": f'{{"{TOKEN}": 5}}'}, {}, "auth_tokens.<token>", "TIERMEM_AUTH_TOKENS"),
]


def _refused(**kwargs: Any) -> str:
    with pytest.raises(pydantic.ValidationError) as got:
        Config.load(None, **kwargs)
    return str(got.value)


@pytest.mark.parametrize(("env", "kwargs", "setting", "variable"), CASES)
def test_an_env_value_is_refused_naming_its_variable(monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                                                     kwargs: dict[str, Any], setting: str, variable: str) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    text = _refused(**kwargs)
    assert f"\n{setting}\n" in text and f"(from env {variable})" in text, text
    assert text.count("from env") == 1 and TOKEN not in text, text  # only the bad one, no token


def test_a_file_value_is_not_said_to_be_envs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text("[retrieval]\nk = 0\n")
    monkeypatch.setenv("TIERMEM_HOT__BUDGET_TOKENS", "3000")  # env gives another setting, a good one
    monkeypatch.setenv("TIERMEM_CONFIG", str(conf))
    text = _refused()
    assert "\nretrieval.k\n" in text and "from env" not in text, text


def _cli(tmp_path: Path, env: dict[str, str], *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), *args], obj=CliState(), env=env)
    return r.exit_code, r.stderr


def test_tune_names_the_variable_before_the_run(tmp_path: Path) -> None:
    # the grid sets another setting: the environment's bad retrieval_k is every candidate's
    out = tmp_path / "tune.json"
    code, err = _cli(tmp_path, {"TIERMEM_RETRIEVAL_K": "garbage"}, "tune", "--budgets", "1500",
                     "--grid", "planner.layer_shares.tail=0.1,0.2", "--json-out", str(out))
    assert code == 1, err
    assert "retrieval_k: " in err and "(from env TIERMEM_RETRIEVAL_K)" in err and "replay" not in err, err
    assert not out.exists() and not (tmp_path / "data").exists()  # refused before anything is written


def test_config_check_names_the_variable(tmp_path: Path) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text("[retrieval]\nk = 5\n")  # the file is fine; env's value wins over it
    code, err = _cli(tmp_path, {"TIERMEM_RETRIEVAL__K": "garbage"}, "config", "--check", str(conf))
    assert code == 1 and "retrieval.k: " in err and "(from env TIERMEM_RETRIEVAL__K)" in err, err


def test_a_bad_data_dir_names_its_variable_once(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    r = CliRunner().invoke(cli, ["stats"], obj=CliState(), env={"TIERMEM_STORAGE__DATA_DIR": str(a_file / "sub")})
    # the CLI says where data_dir came from at the end, as for a file or --data-dir: not twice
    assert r.exit_code == 1 and r.stderr.count("TIERMEM_STORAGE__DATA_DIR") == 1, r.stderr
    assert "(data_dir from env TIERMEM_STORAGE__DATA_DIR)" in r.stderr, r.stderr
