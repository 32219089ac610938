"""The classifier's and supersession's patterns, compiled on first use, match as compiled ones.

Invariants (tiermem/lazyre.py):
- Every lazy pattern of the modules that use them compiles: a pattern no test happens to use
  would otherwise raise only at its first use in production, where its import raised before.
- A lazy pattern's methods answer as ``re.compile`` of the same source and flags would, before
  and after the first use binds them; its ``pattern`` is the source without compiling.
- A match's ``re`` is the compiled pattern (``compiled()``), which supersede asks of its
  call-off matches (`_bare_off`; tests/test_knowledge_update_everyday.py: 5 of its cases
  failed while it compared with the lazy one).
- ``import tiermem.cli`` compiles none of them (what the laziness is for: every CLI process).
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import tiermem.consolidation.classify
import tiermem.consolidation.supersede
from tiermem.lazyre import LazyPattern, compile_all, lazy_compile

# a pattern with flags, groups and alternation, as the modules' are
SOURCE = r"\b(?P<day>mon|tue)(?:day)?s?\b"


def test_every_pattern_compiles() -> None:
    # both modules hold well over a hundred; all of them compile
    assert compile_all() >= 150


@pytest.mark.parametrize(("method", "args"), [
    ("search", ("See you Tuesday then",)),          # a match inside
    ("match", ("monday it is",)),                   # at the start
    ("match", ("no day",)),                         # no match: None from both
    ("fullmatch", ("Mondays",)),                    # the whole string, case folded
    ("findall", ("mon, tue and Tuesdays",)),        # groups returned as the compiled one does
    ("sub", ("X", "mon or tue")),                   # replacement
    ("subn", ("X", "mon or tue")),                  # replacement with its count
    ("split", ("a mon b tue c",)),                  # split keeps the group
])
def test_methods_answer_as_compiled(method: str, args: tuple[str, ...]) -> None:
    lazy = lazy_compile(SOURCE, re.IGNORECASE)
    real = re.compile(SOURCE, re.IGNORECASE)

    def same(a: object, b: object) -> bool:
        if isinstance(a, re.Match) and isinstance(b, re.Match):
            return (a.span(), a.groups(), a.groupdict()) == (b.span(), b.groups(), b.groupdict())
        return a == b

    first = getattr(lazy, method)(*args)    # compiles and binds
    second = getattr(lazy, method)(*args)   # the bound method
    expected = getattr(real, method)(*args)
    assert same(first, expected) and same(second, expected)


def test_pattern_source_and_attributes() -> None:
    lazy = lazy_compile(SOURCE, re.IGNORECASE)
    assert lazy.pattern == SOURCE and lazy._compiled is None  # the source, nothing compiled
    real = re.compile(SOURCE, re.IGNORECASE)
    assert (lazy.flags, lazy.groups, dict(lazy.groupindex)) == (real.flags, real.groups, dict(real.groupindex))
    assert [m.span() for m in lazy.finditer("mon tue")] == [m.span() for m in real.finditer("mon tue")]
    found = lazy.search("on mon")
    assert found is not None and found.re is lazy.compiled()  # which pattern matched: the compiled one
    with pytest.raises(AttributeError):
        lazy.no_such_method  # noqa: B018 - only the compiled pattern's methods are bound


def test_broken_pattern_raises_on_use() -> None:
    lazy = lazy_compile("(unclosed")
    with pytest.raises(re.error):
        lazy.search("x")


def test_cli_import_compiles_none() -> None:
    # a fresh process: this one has compiled them all above
    code = ("import tiermem.cli, tiermem.lazyre as z; "
            "print(sum(p._compiled is not None for p in z._MADE), len(z._MADE))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    compiled, made = int(out[0]), int(out[1])
    assert made >= 150 and compiled == 0


def test_modules_use_lazy_patterns() -> None:
    # the modules' patterns are lazy ones, so the import above compiles none of them
    for module in (tiermem.consolidation.classify, tiermem.consolidation.supersede):
        assert not [n for n, v in vars(module).items() if isinstance(v, re.Pattern)], module.__name__
        assert any(isinstance(v, LazyPattern) for v in vars(module).values())
