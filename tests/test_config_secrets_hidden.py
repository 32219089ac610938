"""A config error names the setting and the rule, never the value given (Config's
`hide_input_in_errors`): `redis_url` and `cold_url` carry passwords, and a refused config
is a traceback in a service log.

On the code before, pydantic's message ended with `input_value='redis://u:<password>@...'`
however carefully the validator's own text redacted it. Then two more ways out: a password
holding an unescaped `/`, `?` or `#` (common in generated ones) hid the userinfo from
urlsplit, so the validator printed the URL whole; and an `auth_tokens` key is the bearer
token, which a wrong-typed value put into the error's location (`auth_tokens.<token>`).
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
    # a password urlsplit does not see as one: the '/', '?' or '#' ends its netloc early
    pytest.param({"redis_url": f"redis://ops:ab/{PASSWORD}@localhost:notaport/0"}, "redis_url", id="slash-port"),
    pytest.param({"redis_url": f"http://ops:ab/{PASSWORD}@localhost:6379"}, "redis_url", id="slash-scheme"),
    pytest.param({"redis_url": f"redis://ops:ab#{PASSWORD}@localhost:notaport/0"}, "redis_url", id="hash-port"),
    pytest.param({"redis_url": f"redis://ops:ab?{PASSWORD}@localhost:notaport/0"}, "redis_url", id="query-port"),
    # the password as a query parameter, which redis-py reads too
    pytest.param({"redis_url": f"redis://localhost:notaport/0?password={PASSWORD}"}, "redis_url", id="query-password"),
    # an auth_tokens key is the token: a value of the wrong type names its location
    pytest.param({"auth_tokens": {PASSWORD: 5}}, "auth_tokens", id="token-key"),
    pytest.param({"auth_tokens": {PASSWORD: ["team-a"]}}, "auth_tokens", id="token-key-list"),
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


def test_a_token_key_in_a_file_or_the_environment_is_hidden(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tiermem.toml"
    path.write_text(f'[service]\nauth_tokens = {{ "{PASSWORD}" = 5 }}\n')
    with pytest.raises(pydantic.ValidationError) as err:
        Config.load(path)
    assert "service.auth_tokens.<token>" in str(err.value) and PASSWORD not in str(err.value), str(err.value)
    monkeypatch.setenv("TIERMEM_AUTH_TOKENS", f'{{"{PASSWORD}": 5}}')
    with pytest.raises(pydantic.ValidationError) as err:
        Config(data_dir=tmp_path)
    assert "auth_tokens.<token>" in str(err.value) and PASSWORD not in str(err.value), str(err.value)


# (field, a URL that is accepted, what `tiermem config` may show of it)
SHOWN = [
    ("redis_url", f"redis://ops:{PASSWORD}@localhost:6379/0", "redis://ops:<redacted>@localhost:6379/0"),
    ("redis_url", f"redis://localhost:6379/0?password={PASSWORD}", "redis://localhost:6379/0?password=<redacted>"),
    # cold_url carries the database password too (it was printed whole)
    ("cold_url", f"postgresql://app:{PASSWORD}@db:5432/tiermem", "postgresql://app:<redacted>@db:5432/tiermem"),
    # llm_base_url is not parsed: a '/' in the password hid it from urlsplit
    ("llm_base_url", f"https://k:ab/{PASSWORD}@llm.internal/v1", "https://k:<redacted>@llm.internal/v1"),
    ("llm_base_url", "https://llm.internal/v1", "https://llm.internal/v1"),  # nothing to hide
]


@pytest.mark.parametrize(("field", "url", "shown"), SHOWN)
def test_tiermem_config_shows_urls_without_their_secrets(field: str, url: str, shown: str) -> None:
    from tiermem.config import redact

    assert redact(field, url) == shown
