"""A call that loses a race with an erasure names the id its caller sent, never the
conversation's internal key, on both engines and over HTTP.

A key is the id itself the first time the id is used in the database, else
`id~<16 hex>` (another namespace used it first, or an erased incarnation did). Memory
resolves the caller's (namespace, id) to the key, then the store acts on the key; when
the conversation is erased in between (a retried DELETE, an erasure by another worker),
the store's ConversationNotFound named the key. The 404 body (`conversation
's1~3f0c...' not found`), an MCP tool error and the library's exception then told a
tenant that another namespace had used the id: README's "nothing a caller sees says
whether an id is used in another namespace". The interleaving is forced: a second
Memory (another worker of the deployment) erases the conversation right after the
first one resolved its key, at the lookup `Memory._key` makes
(`ColdLog.key_and_erasure_mark`: the key and the erasure mark in one statement since
2790f1e). Each case asserts the erasure was made, so a lookup moved elsewhere fails as
a seam that no longer fires, not as a missing not-found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pg_server import fresh_schema
from service_helpers import SCOPED_TOKENS, TOKEN_GLOBEX, bearer, serve_in_thread

from tiermem import Config, Memory
from tiermem.tiers.cold import KEY_SEPARATOR
from tiermem.tiers.embed import Embedder
from tiermem.tiers.errors import ConversationNotFound

NAME = "s1"
OWNER = "globex"

# (operation, the call that resolves the key and then acts on it)
CALLS: list[tuple[str, Callable[[Memory], Any]]] = [
    # a retried erasure: the first attempt erased it while the retry was resolving
    ("delete_conversation", lambda m: m.delete_conversation(NAME, namespace=OWNER)),
    ("pin", lambda m: m.pin(NAME, 0, namespace=OWNER)),
    ("unpin", lambda m: m.unpin(NAME, 0, namespace=OWNER)),
    ("checkpoint", lambda m: m.checkpoint(NAME, "a summary", 0, namespace=OWNER)),
    ("fork", lambda m: m.fork(NAME, 0, namespace=OWNER)),
]


@pytest.fixture(params=["sqlite", "postgres"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    if request.param == "sqlite":
        return Config(data_dir=tmp_path / "data", auth_tokens=SCOPED_TOKENS)
    url: str = request.getfixturevalue("pg_url")
    return Config(data_dir=tmp_path / "data", auth_tokens=SCOPED_TOKENS, cold_url=url, cold_schema=fresh_schema())


@pytest.fixture
def pair(config: Config, embedder: Embedder) -> Iterator[tuple[Memory, Memory]]:
    """Two Memory objects on one store (two workers); `NAME` is used first in `acme`, so
    globex's conversation of that id has a suffixed key."""
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as mem, \
            Memory(config, embedder=embedder, hot=False, background_indexing=False) as other:
        mem.append(NAME, {"role": "user", "content": "acme was here first"}, namespace="acme")
        mem.append(NAME, {"role": "user", "content": "globex's own line"}, namespace=OWNER)
        key = mem.cold.key_of(OWNER, NAME)
        assert key is not None and KEY_SEPARATOR in key  # the premise: key and id differ
        yield mem, other


def _erased_once_resolved(monkeypatch: pytest.MonkeyPatch, mem: Memory, other: Memory) -> list[str]:
    """The next time `mem` resolves globex's `NAME`, `other` erases it just after; the
    keys it erased (the race made: one)."""
    resolve = mem.cold.key_and_erasure_mark
    erased: list[str] = []

    def then_erased(namespace: str, name: str) -> tuple[str | None, int]:
        key, mark = resolve(namespace, name)  # the mark read before the erasure: the race lost
        if key is not None and (namespace, name) == (OWNER, NAME):
            other.delete_conversation(name, namespace=namespace)
            erased.append(key)
        return key, mark

    monkeypatch.setattr(mem.cold, "key_and_erasure_mark", then_erased)
    return erased


@pytest.mark.parametrize(("op", "call"), CALLS, ids=[c[0] for c in CALLS])
def test_a_call_that_lost_the_race_names_the_id(
        pair: tuple[Memory, Memory], monkeypatch: pytest.MonkeyPatch, op: str, call: Callable[[Memory], Any]) -> None:
    mem, other = pair
    erased = _erased_once_resolved(monkeypatch, mem, other)
    with pytest.raises(ConversationNotFound) as caught:
        call(mem)
    assert len(erased) == 1, "the erasure was not made between the lookup and the act"
    assert caught.value.conversation_id == NAME
    assert KEY_SEPARATOR not in str(caught.value)


def test_a_retried_delete_over_http_answers_the_missing_conversations_404(
        config: Config, pair: tuple[Memory, Memory], monkeypatch: pytest.MonkeyPatch) -> None:
    mem, other = pair
    erased = _erased_once_resolved(monkeypatch, mem, other)
    with serve_in_thread(config, mem) as url:
        got = httpx.delete(f"{url}/v1/conversations/{NAME}", headers=bearer(TOKEN_GLOBEX))
        never = httpx.delete(f"{url}/v1/conversations/never-used", headers=bearer(TOKEN_GLOBEX))
    assert len(erased) == 1, "the erasure was not made between the lookup and the act"
    assert got.status_code == never.status_code == 404, got.text
    # byte for byte what a conversation that never existed answers, but for its id
    assert got.json() == {"detail": f"conversation {NAME!r} not found"}
    assert never.json() == {"detail": "conversation 'never-used' not found"}
