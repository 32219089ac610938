"""What the model APIs refuse in a request, one rule a function: the checks a context
(`Memory.context`, in every `context_format`) and its Anthropic form (`to_anthropic`)
must pass before a provider sees them. Each returns the problems it finds (empty when
the request is valid), so a property test can report all of them at once.

The rules, as the providers' docs state them:
- OpenAI Chat Completions: a `tool` message answers a `tool_calls` entry of the assistant
  message right before its run of tool messages; an assistant message with `tool_calls`
  must be followed by tool messages answering each id ("An assistant message with
  'tool_calls' must be followed by tool messages responding to each 'tool_call_id'");
  no two calls nor two tool messages share an id ("Duplicate value for 'tool_call_id'").
- OpenAI Responses: a `function_call_output` needs a `function_call` with its `call_id`
  earlier in the input ("No tool call found for function call output"), each call needs
  its output ("No tool output found for function call"), a `reasoning` item must be
  followed by the item it produced, no two items share an `id`, and no two calls nor
  two outputs a `call_id` ("Duplicate function_call_output for call_id"); an output's
  type is its call's (`custom_tool_call_output` for a `custom_tool_call`,
  `function_call_output` for a `function_call`).
- Anthropic Messages: the first message is `user`, roles alternate, no message or text
  block is empty, every `tool_result` is in the user message right after the assistant
  message with its `tool_use` (results first there), every `tool_use` is answered there,
  `tool_use` ids are unique ("tool_use ids must be unique"), at most 4 `cache_control` marks, thinking blocks only in
  assistant messages and never marked, no mark on a blank text block ("cache_control
  cannot be set for empty text blocks"), and at least one message ("at least one
  message is required"). The same marks in the OpenAI form (`Context.with_cache_control()`,
  for a gateway that hands them on to Anthropic) follow the same rules.
"""

from __future__ import annotations

import itertools
from typing import Any

# Anthropic: "A maximum of 4 blocks with cache_control may be provided."
ANTHROPIC_MAX_CACHE_MARKS = 4
THINKING = ("thinking", "redacted_thinking")


def _chat_calls(m: dict[str, Any]) -> list[str]:
    ids = [c["id"] for c in m.get("tool_calls") or ()]
    if isinstance(m.get("function_call"), dict):
        ids.append("fn:" + m["function_call"]["name"])  # legacy: a `function` message answers by name
    return ids


def _chat_result(m: dict[str, Any]) -> str | None:
    if m.get("role") == "tool":
        return str(m["tool_call_id"])
    if m.get("role") == "function":
        return "fn:" + str(m["name"])
    return None


def chat_results_follow_their_call(msgs: list[dict[str, Any]]) -> list[str]:
    """Chat: a tool message sits in the run of tool messages right after the assistant
    message whose `tool_calls` hold its id ("messages with role 'tool' must be a response
    to a preceding message with 'tool_calls'"), each id answered once."""
    out: list[str] = []
    open_ids: set[str] = set()
    for i, m in enumerate(msgs):
        rid = _chat_result(m)
        if rid is None:
            open_ids = set(_chat_calls(m)) if m.get("role") == "assistant" else set()
            continue
        if rid not in open_ids:
            out.append(f"message {i}: tool result {rid} not in the run after its call")
        open_ids.discard(rid)
    return out


def chat_calls_answered(msgs: list[dict[str, Any]], *, pending_ok: bool = False) -> list[str]:
    """Chat: every `tool_calls` id of an assistant message is answered by the tool messages
    right after it, before any other message. `pending_ok`: the calls of the last message
    may wait (the agent's pending round, which it answers next)."""
    out: list[str] = []
    for i, m in enumerate(msgs):
        ids = _chat_calls(m) if m.get("role") == "assistant" else []
        if not ids:
            continue
        answered: set[str] = set()
        j = i + 1
        while j < len(msgs) and _chat_result(msgs[j]) is not None:
            answered.add(str(_chat_result(msgs[j])))
            j += 1
        missing = sorted(set(ids) - answered)
        if missing and not (pending_ok and j == len(msgs)):
            out.append(f"message {i}: calls {missing} unanswered before message {j}")
    return out


