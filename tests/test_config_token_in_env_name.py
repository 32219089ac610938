"""A bearer token given in an env variable's name (`TIERMEM_AUTH_TOKENS__<token>=acme`,
or in its section, `TIERMEM_SERVICE__AUTH_TOKENS__<token>`) is refused, naming the
setting and the JSON form, never the token: env names are read case-insensitively, so the
token was silently lower-cased, and a client sending it as the operator wrote it was
refused (401) with nothing saying why. The JSON form keeps the token as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Config
from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")
TOKEN = "MixedCaseTok3n"


# (the variable naming the token, what the error names it by)
@pytest.mark.parametrize(("name", "setting"), [
    (f"TIERMEM_AUTH_TOKENS__{TOKEN}", "auth_tokens.<token>"),               # flat
    (f"TIERMEM_SERVICE__AUTH_TOKENS__{TOKEN}", "service.auth_tokens.<token>"),  # in its section
])
def test_a_token_in_a_variable_name_is_refused_without_showing_it(tmp_path: Path, name: str, setting: str) -> None:
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config"], obj=CliState(), env={name: "acme"})
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert setting in res.stderr and "TIERMEM_AUTH_TOKENS" in res.stderr and "JSON" in res.stderr, res.stderr
    assert TOKEN.lower() not in res.output.lower()


def test_the_json_form_keeps_the_token_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_AUTH_TOKENS", json.dumps({TOKEN: "acme"}))
    assert Config(data_dir=tmp_path).auth_tokens == {TOKEN: "acme"}
