"""An import holds a line of its file at a time, not the file: it checks the file in a
first reading that keeps counts and a 16-byte digest a message, then reads it again to
append chunk by chunk. Before (a bug hunt, 2026-12-06) the reader held the text, its
split lines and the parsed messages at once for its all-or-nothing check: a 200 MB JSONL
peaked at 924 MB. Measured here as the peak resident memory of a real `tiermem import`
process (Linux: ru_maxrss in KiB) on a 50 MB file whose last line is bad, so the whole
file is read and checked, then refused with nothing written; against the same command on
a one-line file, so the interpreter and the imports cancel out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.usefixtures("clean_env"),  # no TIERMEM_* setting of the runner leaks in
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB is Linux's")]

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
FILE_BYTES = 50_000_000
CONTENT_CHARS = 5_000  # a message's text: ~10,000 lines
CONVERSATIONS = 50
# the peak may grow by at most this share of the file's size (the code before: ~4x; now the
# line being read, a few blocks of buffers, 16 bytes a message)
MAX_GROWTH_PER_FILE_BYTE = 0.5
KIB = 1024
RUN_TIMEOUT_S = 600
BAD_LINE = '{"conversation_id": "c-0", "role": "user"}\n'  # no content: refused, after every good line
# the child's peak resident memory, printed by its parent (this small wrapper)
MEASURE = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
           "stderr=subprocess.PIPE); sys.stderr.write(r.stderr.decode()); "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def write_file(path: Path, size: int) -> Path:
    text = ("the refund goes back to the card it came from " * (CONTENT_CHARS // 40))[:CONTENT_CHARS]
    with path.open("w", encoding="utf-8") as fh:
        written, i = 0, 0
        while written < size:
            line = json.dumps({"conversation_id": f"c-{i * CONVERSATIONS * CONTENT_CHARS // size}",
                               "message_id": f"m{i}", "created_at": 1_700_000_000 + i,
                               "message": {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i} {text}"}})
            fh.write(line + "\n")
            written += len(line) + 1
            i += 1
        fh.write(BAD_LINE)
    return path


def peak_bytes(tmp_path: Path, path: Path) -> int:
    out = subprocess.run([sys.executable, "-c", MEASURE, TIERMEM, "--data-dir", str(tmp_path / "data"), "import",
                          str(path)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert "nothing imported" in out.stderr, out.stderr  # refused for its last line, having read it all
    return int(out.stdout) * KIB


def test_an_import_holds_a_line_at_a_time_not_the_file(tmp_path: Path) -> None:
    small = tmp_path / "small.jsonl"
    small.write_text(BAD_LINE, encoding="utf-8")
    big = write_file(tmp_path / "big.jsonl", FILE_BYTES)
    growth = peak_bytes(tmp_path, big) - peak_bytes(tmp_path, small)
    print(f"peak growth {growth / 1e6:.1f} MB for a {FILE_BYTES / 1e6:.0f} MB file")  # shown with -s
    assert growth < FILE_BYTES * MAX_GROWTH_PER_FILE_BYTE, f"{growth / 1e6:.0f} MB more for a 50 MB file"
