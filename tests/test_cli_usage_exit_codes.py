"""A bad value on the command line is a usage error (exit 2) on every command, naming the
argument; 1 is for what fails while running (README, CLI: "2 usage, 1 error").

Before, the same kind of bad value exited 2 or 1 by where it was checked: click's types
(`--budget 0`, `-k 0`, a position, `--timezone`, `--idempotency-key`, fork's `--new-id`)
exited 2, while a conversation id (`fork 'bad!' 0` beside `fork c1 0 --new-id 'bad!'`), a
`--namespace` and `--session-id` went to the library and exited 1. Now those are checked
while the arguments are parsed (conversation ids against the config's max_id_chars, the
namespace when the command first needs it), before anything is opened or written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import tm

from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

BAD_ID = "bad id!"  # a space and a '!': no id
BAD_NS = "a/../b"

# (the arguments, the parameter the usage error names) -- each exits 2; before: 1 unless noted
USAGE = [
    (["append", BAD_ID, "--role", "user", "--content", "x"], "'CONVERSATION'"),
    (["history", BAD_ID], "'CONVERSATION'"),
    (["context", BAD_ID], "'CONVERSATION'"),
    (["facts", BAD_ID], "'CONVERSATION'"),
    (["pin", BAD_ID, "0"], "'CONVERSATION'"),
    (["unpin", BAD_ID, "0"], "'CONVERSATION'"),
    (["delete", BAD_ID], "'CONVERSATION'"),
    (["fork", BAD_ID, "0"], "'CONVERSATION'"),  # the parent: its --new-id exited 2 already
    (["fork", "c1", "0", "--new-id", BAD_ID], "'--new-id'"),  # 2 before too: the pair now agrees
    (["search", "hello", "-c", BAD_ID], "'--conversation' / '-c'"),
    (["import", "{file}", "--conversation", BAD_ID], "'--conversation'"),
    (["append", "c1", "--role", "user", "--content", "x", "--session-id", ""], "'--session-id'"),
    (["--namespace", BAD_NS, "history", "c1"], "'--namespace'"),
    (["--namespace", BAD_NS, "append", "c1", "--role", "user", "--content", "x"], "'--namespace'"),
    (["--namespace", BAD_NS, "stats"], "'--namespace'"),
    (["--namespace", BAD_NS, "delete", "c1"], "'--namespace'"),
    (["context", "c1", "--budget", "0"], "'--budget' / '-b'"),  # a click type: 2 before too
]

# (the arguments, what the one line says) -- what fails while running stays 1
ERRORS = [
    (["history", "c9"], "not found"),  # a valid id of no conversation
    (["--namespace", "other", "history", "c1"], "not found"),  # a valid namespace without it
    (["append", "c1", "--json-file", "{bad_message}"], "role"),  # a file's content, not an argument
]


@pytest.fixture
def stored(tmp_path: Path, embedder: FastEmbedder) -> Path:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        mem.append("c1", {"role": "user", "content": "hello there"})
    (tmp_path / "in.jsonl").write_text('{"role": "user", "content": "imported"}\n')
    (tmp_path / "bad.json").write_text('{"role": "nobody", "content": "x"}')
    return tmp_path


def _args(args: list[str], root: Path) -> list[str]:
    return [a.format(file=root / "in.jsonl", bad_message=root / "bad.json") for a in args]


def _messages(root: Path, embedder: FastEmbedder) -> int:
    with Memory(Config(data_dir=root / "data"), embedder=embedder, hot=False, background_indexing=False) as mem:
        return sum(len(mem.history(c)) for c in mem.conversations())


@pytest.mark.parametrize(("args", "named"), USAGE)
def test_a_bad_argument_is_a_usage_error(stored: Path, embedder: FastEmbedder, args: list[str], named: str) -> None:
    res = tm(stored, embedder, "", *_args(args, stored))
    assert res.exit_code == 2, res.output
    assert f"Error: Invalid value for {named}" in res.stderr, res.stderr
    assert "Traceback" not in res.output
    assert _messages(stored, embedder) == 1  # nothing written, nothing erased


@pytest.mark.parametrize(("args", "says"), ERRORS)
def test_what_fails_while_running_is_an_error(stored: Path, embedder: FastEmbedder, args: list[str],
                                              says: str) -> None:
    res = tm(stored, embedder, "", *_args(args, stored))
    assert res.exit_code == 1, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], res.stderr
