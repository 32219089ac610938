"""A chunked add over the Client against an older server is refused whole, not half-written.

The service's JSON integer limit was 40 digits until 34c6621 raised it to the library's
1,000 and /v1/limits began to say it (`max_json_int_digits`). This Client sends an Agents
session's (or LangChain's) add past the server's `max_body_bytes` in chunks, each message
checked first; it checked integers against the library's limit only, so against a
c4cdf78 server (a real `tiermem serve` child run from a git archive copy of that commit)
5 items of 2.7 MB with a 78-digit integer in the last one stored the first chunk's 2
rows, then the server refused the chunk holding the integer (422, "more than 40").
Now a server whose limits do not say `max_json_int_digits` is held to the old limit
(`OLD_SERVER_INT_DIGITS`) before the first chunk is sent: nothing is written, the
refusal names the item and the limit. A server that says its limit is held to it
(1,000 here: the 78-digit integer is stored).

Fails before the fix: 2 of 5, the 78- and 41-digit cases against the old server (2 rows
stored, the server's 422 raised after them).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from client_helpers import NS
from hash_embedder import HashEmbedder
from ports import free_port
from service_helpers import NO_HOT_TIER_URL, SCOPED_TOKENS, TOKEN_ACME, serve_in_thread, serve_process

from tiermem import Config, Memory
from tiermem.adapters.openai_agents import TiermemSession
from tiermem.client import OLD_SERVER_INT_DIGITS, Client
from tiermem.errors import ValidationError

REPO = Path(__file__).resolve().parent.parent
OLD_RELEASE = "c4cdf78"  # its /v1/limits has no max_json_int_digits; its guard refused past 40 digits
BIG_TEXT_CHARS = 900_000  # 3 such items pass the server's 2 MiB max_body_bytes: 2 chunks at least
UINT256_DIGITS = 78  # a uint256 amount: within the library's limit, past the old server's


def _items(digits: int) -> list[dict[str, Any]]:
    """An Agents turn of 5 items past one request, the last holding an integer of `digits`
    digits (in an annotation of the assistant's output text: stored as given)."""
    big = "x" * BIG_TEXT_CHARS
    return [{"role": "user", "content": big + str(i)} for i in range(3)] + [
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "done",
                                           "annotations": [{"type": "x", "n": 10 ** (digits - 1)}]}]}]


@pytest.fixture(scope="module")
def old_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A `tiermem serve --no-auth` child of the OLD_RELEASE tree (git archive), no hot tier."""
    root = tmp_path_factory.mktemp("old-server")
    tree = root / "tree"
    tree.mkdir()
    archive = root / "old.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), OLD_RELEASE], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="tar")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    env.update({"TIERMEM_REDIS_URL": NO_HOT_TIER_URL, "TIERMEM_SCHEDULER_ENABLED": "false",
                "PYTHONPATH": str(tree)})
    with serve_process(root / "data", free_port(), root / "serve.log", "--no-auth", env=env, cwd=tree) as url:
        yield url


def _add(client: Client, conv: str, items: list[dict[str, Any]]) -> None:
    asyncio.run(TiermemSession(client, conv).add_items(items))


def _rows(client: Client, conv: str) -> int:
    return len(client.history(conv)) if conv in client.conversations() else 0


def test_the_old_server_is_the_old_one(old_server: str) -> None:
    with Client(old_server, namespace=NS) as client:
        limits = client.limits()
    assert limits is not None and limits.max_json_int_digits is None and limits.conditional_appends


# (id, digits of the last item's integer, rows stored): against the old server
OLD_SERVER_CASES: list[tuple[str, int, int]] = [
    ("uint256: past the old limit, refused whole", UINT256_DIGITS, 0),
    ("one digit past the old limit, refused whole", OLD_SERVER_INT_DIGITS + 1, 0),
    ("at the old limit: all stored", OLD_SERVER_INT_DIGITS, 5),
]


@pytest.mark.parametrize(("digits", "stored"), [c[1:] for c in OLD_SERVER_CASES], ids=[c[0] for c in OLD_SERVER_CASES])
def test_an_add_past_the_old_servers_int_limit_writes_nothing(old_server: str, digits: int, stored: int) -> None:
    conv = f"ag-{digits}"
    with Client(old_server, namespace=NS) as client:
        if stored:
            _add(client, conv, _items(digits))
        else:
            with pytest.raises(ValidationError) as refused:
                _add(client, conv, _items(digits))
            assert _rows(client, conv) == 0  # before: the first chunk's 2 rows
            # named as the add names its items, with the old server's limit
            assert refused.value.field == "messages[4].content[0].annotations[0].n"
            assert f"{digits} digits" in str(refused.value) and "OLD_SERVER_INT_DIGITS" in str(refused.value)
        assert _rows(client, conv) == stored


def test_a_server_that_says_its_limit_is_held_to_it(tmp_path: Path) -> None:
    cfg = Config(data_dir=tmp_path / "data", auth_tokens=SCOPED_TOKENS)  # default limits: 2 MiB bodies
    with Memory(cfg, embedder=HashEmbedder(), hot=False, background_indexing=False) as mem, \
            serve_in_thread(cfg, mem) as url, Client(url, token=TOKEN_ACME, namespace=NS) as client:
        limits = client.limits()
        assert limits is not None and limits.max_json_int_digits is not None
        assert limits.max_json_int_digits > UINT256_DIGITS
        _add(client, "ag-new", _items(UINT256_DIGITS))
        assert _rows(client, "ag-new") == 5