def chat_call_ids_once(msgs: list[dict[str, Any]]) -> list[str]:
    """Chat: "Duplicate value for 'tool_call_id'": OpenAI's for two tool messages of one id
    (agno-agi/agno#5116), DeepSeek's for an id anywhere twice in `messages`
    (craft-ai-agents/craft-agents-oss#630): a call id is made by one call and answered by
    one tool message. The legacy `function_call`, answered by the function's name, is not
    held to it."""
    out: list[str] = []
    for kind, ids in (("tool_calls id", [c["id"] for m in msgs if m.get("role") == "assistant"
                                         for c in m.get("tool_calls") or ()]),
                      ("tool_call_id", [m["tool_call_id"] for m in msgs if m.get("role") == "tool"])):
        out += [f"{kind} {x} sent {ids.count(x)} times" for x in sorted(set(ids)) if ids.count(x) > 1]
    return out


def responses_outputs_follow_their_call(items: list[dict[str, Any]], *, pending_ok: bool = False) -> list[str]:
    """Responses: each output after its call (same `call_id`), each call with its output
    ("No tool output found for function call"); `pending_ok`: calls at the very end may wait."""
    out: list[str] = []
    called: dict[str, int] = {}
    answered: set[str] = set()
    for i, m in enumerate(items):
        t = m.get("type")
        if t in ("function_call", "custom_tool_call"):
            called[m["call_id"]] = i
        elif t in ("function_call_output", "custom_tool_call_output"):
            if m["call_id"] not in called:
                out.append(f"item {i}: output {m['call_id']} without its call before it")
            answered.add(m["call_id"])
    last_text = max((i for i, m in enumerate(items) if m.get("type") in (None, "message")), default=-1)
    for cid, i in called.items():
        if cid not in answered and not (pending_ok and i > last_text):
            out.append(f"item {i}: call {cid} has no output")
    return out


def responses_call_ids_once(items: list[dict[str, Any]]) -> list[str]:
    """Responses: "Duplicate function_call_output for call_id '...'. Each function_call must
    have exactly one matching function_call_output" (as relayed by gateways from a strict
    Responses endpoint: hermes-agent#102629, mnfst/llm-gateway#2858): a call_id is made by
    one call and answered by one output."""
    out: list[str] = []
    for kinds in (("function_call", "custom_tool_call"), ("function_call_output", "custom_tool_call_output")):
        ids = [m["call_id"] for m in items if m.get("type") in kinds]
        out += [f"{kinds[0]} call_id {x} sent {ids.count(x)} times" for x in sorted(set(ids)) if ids.count(x) > 1]
    return out


def responses_output_types_match(items: list[dict[str, Any]]) -> list[str]:
    """Responses: an output's type is that of the call it answers (the latest call of its
    `call_id` before it); the API refuses a `custom_tool_call_output` for a `function_call`
    and the other way round."""
    out: list[str] = []
    called: dict[str, str] = {}
    for i, m in enumerate(items):
        t = m.get("type")
        if t in ("function_call", "custom_tool_call"):
            called[m["call_id"]] = t
        elif (t in ("function_call_output", "custom_tool_call_output") and m["call_id"] in called
              and t != f"{called[m['call_id']]}_output"):
            out.append(f"item {i}: {t} answers {called[m['call_id']]} {m['call_id']}")
    return out


def responses_reasoning_followed(items: list[dict[str, Any]]) -> list[str]:
    """Responses: "Item of type 'reasoning' was provided without its required following item"."""
    return [f"item {i}: reasoning item last or before a user/system message" for i, m in enumerate(items)
            if m.get("type") == "reasoning" and (i + 1 == len(items) or items[i + 1].get("role") in
                                                ("user", "system", "developer"))]


def unique_item_ids(items: list[dict[str, Any]]) -> list[str]:
    """Responses: "Duplicate item found with id" (an item sent twice)."""
    ids = [m["id"] for m in items if isinstance(m.get("id"), str) and "type" in m]
    return [f"item id {x} sent {ids.count(x)} times" for x in sorted(set(ids)) if ids.count(x) > 1]


