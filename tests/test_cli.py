"""The `tiermem` CLI against a real data dir: click's CliRunner for speed (one loaded
embedding model shared through `CliState(embedder=...)`), and a few real subprocess
runs of the console script for exit codes and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tiermem.cli import LAZY_COMMANDS, CliState, cli, parse_age
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.redis_server import EmbeddedRedis

TIERMEM = str(Path(sys.executable).with_name("tiermem"))


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for key in list(os.environ):
        if key.startswith("TIERMEM_"):
            monkeypatch.delenv(key)
    data = tmp_path / "data"
    yield data
    EmbeddedRedis(data).stop()  # a no-op unless a command started it


class Cli:
    def __init__(self, data: Path, embedder: FastEmbedder) -> None:
        self.data = data
        self.embedder = embedder
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None, ok: bool = True) -> Result:
        result = self.runner.invoke(
            cli,
            ["--data-dir", str(self.data), *args],
            input=input,
            obj=CliState(embedder=self.embedder),
            catch_exceptions=False,
        )
        if ok:
            assert result.exit_code == 0, (args, result.output, result.stderr)
        return result

    def json(self, *args: str, input: str | None = None) -> Any:
        return json.loads(self(*args, "--json", input=input).stdout)


@pytest.fixture
def run(data_dir: Path, embedder: FastEmbedder) -> Cli:
    return Cli(data_dir, embedder)


def seed(run: Cli, conv: str = "c1") -> None:
    msgs = [
        {"role": "user", "content": "Hi, call me Dani. I'm allergic to tree nuts."},
        {"role": "assistant", "content": "Noted, Dani: no tree nuts."},
    ]
    for i in range(10):
        msgs.append({"role": "user", "content": f"Filler question {i} about the weather?"})
        msgs.append({"role": "assistant", "content": f"Filler answer {i}: sunny."})
    msgs.append({"role": "user", "content": "Book me a restaurant for Friday."})
    assert run.json("append", conv, input=json.dumps(msgs)) == {
        "conversation_id": conv,
        "positions": list(range(len(msgs))),
    }


# -- help ------------------------------------------------------------------------------------------------


def test_help_lists_every_command_with_one_line_help() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in (
        "serve",
        "demo",
        "append",
        "context",
        "history",
        "facts",
        "fork",
        "pin",
        "unpin",
        "prune",
        "delete",
        "delete-namespace",
        "stats",
        "rebuild",
        "consolidate",
        "eval",
        "search",
        "stop-redis",
    ):
        assert f"\n  {name} " in result.output, name
    for name, cmd in cli.commands.items():
        assert cmd.help and cmd.help.strip().splitlines()[0], f"{name} has no help"
    for opt in ("--data-dir", "--config", "--namespace", "--debug"):
        assert opt in result.output


def test_help_imports_nothing_heavy() -> None:
    code = (
        "import sys; from click.testing import CliRunner; from tiermem.cli import cli; "
        "r = CliRunner().invoke(cli, ['--help']); assert r.exit_code == 0; "
        "print(sorted(m for m in ('tiermem.evals.cli', 'torch', 'fastapi', 'uvicorn', 'sentence_transformers', "
        "'rich.table') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_parse_age() -> None:
    assert parse_age("30d") == 30 * 86400
    assert parse_age("12h") == 12 * 3600
    assert parse_age("90m") == 5400
    assert parse_age("45s") == 45
    assert parse_age("3600") == 3600
    assert parse_age("2w") == 14 * 86400
    assert parse_age("1.5h") == 5400
    for bad in ("", "-1d", "3x", "d", "1 2"):
        with pytest.raises(ValueError):
            parse_age(bad)


# -- writes and reads --------------------------------------------------------------------------------


def test_append_history_search(run: Cli, tmp_path: Path) -> None:
    r = run("append", "c1", "--role", "user", "--content", "No red-eyes, please.")
    assert r.stdout.strip() == "appended 1 message(s) to c1 at position 0"
    batch = tmp_path / "batch.json"
    batch.write_text(
        json.dumps(
            [{"role": "assistant", "content": "Noted."}, {"role": "user", "content": "And a window seat."}]
        )
    )
    r = run("append", "c1", "--json-file", str(batch), "--session-id", "s2")
    assert r.stdout.strip() == "appended 2 message(s) to c1 at positions 1..2"
    assert run.json("append", "c1", input='{"role": "assistant", "content": "Sure."}')["positions"] == [3]

    hist = run.json("history", "c1")
    assert [m["position"] for m in hist] == [0, 1, 2, 3]
    assert hist[0]["message"] == {"role": "user", "content": "No red-eyes, please."}
    assert [m["session_id"] for m in hist] == [None, "s2", "s2", None]
    table = run("history", "c1").stdout
    assert "No red-eyes, please." in table and "window seat" in table
    assert [m["position"] for m in run.json("history", "c1", "--limit", "2")] == [2, 3]

    hits = run.json("search", "red-eye flights", "-c", "c1", "-k", "2")
    assert hits and hits[0]["conversation_id"] == "c1"
    assert "c1" in run("search", "window").stdout


def test_append_refuses_bad_input_and_writes_nothing(run: Cli) -> None:
    run("append", "c1", "--role", "user", "--content", "first")
    r = run("append", "c1", "--role", "user", ok=False)
    assert r.exit_code == 2 and "--role and --content go together" in r.stderr
    r = run("append", "c1", input="{not json", ok=False)
    assert r.exit_code == 1 and r.stderr.startswith("error: invalid JSON on stdin")
    r = run(
        "append",
        "c1",
        input='[{"role": "user", "content": "ok"}, {"role": "wizard", "content": "x"}]',
        ok=False,
    )
    assert r.exit_code == 1
    assert r.stderr.startswith("error: messages[1].role:") and len(r.stderr.strip().splitlines()) == 1
    # an argument on the command line is a usage error (2), what stdin holds an error (1)
    r = run("append", "bad id", "--role", "user", "--content", "x", ok=False)
    assert r.exit_code == 2 and "Invalid value for 'CONVERSATION': may contain only" in r.stderr
    r = run("append", "c1", input="[]", ok=False)
    assert r.exit_code == 1 and "empty list" in r.stderr
    assert len(run.json("history", "c1")) == 1


def test_context_plain_and_json(run: Cli) -> None:
    seed(run)
    out = run("context", "c1", "-q", "What am I allergic to?", "--budget", "300").stdout
    assert "Book me a restaurant for Friday." in out
    assert "plan:" in out and "query class:" in out
    ctx = run.json(
        "context", "c1", "-q", "What am I allergic to?", "--budget", "300", "--system", "Be brief."
    )
    assert set(ctx) == {"messages", "tokens", "plan"}
    assert 0 < ctx["tokens"] <= 300
    assert ctx["messages"][0] == {"role": "system", "content": "Be brief."}
    assert ctx["plan"]["budget"] == 300
    r = run("context", "c1", "--budget", "1", ok=False)
    assert r.exit_code == 1 and r.stderr.startswith("error: budget:")
    assert run.json("context", "c1", "--budget", "10", "--truncate-latest")["tokens"] <= 10


def test_fork_pin_unpin_prune_stats_rebuild(run: Cli) -> None:
    seed(run)
    child = run("fork", "c1", "1").stdout.strip()
    assert child.startswith("c1.fork-")
    assert len(run.json("history", child)) == 2
    assert run.json("fork", "c1", "3", "--new-id", "c1-alt") == {
        "conversation_id": "c1-alt",
        "parent_id": "c1",
        "up_to": 3,
    }
    r = run("fork", "c1", "99", ok=False)
    assert r.exit_code == 1 and r.stderr.startswith("error: up_to:")

    assert "pinned c1 #0 (priority 80)" in run("pin", "c1", "0", "--priority", "80").stdout
    assert "unpinned c1 #0" in run("unpin", "c1", "0").stdout
    r = run("pin", "c1", "500", ok=False)
    assert r.exit_code == 1 and r.stderr.startswith("error: position:")
    assert run("pin", "c1", "0", "--priority", "101", ok=False).exit_code == 2

    stats = run.json("stats")
    assert stats["cold"]["conversations"] == 3 and stats["hot"]["healthy"] is True
    assert run.json("--namespace", "nobody", "stats")["cold"]["conversations"] == 0
    assert "cold.messages" in run("stats").stdout

    report = run.json("rebuild")
    assert report["hot_rebuilt"] == 3
    assert "rebuilt:" in run("rebuild").stdout

    assert run.json("prune", "--older-than", "30d")["conversations"] == 0
    assert run("prune", "--older-than", "3x", ok=False).exit_code == 2
    assert run.json("--namespace", "other", "prune", "--older-than", "0")["conversations"] == 0
    pruned = run.json("prune", "--older-than", "0")
    assert pruned["conversations"] == 3 and pruned["messages"] > 0
    r = run("history", "c1", ok=False)
    assert (
        r.exit_code == 1 and r.stderr.strip() == "error: conversation 'c1' not found in namespace 'default'"
    )


def test_delete_and_delete_namespace_erase_and_leave_tombstones(run: Cli) -> None:
    run("--namespace", "acme/alice", "append", "t1", "--role", "user", "--content", "alice's secret")
    run("--namespace", "acme/bob", "append", "t1", "--role", "user", "--content", "bob's note")
    run("--namespace", "acme/bob", "append", "t2", "--role", "user", "--content", "bob's other")
    gone = run.json("--namespace", "acme/alice", "delete", "t1")
    assert gone["conversations"] == 1 and gone["tombstones"][0]["id"] == "t1"
    assert "alice's secret" not in json.dumps(gone)
    assert run("--namespace", "acme/alice", "history", "t1", ok=False).exit_code == 1
    assert run("--namespace", "acme/alice", "delete", "t1", ok=False).exit_code == 1
    assert run("delete-namespace", "acme", ok=False).exit_code != 0  # asks first; no answer, nothing erased
    assert len(run.json("--namespace", "acme/bob", "history", "t2")) == 1
    erased = run.json("delete-namespace", "acme", "--yes")
    assert erased["conversations"] == 2 and sorted(erased["conversation_ids"]) == ["t1", "t2"]
    assert run("--namespace", "acme/bob", "history", "t2", ok=False).exit_code == 1


def test_namespaces_are_separate(run: Cli) -> None:
    run("--namespace", "alice", "append", "a1", "--role", "user", "--content", "alice's note")
    r = run("--namespace", "bob", "history", "a1", ok=False)
    assert r.exit_code == 1 and "not found" in r.stderr
    # ids are per namespace: bob's a1 is bob's own conversation
    run("--namespace", "bob", "append", "a1", "--role", "user", "--content", "x")
    assert [m["message"]["content"] for m in run.json("--namespace", "alice", "history", "a1")] == ["alice's note"]
    assert [m["message"]["content"] for m in run.json("--namespace", "bob", "history", "a1")] == ["x"]


def test_consolidate_once_and_missing_module(run: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    seed(run)
    r = run("consolidate")
    assert r.stdout.startswith("refreshed ") and "view(s)" in r.stdout
    monkeypatch.setitem(sys.modules, "tiermem.consolidation.scheduler", None)  # import now fails
    r = run("consolidate", ok=False)
    assert r.exit_code == 1
    assert r.stderr.startswith("error: consolidation is not available:") and len(r.stderr.splitlines()) == 1


def test_eval_is_lazy_and_fails_clearly_when_missing(run: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    module, _attr, _ = LAZY_COMMANDS["eval"]
    monkeypatch.setitem(sys.modules, module, None)
    r = run("eval", "locomo", "--budget", "100", ok=False)
    assert r.exit_code == 1
    assert r.stderr.startswith("error: 'tiermem eval' is not available:") and len(r.stderr.splitlines()) == 1
    monkeypatch.delitem(sys.modules, module)
    try:
        __import__(module)
    except ImportError:
        pytest.skip("tiermem.evals.cli does not import here")
    r = run("eval", "--help")
    assert "Usage:" in r.stdout


def test_serve_refusals(run: Cli) -> None:
    r = run("serve", "--no-auth", "--host", "0.0.0.0", ok=False)
    assert r.exit_code == 2  # both on the command line: a usage error (tests/test_cli_usage_edges.py)
    assert "Error: --no-auth serves only on loopback" in r.stderr
    r = run("serve", ok=False)
    assert r.exit_code == 1 and "no tokens" in r.stderr and "--no-auth" in r.stderr
    assert run("serve", "--port", "70000", ok=False).exit_code == 2


def test_config_errors_are_one_line(run: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('hot_budget_tokens = "lots"\n')
    r = run("--config", str(bad), "stats", ok=False)
    assert r.exit_code == 1
    assert r.stderr.startswith("error: invalid configuration: hot_budget_tokens:")
    assert len(r.stderr.strip().splitlines()) == 1
    assert run("--config", str(tmp_path / "missing.toml"), "stats", ok=False).exit_code == 2
    monkeypatch.setenv("TIERMEM_HTTP_PORT", "0")
    r = run("history", "x", ok=False)
    assert r.exit_code == 1 and "http_port" in r.stderr


@pytest.mark.usefixtures("shared_vectors")  # the demo's turns, as test_tune_demo embeds them: once a session
def test_demo_beats_tail_truncation(run: Cli) -> None:
    result = run.json("demo", "--budget", "800")
    assert result["conversation"]["messages"] >= 150
    assert result["data_dir"] is None
    rows = result["questions"]
    assert {r["kind"] for r in rows} >= {"recent recall", "early constraint", "corrected value", "summarize"}
    for r in rows:
        assert r["tiermem"]["tokens"] <= 800 and r["tail"]["tokens"] <= 800
        assert r["evidence_positions"], r["query"]
        assert sum(r["tiermem"]["found"]) >= sum(r["tail"]["found"]), r["query"]
    assert result["score"]["tiermem"] > result["score"]["tail_truncation"]
    # the readable rendering of the same result (not run twice: the demo takes a while)
    import io

    from rich.console import Console

    from tiermem.demo import render

    out = io.StringIO()
    render(result, Console(file=out, width=160), explain=True)
    plain = out.getvalue()
    assert "tail truncation" in plain and "Why tiermem loaded" in plain
    assert plain.count("Why tiermem loaded") == len(rows)


# -- the real console script ------------------------------------------------------------------------------


def _script(data: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    return subprocess.run(
        [TIERMEM, "--data-dir", str(data), *args],
        capture_output=True,
        text=True,
        input=input,
        env=env,
        timeout=180,
    )


def test_console_script_exit_codes(data_dir: Path) -> None:
    ok = _script(data_dir, "append", "c1", "--role", "user", "--content", "hello")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "appended 1 message(s) to c1 at position 0"

    usage = _script(data_dir, "append")
    assert usage.returncode == 2 and "Usage:" in usage.stderr

    err = _script(data_dir, "history", "nope")
    assert err.returncode == 1
    assert err.stderr == "error: conversation 'nope' not found in namespace 'default'\n"
    assert err.stdout == ""

    debug = _script(data_dir, "--debug", "history", "nope")
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "ConversationNotFound" in debug.stderr
