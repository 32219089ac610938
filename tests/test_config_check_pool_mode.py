"""`tiermem config --check FILE` refuses a PostgreSQL store's connection settings that
`tiermem serve` refuses when it opens the store, before reaching the server
(tiers.postgres `check_pool_mode`: cold_pool_mode "transaction" cannot run
cold_erase_scrub "full", the default), with the line serve prints; settings serve opens
pass, and so does a file without cold_url (serve opens SQLite, which has no pool mode).

Before (review r_docs, session 35) --check passed such a file (exit 0) and only serve
refused it, at open.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from config_sources import CONFIG_FILE_NAME, config_check
from hash_embedder import HashEmbedder

from tiermem import Config, Memory
from tiermem.errors import ValidationError

ERROR_EXIT = 1
# a PostgreSQL URL nothing listens at: the refusal comes before any connection
COLD_URL = 'cold_url = "postgresql://u:p@127.0.0.1:1/db"\n'
TRANSACTION = 'cold_pool_mode = "transaction"\n'

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


REFUSED = [
    COLD_URL + TRANSACTION,                                # the default scrub, 'full': before, exit 0
    COLD_URL + TRANSACTION + 'cold_erase_scrub = "full"\n',  # said outright
]


@pytest.mark.parametrize("content", REFUSED)
def test_refused_with_the_line_serve_prints(tmp_path: Path, content: str) -> None:
    res = config_check(tmp_path, content)
    assert res.exit_code == ERROR_EXIT, res.output
    # what serve's open of the store raises (`open_with_fallback` opens Memory), which it
    # prints as "error: <message>"
    with pytest.raises(ValidationError) as err:
        Memory(Config.load(tmp_path / CONFIG_FILE_NAME, data_dir=tmp_path), embedder=HashEmbedder(), hot=False,
               background_indexing=False)
    assert err.value.field == "cold_pool_mode"
    assert f"error: {err.value}" in res.output, res.output


PASSES = [
    COLD_URL + TRANSACTION + 'cold_erase_scrub = "vacuum"\n',  # what the message asks for
    COLD_URL + 'cold_erase_scrub = "full"\n',                  # session mode, the default
    TRANSACTION,                                               # no cold_url: SQLite, no pool to mode
]


@pytest.mark.parametrize("content", PASSES)
def test_settings_serve_opens_pass(tmp_path: Path, content: str) -> None:
    res = config_check(tmp_path, content)
    assert res.exit_code == 0, res.output
