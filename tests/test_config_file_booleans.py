"""A boolean setting in a config file must be a boolean. pydantic's lax mode read a file's
`scheduler_enabled = 1` as true (and `0`, `"yes"`, `"off"` likewise): TOML and JSON have a
boolean type, so a number or a string there is a type error, now refused naming the
setting as it was written. Env carries text only, and keeps the documented reading:
`TIERMEM_SCHEDULER_ENABLED=1` / `0` / `true` / `false` parse as the boolean they say.

On the code before, every refused case here was accepted (the env and true/false cases pass
there too: they pin what must not change)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
from config_sources import config_check

from tiermem.config import Config

pytestmark = pytest.mark.usefixtures("clean_env")

# (file name, what it says, the setting named in the error, the kind named) -- each refused
REFUSED = [
    ("c.toml", "scheduler_enabled = 1\n", "scheduler_enabled", "an integer (1)"),  # the report's own case
    ("c.toml", "[scheduler]\nenabled = 0\n", "scheduler.enabled", "an integer (0)"),  # named in its section
    ("c.toml", "metrics_public = 1.0\n", "metrics_public", "a number (1.0)"),  # a float
    ("c.toml", 'context_epochs = "yes"\n', "context_epochs", 'a string ("yes")'),  # text is no boolean either
    ("c.toml", 'store_plans = "false"\n', "store_plans", 'a string ("false")'),  # not even text of one
    ("c.json", '{"namespace_recall": 1}', "namespace_recall", "an integer (1)"),  # JSON's 1, not true
    ("c.json", '{"retrieval": {"namespace_recall": 0}}', "retrieval.namespace_recall", "an integer (0)"),
]


@pytest.mark.parametrize(("name", "text", "named", "kind"), REFUSED)
def test_a_non_boolean_in_a_file_is_refused(tmp_path: Path, name: str, text: str, named: str,
                                            kind: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(pydantic.ValidationError) as info:
        Config.load(path, data_dir=tmp_path)
    assert [".".join(map(str, e["loc"])) for e in info.value.errors()] == [named]
    assert f"must be true or false in a config file, got {kind}" in str(info.value)


# (what the file says, the attribute, expected) -- a file's real booleans are read as before
KEPT_FILE = [
    ("scheduler_enabled = false\n", "scheduler_enabled", False),
    ("[scheduler]\nenabled = true\n", "scheduler_enabled", True),
    ("metrics_public = true\n", "metrics_public", True),
]


@pytest.mark.parametrize(("text", "attr", "want"), KEPT_FILE)
def test_a_boolean_in_a_file_is_read(tmp_path: Path, text: str, attr: str, want: bool) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    assert getattr(Config.load(path, data_dir=tmp_path), attr) is want


# (variable, text, expected) -- env is text: the usual spellings of a boolean still parse
ENV = [
    ("TIERMEM_SCHEDULER_ENABLED", "1", True),  # the report's env case: 1/0 is how env says it
    ("TIERMEM_SCHEDULER_ENABLED", "0", False),
    ("TIERMEM_SCHEDULER_ENABLED", "true", True),
    ("TIERMEM_SCHEDULER_ENABLED", "false", False),
    ("TIERMEM_SCHEDULER__ENABLED", "0", False),  # the sectioned spelling
]


@pytest.mark.parametrize(("var", "text", "want"), ENV)
def test_env_text_still_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str, text: str,
                               want: bool) -> None:
    monkeypatch.setenv(var, text)
    assert Config(data_dir=tmp_path).scheduler_enabled is want


def test_env_overrides_a_bad_file_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # precedence is unchanged: the value in effect is env's, so the file's is never used
    path = tmp_path / "c.toml"
    path.write_text("scheduler_enabled = 1\n")
    monkeypatch.setenv("TIERMEM_SCHEDULER_ENABLED", "0")
    assert Config.load(path, data_dir=tmp_path).scheduler_enabled is False


def test_env_text_that_says_no_boolean_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_SCHEDULER_ENABLED", "2")
    with pytest.raises(pydantic.ValidationError) as info:
        Config(data_dir=tmp_path)
    assert [e["loc"] for e in info.value.errors()] == [("scheduler_enabled",)]


def test_config_check_names_the_setting(tmp_path: Path) -> None:
    res = config_check(tmp_path, "[scheduler]\nenabled = 1\n")
    assert res.exit_code == 1 and "scheduler.enabled" in res.output and "true or false" in res.output, res.output
    assert "Traceback" not in res.output
