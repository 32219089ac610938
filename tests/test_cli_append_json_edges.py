"""`tiermem append`'s JSON input: nesting deeper than the decoder recurses is a one-line
error naming the input (was RecursionError with a traceback hint), an integer past
Python's digit limit names the limit and the input (was a bare ValueError naming neither),
and a UTF-8 byte order mark before the JSON is skipped, as `import` skips it (was
"Expecting value: line 1 column 1"). Review r_cli 7."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Config, Memory
from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

DEEP_LEVELS = 200_000  # far past the decoder's recursion (~1,000)
BIG_DIGITS = 5_000  # past Python's 4,300-digit limit on int(str)

# (the file's text, what the error says)
REFUSED: list[tuple[str, str]] = [
    ("[" * DEEP_LEVELS, "nested too deeply"),  # was RecursionError
    ('{"role": "user", "content": "a", "metadata": {"x": 1' + "0" * BIG_DIGITS + "}}", "4300 digits"),
]


@pytest.mark.parametrize(("text", "says"), REFUSED, ids=["deep", "big-int"])
def test_bad_json_is_one_line_naming_the_input(tmp_path: Path, text: str, says: str) -> None:
    src = tmp_path / "in.json"
    src.write_text(text, encoding="utf-8")
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), "append", "c", "--json-file", str(src)],
                             obj=CliState())
    assert res.exit_code == 1, res.output
    assert says in res.stderr and str(src) in res.stderr, res.stderr
    assert "Traceback" not in res.output and "RecursionError" not in res.output
    assert "set_int_max_str_digits" not in res.stderr  # no Python advice to a CLI user
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


@pytest.mark.parametrize("how", ["stdin", "file"])
def test_a_byte_order_mark_is_skipped(tmp_path: Path, how: str) -> None:
    data = tmp_path / "data"
    raw = b"\xef\xbb\xbf" + json.dumps({"role": "user", "content": "from notepad"}).encode()
    args = ["--data-dir", str(data), "append", "c"]
    if how == "file":
        (tmp_path / "in.json").write_bytes(raw)
        res = CliRunner().invoke(cli, [*args, "--json-file", str(tmp_path / "in.json")], obj=CliState())
    else:
        res = CliRunner().invoke(cli, args, obj=CliState(), input=raw)
    assert res.exit_code == 0, res.output
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        assert [m.body["content"] for m in mem.history("c")] == ["from notepad"]
