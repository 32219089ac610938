"""README: "Every command has `--help`; `--json` gives JSON". Each command that reports a
result takes `--json` and prints one JSON object; the exceptions are the servers (`serve`,
`mcp`), `export`, whose output is the data itself (JSON Lines), and `eval report`, which
renders the evals' JSON as markdown."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from cli_helpers import tm

from tiermem.cli import cli
from tiermem.tiers.embed_onnx import FastEmbedder

# commands with no result to report as JSON: the two servers, export (its output is JSONL)
# and eval report (markdown made from the evals' JSON)
NO_JSON = {"serve", "mcp", "export", "eval report"}


def leaf_commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    ctx = click.Context(group)
    found: list[tuple[str, click.Command]] = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        if isinstance(cmd, click.Group):
            found += leaf_commands(cmd, f"{prefix}{name} ")
        else:
            found.append((f"{prefix}{name}", cmd))
    return found


def test_every_reporting_command_takes_json() -> None:
    missing = [name for name, cmd in leaf_commands(cli)
               if name not in NO_JSON and not any("--json" in getattr(p, "opts", []) for p in cmd.params)]
    assert missing == []


@pytest.mark.parametrize(
    "args, expected",
    [
        # pin reports the turn and its priority
        (("pin", "c1", "1", "--priority", "80"), {"conversation_id": "c1", "position": 1, "pinned": True, "priority": 80}),
        # unpin reports the turn, no longer pinned
        (("unpin", "c1", "1"), {"conversation_id": "c1", "position": 1, "pinned": False}),
    ],
)
def test_pin_unpin_json(tmp_path: Path, embedder: FastEmbedder, args: tuple[str, ...],
                        expected: dict[str, object]) -> None:
    try:
        for role, text in (("user", "My budget is 2000 EUR."), ("assistant", "Noted.")):
            assert tm(tmp_path, embedder, "", "append", "c1", "--role", role, "--content", text).exit_code == 0
        r = tm(tmp_path, embedder, "", *args, "--json")
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout) == expected
    finally:
        tm(tmp_path, embedder, "", "stop-redis")


def test_stop_redis_json(tmp_path: Path, embedder: FastEmbedder) -> None:
    assert tm(tmp_path, embedder, "", "append", "c1", "--role", "user", "--content", "hi").exit_code == 0
    assert tm(tmp_path, embedder, "", "pin", "c1", "0").exit_code == 0  # starts the embedded server
    first = tm(tmp_path, embedder, "", "stop-redis", "--json")
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout) == {"stopped": True}
    again = tm(tmp_path, embedder, "", "stop-redis", "--json")
    assert json.loads(again.stdout) == {"stopped": False}
