"""A table or list setting given by its flat env name must be JSON; text that is not is
refused as every other bad setting is: `invalid configuration: auth_tokens: must be JSON
(a table), e.g. TIERMEM_AUTH_TOKENS='{...}'`. Before, pydantic-settings' own words came
out (`error parsing value for field "auth_tokens" from source "EnvSettingsSource"`),
naming neither the variable nor what it must hold, from the CLI and from `Config()`.
Real Config, real CLI (click's runner, in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.config import ENV_JSON_EXAMPLES, Config

pytestmark = pytest.mark.usefixtures("clean_env")  # only the TIERMEM_* variables a case sets

SECRET = "abc-metrics-secret"  # a bearer token given as the bad text: never echoed

# (the variable, its text that is not JSON, the setting the error names, the shape it asks for)
CASES: list[tuple[str, str, str, str]] = [
    # a table of bearer token -> namespace, given as one bare word
    ("TIERMEM_AUTH_TOKENS", "nope", "auth_tokens", "a table"),
    # a list of hosts, given as one host
    ("TIERMEM_HTTP_ALLOWED_HOSTS", "example.com", "http_allowed_hosts", "a list"),
    # a list of tokens, given as the token itself
    ("TIERMEM_METRICS_TOKENS", SECRET, "metrics_tokens", "a list"),
    # a nested model, given as key=value
    ("TIERMEM_LAYER_SHARES", "tail=0.2", "layer_shares", "a table"),
    # JSON begun and never closed is not JSON either
    ("TIERMEM_SLICE_SHARES", '{"default": ', "slice_shares", "a table"),
    # the name in lower case is read too (env names are case-insensitive): named as set
    ("tiermem_pricing", "input_per_mtok=2.5", "pricing", "a table"),
]


@pytest.mark.parametrize(("variable", "text", "setting", "shape"), CASES)
def test_config_names_the_variable_and_asks_for_json(monkeypatch: pytest.MonkeyPatch, variable: str,
                                                      text: str, setting: str, shape: str) -> None:
    monkeypatch.setenv(variable, text)
    with pytest.raises(pydantic.ValidationError) as got:
        Config()
    said = str(got.value)
    assert f"\n{setting}\n" in said, said
    assert f"must be JSON ({shape}), e.g. {variable}='{ENV_JSON_EXAMPLES[setting]}'" in said, said
    assert "EnvSettingsSource" not in said and SECRET not in said, said


def _cli(tmp_path: Path, env: dict[str, str]) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "config"], obj=CliState(), env=env)
    return r.exit_code, r.stderr


@pytest.mark.parametrize(("variable", "text", "setting", "shape"), CASES)
def test_cli_refuses_it_as_other_config_errors(tmp_path: Path, variable: str, text: str, setting: str,
                                               shape: str) -> None:
    other_code, other = _cli(tmp_path, {"TIERMEM_RETRIEVAL_K": "garbage"})  # a bad scalar: the reference
    assert other.startswith("error: invalid configuration: retrieval_k: "), other
    code, err = _cli(tmp_path, {variable: text})
    assert code == other_code != 0, (code, other_code, err)
    assert err.startswith(f"error: invalid configuration: {setting}: must be JSON ({shape}), e.g. {variable}="), err
    assert len(err.strip().splitlines()) == 1 and SECRET not in err, err
    assert not (tmp_path / "data").exists()  # a refused config creates nothing


@pytest.mark.parametrize("setting", sorted(ENV_JSON_EXAMPLES))
def test_each_example_is_a_value_config_takes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                              setting: str) -> None:
    # the example the error shows works as given
    monkeypatch.setenv(f"TIERMEM_{setting.upper()}", ENV_JSON_EXAMPLES[setting])
    cfg = Config(data_dir=tmp_path)
    given = json.loads(ENV_JSON_EXAMPLES[setting])
    value = getattr(cfg, setting)
    if isinstance(given, list):
        assert value == given
    elif setting == "slice_shares":
        assert {k: v.model_dump() for k, v in value.items()}["default"]["retrieved"] == given["default"]["retrieved"]
    elif isinstance(value, dict):
        assert value == given
    else:
        assert {k: getattr(value, k) for k in given} == given
