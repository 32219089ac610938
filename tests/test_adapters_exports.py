"""`tiermem.adapters` exports every adapter type a caller is handed: a type that an
exported class's fields or an exported function's return annotation name, defined in an
adapter module, is importable from `tiermem.adapters` (1722944 added
`AnthropicRequest.breakpoints: list[AnthropicBreakpoint]` without exporting it)."""

from __future__ import annotations

import dataclasses
import inspect
import typing

import pytest

import tiermem.adapters

ADAPTER_PACKAGE = "tiermem.adapters"


def _named_types(hint: object) -> set[type]:
    """The classes a type hint names, through its generic arguments (list[X], X | None)."""
    found: set[type] = set()
    if isinstance(hint, type) and not typing.get_args(hint):
        found.add(hint)
    for arg in typing.get_args(hint):
        found |= _named_types(arg)
    return found


def _handed_types(obj: object) -> set[type]:
    """The adapter-defined types `obj` hands a caller: a dataclass's field types, a
    function's return type."""
    if dataclasses.is_dataclass(obj) and isinstance(obj, type):
        hints = typing.get_type_hints(obj)
    elif inspect.isfunction(obj):
        # the return annotation alone: parameters may name TYPE_CHECKING-only imports
        ret = inspect.get_annotations(obj).get("return")
        hints = {"return": eval(ret, obj.__globals__) if isinstance(ret, str) else ret}
    else:
        return set()
    named: set[type] = set()
    for hint in hints.values():
        named |= _named_types(hint)
    return {t for t in named if t.__module__.startswith(ADAPTER_PACKAGE + ".")}


@pytest.mark.parametrize("name", tiermem.adapters.__all__)
def test_exported_name_resolves(name: str) -> None:
    # each lazy name imports from the module the table says (a typo fails here, not at a caller)
    assert getattr(tiermem.adapters, name).__name__ == name


@pytest.mark.parametrize("name", tiermem.adapters.__all__)
def test_types_handed_out_are_exported(name: str) -> None:
    handed = _handed_types(getattr(tiermem.adapters, name))
    missing = sorted(t.__name__ for t in handed if t.__name__ not in tiermem.adapters.__all__)
    assert missing == [], f"{name} hands out types tiermem.adapters does not export: {missing}"


def test_anthropic_breakpoint_exported() -> None:
    # the type of AnthropicRequest.breakpoints' items, importable where AnthropicRequest is
    from tiermem.adapters import AnthropicBreakpoint, AnthropicRequest
    from tiermem.adapters.anthropic import AnthropicBreakpoint as defined

    assert AnthropicBreakpoint is defined
    assert AnthropicBreakpoint in _named_types(typing.get_type_hints(AnthropicRequest)["breakpoints"])
