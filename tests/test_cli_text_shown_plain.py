"""Stored and user-given text is shown as itself by the CLI's terminal output: not read as
rich markup (`[/i]` raised MarkupError, `[red]x[/red]` was coloured, `[link=...]` made a
link), nor emoji codes (the id `user:id:7` showed an emoji), and its control characters
(an ESC sequence retitles, clears and colours a terminal) are shown as visible escapes.
--json output keeps the text byte-exact. Review r_cli 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Config, Memory
from tiermem.cli import CliState, cli

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

ESCAPES = "\x1b]0;PWNED\x07\x1b[2J\x1b[31mred\x9b"

# (conversation, content, session id, what the output shows, what it must not hold)
CASES: list[tuple[str, str, str | None, list[str], list[str]]] = [
    ("c1", "use the list[/i] syntax", None, ["list[/i]"], []),  # raised MarkupError, exit 1
    ("c2", "[red]hunter2[/red] :thumbs_up: [link=http://evil]x[/link]", None,
     ["[red]hunter2[/red]", ":thumbs_up:", "[link=http://evil]x[/link]"], ["\U0001f44d"]),  # markup, emoji
    ("c3", "hi", "[/s]", ["[/s]"], []),  # a session id of markup: MarkupError
    ("user:id:7", "hello :x: world", None, ["user:id:7", ":x:"], ["\u274c"]),  # emoji in the title and cell
    ("c4", ESCAPES, None, ["\\x1b]0;PWNED\\x07", "\\x9b"], ["\x1b", "\x07", "\x9b"]),  # raw ESC
]


@pytest.mark.parametrize(("conversation", "content", "session", "shown", "absent"), CASES,
                         ids=["close-tag", "markup-emoji", "session-markup", "emoji-id", "escapes"])
def test_history_shows_the_text_itself(tmp_path: Path, conversation: str, content: str, session: str | None,
                                       shown: list[str], absent: list[str]) -> None:
    data = tmp_path / "data"
    with Memory(Config(data_dir=data), hot=False, background_indexing=False) as mem:
        mem.append(conversation, {"role": "user", "content": content}, session_id=session)
    res = CliRunner().invoke(cli, ["--data-dir", str(data), "history", conversation], obj=CliState(),
                             terminal_width=400)
    assert res.exit_code == 0, res.output
    for text in shown:
        assert text in res.stdout, res.stdout
    for text in absent:
        assert text not in res.stdout, res.stdout
    raw = CliRunner().invoke(cli, ["--data-dir", str(data), "history", conversation, "--json"], obj=CliState())
    assert raw.exit_code == 0, raw.output
    assert json.loads(raw.stdout)[0]["message"]["content"] == content  # byte-exact, control characters and all
