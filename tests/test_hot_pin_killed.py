"""A pin or unpin that the log records and whose hot-tier script never runs (the process
is SIGKILLed between the two, or Redis refuses that one script) is not lost to the hot
set: the next write of the conversation (an append, another pin) or its next read finds
that the set missed a pin change of the log (tiers.hot, pin versions: HotStale 'pins')
and rebuilds it from the log. Real redis-server (the embedded one), real SQLite, real
processes: the child (hot_pin_killed_child.py) is killed by a real SIGKILL.

On the code before, nothing told the set: the turn stayed evicted and unpinned (or
pinned, after a lost unpin) in every context until some unrelated rebuild.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hot_pair import canonical, stored
from hot_pin_killed_child import CONV, config

from tiermem import Memory
from tiermem.hotlink import HotLink
from tiermem.tiers.redis_server import EmbeddedRedis

CHILD = Path(__file__).with_name("hot_pin_killed_child.py")
CHILD_S = 120.0  # for the child to open its Memory and die
TURNS = 30
TARGET = 9  # an assistant turn (no classifier pin) evicted once the conversation is filled
OTHER = 13  # another, which the test's own process pins
PRIORITY = 60
# the user turns of the filled conversation are load-bearing (each moves the log's pin
# version), the assistant turns are not
FILL = "turn number {i} talking about the weather and nothing much at all here"
LOAD_BEARING = "remember: my name is Zed"
PLAIN = "and what about tomorrow?"
OOM_MAXMEMORY_BYTES = 1  # below what any Redis holds: every writing script is refused


@dataclass
class Conversation:
    mem: Memory
    link: HotLink
    key: str
    data: Path


@pytest.fixture
def conv(tmp_path: Path) -> Iterator[Conversation]:
    data = tmp_path / "data"
    mem = Memory(config(data), background_indexing=False)
    try:
        for i in range(TURNS):
            mem.append(CONV, {"role": "user" if i % 2 == 0 else "assistant", "content": FILL.format(i=i)})
        key = mem.cold.key_of("default", CONV)
        assert key is not None and mem.hot is not None
        members = stored(mem.hot, key)[0]
        assert TARGET not in members and OTHER not in members  # the premise: both evicted
        yield Conversation(mem, mem.hot, key, data)
    finally:
        mem.close()
        EmbeddedRedis(data).stop()


def killed(c: Conversation, op: str, position: int) -> None:
    """The child records `op` of `position` in the log and dies before its hot script."""
    done = subprocess.run([sys.executable, str(CHILD), str(c.data), op, str(position), str(PRIORITY)],
                          timeout=CHILD_S, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr


def refused(c: Conversation, op: str, position: int) -> None:
    """This process records `op` of `position` while Redis refuses every write (out of
    memory): the log takes it, the hot script is refused whole; then Redis takes writes."""
    client = c.link.client
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", OOM_MAXMEMORY_BYTES)
    try:
        if op == "pin":
            c.mem.pin(CONV, position, priority=PRIORITY)
        else:
            c.mem.unpin(CONV, position)
    finally:
        client.config_set("maxmemory", 0)
    assert not c.link.healthy  # the premise: the hot script was refused


def append(text: str) -> Callable[[Conversation], None]:
    def run(c: Conversation) -> None:
        c.mem.append(CONV, {"role": "user", "content": text})
    return run


def read(c: Conversation) -> None:
    assert c.link.read(c.key).hot is not None


def pin_other(c: Conversation) -> None:
    c.mem.pin(CONV, OTHER, priority=PRIORITY)


# (how the change missed the set, pin or unpin, what the conversation does next)
CASES = [
    # the next append, an ordinary turn: its admit finds the set behind the log's pins
    pytest.param(killed, "pin", append(PLAIN), id="killed-pin-append"),
    # a load-bearing turn moves the log's pin version itself: the admit counts that one
    # as its own and still finds the missed pin
    pytest.param(killed, "pin", append(LOAD_BEARING), id="killed-pin-append-load-bearing"),
    # no write at all: a context's read of the set compares the versions
    pytest.param(killed, "pin", read, id="killed-pin-read"),
    # another pin of this process: its script finds the earlier change missing
    pytest.param(killed, "pin", pin_other, id="killed-pin-pin"),
    # a lost unpin leaves the turn pinned in the set; the next append finds it
    pytest.param(killed, "unpin", append(PLAIN), id="killed-unpin-append"),
    pytest.param(killed, "unpin", read, id="killed-unpin-read"),
    # Redis refused that one script (out of memory), then took writes again
    pytest.param(refused, "pin", append(PLAIN), id="refused-pin-append"),
]


@pytest.mark.parametrize(("miss", "op", "then"), CASES)
def test_a_pin_change_the_set_missed_is_repaired(conv: Conversation, miss: Callable[[Conversation, str, int], None],
                                                  op: str, then: Callable[[Conversation], None]) -> None:
    c = conv
    if op == "unpin":
        c.mem.pin(CONV, TARGET, priority=PRIORITY)  # hot and pinned, by this process
        assert TARGET in stored(c.link, c.key)[1]
    miss(c, op, TARGET)
    pinned = TARGET in {r.position for r in c.mem.cold.turns(c.key) if r.pinned_priority is not None}
    assert pinned == (op == "pin")  # the log has the change
    assert (TARGET in stored(c.link, c.key)[1]) != pinned  # the premise: the set missed it
    then(c)
    assert stored(c.link, c.key) == canonical(c.link, c.key)
    assert (TARGET in stored(c.link, c.key)[1]) == pinned


def test_an_append_after_a_pin_that_reached_the_set_rebuilds_nothing(conv: Conversation) -> None:
    """The check costs no rebuild when nothing was missed: a pin, then appends, ordinary
    and load-bearing (which move the log's pin version themselves), then a read."""
    c = conv
    c.mem.pin(CONV, TARGET, priority=PRIORITY)
    rebuilds = c.link.rebuilds
    for text in (PLAIN, LOAD_BEARING, "sunny, I hope"):
        c.mem.append(CONV, {"role": "user", "content": text})
    assert c.link.read(c.key).rebuilt is False
    c.mem.unpin(CONV, TARGET)
    c.mem.append(CONV, {"role": "user", "content": LOAD_BEARING + " and my city is Oslo"})
    assert c.link.read(c.key).rebuilt is False
    assert c.link.rebuilds == rebuilds
    # live pins re-admit turns a replay would not keep (tiers.hot: the rebuilt set is the
    # canonical one), so only the pin flags are compared with the log's
    assert TARGET not in stored(c.link, c.key)[1]
