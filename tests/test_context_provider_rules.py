"""Property: every context a provider is sent is one it accepts (tests/provider_rules.py),
in each `context_format` and `system_messages` mode and in Anthropic's form. Random
conversations mix plain turns, parallel tool calls (results in any order, some long
enough to be trimmed, some rounds abandoned; ids fresh, numbered per reply as some
servers do, differing only in characters Anthropic does not take, or Responses calls of
one round sharing one), Responses items with reasoning,
retractions, clears, pins (tool messages too) and checkpoints, with calls in a row at
one budget (epochs: appends, rewinds, middle evictions) and now and then another one;
blank rows (an empty reply or user message, an empty tool output, a blank stored system
message), a blank system prompt and logs that open with the assistant, so that
breakpoints fall on blank messages (`ctx.with_cache_control()` is checked too) and some
contexts hold no user message (their Anthropic form is checked as every other).

Its hunt found the abandoned chat round (tests/test_tool_units_chat_rounds.py; about one conversation in 150
has the shape, more than this default run draws), and longer runs a reasoning item left
before a user message (tests/test_reasoning_orphan.py) and the memory message after a
pending tool round (tests/test_memory_before_pending_round.py), each about once in
several hundred.

The default run is deterministic (`derandomize`: the same DEFAULT_EXAMPLES conversations
every time), so CI fails only on a change, never on a rare shape it happened to draw
this time. Set TIERMEM_FUZZ_EXAMPLES for random exploration, that many conversations
new each run (the hunts ran 300-1,000; past about 400, add `-o timeout=0`: the whole
run is one test under pytest-timeout's 300 s); hypothesis prints the falsifying example."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from provider_rules import anthropic_problems, chat_problems, openai_form_cache_marks, responses_problems

from tiermem import Config, Memory
from tiermem.adapters.anthropic import to_anthropic
from tiermem.tiers.embed_onnx import FastEmbedder
from tiermem.tiers.errors import BudgetTooSmall
from tiermem.tiers.formats import to_chat, to_responses, unique_chat_call_ids

DEFAULT_EXAMPLES = 10
# unset: the fixed default run; set: random exploration of that many conversations
EXPLORE = os.environ.get("TIERMEM_FUZZ_EXAMPLES")
EXAMPLES = int(EXPLORE) if EXPLORE else DEFAULT_EXAMPLES
TOPICS = ["flight to Lisbon on Tuesday", "hotel near the station", "my seat is 12A", "budget is 900 euros",
          "weather in Tokyo", "dinner reservation at eight", "passport expires in May", "train to Porto"]
QUERIES = [*TOPICS, "what did the tool say?", "which flight?", None]
LONG_REPEATS = 300  # a tool output of ~1,500 tokens: past every tool_trim_tokens drawn
SHORT_REPEATS = 3
BLANK_REPEATS = 0  # an empty tool output
SYSTEMS = ["Be brief.", "Be brief.", "Be brief.", "  "]  # the caller's system prompt, now and then blank
# rows of blank text: a breakpoint on one must mark no blank block
BLANKS = [{"role": "assistant", "content": ""}, {"role": "user", "content": ""}, {"role": "user", "content": " \n"},
          {"role": "system", "content": " "},
          {"role": "assistant", "content": [{"type": "text", "text": "Noted."}, {"type": "text", "text": " "}]}]

topic = st.sampled_from(TOPICS)


# How a conversation's call ids are made (`call_ids`): fresh ones, a server's that numbers its
# calls per reply ("call_0" every round), ids that differ only in characters
# Anthropic does not take ("call.0", "call_0", "call:0": one id there), and one id for
# every call of a round ("shared": Responses items, one row each; append refuses it in
# one chat message, so chat rounds number theirs per reply)
ID_SCHEMES = ["fresh", "fresh", "per_reply", "colliding", "shared"]
COLLIDING_SEPARATORS = "._:"


def call_ids(scheme: str, first_id: int, count: int, family: str) -> list[str]:
    if scheme == "shared" and family == "responses":
        return ["call_0"] * count
    if scheme in ("per_reply", "shared"):
        return [f"call_{j}" for j in range(count)]
    if scheme == "colliding":
        return [f"call{COLLIDING_SEPARATORS[j]}0" for j in range(count)]
    return [f"call_{first_id + j}" for j in range(count)]


@st.composite
def tool_round(draw: st.DrawFn, family: str, scheme: str, first_id: int) -> list[dict[str, Any]]:
    ids = call_ids(scheme, first_id, draw(st.integers(1, len(COLLIDING_SEPARATORS))), family)
    answered = draw(st.permutations(ids))
    answered = answered[:len(answered) - draw(st.sampled_from([0, 0, 0, 0, 1]))]  # an abandoned call now and then
    repeats = draw(st.sampled_from([SHORT_REPEATS, SHORT_REPEATS, LONG_REPEATS, BLANK_REPEATS]))
    outputs = [(i, (draw(topic) + " ") * repeats) for i in answered]
    if family == "chat":
        return [{"role": "assistant", "content": draw(st.sampled_from([None, "Let me check."])), "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "lookup", "arguments": "{}"}} for i in ids]},
            *({"role": "tool", "tool_call_id": i, "content": text} for i, text in outputs)]
    # item ids stay unique when call ids come again (the Responses API refuses an item id twice)
    reasoning = [{"type": "reasoning", "id": f"rs_{first_id}", "summary": []}] if draw(st.booleans()) else []
    return [*reasoning, *({"type": "function_call", "id": f"fc_{first_id}_{j}", "call_id": i, "name": "lookup",
                           "arguments": "{}"} for j, i in enumerate(ids)),
            *({"type": "function_call_output", "call_id": i, "output": text} for i, text in outputs)]


@st.composite
def script(draw: st.DrawFn) -> tuple[str, str, list[tuple[str, Any]]]:
    """A conversation family, the caller's system prompt and the events: appends, control
    rows, pins, checkpoints, contexts."""
    family = draw(st.sampled_from(["chat", "responses"]))
    scheme = draw(st.sampled_from(ID_SCHEMES))  # a server makes its ids one way
    system = draw(st.sampled_from(SYSTEMS))
    budget = draw(st.one_of(st.integers(100, 800), st.integers(1500, 4000)))
    first = draw(st.sampled_from(["user", "user", "user", "assistant"]))  # a log may open with a reply
    # now and then an agent's own log: the user says nothing after the first message but a
    # blank one (and may take it back), so that some contexts hold no user message at all
    quiet = draw(st.sampled_from([False, False, False, True]))
    speaker = "assistant" if quiet else "user"
    events: list[tuple[str, Any]] = [("append", {"role": first, "content": draw(topic)})]
    calls = 0
    for _ in range(draw(st.integers(5, 40))):
        kind = draw(st.sampled_from(["user", "user", "assistant", "tools", "tools", "retract", "clear", "pin",
                                     "checkpoint", "context", "context", "blank", "retract_user"]))
        if kind == "user":
            events.append(("append", {"role": speaker, "content": draw(topic) + " please"}))
        elif kind == "assistant":
            events.append(("append", {"role": "assistant", "content": "Noted: " + draw(topic)}))
        elif kind == "blank":
            events.append(("append", draw(st.sampled_from(BLANKS))))
        elif kind == "tools":
            events += [("append", b) for b in draw(tool_round(family, scheme, calls))]
            calls += 3
        elif kind == "clear":  # an agent clears, then the user speaks
            events += [("clear", None), ("append", {"role": speaker, "content": draw(topic)})]
        elif kind == "retract_user":  # the user takes back what they said last
            events.append((kind, None))
        elif kind == "context":
            # mostly the conversation's budget (an epoch goes on), now and then another
            b = draw(st.one_of(st.just(budget), st.just(budget), st.integers(100, 900)))
            events.append(("context", (draw(st.sampled_from(QUERIES)), b, draw(st.booleans()))))
        else:
            events.append((kind, draw(st.floats(0, 0.999))))
    events.append(("context", ("what did the tool say?", budget, False)))
    return family, system, events


def problems(ctx: Any, mem: Memory, budget: int, fmt: str) -> list[str]:
    out = [f"{ctx.tokens} tokens, budget {budget}"] if ctx.tokens > budget else []
    if fmt == "chat":  # the agent's pending round may wait at the end
        out += chat_problems(ctx.messages, pending_ok=True)
    elif fmt == "as_stored":  # as the chat form sends them (its call ids renamed, tiers.formats "Ids sent")
        out += chat_problems(unique_chat_call_ids(to_chat(ctx.messages)), pending_ok=True)
    if fmt in ("as_stored", "responses"):
        out += responses_problems(to_responses(ctx.messages), pending_ok=True)
    out += openai_form_cache_marks(ctx.with_cache_control())
    req = to_anthropic(ctx, mem)
    return out + anthropic_problems(req.system, req.messages)


@settings(max_examples=EXAMPLES, derandomize=not EXPLORE, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(script(), st.sampled_from(["as_stored", "as_stored", "chat", "responses"]),
       st.sampled_from(["as_is", "as_is", "merge", "before_latest"]), st.sampled_from(["before_latest", "before_tail"]),
       st.sampled_from([32, 100, 400]))
def test_every_context_is_one_the_providers_accept(tmp_path_factory: Any, embedder: FastEmbedder,
                                                   conversation: tuple[str, str, list[tuple[str, Any]]], fmt: str,
                                                   system_messages: str, placement: str, trim: int) -> None:
    _family, system, events = conversation
    data: Path = tmp_path_factory.mktemp("d")
    cfg = Config(data_dir=data, context_format=fmt, system_messages=system_messages,  # type: ignore[arg-type]
                 retrieved_placement=placement, tool_trim_tokens=trim)  # type: ignore[arg-type]
    with Memory(cfg, embedder=embedder, hot=False, background_indexing=False) as mem:
        rows = 0
        said: list[int] = []  # the user messages' positions, not retracted
        for kind, arg in events:
            if kind == "append":
                mem.append("c", arg)
                said += [rows] if arg.get("role") == "user" else []
                rows += 1
            elif kind == "retract_user":
                if said:
                    mem.append("c", {"type": "tiermem.retract", "position": said.pop()})
                    rows += 1
            elif kind == "retract":
                mem.append("c", {"type": "tiermem.retract", "position": int(arg * rows)})
                rows += 1
            elif kind == "clear":
                mem.append("c", {"type": "tiermem.clear"})
                rows += 1
            elif kind == "pin":
                mem.pin("c", int(arg * rows))
            elif kind == "checkpoint":
                mem.checkpoint("c", "Summary: the user is planning a trip to Lisbon.", int(arg * rows))
            else:
                query, budget, truncate = arg
                try:
                    ctx = mem.context("c", query, budget, system=system, truncate_latest=truncate)
                except BudgetTooSmall:
                    continue
                assert problems(ctx, mem, budget, fmt) == [], (kind, arg, ctx.messages, ctx.plan.cache.reason)
