"""Regular expressions compiled on their first use, not at import.

The rule-based classifier and supersession modules hold some 170 module-level patterns,
many of them alternations of hundreds of words. Compiling them at import cost every process
that imports ``tiermem.memory`` (every CLI command, every test child process) a sixth of its
import time, though a plain ``tiermem history`` uses none of them and an ``append`` a few.

Invariants:
- ``lazy_compile(pattern, flags)`` matches exactly as ``re.compile(pattern, flags)`` does: the
  first call of one of its methods compiles it with those arguments (through ``re.compile``)
  and binds that method of the compiled pattern onto the object, so later calls cost an
  attribute lookup, as on a compiled pattern. ``pattern`` is the source string as given,
  available without compiling (modules build patterns out of others' sources at import).
- A match's ``re`` is the compiled pattern, never the lazy one: code that asks which
  pattern matched compares ``m.re is X.compiled()`` (supersede's call-off kinds do).
- A pattern is compiled once per object, under a lock: threads racing to its first use all
  get the same compiled object, so ``m.re is X.compiled()`` holds for a match any of them made
  (two compiles on a miss of ``re``'s cache are two distinct objects).
- A pattern that does not compile raises at its first use, not at import:
  ``compile_all()`` compiles every pattern made so far (tests/test_lazy_patterns.py calls it
  after importing the modules that use this, so a broken pattern still fails the suite).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

_MADE: list[LazyPattern] = []  # every lazy pattern made in this process, for compile_all
_MADE_LOCK = threading.Lock()
_COMPILE_LOCK = threading.Lock()  # one compile per pattern: identity checks on m.re hold across threads

# The methods of a compiled pattern that the first use binds onto the lazy one.
_METHODS = frozenset(("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner"))


class LazyPattern:
    """A ``re.Pattern[str]`` compiled the first time one of its methods is looked up."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (compiled now if it was not yet)."""
        done = self._compiled
        if done is None:
            with _COMPILE_LOCK:
                done = self._compiled
                if done is None:
                    done = self._compiled = re.compile(self.pattern, self._flags)
        return done

    @property
    def flags(self) -> int:
        return self.compiled().flags  # as the compiled pattern has them (re.UNICODE added for str)

    @property
    def groupindex(self) -> Any:
        return self.compiled().groupindex

    @property
    def groups(self) -> int:
        return self.compiled().groups

    def __getattr__(self, name: str) -> Any:
        # Called only for an attribute the object does not hold: a method's first lookup.
        if name not in _METHODS:
            raise AttributeError(name)
        method = getattr(self.compiled(), name)
        setattr(self, name, method)
        return method

    def __repr__(self) -> str:
        return f"lazy_compile({self.pattern!r}, {self._flags!r})"

    if TYPE_CHECKING:  # what the methods bound by __getattr__ are, for the type checker
        def search(self, string: str, pos: int = ..., endpos: int = ...) -> re.Match[str] | None: ...
        def match(self, string: str, pos: int = ..., endpos: int = ...) -> re.Match[str] | None: ...
        def fullmatch(self, string: str, pos: int = ..., endpos: int = ...) -> re.Match[str] | None: ...
        def finditer(self, string: str, pos: int = ..., endpos: int = ...) -> Iterator[re.Match[str]]: ...
        def findall(self, string: str, pos: int = ..., endpos: int = ...) -> list[Any]: ...
        def sub(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = ...) -> str: ...
        def subn(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = ...
                 ) -> tuple[str, int]: ...
        def split(self, string: str, maxsplit: int = ...) -> list[Any]: ...


def lazy_compile(pattern: str, flags: int | re.RegexFlag = 0) -> LazyPattern:
    """``re.compile(pattern, flags)``, done on the first use of the result."""
    made = LazyPattern(pattern, int(flags))
    with _MADE_LOCK:
        _MADE.append(made)
    return made


def compile_all() -> int:
    """Compile every lazy pattern made so far (a broken one raises ``re.error``); how many."""
    with _MADE_LOCK:
        made = list(_MADE)
    for p in made:
        p.compiled()
    return len(made)
