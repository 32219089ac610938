"""A damaged model never replaces the stored vectors' recorded model.

The store records which model its vectors come from (meta `vec_model`: the sha256 of the
model's files) and re-embeds every turn when another model arrives. A catch-up asked the
embedder for that identity before it loaded anything, so weights cut off (a copy that
stopped) hashed to a new identity: the catch-up dropped every stored vector, then failed
to load the model; once the weights were restored, the original identity differed from
the one now recorded, and the whole store was embedded again. The identity is now the
model's as loaded (and checked), so a model that cannot load changes nothing stored.
Both engines; the model is a real copy of the bundled one under tmp_path.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from export_cache import copy_export_cache
from pg_server import fresh_schema

from tiermem import Config, Memory
from tiermem.tiers.embed import bundled_model_path
from tiermem.tiers.schema import VEC_MODEL_KEY, VEC_TABLE

QUERY = "When does my flight to Lisbon leave?"
TURNS = ["My flight to Lisbon leaves at 9:40 from gate B12.",
         *[f"The tomatoes in bed {i} need water." for i in range(6)]]
LATER = "Also, the hotel in Porto is booked for two nights."
WEIGHTS = "model.safetensors"


def _one(mem: Memory, sql: str, params: tuple[object, ...] = ()) -> object:
    with mem.cold.reading() as c:  # type: ignore[attr-defined]
        row = c.execute(mem.cold.dialect.sql(sql), params).fetchone()  # type: ignore[attr-defined]
    return row[0] if row else None


def _stored(mem: Memory) -> tuple[object, object]:
    """(how many vectors are stored, whose model they are recorded as)."""
    return (_one(mem, f"SELECT COUNT(*) FROM {VEC_TABLE}"),
            _one(mem, "SELECT value FROM meta WHERE key = ?", (VEC_MODEL_KEY,)))


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
@pytest.mark.parametrize("runtime", [
    "auto",  # the fast runtime, the pipeline as its fallback: both fail to load
    "torch",  # the pipeline alone
])
def test_weights_cut_off_keep_every_stored_vector(tmp_path: Path, request: pytest.FixtureRequest,
                                                  engine: str, runtime: str) -> None:
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    where = ({"cold_url": request.getfixturevalue("pg_url"), "cold_schema": fresh_schema()}
             if engine == "postgres" else {})
    config = Config(data_dir=tmp_path / "data", embedding_model=model, embedding_runtime=runtime,
                    embedding_cache_dir=copy_export_cache(tmp_path), **where)
    with Memory(config, hot=False, background_indexing=False) as mem:
        mem.append_many("c1", [{"role": "user", "content": t} for t in TURNS])
        mem.catch_up()
        before = _stored(mem)
    assert before[0] == len(TURNS) and str(before[1]).startswith("sha256:")

    os.truncate(model / WEIGHTS, (model / WEIGHTS).stat().st_size // 2)
    with Memory(config, hot=False, background_indexing=False) as mem:  # a process started after the damage
        mem.append_many("c1", [{"role": "user", "content": LATER}])
        assert mem.context("c1", query=QUERY).plan.tiers["embedder"] == "degraded"
        with pytest.raises(Exception):  # noqa: B017  (the load's own error: SafetensorError, OSError)
            mem.catch_up()
        assert _stored(mem) == before  # before: 0 vectors, recorded as the damaged files' digest
        assert mem.cold.pending_embeddings() == 1  # the new turn only

        shutil.copyfile(bundled_model_path() / WEIGHTS, model / WEIGHTS)
        mem.context("c1", query=QUERY)  # embeds the turn that waited, and only that one
        assert _stored(mem) == (len(TURNS) + 1, before[1])
        assert mem.cold.pending_embeddings() == 0
