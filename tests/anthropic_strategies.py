"""Hypothesis strategies for Anthropic Messages input, shared by the property tests of
`from_anthropic` and of the service's `format: "anthropic"` batch.

- `json_values`: any JSON-ish value, recursive, with what breaks naive code: strings
  with lone surrogates and NULs, integers past `int`'s 4300-digit `str()` limit,
  non-finite floats, booleans where integers go.
- `valid_message`: a MessageParam or a whole reply built from the SDK's block shapes
  (`anthropic.types.*BlockParam`): text (with citations, cache_control), images by
  base64 and url, tool_use / tool_result, thinking and redacted thinking; the blocks
  kept whole (documents, search results, a server tool's call and its result).
- `near_valid_message`: a valid one with exactly one field (anywhere in it) dropped,
  retyped, set to a hostile value or oversized.
- `conversation`: a valid conversation as an agent sends it (user first, roles
  alternating, every tool_use answered in the next user message, parallel calls).
"""

from __future__ import annotations

import base64
import copy
import os
from typing import Any

from hypothesis import strategies as st

# Examples per property; raise for a longer run (as test_service_fuzz's knob).
EXAMPLES = int(os.environ.get("TIERMEM_FUZZ_EXAMPLES", "150"))
# the SDK's image media types (Base64ImageSourceParam)
MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDYXJlZnVsbHkgdGhpbmsiMHNpZ25lZA=="
# past CPython's int -> str limit (sys.get_int_max_str_digits, 4300 digits): json.dumps raises
HUGE_INT = 10 ** 5000
# past the default max_metadata_bytes (16 KiB), under the default max_content_bytes (1 MiB)
OVERSIZED_BYTES = 64 * 1024
NESTING_DEPTH = 2000  # deeper than the interpreter's recursion limit allows json.dumps to go

# any code point, lone surrogates included (st.text() leaves category Cs out by default)
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
hostile_text = st.sampled_from(["", " ", "\x00", "\ud800", "a\udfffb", "\n\t", "toolu_\x00", "é" * 3])
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.builds(lambda: HUGE_INT), st.builds(lambda: -HUGE_INT),
    st.floats(allow_nan=True, allow_infinity=True), any_text, hostile_text)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(any_text, inner, max_size=4)),
    max_leaves=20)


class _Deep(dict):  # type: ignore[type-arg]
    """Nesting past the recursion limit, shown short (hypothesis's printer recurses too)."""

    def __repr__(self) -> str:
        return f"<{NESTING_DEPTH} nested objects>"


