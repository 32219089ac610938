"""Memo scopes: what a process-wide cache of caller text may answer, and for whom.

Several caches remember results computed from caller text because the write path and
the read path ask for the same text again (an agent appends the user's message, then
asks for context with that same text as the query): the embedder's vectors
(`tiers.embed.TextMemo`), the classifier's labels and correction cues
(`consolidation.classify`), supersession's parses (`consolidation.supersede`), the
keyword stems (`tiers.lexical`) and the token counts and long encodings (`tiers.tokens`). A cache keyed by
the text alone answers a text another tenant wrote faster than a fresh one, so a caller
could time guesses of other tenants' messages. Every one of them is keyed by the memo
scope as well, set here and read by all of them: one mechanism.

Invariants:
- A result is found again only in the scope it was remembered in. The scope is a
  conversation (its key, in its database: `memo_scope`) or a namespace's search, set by
  `tiermem.memory.Memory` and the stores' catch-up around everything they do with a
  conversation's text (`remembered_for`). None (no scope set: an eval, a warm-up, a
  background job not tied to one conversation) is a scope of its own, shared by such
  callers only.
- A scope of several (a catch-up pool's texts, one scope per text) is understood by the
  embedder's memo only; a `ScopedMemo` asked within one neither answers nor remembers.
- Bounded: a `ScopedMemo` holds at most its `max_entries` results over all scopes, each
  scope counting as SCOPE_ENTRIES results more (its table and its name cost what about
  two short results do), and is emptied when full, which costs recomputations, never
  another answer.
- `clear()` forgets every scope's results: an erasure leaves no copy of erased text.
- `move_scope` refiles one scope's results under another, in every `ScopedMemo`: the
  first append of a conversation is computed before its key exists (under
  `new_conversation_scope`), and its results then belong to the key's scope.
- No dependency beyond the standard library: `tiers` and `consolidation` both import it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import threading
import weakref
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

# The scope a result is remembered under, and the only scope it is found again in: one
# string for every text of the next calls, or one per text (a catch-up's pool spans
# conversations). None (the default) is a scope of its own.
MemoScope = str | tuple[str, ...] | None
_memo_scope: contextvars.ContextVar[MemoScope] = contextvars.ContextVar("tiermem_memo_scope", default=None)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
R = TypeVar("R")
D = TypeVar("D")


def memo_scope(db_uuid: str, conversation: str | None = None, *, namespace: str | None = None) -> str:
    """The memo scope of a conversation (by key) or of a namespace's search, in one
    database: keys are unique only within their database, and one embedder may serve
    several. No id holds a NUL, so the parts cannot run into each other."""
    return f"{db_uuid}\0c\0{conversation}" if conversation is not None else f"{db_uuid}\0n\0{namespace}"


def new_conversation_scope(db_uuid: str, namespace: str, name: str) -> str:
    """The memo scope of the first append to a conversation that has no key yet (the
    key is issued inside the append's transaction): its namespace and name, which no
    other conversation shares; the parts of `memo_scope`'s strings never take this form.
    Once the append has issued the key, `move_scope` refiles its results under the
    key's scope, where the conversation's next calls ask."""
    return f"{db_uuid}\0new\0{namespace}\0{name}"


def current_scope() -> MemoScope:
    """The scope set on this thread (or task) by `remembered_for`."""
    return _memo_scope.get()


@contextlib.contextmanager
def remembered_for(scope: str | Sequence[str] | None) -> Iterator[None]:
    """Compute within `scope` on this thread (and the tasks it starts with its context):
    results remembered now are remembered for it, and only its own are found again."""
    token = _memo_scope.set(scope if scope is None or isinstance(scope, str) else tuple(scope))
    try:
        yield
    finally:
        _memo_scope.reset(token)


# what one scope's own table and name cost, in results of a short text (measured with
# tracemalloc: ~285 bytes a scope against ~155 a stem or a short text's count), so that
# max_entries bounds the memory however thinly the results spread over scopes (200,000
# stems, one per scope, took 88 MB against 31 MB in one scope when scopes cost nothing)
SCOPE_ENTRIES = 2
_NOT_HERE: dict[object, object] = {}  # what a scope with nothing remembered holds (never written)
# every ScopedMemo alive, for move_scope (weak: a counter's memo goes with its counter)
_memos: weakref.WeakSet[ScopedMemo[Any, Any]] = weakref.WeakSet()
_memos_lock = threading.Lock()
MISS: object = object()  # `ScopedMemo.get`'s answer for a key not remembered, where None is a result


class ScopedMemo(Generic[K, V]):
    """Results keyed by the current memo scope and a key (see the module docstring).
    Reads take no lock: one dict per scope, so a hot loop looks up its scope once
    (`table`) and then each key as in a plain dict. `hits` / `misses` count lookups
    (for stats and tests)."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._scopes: dict[str | None, dict[K, V]] = {}
        self._entries = 0
        self._lock = threading.Lock()
        with _memos_lock:
            _memos.add(self)

    def __len__(self) -> int:
        """The results remembered, over all scopes (their scopes' cost not counted)."""
        return self._entries

    def __iter__(self) -> Iterator[K]:
        """The remembered keys, of every scope (what an erasure must leave none of)."""
        with self._lock:
            return iter([k for table in self._scopes.values() for k in table])

    def __contains__(self, key: object) -> bool:
        """Whether `key` is remembered in any scope."""
        return any(key in table for table in list(self._scopes.values()))

    def table(self) -> dict[K, V]:
        """The current scope's results, to read (empty in a scope of several: `put`
        never files a result under one, so looking one up finds nothing)."""
        return self._scopes.get(_memo_scope.get(), _NOT_HERE)  # type: ignore[arg-type]

    def get(self, key: K, default: D) -> V | D:
        """The result remembered for `key` in the current scope, else `default` (a
        remembered result may itself be None)."""
        got = self.table().get(key, MISS)
        if got is MISS:
            self.misses += 1
            return default
        self.hits += 1
        return got  # type: ignore[return-value]

    def put(self, key: K, value: V) -> None:
        """Remember `value` for `key` in the current scope (not in a scope of several)."""
        scope = _memo_scope.get()
        if isinstance(scope, tuple) or not self.max_entries:
            return
        with self._lock:
            table = self._scopes.get(scope)
            if table is None or key not in table:
                cost = 1 if table is not None else 1 + SCOPE_ENTRIES
                if self._entries + SCOPE_ENTRIES * len(self._scopes) + cost > self.max_entries:
                    self._scopes = {}
                    self._entries = 0
                    table = None
                if table is None:
                    table = self._scopes[scope] = {}
                self._entries += 1
            table[key] = value

    def clear(self) -> None:
        """Forget every scope's results."""
        with self._lock:
            self._scopes = {}
            self._entries = 0

    def move(self, old: str, new: str) -> None:
        """Refile scope `old`'s results under `new` (what `new` holds already is kept)."""
        with self._lock:
            moved = self._scopes.pop(old, None)
            if not moved:
                return
            into = self._scopes.get(new)
            if into is None:
                self._scopes[new] = moved
                return
            for key, value in moved.items():
                if key in into:
                    self._entries -= 1
                else:
                    into[key] = value


def move_scope(old: str, new: str) -> None:
    """Refile what every `ScopedMemo` remembered in scope `old` under scope `new`."""
    with _memos_lock:
        memos = list(_memos)
    for memo in memos:
        memo.move(old, new)


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    maxsize: int
    currsize: int


class ScopedCache(Generic[R]):
    """A function of one text whose results a `ScopedMemo` remembers per scope: the
    scoped form of `functools.lru_cache` (`cache_clear()` as there; `memo` for stats)."""

    def __init__(self, fn: Callable[[str], R], max_entries: int) -> None:
        self._fn = fn
        self.memo: ScopedMemo[str, R] = ScopedMemo(max_entries)
        functools.update_wrapper(self, fn)

    def __call__(self, text: str) -> R:
        got = self.memo.get(text, MISS)
        if got is MISS:
            got = self._fn(text)
            self.memo.put(text, got)
        return got  # type: ignore[return-value]

    def cache_clear(self) -> None:
        self.memo.clear()

    def cache_info(self) -> CacheInfo:
        """As `functools.lru_cache`'s, over every scope."""
        return CacheInfo(self.memo.hits, self.memo.misses, self.memo.max_entries, len(self.memo))


def scoped_cache(max_entries: int) -> Callable[[Callable[[str], R]], ScopedCache[R]]:
    """Decorate a function of one text (`ScopedCache`)."""
    def wrap(fn: Callable[[str], R]) -> ScopedCache[R]:
        return ScopedCache(fn, max_entries)
    return wrap
