"""Every table or list setting, by every env spelling, refuses a value that is not one with
the same words, naming the variable as the user set it: `invalid configuration:
service.allowed_hosts: must be JSON (a list), e.g.
TIERMEM_SERVICE__ALLOWED_HOSTS='["example.com"]'; its text is not JSON`.

Before, only the flat names pydantic-settings decodes itself had that hint (cbfa57b):
the sectioned spellings (`TIERMEM_SERVICE__AUTH_TOKENS=nope`), a table within a setting
(`TIERMEM_PLANNER__SLICE_SHARES__DEFAULT=nope`), the flat `TIERMEM_HTTP_FORWARDED_ALLOW_IPS`
(optional, so pydantic-settings passed its text on) and JSON of the wrong shape
(`TIERMEM_AUTH_TOKENS='["a"]'`) got pydantic's "Input should be a valid list/dictionary",
and a lower-case `tiermem_service__allowed_hosts` was named upper-case. Real Config, real
CLI (click's runner, in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest
from click.testing import CliRunner

from tiermem import config_sections
from tiermem.cli import CliState, cli
from tiermem.config import ENV_JSON_EXAMPLES, Config

pytestmark = pytest.mark.usefixtures("clean_env")  # only the TIERMEM_* variables a case sets

SECRET = "abc-metrics-secret"  # a bearer token given as the bad text: never echoed
NOT_JSON = "its text is not JSON"

# (the variable as set, its text, the setting as the error names it, the hint after it)
CASES: list[tuple[str, str, str, str]] = [
    # the sectioned name of the bearer-token table, one bare word
    ("TIERMEM_SERVICE__AUTH_TOKENS", "nope", "service.auth_tokens",
     f"""must be JSON (a table), e.g. TIERMEM_SERVICE__AUTH_TOKENS='{{"<token>": "<namespace>"}}'; {NOT_JSON}"""),
    # the sectioned name of the metrics tokens, given as the token itself (never echoed)
    ("TIERMEM_SERVICE__METRICS_TOKENS", SECRET, "service.metrics_tokens",
     f"""must be JSON (a list), e.g. TIERMEM_SERVICE__METRICS_TOKENS='["<token>"]'; {NOT_JSON}"""),
    # the sectioned name of the allowed hosts, given as one host
    ("TIERMEM_SERVICE__ALLOWED_HOSTS", "example.com", "service.allowed_hosts",
     f"""must be JSON (a list), e.g. TIERMEM_SERVICE__ALLOWED_HOSTS='["example.com"]'; {NOT_JSON}"""),
    # the flat name of an optional list: pydantic-settings passed the text on, never said JSON
    ("TIERMEM_HTTP_FORWARDED_ALLOW_IPS", "10.0.0.1", "http_forwarded_allow_ips",
     f"""must be JSON (a list), e.g. TIERMEM_HTTP_FORWARDED_ALLOW_IPS='["10.0.0.0/8"]'; {NOT_JSON}"""),
    # ... and its sectioned name
    ("TIERMEM_SERVICE__FORWARDED_ALLOW_IPS", "10.0.0.1", "service.forwarded_allow_ips",
     f"""must be JSON (a list), e.g. TIERMEM_SERVICE__FORWARDED_ALLOW_IPS='["10.0.0.0/8"]'; {NOT_JSON}"""),
    # the sectioned name of a nested model, given as key=value
    ("TIERMEM_PLANNER__LAYER_SHARES", "tail=0.2", "planner.layer_shares",
     f"""must be JSON (a table), e.g. TIERMEM_PLANNER__LAYER_SHARES='{{"tail": 0.2}}'; {NOT_JSON}"""),
    # the sectioned name of the per-class table, JSON begun and never closed
    ("TIERMEM_PLANNER__SLICE_SHARES", "{", "planner.slice_shares",
     f"""must be JSON (a table), e.g. TIERMEM_PLANNER__SLICE_SHARES='{{"default": {{"retrieved": 0.25}}}}'; """
     f"{NOT_JSON}"),
    # one class's table by its own name: the example is that class's part of the setting's
    ("TIERMEM_PLANNER__SLICE_SHARES__DEFAULT", "nope", "planner.slice_shares.default",
     f"""must be JSON (a table), e.g. TIERMEM_PLANNER__SLICE_SHARES__DEFAULT='{{"retrieved": 0.25}}'; {NOT_JSON}"""),
    # the other narrow class by its flat name takes the same keys: the same example
    ("TIERMEM_SLICE_SHARES__NEW_SUBTASK", "0.3", "slice_shares.new_subtask",
     """must be JSON (a table), e.g. TIERMEM_SLICE_SHARES__NEW_SUBTASK='{"retrieved": 0.25}'; its JSON is a number"""),
    # a lower-case name is read (env names are case-insensitive): named as it was set
    ("tiermem_service__allowed_hosts", "nope", "service.allowed_hosts",
     f"""must be JSON (a list), e.g. tiermem_service__allowed_hosts='["example.com"]'; {NOT_JSON}"""),
    # JSON, but a list where a table belongs: the same hint, saying what it got
    ("TIERMEM_AUTH_TOKENS", '["a"]', "auth_tokens",
     """must be JSON (a table), e.g. TIERMEM_AUTH_TOKENS='{"<token>": "<namespace>"}'; its JSON is a list"""),
    # JSON, but a table where a list belongs, keyed by a token: the token not echoed
    ("TIERMEM_METRICS_TOKENS", json.dumps({SECRET: 1}), "metrics_tokens",
     """must be JSON (a list), e.g. TIERMEM_METRICS_TOKENS='["<token>"]'; its JSON is a table"""),
]


def _refused() -> str:
    with pytest.raises(pydantic.ValidationError) as got:
        Config()
    return str(got.value)


@pytest.mark.parametrize(("variable", "text", "setting", "hint"), CASES)
def test_config_gives_the_json_hint(monkeypatch: pytest.MonkeyPatch, variable: str, text: str, setting: str,
                                    hint: str) -> None:
    monkeypatch.setenv(variable, text)
    said = _refused()
    assert f"\n{setting}\n  {hint} [type=env_not_json" in said, said
    assert "Input should be" not in said and "from env" not in said and SECRET not in said, said


def _cli(tmp_path: Path, env: dict[str, str]) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "config"], obj=CliState(), env=env)
    return r.exit_code, r.stderr


@pytest.mark.parametrize(("variable", "text", "setting", "hint"), CASES)
def test_cli_refuses_it_as_other_config_errors(tmp_path: Path, variable: str, text: str, setting: str,
                                               hint: str) -> None:
    other_code, other = _cli(tmp_path, {"TIERMEM_RETRIEVAL_K": "garbage"})  # a bad scalar: the reference
    assert other.startswith("error: invalid configuration: retrieval_k: "), other
    code, err = _cli(tmp_path, {variable: text})
    assert code == other_code == 1, (code, other_code, err)
    assert err == f"error: invalid configuration: {setting}: {hint}\n", err  # one line, no token
    assert not (tmp_path / "data").exists()  # a refused config creates nothing


# every table or list setting by each of its names: one wording, only the names differ
SPELLINGS = [(name, setting) for setting in sorted(ENV_JSON_EXAMPLES)
             for name in config_sections.env_names((setting,))]


@pytest.mark.parametrize(("variable", "setting"), SPELLINGS)
def test_every_spelling_says_the_same(monkeypatch: pytest.MonkeyPatch, variable: str, setting: str) -> None:
    monkeypatch.setenv(variable, "nope")
    said = _refused()
    shape = "a list" if ENV_JSON_EXAMPLES[setting].startswith("[") else "a table"
    named = variable.removeprefix("TIERMEM_").lower().replace("__", ".")
    expected = f"must be JSON ({shape}), e.g. {variable}='{ENV_JSON_EXAMPLES[setting]}'; {NOT_JSON}"
    assert f"\n{named}\n  {expected} [type=env_not_json" in said, said


@pytest.mark.parametrize("variable", ["TIERMEM_PLANNER__SLICE_SHARES__DEFAULT", "TIERMEM_SLICE_SHARES__NEW_SUBTASK"])
def test_a_class_tables_example_is_taken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str) -> None:
    # the example a class's table shows (CASES) works as given
    monkeypatch.setenv(variable, '{"retrieved": 0.25}')
    assert Config(data_dir=tmp_path).slice_shares[variable.rsplit("__", 1)[1].lower()].retrieved == 0.25


# (the variable as set, its bad text, the setting the error names): any bad value's
# "(from env ...)" names the variable as set, not upper-cased
AS_SET: list[tuple[str, str, str]] = [
    # a sectioned scalar in lower case
    ("tiermem_retrieval__k", "0", "retrieval.k"),
    # a flat one in mixed case
    ("Tiermem_Retrieval_K", "garbage", "retrieval_k"),
]


@pytest.mark.parametrize(("variable", "text", "setting"), AS_SET)
def test_any_env_error_names_the_variable_as_set(monkeypatch: pytest.MonkeyPatch, variable: str, text: str,
                                                 setting: str) -> None:
    monkeypatch.setenv(variable, text)
    said = _refused()
    assert f"\n{setting}\n" in said and f"(from env {variable})" in said, said