def deep(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return _Deep(value)


# values put in place of one field: another type, hostile text, oversized, deep
replacements = st.one_of(
    json_values,
    st.just("x" * OVERSIZED_BYTES),
    st.just([{"type": "text", "text": "x"}] * 3),
    st.builds(deep, st.just(NESTING_DEPTH)),
    st.just({"type": "image"}),
    st.just({"type": "base64"}),
    st.sampled_from(["text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking", "document",
                     "message", "user", "assistant", "system", "base64", "url", "file"]),
)

ids = st.from_regex(r"toolu_[A-Za-z0-9]{1,8}", fullmatch=True)
# what the API takes as text: not blank (it refuses a whitespace-only block), and no edge
# whitespace (a final assistant message's is cut: the API refuses it in prefill)
texts = st.text(st.characters(codec="utf-8"), min_size=1, max_size=30).map(str.strip).filter(bool)
CITATION = {"type": "char_location", "cited_text": "21C", "document_index": 0, "document_title": "w",
            "start_char_index": 0, "end_char_index": 3}
EPHEMERAL = {"type": "ephemeral"}


@st.composite
def text_block(draw: st.DrawFn) -> dict[str, Any]:
    b: dict[str, Any] = {"type": "text", "text": draw(texts)}
    if draw(st.booleans()):
        b["citations"] = [dict(CITATION)]
    if draw(st.booleans()):
        b["cache_control"] = dict(EPHEMERAL)
    return b


@st.composite
def image_block(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        source = {"type": "base64", "media_type": draw(st.sampled_from(MEDIA_TYPES)), "data": PNG}
    else:
        source = {"type": "url", "url": "https://x.test/" + draw(st.from_regex(r"[a-z]{1,6}", fullmatch=True))}
    return {"type": "image", "source": source}


@st.composite
def tool_use_block(draw: st.DrawFn, cid: str | None = None) -> dict[str, Any]:
    args = draw(st.dictionaries(st.from_regex(r"[a-z]{1,5}", fullmatch=True),
                                st.one_of(texts, st.integers(-1000, 1000), st.booleans()), max_size=3))
    return {"type": "tool_use", "id": cid or draw(ids), "name": draw(st.sampled_from(["weather", "clock", "search"])),
            "input": args}


@st.composite
def tool_result_block(draw: st.DrawFn, cid: str | None = None) -> dict[str, Any]:
    content = draw(st.one_of(texts, st.lists(st.one_of(text_block(), image_block()), min_size=1, max_size=3)))
    b: dict[str, Any] = {"type": "tool_result", "tool_use_id": cid or draw(ids), "content": content}
    if draw(st.booleans()):
        b["is_error"] = draw(st.booleans())
    return b


thinking_block = st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": SIGNATURE}, texts)
redacted_block = st.builds(lambda: {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rL"})
PDF = base64.b64encode(b"%PDF-1.4 generated").decode()


@st.composite
def kept_user_block(draw: st.DrawFn) -> dict[str, Any]:
    """A user's block that the OpenAI form has no part for (a PDF as data is a file part)."""
    kind = draw(st.sampled_from(["pdf", "text_document", "content_document", "url_document", "search_result",
                                 "container_upload"]))
    if kind == "search_result":
        return {"type": "search_result", "source": "https://kb.test/" + draw(st.from_regex(r"[a-z]{1,6}", fullmatch=True)),
                "title": draw(texts), "content": [{"type": "text", "text": draw(texts)}]}
    if kind == "container_upload":
        return {"type": "container_upload", "file_id": "file_" + draw(st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True))}
    source = {"pdf": {"type": "base64", "media_type": "application/pdf", "data": PDF},
              "text_document": {"type": "text", "media_type": "text/plain", "data": draw(texts)},
              "content_document": {"type": "content", "content": [{"type": "text", "text": draw(texts)}]},
              "url_document": {"type": "url", "url": "https://docs.test/a.pdf"}}[kind]
    b: dict[str, Any] = {"type": "document", "source": source}
    if draw(st.booleans()):
        b["title"] = draw(texts)
    if draw(st.booleans()):
        b["citations"] = {"enabled": True}
    return b


@st.composite
def server_tool_pair(draw: st.DrawFn, cid: str | None = None) -> list[dict[str, Any]]:
    """A server tool's call and the result block answering it, as one reply holds them."""
    sid = cid or "srvtoolu_" + draw(st.from_regex(r"[A-Za-z0-9]{1,8}", fullmatch=True))
    if draw(st.booleans()):
        return [{"type": "server_tool_use", "id": sid, "name": "web_search", "input": {"query": draw(texts)}},
                {"type": "web_search_tool_result", "tool_use_id": sid, "content": [
                    {"type": "web_search_result", "url": "https://web.test/1", "title": draw(texts),
                     "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1jZjBmLTQ0", "page_age": "April 30, 2025"}]}]
    return [{"type": "server_tool_use", "id": sid, "name": "code_execution", "input": {"code": "print(1)"}},
            {"type": "code_execution_tool_result", "tool_use_id": sid, "content": {
                "type": "code_execution_result", "stdout": draw(texts), "stderr": "", "return_code": 0, "content": []}}]


@st.composite
def valid_message(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["user", "assistant", "reply", "system"]))
    if kind == "system":
        return {"role": "system", "content": draw(st.one_of(texts, st.lists(text_block(), min_size=1, max_size=2)))}
    if kind == "user":
        blocks = draw(st.lists(st.one_of(tool_result_block(), text_block(), image_block(), kept_user_block()),
                               min_size=1, max_size=4))
        content: Any = blocks if len(blocks) > 1 or draw(st.booleans()) else draw(texts)
        return {"role": "user", "content": content}
    blocks = draw(st.lists(st.one_of(thinking_block, redacted_block, text_block(), tool_use_block(),
                                     server_tool_pair()), min_size=1, max_size=4))
    blocks = [b for x in blocks for b in (x if isinstance(x, list) else [x])]  # a server pair: two blocks
    uses = [b for b in blocks if b["type"] == "tool_use"]
    for n, b in enumerate(uses):  # each call of a message has an id of its own (`ids` never hold "_<n>")
        if any(u["id"] == b["id"] for u in uses[:n]):
            b["id"] = f"{b['id']}_{n}"
    if kind == "assistant":
        return {"role": "assistant", "content": blocks}
    return {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": blocks, "stop_reason": "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 30}}


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in `value` a field or list item sits, as key paths."""
    out: list[tuple[Any, ...]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        out.append((*at, k))
        out.extend(_paths(v, (*at, k)))
    return out


@st.composite
def near_valid_message(draw: st.DrawFn) -> dict[str, Any]:
    """A valid message with one field dropped, retyped, made hostile or oversized."""
    m = copy.deepcopy(draw(valid_message()))  # the replacement values are shared: never mutate them
    path = draw(st.sampled_from(_paths(m)))
    parent: Any = m
    for k in path[:-1]:
        parent = parent[k]
    if draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(replacements)
    return m


@st.composite
def conversation(draw: st.DrawFn) -> list[dict[str, Any]]:
    """User first, roles alternating, every tool_use answered in the next user message
    (results first there), parallel calls, thinking before an assistant's other blocks."""
    out: list[dict[str, Any]] = [{"role": "user", "content": draw(st.one_of(
        texts, st.lists(st.one_of(text_block(), image_block()), min_size=1, max_size=2)))}]
    serial = 0
    for _turn in range(draw(st.integers(1, 3))):
        blocks: list[dict[str, Any]] = draw(st.lists(st.one_of(thinking_block, redacted_block), max_size=2))
        if draw(st.booleans()):  # a server tool ran before the answer
            blocks.extend(draw(server_tool_pair(f"srvtoolu_{_turn:04d}")))
        if draw(st.booleans()):
            blocks.append(draw(text_block()))
        calls = []
        for _ in range(draw(st.integers(0 if blocks else 1, 2))):
            serial += 1
            calls.append(draw(tool_use_block(f"toolu_{serial:04d}")))
        if not any(b["type"] in ("text", "tool_use") for b in blocks + calls):
            blocks.append(draw(text_block()))
        out.append({"role": "assistant", "content": blocks + calls})
        results = [draw(tool_result_block(c["id"])) for c in calls]
        tail = draw(st.lists(st.one_of(text_block(), kept_user_block()), min_size=0 if results else 1, max_size=1))
        out.append({"role": "user", "content": results + tail})
    return out
