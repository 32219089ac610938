"""A serving process for the tests of erasure across processes (test_erasure_processes):

    python tests/erasure_child.py DATA_DIR REVERSED_MARKER [PG_URL SCHEMA]

It opens a full Memory on DATA_DIR (SQLite, or PostgreSQL at PG_URL in SCHEMA; the hot
tier is the embedded Redis on DATA_DIR, which the test's own Memory shares) and answers
one command per line on stdin with one JSON line on stdout:

- `warm`: appends a secret holding the marker to conversation "doomed" and a filler to
  "sibling" (namespace NS), then asks for context, search and facts on "doomed" and a
  context on "sibling" whose namespace recall shows the secret: every cache of caller
  text, the turn cache and both epoch states hold it. Answers {"held": [...]}.
- `call`: one call that names a conversation ("bystander"'s history, in another
  namespace, which no erasure of the tests takes), then {"held": [...]}.
- `append`: one append to "bystander", then {"held": [...]}.
- `wait S`: nothing for S seconds (the indexer's thread runs), then {"held": [...]}.

`held` lists a description of every object reachable in the process that holds the
marker (a str or bytes containing it, or a container holding one): what a heap dump
would show. The marker is given reversed, so that argv holds no copy of it; the secret
is built here and no local keeps it once a command is answered.
"""

from __future__ import annotations

import gc
import json
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

NS = "acme/alice"
BYSTANDER_NS = "beta"
QUESTION = "What was the vault code I told you in the other session?"


def _reachable() -> Iterator[object]:
    """Every object reachable from the gc's tracked objects: containers that hold only
    atoms (a dict of str to int, a tuple of str) are untracked, and strings never are."""
    seen: set[int] = set()
    todo = list(gc.get_objects())
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        yield obj
        todo.extend(gc.get_referents(obj))


def held(marker: str) -> list[str]:
    """What in this process holds the marker (module docstring)."""
    gc.collect()
    raw = marker.encode()
    out = []
    for obj in _reachable():
        if obj is marker or obj is raw:  # the probe's own
            continue
        if (isinstance(obj, str) and marker in obj) or (isinstance(obj, bytes | bytearray) and raw in obj):
            # the walk's own frame and lists refer to it too: not what holds it
            holders = [type(r).__name__ for r in gc.get_referrers(obj)
                       if not isinstance(r, list | types.FrameType | types.GeneratorType)][:5]
            out.append(f"{type(obj).__name__} of {len(obj)} held by {holders}")
    return out


def warm(mem: Any, marker: str) -> None:
    secret = f"Remember: the vault code is {marker}, keep it safe."
    mem.append("bystander", {"role": "user", "content": "Nothing to see here."}, namespace=BYSTANDER_NS)
    mem.append("sibling", {"role": "user", "content": "I am planting tomatoes in the garden this week."},
               namespace=NS)
    mem.append("sibling", {"role": "assistant", "content": "Good luck with the tomatoes."}, namespace=NS)
    mem.append("doomed", {"role": "user", "content": secret}, namespace=NS)
    mem.append("doomed", {"role": "assistant", "content": "Noted, I will keep it safe."}, namespace=NS)
    mem.catch_up(namespace=NS)
    mem.context("doomed", f"what is the vault code {marker}?", 1500, namespace=NS)
    mem.search("doomed", f"vault code {marker}", 5, namespace=NS)
    mem.facts("doomed", namespace=NS)
    mem.append("sibling", {"role": "user", "content": QUESTION}, namespace=NS)
    shown = json.dumps(mem.context("sibling", QUESTION, 1500, namespace=NS).messages)
    if marker not in shown:  # namespace recall must have shown it, or the epoch copy holds nothing
        raise SystemExit("namespace recall did not show the secret")


def main() -> None:
    from tiermem import Config, Memory
    from tiermem.tiers.embed_onnx import build_embedder

    data, reversed_marker = Path(sys.argv[1]), sys.argv[2]
    extra: dict[str, Any] = {}
    if len(sys.argv) > 3:
        extra = {"cold_url": sys.argv[3], "cold_schema": sys.argv[4]}
    marker = reversed_marker[::-1]
    embedder = build_embedder()
    embedder.embed(["warm-up"])  # loaded: supersession and the vectors' memo run as in a warm server
    mem = Memory(Config(data_dir=data, **extra), embedder=embedder)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "warm":
            warm(mem, marker)
        elif cmd[0] == "call":
            mem.history("bystander", namespace=BYSTANDER_NS)
        elif cmd[0] == "append":
            mem.append("bystander", {"role": "user", "content": "Still nothing."}, namespace=BYSTANDER_NS)
        elif cmd[0] == "wait":
            time.sleep(float(cmd[1]))
        print(json.dumps({"held": held(marker)}), flush=True)
    mem.close()


if __name__ == "__main__":
    main()
