"""Two workers editing one LangGraph conversation at once lose nothing.

An edit retracts the edited row and every visible row after it and replays them, in
one batch. Worker 1 edited `a1`, worker 2 `a2`, worker 2's batch landing between worker
1's read of the log and its batch: worker 1's retraction of `a2` hid nothing new, so it
retracted all of its copies, while its retractions of `a1` and `h2` stayed in force;
its next round skipped them (stored, no visible version): `a1` and `h2` were gone from
the view, `context()` and the chat history for good. An edit batch is now conditional
on the log not having moved since it was read (`append_outcome(expect_position=)`, a
`Client`'s too, over HTTP): refused, nothing is written and the sync plans again from
what the log holds. A `Client` of a server that takes no condition (an older one: its
/v1/limits does not say `conditional_appends`) retracts only the copies of the rows
another writer hid first: nothing is lost, and the later batch's rows come after the
other's.

Two `Memory` instances on one SQLite directory (each with its own locks, as two
processes), two `Client`s of one server, two `Client`s of that server behind a real
proxy that hides the flag from /v1/limits (the older server), and two real processes;
the other worker's write is run between this one's read and its batch by wrapping the
module's `append_bodies` (the real one is called after).

The `Client` cases failed before conditional appends over HTTP: the rows of the later
batch came after the other's (a1 after a2), and the refused batch's copies stayed in the
log.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")
from client_helpers import served
from flaky_proxy import CLOSE, flaky_proxy
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

import tiermem.adapters._langchain_sync as lc_sync
from tiermem import Config, Memory
from tiermem.adapters._common import MemoryLike, retract_latest, visible
from tiermem.adapters._langchain_sync import ConversationSync
from tiermem.adapters.langchain import TiermemChatMessageHistory
from tiermem.client import Client
from tiermem.errors import EditConflict
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.formats import RETRACT_TYPE

BUDGET_TOKENS = 2000
OLD, NEW = "Booked for the 12th.", "Booked for the 14th."
LATER = "Breakfast added, 8am."
CHILD_TIMEOUT_S = 120.0  # a child process opens the store and syncs: seconds, more on a loaded machine


def _state() -> list[BaseMessage]:
    return [HumanMessage("Book my hotel.", id="h1"), AIMessage(OLD, id="a1"),
            HumanMessage("Add breakfast.", id="h2"), AIMessage("Breakfast added.", id="a2")]


def _edited(i: int, new: BaseMessage) -> list[BaseMessage]:
    state = _state()
    return [*state[:i], new, *state[i + 1:]]


def _shown(mem: MemoryLike, conv: str) -> list[tuple[str | None, Any]]:
    return [(m.id, m.content) for m in TiermemChatMessageHistory(mem, conv).messages]


def _between(monkeypatch: pytest.MonkeyPatch, mem: MemoryLike, other: Callable[[], object]) -> None:
    """Run `other` (another worker's write) once, after `mem`'s next sync read the log
    and before its batch is appended."""
    real = lc_sync.append_bodies
    fired: list[bool] = []

    def wrapped(memory: MemoryLike, conv: str, bodies: list[dict[str, Any]], **kw: Any) -> list[int]:
        if memory is mem and not fired:
            fired.append(True)
            other()
        return real(memory, conv, bodies, **kw)

    monkeypatch.setattr(lc_sync, "append_bodies", wrapped)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, embedder: FastEmbedder) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("lc-edit-race") / "data", embedder) as (got, _):
        yield got


OLDER_CLIENT = "older server's client"


@pytest.fixture(params=["memory", "client", OLDER_CLIENT])
def workers(request: pytest.FixtureRequest, tmp_path: Path, embedder: FastEmbedder
            ) -> Iterator[tuple[str, MemoryLike, MemoryLike]]:
    """A conversation id and two workers' stores: two Memory instances on one SQLite
    directory, or two Clients of one server (each its own locks, as two processes), or
    two Clients of it behind a proxy hiding `conditional_appends` (an older server)."""
    conv = f"trip-{tmp_path.name}"  # the server's store outlives a test
    if request.param == "memory":
        cfg = Config(data_dir=tmp_path / "data")
        with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m1, \
                Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m2:
            yield conv, m1, m2
    else:
        from service_helpers import TOKEN_ACME

        base = request.getfixturevalue("url")
        if request.param == OLDER_CLIENT:  # no fault: the proxy only hides the flag
            with flaky_proxy(base, CLOSE, times=0, hide=("conditional_appends",)) as proxy, \
                    Client(proxy.url, token=TOKEN_ACME) as c1, Client(proxy.url, token=TOKEN_ACME) as c2:
                yield conv, c1, c2
        else:
            with Client(base, token=TOKEN_ACME) as c1, Client(base, token=TOKEN_ACME) as c2:
                yield conv, c1, c2


# worker 2's state (its write lands inside worker 1's edit), worker 1's return, the view after
RACES: list[tuple[str, list[BaseMessage] | None, int, list[tuple[str, str]]]] = [
    # the reviewer's case: another message edited; both edits stand, nothing is lost
    ("different messages", _edited(3, AIMessage(LATER, id="a2")), 1,
     [("h1", "Book my hotel."), ("a1", NEW), ("h2", "Add breakfast."), ("a2", LATER)]),
    # the same edit: stored once, this worker writes nothing
    ("same edit", _edited(1, AIMessage(NEW, id="a1")), 0,
     [("h1", "Book my hotel."), ("a1", NEW), ("h2", "Add breakfast."), ("a2", "Breakfast added.")]),
    # another process pops the latest message (inside the edited tail): the pop stands
    ("pop in the tail", None, 1, [("h1", "Book my hotel."), ("a1", NEW), ("h2", "Add breakfast.")]),
]


@pytest.mark.parametrize(("race", "theirs", "written", "want"), RACES, ids=[r[0] for r in RACES])
def test_an_edit_racing_another_writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                                       workers: tuple[str, MemoryLike, MemoryLike],
                                       race: str, theirs: list[BaseMessage] | None, written: int,
                                       want: list[tuple[str, str]]) -> None:
    conv, m1, m2 = workers
    w1, w2 = ConversationSync(m1, conv), ConversationSync(m2, conv)
    for w in (w1, w2):  # each worker ran the graph on the state before: stored once
        w.sync(_state())
    mine = _edited(1, AIMessage(NEW, id="a1"))
    other: Callable[[], object] = (lambda: retract_latest(m2, conv)) if theirs is None else (lambda: w2.sync(theirs))
    _between(monkeypatch, m1, other)
    assert w1.sync(mine) == written
    monkeypatch.undo()
    shown = _shown(m1, conv)
    older = request.node.callspec.params["workers"] == OLDER_CLIENT
    if older and race == "different messages":
        # an older server's batch is not conditional: its rows land after the other's
        assert sorted(shown, key=str) == sorted(want, key=str)
    else:
        assert shown == want
    context = [m.get("content") for m in m1.context(conv, "When is my hotel booked?", BUDGET_TOKENS).messages]
    assert {c for _, c in want} <= set(context) and OLD not in context
    rows = m1.history(conv)
    if not older:  # the batch refused wrote nothing: one new version in the log
        assert sum(1 for r in rows if r.body.get("content") == NEW) == 1
    # later syncs of either state write nothing
    assert w1.sync(mine) == 0
    if theirs is not None:
        assert w2.sync(theirs) == 0
    assert len(m1.history(conv)) == len(rows)


CHILD = textwrap.dedent('''
    import sys
    from pathlib import Path
    from langchain_core.messages import AIMessage, HumanMessage
    import tiermem.adapters._langchain_sync as lc_sync
    from tiermem import Config, Memory

    data, edit, wait = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "wait"
    before = [HumanMessage("Book my hotel.", id="h1"), AIMessage("Booked for the 12th.", id="a1"),
              HumanMessage("Add breakfast.", id="h2"), AIMessage("Breakfast added.", id="a2")]
    text = {1: "Booked for the 14th.", 3: "Breakfast added, 8am."}[edit]
    state = list(before)
    state[edit] = AIMessage(text, id=state[edit].id)
    real = lc_sync.append_bodies
    fired = []

    def wrapped(memory, conv, bodies, **kw):
        if wait and not fired:  # read done: the parent runs the other process now
            fired.append(True)
            print("read", flush=True)
            sys.stdin.readline()
        return real(memory, conv, bodies, **kw)

    lc_sync.append_bodies = wrapped
    with Memory(Config(data_dir=Path(data)), hot=False, background_indexing=False) as mem:
        sync = lc_sync.ConversationSync(mem, "trip")
        sync.sync(before)  # the worker ran the graph on the state before (stored already)
        print("wrote", sync.sync(state), flush=True)
''')


def test_two_processes_edit_different_messages(tmp_path: Path, embedder: FastEmbedder) -> None:
    """The reviewer's race between real processes: the first one's batch waits after its
    read until the second one's edit is committed."""
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        ConversationSync(mem, "trip").sync(_state())
    first = subprocess.Popen([sys.executable, "-c", CHILD, str(cfg.data_dir), "1", "wait"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout is not None and first.stdin is not None
        assert first.stdout.readline().strip() == "read"
        second = subprocess.run([sys.executable, "-c", CHILD, str(cfg.data_dir), "3", "go"],
                                capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=True)
        assert second.stdout.split() == ["wrote", "1"]
        out, _ = first.communicate("\n", timeout=CHILD_TIMEOUT_S)
    finally:
        if first.poll() is None:
            first.kill()
    assert out.split() == ["wrote", "1"]
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        assert _shown(mem, "trip") == [("h1", "Book my hotel."), ("a1", NEW), ("h2", "Add breakfast."),
                                       ("a2", LATER)]
        # the log keeps every version; nothing was retracted twice
        named = [r.body.get("position") for r in mem.history("trip") if r.body.get("type") == RETRACT_TYPE]
        assert len(named) == len(set(named))
        assert len(visible(mem, "trip")) == len(_state())


def test_an_edit_refused_every_round_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                      embedder: FastEmbedder) -> None:
    """Another writer appending between every read and the edit's batch: after
    `MAX_EDIT_ROUNDS` refusals the sync raises `EditConflict` and has written nothing."""
    cfg = Config(data_dir=tmp_path / "data")
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m1, \
            Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as m2:
        sync = ConversationSync(m1, "trip")
        sync.sync(_state())
        real = lc_sync.append_bodies
        tries: list[int] = []

        def wrapped(memory: MemoryLike, conv: str, bodies: list[dict[str, Any]], **kw: Any) -> list[int]:
            tries.append(len(tries))
            m2.append(conv, {"role": "user", "content": f"And parking? ({len(tries)})"})
            return real(memory, conv, bodies, **kw)

        monkeypatch.setattr(lc_sync, "append_bodies", wrapped)
        with pytest.raises(EditConflict, match="refused 8 times"):
            sync.sync(_edited(1, AIMessage(NEW, id="a1")))
        assert len(tries) == lc_sync.MAX_EDIT_ROUNDS
        assert NEW not in [r.body.get("content") for r in m1.history("trip")]
