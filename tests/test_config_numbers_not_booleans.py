"""A number setting refuses a boolean, naming the setting, from every source. pydantic's lax
mode read `http_port = true` in a config file (or `Config(http_port=True)`) as the number 1,
and `eviction_bias = true` as 1.0: the service then tried to listen on port 1, the planner
evicted the oldest turn first, and nothing said why. A float with a fraction is refused
where an integer is meant; a number written as text (every env variable) still parses.

On the code before, every boolean case here was accepted (the fraction and text cases pass
there too: they pin what must not change)."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pydantic
import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli
from tiermem.config import Config, LayerShares, Pricing, SliceShares

pytestmark = pytest.mark.usefixtures("clean_env")


def _numeric(model: type[pydantic.BaseModel]) -> list[str]:
    out = []
    for name, f in model.model_fields.items():
        kinds = [a for a in typing.get_args(f.annotation) if a is not type(None)] or [f.annotation]
        if all(k in (int, float) for k in kinds):
            out.append(name)
    return out


NUMERIC = _numeric(Config)


def test_every_numeric_setting_is_covered() -> None:
    # the table below is built from the model: a new number setting is checked without an edit
    assert {"http_port", "hot_budget_tokens", "eviction_bias", "llm_timeout_s"} <= set(NUMERIC)


@pytest.mark.parametrize("value", [True, False])
@pytest.mark.parametrize("name", NUMERIC)
def test_a_boolean_for_any_number_setting_is_refused(tmp_path: Path, name: str, value: bool) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        Config(data_dir=tmp_path, **{name: value})
    assert [e["loc"] for e in info.value.errors()] == [(name,)]
    assert "boolean" in str(info.value)


@pytest.mark.parametrize("model", [SliceShares, LayerShares, Pricing])
def test_a_boolean_for_a_nested_number_is_refused(model: type[pydantic.BaseModel]) -> None:
    for name in _numeric(model):
        with pytest.raises(pydantic.ValidationError, match="boolean") as info:
            model(**{name: True})
        assert [e["loc"] for e in info.value.errors()] == [(name,)]


# (how the value is given, what it says, the setting named in the error) -- each refused
REFUSED = [
    ("file", "http_port = true\n", "http_port"),  # the report's own case: port 1
    ("file", "[service]\nport = true\n", "service.port"),  # named as written, in its section
    ("file", "[hot]\neviction_bias = true\n", "hot.eviction_bias"),  # a float setting: 1.0
    ("file", "[pricing]\ninput_per_mtok = true\n", "pricing.input_per_mtok"),  # a nested model's float
    ("file", "[slice_shares.default]\nretrieved = false\n", "slice_shares.default.retrieved"),  # a share of a class
    ("file", "[hot]\nbudget_tokens = 3000.5\n", "hot.budget_tokens"),  # a fraction where an int is meant
    ("json-env", ("TIERMEM_PRICING", '{"input_per_mtok": true}'), "pricing.input_per_mtok"),  # JSON's true
    ("json-env", ("TIERMEM_LAYER_SHARES", '{"tail": true}'), "layer_shares.tail"),
    ("kwargs", {"http_port": True}, "http_port"),
    ("kwargs", {"scheduler": {"interval_s": True}}, "scheduler.interval_s"),
    ("kwargs", {"retrieval_k": 2.5}, "retrieval_k"),  # a fraction
]


@pytest.mark.parametrize(("how", "given", "named"), REFUSED)
def test_refused_naming_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, given: Any,
                                    named: str) -> None:
    kwargs: dict[str, Any] = {}
    path = None
    if how == "file":
        path = tmp_path / "c.toml"
        path.write_text(given)
    elif how == "json-env":
        monkeypatch.setenv(*given)
    else:
        kwargs = given
    with pytest.raises(pydantic.ValidationError) as info:
        Config.load(path, data_dir=tmp_path, **kwargs)
    assert [".".join(map(str, e["loc"])) for e in info.value.errors()] == [named]


def test_an_assignment_of_a_boolean_is_refused(tmp_path: Path) -> None:
    cfg = Config(data_dir=tmp_path)
    with pytest.raises(pydantic.ValidationError, match="boolean"):
        cfg.http_port = True  # type: ignore[assignment]
    assert cfg.http_port == 8080


# (variable, value, attribute, expected) -- text from env still parses as the number it says
PARSED = [
    ("TIERMEM_HTTP_PORT", "8080", "http_port", 8080),  # the brief's own example
    ("TIERMEM_SERVICE__PORT", "9090", "http_port", 9090),  # the sectioned spelling
    ("TIERMEM_HOT__EVICTION_BIAS", "0.5", "eviction_bias", 0.5),
    ("TIERMEM_LLM_TIMEOUT_S", "1", "llm_timeout_s", 1.0),  # "1" is a number, not a boolean
    ("TIERMEM_HOT_BUDGET_TOKENS", "3000", "hot_budget_tokens", 3000),
]


@pytest.mark.parametrize(("var", "text", "attr", "want"), PARSED)
def test_numbers_from_env_still_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str, text: str,
                                      attr: str, want: float) -> None:
    monkeypatch.setenv(var, text)
    assert getattr(Config(data_dir=tmp_path), attr) == want


def test_config_check_refuses_a_boolean_port(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text("[service]\nport = true\n")
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config", "--check", str(f)], obj=CliState())
    assert res.exit_code == 1 and "service.port" in res.output and "boolean" in res.output, res.output
