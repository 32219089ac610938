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
- `wait S`: no call for up to S seconds (the indexer's thread runs), until this process
  acted on an erasure it had not at the end of the previous command (its erasure mark,
  `Memory._erasure_mark`, moved: it is set once the copies are dropped), then
  {"held": [...]}, AFTER_MARK_S later (what the same wake does after the drop). Read as an
  attribute, every WAIT_POLL_S: no call of the Memory, which would read the erasures
  itself. Where nothing acts on them, the whole S.

`held` lists a description of every object reachable in the process that holds the
marker (a str or bytes-like containing it): what a heap dump would show. Its walk
starts from every object the garbage collector tracks, every module and
the running frames of the other threads, and follows every object's referents, tracked
or not, and what `gc.get_referents` does not show:
- the keys of a dict whose keys are all str (CPython shows the collector only the
  values of such a dict: a str cannot make a cycle). A memo of caller text keyed by the
  text is one; so are an unbounded `functools.cache`'s entries of one str argument, an
  object's attribute names and a thread-local's;
- the locals of a running frame of another thread (the collector sees a frame's locals
  only once the frame has returned into a traceback or a generator); the calling
  thread's own frames are the probe's and are left out;
- a code object's constants; a numpy array's elements (an object array holds them out of
  the collector's sight; a str or bytes array holds no Python object at all: searched as
  text and bytes) and its base; the bytes of a memoryview and of an `array.array`; the
  contents of an in-memory stream (`io.BytesIO`, `io.StringIO`: a socket's read buffer).
Untracked tuples, frozensets and dicts (only atoms inside) are reached from their
holders, `__slots__` values and a bounded `lru_cache`'s entries are referents already.
Not reached: what a C extension keeps out of Python objects (SQLite's page cache, Redis's
own memory, onnxruntime's buffers, a tokenizer's encodings), a buffered file's or
socket's own buffer (reading it could block), a running frame's value stack, and the
bytes of numeric arrays (not text). Each hit names the path that reached it, innermost first.
The marker is given reversed, so that argv holds no copy of it; the secret is built here
and no local keeps it once a command is answered.
"""

from __future__ import annotations

import array
import gc
import io
import json
import sys
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

NS = "acme/alice"
BYSTANDER_NS = "beta"
QUESTION = "What was the vault code I told you in the other session?"
WAIT_POLL_S = 0.05  # `wait`'s look at the erasure mark
AFTER_MARK_S = 1.0  # `wait` goes on this long once the mark moved (the rest of the wake)


# how many links of the path that reached a hit its description names
PATH_LINKS = 4
# the longest dict searched for the key that holds a link of that path (a cost per hit)
PATH_DICT_ENTRIES = 10_000
# objects that hold no other object and no text: not followed, not searched
_ATOMS: frozenset[type] = frozenset({int, float, complex, bool, type(None), type(Ellipsis), type(NotImplemented)})

# what the walk does with an object of a type, beyond its referents: the objects it
# holds out of the collector's sight, and the text and bytes it holds itself
Extra = Callable[[Any], list[object]]
Text = Callable[[Any], tuple[str, bytes]]


def _frames_of_others() -> list[types.FrameType]:
    """The innermost running frame of every thread but this one (their callers are its
    f_back)."""
    me = threading.get_ident()
    return [frame for ident, frame in sys._current_frames().items() if ident != me]


def _own_stack() -> set[int]:
    """The ids of this thread's running frames: the probe's (a test keeps what it
    planted), whose locals the walk does not read."""
    ids = set()
    frame: types.FrameType | None = sys._getframe()
    while frame is not None:
        ids.add(id(frame))
        frame = frame.f_back
    return ids


def _dict_keys(obj: dict[Any, Any]) -> list[object]:
    # one C call: no other thread runs while the keys are copied
    return list(dict.keys(obj))


def _frame_extra(own: set[int]) -> Extra:
    def extra(frame: types.FrameType) -> list[object]:
        if id(frame) in own:
            return [frame.f_code]
        # a running frame's f_locals is a fresh snapshot of its locals
        return [frame.f_back, frame.f_code, frame.f_globals, frame.f_locals]
    return extra


def _array_extra(obj: Any) -> list[object]:
    """A numpy array's base, and its elements where they are objects, str or bytes."""
    return [obj.base, *obj.ravel().tolist()] if obj.dtype.kind in "OUS" else [obj.base]


def _array_bytes(obj: Any) -> tuple[str, bytes]:
    """A numpy array of single bytes or raw records holds bytes that may be text."""
    return "", obj.tobytes() if obj.dtype.kind == "V" or obj.itemsize == 1 else b""


def _view_bytes(obj: memoryview) -> tuple[str, bytes]:
    try:
        return "", obj.tobytes()
    except ValueError:  # released
        return "", b""


def _stdlib_array_text(obj: array.array[Any]) -> tuple[str, bytes]:
    return (obj.tounicode() if obj.typecode == "u" else ""), obj.tobytes()


def _stream_text(obj: io.BytesIO | io.StringIO) -> tuple[str, bytes]:
    """An in-memory stream's contents (a socket's read buffer: redis-py's parser)."""
    try:
        got = obj.getvalue()
    except ValueError:  # closed
        return "", b""
    return (got, b"") if isinstance(got, str) else ("", got)


def _dict_getter(cls: type) -> types.GetSetDescriptorType | None:
    """The plain `__dict__` of `cls`'s instances (None where they have none, or where a
    class of theirs computes it: no code of the process runs for the walk)."""
    for klass in type.__dict__["__mro__"].__get__(cls):
        found = type.__dict__["__dict__"].__get__(klass).get("__dict__")
        if found is not None:
            return found if isinstance(found, types.GetSetDescriptorType) else None
    return None


def _handling(cls: type, own: set[int]) -> tuple[Extra | None, Text | None]:
    """What the walk does with an object of type `cls` (module docstring)."""
    numpy = sys.modules.get("numpy")
    if issubclass(cls, dict):
        return _dict_keys, None
    if issubclass(cls, types.FrameType):
        return _frame_extra(own), None
    if issubclass(cls, types.CodeType):
        return (lambda code: [code.co_consts]), None
    if numpy is not None and issubclass(cls, numpy.ndarray):
        return _array_extra, _array_bytes
    if issubclass(cls, memoryview):
        return (lambda view: [view.obj]), _view_bytes
    if issubclass(cls, array.array):
        return None, _stdlib_array_text
    if issubclass(cls, io.BytesIO | io.StringIO):
        return None, _stream_text
    if issubclass(cls, str):
        return None, lambda s: (s, b"")
    if issubclass(cls, bytes | bytearray):
        return None, lambda b: ("", bytes(b))
    getter = _dict_getter(cls)
    if getter is None:
        return None, None
    # an instance's attributes live in its type's shared keys until its dict is asked for
    return (lambda obj: [getter.__get__(obj, cls)]), None


def _name(obj: object) -> str:
    if isinstance(obj, types.FrameType):
        return f"frame of {obj.f_code.co_qualname}"
    return type(obj).__name__


def _key_to(holder: dict[Any, Any], obj: object, marker: str) -> str:
    """The key under which `holder` holds `obj`, to name it ("" where none is a str, or
    where the key holds the marker itself, or where `holder` is too long to search)."""
    if len(holder) > PATH_DICT_ENTRIES:
        return ""
    for key, value in list(holder.items()):
        if value is obj and isinstance(key, str) and marker not in key:
            return f" {key!r}"
    return ""


def _path(obj: object, came_from: dict[int, object], as_key: set[int], marker: str) -> str:
    """`obj` and the holders that reached it, innermost first."""
    links = [_name(obj)]
    for _ in range(PATH_LINKS):
        holder = came_from.get(id(obj))
        if holder is None:
            break
        if isinstance(holder, dict):
            is_key = id(obj) in as_key or (len(holder) <= PATH_DICT_ENTRIES and any(key is obj for key in list(holder)))
            links.append(f"{'key' if is_key else 'value' + _key_to(holder, obj, marker)} of {_name(holder)}")
        else:
            links.append(_name(holder))
        obj = holder
    return " < ".join(links)


def _size(obj: object) -> int:
    """A str's characters, else the bytes held."""
    if isinstance(obj, str | bytes | bytearray):
        return len(obj)
    if isinstance(obj, array.array):
        return obj.buffer_info()[1] * obj.itemsize
    return int(getattr(obj, "nbytes", 0))


def held(marker: str) -> list[str]:
    """What in this process holds the marker (module docstring). Atoms and str are
    searched where they are met, never queued: most of what a process holds."""
    gc.collect()
    raw = marker.encode()
    own = _own_stack()
    handling: dict[type, tuple[Extra | None, Text | None]] = {}
    came_from: dict[int, object] = {}  # id -> the holder it was first met in
    as_key: set[int] = set()  # the ids first met as a dict's key
    hits: dict[int, object] = {}
    seen: set[int] = set()
    todo: list[object] = [*gc.get_objects(), *sys.modules.values(), *gc.garbage, *_frames_of_others()]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        cls = type(obj)
        how = handling.get(cls)
        if how is None:
            how = handling[cls] = _handling(cls, own)
        extra, text = how
        if text is not None:
            got, got_raw = text(obj)
            if (marker in got or raw in got_raw) and obj is not marker and obj is not raw:
                hits.setdefault(id(obj), obj)
        for refs, keys in ((gc.get_referents(obj), False), (extra(obj) if extra is not None else (), True)):
            for ref in refs:
                ref_cls = type(ref)
                if ref_cls is str:  # most of what is met: searched here, not queued
                    if marker in ref and ref is not marker and id(ref) not in hits:
                        hits[id(ref)] = ref
                        came_from[id(ref)] = obj
                        if keys:
                            as_key.add(id(ref))
                elif ref_cls not in _ATOMS and id(ref) not in came_from:
                    came_from[id(ref)] = obj
                    if keys:
                        as_key.add(id(ref))
                    todo.append(ref)
    return [f"{_path(obj, came_from, as_key, marker)} (of {_size(obj)})" for obj in hits.values()]


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
    mark = mem._erasure_mark  # where the previous command left it
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "warm":
            warm(mem, marker)
        elif cmd[0] == "call":
            mem.history("bystander", namespace=BYSTANDER_NS)
        elif cmd[0] == "append":
            mem.append("bystander", {"role": "user", "content": "Still nothing."}, namespace=BYSTANDER_NS)
        elif cmd[0] == "wait":
            # the idle indexer's look (every INDEXER_WAKE_S) acted on the erasure, or S passed
            until = time.monotonic() + float(cmd[1])
            while mem._erasure_mark == mark and time.monotonic() < until:
                time.sleep(WAIT_POLL_S)
            if mem._erasure_mark != mark:
                # the rest of that wake (its index_pending after the drop) runs before the
                # walk, so a copy cached again after the drop is still seen
                time.sleep(min(AFTER_MARK_S, max(0.0, until - time.monotonic())))
        found = held(marker)
        mark = mem._erasure_mark  # before the answer: the test erases only after it
        print(json.dumps({"held": found}), flush=True)
    mem.close()


if __name__ == "__main__":
    main()
