"""Two CLI gaps the README walk found. `append --role` offers every chat role a text
message may have, `developer` included (the README lists it, the library stores it;
before, click refused it: "'developer' is not one of 'system', 'user', 'assistant',
'tool'"). And `tiermem conversations` lists a namespace's conversation ids, as the
library (`Memory.conversations`), `GET /v1/conversations` and `Client.conversations` do;
before, the CLI had no such command ("No such command 'conversations'"). Real CLI
(click's runner, in process), real SQLite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hash_embedder import HashEmbedder

from tiermem import Config, Memory
from tiermem.cli import CliState, cli
from tiermem.tiers.formats import CHAT_ROLES

pytestmark = pytest.mark.usefixtures("clean_env")


def _tm(tmp_path: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), *args], obj=CliState(embedder=HashEmbedder()))


# (the role, the extra arguments it needs)
ROLE_CASES: list[tuple[str, list[str]]] = [
    # the README's: an instruction from the developer
    ("developer", []),
    # the others, as before
    ("system", []),
    ("user", []),
    ("assistant", []),
    # a tool's answer names the call it answers
    ("tool", ["--tool-call-id", "call_1"]),
]


@pytest.mark.parametrize(("role", "extra"), ROLE_CASES)
def test_append_takes_each_chat_role(tmp_path: Path, role: str, extra: list[str]) -> None:
    r = _tm(tmp_path, "append", "c", "--role", role, "--content", "Answer in one line.", *extra)
    assert r.exit_code == 0, r.output
    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as mem:
        stored = mem.history("c")
    # the body as given (its role kept: the index files a developer message as system)
    assert [m.body["role"] for m in stored] == [role] and stored[0].body["content"] == "Answer in one line."


def test_the_help_lists_the_readme_roles() -> None:
    text = CliRunner().invoke(cli, ["append", "--help"]).output
    listed = {r for r in CHAT_ROLES if r != "function"}  # function needs a name: --json-file
    assert all(r in text for r in listed) and "developer" in text, text


def _seed(tmp_path: Path) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as mem:
        for conv in ("trip", "alpha"):
            mem.append(conv, {"role": "user", "content": "hello"})
        mem.append("other", {"role": "user", "content": "hi"}, namespace="acme")
        mem.append("deeper", {"role": "user", "content": "hi"}, namespace="acme/alice")


# (the global options, the ids listed: exactly that namespace's, in the library's order)
LIST_CASES: list[tuple[list[str], list[str]]] = [
    # the default namespace
    ([], ["alpha", "trip"]),
    # another namespace: its own, not the one below it
    (["--namespace", "acme"], ["other"]),
    # the one below
    (["--namespace", "acme/alice"], ["deeper"]),
    # a namespace with none
    (["--namespace", "nobody"], []),
]


@pytest.mark.parametrize(("options", "expected"), LIST_CASES)
def test_conversations_lists_the_namespaces_ids(tmp_path: Path, options: list[str], expected: list[str]) -> None:
    _seed(tmp_path)
    r = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), *options, "conversations"],
                           obj=CliState(embedder=HashEmbedder()))
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == expected, r.stdout
    assert ("no conversations" in r.stderr) == (not expected), r.stderr
    j = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), *options, "conversations", "--json"],
                           obj=CliState(embedder=HashEmbedder()))
    assert j.exit_code == 0, j.output
    namespace = options[1] if options else "default"
    assert json.loads(j.stdout) == {"namespace": namespace, "conversations": expected}
    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as mem:
        assert mem.conversations(namespace) == expected  # the library's answer


def test_conversations_on_a_missing_data_dir_creates_nothing(tmp_path: Path) -> None:
    r = _tm(tmp_path, "conversations")
    assert r.exit_code == 1 and r.stderr.startswith("error: "), r.output
    assert not (tmp_path / "data").exists()


def test_conversations_has_a_one_line_help() -> None:
    text = CliRunner().invoke(cli, ["--help"]).output
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("conversations "))
    assert "conversation ids" in line, line
