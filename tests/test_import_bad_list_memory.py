"""A JSON list with a syntax error early is refused as soon as the item holding it is
read, not after the rest of the list. Before (a correctness review of the streaming
import, 2026-12-06), the list reader took every parse error for an item not read whole
yet and read on, so a 50 MB list with an error in its second item was read whole into
one string before it was refused (102 MB of peak growth here, 2 MB now). More is read
only for an error at the end of what was read (an item cut there). Measured as the
peak resident memory of a child process (Linux: ru_maxrss in KiB) over a baseline
child that refuses a one-item list, so the interpreter and the imports cancel out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB is Linux's")

FILE_BYTES = 50_000_000
CONTENT_CHARS = 200
# the peak may grow by at most this share of the file's size: a few of the reader's
# 1M-character blocks (the code before read the whole list into one string: ~2x)
MAX_GROWTH_PER_FILE_BYTE = 0.2
KIB = 1024
RUN_TIMEOUT_S = 300
ITEM = json.dumps({"conversation_id": "c", "role": "user", "content": "x" * CONTENT_CHARS})
BAD_ITEM = '{"conversation_id": oops}'  # not JSON: a bare word
# refuses the file named by argv[1] in this process, then prints its peak resident memory
MEASURE = ("import resource, sys\n"
           "from pathlib import Path\n"
           "from tiermem.evals.conversations import DataFileError, open_conversations\n"
           "try:\n"
           "    with open_conversations(Path(sys.argv[1]), max_content_bytes=1 << 20, max_metadata_bytes=1 << 14):\n"
           "        pass\n"
           "except DataFileError as exc:\n"
           "    sys.stderr.write(str(exc))\n"
           "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")


def write_list(path: Path, size: int) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        fh.write(f"[{ITEM}, {BAD_ITEM}")
        written = 0
        while written < size:
            fh.write(",\n" + ITEM)
            written += len(ITEM) + 2
        fh.write("]")
    return path


def peak_bytes(path: Path) -> int:
    out = subprocess.run([sys.executable, "-c", MEASURE, str(path)], capture_output=True, text=True,
                         timeout=RUN_TIMEOUT_S)
    assert "is not valid JSON: item 2: Expecting value" in out.stderr, out.stderr
    return int(out.stdout) * KIB


def test_an_early_syntax_error_is_refused_without_reading_the_rest(tmp_path: Path) -> None:
    small = write_list(tmp_path / "small.json", 0)
    big = write_list(tmp_path / "big.json", FILE_BYTES)
    growth = peak_bytes(big) - peak_bytes(small)
    print(f"peak growth {growth / 1e6:.1f} MB for a {FILE_BYTES / 1e6:.0f} MB list")  # shown with -s
    assert growth < FILE_BYTES * MAX_GROWTH_PER_FILE_BYTE, f"{growth / 1e6:.0f} MB more for a 50 MB list"


# (id, a list's text, the item the error is named in): refused at once, named as before
EARLY: list[tuple[str, str, int]] = [
    # a bare word in the first item, a long list after it
    ("bare_word", '[{"a": nope}, ' + ", ".join(["{}"] * 1000) + "]", 1),
    # a missing colon in the third item
    ("missing_colon", '[{}, {}, {"a" 1}, ' + ", ".join(["{}"] * 1000) + "]", 3),
]


@pytest.mark.parametrize(("text", "item"), [e[1:] for e in EARLY], ids=[e[0] for e in EARLY])
def test_the_error_names_its_item(tmp_path: Path, text: str, item: int) -> None:
    from tiermem.errors import DataFileError
    from tiermem.evals.conversations import read_conversations

    path = tmp_path / "l.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataFileError, match=rf"l\.json: is not valid JSON: item {item}: "):
        read_conversations(path, max_content_bytes=1 << 20, max_metadata_bytes=1 << 14)
