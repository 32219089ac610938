"""`timezone` (Config, env TIERMEM_TIMEZONE, `[planner] timezone` in a file): an IANA name,
checked with zoneinfo when the config is built, so a zone tiermem cannot use fails at
startup naming the setting, before anything is opened or written.

On the code before there was no such setting: every day was UTC's.
"""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
from click.testing import CliRunner

from tiermem import Config, Memory
from tiermem.cli import CliState, cli
from tiermem.tiers.embed import Embedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

# refused, each with words the message must say
REFUSED = [
    pytest.param("Mars/Olympus_Mons", "not a known IANA time zone", id="unknown"),
    pytest.param("america/los angeles", "not a known IANA time zone", id="misspelt"),  # not guessed at
    pytest.param("-08:00", "not a known IANA time zone", id="offset"),  # no DST rules: not a zone name
    pytest.param("../../etc/passwd", "not a known IANA time zone", id="path"),
    pytest.param("", "1 to 64 characters", id="empty"),
    pytest.param("Europe/" + "x" * 80, "at most 64 characters", id="too-long"),
]


@pytest.mark.parametrize(("name", "says"), REFUSED)
def test_a_bad_zone_is_refused_naming_the_setting_and_nothing_is_written(
        tmp_path: Path, embedder: Embedder, name: str, says: str) -> None:
    data = tmp_path / "data"
    with pytest.raises(pydantic.ValidationError) as info:
        Memory(Config(data_dir=data, timezone=name), embedder=embedder, hot=False)
    (err,) = info.value.errors()
    assert err["loc"] == ("timezone",) and says in err["msg"]
    assert not data.exists()  # refused before any store was opened


@pytest.mark.parametrize("name", [
    "UTC",  # the default
    "America/Los_Angeles",
    "Asia/Kolkata",  # a half-hour offset
    "Etc/GMT+8",  # a fixed offset as an IANA name (POSIX sign: UTC-08:00)
])
def test_a_known_zone_is_accepted(tmp_path: Path, name: str) -> None:
    assert Config(data_dir=tmp_path / "data", timezone=name).timezone == name


def test_the_default_is_utc(tmp_path: Path) -> None:
    assert Config(data_dir=tmp_path / "data").timezone == "UTC"


def test_env_sets_it_and_a_bad_one_names_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_TIMEZONE", "Europe/Berlin")
    assert Config(data_dir=tmp_path / "data").timezone == "Europe/Berlin"
    monkeypatch.setenv("TIERMEM_TIMEZONE", "Europe/Atlantis")
    with pytest.raises(pydantic.ValidationError) as info:
        Config(data_dir=tmp_path / "data")
    (err,) = info.value.errors()
    assert err["loc"] == ("timezone",) and "Europe/Atlantis" in err["msg"]


def test_config_check_names_the_sectioned_setting(tmp_path: Path) -> None:
    f = tmp_path / "tiermem.toml"
    f.write_text('[planner]\ntimezone = "Pacific/Nowhere"\n')
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "config", "--check", str(f)], obj=CliState())
    assert res.exit_code == 1 and "planner.timezone" in res.stderr and "Pacific/Nowhere" in res.stderr, res.output
    f.write_text('[planner]\ntimezone = "America/Los_Angeles"\n')
    assert Config.load(f).timezone == "America/Los_Angeles"
