"""The package layout: one installed namespace, and no module reaching past the store.

Invariants:
- the wheel installs exactly one top-level import name, `tiermem`; the repository's top-level
  folders reach it as `tiermem.tiers`, `tiermem.planner`, `tiermem.consolidation`,
  `tiermem.evals` (symlinks in `tiermem/`);
- code imports them only by those names: an `import tiers...` would load a second copy of
  every module (two `ColdStore` classes, two of every exception), so none may exist;
- outside `tiers/` (the storage layer) no module runs SQL on a store's private handle or
  imports a SQLite driver; the evals' raw-driver *baselines* are the named exceptions.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("tiers", "planner", "consolidation", "evals")
SOURCE_DIRS = ("tiermem", *FOLDERS, "tests")

# a bare top-level import of one of the linked folders (relative imports are fine)
BARE_IMPORT = re.compile(rf"^\s*(?:from|import)\s+(?:{'|'.join(FOLDERS)})(?:[.\s]|$)", re.M)
# a reach into the cold store's private connection helpers, or a SQLite driver
PRIVATE_SQL = re.compile(r"\._(?:read|tx|conn|write)\b|^\s*(?:import|from)\s+(?:sqlite3|sqlean)\b"
                         r"|from\s+\S+\s+import\s+sqlite3\b", re.M)
# benchmarks whose *baseline* is the raw driver (what tiermem is compared against), and the
# retention eval that measures the database file's tables the way an auditor would
RAW_DRIVER_BASELINES = {"evals/bench_cold.py", "evals/bench.py", "evals/retention.py"}


def _sources(*dirs: str) -> list[Path]:
    # the real folders, not the links in tiermem/ (each file once)
    return sorted(p for d in dirs for p in (ROOT / d).rglob("*.py")
                  if not (d == "tiermem" and p.relative_to(ROOT).parts[1] in FOLDERS))


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_folder_is_linked_into_the_package(folder: str) -> None:
    link = ROOT / "tiermem" / folder
    assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve()


def test_no_module_imports_a_linked_folder_by_its_bare_name() -> None:
    offenders = [f"{p.relative_to(ROOT)}:{m.group(0).strip()}"
                 for p in _sources(*SOURCE_DIRS) for m in BARE_IMPORT.finditer(p.read_text())]
    assert offenders == []


def test_nothing_outside_the_storage_layer_touches_sql_or_the_stores_privates() -> None:
    outside = [p for p in _sources("tiermem", "planner", "consolidation", "evals")
               if str(p.relative_to(ROOT)) not in RAW_DRIVER_BASELINES]
    offenders = [f"{p.relative_to(ROOT)}:{p.read_text()[:m.start()].count(chr(10)) + 1}"
                 for p in outside for m in PRIVATE_SQL.finditer(p.read_text())
                 if not p.read_text()[:m.start()].rsplit("\n", 1)[-1].lstrip().startswith("#")]
    assert offenders == []


# the wheel as the build backend pyproject.toml names makes it, into argv[1] (run in the
# source tree, as a frontend runs the backend's build_wheel hook)
BUILD_WHEEL = ("import importlib, sys, tomllib; "
               "name = tomllib.load(open('pyproject.toml', 'rb'))['build-system']['build-backend']; "
               "importlib.import_module(name).build_wheel(sys.argv[1])")


def test_the_wheel_installs_one_top_level_package(tmp_path: Path) -> None:
    had_build = (ROOT / "build").exists()
    try:
        # the build backend's own PEP 517 hook, as `pip wheel --no-build-isolation` calls it
        # (in a process of its own, from the source tree), without pip's start and resolver
        # around it: about half the time of the pip command
        subprocess.run([sys.executable, "-c", BUILD_WHEEL, str(tmp_path)], check=True, capture_output=True,
                       cwd=ROOT, timeout=300)
    finally:
        if not had_build:  # setuptools builds in the source tree: leave it as it was
            shutil.rmtree(ROOT / "build", ignore_errors=True)
    (wheel,) = tmp_path.glob("tiermem-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.endswith(".dist-info/RECORD")} - {
        n.split("/")[0] for n in names if ".dist-info/" in n} == {"tiermem"}
    for folder in FOLDERS:
        assert f"tiermem/{folder}/__init__.py" in names, folder
    # package data the evals and the demo read at run time
    assert "tiermem/evals/data/knowledge_cases.jsonl" in names
    assert "tiermem/data/demo_conversation.json" in names
    # the runtime does not require matplotlib: only the eval extra does
    meta = next(zipfile.ZipFile(wheel).read(n).decode() for n in names if n.endswith("METADATA"))
    requires = [line for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    assert any("matplotlib" in r and "extra == \"eval\"" in r for r in requires), requires
    assert not any("matplotlib" in r and "extra" not in r for r in requires), requires
    # installed alone (no source tree on the path), `import planner` fails and tiermem's works
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, timeout=300)
    assert (target / "tiermem" / "planner" / "plan.py").is_file()
    # -S -I: no site-packages (the editable install's finder) and no source tree on the path
    probe = ("import importlib.util as u, sys; sys.path.insert(0, sys.argv[1]); "
             "print([n for n in ('tiers', 'planner', 'consolidation', 'evals') if u.find_spec(n)], "
             "u.find_spec('tiermem').origin.startswith(sys.argv[1]))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", probe, str(target)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "True"]
