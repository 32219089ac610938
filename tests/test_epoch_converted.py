"""A converted context keeps its epoch (issue 22): under `context_format="chat"` or
`"responses"` and `system_messages="merge"` an epoch is extended on the stored form, as
under the default `as_stored`, then converted; the extension is kept only where the
converted previous request is still the prefix of the converted new one.

Fails on the code before: every converted call started a new epoch ("epochs are off
(messages are converted or moved ...)"), so no two requests shared more than the system
message (the reviewer's 20 LoCoMo calls: token prefix 6.1% against 74.2% as stored,
billed 95.9% / 117.3% of the uncached bill against 36.5% / 38.1%).
Real SQLite, the real model and tokenizer, no hot tier.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tiermem import Config, Memory
from tiermem.evals.cost import Renderer, common_prefix_ids
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.tokens import message_tokens

# every case writes the same talk: each text's vector computed once for the session
# (conftest's shared_vectors); the subject is the epochs and prefixes, not the vectors
pytestmark = pytest.mark.usefixtures("shared_vectors")

SYSTEM = "You are a helpful companion. Be brief."
BUDGET = 4000  # tokens: the whole talk and ten more rounds stay under the middle-eviction cap
CALLS = 10
# remarks that ask nothing: a plain chat, answered by the tail (no retrieved block)
TALK: list[dict[str, Any]] = [
    {"role": "user" if i % 2 == 0 else "assistant",
     "content": f"Day {i}: I walked the dog along the river and then painted part of the fence green."}
    for i in range(30)]


def _mem(tmp_path: Path, embedder: FastEmbedder, **kw: Any) -> Memory:
    return Memory(Config(data_dir=tmp_path / "d", **kw), embedder=embedder, hot=False, background_indexing=False)


def _check_marks(mem: Memory, messages: list[dict[str, Any]], marks: Any) -> None:
    """Breakpoints index the returned messages, their tokens counted on them."""
    for m in marks:
        assert 0 <= m.index < len(messages), (len(messages), marks)
        assert m.tokens == sum(message_tokens(mem.tokens, x) for x in messages[:m.index + 1]), m


@pytest.mark.parametrize("settings", [
    {"context_format": "chat"},  # chat messages in wire form
    {"context_format": "responses"},  # each message a Responses input item
    {"system_messages": "merge"},  # every system message folded into the first
    {"context_format": "chat", "system_messages": "merge"},  # both at once
    {},  # as stored: the behaviour the conversions now match
])
def test_ten_calls_extend_one_epoch_and_each_request_is_a_prefix_of_the_next(
        tmp_path: Path, embedder: FastEmbedder, settings: dict[str, Any]) -> None:
    with _mem(tmp_path, embedder, **settings) as mem:
        mem.append_many("c", TALK)
        render = Renderer(mem.tokens)
        prev_ids = None
        first_epoch = None
        for i in range(CALLS):
            said = f"Round {i}: I fixed the gate hinge and planted {i + 2} tomato seedlings this afternoon."
            mem.append("c", {"role": "user", "content": said})
            ctx = mem.context("c", said, BUDGET, system=SYSTEM)
            cache = ctx.plan.cache
            assert ctx.tokens <= BUDGET
            assert not any(it.slice == "retrieved" for it in ctx.plan.items)  # the premise: a plain chat
            _check_marks(mem, ctx.messages, ctx.plan.breakpoints)
            ids, ends = render.render(ctx.messages)
            if i == 0:
                first_epoch = cache.epoch
            else:
                # one epoch, extended on every call (each was a new one before)
                assert (cache.new_epoch, cache.epoch, cache.epoch_calls) == (False, first_epoch, i + 1), cache
                assert prev_ids is not None
                # the previous request (less its reply priming), token for token, starts this one
                assert common_prefix_ids(prev_ids, ids) == prev_ids.shape[0], (i, cache)
                # and the report says so, counted on the returned messages
                assert cache.expected_cached_tokens > 0 and cache.boundary == "", cache
            prev_ids = ids[:ends[-1]]
            mem.append("c", {"role": "assistant", "content": f"Lovely, {i + 2} seedlings is a good start."})


# a Responses-form round the planner sees as two stored messages (the assistant's text,
# then its call) that `to_chat` makes one chat message: the call joins the text before it
ROUND_TEXT: list[dict[str, Any]] = [
    {"role": "user", "content": "Find my booking, please."},
    {"role": "assistant", "content": "Let me look."},
]
ROUND_CALL: list[dict[str, Any]] = [
    {"type": "function_call", "call_id": "fc1", "name": "lookup", "arguments": "{\"q\": \"booking\"}"},
    {"type": "function_call_output", "call_id": "fc1", "output": "Hotel Sakura, Tokyo, 3 nights"},
]
# an older turn a recall finds, past what the tail shows at BUDGET_SMALL
OLD_FACT = {"role": "user", "content": "My sister Marisol booked the Hotel Sakura in Kyoto for our March trip."}
FILLER: list[dict[str, Any]] = [
    {"role": "user" if i % 2 == 0 else "assistant",
     "content": f"Note {i}: the garden needs watering, the compost bin is full, and the shed door squeaks again."}
    for i in range(80)]
BUDGET_SMALL = 1500  # tokens: the tail shows the newest part of FILLER, not OLD_FACT


@pytest.mark.parametrize(("settings", "first", "then", "query", "budget"), [
    # chat: the call arriving after the assistant's text joins that message once
    # converted, so the previous request's last message changes: not a prefix
    ({"context_format": "chat"}, [*TALK[:6], *ROUND_TEXT], ROUND_CALL, None, BUDGET),
    # merge: a recall's retrieved block is a system message the fold moves into the
    # first message, so the merged system text of the previous request changes
    ({"system_messages": "merge"}, [OLD_FACT, *FILLER, {"role": "user", "content": "The shed door squeaks."}],
     [{"role": "assistant", "content": "Oil the hinges."},
      {"role": "user", "content": "Do you remember which hotel my sister booked for the March trip?"}],
     "Do you remember which hotel my sister booked for the March trip?", BUDGET_SMALL),
])
def test_a_conversion_that_changes_an_earlier_message_starts_a_new_epoch(
        tmp_path: Path, embedder: FastEmbedder, settings: dict[str, Any], first: list[dict[str, Any]],
        then: list[dict[str, Any]], query: str | None, budget: int) -> None:
    with _mem(tmp_path, embedder, **settings) as mem:
        mem.append_many("c", first)
        a = mem.context("c", None, budget, system=SYSTEM)
        mem.append_many("c", then)
        b = mem.context("c", query, budget, system=SYSTEM)
        cache = b.plan.cache
        # a new epoch that says the conversion changed an earlier message, and which
        assert cache.new_epoch and cache.epoch == a.plan.cache.epoch + 1, cache
        assert "conversion" in cache.reason and "changed an earlier message" in cache.reason, cache.reason
        assert "epochs are off" not in cache.reason, cache.reason
        # the premise: the previous request is indeed not the prefix of this one
        assert b.messages[:len(a.messages)] != a.messages
        # its marks index what is returned
        _check_marks(mem, b.messages, b.plan.breakpoints)
        assert b.tokens <= budget
