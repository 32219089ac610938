"""`tiermem import`: the conversations format (every role, envelopes, probes), LoCoMo,
idempotent re-import, bad lines by line number; and the evals' missing-data message."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from convo_fixtures import support_lines, tiny_locomo, write_jsonl

from tiermem.cli import CliState, cli
from tiermem.config import DEFAULT_MAX_CONTENT_BYTES, DEFAULT_MAX_METADATA_BYTES, Config
from tiermem.errors import DataFileError
from tiermem.evals.conversations import read_conversations
from tiermem.memory import Memory
from tiermem.tiers.embed_onnx import FastEmbedder

LIMITS = {"max_content_bytes": DEFAULT_MAX_CONTENT_BYTES, "max_metadata_bytes": DEFAULT_MAX_METADATA_BYTES}


pytestmark = pytest.mark.usefixtures("clean_env")  # no TIERMEM_* setting of the runner leaks in


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def tm(data: Path, embedder: FastEmbedder, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--data-dir", str(data), *args], obj=CliState(embedder=embedder))


@pytest.fixture
def history(data_dir: Path, embedder: FastEmbedder) -> Iterator[Any]:
    def read(conv: str) -> list[Any]:
        with Memory(Config(data_dir=data_dir), embedder=embedder, hot=False, background_indexing=False) as mem:
            return mem.history(conv, namespace="default")
    yield read


def test_every_role_and_the_envelope_round_trip(tmp_path: Path, data_dir: Path,
                                                embedder: FastEmbedder, history: Any) -> None:
    lines = support_lines()
    f = write_jsonl(tmp_path / "support.jsonl", lines)
    r = tm(data_dir, embedder, "import", str(f), "--json")
    assert r.exit_code == 0, r.output
    n_msgs = sum(1 for x in lines if "probe" not in x)
    assert json.loads(r.stdout) == {"format": "conversations", "conversations": 1, "appended": n_msgs,
                                    "already_present": 0, "probes": 2, "bad_lines": []}
    got = history("support-1")
    assert [m.role for m in got[:7]] == ["system", "user", "assistant", "tool", "assistant", "user", "assistant"]
    assert got[2].body["tool_calls"][0]["function"]["name"] == "lookup_order"  # stored as given
    assert got[6].body["type"] == "message"  # a Responses item
    assert got[1].session_id == "s1"
    assert got[1].created_at == 1772359200.0  # ISO without a zone is UTC
    assert got[5].created_at == 1772359800.0


def test_reimport_appends_nothing_and_a_longer_file_only_the_tail(
        tmp_path: Path, data_dir: Path, embedder: FastEmbedder, history: Any) -> None:
    lines = [x for x in support_lines() if "probe" not in x]
    short = write_jsonl(tmp_path / "short.jsonl", lines[:5])
    full = write_jsonl(tmp_path / "full.jsonl", lines)
    assert json.loads(tm(data_dir, embedder, "import", str(short), "--json").stdout)["appended"] == 5
    again = json.loads(tm(data_dir, embedder, "import", str(short), "--json").stdout)
    assert (again["appended"], again["already_present"]) == (0, 5)
    more = json.loads(tm(data_dir, embedder, "import", str(full), "--json").stdout)
    assert (more["appended"], more["already_present"]) == (len(lines) - 5, 5)
    assert len(history("support-1")) == len(lines)
    # the conversation went on past the short file: re-importing that file adds nothing
    back = json.loads(tm(data_dir, embedder, "import", str(short), "--json").stdout)
    assert (back["appended"], back["already_present"]) == (0, 5)


def test_a_different_stored_message_is_a_conflict_and_writes_nothing(
        tmp_path: Path, data_dir: Path, embedder: FastEmbedder, history: Any) -> None:
    lines = [x for x in support_lines() if "probe" not in x]
    tm(data_dir, embedder, "import", str(write_jsonl(tmp_path / "a.jsonl", lines[:3])))
    changed = [*lines[:2], {"conversation_id": "support-1", "role": "user", "content": "something else"},
               {"conversation_id": "other", "role": "user", "content": "hello"}]
    r = tm(data_dir, embedder, "import", str(write_jsonl(tmp_path / "b.jsonl", changed)))
    assert r.exit_code == 1 and "position 2" in r.stderr and "support-1" in r.stderr
    with pytest.raises(KeyError):  # the other conversation was not written either
        history("other")


# (the bad line, the words the report must name)
BAD = [
    ("{not json", "not valid JSON"),                                              # a broken line
    ('{"conversation_id": "c", "role": "wizard", "content": "x"}', "role"),       # an unknown role
    ('{"conversation_id": "c", "message": {"role": "user", "content": "x"}, "extra": 1}', "extra"),
    ('{"conversation_id": "c", "probe": {"question": ""}}', "probe.question"),   # an empty probe
    ('{"conversation_id": "c", "role": "user", "content": "x", "created_at": "soon"}', "created_at"),
]


@pytest.mark.parametrize(("bad", "named"), BAD)
def test_bad_lines_are_named_by_number_and_refused_or_skipped(
        bad: str, named: str, tmp_path: Path, data_dir: Path, embedder: FastEmbedder,
        history: Any) -> None:
    good = json.dumps({"conversation_id": "c", "role": "user", "content": "fine"})
    f = tmp_path / "x.jsonl"
    f.write_text(f"{good}\n\n{bad}\n{good}\n")
    r = tm(data_dir, embedder, "import", str(f))
    assert r.exit_code == 1 and "x.jsonl: 1 bad line(s)" in r.stderr and "line 3:" in r.stderr
    assert named in r.stderr and "--skip-bad" in r.stderr
    with pytest.raises(KeyError):
        history("c")  # refused: nothing written
    r = tm(data_dir, embedder, "import", str(f), "--skip-bad", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["appended"] == 2 and [b["line"] for b in out["bad_lines"]] == [3]


def test_locomo_files_are_read_with_evals_locomo(tmp_path: Path, data_dir: Path,
                                                 embedder: FastEmbedder, history: Any) -> None:
    f = tmp_path / "lo.json"
    f.write_text(json.dumps(tiny_locomo()))
    data = read_conversations(f, **LIMITS)
    assert data.format == "locomo" and data.skipped_evidence == 1
    conv = data.conversations[0]
    assert conv.conversation_id == "locomo-t-1" and conv.message_ids == ["D1:1", "D1:2", "D2:1", "D2:2"]
    assert conv.evidence_positions(conv.probes[0]) == ([0], 0)
    r = tm(data_dir, embedder, "import", str(f), "--json")
    assert json.loads(r.stdout)["appended"] == 4
    got = history("locomo-t-1")
    assert [m.role for m in got] == ["user", "assistant", "user", "assistant"]
    assert got[2].session_id == "session_2"


def test_a_conversation_object_and_a_json_list(tmp_path: Path) -> None:
    conv = {"conversation_id": "c", "messages": [
        {"role": "user", "content": "hi", "message_id": "a"},
        {"message": {"role": "assistant", "content": "hello"}, "session_id": "s"}],
        "probes": [{"question": "greeting?", "evidence": ["a", 1, "nope"]}]}
    f = tmp_path / "c.json"
    f.write_text(json.dumps([conv]))
    data = read_conversations(f, **LIMITS)
    c = data.conversations[0]
    assert c.message_ids == ["a", None] and c.messages[1]["session_id"] == "s"
    assert c.evidence_positions(c.probes[0]) == ([0, 1], 1)  # "nope" names no message


def test_eval_without_data_says_how_to_pass_it(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["eval", "locomo", "--budget", "100"], obj=CliState())
    assert r.exit_code == 2  # a usage error since a97c07b (it was 1)
    assert "--data PATH" in r.output and "TIERMEM_LOCOMO_DATA" in r.output
    assert "shared/data" not in r.output  # no default path inside the dev checkout


def test_missing_file_is_a_data_file_error(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match=r"nope\.jsonl: no such file"):
        read_conversations(tmp_path / "nope.jsonl", **LIMITS)
