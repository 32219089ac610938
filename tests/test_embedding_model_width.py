"""`embedding_model` may be any local sentence-transformers directory, of any width.

The vector table is made before the model loads (a process that only appends never loads
it), with the embedder's `dim`. Before the fix that was always 384, the bundled model's:
a 768-d model (all-mpnet-base-v2) or the 128-d one below failed its first catch-up with
"Dimension mismatch for inserted vector" on SQLite and on the HNSW index's cast on
PostgreSQL. The width now comes from the directory's module configs
(`model_dimension`), and a store step whose vectors are of another width than the table's
(a model whose configs do not say) remakes the table and re-embeds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiermem import Config, Memory
from tiermem.tiers.embed import bundled_model_path, model_dimension

NARROW = 128  # the width of the test model: neither the bundled 384 nor a default


@pytest.fixture(scope="module")
def narrow_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled MiniLM with a Dense 384 -> 128 layer and a Normalize after its pooling:
    a real sentence-transformers model whose vectors are 128 wide."""
    import torch
    from sentence_transformers import SentenceTransformer, models

    torch.manual_seed(0)
    word = models.Transformer(str(bundled_model_path()))
    pool = models.Pooling(word.get_embedding_dimension(), pooling_mode="mean")
    dense = models.Dense(pool.get_embedding_dimension(), NARROW, activation_function=torch.nn.Identity())
    out = tmp_path_factory.mktemp("narrow") / "model"
    SentenceTransformer(modules=[word, pool, dense, models.Normalize()], device="cpu").save(str(out))
    return out


def test_the_width_is_read_from_the_configs(narrow_model: Path) -> None:
    assert model_dimension(narrow_model) == NARROW
    assert model_dimension(bundled_model_path()) == 384


def write(path: Path, name: str, data: object) -> None:
    (path / name).parent.mkdir(parents=True, exist_ok=True)
    (path / name).write_text(json.dumps(data))


MODULES = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
           {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]


@pytest.mark.parametrize("files, want", [
    # mean pooling only: the word dimension
    ({"modules.json": MODULES, "1_Pooling/config.json": {"word_embedding_dimension": 768,
                                                          "pooling_mode_mean_tokens": True}}, 768),
    # mean and max pooled side by side: twice the word dimension
    ({"modules.json": MODULES, "1_Pooling/config.json": {"word_embedding_dimension": 256,
                                                          "pooling_mode_mean_tokens": True,
                                                          "pooling_mode_max_tokens": True}}, 512),
    # a Dense after the pooling decides
    ({"modules.json": [*MODULES, {"idx": 2, "name": "2", "path": "2_Dense",
                                  "type": "sentence_transformers.models.Dense"}],
      "1_Pooling/config.json": {"word_embedding_dimension": 384, "pooling_mode_mean_tokens": True},
      "2_Dense/config.json": {"in_features": 384, "out_features": 96}}, 96),
    # no modules.json: sentence-transformers builds Transformer + mean pooling
    ({"config.json": {"hidden_size": 1024}}, 1024),
    # a pooling config that does not say: unknown, not a guess
    ({"modules.json": MODULES, "1_Pooling/config.json": {"pooling_mode_mean_tokens": True},
      "config.json": {"hidden_size": 384}}, None),
    # unreadable modules.json and no config: unknown
    ({"modules.json": "not a list"}, None),
])
def test_model_dimension_cases(tmp_path: Path, files: dict[str, object], want: int | None) -> None:
    for name, data in files.items():
        write(tmp_path, name, data)
    assert model_dimension(tmp_path) == want


@pytest.mark.parametrize("runtime", ["torch", "auto"])  # auto: the export refuses a Dense, torch serves
@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_model_of_another_width_stores_and_finds_vectors(
        tmp_path: Path, narrow_model: Path, engine: str, runtime: str, request: pytest.FixtureRequest) -> None:
    config = Config(data_dir=tmp_path / "data", embedding_model=narrow_model, embedding_runtime=runtime,
                    embedding_cache_dir=tmp_path / "onnx")
    if engine == "postgres":
        from pg_server import fresh_schema

        config = config.model_copy(update={"cold_url": request.getfixturevalue("pg_url"),
                                           "cold_schema": fresh_schema()})
    mem = Memory(config, hot=False, background_indexing=False)
    try:
        mem.append_many("c1", [{"role": "user", "content": "My sister adopted a beagle puppy last spring."},
                               {"role": "assistant", "content": "How lovely, what did she name it?"},
                               {"role": "user", "content": "The quarterly report is due on Friday."}])
        assert mem.cold.index_pending(conversation_id="c1") == 3
        assert mem.embedder.dim == NARROW
        hits = mem.search("c1", "a young dog joined the family", k=3)
        dense = [h for h in hits if "dense" in h.ranks]
        assert dense and min(dense, key=lambda h: h.ranks["dense"]).position == 0
    finally:
        mem.close()
