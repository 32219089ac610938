"""The HTTP service refuses to start with `max_body_bytes` below `max_content_bytes`: it
would answer 413 for messages the library and the CLI store. The error names both
settings, their values and what to set; a library-only user (who never serves) is not
refused for it.

Before, `create_app` and `tiermem serve` took such a config, and every message between
the two limits was taken by `Memory.append` and refused over HTTP.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from ports import free_port

from tiermem import Config, Memory
from tiermem.cli import CliState, cli
from tiermem.service import ServiceConfigError, create_app
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")

KIB = 1024
MIB = 1024 * KIB
ERROR_EXIT = 1

# (max_body_bytes, max_content_bytes) the service refuses
REFUSED = [
    (1 * MIB, 2 * MIB),  # the body limit half the content limit
    (2 * MIB, 4 * MIB),  # the default body limit under a raised content limit
    (64 * KIB, 64 * KIB + 1),  # one byte below
]
# ... and those it takes
ACCEPTED = [
    (None, None),  # the defaults (twice the content limit)
    (64 * KIB, 64 * KIB),  # equal: the rule is "not below"
    (4 * MIB, 1 * MIB),  # room to spare
]


def _config(tmp_path: Path, body: int | None, content: int | None) -> Config:
    limits = {k: v for k, v in (("max_body_bytes", body), ("max_content_bytes", content)) if v is not None}
    return Config(data_dir=tmp_path / "data", **limits)


@pytest.mark.parametrize(("body", "content"), REFUSED)
def test_the_service_refuses_a_body_limit_below_the_content_limit(tmp_path: Path, body: int,
                                                                   content: int) -> None:
    with pytest.raises(ServiceConfigError) as info:
        create_app(_config(tmp_path, body, content), auth=False)
    text = str(info.value)
    assert f"max_body_bytes ({body})" in text and f"max_content_bytes ({content})" in text, text
    assert f"set max_body_bytes to at least {content}" in text, text


@pytest.mark.parametrize(("body", "content"), ACCEPTED)
def test_the_service_takes_a_body_limit_not_below(tmp_path: Path, body: int | None, content: int | None) -> None:
    create_app(_config(tmp_path, body, content), auth=False)


def test_serve_refuses_it_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(f"[limits]\nmax_body_bytes = {MIB}\nmax_content_bytes = {2 * MIB}\n")
    res = CliRunner().invoke(cli, ["--config", str(tmp_path / "c.toml"), "--data-dir", str(tmp_path / "data"),
                                   "serve", "--no-auth", "--port", str(free_port())], obj=CliState())
    assert res.exit_code == ERROR_EXIT, res.output
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert f"max_body_bytes ({MIB})" in res.stderr and f"max_content_bytes ({2 * MIB})" in res.stderr


def test_a_library_user_is_not_refused(tmp_path: Path, embedder: FastEmbedder) -> None:
    """The library never reads max_body_bytes: a message past it (within the content
    limit) is stored."""
    cfg = _config(tmp_path, 64 * KIB, 256 * KIB)
    big = {"role": "user", "content": "x" * (128 * KIB)}
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        assert mem.append("big", big) == 0
        assert mem.history("big")[0].body == big
