"""`tiermem append --json-file FILE` with bytes that are not UTF-8 is refused in one line
naming the file and the byte. Before, the error was Python's decoder's alone ("'utf-8'
codec can't decode byte 0xff in position 26: invalid start byte"), naming no file."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")


# (the file's bytes, the byte the error names)
@pytest.mark.parametrize(("raw", "byte"), [
    (b'{"role": "user", "content": "\xff\xfe"}', "0xff"),      # not UTF-8 at all
    (b'{"role": "user", "content": "caf\xe9"}', "0xe9"),       # Latin-1
])
def test_a_message_file_not_in_utf8_is_named(tmp_path: Path, raw: bytes, byte: str) -> None:
    f = tmp_path / "msg.json"
    f.write_bytes(raw)
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "d"), "append", "c1", "--json-file", str(f)],
                             obj=CliState())
    assert res.exit_code == 1 and len(res.stderr.strip().splitlines()) == 1, res.output
    assert str(f) in res.stderr and "UTF-8" in res.stderr and byte in res.stderr, res.stderr
    assert not (tmp_path / "d" / "tiermem.db").exists()  # nothing opened, nothing written
