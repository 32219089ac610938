"""Shared fixtures: real SQLite files under tmp_path, one embedder per test session
(loading the model is the slow part), and real Redis servers started by tiermem."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One torch thread: on a 2-core runner the tests' own child processes (and other jobs)
# share the cores, and torch's spinning worker threads then cost ~20x the CPU per
# embedding. Children inherit it. Must be set before torch is first imported.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Ctrl-C reaches the tests' children as it would from a terminal. A runner started in the
# background by a script (`cmd &` in a shell without job control: a CI step, a make
# recipe, a helper's loop) inherits SIGINT ignored; Python then installs no handler, and
# every child the tests start inherits the ignore through exec, so the tests that stop a
# CLI with SIGINT (consolidate --watch, migrate-store interrupted) waited out their limits
# (60-120 s each) and failed, leaving the child running. A handled signal is reset to its
# default by exec: Python's own handler here gives each child the default.
if threading.current_thread() is threading.main_thread():
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # the mask is inherited too

# The PostgreSQL server of the session (tests/pg_server.py), registered here once for
# every module under tests/: a module that imported it would own a session fixture of its
# own, so a server of its own, running until the session ends (110 modules did: ~100
# servers, 5 GiB of /dev/shm, at once). pg_server.pg_url refuses a second start in one process.
from pg_server import (
    pg_url,  # noqa: F401  (pytest fixture)
    schemas_dropped_at_end,
)

from tiermem import Config, Memory
from tiermem.evals.baselines import OpenedMemory, close_memory, open_memory
from tiermem.tiers.cold import ColdStore
from tiermem.tiers.embed import Embedder, SentenceTransformerEmbedder
from tiermem.tiers.embed_onnx import FastEmbedder, build_embedder
from tiermem.tiers.tokens import BpeTokenCounter


@pytest.fixture(scope="module", autouse=True)
def _module_schemas_dropped() -> Iterator[None]:
    """The PostgreSQL schemas a module-scoped fixture made (fresh_schema), and any a child
    process of the module's tests made, dropped at the module's end: set up before the
    module's own fixtures (autouse first within a scope), torn down after them."""
    with schemas_dropped_at_end(sweep=True):
        yield


@pytest.fixture(autouse=True)
def _test_schemas_dropped() -> Iterator[None]:
    """The PostgreSQL schemas a test and its function-scoped fixtures made, dropped at its
    end (after those fixtures' teardown closed their stores): a worker's server otherwise
    holds every schema of the run, and catalog-wide steps slow with them (pg_server.py)."""
    with schemas_dropped_at_end():
        yield


@pytest.fixture(scope="session")
def embedder() -> FastEmbedder:
    # the runtime Memory picks by default (the ONNX export; it embeds a batch in ~2/3 of the
    # torch pipeline's time, the same vectors within embed.MIN_COSINE); tests of the torch
    # pipeline build their own. Loaded up front: a Memory with a loaded model resolves
    # supersession at append, as the tests of it expect (with an unloaded one it waits
    # for the turn's embedding)
    emb = build_embedder()
    assert isinstance(emb, FastEmbedder)
    # queries on the export itself, not on the fused query session whose use depends on
    # the machine's load: the same vectors whatever else runs (tests of that session
    # build their own embedder)
    emb.query_session = "never"
    emb.embed(["warm-up"])
    return emb


# embedder -> text -> its vector, for the whole test session (see `shared_vectors`); per
# embedder, so that no two models' vectors ever mix
_VECTORS: dict[int, dict[str, np.ndarray]] = {}


