"""A name setting given as an empty or whitespace-only string is refused, naming the
setting. `llm_model = " "` was accepted (and passed `summarizer = "llm"`'s check that a
model is named): every summary request then asked the endpoint for model " ", and each
refresh failed in the background; `llm_api_key_env = " "` read no variable, so requests went
without a key. Both cases fail on the code before (nothing was refused). An empty
`llm_api_key_env` stays the documented way to send no key (a local endpoint)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
from config_sources import config_check, refused_names

from tiermem.config import Config

pytestmark = pytest.mark.usefixtures("clean_env")

NAME_SETTINGS = ["llm_model", "llm_api_key_env"]


@pytest.mark.parametrize(("name", "value"), [
    ("llm_model", ""),              # an unset shell variable: TIERMEM_LLM_MODEL=$MODEL
    ("llm_model", " "),             # the report's own case
    ("llm_model", "\t\n "),         # any whitespace only
    ("llm_api_key_env", " "),       # whitespace is no variable name ("" is: send no key)
    ("llm_api_key_env", "\t\n "),
])
def test_a_blank_name_is_refused(tmp_path: Path, name: str, value: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=r"blank|empty") as info:
        Config(data_dir=tmp_path, **{name: value})
    assert [e["loc"] for e in info.value.errors()] == [(name,)]


# (how it is given, the setting as the error names it) -- each accepted a blank name before
SOURCES = [
    ("file", 'llm_model = " "\n', "llm_model"),
    ("file", '[warm]\nllm_api_key_env = "  "\n', "warm.llm_api_key_env"),  # named as written, in its section
    ("env", ("TIERMEM_LLM_MODEL", " "), "llm_model"),
    ("env", ("TIERMEM_WARM__LLM_MODEL", ""), "warm.llm_model"),
    ("env", ("TIERMEM_LLM_API_KEY_ENV", "\t"), "llm_api_key_env"),
]


@pytest.mark.parametrize(("how", "given", "named"), SOURCES)
def test_refused_from_every_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str,
                                   given: str | tuple[str, str], named: str) -> None:
    assert refused_names(tmp_path, monkeypatch, how, given) == [named]


def test_a_blank_model_does_not_satisfy_the_llm_summarizer(tmp_path: Path) -> None:
    # before, " " counted as a model named, so summarizer = "llm" started
    with pytest.raises(pydantic.ValidationError, match="llm_model"):
        Config(data_dir=tmp_path, summarizer="llm", llm_base_url="http://127.0.0.1:9/v1", llm_model=" ")


@pytest.mark.parametrize(("name", "value"), [
    ("llm_model", None),              # unset: no model (the extractive summarizer)
    ("llm_model", "gpt-4o-mini"),
    ("llm_api_key_env", "MY_KEY"),
    ("llm_api_key_env", ""),          # empty: no key sent (a local endpoint without auth)
])
def test_a_real_name_or_unset_is_kept(tmp_path: Path, name: str, value: str | None) -> None:
    assert getattr(Config(data_dir=tmp_path, **{name: value}), name) == value


def test_config_check_names_the_setting(tmp_path: Path) -> None:
    res = config_check(tmp_path, '[warm]\nllm_model = " "\n')
    assert res.exit_code == 1 and "warm.llm_model" in res.output and "Traceback" not in res.output, res.output
