"""`http_host` must be a host name or an IP address: an empty value (an unset shell
variable, `TIERMEM_HTTP_HOST=$HOST`), a port or a scheme in it is refused when the config
is read, naming the setting. Before, any string was taken and `tiermem serve` failed at the
bind as "port 8080 on  cannot be used (Name or service not known); choose another with
--port or http_port": blaming the port, naming nothing that was wrong."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest
from click.testing import CliRunner

from tiermem import Config
from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")


# (how it is given: env or --host, the value) -- each reached the bind before
@pytest.mark.parametrize(("how", "value"), [
    ("env", ""),                  # an unset shell variable
    ("env", "   "),               # blanks
    ("--host", "localhost:8080"),  # a port in it
    ("--host", "http://0.0.0.0"),  # a scheme
])
def test_serve_refuses_a_bad_host_naming_the_setting(tmp_path: Path, how: str, value: str) -> None:
    env = {"TIERMEM_HTTP_HOST": value} if how == "env" else {}
    args = ["--host", value] if how == "--host" else []
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "serve", "--port", "1", *args], obj=CliState(),
                             env={**env, "TIERMEM_AUTH_TOKENS": '{"tok-abcdefgh": "acme"}'})
    assert "Traceback" not in res.output, res.output
    if how == "--host":  # a bad value on the command line is a usage error naming the option (7e604ac)
        assert res.exit_code == 2, res.output
        assert "'--host'" in res.stderr and "not a host name or an IP address" in res.stderr, res.stderr
    else:  # the setting from the environment: the config's error, naming it
        assert res.exit_code == 1, res.output
        assert "http_host: " in res.stderr and "not a host name or an IP address" in res.stderr, res.stderr
    assert "choose another with --port" not in res.stderr


# (given, what the config holds)
@pytest.mark.parametrize(("given", "held"), [
    ("0.0.0.0", "0.0.0.0"),      # every interface (a container)
    ("127.0.0.1", "127.0.0.1"),
    ("::", "::"),
    ("[::1]", "::1"),            # brackets, as in a URL: the address a socket binds
    ("LocalHost", "localhost"),
    ("tiermem.internal", "tiermem.internal"),
])
def test_hosts_and_addresses_are_taken(tmp_path: Path, given: str, held: str) -> None:
    assert Config(data_dir=tmp_path, http_host=given).http_host == held


def test_the_file_setting_is_named_in_its_section(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[service]\nhost = ""\n')
    with pytest.raises(pydantic.ValidationError, match=r"service\.host\n"):
        Config.load(f, data_dir=tmp_path)
