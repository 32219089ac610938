"""`tiermem config --check FILE` refuses every file `tiermem serve` refuses for its tokens or
its limits, with the message serve gives (both run `tiermem.service.auth.TokenAuth` and
`tiermem.service.app.check_service_limits`); a file without tokens still passes
(`serve --no-auth` needs none)."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_sources import CONFIG_FILE_NAME, config_check

from tiermem.config import Config
from tiermem.service import ServiceConfigError, create_app

ERROR_EXIT = 1
TOKEN_A = "tok-0123456789abcdef0"
TOKEN_B = "tok-fedcba9876543210f"


pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


# (the file, the field the refusal names)
REFUSED = [
    (f'auth_tokens = {{"{TOKEN_A}" = "../evil"}}\n', "auth_tokens"),                 # a prefix that is no namespace
    (f'[service]\nauth_tokens = {{"{TOKEN_A}" = "a//b"}}\n', "auth_tokens"),          # the same, in its section
    ('auth_tokens = {"" = "acme"}\n', "auth_tokens"),                                # an empty token
    ('metrics_tokens = ["", "x"]\n', "metrics_tokens"),                              # an empty metrics token
    (f'auth_tokens = {{"{TOKEN_A}" = "acme"}}\nmetrics_tokens = ["{TOKEN_A}"]\n', "metrics_tokens"),  # a tenant's
    ("max_body_bytes = 1048576\nmax_content_bytes = 4194304\n", "max_body_bytes"),  # 413 for what append takes
]


@pytest.mark.parametrize(("content", "named"), REFUSED)
def test_check_refuses_what_serve_refuses(content: str, named: str, tmp_path: Path) -> None:
    res = config_check(tmp_path, content)
    assert res.exit_code == ERROR_EXIT and len(res.stderr.strip().splitlines()) == 1, res.output
    assert named in res.stderr, res.stderr
    # serve refuses the same file, saying the same
    with pytest.raises(ServiceConfigError) as served:
        create_app(Config.load(tmp_path / CONFIG_FILE_NAME, data_dir=tmp_path))
    assert str(served.value) in res.stderr


# files serve takes (with --no-auth when they hold no token)
ACCEPTED = [
    "retrieval_k = 7\n",                                                             # no tokens at all
    "max_body_bytes = 4194304\nmax_content_bytes = 4194304\n",                      # the body limit at the content limit
    f'auth_tokens = {{"{TOKEN_A}" = "acme/team-1"}}\nmetrics_tokens = ["{TOKEN_B}"]\n',  # good tokens
]


@pytest.mark.parametrize("content", ACCEPTED)
def test_check_passes_files_serve_takes(content: str, tmp_path: Path) -> None:
    res = config_check(tmp_path, content)
    assert res.exit_code == 0, res.output
