"""Every command that reads a user's data file reads it under the id limit of the config
in effect, as `tiermem import` does. Before (a review, 2026-12-05), `tiermem tune` and the
benchmarks read a conversations file under the largest limit any config allows: a
conversation id over the configured `max_id_chars`, which import refuses naming the line
and the limit, was read, and tune failed midway through its run with an error naming no
line; `tiermem eval locomo / cost / session` made ids of their own over the limit
(`locomo-<sample id>` cut at 128 characters, `locomo-cost-...`, `locomo-session-...`)
and stopped at their first append. Real SQLite, the CLI in-process."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import tm
from click.testing import Result
from locomo_mini import question, sample, write

from tiermem.evals.conversations import read_conversations
from tiermem.tiers.embed_onnx import FastEmbedder

pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in

LIMIT = 16  # the config's max_id_chars in every case (the lowest a config allows is 8)
TOML = f"[limits]\nmax_id_chars = {LIMIT}\n"
LONG_ID = "c" * (LIMIT + 4)  # over the config's limit, well under the largest any config allows (256)
# what `tiermem import` says of the file below, under TOML
REFUSAL = (f"1 bad line(s), nothing imported (line 1: conversation_id: {LIMIT + 4} characters exceeds "
           f"the limit of {LIMIT} characters)")
LOCOMO = [sample("a-very-long-sample-id-0", ["I moved to Lisbon.", "Nice.", "Yes, in May."],
                 [question("Where?", "Lisbon", ["D1:1"])])]


def conversations_file(tmp_path: Path) -> Path:
    path = tmp_path / "convs.jsonl"
    conv = {"conversation_id": LONG_ID, "messages": [{"role": "user", "content": "I moved to Lisbon."},
                                                     {"role": "assistant", "content": "Nice."}],
            "probes": [{"question": "Where?", "evidence": [0]}]}
    path.write_text(json.dumps(conv) + "\n", encoding="utf-8")  # one line: one conversation
    return path


def bench(module: str, *args: str) -> Callable[[Path, FastEmbedder, pytest.MonkeyPatch], str]:
    """A benchmark's `main` on the file under env TIERMEM_MAX_ID_CHARS (its Config() is the
    config in effect): what it printed on the way out."""
    def run(path: Path, _embedder: FastEmbedder, monkeypatch: pytest.MonkeyPatch) -> str:
        import importlib

        monkeypatch.setenv("TIERMEM_MAX_ID_CHARS", str(LIMIT))
        with pytest.raises(SystemExit) as exc:
            importlib.import_module(f"tiermem.evals.{module}").main(["--data", str(path), *args])
        return str(exc.value.code)
    return run


def cli(*args: str) -> Callable[[Path, FastEmbedder, pytest.MonkeyPatch], str]:
    def run(path: Path, embedder: FastEmbedder, _monkeypatch: pytest.MonkeyPatch) -> str:
        r = tm(path.parent, embedder, TOML, *[str(path) if a == "FILE" else a for a in args])
        assert r.exit_code == 1, r.output
        assert "Traceback" not in r.output and len(r.stderr.strip().splitlines()) == 1, r.stderr
        return r.stderr
    return run


# (id, the command on a conversations file whose id is over the limit: its error output)
REFUSERS = [
    # tune: every candidate replays the file, so it is read under the candidates' limits
    ("tune", cli("tune", "FILE", "--budgets", "500", "--no-hot", "--json")),
    # a tune whose grid lowers the limit for one candidate: read under the lowest
    ("tune_grid", cli("tune", "FILE", "--budgets", "500", "--no-hot", "--json", "--grid", f"max_id_chars=64,{LIMIT}")),
    # the import benchmark (python -m tiermem.evals.bench_ingest)
    ("bench_ingest", bench("bench_ingest", "--rounds", "1", "--no-embed")),
    # the embedding benchmark reads the file's texts (python -m tiermem.evals.bench_embed_bulk)
    ("bench_embed_bulk", bench("bench_embed_bulk", "--rounds", "1")),
]


@pytest.mark.parametrize("run", [c[1] for c in REFUSERS], ids=[c[0] for c in REFUSERS])
def test_a_reader_refuses_an_id_over_the_limit_as_import_does(tmp_path: Path, embedder: FastEmbedder,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              run: Callable[..., str]) -> None:
    path = conversations_file(tmp_path)
    imported = tm(tmp_path, embedder, TOML, "import", str(path))
    assert imported.exit_code == 1 and REFUSAL in imported.stderr, imported.output  # the yardstick
    said = run(path, embedder, monkeypatch)
    assert f"{path}: {REFUSAL}; fix them" in said, said
    assert not (tmp_path / "data" / "tiermem.db").exists()  # nothing written by any of them


def locomo_ids(path: Path) -> list[str]:
    """The conversation ids `tiermem import` gives the file under TOML."""
    data = read_conversations(path, max_content_bytes=1 << 20, max_metadata_bytes=1 << 14, max_id_chars=LIMIT)
    return [c.conversation_id for c in data.conversations]


def _eval(tmp_path: Path, embedder: FastEmbedder, *args: str) -> Result:
    return tm(tmp_path, embedder, TOML, "eval", *args, "--data", str(tmp_path / "locomo.json"), "--json",
              "--quiet", "--no-hot", "--data-dir", str(tmp_path / "eval"))


# (id, the command on a LoCoMo file, what its JSON must say of the ids it made, or None)
LOCOMO_READERS: list[tuple[str, tuple[str, ...], str | None]] = [
    # the conversation of each sample: the id import gives it
    ("eval_locomo", ("locomo", "--budget", "500", "--method", "full_context"), "conversation_ids"),
    # the replayed sample's conversation (locomo-cost-<sample id>), cut to the limit
    ("eval_cost", ("cost", "--budget", "500", "--method", "full_context"), None),
    # the one chained conversation (locomo-session-<budget>), cut to the limit
    ("eval_session", ("session", "--budget", "500", "--method", "full_context"), None),
]


@pytest.mark.parametrize(("args", "ids_key"), [c[1:] for c in LOCOMO_READERS], ids=[c[0] for c in LOCOMO_READERS])
def test_an_eval_makes_its_ids_within_the_limit(tmp_path: Path, embedder: FastEmbedder, args: tuple[str, ...],
                                                ids_key: str | None) -> None:
    path = write(tmp_path / "locomo.json", LOCOMO)
    r = _eval(tmp_path, embedder, *args)
    assert r.exit_code == 0, r.output
    if ids_key is not None:
        assert json.loads(r.stdout)[ids_key] == locomo_ids(path)


def test_tune_replays_a_locomo_file_under_imports_ids(tmp_path: Path, embedder: FastEmbedder) -> None:
    path = write(tmp_path / "locomo.json", LOCOMO)
    r = tm(tmp_path, embedder, TOML, "tune", str(path), "--budgets", "500", "--no-hot", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["conversations"] == locomo_ids(path) == ["locomo-a-very-lo"]
