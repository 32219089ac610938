"""Two ways a Memory decides supersession, for case tables run in both: a process with the
model loaded (decided once caught up) and one that only appends (its own embedder never
loaded: the rules decide at append, tests/test_supersede_model_unloaded.py).

`users_superseded` appends user turns (each answered "Okay.", `FILLER` after every one but
the last, as the session-33 reviewer's cases.py did) and maps each superseded case turn,
whole or a statement of it, to the case turn that superseded it ("f" for a filler turn).

Invariants:
- The case turns are the only turns that may revise each other: the filler holds no value.
- The same table answers the same in both modes where the rules decide; a case whose
  answer differs by mode is written as two rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from tiermem import Config, Memory
from tiermem.tiers.embed import Embedder

CONV = "c"
MODES = ("loaded", "append")
FILLER = ["Thanks, that's helpful.", "I'll be back in a bit."]


@contextlib.contextmanager
def opened(mode: str, data: Path, embedder: Embedder) -> Iterator[Memory]:
    """A Memory without the hot tier: with `embedder` loaded ("loaded") or with its own,
    never loaded by appending ("append")."""
    if mode == "loaded":
        with Memory(Config(data_dir=data), embedder=embedder, hot=False, background_indexing=False) as mem:
            yield mem
    else:
        with Memory(Config(data_dir=data), hot=False) as mem:
            yield mem


def users_superseded(mem: Memory, mode: str, users: Sequence[str]) -> dict[int, int | str]:
    """{superseded case turn: the case turn that superseded it, or "f" for a filler turn}."""
    where: list[int] = []
    pos = 0
    for k, u in enumerate(users):
        where.append(pos)
        said = [u, *(FILLER if k < len(users) - 1 else [])]
        for s in said:
            mem.append_many(CONV, [{"role": "user", "content": s}, {"role": "assistant", "content": "Okay."}])
            pos += 2
    if mode == "loaded":
        mem.catch_up(CONV)
    back = {p: k for k, p in enumerate(where)}
    out: dict[int, int | str] = {}
    for r in mem.cold.turns(CONV):
        if r.position in back and r.superseded_by is not None:
            out[back[r.position]] = back.get(r.superseded_by, "f")
    for s in mem.cold.superseded_statements(CONV):
        if s.position in back and back[s.position] not in out:
            out[back[s.position]] = back.get(s.superseded_by, "f")
    return out