@contextlib.contextmanager
def vectors_shared(embedder: FastEmbedder) -> Iterator[FastEmbedder]:
    """`embedder` with its model run once per distinct text for the whole test session,
    while the block runs (the fixture `shared_vectors`; for a module-scoped fixture)."""
    compute = embedder._compute
    known = _VECTORS.setdefault(id(embedder), {})  # the session's embedders live as long

    def cached(texts: list[str]) -> np.ndarray:
        if not texts:
            return compute(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            known.update(zip(missing, compute(missing), strict=True))
        return np.stack([known[t] for t in texts])

    before = vars(embedder).get("_compute")  # a block of this already around this one
    embedder._compute = cached  # type: ignore[method-assign]
    try:
        yield embedder
    finally:
        if before is None:
            del embedder._compute  # the class's method again
        else:
            embedder._compute = before  # type: ignore[method-assign]


@pytest.fixture
def shared_vectors(embedder: FastEmbedder) -> Iterator[FastEmbedder]:
    """The session's embedder, its model run once per distinct text for the whole test
    session, for tests whose subject is what is done with the vectors (the evals' figures,
    the planner's epochs), not how they are computed. The embedder's memo of texts is
    scoped by conversation, as the product wants (no caller's latency says what another
    wrote): an eval that writes the same filler turns into 61 conversations embeds them 61
    times. This sits below the memo, so its scopes and hits are as before; a text's vector
    is the export's own (computed in another batch: equal within float rounding). The tests
    of the embedding itself never use it, nor tests that patch the embedder's methods (this
    instance attribute would hide a patch of the class's)."""
    with vectors_shared(embedder) as emb:
        yield emb


@pytest.fixture(scope="session")
def reference_embedder() -> SentenceTransformerEmbedder:
    """The torch pipeline the ONNX export must reproduce: the reference of the parity
    tests, never the runtime under test (loaded only by the tests that ask for it)."""
    return SentenceTransformerEmbedder()


@pytest.fixture(scope="session")
def counter() -> BpeTokenCounter:
    return BpeTokenCounter()


@pytest.fixture
def cold(tmp_path: Path, counter: BpeTokenCounter, embedder: Embedder) -> Iterator[ColdStore]:
    store = ColdStore(tmp_path / "data" / "tiermem.db", tokens=counter, embedder=embedder)
    yield store
    store.close()


@pytest.fixture
def cold_memory(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    """A Memory without the hot tier, for tests of the cold log alone."""
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        yield mem


@contextlib.contextmanager
def full_memory(config: Config, embedder: Embedder) -> Iterator[Memory]:
    """A full Memory on `config` (its embedded Redis stopped afterwards), for tests that
    need a config of their own."""
    from tiermem.tiers.redis_server import EmbeddedRedis

    mem = Memory(config, embedder=embedder, background_indexing=False)
    try:
        yield mem
    finally:
        mem.close()
        EmbeddedRedis(config.data_dir).stop()


@contextlib.contextmanager
def eval_memory(data_dir: Path, embedder: Embedder, *, hot: bool) -> Iterator[OpenedMemory]:
    """A Memory opened the way the evals open theirs (`evals.baselines.open_memory`), closed
    afterwards with the redis-server it started, if any."""
    o = open_memory(data_dir, hot=hot, embedder=embedder)
    try:
        yield o
    finally:
        o.stop_redis = True
        close_memory(o)


@pytest.fixture
def memory(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    """A full Memory: cold log, embedded Redis hot tier (stopped afterwards)."""
    from tiermem.tiers.redis_server import EmbeddedRedis

    data = tmp_path / "data"
    mem = Memory(Config(data_dir=data, hot_budget_tokens=600), embedder=embedder, background_indexing=False)
    try:
        yield mem
    finally:
        mem.close()
        EmbeddedRedis(data).stop()


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No TIERMEM_* variable of the environment the tests run in: modules that check which
    setting wins (config, CLI, service start-up) opt in with `pytestmark`."""
    for key in list(os.environ):
        if key.startswith("TIERMEM_"):
            monkeypatch.delenv(key)


# Modules holding a test of 15 s or more (crash and load runs, benchmark and eval smokes,
# children that load the model): run first, so that under pytest-xdist the last minutes are
# not one worker finishing a long test while the others have nothing left. Only the order
# changes; a module missing here just runs in its place.
LONG_RUNNING_MODULES = (
    "test_engines_differential",  # the slowest: two hypothesis properties, 50-250 s of one worker
    "test_cold_crash", "test_reliability_crash", "test_indexer_stop", "test_embed_bulk",
    "test_bench_embed_bulk", "test_tune_demo", "test_embed_offline", "test_bench_smoke",
    "test_pressure_retention", "test_inspector_browser", "test_bench_startup", "test_layout",
    "test_bench_exit", "test_postgres_text_limits", "test_session_eval", "test_evals_smoke",
    "test_knowledge_floors", "test_question_flow", "test_service_postgres_multi",
    "test_bench_startup_seed", "test_reliability_redis", "test_reliability_load", "test_query_graph",
    "test_late_pins", "test_exit_clean", "test_faststart", "test_cli",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONG_RUNNING_MODULES)}
    last = len(rank)
    # a stable sort: the same order in every worker, as pytest-xdist requires
    items.sort(key=lambda item: rank.get(item.path.stem, last))


@pytest.fixture(params=["sqlite", "postgres"])
def engine_config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    """A `Config` on each engine (a fresh PostgreSQL schema), plans stored: for tests that
    plant odd rows with `cold_helpers.sql_behind` and read them back through tiermem."""
    from pg_server import fresh_schema

    if request.param == "sqlite":
        return Config(data_dir=tmp_path / "data", store_plans=True)
    url: str = request.getfixturevalue("pg_url")
    return Config(data_dir=tmp_path / "data", store_plans=True, cold_url=url, cold_schema=fresh_schema())
