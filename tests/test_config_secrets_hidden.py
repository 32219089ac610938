"""A config error names the setting and the rule, never the value given (Config's
`hide_input_in_errors`): `redis_url` and `cold_url` carry passwords, and a refused config
is a traceback in a service log.

On the code before, pydantic's message ended with `input_value='redis://u:<password>@...'`
however carefully the validator's own text redacted it.
"""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from tiermem import Config

PASSWORD = "hunter2-s3cret"

# (settings as given, the setting the error must name)
CASES = [
    # the validator's own message redacts; pydantic's input_value did not
    pytest.param({"redis_url": f"redis://ops:{PASSWORD}@localhost:notaport/0"}, "redis_url", id="redis-port"),
    pytest.param({"redis_url": f"http://ops:{PASSWORD}@localhost:6379"}, "redis_url", id="redis-scheme"),
    pytest.param({"cold_url": f"mysql://ops:{PASSWORD}@db/tiermem"}, "cold_url", id="cold-scheme"),
    # a type error: the value is whatever was pasted into the wrong field
    pytest.param({"hot_budget_tokens": PASSWORD}, "hot_budget_tokens", id="wrong-field"),
]


@pytest.mark.parametrize(("settings", "field"), CASES)
def test_an_error_names_the_field_not_the_value(settings: dict[str, str], field: str) -> None:
    with pytest.raises(pydantic.ValidationError) as err:
        Config(**settings)
    assert field in str(err.value) and PASSWORD not in str(err.value), str(err.value)


def test_a_config_file_error_hides_the_value_too(tmp_path: Path) -> None:
    # a file's sections are renamed in the error (`hot.redis_url`), through a second raise
    path = tmp_path / "tiermem.toml"
    path.write_text(f'[hot]\nredis_url = "redis://ops:{PASSWORD}@localhost:notaport/0"\n')
    with pytest.raises(pydantic.ValidationError) as err:
        Config.load(path)
    assert "redis_url" in str(err.value) and PASSWORD not in str(err.value), str(err.value)
