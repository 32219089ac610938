"""Bad values on the `tiermem` command line are usage errors (exit 2) naming the option or
argument, before anything is opened: an empty --namespace or --new-id, text that is not
valid UTF-8 (argv bytes reach Python as lone surrogates), and numbers past the bounds the
library holds (positions, page sizes, ages). Real data dirs, the real console script for
the argv bytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tiermem.cli import CliState, cli
from tiermem.memory import MAX_AGE_S, MAX_HISTORY_PAGE
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import MAX_POSITION
from tiermem.tiers.redis_server import EmbeddedRedis

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
USAGE_EXIT = 2
BAD_BYTE = "\udcff"  # what the byte 0xff of an argument becomes in Python (surrogateescape)
CONV = "c"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: FastEmbedder) -> Iterator[Path]:
    for key in list(os.environ):
        if key.startswith("TIERMEM_"):
            monkeypatch.delenv(key)
    data = tmp_path / "data"
    # one conversation in the default namespace: a command that ignored a bad option would act on it
    seeded = invoke(data, embedder, "append", CONV, "--role", "user", "--content", "hello there")
    assert seeded.exit_code == 0, seeded.output
    yield data
    EmbeddedRedis(data).stop()  # a no-op unless a command started it


def invoke(data: Path, embedder: FastEmbedder, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--data-dir", str(data), *args], obj=CliState(embedder=embedder))


# (the arguments, how the error must name the option or argument)
USAGE_ERRORS = [
    (["--namespace", "", "history", CONV], "'--namespace'"),                    # acted in `default`
    (["--namespace", f"ns{BAD_BYTE}", "history", CONV], "'--namespace'"),       # not UTF-8
    (["fork", CONV, "0", "--new-id", ""], "'--new-id'"),                        # was `conversation_id: ...`
    (["fork", CONV, "0", "--new-id", "no spaces"], "'--new-id'"),               # not an id: named, not the parent
    (["context", CONV, "--query", f"q {BAD_BYTE}"], "'--query'"),               # was a TypeError
    (["context", CONV, "--query", "q", "--system", f"s {BAD_BYTE}"], "'--system'"),  # was a codec error
    (["search", "-c", CONV, f"q {BAD_BYTE}"], "'QUERY'"),                       # was a codec error
    (["search", "-c", f"c{BAD_BYTE}", "q"], "'--conversation'"),                # an id that is not UTF-8
    (["append", CONV, "--role", "user", "--content", f"x {BAD_BYTE}"], "'--content'"),  # exit 1, not usage
    (["append", CONV, "--role", "user", "--content", "x", "--session-id", f"s{BAD_BYTE}"], "'--session-id'"),
    (["history", f"{CONV}{BAD_BYTE}"], "'CONVERSATION'"),                       # an argument, not an option
    (["export", f"{CONV}{BAD_BYTE}"], "'[CONVERSATIONS]...'"),                   # one of many arguments
    (["delete-namespace", "", "--yes"], "'NAMESPACE'"),                         # empty: was exit 1
    (["history", CONV, "--after", "9223372036854775800", "--limit", "100"], "'--after'"),  # was an OverflowError
    (["history", CONV, "--after", str(MAX_POSITION + 1)], "'--after'"),          # just past the last position
    (["history", CONV, "--limit", str(MAX_HISTORY_PAGE + 1)], "'--limit'"),      # past the page the library serves
    (["pin", CONV, str(MAX_POSITION + 1)], "'POSITION'"),                        # was exit 1 from the library
    (["unpin", CONV, str(MAX_POSITION + 1)], "'POSITION'"),                      # the same
    (["fork", CONV, str(MAX_POSITION + 1)], "'UP_TO'"),                          # the same
    (["prune", "--older-than", "9" * 400 + "w"], "'--older-than'"),              # an infinite age: was exit 1
    (["prune", "--older-than", str(int(MAX_AGE_S) + 1)], "'--older-than'"),      # just past the longest age
    (["consolidate", "--interval", "nan"], "'--interval'"),                      # NaN passes a range check
    (["consolidate", "--interval", "inf"], "'--interval'"),                      # sleeping forever overflows
]


@pytest.mark.parametrize(("args", "named"), USAGE_ERRORS)
def test_bad_values_are_usage_errors_naming_the_option(
        args: list[str], named: str, data_dir: Path, embedder: FastEmbedder) -> None:
    r = invoke(data_dir, embedder, *args)
    assert r.exit_code == USAGE_EXIT, (r.exit_code, r.output)
    assert named in r.stderr and "Traceback" not in r.output, r.output


# (the arguments, what the output holds): the bounds and checks take nothing valid away
STILL_ACCEPTED = [
    (["--namespace", "default", "history", CONV, "--json"], "hello there"),    # a namespace given explicitly
    (["history", CONV, "--after", str(MAX_POSITION), "--json"], "[]"),          # the last position: an empty page
    (["history", CONV, "--limit", str(MAX_HISTORY_PAGE), "--json"], "hello"),   # the largest page
    (["search", "-c", CONV, "café olé ☕", "--json"], "["),                      # valid non-ASCII text
    (["fork", CONV, "0", "--new-id", "copy-1"], "copy-1"),                      # a good new id
]


@pytest.mark.parametrize(("args", "shown"), STILL_ACCEPTED)
def test_valid_values_still_work(
        args: list[str], shown: str, data_dir: Path, embedder: FastEmbedder) -> None:
    r = invoke(data_dir, embedder, *args)
    assert r.exit_code == 0 and shown in r.stdout, r.output


def test_argv_bytes_that_are_not_utf8_through_the_console_script(data_dir: Path) -> None:
    # the real path: the OS hands bytes, Python decodes them with surrogateescape
    out = subprocess.run([TIERMEM, "--data-dir", str(data_dir), "context", CONV, "--query", b"q \xff"],
                         capture_output=True, timeout=180)
    err = out.stderr.decode("utf-8", "replace")
    assert out.returncode == USAGE_EXIT and "'--query'" in err and "byte 0xff" in err, err
    assert "Traceback" not in err


def test_skipped_import_lines_name_the_file_and_line(
        tmp_path: Path, data_dir: Path, embedder: FastEmbedder) -> None:
    f = tmp_path / "in.jsonl"
    good = json.dumps({"conversation_id": "imp", "role": "user", "content": "fine"})
    bad = json.dumps({"conversation_id": "imp", "role": "user", "content": [{"type": ["text"], "text": "x"}]})
    f.write_text(f"{good}\n{bad}\n")
    r = invoke(data_dir, embedder, "import", str(f), "--skip-bad")
    assert r.exit_code == 0, r.output
    # FILE:LINE: field: problem, as a compiler names a place
    assert f"skipped {f}:2: content[0].type" in r.stderr, r.stderr
