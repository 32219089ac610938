"""`Memory.consolidate()` (a sweep, and one conversation by name) does not count as
refreshed a view whose lease another process holds (its refresh under way: here a
summarizer that hangs, as a slow LLM call does) while the view is still behind the log
or has no version yet: the view is reported skipped, "held by another refresher"
(Swept.HELD, scheduler.SKIP_HELD), and `complete` is False. It was counted as refreshed
("unchanged") and the answer said complete, its stale version (or none) standing.

Real processes: each holder is a second Python process holding the view's lease in the
store (view_claims) until the test kills it; real SQLite files."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tiermem import Memory
from tiermem.config import Config

SKIP_HELD = "held by another refresher"  # the reason a sweep gives (scheduler.SKIP_HELD)
MAX_TURNS_BEHIND = 2  # turns: the views below are far past it, so a sweep picks them
HOLD_S = 120  # seconds the holder's summarizer hangs; killed long before
IN_SUMMARIZE = "IN-SUMMARIZE"

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


def _open(data: Path) -> Memory:
    return Memory(Config(data_dir=data, warm_max_turns_behind=MAX_TURNS_BEHIND), hot=False,
                  background_indexing=False)


def _facts(prefix: str, n: int, start: int = 0) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{prefix} {i}: the sky is colour {i}."} for i in range(start, start + n)]


@pytest.fixture(scope="module")
def held(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A store where another process holds the rolling view's lease of "behind" (version
    1 covers #0..#9, the log ends at #19) and of "new" (no version yet)."""
    data = tmp_path_factory.mktemp("held") / "data"
    mem = _open(data)
    mem.append_many("behind", _facts("Fact", 10))
    mem.consolidate("behind")
    mem.append_many("behind", _facts("Later fact", 10, 10))
    mem.append_many("new", _facts("Fact", 10))
    mem.close()
    holders = [subprocess.Popen([sys.executable, "-c", HOLDER, str(data), conv], stdout=subprocess.PIPE, text=True)
               for conv in ("behind", "new")]
    try:
        for p in holders:
            assert p.stdout is not None
            assert p.stdout.readline().strip() == IN_SUMMARIZE  # its lease taken, its summarizer hung
        yield data
    finally:
        for p in holders:
            p.send_signal(signal.SIGKILL)
            p.wait()


def _rolling_skipped(mem: Memory, result: object, conv: str) -> list[str]:
    key = mem._key(conv, None)[2]
    return [s.reason for s in result.skipped  # type: ignore[attr-defined]
            if (s.conversation, s.kind, s.key) == (key, "rolling", "")]


@pytest.mark.parametrize("conv", [
    "behind",  # its rolling view's version 1 is ten turns behind
    "new",  # its rolling view has no version yet
])
def test_by_name_a_held_view_is_skipped_not_refreshed(held: Path, conv: str) -> None:
    mem = _open(held)
    try:
        r = mem.consolidate(conv)
        assert _rolling_skipped(mem, r, conv) == [SKIP_HELD]
        assert not r.complete
        # counted: the views that cover the log (the constraint view), not the held one
        assert int(r) == r.picked - len(r.skipped) - len(r.failures)
        v = mem.warm.latest(conv, "rolling")
        assert v is None or v.end_position < mem.cold.last_position(mem._key(conv, None)[2])
    finally:
        mem.close()


def test_a_sweep_reports_each_held_view_skipped(held: Path) -> None:
    mem = _open(held)
    try:
        r = mem.consolidate()
        for conv in ("behind", "new"):
            assert _rolling_skipped(mem, r, conv) == [SKIP_HELD], conv
        assert not r.complete
        assert int(r) == r.picked - len(r.skipped) - len(r.failures)
    finally:
        mem.close()
