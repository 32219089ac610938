"""`llm_model` with whitespace round the name is refused, naming the setting. `" gpt-4o "`
was accepted and sent to the endpoint as is: no endpoint serves such a model, so every
summary refresh failed in the background while `config --check` said the file was fine.
Refused rather than stripped: the spaces are a slip (a file's quoting, `MODEL="gpt-4o "`
in a shell), and a silently changed value would differ from the one the user wrote and
`tiermem config` shows. Every refused case fails on the code before (accepted as given)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
from config_sources import config_check, refused_names

from tiermem.config import Config

pytestmark = pytest.mark.usefixtures("clean_env")


@pytest.mark.parametrize("value", [
    " gpt-4o ",       # the report's own case
    "gpt-4o ",        # a trailing space only (a shell variable with one)
    "\tgpt-4o",       # a leading tab
    "gpt-4o\n",       # a newline kept from a file the value was read from
])
def test_spaces_round_the_name_are_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="must not start or end with whitespace") as info:
        Config(data_dir=tmp_path, llm_model=value)
    assert [e["loc"] for e in info.value.errors()] == [("llm_model",)]
    assert "'gpt-4o'" in str(info.value)  # the name it probably meant


# (how it is given, the setting as the error names it)
SOURCES = [
    ("file", '[warm]\nllm_model = " gpt-4o "\n', "warm.llm_model"),  # named as written, in its section
    ("env", ("TIERMEM_LLM_MODEL", "gpt-4o "), "llm_model"),
]


@pytest.mark.parametrize(("how", "given", "named"), SOURCES)
def test_refused_from_every_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str,
                                   given: str | tuple[str, str], named: str) -> None:
    assert refused_names(tmp_path, monkeypatch, how, given) == [named]


@pytest.mark.parametrize("value", [
    "gpt-4o",                        # a plain name
    "meta-llama/Llama-3.1-8B",       # a path-like one (vLLM)
    "my model",                      # a space inside is the endpoint's to judge
])
def test_a_name_without_spaces_round_it_is_kept(tmp_path: Path, value: str) -> None:
    assert Config(data_dir=tmp_path, llm_model=value).llm_model == value


def test_config_check_names_the_setting(tmp_path: Path) -> None:
    res = config_check(tmp_path, '[warm]\nllm_model = " gpt-4o "\n')
    assert res.exit_code == 1 and "warm.llm_model" in res.output and "whitespace" in res.output, res.output
    assert "Traceback" not in res.output
