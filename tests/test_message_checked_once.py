"""Each message's body is checked once on its way in (`tiers.formats.check_body`, through
`tiers.models.parse_message`). Before: parse_message checked it (the check that names the
field), then `Message`'s own validator (`_shape`) checked it again, and `Memory.append`
parsed its message a second time in `append_outcome`: two checks per message of
append_many, append_outcome (the HTTP service, MCP) and parse_message itself, four per
Memory.append. The count is taken with a wrapper that calls the real check (a read's
check of a stored row, `stored=True`, is the read's and not counted); that every refusal
is as it was is the validation tests' (tests/test_validation.py, test_formats*.py,
test_message_*.py, test_service_*.py), which run the same code."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydantic
import pytest
import sdk_corpus as corpus

import tiermem.tiers.models as models
from tiermem import Config, Memory
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.models import Message, parse_message

pytestmark = pytest.mark.usefixtures("clean_env")

# every chat variant and every Responses item kind the SDK corpus holds, as one log
MESSAGES: list[dict[str, Any]] = corpus.chat_conversation() + corpus.responses_conversation()
LIMITS = {"max_content_bytes": Config().max_content_bytes, "max_metadata_bytes": Config().max_metadata_bytes}

WAYS: dict[str, Callable[[Memory, list[dict[str, Any]]], object]] = {
    # the check itself (the library's, the CLI's, import's, a client's before it sends): twice
    "parse_message": lambda mem, msgs: [parse_message(m, **LIMITS) for m in msgs],
    # one at a time: append parsed its message, then append_outcome parsed that again (four)
    "append": lambda mem, msgs: [mem.append("c", m) for m in msgs],
    # with the keyword envelope, which append folds in before it parses (four)
    "append with envelope": lambda mem, msgs: [mem.append("c", m, session_id="s", metadata={"k": 1},
                                                          created_at=1_700_000_000.0) for m in msgs],
    # a namespaced view's append is the Memory's (four)
    "namespaced append": lambda mem, msgs: [mem.namespaced("acme").append("c", m) for m in msgs],
    # one batch (two)
    "append_many": lambda mem, msgs: mem.append_many("c", msgs),
    # what the HTTP service and the MCP tools call (two)
    "append_outcome": lambda mem, msgs: mem.append_outcome("c", msgs, idempotency_key="k"),
}


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The bodies check_body was given to admit (not a read's), in order."""
    seen: list[object] = []
    real = models.check_body

    def counting(body: object, *, stored: bool = False) -> str:
        if not stored:
            seen.append(body)
        return real(body, stored=stored)

    monkeypatch.setattr(models, "check_body", counting)
    return seen


@pytest.mark.parametrize("way", WAYS)
def test_each_message_is_checked_once(way: str, tmp_path: Path, embedder: FastEmbedder,
                                      checks: list[object]) -> None:
    with Memory(Config(data_dir=tmp_path / "data"), embedder=embedder, hot=False,
                background_indexing=False) as mem:
        WAYS[way](mem, MESSAGES)
        assert len(checks) == len(MESSAGES)
        if way != "parse_message":  # and each is stored as given
            ns = "acme" if way == "namespaced append" else None
            assert [m.body for m in mem.history("c", namespace=ns)] == json.loads(json.dumps(MESSAGES))


# the model's own check stays for a Message built directly: parse_message's skip of it is
# no context a caller can name
DIRECT: dict[str, Callable[[], object]] = {
    "keywords": lambda: Message(role="user", content="x", colour="red"),
    "model_validate": lambda: Message.model_validate({"role": "user", "content": "x", "colour": "red"}),
    "a caller's context": lambda: Message.model_validate({"role": "user", "content": "x", "colour": "red"},
                                                         context={"_BODY_CHECKED": True, "checked": True}),
}


@pytest.mark.parametrize("how", DIRECT)
def test_a_message_built_directly_is_still_checked(how: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="colour: is not a field of a user message"):
        DIRECT[how]()
