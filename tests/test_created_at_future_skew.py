"""A message dated more than MAX_FUTURE_SKEW_S past now is refused, naming `created_at`
and the limit, writing nothing: its conversation's last activity would be in the future
and it would escape every prune until then (review r_ops, 2026-12-07: an import dated
2100 was kept by `prune --older-than 0`). A clock a little ahead, up to the skew, passes.
Checked where every message is validated (`tiers.models.parse_message`): the library,
the CLI's append and import, the HTTP service and the client."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_helpers import tm
from service_helpers import TOKEN_ACME, bearer, served_store

from tiermem import Config, Memory, ValidationError
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import MAX_FUTURE_SKEW_S

HOUR = 3_600.0


@pytest.fixture
def mem(tmp_path: Path, embedder: FastEmbedder) -> Iterator[Memory]:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False, background_indexing=False) as m:
        yield m


def _ahead(seconds: float) -> float:
    return time.time() + seconds


# (created_at, refused): the limit is now + MAX_FUTURE_SKEW_S
@pytest.mark.parametrize(("created_at", "refused"), [
    (lambda: _ahead(HOUR), False),  # a writer's clock an hour ahead: accepted
    (lambda: _ahead(MAX_FUTURE_SKEW_S - HOUR), False),  # just inside the skew
    (lambda: _ahead(MAX_FUTURE_SKEW_S + HOUR), True),  # just past it
    (lambda: 4102444800.0, True),  # 2100-01-01: escaped every prune before
], ids=["an-hour-ahead", "inside-the-skew", "past-the-skew", "year-2100"])
def test_append_refuses_a_time_past_the_skew_and_writes_nothing(mem: Memory, created_at: Any, refused: bool) -> None:
    msg = {"role": "user", "content": "hello", "created_at": created_at()}
    if not refused:
        mem.append("c", msg)
        assert [m.text for m in mem.history("c")] == ["hello"]
        return
    with pytest.raises(ValidationError, match="MAX_FUTURE_SKEW_S") as err:
        mem.append("c", msg)
    assert err.value.field == "created_at"
    assert f"{MAX_FUTURE_SKEW_S:.0f} s" in str(err.value)
    # a batch with one such message writes none of it
    with pytest.raises(ValidationError, match="created_at"):
        mem.append_many("c", [{"role": "user", "content": "fine"}, msg])
    assert mem.conversations() == []


def test_cli_import_of_a_future_time_imports_nothing(tmp_path: Path, embedder: FastEmbedder) -> None:
    lines = [{"conversation_id": "ok", "message": {"role": "user", "content": "x"}},
             {"conversation_id": "fut", "message": {"role": "user", "content": "x"}, "created_at": "2100-01-01T00:00:00Z"}]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tm(tmp_path, embedder, "", "import", str(src))
    assert out.exit_code != 0
    assert "line 2: created_at" in out.output and "MAX_FUTURE_SKEW_S" in out.output
    assert "nothing imported" in out.output
    # not even the valid line: the database was not created at all
    assert not Config(data_dir=tmp_path / "data").db_path.exists()


@pytest.mark.usefixtures("clean_env")
def test_http_append_of_a_future_time_is_a_422_naming_the_field(tmp_path: Path) -> None:
    with served_store(Config(data_dir=tmp_path / "data", auth_tokens={TOKEN_ACME: "acme"})) as served:
        r = httpx.post(f"{served.url}/v1/conversations/c/messages", headers=bearer(TOKEN_ACME), timeout=60.0,
                       json={"role": "user", "content": "x", "created_at": _ahead(MAX_FUTURE_SKEW_S + HOUR)})
        assert r.status_code == 422, r.text
        assert "created_at" in r.text and "MAX_FUTURE_SKEW_S" in r.text
        assert served.memory.conversations(namespace="acme") == []
