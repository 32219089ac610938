"""The store interface is the only way in: no module above the cold tier reaches into a
store's private connection or transaction helpers or writes SQL of its own (issue 14:
tiers/warm.py used `cold._read` / `cold._tx` 15 times). A reach-in would bind that module
to one engine, and the PostgreSQL store could not serve it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the two engines own their SQL; everything else goes through tiers.store.ColdLog
# the engines (the SQLite one is cold.py and its schema and migrations, schema.py), and the
# copier between them (migrate-store reads and writes both engines' tables row for row,
# which no store method offers)
ENGINES = {ROOT / "tiers" / "cold.py", ROOT / "tiers" / "schema.py", ROOT / "tiers" / "postgres.py",
           ROOT / "tiers" / "migrate_store.py"}
REACH_IN = re.compile(r"\bcold\._(read|tx|conn|lock)\b|\.execute\(\s*f?[\"'](SELECT|INSERT|UPDATE|DELETE)\b")


def test_no_module_above_the_store_touches_its_private_parts_or_sql() -> None:
    offenders = []
    for pkg in ("tiers", "planner", "consolidation", "tiermem"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path in ENGINES:
                continue
            for n, line in enumerate(path.read_text().splitlines(), start=1):
                if REACH_IN.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []
