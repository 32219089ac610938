"""The CLI's terminal text (cli.terminal_text): a CRLF line break (text from a Windows
client) is shown as a newline, not as `\\x0d` and a newline; Unicode's bidi embeddings,
overrides and isolates (U+202A-U+202E, U+2066-U+2069), invisible and reordering what
follows them ("Trojan Source"), are shown as visible escapes. The marks LRM, RLM and ALM are
left as they are (common in right-to-left text). --json and export stay byte-exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli import CliState, cli, terminal_text
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

# (the stored text, how a terminal is shown it)
CASES = [
    ("one\r\ntwo", "one\ntwo"),  # CRLF: a newline (was "one\\x0d\ntwo")
    ("a\r\n\r\nb", "a\n\nb"),  # a blank line between CRLFs
    ("over\rwrite", "over\\x0dwrite"),  # a lone CR returns the cursor over the line: still escaped
    ("a\r\r\nb", "a\\x0d\nb"),  # a CR before a CRLF: only the pair is a line break
    ("pay \u202eevil\u202c now", "pay \\u202eevil\\u202c now"),  # RLO ... PDF: the override shown
    ("\u202a\u202b\u202d", "\\u202a\\u202b\\u202d"),  # LRE, RLE, LRO
    ("\u2066x\u2067y\u2068z\u2069", "\\u2066x\\u2067y\\u2068z\\u2069"),  # LRI RLI FSI PDI
    ("\u05e9\u05dc\u05d5\u05dd\u200f!", "\u05e9\u05dc\u05d5\u05dd\u200f!"),  # RLM in Hebrew: kept
    ("a\u200eb\u061cc", "a\u200eb\u061cc"),  # LRM, ALM: kept
    ("\x1b[2J\ttab", "\\x1b[2J\ttab"),  # what was escaped before still is; the tab kept
]


@pytest.mark.parametrize(("text", "shown"), CASES)
def test_terminal_text(text: str, shown: str) -> None:
    assert terminal_text(text) == shown


CONTENT = "line one\r\nline two \u202eevil\u202c end"


def test_context_shows_crlf_as_a_line_and_json_keeps_the_bytes(tmp_path: Path, embedder: FastEmbedder) -> None:
    def run(*args: str, **kw: str) -> str:
        res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "data"), *args], obj=CliState(embedder=embedder),
                                 **kw)
        assert res.exit_code == 0, res.output
        return res.stdout

    run("append", "c", input=json.dumps({"role": "user", "content": CONTENT}))
    shown = run("context", "c").splitlines()
    assert "line one" in shown and "line two \\u202eevil\\u202c end" in shown, shown  # was "line one\\x0d"
    assert not any("\\x0d" in line or "\u202e" in line for line in shown), shown
    # --json and export: the text as stored, byte for byte
    assert json.loads(run("history", "c", "--json"))[0]["message"]["content"] == CONTENT
    assert json.loads(run("export").splitlines()[0])["message"]["content"] == CONTENT
