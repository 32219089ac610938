"""`tiermem import` reads a pipe: `zcat f.jsonl.gz | tiermem import /dev/stdin`, or
`tiermem import <(zcat f.jsonl.gz)`, the way to import a compressed file. The reader
took every path that is not a regular file for a missing one ("no such file" for a pipe
that was there), and read a LoCoMo file twice, which a pipe cannot give (a bug hunt,
2026-12-06)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import tm
from convo_fixtures import support_lines, tiny_locomo

from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

WRITER_JOIN_S = 5.0  # the writer ends once the import has read the pipe to its end


@contextmanager
def piped(tmp_path: Path, text: str) -> Iterator[Path]:
    """A named pipe a thread writes `text` into, as a shell's `<(...)` or `| ... /dev/stdin`."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def write() -> None:
        with fifo.open("w", encoding="utf-8") as fh:  # blocks until the import opens it
            fh.write(text)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    yield fifo
    writer.join(WRITER_JOIN_S)
    if writer.is_alive():  # the import never opened the pipe: read it here, so the writer ends
        fifo.read_text(encoding="utf-8")
        writer.join()


# (id, what the pipe carries, format, messages)
PIPED: list[tuple[str, str, str, int]] = [
    # JSONL, the export's own format
    ("jsonl", "".join(json.dumps(x) + "\n" for x in support_lines("a")), "conversations", 19),
    # a JSON list of the same lines
    ("json_list", json.dumps(support_lines("a")), "conversations", 19),
    # a LoCoMo file: told apart by its content, then its samples read (once)
    ("locomo", json.dumps(tiny_locomo()), "locomo", 4),
]


@pytest.mark.parametrize(("text", "fmt", "messages"), [p[1:] for p in PIPED], ids=[p[0] for p in PIPED])
def test_an_import_reads_a_pipe(tmp_path: Path, embedder: FastEmbedder, text: str, fmt: str,
                                messages: int) -> None:
    with piped(tmp_path, text) as fifo:
        r = tm(tmp_path, embedder, "", "import", str(fifo), "--json")
    assert r.exit_code == 0, r.output
    report: dict[str, Any] = json.loads(r.stdout)
    assert (report["format"], report["appended"]) == (fmt, messages)


def test_a_missing_file_is_still_named_missing(tmp_path: Path, embedder: FastEmbedder) -> None:
    r = tm(tmp_path, embedder, "", "import", str(tmp_path / "nope.jsonl"))
    # a usage error naming FILE (exit 2), as README's rule says of a bad value on the command line
    assert r.exit_code == 2 and "nope.jsonl: no such file" in r.stderr and "Traceback" not in r.output
