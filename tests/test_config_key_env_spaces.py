"""`llm_api_key_env` with whitespace round the name is refused, naming the setting, as
`llm_model` is. `"OPENAI_API_KEY "` was accepted and then read no variable (no environment
variable has that name), so every summary request went without a key and failed at the
endpoint, while `config --check` passed the file. Refused rather than stripped: the spaces
are a slip (a file's quoting, a shell variable), and `tiermem config` shows the value as
written. An empty value stays the documented way to send no key. Every refused case fails
on the code before (accepted as given)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
from config_sources import config_check, refused_names

from tiermem.config import Config

pytestmark = pytest.mark.usefixtures("clean_env")


@pytest.mark.parametrize("value", [
    "OPENAI_API_KEY ",    # the report's own case: a trailing space
    " OPENAI_API_KEY",    # a leading one
    "OPENAI_API_KEY\n",   # a newline kept from a file the name was read from
    "\tOPENAI_API_KEY",   # a leading tab
])
def test_spaces_round_the_name_are_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="must not start or end with whitespace") as info:
        Config(data_dir=tmp_path, llm_api_key_env=value)
    assert [e["loc"] for e in info.value.errors()] == [("llm_api_key_env",)]
    assert "'OPENAI_API_KEY'" in str(info.value)  # the name it probably meant


# (how it is given, the setting as the error names it)
SOURCES = [
    ("file", '[warm]\nllm_api_key_env = "MY_KEY "\n', "warm.llm_api_key_env"),  # named as written
    ("file", 'llm_api_key_env = " MY_KEY"\n', "llm_api_key_env"),  # the flat name
    ("env", ("TIERMEM_LLM_API_KEY_ENV", "MY_KEY "), "llm_api_key_env"),
    ("env", ("TIERMEM_WARM__LLM_API_KEY_ENV", " MY_KEY"), "warm.llm_api_key_env"),
]


@pytest.mark.parametrize(("how", "given", "named"), SOURCES)
def test_refused_from_every_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str,
                                   given: str | tuple[str, str], named: str) -> None:
    assert refused_names(tmp_path, monkeypatch, how, given) == [named]


@pytest.mark.parametrize("value", [
    "OPENAI_API_KEY",   # the default
    "MY_KEY",           # any plain variable name
    "",                 # empty: no key sent (a local endpoint without auth)
])
def test_a_name_without_spaces_round_it_is_kept(tmp_path: Path, value: str) -> None:
    assert Config(data_dir=tmp_path, llm_api_key_env=value).llm_api_key_env == value


def test_config_check_names_the_setting(tmp_path: Path) -> None:
    res = config_check(tmp_path, '[warm]\nllm_api_key_env = "OPENAI_API_KEY "\n')
    assert res.exit_code == 1 and "warm.llm_api_key_env" in res.output and "whitespace" in res.output, res.output
    assert "Traceback" not in res.output
