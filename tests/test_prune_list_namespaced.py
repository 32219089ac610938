"""A prune's list of conversations names each one's namespace: `tiermem prune
--all-namespaces [--dry-run] [--json]`, `Memory.prune(...)`'s report and `POST /v1/prune`.

Invariants checked:
- `ErasureReport.namespaces` is each of `conversation_ids`' namespace, in the same order
  (ERASURE_ORDER), on both engines, for a preview and for the prune it previews.
- JSON keeps `conversation_ids` (names alone, as before) and adds `namespaced_ids`:
  `{"namespace", "id"}` objects, a tombstone's two fields.
- The dry run's text lists `namespace/id`: an id holds no `/`, so the last one splits them.

Before: the dry run listed `a, b, a, b` with no way to tell which namespace each was in
(the same ids live in several namespaces)."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import tm
from service_helpers import TOKEN_ACME, Served, served_store

from tiermem import Config, Memory
from tiermem.client import Client
from tiermem.tiers.embed_onnx import FastEmbedder

DAY = 86_400.0  # seconds
OLD = time.time() - 30 * DAY  # a month ago: older than WEEK
WEEK = "7d"
SUB = "acme/alice"  # a namespace holding a `/`: namespace/id still splits at the last one
# the old conversations in ERASURE_ORDER (namespace, then name): the same two ids in each
LISTED = [{"namespace": SUB, "id": "a"}, {"namespace": SUB, "id": "b"},
          {"namespace": "default", "id": "a"}, {"namespace": "default", "id": "b"}]


@pytest.fixture
def seeded(engine_config: Config, embedder: FastEmbedder) -> Iterator[tuple[Config, str]]:
    """The two ids, old, in two namespaces, and one fresh conversation that no prune of a
    week takes; with the config file text that points the CLI at the same store."""
    with Memory(engine_config, embedder=embedder, hot=False, background_indexing=False) as m:
        for ns in ("default", SUB):
            for name in ("a", "b"):
                m.append(name, {"role": "user", "content": f"{name} in {ns}", "created_at": OLD}, namespace=ns)
        m.append("fresh", {"role": "user", "content": "written just now"})
    toml = ("" if engine_config.cold_url is None
            else f'cold_url = "{engine_config.cold_url}"\ncold_schema = "{engine_config.cold_schema}"\n')
    yield engine_config, toml


def test_library_report_names_each_namespace(seeded: tuple[Config, str], embedder: FastEmbedder) -> None:
    config, _ = seeded
    with Memory(config, embedder=embedder, hot=False, background_indexing=False) as m:
        preview = m.prune(dt.timedelta(days=7), all_namespaces=True, dry_run=True)
        assert preview.conversation_ids == ["a", "b", "a", "b"]  # as before: names alone
        assert preview.namespaces == [one["namespace"] for one in LISTED]
        assert preview.named() == LISTED
        report = m.prune(dt.timedelta(days=7), all_namespaces=True)  # the real one: the same list
        assert report.named() == LISTED
        assert [(t["namespace"], t["id"]) for t in report.tombstones] == [(o["namespace"], o["id"]) for o in LISTED]


# (CLI arguments after the age, what the output must hold)
@pytest.mark.parametrize(("args", "dry"), [
    # the dry run's JSON: names alone as before, and each with its namespace
    (["--dry-run", "--json"], True),
    # the real prune's JSON: the same, beside its tombstones
    (["--json"], False),
], ids=["dry-run-json", "prune-json"])
def test_cli_json_names_each_namespace(seeded: tuple[Config, str], embedder: FastEmbedder, tmp_path: Path,
                                       args: list[str], dry: bool) -> None:
    _, toml = seeded
    out = tm(tmp_path, embedder, toml, "prune", "--older-than", WEEK, "--all-namespaces", *args)
    assert out.exit_code == 0, out.output
    answer = json.loads(out.output)
    assert answer["conversation_ids"] == ["a", "b", "a", "b"]  # kept: a field is added, none renamed
    assert answer["namespaced_ids"] == LISTED
    assert answer.get("dry_run", False) is dry


def test_cli_dry_run_text_names_each_namespace(seeded: tuple[Config, str], embedder: FastEmbedder,
                                               tmp_path: Path) -> None:
    _, toml = seeded
    out = tm(tmp_path, embedder, toml, "prune", "--older-than", WEEK, "--all-namespaces", "--dry-run")
    assert out.exit_code == 0, out.output
    assert out.output.splitlines() == ["would prune 4 conversation(s), 4 message(s); nothing erased (--dry-run)",
                                       f"  {SUB}/a", f"  {SUB}/b", "  default/a", "  default/b"]


IDLE_S = 0.2  # seconds: a conversation idle this long is within `older_than_seconds=IDLE_S`


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with served_store(Config(data_dir=tmp_path / "data", auth_tokens={TOKEN_ACME: "acme"})) as served:
        served.memory.append("a", {"role": "user", "content": "the old thread"}, namespace="acme")
        time.sleep(2 * IDLE_S)
        yield served


@pytest.mark.usefixtures("clean_env")
def test_http_and_client_name_each_namespace(served: Served) -> None:
    with Client(served.url, token=TOKEN_ACME) as client:
        preview = client.prune(IDLE_S, dry_run=True)  # from `namespaced_ids`: a dry run has no tombstone
        assert (preview.conversation_ids, preview.namespaces) == (["a"], ["acme"])
        report = client.prune(IDLE_S)
        assert (report.conversation_ids, report.namespaces) == (["a"], ["acme"])
