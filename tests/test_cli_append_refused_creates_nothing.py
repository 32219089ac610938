"""An `append` (or `import`) the arguments alone refuse creates nothing: no data dir, no
database (and a bad argument on the command line is a usage error, exit 2, since
test_cli_usage_exit_codes). Before, the store was created first and the arguments checked by the append:
`tiermem --data-dir typo append "" ...` said `conversation_id: must not be empty` and left
an empty database behind, so a later `tiermem --data-dir typo history c1` said
"conversation not found" instead of "no tiermem database at ..." (the typo guard,
tests/test_cli_read_needs_store.py). Real console script, real files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tiermem.config import DEFAULT_DB_FILENAME

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

TIERMEM = str(Path(sys.executable).with_name("tiermem"))
RUN_TIMEOUT_S = 120
TOO_LONG_ID = "c" * 10_000  # past any max_id_chars

# (arguments before the data dir's command, the command, the exit status, what the error
# names): a bad argument on the command line is a usage error (2, naming the argument as
# click does), a bad message in a file an error (1, one line naming the field)
REFUSED: list[tuple[list[str], list[str], int, str]] = [
    ([], ["append", "", "--role", "user", "--content", "x"], 2, "'CONVERSATION'"),  # the review's: an empty id
    ([], ["append", "c1", "--role", "user", "--content", "x", "--session-id", ""], 2, "'--session-id'"),  # empty
    (["--namespace", "a//b"], ["append", "c1", "--role", "user", "--content", "x"], 2, "'--namespace'"),  # not ids joined by /
    ([], ["append", "has space", "--role", "user", "--content", "x"], 2, "'CONVERSATION'"),  # a character ids refuse
    ([], ["append", TOO_LONG_ID, "--role", "user", "--content", "x"], 2, "'CONVERSATION'"),  # over max_id_chars
    ([], ["append", "c1", "--json-file", "{file}"], 1, "messages[1]"),  # the second message of a batch is bad
    (["--namespace", "-x"], ["import", "--conversation", "c1", "{file}"], 2, "'--namespace'"),  # import's too
]
BATCH = '[{"role": "user", "content": "ok"}, {"role": "nobody", "content": "bad role"}]'


@pytest.mark.parametrize(("before", "command", "status", "named"), REFUSED,
                         ids=["empty-id", "empty-session", "bad-namespace", "bad-id-char", "long-id", "bad-message",
                              "import-bad-namespace"])
def test_a_refused_append_creates_no_store(tmp_path: Path, before: list[str], command: list[str], status: int,
                                           named: str) -> None:
    data = tmp_path / "typo"
    batch = tmp_path / "batch.json"
    batch.write_text(BATCH if "append" in command else '{"role": "user", "content": "ok"}\n', encoding="utf-8")
    args = [a.replace("{file}", str(batch)) for a in command]
    r = subprocess.run([TIERMEM, "--data-dir", str(data), *before, *args], capture_output=True, text=True,
                       timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert r.returncode == status, (r.returncode, r.stderr)
    if status == 2:
        assert f"Error: Invalid value for {named}" in r.stderr, r.stderr
    else:
        assert r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert named in r.stderr, r.stderr
    assert not data.exists(), sorted(p.name for p in data.iterdir())
    # so the typo guard still answers a later read
    later = subprocess.run([TIERMEM, "--data-dir", str(data), "history", "c1"], capture_output=True, text=True,
                           timeout=RUN_TIMEOUT_S)
    assert later.returncode == 1 and f"no tiermem database at {data / DEFAULT_DB_FILENAME}" in later.stderr, later.stderr


def test_an_accepted_append_still_creates_the_store(tmp_path: Path) -> None:
    data = tmp_path / "new"
    r = subprocess.run([TIERMEM, "--data-dir", str(data), "--namespace", "acme/alice", "append", "c1", "--role",
                        "user", "--content", "x", "--session-id", "s1"], capture_output=True, text=True,
                       timeout=RUN_TIMEOUT_S)
    assert r.returncode == 0, r.stderr
    assert (data / DEFAULT_DB_FILENAME).exists()
