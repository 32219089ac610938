"""`tiermem consolidate` says when a view it picked was held by another refresher.

A view whose lease another process holds (its refresh under way: a summarizer that hangs,
as a slow LLM call does) while the view is behind the log is not refreshed by the run
(Swept.HELD, scheduler.SKIP_HELD, in `last_skipped`). The command printed only "refreshed
0 view(s)" and its --json report had no word of it, so the operator could not tell a
held view from one that needed nothing. Now the text says it in one line and --json lists
it under `skipped`; the exit stays 0: the holder's refresh brings the view up to date.

Real processes: the holder is a second Python process holding the view's lease in the
store until the test kills it; real SQLite files.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from ports import free_port

from tiermem import Memory
from tiermem.cli import cli
from tiermem.config import Config

pytestmark = pytest.mark.usefixtures("clean_env")

SKIP_HELD = "held by another refresher"  # scheduler.SKIP_HELD
MAX_TURNS_BEHIND = 2  # turns: the view below is far past it, so the run picks it
HOLD_S = 120  # seconds the holder's summarizer hangs; killed long before
IN_SUMMARIZE = "IN-SUMMARIZE"
CONV = "behind"

# the holder: consolidates one conversation with a summarizer that says so and hangs
HOLDER = f'''
import sys, time
from tiermem import Memory
from tiermem.config import Config
mem = Memory(Config(data_dir=sys.argv[1], warm_max_turns_behind={MAX_TURNS_BEHIND}), hot=False,
             background_indexing=False)
inner = mem.views.summarizer
class Hung:
    name = inner.name
    def summarize(self, turns, *, target_tokens):
        print("{IN_SUMMARIZE}", flush=True)
        time.sleep({HOLD_S})
        return inner.summarize(turns, target_tokens=target_tokens)
mem.views.summarizer = Hung()
mem.consolidate(sys.argv[2])
'''


@pytest.fixture(scope="module")
def held(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A store where another process holds the rolling view's lease of CONV (version 1
    covers #0..#9, the log ends at #19)."""
    data = tmp_path_factory.mktemp("held") / "data"
    with Memory(Config(data_dir=data, warm_max_turns_behind=MAX_TURNS_BEHIND), hot=False,
                background_indexing=False) as mem:
        mem.append_many(CONV, [{"role": "user", "content": f"Fact {i}: the sky is colour {i}."} for i in range(10)])
        mem.consolidate(CONV)
        mem.append_many(CONV, [{"role": "user", "content": f"Later {i}: the sea is colour {i}."} for i in range(10)])
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(data), CONV], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == IN_SUMMARIZE  # its lease taken, its summarizer hung
        yield data
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


def consolidate(data: Path, tmp_path: Path, *args: str) -> Result:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"[warm]\nmax_turns_behind = {MAX_TURNS_BEHIND}\n")
    return CliRunner().invoke(cli, ["--config", str(cfg), "--data-dir", str(data), "consolidate", *args],
                              env={"TIERMEM_REDIS_URL": f"redis://127.0.0.1:{free_port()}"})


def test_the_text_says_a_view_was_held(held: Path, tmp_path: Path) -> None:
    res = consolidate(held, tmp_path)
    assert res.exit_code == 0, res.output  # the holder refreshes it: no failure of this run
    lines = res.stdout.strip().splitlines()
    assert lines[0].startswith("refreshed "), res.stdout  # the conversation's other views: refreshed here
    assert any(line.startswith(f"not refreshed: 1 view(s) {SKIP_HELD}") for line in lines), res.stdout


def test_the_json_lists_the_held_view(held: Path, tmp_path: Path) -> None:
    res = consolidate(held, tmp_path, "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["failures"] == []
    held_views = [(v["conversation"], v["kind"]) for v in report["skipped"] if v["reason"] == SKIP_HELD]
    assert held_views == [(CONV, "rolling")], report["skipped"]
