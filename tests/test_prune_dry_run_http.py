"""`POST /v1/prune` with `"dry_run": true`, and `Client.prune(dry_run=True)`: the answer
lists what a prune would erase now (`"dry_run": true` in it) and nothing is erased; a
non-boolean `dry_run` is refused (422 naming it), erasing nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from service_helpers import TOKEN_ACME, Served, bearer, served_store

from tiermem import Config
from tiermem.client import Client

pytestmark = pytest.mark.usefixtures("clean_env")

NS = "acme"
IDLE_S = 0.2  # a conversation idle this long is within `older_than_seconds=IDLE_S`


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with served_store(Config(data_dir=tmp_path / "data", auth_tokens={TOKEN_ACME: NS})) as served:
        served.memory.append("old", {"role": "user", "content": "the old thread"}, namespace=NS)
        time.sleep(2 * IDLE_S)
        yield served


def test_client_dry_run_lists_and_erases_nothing(served: Served) -> None:
    with Client(served.url, token=TOKEN_ACME) as client:
        preview = client.prune(IDLE_S, dry_run=True)
        assert (preview.conversations, preview.messages, preview.conversation_ids) == (1, 1, ["old"])
        assert preview.tombstones == []
        assert served.memory.conversations(namespace=NS) == ["old"]
        assert client.prune(IDLE_S).conversation_ids == ["old"]  # the real one erases what was listed


# (dry_run sent, the status): JSON booleans only; a string or a number is no boolean
@pytest.mark.parametrize(("dry_run", "status"), [
    (True, 200),  # the dry run
    ("true", 422),  # a string, refused (strict), never read as true or false
    (1, 422),  # a number likewise
], ids=["true", "string", "number"])
def test_http_dry_run_answers_and_keeps(served: Served, dry_run: object, status: int) -> None:
    r = httpx.post(f"{served.url}/v1/prune", json={"older_than_seconds": IDLE_S, "dry_run": dry_run},
                   headers=bearer(TOKEN_ACME), timeout=60.0)
    assert r.status_code == status, r.text
    if status == 200:
        assert r.json()["dry_run"] is True and r.json()["conversation_ids"] == ["old"]
    else:
        assert r.json()["detail"][0]["loc"][-1] == "dry_run"
    assert served.memory.conversations(namespace=NS) == ["old"]
    assert served.memory.tombstones(namespace=NS) == []
