"""Lowering `max_id_chars` leaves what a higher limit made readable and erasable.

`max_id_chars` bounds the ids a conversation or namespace is CREATED under (an append, a
fork's new id, an import). Every other call names stored data and checks an id against
the bound of any config (`MAX_ID_CHARS_LIMIT`). Before, every lookup checked the
configured limit: a 100-character conversation id created under the default 128, the
store reopened with `max_id_chars = 32`, and `history`, `delete_conversation`,
`delete_namespace` (of a 95-character namespace), `tiermem delete`, `HTTP DELETE` all
answered "exceeds the limit of 32"; `delete_namespace('')` is refused, so a long id of the
root namespace could be erased only by raising the limit again (the right to erasure
broken). An append to such a conversation is still refused naming today's limit: the
limit is checked on every append (lowering it stops the conversation's growth, nothing
is written). Real SQLite files, real PostgreSQL (tests/pg_server.py), the real CLI, the
real HTTP app."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm
from fastapi.testclient import TestClient
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.errors import ConversationNotFound, LimitExceeded
from tiermem.service import create_app
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

LOWERED = 32  # characters: the max_id_chars set after the data was made (the default is 128)
LOWERED_TOML = f"[limits]\nmax_id_chars = {LOWERED}\n"
LONG_CID = "user-" + "x" * 95  # 100 characters, of the default namespace
LONG_NS = "acme/" + "n" * 90  # 95 characters
NS_CONV = "c"  # the conversation of LONG_NS
SECRET = "my secret is 1234"
TENANT_SECRET = "tenant secret"
REFUSED = f"exceeds the limit of {LOWERED} characters"
NS_HEADER = "X-Tiermem-Namespace"


def make_store(cfg: Config, embedder: FastEmbedder) -> None:
    """The two long-named conversations and a short one, under the default limit."""
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append(LONG_CID, {"role": "user", "content": SECRET})
        mem.namespaced(LONG_NS).append(NS_CONV, {"role": "user", "content": TENANT_SECRET})
        mem.append("short", {"role": "user", "content": "kept"})


def lowered(cfg: Config) -> Config:
    return cfg.model_copy(update={"max_id_chars": LOWERED})


def opened(cfg: Config, embedder: FastEmbedder) -> Memory:
    return Memory(lowered(cfg), embedder=embedder, hot=False, background_indexing=False)


def contents(msgs: list[Any]) -> str:
    return " ".join(m.body["content"] for m in msgs)


# each: what a user does under the lowered limit; returns what it showed
Action = Callable[[Config, FastEmbedder, Path], str]


def library_history(cfg: Config, embedder: FastEmbedder, _tmp: Path) -> str:
    with opened(cfg, embedder) as mem:
        return contents(mem.history(LONG_CID))


def library_namespaced_history(cfg: Config, embedder: FastEmbedder, _tmp: Path) -> str:
    with opened(cfg, embedder) as mem:
        return contents(mem.namespaced(LONG_NS).history(NS_CONV))


def library_pin(cfg: Config, embedder: FastEmbedder, _tmp: Path) -> str:
    with opened(cfg, embedder) as mem:
        mem.pin(LONG_CID, 0)
        mem.unpin(LONG_CID, 0)
        return contents(mem.history(LONG_CID))


def library_delete_conversation(cfg: Config, embedder: FastEmbedder, _tmp: Path) -> str:
    with opened(cfg, embedder) as mem:
        return f"{mem.delete_conversation(LONG_CID).conversations} erased"


def library_delete_namespace(cfg: Config, embedder: FastEmbedder, _tmp: Path) -> str:
    with opened(cfg, embedder) as mem:
        return f"{mem.delete_namespace(LONG_NS).conversations} erased"


def cli(*args: str) -> Action:
    def run(cfg: Config, embedder: FastEmbedder, tmp: Path) -> str:
        r = tm(tmp, embedder, LOWERED_TOML, *args)
        assert r.exit_code == 0, r.output
        return r.stdout
    return run


def http(method: str, path: str, namespace: str | None = None) -> Action:
    def run(cfg: Config, embedder: FastEmbedder, _tmp: Path) -> str:
        with opened(cfg, embedder) as mem:
            app = create_app(lowered(cfg), mem, auth=False, namespace="default", start_scheduler=False)
            with TestClient(app, base_url="http://127.0.0.1") as c:
                r = c.request(method, path, headers={NS_HEADER: namespace} if namespace else {})
                assert r.status_code == 200, (r.status_code, r.text)
                return r.text
    return run


# (what the user does, what it must show, which conversations it erases)
CASES: list[tuple[Action, str, set[str]]] = [
    # the library reads the long id
    (library_history, SECRET, set()),
    # and the long namespace
    (library_namespaced_history, TENANT_SECRET, set()),
    # pins name a stored conversation too
    (library_pin, SECRET, set()),
    # the library erases the long id (the root namespace cannot be erased whole)
    (library_delete_conversation, "1 erased", {LONG_CID}),
    # and the long namespace
    (library_delete_namespace, "1 erased", {NS_CONV}),
    # the export of the long namespace (its conversation's id is short: import takes it)
    (cli("--namespace", LONG_NS, "export"), TENANT_SECRET, set()),
    # tiermem history of the long id
    (cli("history", LONG_CID), SECRET, set()),
    # tiermem delete of the long id
    (cli("delete", LONG_CID, "--json"), '"conversations": 1', {LONG_CID}),
    # tiermem delete-namespace of the long namespace
    (cli("delete-namespace", LONG_NS, "--yes", "--json"), '"conversations": 1', {NS_CONV}),
    # HTTP read of the long id
    (http("GET", f"/v1/conversations/{LONG_CID}/history"), SECRET, set()),
    # HTTP DELETE of the long id
    (http("DELETE", f"/v1/conversations/{LONG_CID}"), '"conversations":1', {LONG_CID}),
    # HTTP DELETE of the long namespace, named in the header
    (http("DELETE", "/v1/namespace", LONG_NS), '"conversations":1', {NS_CONV}),
]
CASE_IDS = ["lib-history", "lib-ns-history", "lib-pin", "lib-delete", "lib-delete-ns", "cli-export-ns",
            "cli-history", "cli-delete", "cli-delete-ns", "http-history", "http-delete", "http-delete-ns"]


def left(cfg: Config, embedder: FastEmbedder) -> set[str]:
    """Which of the two long-named conversations are still stored (read under the default
    limit, which reads both)."""
    out = set()
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        for cid, view in ((LONG_CID, mem), (NS_CONV, mem.namespaced(LONG_NS))):
            try:
                view.history(cid)
                out.add(cid)
            except ConversationNotFound:
                pass
        assert [m.body["content"] for m in mem.history("short")] == ["kept"]  # never touched
    return out


@pytest.mark.parametrize(("action", "shows", "erases"), CASES, ids=CASE_IDS)
def test_stored_long_ids_stay_readable_and_erasable(tmp_path: Path, embedder: FastEmbedder, action: Action,
                                                     shows: str, erases: set[str]) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    make_store(cfg, embedder)
    shown = action(cfg, embedder, tmp_path)
    assert shows in shown, shown
    assert left(cfg, embedder) == {LONG_CID, NS_CONV} - erases


def test_postgres_reads_and_erases_a_long_id(tmp_path: Path, embedder: FastEmbedder, pg_url: str) -> None:
    cfg = Config(data_dir=tmp_path / "data", cold_url=pg_url, cold_schema=fresh_schema())  # type: ignore[arg-type]
    make_store(cfg, embedder)
    assert library_history(cfg, embedder, tmp_path) == SECRET
    assert library_delete_conversation(cfg, embedder, tmp_path) == "1 erased"
    assert library_delete_namespace(cfg, embedder, tmp_path) == "1 erased"
    assert left(cfg, embedder) == set()


# (what the user does under the lowered limit: an append that would write under a long id)
APPENDS: list[Callable[[Memory], Any]] = [
    # to the stored long conversation: refused as on the code before (the limit bounds writes)
    lambda mem: mem.append(LONG_CID, {"role": "user", "content": "more"}),
    # in the stored long namespace
    lambda mem: mem.namespaced(LONG_NS).append(NS_CONV, {"role": "user", "content": "more"}),
    # a new conversation past the lowered limit
    lambda mem: mem.append("n" * (LOWERED + 1), {"role": "user", "content": "new"}),
    # a fork whose new id is past it
    lambda mem: mem.fork("short", 0, new_id="f" * (LOWERED + 1)),
    # a fork in the stored long namespace: its child is a new conversation there
    lambda mem: mem.namespaced(LONG_NS).fork(NS_CONV, 0),
]


@pytest.mark.parametrize("append", APPENDS,
                         ids=["append-long-conv", "append-long-ns", "new-conv", "fork-new-id", "fork-in-long-ns"])
def test_writes_under_a_long_id_are_still_refused_naming_the_limit(tmp_path: Path, embedder: FastEmbedder,
                                                                   append: Callable[[Memory], Any]) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    make_store(cfg, embedder)
    with opened(cfg, embedder) as mem:
        with pytest.raises(LimitExceeded, match=REFUSED):
            append(mem)
        assert len(mem.history(LONG_CID)) == 1 and len(mem.namespaced(LONG_NS).history(NS_CONV)) == 1
        assert sorted(mem.conversations()) == sorted([LONG_CID, "short"])  # nothing created
        assert mem.namespaced(LONG_NS).conversations() == [NS_CONV]


# (the HTTP append under the lowered limit, where the refusal is located)
HTTP_WRITES = [
    (f"/v1/conversations/{LONG_CID}/messages", None, ["path", "conversation_id"]),  # the stored long id
    (f"/v1/conversations/{NS_CONV}/messages", LONG_NS, ["header", NS_HEADER]),  # in the stored long namespace
]


@pytest.mark.parametrize(("path", "namespace", "loc"), HTTP_WRITES, ids=["append-long-conv", "append-long-ns"])
def test_http_appends_under_a_long_id_are_refused_naming_the_limit(tmp_path: Path, embedder: FastEmbedder, path: str,
                                                                   namespace: str | None, loc: list[str]) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    make_store(cfg, embedder)
    with opened(cfg, embedder) as mem:
        app = create_app(lowered(cfg), mem, auth=False, namespace="default", start_scheduler=False)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            r = c.post(path, json={"role": "user", "content": "more"}, headers={NS_HEADER: namespace} if namespace else {})
            assert r.status_code == 422, r.text
            assert r.json()["detail"][0]["loc"] == loc and REFUSED in r.json()["detail"][0]["msg"], r.text
    assert left(cfg, embedder) == {LONG_CID, NS_CONV}
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        assert len(mem.history(LONG_CID)) == 1 and len(mem.namespaced(LONG_NS).history(NS_CONV)) == 1


# (the CLI command under the lowered limit, the argument the usage error names)
CLI_WRITES = [
    (["append", LONG_CID, "--role", "user", "--content", "more"], "'CONVERSATION'"),  # the stored long id
    (["--namespace", LONG_NS, "append", NS_CONV, "--role", "user", "--content", "more"], "'--namespace'"),
    (["fork", "short", "0", "--new-id", "f" * (LOWERED + 1)], "'--new-id'"),  # a new id past the limit
]


@pytest.mark.parametrize(("args", "names"), CLI_WRITES, ids=["append-long-conv", "append-long-ns", "fork-new-id"])
def test_cli_writes_under_a_long_id_are_usage_errors(tmp_path: Path, embedder: FastEmbedder, args: list[str],
                                                     names: str) -> None:
    cfg = Config(data_dir=tmp_path / "data")
    make_store(cfg, embedder)
    r = tm(tmp_path, embedder, LOWERED_TOML, *args)
    assert r.exit_code == 2 and names in r.stderr and REFUSED in r.stderr, r.output
    assert left(cfg, embedder) == {LONG_CID, NS_CONV}
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        assert len(mem.history(LONG_CID)) == 1 and sorted(mem.conversations()) == sorted([LONG_CID, "short"])
