"""Messages another process appends while `rebuild` runs keep their turn and keyword rows
(SQLite).

The rebuild reads each batch of messages outside its transaction (decoding, labelling and
counting them there, the store's lock free) and then replaces the rows of the batch's id
range in a short transaction; the last batch's range is every id above the previous one.
Before the fix, a message another process appended between the last batch's read and its
transaction lost the turn and FTS rows its append had written, and none were written in
their place: it was missing from search and its vector never came (catch-up embeds turn
rows), and context() left it out, a hole in the recent turns, until the next rebuild. A
probe with a child appending in a loop lost 17-95 messages in 6 of 6 rebuilds (batches
of 20 over 200 messages): the child's appends kept taking the write lock while the
rebuild's last transaction waited for it.

Real files, a real child process (tests/rebuild_race_worker.py) appending through its own
Memory; this process rebuilds through Memory.rebuild, with small batches so a few hundred
messages take several.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder
from rebuild_race_worker import CONV, CUE_TEXT, LOOP_TEXT

import tiermem.tiers.cold as cold_module
from tiermem import Config, Memory
from tiermem.tiers.models import Message

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).with_name("rebuild_race_worker.py")
SEEDED = 200  # messages before the rebuild
BATCH = 20  # REBUILD_BATCH_MESSAGES here: the seeded messages take several batches
CHILD_TIMEOUT_S = 120.0
LOOP_WARM_S = 0.2  # the looping child appends this long before the rebuild starts
# one word per cue (a batch's read): unique in the conversation, so a search for it finds
# its message or nothing
CUE_WORDS = ["alpaca", "bassoon", "cobalt", "dahlia", "ember", "fjord", "gusset", "harpoon", "indigo", "jackal",
             "kumquat", "lantern", "marmot", "nutmeg", "osprey", "paprika", "quokka", "rhubarb", "saffron", "tapir"]
SEARCH_K = 3  # hits asked for: the keyword ranking's first and the dense ranking's tie with it
CONTEXT_BUDGET = 4_000  # tokens: room for every turn appended during the rebuild in the tail


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(cold_module, "REBUILD_BATCH_MESSAGES", BATCH, raising=False)
    return tmp_path / "data"


@pytest.fixture
def mem(data: Path) -> Iterator[Memory]:
    with Memory(Config(data_dir=data), embedder=HashEmbedder(), hot=False, background_indexing=False) as m:
        m.append_many(CONV, [Message(role="user", content=f"seeded turn {i} about the boiler") for i in range(SEEDED)])
        yield m


def start(data: Path, *args: str) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, str(WORKER), str(data), *args], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=ROOT,
                             env={"PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}", "PATH": "/usr/bin:/bin"})
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    return child


def finish(child: subprocess.Popen[str]) -> str:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.close()
    out = child.stdout.read()
    assert child.wait(CHILD_TIMEOUT_S) == 0, out
    return out


def rebuild_with_cued_appends(mem: Memory, data: Path) -> list[str]:
    """Rebuild while the child appends one message between each batch's read and its
    transaction (the last batch's included); returns the appended texts."""
    child = start(data, "cue")
    assert child.stdin is not None and child.stdout is not None
    texts: list[str] = []

    def step(name: str) -> None:
        if name != "rebuild:read":
            return
        word = CUE_WORDS[len(texts)]
        child.stdin.write(word + "\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        assert child.stdout.readline().strip().isdigit()  # type: ignore[union-attr]  # committed
        texts.append(CUE_TEXT.format(word))

    mem.cold._fault = step  # type: ignore[attr-defined]
    try:
        mem.rebuild()
    finally:
        mem.cold._fault = None  # type: ignore[attr-defined]
        finish(child)
    return texts


def rebuild_with_looping_appends(mem: Memory, data: Path) -> list[str]:
    """Rebuild while the child appends in a loop; returns the appended texts."""
    stop = data / "stop"
    child = start(data, "loop", str(stop))
    try:
        time.sleep(LOOP_WARM_S)
        mem.rebuild()
    finally:
        stop.touch()
        n = int(finish(child))
    return [LOOP_TEXT.format(i) for i in range(n)]


# how the other process's appends meet the rebuild
CASES = [
    # one between each batch's read and its transaction, deterministically: the last
    # batch's was the one lost
    pytest.param(rebuild_with_cued_appends, id="cued"),
    # as they come: a child appending as fast as it can for the whole rebuild
    pytest.param(rebuild_with_looping_appends, id="loop"),
]


@pytest.mark.parametrize("race", CASES)
def test_messages_appended_during_a_rebuild_keep_their_rows(mem: Memory, data: Path, race: object) -> None:
    appended = race(mem, data)  # type: ignore[operator]
    assert appended
    key = mem.cold.key_of("default", CONV) or CONV
    texts = [m.text for m in mem.cold.history(key)]
    assert texts[SEEDED:] == appended  # every append went in, in order
    # every message has its turn and keyword rows: none left without
    counts = mem.cold.integrity()
    assert counts["turns"] == counts["fts"] == counts["messages"] == SEEDED + len(appended), counts
    assert [t.position for t in mem.cold.turns(key)] == list(range(len(texts)))
    # labelled as a rebuild with nothing racing it labels them
    labels = [(t.position, t.intent, t.load_bearing, t.priority, t.label_reason) for t in mem.cold.turns(key)]
    # and each has its vector once caught up
    mem.cold.index_pending()
    assert mem.cold.integrity()["vectors"] == len(texts)
    # search finds each appended message by its own word (the keyword ranking's first; the
    # hash embedder's ranking is noise, fused beside it); context() shows them all
    if race is rebuild_with_cued_appends:
        for text in appended:
            hits = mem.search(CONV, text.split()[-1], k=SEARCH_K)
            assert text in [h.text for h in hits], (text, hits)
    shown = {m["content"] for m in mem.context(CONV, budget=CONTEXT_BUDGET).messages if m.get("role") == "user"}
    tail = texts[-min(len(appended), 40):]
    assert [t for t in tail if t not in shown] == []
    mem.rebuild()
    assert [(t.position, t.intent, t.load_bearing, t.priority, t.label_reason) for t in mem.cold.turns(key)] == labels