def anthropic_roles(system: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[str]:
    """Anthropic: `system` is text blocks, messages start with `user` and alternate, none
    empty, no blank text block ("text content blocks must be non-empty")."""
    out: list[str] = []
    roles = [m["role"] for m in messages]
    if not roles or roles[0] != "user":
        out.append(f"first message is not user: {roles[:1]}")
    out += [f"messages {i} and {i + 1} are both {a}" for i, (a, b) in enumerate(itertools.pairwise(roles)) if a == b]
    out += [f"system block {b.get('type')} is not non-blank text" for b in system
            if b.get("type") != "text" or not b["text"].strip()]
    for i, m in enumerate(messages):
        if not m["content"]:
            out.append(f"message {i} is empty")
        out += [f"message {i}: blank text block" for b in m["content"] if b["type"] == "text" and not b["text"].strip()]
        out += [f"message {i}: blank text block in a tool_result" for b in m["content"] if b["type"] == "tool_result"
                and isinstance(b.get("content"), list)
                for c in b["content"] if c.get("type") == "text" and not c["text"].strip()]
        out += [f"message {i}: {b['type']} block in a user message" for b in m["content"]
                if m["role"] == "user" and b["type"] in (*THINKING, "tool_use")]
        out += [f"message {i}: tool_result in an assistant message" for b in m["content"]
                if m["role"] == "assistant" and b["type"] == "tool_result"]
    return out


def anthropic_tool_pairs(messages: list[dict[str, Any]]) -> list[str]:
    """Anthropic: "tool_use ids were found without tool_result blocks immediately after";
    each tool_result answers a tool_use of the message just before, results first in
    their message; tool_use ids unique; one result per call."""
    out: list[str] = []
    uses_all = [b["id"] for m in messages for b in m["content"] if b["type"] == "tool_use"]
    out += [f"tool_use id {x} used {uses_all.count(x)} times" for x in sorted(set(uses_all)) if uses_all.count(x) > 1]
    for i, m in enumerate(messages):
        results = [b["tool_use_id"] for b in m["content"] if b["type"] == "tool_result"]
        if results:
            prev = messages[i - 1]["content"] if i > 0 else []
            asked = {b["id"] for b in prev if b["type"] == "tool_use"}
            out += [f"message {i}: tool_result {r} without its tool_use just before" for r in results if r not in asked]
            out += [f"message {i}: two results for {r}" for r in sorted(set(results)) if results.count(r) > 1]
            if [b["type"] for b in m["content"][:len(results)]] != ["tool_result"] * len(results):
                out.append(f"message {i}: tool_result blocks not first")
        uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        if uses:
            nxt = messages[i + 1]["content"] if i + 1 < len(messages) else []
            got = {b["tool_use_id"] for b in nxt if b["type"] == "tool_result"}
            out += [f"message {i}: tool_use {u} not answered in the next message" for u in uses if u not in got]
    return out


def anthropic_cache_marks(system: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[str]:
    """Anthropic: at most 4 `cache_control` blocks, none on a thinking block."""
    marks = [b for b in [*system, *(b for m in messages for b in m["content"])] if "cache_control" in b]
    out = [f"{len(marks)} cache_control marks"] if len(marks) > ANTHROPIC_MAX_CACHE_MARKS else []
    out += [f"cache_control on a blank text block {b['text']!r}" for b in marks
            if b["type"] == "text" and not b["text"].strip()]
    return out + [f"cache_control on a {b['type']} block" for b in marks if b["type"] in THINKING]


def _blank_part(p: Any) -> bool:
    # the text field of each text-like part type, Chat's and Responses'
    field = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal"}.get(p.get("type"))
    return field is not None and not str(p.get(field) or "").strip()


def openai_form_cache_marks(msgs: list[dict[str, Any]]) -> list[str]:
    """Anthropic's mark rules on the OpenAI form (`Context.with_cache_control()`), which a
    gateway hands on as Anthropic blocks: no mark on a blank text part or on a message
    whose content is blank text ("cache_control cannot be set for empty text blocks"),
    at most 4 marks."""
    out: list[str] = []
    count = 0
    for i, m in enumerate(msgs):
        content = m.get("content")
        if "cache_control" in m:
            count += 1
            if isinstance(content, str) and not content.strip():
                out.append(f"message {i}: cache_control on a message of blank text {content!r}")
        for p in content if isinstance(content, list) else ():
            if isinstance(p, dict) and "cache_control" in p:
                count += 1
                if _blank_part(p):
                    out.append(f"message {i}: cache_control on a blank {p.get('type')} part")
    return out + ([f"{count} cache_control marks"] if count > ANTHROPIC_MAX_CACHE_MARKS else [])


def chat_problems(msgs: list[dict[str, Any]], *, pending_ok: bool = False) -> list[str]:
    return (chat_results_follow_their_call(msgs) + chat_calls_answered(msgs, pending_ok=pending_ok)
            + chat_call_ids_once(msgs))


def responses_problems(items: list[dict[str, Any]], *, pending_ok: bool = False) -> list[str]:
    return (responses_outputs_follow_their_call(items, pending_ok=pending_ok) + responses_reasoning_followed(items)
            + unique_item_ids(items) + responses_call_ids_once(items) + responses_output_types_match(items))


def anthropic_problems(system: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[str]:
    return anthropic_roles(system, messages) + anthropic_tool_pairs(messages) + anthropic_cache_marks(system, messages)
