"""A boolean setting given a typed value must be given a boolean, whichever way it comes.
The file rule (tests/test_config_file_booleans.py) left keyword arguments to pydantic's lax
mode: `Config(scheduler_enabled=1)` (or `"yes"`, `1.0`, an assignment of `0`) was read as
the boolean it suggests, while the same 1 in a file was refused. Python has a boolean type,
so an integer there is a type error, as pydantic's strict mode says; refused naming the
setting as given. Only env carries text, and its `1`/`0`, `true`/`false` still parse.

JSON in env cannot reach a boolean setting: no table setting holds one, and a section given
as a JSON table (`TIERMEM_SCHEDULER='{"enabled": 1}'`) is no variable tiermem reads (refused
as an unknown setting before and after: pinned below). Every refused keyword and assignment
case fails on the code before (accepted as the boolean it suggests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest

from tiermem.config import Config

pytestmark = pytest.mark.usefixtures("clean_env")

# (keyword arguments, the setting as the error names it, the kind named) -- each refused
REFUSED = [
    ({"scheduler_enabled": 1}, "scheduler_enabled", "an integer (1)"),  # the report's own case
    ({"scheduler_enabled": 0}, "scheduler_enabled", "an integer (0)"),
    ({"metrics_public": 1.0}, "metrics_public", "a number (1.0)"),  # a float
    ({"context_epochs": "yes"}, "context_epochs", 'a string ("yes")'),  # text is no boolean in Python
    ({"store_plans": "false"}, "store_plans", 'a string ("false")'),  # not even a boolean's text
    ({"retrieval": {"namespace_recall": 0}}, "retrieval.namespace_recall", "an integer (0)"),  # in its section
]


@pytest.mark.parametrize(("kwargs", "named", "kind"), REFUSED)
def test_a_non_boolean_keyword_is_refused(tmp_path: Path, kwargs: dict[str, Any], named: str, kind: str) -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        Config(data_dir=tmp_path, **kwargs)
    assert [".".join(map(str, e["loc"])) for e in info.value.errors()] == [named]
    assert f"must be a boolean (True or False), got {kind}" in str(info.value)


def test_load_refuses_a_non_boolean_override(tmp_path: Path) -> None:
    # Config.load's overrides are keyword arguments too (the CLI's and tune's way in)
    with pytest.raises(pydantic.ValidationError, match="scheduler_enabled"):
        Config.load(None, data_dir=tmp_path, scheduler_enabled=1)


@pytest.mark.parametrize("value", [1, 0, "true"])
def test_a_non_boolean_assignment_is_refused_and_changes_nothing(tmp_path: Path, value: Any) -> None:
    cfg = Config(data_dir=tmp_path)
    with pytest.raises(pydantic.ValidationError, match="must be a boolean"):
        cfg.scheduler_enabled = value
    assert cfg.scheduler_enabled is True  # the default, kept


# (keyword arguments, the attribute, expected) -- real booleans are read as before
KEPT = [
    ({"scheduler_enabled": False}, "scheduler_enabled", False),
    ({"scheduler": {"enabled": True}}, "scheduler_enabled", True),  # in its section
    ({"metrics_public": True}, "metrics_public", True),
]


@pytest.mark.parametrize(("kwargs", "attr", "want"), KEPT)
def test_a_boolean_keyword_is_read(tmp_path: Path, kwargs: dict[str, Any], attr: str, want: bool) -> None:
    assert getattr(Config(data_dir=tmp_path, **kwargs), attr) is want


# (variable, text, expected) -- env is text: its usual spellings still parse, both ways of naming it
ENV = [
    ("TIERMEM_SCHEDULER_ENABLED", "1", True),
    ("TIERMEM_SCHEDULER__ENABLED", "0", False),  # the sectioned spelling
    ("TIERMEM_METRICS_PUBLIC", "yes", True),
]


@pytest.mark.parametrize(("var", "text", "want"), ENV)
def test_env_text_still_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str, text: str,
                               want: bool) -> None:
    monkeypatch.setenv(var, text)
    attr = "metrics_public" if "METRICS" in var else "scheduler_enabled"
    assert getattr(Config(data_dir=tmp_path), attr) is want


def test_a_keyword_boolean_overrides_env_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # precedence is unchanged: the argument's boolean wins over env's text
    monkeypatch.setenv("TIERMEM_SCHEDULER_ENABLED", "1")
    assert Config(data_dir=tmp_path, scheduler_enabled=False).scheduler_enabled is False


def test_a_section_as_json_in_env_is_no_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the report's JSON case: no JSON in env reaches a boolean, so its 1 is never read as true
    monkeypatch.setenv("TIERMEM_SCHEDULER", '{"enabled": 1}')
    with pytest.raises(pydantic.ValidationError, match="no such setting") as info:
        Config(data_dir=tmp_path)
    assert [e["loc"] for e in info.value.errors()] == [("TIERMEM_SCHEDULER",)]
