"""`tiers/migrate_store.py` reaches the engines through their public interface only
(`tiers.store.ColdLog` and `SqlAccess`): no attribute of another object that starts with
an underscore, no private name imported from another module. Private members are the
engines' to change; a tool that leans on them breaks silently when they do."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "tiers" / "migrate_store.py"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_migrate_store_uses_no_private_member_of_another_object() -> None:
    tree = ast.parse(MODULE.read_text())
    offenders = [
        f"line {node.lineno}: .{node.attr}" for node in ast.walk(tree)
        # its own helpers (self._x) are its business; anything else's (self.store._x) is not
        if isinstance(node, ast.Attribute) and _private(node.attr)
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    ]
    assert offenders == []


def test_migrate_store_imports_no_private_name() -> None:
    tree = ast.parse(MODULE.read_text())
    offenders = [f"line {node.lineno}: {node.module}.{alias.name}" for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) for alias in node.names if _private(alias.name)]
    assert offenders == []
