"""An exported config loads back to the identical Config, for every non-default value,
a null included (`config.export_text`).

TOML has no null. `config --export` left a None out of the TOML file, and a setting whose
default is not None (`pricing.min_prefix_tokens`: 1,024) loaded back as that default: "an
export loads back to the identical Config" did not hold. A TOML export now refuses it,
naming the key and pointing to JSON, and writes nothing; a JSON export keeps it. A None
whose default is None (`cold_url`) is left out and loads back the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tiermem.cli import CliState, cli
from tiermem.config import Config
from tiermem.errors import ValidationError

pytestmark = pytest.mark.usefixtures("clean_env")

# keyword arguments of a Config away from the defaults (data_dir is given by each test)
NON_DEFAULT = [
    {"pricing": {"min_prefix_tokens": 2048}},  # the setting at issue, a number
    {"pricing": {"min_prefix_tokens": None}},  # ... and None: its default is not (the finding)
    {"pricing": {"input_per_mtok": 0.0, "cached_input_ratio": 1.0}},  # the table's other keys
    {"layer_shares": {"tail": 0.3, "pinned": 0.0}},  # a table of shares
    {"slice_shares": {"new_subtask": {"retrieved": 0.05}}},  # a table of tables
    {"hot": {"budget_tokens": 900, "idle_ttl_s": 0.0}},  # sectioned, zeros
    {"redis_url": "redis://localhost:6390/2", "cold_schema": "s_2"},  # a None default given a value
    {"http_forwarded_allow_ips": ["10.0.0.0/8", "::1"], "http_allowed_hosts": ["example.com"]},  # lists
    {"http_forwarded_allow_ips": []},  # an empty list: not None, not left out
    {"auth_tokens": {"tok.en+1": "team/a"}, "metrics_tokens": ["m"]},  # quoted keys
    {"llm_model": "m \x7f\t\x1b \"q\" \\ é", "llm_api_key_env": ""},  # every escape, an empty string
    {"scheduler_enabled": False, "metrics_public": True},  # booleans
]


def _export(src: Path, out: Path) -> Result:
    return CliRunner().invoke(cli, ["--config", str(src), "config", "--export", str(out), "--with-secrets"],
                              obj=CliState())


@pytest.mark.parametrize("kwargs", NON_DEFAULT)
@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_export_loads_back_identical_or_is_refused(tmp_path: Path, kwargs: dict[str, Any], suffix: str) -> None:
    src, out = tmp_path / "src.json", tmp_path / f"out{suffix}"
    src.write_text(json.dumps({"data_dir": str(tmp_path / "d"), **kwargs}), encoding="utf-8")
    values = Config.load(src).model_dump(mode="json")
    res = _export(src, out)
    if suffix == ".toml" and kwargs.get("pricing", {}).get("min_prefix_tokens", 0) is None:
        # TOML cannot say it: refused, naming the key and JSON, nothing written
        assert res.exit_code == 1 and "pricing.min_prefix_tokens" in res.output and "JSON" in res.output
        assert not out.exists()
        from tiermem.config import export_text  # the library's check, the same refusal

        with pytest.raises(ValidationError, match=r"^pricing\.min_prefix_tokens: .*JSON"):
            export_text(values, as_json=False, header=[])
        return
    assert res.exit_code == 0, res.output
    assert Config.load(out).model_dump(mode="json") == values
