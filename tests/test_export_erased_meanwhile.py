"""An export of a whole namespace goes on past a conversation erased while it runs. It
listed the namespace's conversations once, then read each: one erased (or pruned) by
another client between the listing and its reading raised ConversationNotFound and
stopped the export, leaving (to stdout) a partial file that looked usable (a review,
2026-12-06). An erased conversation is rightly not exported: it is left out and reported
(`ExportReport.vanished`, a note on stderr from `tiermem export`); a conversation the
caller named still fails. The erasure is another process's, on the same SQLite file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cold_helpers import child_env

from tiermem.config import Config
from tiermem.evals.conversations import ExportReport, export_lines
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import ConversationNotFound

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

CONVS = ["a", "b", "c"]
TURNS = 3  # messages of each conversation
CHILD_TIMEOUT_S = 120  # a child process imports tiermem (a few seconds on 2 shared cores)
ERASE = """
import sys
from tiermem.config import Config
from tiermem.memory import Memory
with Memory(Config(data_dir=sys.argv[1]), hot=False, background_indexing=False) as mem:
    mem.delete_conversation(sys.argv[2])
"""


def erase_in_another_process(data: Path, conv: str) -> None:
    subprocess.run([sys.executable, "-c", ERASE, str(data), conv], env=child_env(), check=True,
                   timeout=CHILD_TIMEOUT_S)


def store(data: Path, embedder: FastEmbedder) -> Memory:
    mem = Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False)
    for c in CONVS:
        mem.append_many(c, [{"role": "user", "content": f"{c}{i}"} for i in range(TURNS)])
    return mem


def test_a_conversation_erased_after_the_listing_is_left_out(tmp_path: Path, embedder: FastEmbedder) -> None:
    report = ExportReport()
    with store(tmp_path, embedder) as mem:
        lines = export_lines(mem, None, namespace="default", report=report)
        first = next(lines)  # the listing is taken, the first conversation being read
        erase_in_another_process(tmp_path, "b")
        rest = list(lines)
    assert [x["conversation_id"] for x in [first, *rest]] == ["a"] * TURNS + ["c"] * TURNS
    assert report.vanished == ["b"]
    assert report.complete  # nothing of what was exported is missing


def test_a_named_conversation_erased_meanwhile_still_fails(tmp_path: Path, embedder: FastEmbedder) -> None:
    with store(tmp_path, embedder) as mem:
        lines = export_lines(mem, CONVS, namespace="default")
        next(lines)
        erase_in_another_process(tmp_path, "b")
        with pytest.raises(ConversationNotFound, match="'b'"):
            list(lines)
