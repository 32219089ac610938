"""Anthropic's Messages API over tiermem (`pip install 'tiermem[anthropic]'`).

    mem.append_many("user-42", from_anthropic({"role": "user", "content": "Weather in Tokyo?"}))
    req = to_anthropic(mem.context("user-42", "Weather in Tokyo?", 2000, system="Be brief."), mem)
    reply = client.messages.create(model=..., max_tokens=1024, tools=..., **req.kwargs())
    mem.append_many("user-42", from_anthropic(reply))

**In** (`from_anthropic`): one `MessageParam` (a dict, its blocks dicts or the SDK's
block objects; an SDK object anywhere in it is read as its `model_dump`, `sdk_plain_deep`,
as `tiermem.client` sends it) or a reply (`anthropic.types.Message`, or its
`model_dump()`) as the OpenAI chat messages tiermem stores: text blocks as content (a
string for one block, parts for several or with images), `image` blocks as `image_url`
parts (a base64 source as a data URL), `tool_use` blocks as the assistant's `tool_calls` (arguments
`json.dumps(input)`), each `tool_result` block as a `tool` message (its text; a user
message's text and images after its results become one user message), `system` as a
system message, a `document` holding a PDF as data as a `file` part (`file_data`, the
title as its `filename`). A block OpenAI's form has no part for (a server tool's
`server_tool_use` and its result, `web_search_tool_result`, `web_fetch_tool_result`,
`code_execution_tool_result`, ...; a user's other `document` blocks, `search_result`,
`container_upload`) is a text part where it stood, holding its words (`[type]` or
`[server_tool_use name]`, then its arguments, titles, URLs, texts, outputs, one a line:
`_words`), so search, the planner and other clients read them, and is kept whole in
metadata. What the OpenAI form has no field for goes in each stored message's
metadata, under these keys, so that `to_anthropic` can put it back:

- `anthropic_thinking`: `[[index, block], ...]`, the `thinking` (with its `signature`)
  and `redacted_thinking` blocks, verbatim, at their index among the message's blocks;
- `anthropic_extra`: `[[index, {field: value}], ...]`, the fields of a converted block
  that OpenAI's has no place for: `citations`, a `tool_result`'s `is_error`, a
  `tool_use`'s `caller` and `toolset_name`, an image's `transformations`,
  `cache_control` (kept, never sent back: the plan's breakpoints place the marks);
- `anthropic_content`: a `tool_result`'s content when it is more than text (images,
  documents, search results, text blocks with citations), verbatim;
- `anthropic_blocks`: `[[index, block], ...]`, the blocks kept whole (above), verbatim,
  at their index among the message's blocks (a `cache_control` on one is kept, never sent
  back);
- `anthropic_order`: the order of the text (`t`, a kept block's text part too) and
  `tool_use` (`u`) blocks when a text block came after a `tool_use` (the OpenAI form has
  the text first);
- `anthropic_reply`: a reply's fields besides its content (`id`, `model`, `stop_reason`,
  `stop_sequence`, `usage`, ...).

Indexes count the Anthropic blocks that one stored message converts back to (a
`tool` message: its one `tool_result`). When a session's pop splits a message (the
Agents SDK's `pop_item` puts its text and each call back but the last as rows of their
own), each row put back gets its own blocks' extras, indexed among its blocks
(`item_extras`; the text row's citations are those of every text block, joined into
one as the row holds them), and the text row the message's kept blocks, whose words its
text holds: `to_anthropic` cuts that text at their words again (`item_blocks`), so the
kept turn goes back whole, as before the pop. A message whose metadata would pass
`max_metadata_bytes` is refused (`ValidationError` naming the largest block kept there,
nothing returned to append: a server tool's results, with their `encrypted_content`,
can need more than the default); so is a block type other than those above (naming the
block: the beta `mcp_tool_use`, ...), an image given by file id, a block a role cannot
hold (a `document` in a reply, a `server_tool_use` from the user), a kept block without
the fields it is read by (a server call's `id`, `name` and `input`, a result's
`tool_use_id`, a document's `source.type`, a search result's `source`, `title` and
`content`, an upload's `file_id`) or with a field sent back of a type the anthropic SDK's
param types do not take (a document's source fields and media type by its source type,
its `title` and `context`; a web search result's `content`, a list of results with string
`url`, `title` and `encrypted_content`, or an error object; another server result's
`content`, an object; a search result's `content`, text blocks: every later request
would be refused), a block holding what stored JSON cannot (NaN or an
infinity, a lone surrogate, an int past `str()`'s digit limit, nesting past the
recursion limit: named by the block), an id or tool name past the stored form's limits
(`tiers.formats`: named by the field as sent), and a `tool_use` whose id another of the
message has (`tiers.formats.repeated_call_id`: named by the second). Whatever the input,
the only exception is `ValidationError`, naming a field.

**Out** (`to_anthropic`): a `Context` as an `AnthropicRequest` (`system` blocks and
`messages`). The system messages the context opens with (the caller's system prompt,
stored system messages, tiermem's pinned and summary blocks) are `system` text blocks,
one per message, in order. A system message after the conversation began (the
retrieved block placed before the latest message, `retrieved_placement =
"before_latest"`) is a text block of the user turn it sits in: moved into `system` it
would change the start of every request, and the provider's prompt cache with it.
The rest alternate user / assistant, consecutive messages of one role merged into one
message's blocks; a `tool` message is a `tool_result` block of the next user message,
results first in it (the API's rule). Responses items (what the Agents SDK stores) are
converted as `tiers.formats.to_chat` reads them: `function_call` and
`custom_tool_call` are `tool_use` (arguments that are not a JSON object, and a custom
call's text, become `{"input": ...}`), their outputs `tool_result`; `reasoning` and
hosted-tool items are left out (an OpenAI model's encrypted reasoning means nothing to
Claude). Audio and non-PDF file parts become a short text reference (`[audio]`,
`[file name]`); a PDF given as data is a `document` block; an image given as data of a
type a base64 source cannot have (the API takes JPEG, PNG, GIF and WebP) becomes
`[image type]`. No text block is empty or blank (the API refuses one), in a
`tool_result` either. A context that ends with an assistant message is sent as prefill
(the API continues it) with its trailing whitespace cut, which the API refuses there
(models without prefill refuse the request: end the context on a user message).

A kept block goes back as given where the stored message is sent as it is (restored
with `memory`: "Restoring metadata"); else its text part does (no memory, or a row the
planner trimmed). The budget holds for what is sent: the plan counted the block's words
(its text part), a text block's text without its `citations`, a `tool_result`'s text
without the images and documents kept in `anthropic_content`, and what is sent whole
costs `kept_block_tokens` (its JSON counted as text with the memory's counter, less its
payloads, which cost as `tiers.formats` counts what is not text: an `encrypted_content`,
a citation's `encrypted_index` or a base64 source's data one token per 4 decoded bytes,
a document read by URL or file id `document_tokens`, an estimate: `DOCUMENT_REFERENCE_TOKENS`
by default, one PDF page at Anthropic's rates, and the request says so in its `notes`,
naming each such document sent whole). These go whole in request order while the
context's tokens with them fit the plan's budget; from the first that does not fit on,
each goes as the plan counted it (a kept block as its words, a server call with its
results; a text block without its citations; a result as its text): a web search result
of five 4 KB pages counted at 100 tokens costs about 3,990 sent whole. Within an epoch the
context only grows (the prompt cache's prefix is the previous call's request): a new
block that does not fit is appended as its words, the earlier ones unchanged. Once the
context grows past the room the whole ones took, one must turn into its words: they
cannot stay whole, the plan counted their words and its budget is hard. That rewrites
the request from there (a cache miss), and turning only the newest into words rewrote
again at each later call that outgrew the next one's room (at 2,000 tokens, calls 11, 14
and 18 of one epoch: three misses). So the first call that would turn a block sent whole
into its words turns every kept block into its words, and every later call of the epoch
does too (what they need only grows, the room only shrinks): one rewrite an epoch, from
the first kept block, which the request's `notes` say. Nor does a block an earlier
call of the epoch sent as its words go whole later (that too would rewrite the prefix):
each block keeps the form the first call that sent it gave it until that one rewrite.
Statelessly: the request finds that call among the earlier calls its context extends
(each prefix of it ending with a user message or a tool result, counted as the plan
counts, with the thinking of the tool loop it was in; `_turned_before`). The current tool
loop's thinking takes room from the blocks too (below), so a call inside a loop can be
the one that turns them; a loop that ends gives its room back to the blocks that come
later, never to the ones already sent as words (before, the next question sent them all
whole again and the call after turned them again: three rewrites in one epoch at 12,000
tokens). A request that ends with an assistant turn (a `pause_turn` reply) keeps that
turn's blocks whole first, each where it fits. A PDF given as data is no kept block: its
`file` part is counted as sent.

A `server_tool_use` and its result go together: in each assistant turn a server call
without a result block naming it, or a result without its call, is left out, except a
call in the request's last message (a reply that stopped with `pause_turn`, sent back
for the API to go on).

Pairing: every `tool_use` is answered by a `tool_result` in the next user message. The
planner keeps a call and its results in one unit (`tiers.formats.call_ids`), so a
context only breaks the rule where the log does (a call never answered, a result whose
call went before a clear): such a block is left out, and an assistant message left
empty with it. A context that opens with an assistant message (its tail starts there)
gets a user message holding `CONTINUED_TEXT` first: the API refuses any other opening.
So does a context with no message to send besides its system blocks (its one user
message retracted; only assistant, tool or system rows in the log and none of them fit):
the request is that user message alone, never `messages=[]`, which the API refuses
("at least one message"). That message is sent, so `tokens` counts it
(`opening_tokens`); a context planned with it among its `pending_tokens`, and
`to_anthropic(..., reserved=opening_tokens(memory))`, keeps room for it (the service's
and MCP's `format: "anthropic"` and the LangChain adapters' `in_turn` form do), else a
note says where it takes the request past the budget. Whatever the plan holds, nothing else takes its place: the
caller's query is no message of the log (a retracted question must not come back), and
the system blocks, with their marks, stay as planned.

Ids: every `tool_use` id sent is unique in the request, of the characters the API
accepts (`[A-Za-z0-9_-]`; OpenAI's are already) and at most `CALL_ID_MAX_CHARS` long;
each `tool_result` carries its call's. The API refuses a request that repeats one
("tool_use ids must be unique"), which a log holds where a server numbers its calls per
reply (`call_0` every round, as OpenAI's Chat Completions accepts) or where two ids
differ only in characters the API does not take (`call.1`, `call:1`). An id is sent as
stored, its other characters made `_`, where no id before it in the request is the same;
else with the first free suffix, `_2`, `_3`, ... (`call_0_2`): the renaming of every
form (`tiers.formats.SentCallIds`, "Ids sent"). A result is matched to its call where it
stands: in the user turn right after the assistant turn that makes the call, the n-th
result of an id answering the n-th call of it (a chat message whose calls share an id,
which append refuses today, was stored before that rule; Responses items of one round
may share one).

Restoring metadata: given the `memory` the context came from, the stored rows of the
context's tail are read in the namespace it was planned in (`Context.namespace`: a root
Memory reads there, not in its "default", where the same conversation id can be another
tenant's; a view of another namespace is refused, naming `memory`), one read from the
tail's first position, in pages, and each
message is matched to its row: a message with tool calls by its first call id, a tool
result by its call id, others by their wire form. A matched message gets its thinking
blocks, citations and the rest back; one whose text the planner trimmed (a long tool
output) keeps the trimmed text and only its thinking blocks and `is_error`. An assistant
message's thinking blocks come first, in their order (what the API requires of one with
thinking), also where it is merged from several (a context of Responses items). Without
`memory` nothing is restored: a tool loop with extended thinking needs it. The plan
counts no thinking block (the stored body holds none); the request counts those the API
counts (`thinking_tokens`): the current tool loop's, whose thinking is part of the
context window, while the thinking of earlier turns the API strips from it, uncounted
("Context windows", "The context window with extended thinking": `context_window =
(input_tokens - previous_thinking_tokens) + current_turn_tokens`), which `thinking="all"`
sends. The kept blocks go whole only in the room left after them (above), and
`AnthropicRequest.tokens` is the plan's count with both: what the request sends.

Which thinking goes back (`thinking=`): by default only the current tool loop's, the
assistant turns after the last user turn that answers no tool call (one that holds
results continues the loop, text after them included). A thinking
block is valid only while everything before it (system, tools, earlier messages) is
what Claude saw when it wrote it; models with preserved thinking check that and answer
400 (or drop the block) when it is not (platform.claude.com/docs/build-with-claude/
preserved-thinking/prefix-checks). A memory rewrites what comes before by design
(pinned facts and summaries in `system`, turns evicted, retrieved turns placed), so
older turns' thinking would fail the check; Anthropic's advice for an integration that
trims or summarizes earlier turns is to remove the thinking of the turns it keeps. The
current loop's thinking is what the API requires (an assistant turn with thinking
continuing a tool loop) and stays valid while the context is append-only (tiermem's
epochs); a new epoch inside a loop can still invalidate it. `thinking="all"` sends every
restored block, for models without the check.

`cache_control`: one `{"type": "ephemeral"}` mark per breakpoint of `ctx.plan`, at most
`max_breakpoints` (Anthropic's limit of 4, less the marks the caller puts on its
tools), the most valuable first (`BREAKPOINT_PRIORITY`: the end of the stable prefix,
then the whole context, the kept head of a middle eviction, then the layers, latest
first), on the last block the breakpoint's message converts to (a thinking block takes
none: the one before it does). A message that converts to no block (empty or blank
text, which is left out: the API refuses an empty text block, and one carrying a mark
with "cache_control cannot be set for empty text blocks") passes its mark to the last
block sent before it, which ends the same prefix. So does a prefill turn's text cut of
its trailing whitespace (above): the next call sends it uncut (a message follows it),
so a mark on it would write a prefix no request reads. No other block carries one.
`AnthropicRequest.breakpoints` says where each of the plan's breakpoints is in the
request (`AnthropicBreakpoint`: `message`, an index of `messages` or "system", and
`block`, the block's index there), marked or not: the plan's indexes count the OpenAI
form's messages, which the request moves (system) and merges (one role's run), so a
caller who places its own marks (`max_breakpoints=0`) marks these blocks. One per
block: two breakpoints that end on one block (a message between them sends nothing)
are the more valuable one. Which breakpoints get a mark is `chosen_breakpoints`, which
the LangChain adapters' `cache_marks` share (`tiermem.adapters.langchain.context_input`).

Deterministic: the same context (and the same stored rows, which never change) gives the
same request, byte for byte, which is what a provider's prompt cache keys on.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from tiermem.adapters._common import MemoryLike, check_memory, in_context_namespace, log_pages
from tiermem.config import DEFAULT_MAX_METADATA_BYTES
from tiermem.planner.plan import MAX_BREAKPOINTS, Breakpoint, Context
from tiermem.tiers.errors import ValidationError, field_error, shown
from tiermem.tiers.formats import (
    CALL_ID_MAX_CHARS,
    TOOL_NAME_MAX_CHARS,
    SentCallIds,
    base64_tokens,
    call_ids,
    canonical_role,
    message_text,
    repeated_call_id,
    result_id,
    to_chat,
)
from tiermem.tiers.models import MAX_BUDGET_TOKENS, check_int, check_keys
from tiermem.tiers.plain_json import NESTED_TOO_DEEP, check_int_digits, plain_deep, unencodable
from tiermem.tiers.tokens import REPLY_PRIMING_TOKENS, BpeTokenCounter, TokenCounter, message_tokens

THINKING_KEY = "anthropic_thinking"
EXTRA_KEY = "anthropic_extra"
CONTENT_KEY = "anthropic_content"
ORDER_KEY = "anthropic_order"
REPLY_KEY = "anthropic_reply"
BLOCKS_KEY = "anthropic_blocks"
METADATA_KEYS = (THINKING_KEY, EXTRA_KEY, CONTENT_KEY, ORDER_KEY, REPLY_KEY, BLOCKS_KEY)

THINKING_TYPES = ("thinking", "redacted_thinking")
# A server tool's call (web search, web fetch, code execution, tool search: the API runs
# it) and the result blocks answering it, both in the reply that made the call.
SERVER_TOOL_USE = "server_tool_use"
SERVER_RESULT_TYPES = ("web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
                       "bash_code_execution_tool_result", "text_editor_code_execution_tool_result",
                       "tool_search_tool_result")
DOCUMENT = "document"
SEARCH_RESULT = "search_result"
CONTAINER_UPLOAD = "container_upload"  # a file the code execution tool reads, by its file id
# Blocks OpenAI's chat form has no part for, kept verbatim in `BLOCKS_KEY` with a text
# part holding their words in the stored body (module docstring, "In"), by the role
# that may hold them
KEPT_TYPES: dict[str, frozenset[str]] = {
    "user": frozenset({DOCUMENT, SEARCH_RESULT, CONTAINER_UPLOAD}),
    "assistant": frozenset({SERVER_TOOL_USE, *SERVER_RESULT_TYPES, CONTAINER_UPLOAD}),
    "system": frozenset(),
}
BLOCK_TYPES = ("text", "image", "tool_use", "tool_result", *THINKING_TYPES, DOCUMENT, SEARCH_RESULT,
               SERVER_TOOL_USE, *SERVER_RESULT_TYPES, CONTAINER_UPLOAD)
# the fields of each converted block that the OpenAI form holds; the others are extras
CORE_FIELDS: dict[str, frozenset[str]] = {
    "text": frozenset({"type", "text"}),
    "image": frozenset({"type", "source"}),
    "tool_use": frozenset({"type", "id", "name", "input"}),
    "tool_result": frozenset({"type", "tool_use_id", "content"}),
    DOCUMENT: frozenset({"type", "source"}),  # a PDF given as data: a `file` part
}
ROLE_BLOCKS: dict[str, frozenset[str]] = {
    "user": frozenset({"text", "image", "tool_result"}) | KEPT_TYPES["user"],
    "assistant": frozenset({"text", "tool_use", *THINKING_TYPES}) | KEPT_TYPES["assistant"],
    "system": frozenset({"text"}),
}
# The keys of a kept block whose string values are its words (a title, a URL, a text, a
# program's output, an error code), where they are found at any depth of the block; other
# strings (ids, base64 data, `encrypted_content`) are not words. A text source's `data`
# is (`_words`).
WORD_KEYS = frozenset({"title", "url", "source", "text", "context", "stdout", "stderr", "error_code", "content",
                       "cited_text"})
# the name a PDF document's `file` part is stored under (the OpenAI form's `filename`,
# which it wants beside `file_data`): the block's title with the suffix, else this
PDF_FILENAME = "document.pdf"
PDF_SUFFIX = ".pdf"
# What a kept block sent whole costs (`kept_block_tokens`, the rule of `tiers.formats`
# for what is not text): these strings are payload, counted by their decoded bytes at
# FILE_BYTES_PER_TOKEN (as a reasoning item's `encrypted_content` and an inline file are):
# a search result's encrypted page, a base64 source's data
# (and a web search citation's encrypted index, which a text block's `citations` carry)
PAYLOAD_KEYS = frozenset({"encrypted_content", "encrypted_index"})
# A document the API reads by reference (a URL, a file id) is fetched by Anthropic, never
# by tiermem, so what it costs is not known here: an estimate, `document_tokens` (a
# setting of `to_anthropic`), DOCUMENT_REFERENCE_TOKENS by default. Anthropic's PDF guide
# (platform.claude.com/docs/en/build-with-claude/pdf-support, "Estimate your costs") puts a
# page's text at 1,500 to 3,000 tokens, and sends each page as an image too, which costs
# at most about 1,600 (an image of 1.15 megapixels, the largest the API keeps unscaled):
# one page at the top of both, 4,600. A longer document costs more per page: a caller who
# knows its documents' lengths passes its own figure. (tiers.formats' REFERENCE_TOKENS,
# 1,024, is the OpenAI form's guess for a file by id; one page of a PDF passes it.)
REFERENCE_SOURCES = frozenset({"url", "file"})
PDF_PAGE_TEXT_TOKENS = 3_000  # the top of Anthropic's 1,500 to 3,000 a page
PDF_PAGE_IMAGE_TOKENS = 1_600  # a page as an image of at most 1.15 megapixels (width * height / 750)
DOCUMENT_REFERENCE_TOKENS = PDF_PAGE_TEXT_TOKENS + PDF_PAGE_IMAGE_TOKENS
MAX_DOCUMENT_TOKENS = 10_000_000  # a bound on `document_tokens`: past any context window
# Tokens the plan may have counted less for a kept block's words than their count alone:
# the words are one part of the message's text, joined to the next by a newline, which the
# tokenizer can merge with a punctuation mark ending them
WORDS_JOIN_TOKENS = 1
PARAM_FIELDS = frozenset({"role", "content"})  # a MessageParam's; a reply (type "message") has more
EPHEMERAL = {"type": "ephemeral"}
# The opening user message of a context whose first message is the assistant's (the
# Messages API refuses that opening; the tail can start with a reply).
CONTINUED_TEXT = "[earlier conversation continues]"
THINKING_SCOPES = ("current_loop", "all")  # which assistant turns' thinking goes back (module docstring)
# Which breakpoints get a mark when there are more than the request may carry: the end of
# the stable prefix (read back by every call of the epoch), the whole context (the next
# call's prefix), the head a middle eviction keeps, then the layers, latest first.
BREAKPOINT_PRIORITY = ("stable", "context", "head", "late_pinned", "summary", "pinned", "system")
_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL | re.IGNORECASE)
PDF_MEDIA_TYPE = "application/pdf"
DATA_SCHEME = "data:"
# the media types a base64 image source may have (the API refuses any other with a 400)
IMAGE_MEDIA_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


@dataclass(frozen=True)
class AnthropicBreakpoint:
    """A plan breakpoint where the request holds it: the block the prefix through the
    breakpoint's message ends with. `message`: an index of the request's `messages`, or
    "system" for its `system` blocks; `block`: the index of that block in the message's
    `content` (or in `system`); `layer` and `tokens` as the plan's `Breakpoint` has them."""

    layer: str
    tokens: int
    message: int | Literal["system"]
    block: int


@dataclass(frozen=True)
class AnthropicRequest:
    """`system` text blocks and `messages` for `client.messages.create`, and where the
    plan's breakpoints are in them (`breakpoints`: every one the request holds, marked or
    not, in the plan's order; the marks are already placed, at most `max_breakpoints`);
    `notes`: what its count of tokens estimates (a document the API fetches, sent whole);
    `tokens`: what it sends, counted (the plan's tokens, the thinking blocks the API counts,
    the kept blocks sent whole and the opening user message it adds)."""

    system: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    breakpoints: list[AnthropicBreakpoint] = field(default_factory=list)
    # what the request's token count holds that is an estimate, or that an earlier
    # request of the epoch sent otherwise, one line each (module docstring, "Out")
    notes: list[str] = field(default_factory=list)
    # the plan's tokens with what the request sends beyond them: the current tool loop's
    # thinking blocks and the kept blocks sent whole (module docstring); 0: not counted
    tokens: int = 0

    def kwargs(self) -> dict[str, Any]:
        """`system` and `messages` as keyword arguments (`system` left out when empty)."""
        return {"system": self.system, "messages": self.messages} if self.system else {"messages": self.messages}


# -- in ---------------------------------------------------------------------------------------


def _json_bytes(value: Any, field: str) -> int:
    """The size of `value` as stored JSON (UTF-8); ValidationError naming `field` for a value
    the store cannot hold as JSON (NaN, infinities, lone surrogates, an int past `str()`'s
    digit limit, nesting past the interpreter's recursion limit), or not as given (a dict
    key that is no string, which JSON writes as its text: `tiers.models.check_keys`, named
    down to the key; a tool_use's input becomes the arguments' JSON text here, which no
    later check could read the key from), or one holding an integer of more digits than
    anything stored may have (`tiers.plain_json.check_int_digits`: the input becomes text
    here, as over HTTP it is refused in the body)."""
    check_int_digits(value, field)  # iterative: before json.dumps, which refused only past 4,300 digits
    try:
        size = len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode())
    except RecursionError:
        raise ValidationError(field, NESTED_TOO_DEEP) from None
    except (TypeError, ValueError):  # NaN, infinities, an object, a lone surrogate (UnicodeEncodeError)
        # named by its place, in the words a `Client` refuses it with before sending
        # (`tiers.plain_json.unencodable`, one wording); a reply's own field from the
        # message down (`usage.input_tokens`), as the Client names it
        raise unencodable(value, "" if field == "message" else field) from None
    check_keys(value, field)  # after json.dumps: within the recursion limit, a short walk
    return size


def sdk_plain(value: Any) -> Any:
    """An SDK object (pydantic: anything with a `model_dump`) as JSON data, unset fields
    left out; any other value as it is."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json", exclude_none=True) if callable(dump) else value


def sdk_plain_deep(value: Any) -> Any:
    """`value` with every SDK object in it, at any depth of its dicts, lists and tuples, as
    `sdk_plain` makes it (`tiers.plain_json.plain_deep`, the walk the OpenAI formats share;
    new containers where an object was converted, the caller's not modified): how
    `from_anthropic` reads a message, whose blocks, and a `tool_result`'s, may be the SDK's
    objects, and how `tiermem.client` sends one for the service to read the same way.
    Recursive: RecursionError for a value nested past the interpreter's limit."""
    return plain_deep(value, sdk_plain)


def _block(raw: Any, path: str, role: str) -> dict[str, Any]:
    b = sdk_plain(raw)
    if not isinstance(b, dict):
        raise ValidationError(path, f"must be a content block (an object), got {type(b).__name__}")
    b = {k: v for k, v in b.items() if v is not None}  # a reply's model_dump() writes unset fields as null
    t = b.get("type")
    if t not in BLOCK_TYPES:
        raise ValidationError(f"{path}.type", f"{shown(t)} is not a block type tiermem converts "
                              f"(converted: {', '.join(BLOCK_TYPES)})")
    if t not in ROLE_BLOCKS[role]:
        raise ValidationError(f"{path}.type", f"a {role} message cannot hold a {t!r} block")

    def need_str(key: str, *, nonempty: bool = False, max_chars: int | None = None) -> None:
        v = b.get(key)
        if not isinstance(v, str) or (nonempty and not v):
            raise ValidationError(f"{path}.{key}", "Field required (a non-empty string)" if nonempty
                                  else "Field required (a string)")
        # the stored form's limit (tiers.formats), named here by the field as sent
        if max_chars is not None and len(v) > max_chars:
            raise ValidationError(f"{path}.{key}", f"{len(v)} characters exceed the limit of {max_chars} characters")

    if t == "text":
        need_str("text")
    elif t == "thinking":
        need_str("thinking")
        need_str("signature")
    elif t == "redacted_thinking":
        need_str("data")
    elif t == "tool_use":
        need_str("id", nonempty=True, max_chars=CALL_ID_MAX_CHARS)
        need_str("name", nonempty=True, max_chars=TOOL_NAME_MAX_CHARS)
        if not isinstance(b.get("input"), dict):
            raise ValidationError(f"{path}.input", "must be an object (the tool's arguments)")
    elif t == "tool_result":
        need_str("tool_use_id", nonempty=True, max_chars=CALL_ID_MAX_CHARS)
        content = b.get("content", "")
        if not isinstance(content, str | list):
            raise ValidationError(f"{path}.content", "must be a string or a list of content blocks")
        if isinstance(content, list):
            b["content"] = content = [sdk_plain(c) for c in content]
            for j, c in enumerate(content):
                if not isinstance(c, dict) or not isinstance(c.get("type"), str):
                    raise ValidationError(f"{path}.content[{j}]", "must be a content block with a string type")
        if "is_error" in b and not isinstance(b["is_error"], bool):
            raise ValidationError(f"{path}.is_error", "must be a boolean")
    elif t == "image":
        source = b.get("source")
        if not isinstance(source, dict):
            raise ValidationError(f"{path}.source", "Field required (an object)")
        kind = source.get("type")
        if kind == "base64":
            for key in ("media_type", "data"):
                if not isinstance(source.get(key), str):
                    raise ValidationError(f"{path}.source.{key}", "Field required (a string)")
        elif kind == "url":
            if not isinstance(source.get("url"), str):
                raise ValidationError(f"{path}.source.url", "Field required (a string)")
        else:
            raise ValidationError(f"{path}.source.type", f"{shown(kind)} has no OpenAI chat form "
                                  "(converted: 'base64', 'url'; an image given by file id is not)")
    elif t == SERVER_TOOL_USE:
        need_str("id", nonempty=True, max_chars=CALL_ID_MAX_CHARS)
        need_str("name", nonempty=True, max_chars=TOOL_NAME_MAX_CHARS)
        if not isinstance(b.get("input"), dict):
            raise ValidationError(f"{path}.input", "must be an object (the server tool's arguments)")
    elif t in SERVER_RESULT_TYPES:
        need_str("tool_use_id", nonempty=True, max_chars=CALL_ID_MAX_CHARS)
        if "content" not in b:
            raise ValidationError(f"{path}.content", "Field required (the server tool's result)")
        _check_result_content(b["content"], f"{path}.content", t)
    elif t == DOCUMENT:
        source = b.get("source")
        if not isinstance(source, dict) or not isinstance(source.get("type"), str):
            raise ValidationError(f"{path}.source.type", "Field required (a string: 'base64', 'text', 'content', "
                                  "'url', 'file')")
        _check_document(b, path)
    elif t == SEARCH_RESULT:
        need_str("source")
        need_str("title")
        content = b.get("content")
        if not isinstance(content, list):
            raise ValidationError(f"{path}.content", "must be a list of text blocks")
        for j, c in enumerate(content):
            _check_text_block(c, f"{path}.content[{j}]")
    elif t == CONTAINER_UPLOAD:
        need_str("file_id", nonempty=True)
    # what the block holds anywhere (a tool's input, citations, a result's blocks) must be
    # storable JSON: refused here by its block, not by the store or the wire after
    _json_bytes(b, path)
    return b


# The fields a kept document's source is read by, by its type, each a string (the anthropic
# SDK's DocumentBlockParam sources: Base64PDFSource, PlainTextSource, URLPDFSource,
# FileDocumentSource; ContentBlockSource's `content` is checked on its own), and the media
# type a source of data must have
DOCUMENT_SOURCE_FIELDS: dict[str, tuple[str, ...]] = {
    "base64": ("media_type", "data"), "text": ("media_type", "data"), "url": ("url",), "file": ("file_id",),
    "content": (),
}
DOCUMENT_MEDIA_TYPES = {"base64": PDF_MEDIA_TYPE, "text": "text/plain"}
# a web search result's fields, each a string (the SDK's WebSearchResultBlockParam)
WEB_SEARCH_RESULT_FIELDS = ("url", "title", "encrypted_content")


def _check_text_block(c: Any, path: str) -> None:
    """A text block inside a kept block (a search result's, a content document's): the API
    refuses any other shape there."""
    if not isinstance(c, dict) or c.get("type") != "text":
        raise ValidationError(f"{path}", "must be a text block (an object with type 'text')")
    if not isinstance(c.get("text"), str):
        raise ValidationError(f"{path}.text", "Field required (a string)")


def _check_document(b: dict[str, Any], path: str) -> None:
    """A kept document's fields that are sent back, by the types of the anthropic SDK's
    `DocumentBlockParam` (a wrong one, stored, would have every later request refused)."""
    source = b["source"]
    kind = source["type"]
    if kind not in DOCUMENT_SOURCE_FIELDS:
        raise ValidationError(f"{path}.source.type", f"{shown(kind)} is not a document source "
                              f"({', '.join(DOCUMENT_SOURCE_FIELDS)})")
    for key in DOCUMENT_SOURCE_FIELDS[kind]:
        if not isinstance(source.get(key), str):
            raise ValidationError(f"{path}.source.{key}", "Field required (a string)")
    media = DOCUMENT_MEDIA_TYPES.get(kind)
    if media is not None and source["media_type"] != media:
        raise ValidationError(f"{path}.source.media_type", f"must be {media!r} for a {kind!r} source, "
                              f"got {shown(source['media_type'])}")
    if kind == "content":
        content = source.get("content")
        if isinstance(content, list):
            for j, c in enumerate(content):
                if isinstance(c, dict) and c.get("type") == "image":
                    if not isinstance(c.get("source"), dict):
                        raise ValidationError(f"{path}.source.content[{j}].source", "Field required (an object)")
                else:
                    _check_text_block(c, f"{path}.source.content[{j}]")
        elif not isinstance(content, str):
            raise ValidationError(f"{path}.source.content", "must be a string or a list of text and image blocks")
    for key in ("title", "context"):
        if key in b and not isinstance(b[key], str):
            raise ValidationError(f"{path}.{key}", "must be a string")


def _check_result_content(content: Any, path: str, t: str) -> None:
    """A server tool result's `content` as the SDK's param types have it: a web search's a
    list of results (each a `web_search_result` with string url, title and
    encrypted_content) or an error object; every other result's an object. Every object
    names its type."""
    if t == "web_search_tool_result" and isinstance(content, list):
        for j, r in enumerate(content):
            if not isinstance(r, dict) or r.get("type") != "web_search_result":
                raise ValidationError(f"{path}[{j}]", "must be a web_search_result block")
            for key in WEB_SEARCH_RESULT_FIELDS:
                if not isinstance(r.get(key), str):
                    raise ValidationError(f"{path}[{j}].{key}", "Field required (a string)")
        return
    if not isinstance(content, dict) or not isinstance(content.get("type"), str):
        raise ValidationError(path, "must be a list of web_search_result blocks or an error object"
                              if t == "web_search_tool_result" else "must be an object with a string type")
    if "encrypted_content" in content and not isinstance(content["encrypted_content"], str):
        raise ValidationError(f"{path}.encrypted_content", "must be a string")


def _extras(b: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in b.items() if k not in CORE_FIELDS[b["type"]]}


def _image_part(b: dict[str, Any]) -> dict[str, Any]:
    s = b["source"]
    url = f"data:{s['media_type']};base64,{s['data']}" if s["type"] == "base64" else s["url"]
    return {"type": "image_url", "image_url": {"url": url}}


def _pdf_data(b: dict[str, Any]) -> str | None:
    """The base64 data of a `document` block holding a PDF as data (the OpenAI form's `file`
    part holds it: no copy in metadata), else None."""
    s = b.get("source")
    if (b.get("type") == DOCUMENT and isinstance(s, dict) and s.get("type") == "base64"
            and s.get("media_type") == PDF_MEDIA_TYPE and isinstance(s.get("data"), str)
            and set(s) == {"type", "media_type", "data"}):
        return str(s["data"])
    return None


def _words(b: dict[str, Any]) -> str:
    """The text part a kept block is stored as (what search, the planner and a model sent
    the OpenAI form read): `[type name]`, then its words, one a line: a server tool's
    arguments, and the strings under `WORD_KEYS` at any depth (a text source's `data`
    too), in order. Iterative: a block nested however deep is read without recursion."""
    t = b["type"]
    head = f"[{t} {b['name']}]" if t == SERVER_TOOL_USE else f"[{t}]"
    words: list[str] = []
    stack: list[tuple[Any, bool]] = [(b.get("input"), True)] if t == SERVER_TOOL_USE else [(b, False)]
    while stack:
        value, every = stack.pop()
        if isinstance(value, str):
            if value.strip():
                words.append(value.strip())
        elif isinstance(value, list):
            stack.extend((v, every) for v in reversed(value))
        elif isinstance(value, dict) and value.get("type") != "base64":  # data, not words
            text_source = value.get("type") == "text"
            stack.extend((v, every) for k, v in reversed(value.items())
                         if every or (isinstance(k, str) and k in WORD_KEYS)
                         or (k == "data" and text_source) or not isinstance(v, str))
    return "\n".join([head, *words])


class _Out:
    """One stored message being built, with what its metadata keeps and, for each entry,
    the block (its index in the Anthropic message) it came from."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.meta: dict[str, Any] = {}
        self.sources: list[tuple[int, int]] = []  # (block index in the Anthropic message, bytes kept)

    def keep(self, key: str, value: Any, source: int) -> None:
        size = _json_bytes(value, f"content[{source}]" if source >= 0 else "message")
        if key in (THINKING_KEY, EXTRA_KEY, BLOCKS_KEY):
            self.meta.setdefault(key, []).append(value)
        else:
            self.meta[key] = value
        self.sources.append((source, size))

    def finish(self, limit: int) -> dict[str, Any]:
        if not self.meta:
            return self.body
        size = _json_bytes(self.meta, "metadata")
        if size > limit:
            block, held = max(self.sources, key=lambda s: s[1]) if self.sources else (-1, size)
            field = f"content[{block}]" if block >= 0 else "message"
            raise ValidationError(field, f"this block's data kept in metadata ({held} bytes; the message's "
                                  f"metadata {size} bytes) exceeds max_metadata_bytes = {limit} bytes")
        return {**self.body, "metadata": self.meta}


def from_anthropic(message: Any, *, max_metadata_bytes: int = DEFAULT_MAX_METADATA_BYTES) -> list[dict[str, Any]]:
    """One Anthropic message (a `MessageParam` or a reply) as the OpenAI chat messages
    tiermem stores, ready for `append_many` (module docstring, "In"); pass the memory's
    `config.max_metadata_bytes` when it is not the default."""
    try:
        # the SDK's objects wherever they are (a reply, its blocks, a dict holding them)
        m = sdk_plain_deep(message)
    except RecursionError:
        # nested past the recursion limit: its own objects only, the block checks below name where
        m = sdk_plain(message)
    if not isinstance(m, dict):
        raise ValidationError("message", f"must be an Anthropic message (an object), got {type(m).__name__}")
    reply = m.get("type") == "message"
    if not reply:
        for k in m:
            if k not in PARAM_FIELDS:
                # a key that is no plain name is quoted, not made the field (`field_error`)
                raise field_error(k, "is not a field of an Anthropic MessageParam (its fields: content, role); "
                                  "a reply carries type 'message'")
    role = m.get("role")
    if not isinstance(role, str) or role not in ROLE_BLOCKS or (reply and role != "assistant"):
        raise ValidationError("role", f"must be 'user', 'assistant' or 'system' (a reply: 'assistant'), "
                              f"got {shown(role)}")
    content = m.get("content")
    if isinstance(content, str):
        _json_bytes(content, "content")
        blocks: list[dict[str, Any]] = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        blocks = [_block(b, f"content[{i}]", role) for i, b in enumerate(content)]
    else:
        raise ValidationError("content", "Field required (a string or a list of content blocks)")
    if role == "assistant":
        outs = [_assistant(blocks)]
        if reply:
            fields = {k: sdk_plain(v) for k, v in m.items() if k not in ("type", "role", "content") and v is not None}
            outs[0].keep(REPLY_KEY, fields, -1)
    else:
        outs = _user(blocks, role)
    return [o.finish(max_metadata_bytes) for o in outs]


def _texts(texts: list[str]) -> str | list[dict[str, Any]]:
    if len(texts) == 1:
        return texts[0]
    return [{"type": "text", "text": t} for t in texts]


def _assistant(blocks: list[dict[str, Any]]) -> _Out:
    uses = [(i, b["id"]) for i, b in enumerate(blocks) if b["type"] == "tool_use"]
    repeat = repeated_call_id([cid for _i, cid in uses])
    if repeat is not None:  # the stored form's rule (tiers.formats), named by the block as sent
        first, again = uses[repeat[0]][0], uses[repeat[1]][0]
        raise ValidationError(f"content[{again}].id", f"{shown(blocks[again]['id'])} is the id of content[{first}] "
                              "too: each tool_use of a message needs an id of its own (its tool_result names it)")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    order = ""
    kept: list[tuple[str, Any, int]] = []
    for i, b in enumerate(blocks):
        t = b["type"]
        if t in THINKING_TYPES:
            kept.append((THINKING_KEY, [i, b], i))
            continue
        if t in KEPT_TYPES["assistant"]:  # verbatim, its words a text block where it stood
            kept.append((BLOCKS_KEY, [i, b], i))
            texts.append(_words(b))
            order += "t"
            continue
        extra = _extras(b)
        if extra:
            kept.append((EXTRA_KEY, [i, extra], i))
        if t == "text":
            texts.append(b["text"])
            order += "t"
        else:
            calls.append({"id": b["id"], "type": "function",
                          "function": {"name": b["name"], "arguments": json.dumps(b["input"])}})
            order += "u"
    # no text: null beside tool calls (as the openai SDK's replies have it), else empty
    body: dict[str, Any] = {"role": "assistant", "content": _texts(texts) if texts else None if calls else ""}
    if calls:
        body["tool_calls"] = calls
    out = _Out(body)
    for key, value, source in kept:
        out.keep(key, value, source)
    if order != "".join(sorted(order, key=lambda c: c != "t")):
        out.keep(ORDER_KEY, order, -1)
    return out


def _user(blocks: list[dict[str, Any]], role: str) -> list[_Out]:
    outs: list[_Out] = []
    parts: list[dict[str, Any]] = []
    part_kept: list[tuple[str, Any, int]] = []
    for i, b in enumerate(blocks):
        t = b["type"]
        pdf = _pdf_data(b)
        if t in KEPT_TYPES["user"] and pdf is None:
            # verbatim, its words a text part where it stood
            part_kept.append((BLOCKS_KEY, [len(parts), b], i))
            parts.append({"type": "text", "text": _words(b)})
            continue
        extra = _extras(b)
        if t == "tool_result":
            content = b.get("content", "")
            out = _Out({"role": "tool", "tool_call_id": b["tool_use_id"], "content": ""})
            if isinstance(content, str):
                out.body["content"] = content
            else:
                texts = [c["text"] for c in content if c.get("type") == "text" and isinstance(c.get("text"), str)]
                if all(set(c) == {"type", "text"} and isinstance(c.get("text"), str) for c in content):
                    out.body["content"] = [{"type": "text", "text": x} for x in texts]
                else:  # images, documents, citations: the text is what OpenAI's form holds
                    out.body["content"] = "\n".join(texts)
                    out.keep(CONTENT_KEY, content, i)
            extra.pop("content", None)
            if extra:
                out.keep(EXTRA_KEY, [0, extra], i)
            outs.append(out)
            continue
        if extra:
            part_kept.append((EXTRA_KEY, [len(parts), extra], i))
        if pdf is not None:  # a PDF as data: OpenAI's file part, which to_anthropic sends as this block
            title = b.get("title")
            name = title.strip() if isinstance(title, str) and title.strip() else PDF_FILENAME
            parts.append({"type": "file", "file": {"file_data": f"data:{PDF_MEDIA_TYPE};base64,{pdf}",
                                                   "filename": name if name.lower().endswith(PDF_SUFFIX)
                                                   else name + PDF_SUFFIX}})
        else:
            parts.append({"type": "text", "text": b["text"]} if t == "text" else _image_part(b))
    if parts or not outs:
        one_text = len(parts) == 1 and parts[0]["type"] == "text"
        out = _Out({"role": role, "content": parts[0]["text"] if one_text else parts})
        for key, value, source in part_kept:
            out.keep(key, value, source)
        outs.append(out)
    return outs


# -- out --------------------------------------------------------------------------------------


def _safe_id(cid: str) -> str:
    return _ID_CHARS.sub("_", cid) or "_"


def _unique_ids(turns: list[list[Any]]) -> None:
    """Every tool_use id sent unique in the request, each tool_result naming its call's
    (module docstring, "Ids"; the one renaming: `tiers.formats.SentCallIds`, in the API's
    characters), in place. Each assistant turn is a round; a result answers the call of
    its id in the assistant turn just before it, the n-th result of an id the n-th call of
    it; a result with no such call is left out here, as `_pair` leaves it out."""
    ids = SentCallIds(_safe_id)
    for role, blocks in turns:  # roles alternate: consecutive messages of one role are merged
        if role == "assistant":
            ids.round()
            for b in blocks:
                if b["type"] == "tool_use":
                    b["id"] = ids.call(b["id"])
            continue
        kept: list[dict[str, Any]] = []
        for b in blocks:
            if b["type"] == "tool_result":
                sent = ids.result(b["tool_use_id"])
                if sent is None:
                    continue
                b["tool_use_id"] = sent
            kept.append(b)
        blocks[:] = kept
        ids.round()  # a result in a later user turn answers nothing


def _tool_input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments else {}
    except (ValueError, RecursionError):
        return {"input": arguments}
    return value if isinstance(value, dict) else {"input": arguments}


def _part_block(p: dict[str, Any]) -> dict[str, Any] | None:
    t = p.get("type")
    if t == "text":
        return {"type": "text", "text": p.get("text", "")}
    if t == "refusal":
        return {"type": "text", "text": p.get("refusal", "")}
    if t == "image_url":
        url = (p.get("image_url") or {}).get("url", "")
        if url[:len(DATA_SCHEME)].lower() != DATA_SCHEME:
            return {"type": "image", "source": {"type": "url", "url": url}}
        m = _DATA_URL.fullmatch(url)
        media_type = (m.group(1) if m else url[len(DATA_SCHEME):].split(",")[0].split(";")[0]).lower()
        if m and media_type in IMAGE_MEDIA_TYPES:
            return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": m.group(2)}}
        return {"type": "text", "text": f"[image {media_type}]"}
    if t == "file":
        f = p.get("file") or {}
        m = _DATA_URL.fullmatch(f.get("file_data") or "")
        if m and m.group(1) == PDF_MEDIA_TYPE:
            return {"type": "document", "source": {"type": "base64", "media_type": PDF_MEDIA_TYPE,
                                                   "data": m.group(2)}}
        return {"type": "text", "text": f"[file {f.get('filename') or f.get('file_id') or ''}]".replace(" ]", "]")}
    if t == "input_audio":
        return {"type": "text", "text": "[audio]"}
    text = message_text({"role": "user", "content": [p]})
    return {"type": "text", "text": text} if text else None


def _content_blocks(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out: list[dict[str, Any]] = []
    for p in content if isinstance(content, list) else ():
        if isinstance(p, dict) and (b := _part_block(p)) is not None:
            out.append(b)
    return out


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k != "cache_control"}
    return value


# What `to_anthropic` put back from metadata beyond what the plan counted, by the block's
# identity: (the block, what it goes as where the budget has no room for it: a kept block's
# words, else the block as the stored message holds it, without what was restored)
_Kept = dict[int, tuple[dict[str, Any], str | dict[str, Any]]]


def _restore(blocks: list[dict[str, Any]], meta: dict[str, Any], *, exact: bool,
             kept: _Kept | None = None) -> list[dict[str, Any]]:
    """Put back what from_anthropic kept in metadata (see the module docstring): the
    order, then the thinking blocks, then the extras, whose indexes count the thinking
    blocks (a field put on the block at its index before they are would land on another).
    `kept`, where given, gets each kept block put back, by its id, with the words it
    replaced (what the plan counted: `_fit_kept`), and each block given extras, with the
    block as it was without them."""
    if exact:
        order = meta.get(ORDER_KEY)
        if isinstance(order, str) and len(order) == len(blocks):
            texts = iter([b for b in blocks if b["type"] != "tool_use"])
            uses = iter([b for b in blocks if b["type"] == "tool_use"])
            blocks = [next(uses) if c == "u" else next(texts) for c in order]
    ahead = 0  # not exact: the thinking blocks go first, in their order (the API refuses them reordered)
    for entry in meta.get(THINKING_KEY) or ():
        if (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int)
                and isinstance(entry[1], dict) and entry[1].get("type") in THINKING_TYPES):
            at = entry[0] if exact else ahead
            blocks.insert(min(max(at, 0), len(blocks)), copy.deepcopy(entry[1]))
            ahead += 1
    if exact:  # each kept block where its words stand (the text block from_anthropic made of it)
        blocks = _split_kept(blocks, _kept_entries(meta))  # a popped row's text item: its words joined
        for entry in meta.get(BLOCKS_KEY) or ():
            if (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int)
                    and 0 <= entry[0] < len(blocks) and blocks[entry[0]]["type"] == "text"
                    and isinstance(entry[1], dict) and isinstance(entry[1].get("type"), str)):
                words = blocks[entry[0]]["text"]
                blocks[entry[0]] = _without_cache_control(copy.deepcopy(entry[1]))
                if kept is not None:
                    kept[id(blocks[entry[0]])] = (blocks[entry[0]], words)
        for entry in meta.get(EXTRA_KEY) or ():
            if (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int)
                    and 0 <= entry[0] < len(blocks) and isinstance(entry[1], dict)):
                i = entry[0]
                extra = {k: copy.deepcopy(v) for k, v in entry[1].items() if k not in ("cache_control", "type")}
                if blocks[i]["type"] == "tool_use":
                    extra = {k: v for k, v in extra.items() if k in ("caller", "toolset_name")}
                before = blocks[i]
                blocks[i] = {**before, **extra}
                if kept is not None and extra:  # citations and the rest: not in the plan's count
                    prior = kept.pop(id(before), None)
                    kept[id(blocks[i])] = (blocks[i], prior[1] if prior is not None else before)
    return blocks


_Stored = dict[tuple[str, str], list[tuple[dict[str, Any], dict[str, Any]]]]


def _match_key(body: dict[str, Any], chat: dict[str, Any]) -> tuple[str, str]:
    """What matches a context message to its stored row: ("call", first call id), ("result",
    call id), else ("body", its chat form as JSON); `body` is the row's or the message's."""
    calls, rid = call_ids(body), result_id(body)
    return ("call", calls[0]) if calls else ("result", rid) if rid else ("body", _key(chat))


def _stored(ctx: Context, memory: MemoryLike | None) -> _Stored:
    """The rows the context's tail shows, by `_match_key`; for each key its rows' chat forms
    and metadata in log order. Rows without Anthropic metadata are kept too: the context
    shows its tail rows in log order, so the n-th message with a key is the n-th shown row
    with it (two equal messages, "ok" twice, each get their own row's metadata, not the
    later one's). Rows the tail does not show (a retracted one, a turn a middle eviction
    cut) are left out, or they would shift the matches after them."""
    if memory is None:
        return {}
    memory = in_context_namespace(memory, ctx)  # the context's namespace, not the memory's default
    conv = ctx.plan.conversation_id
    shown = {p for it in ctx.plan.items if it.slice == "tail" and it.conversation_id == conv
             for p in it.positions}
    if not shown:
        return {}
    lo = min(shown)
    out: _Stored = {}
    # log_pages answers [] for a conversation erased since the context was built
    for row in log_pages(memory, conv, after=lo - 1 if lo > 0 else None):
        if row.position not in shown:
            continue
        chats = to_chat([row.body])
        if len(chats) != 1:
            continue
        meta = row.metadata or {}
        out.setdefault(_match_key(row.body, chats[0]), []).append(
            (chats[0], meta if any(k in meta for k in METADATA_KEYS) else {}))
    return out


def _key(chat: dict[str, Any]) -> str:
    return json.dumps(chat, sort_keys=True, ensure_ascii=False)


def _assistant_blocks(chat: dict[str, Any]) -> list[tuple[dict[str, Any], str | None]]:
    """An assistant chat message's text and tool_use blocks, before `_restore`, each with
    the call id it stands for (None: a text block)."""
    out: list[tuple[dict[str, Any], str | None]] = [(b, None) for b in _content_blocks(chat.get("content"))]
    for c in chat.get("tool_calls") or ():
        if c.get("type", "function") == "custom":
            cu = c.get("custom") or {}
            out.append(({"type": "tool_use", "id": c["id"], "name": cu.get("name", ""),
                         "input": {"input": cu.get("input", "")}}, c["id"]))
        else:
            fn = c.get("function") or {}
            out.append(({"type": "tool_use", "id": c["id"], "name": fn.get("name", ""),
                         "input": _tool_input(fn.get("arguments") or "")}, c["id"]))
    fc = chat.get("function_call")
    calls = call_ids(chat)
    if isinstance(fc, dict) and calls:
        out.append(({"type": "tool_use", "id": calls[-1], "name": fc.get("name", ""),
                     "input": _tool_input(fc.get("arguments") or "")}, calls[-1]))
    return out


def _kept_entries(metadata: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """The well-formed `BLOCKS_KEY` entries of a row's metadata, as (index, block)."""
    return [(e[0], e[1]) for e in metadata.get(BLOCKS_KEY) or ()
            if isinstance(e, list) and len(e) == 2 and isinstance(e[0], int) and isinstance(e[1], dict)
            and isinstance(e[1].get("type"), str)]


def _segments(text: str, words: list[str]) -> list[str] | None:
    """`text`, the text parts of one message joined one a line (a Responses message item
    put back by a pop), cut into its kept blocks' `words` (in order, each a whole line
    run) and the text between them (consecutive text parts stay joined: one block, as the
    item has them); None where a kept block's words are not found so."""
    out: list[str] = []
    at = 0
    for w in words:
        p = at
        while True:
            p = text.find(w, p)
            if p < 0:
                return None
            end = p + len(w)
            if (p == at or text[p - 1] == "\n") and (end == len(text) or text[end] == "\n"):
                break
            p += 1
        if p > at:
            out.append(text[at:p - 1])  # the text before, less the newline joining it
        out.append(w)
        at = end + 1
    if at < len(text):
        out.append(text[at:])
    return out


def _split_kept(blocks: list[dict[str, Any]], entries: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """`blocks` with their one text block cut at the kept blocks' words (`_segments`)
    where `entries` do not find each kept block's words at its index: the text item a pop
    put back holds the message's text parts joined, and its entries index the blocks so
    cut (`item_blocks`). Unchanged where they do (a row as `from_anthropic` stored it) or
    where the text is not so made."""
    words = [(i, _words(b)) for i, b in sorted(entries, key=lambda e: e[0])]
    if all(0 <= i < len(blocks) and blocks[i]["type"] == "text" and blocks[i]["text"] == w for i, w in words):
        return blocks
    texts = [k for k, b in enumerate(blocks) if b["type"] == "text"]
    cut = _segments(blocks[texts[0]]["text"], [w for _i, w in words]) if len(texts) == 1 else None
    if cut is None:
        return blocks
    k = texts[0]
    return [*blocks[:k], *({"type": "text", "text": t} for t in cut), *blocks[k + 1:]]


def _item_text_at(body: dict[str, Any], metadata: dict[str, Any], *,
                  thinking: bool) -> tuple[int, list[tuple[int, dict[str, Any]]], int]:
    """Where the blocks of the text item of stored assistant message `body` go once put
    back as a message of its own (`item_blocks`, `item_extras`): the index of its text
    among them (after the message's thinking blocks where `thinking`), the message's kept
    blocks indexed among them (its text cut at their words: `_split_kept`), and the offset
    of the first text between them from the text's index (0 without kept blocks)."""
    one: dict[str, Any] = {"type": "text"}
    alone = _restore([one], {THINKING_KEY: metadata[THINKING_KEY]} if thinking and THINKING_KEY in metadata
                     else {}, exact=True)
    at = next(i for i, b in enumerate(alone) if b is one)
    entries = _kept_entries(metadata)
    chats = to_chat([body])
    if not entries or len(chats) != 1 or chats[0].get("role") != "assistant":
        return at, [], 0
    tagged = _assistant_blocks(chats[0])
    placed = _restore([b for b, _cid in tagged], {k: metadata[k] for k in (ORDER_KEY, THINKING_KEY)
                                                   if k in metadata}, exact=True)
    kept_at = {i: b for i, b in entries}
    texts = [i for i, b in enumerate(placed) if b["type"] == "text"]  # the text parts, in the item's order
    out: list[tuple[int, dict[str, Any]]] = []
    seg = -1
    plain: int | None = None
    prev_plain = False
    for i in texts:
        if i in kept_at:
            seg += 1
            out.append((at + seg, copy.deepcopy(kept_at[i])))
            prev_plain = False
        elif not prev_plain:  # consecutive text parts: one segment
            seg += 1
            plain = seg if plain is None else plain
            prev_plain = True
    return at, out, plain or 0


def item_blocks(body: dict[str, Any], metadata: dict[str, Any], item: dict[str, Any], *,
                thinking: bool) -> list[list[Any]]:
    """The `BLOCKS_KEY` entries for `item`, one of the Responses items that the stored
    assistant message `body` converts to, when `item` is stored as a message of its own
    (a pop puts the others back so: `tiermem.adapters._common.put_back_metadata`). The
    kept blocks (a server tool's call and result) are the text item's: its text holds
    their words, joined with the message's other text parts one a line; each entry
    indexes the blocks `to_anthropic` makes of the item, its text cut at those words
    (`_split_kept`), after the message's thinking blocks where `thinking`. [] for a call
    item, and where `body`'s metadata keeps no block."""
    if item.get("type") not in (None, "message"):
        return []
    _at, entries, _plain = _item_text_at(body, metadata, thinking=thinking)
    return [[i, b] for i, b in entries]


def item_extras(body: dict[str, Any], metadata: dict[str, Any], item: dict[str, Any], *,
                thinking: bool) -> list[list[Any]]:
    """The `EXTRA_KEY` entries for `item`, one of the Responses items that the stored
    assistant message `body` converts to (`tiers.formats.to_responses_rows`: its text as
    one message item, then each call), when `item` is stored as a message of its own (a
    pop of one of `body`'s items puts the others back so: `tiermem.adapters._common.
    put_back_metadata`). Indexed among the blocks `to_anthropic` makes of that item: its
    one block, after the message's thinking blocks where `thinking` (the item carries
    them; a text cut at kept blocks' words, `item_blocks`: the first text between them).
    A call's extras (`caller`, `toolset_name`) are its block's; the text item joins
    the message's text blocks into one, which gets their citations, in order (a citation
    locates its cited text in a document, not in the block, so it holds for the joined
    block). [] where `body`'s metadata keeps no extra for the item's blocks."""
    entries = [e for e in metadata.get(EXTRA_KEY) or ()
               if isinstance(e, list) and len(e) == 2 and isinstance(e[0], int) and isinstance(e[1], dict)]
    chats = to_chat([body])
    if not entries or len(chats) != 1 or chats[0].get("role") != "assistant":
        return []
    tagged = _assistant_blocks(chats[0])
    owner = "text" if item.get("type") in (None, "message") else "call"
    mine = [b for b, cid in tagged if (cid is None if owner == "text" else cid == item.get("call_id"))]
    # where to_anthropic puts the whole message's blocks (order, then thinking), as it
    # restores the row itself: an entry's index counts those
    placed = _restore([b for b, _cid in tagged], {k: metadata[k] for k in (ORDER_KEY, THINKING_KEY)
                                                   if k in metadata}, exact=True)
    found = [e[1] for e in entries if 0 <= e[0] < len(placed) and any(placed[e[0]] is b for b in mine)]
    if not found:
        return []
    if len(found) == 1:
        extra = copy.deepcopy(found[0])
    elif any("citations" in f for f in found):  # several text blocks, one on the item
        lists = [f["citations"] for f in found if isinstance(f.get("citations"), list)]
        extra = {"citations": copy.deepcopy([c for cs in lists for c in cs]) if lists else None}
    else:  # only cache_control, which is never sent back
        return []
    if owner == "text":
        at, _kept, plain = _item_text_at(body, metadata, thinking=thinking)
        return [[at + plain, extra]]
    one: dict[str, Any] = {"type": "tool_use"}
    alone = _restore([one], {THINKING_KEY: metadata[THINKING_KEY]} if thinking and THINKING_KEY in metadata
                     else {}, exact=True)
    return [[next(i for i, b in enumerate(alone) if b is one), extra]]


def _blocks_of(chat: dict[str, Any], stored: _Stored, kept: _Kept) -> tuple[str, list[dict[str, Any]]]:
    """One chat message (wire form) as (role, Anthropic blocks); role "system" for a
    system or developer message, "" for nothing to send; `kept` gets the kept blocks put
    back (`_restore`)."""
    role = chat.get("role")
    rid = result_id(chat)
    rows = stored.get(_match_key(chat, chat))
    hit = rows.pop(0) if rows else None  # the next row with this key, in log order
    meta = hit[1] if hit else {}
    exact = hit is not None and hit[0] == chat
    if role in ("system", "developer"):
        text = message_text(chat)
        return "system", [{"type": "text", "text": text}] if text else []
    if role == "user":
        return "user", _restore(_content_blocks(chat.get("content")), meta, exact=exact, kept=kept)
    if role == "assistant":
        return "assistant", _restore([b for b, _owner in _assistant_blocks(chat)], meta, exact=exact, kept=kept)
    if rid is not None:  # tool, function
        content = chat.get("content")
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": rid}
        content_kept = meta.get(CONTENT_KEY)
        if isinstance(content, list):  # the API refuses an empty text block here as at the top level
            result["content"] = [b for b in _content_blocks(content) if _sendable(b)] or ""
        else:
            result["content"] = content if isinstance(content, str) else ""
        for entry in meta.get(EXTRA_KEY) or ():
            if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], dict):
                result.update({k: copy.deepcopy(v) for k, v in entry[1].items()
                               if k not in ("cache_control", "type", "tool_use_id", "content")
                               and (exact or k == "is_error")})
        if exact and isinstance(content_kept, list):
            # images, documents: the plan counted the stored text, which goes where they do not fit
            stored_form = dict(result)
            result["content"] = _without_cache_control(copy.deepcopy(content_kept))
            kept[id(result)] = (result, stored_form)
        return "user", [result]
    return "", []


def _sendable(b: dict[str, Any]) -> bool:
    """Whether the API takes this block (it refuses an empty or blank text block)."""
    return b["type"] != "text" or bool(b["text"].strip())


def _server_pairs(blocks: list[dict[str, Any]], *, last: bool) -> None:
    """An assistant turn's server tool calls each with a result block in the turn, each
    result with its call there (the API's rule: the server ran the call inside that reply),
    in place; the others go. A call of the request's last message keeps its place without
    one: a reply that stopped with `pause_turn` is sent back as it is, for the API to go
    on with it."""
    calls = {b.get("id") for b in blocks if b["type"] == SERVER_TOOL_USE}
    answered = {b.get("tool_use_id") for b in blocks if b["type"] in SERVER_RESULT_TYPES}
    blocks[:] = [b for b in blocks
                 if (b["type"] != SERVER_TOOL_USE or last or b.get("id") in answered)
                 and (b["type"] not in SERVER_RESULT_TYPES or b.get("tool_use_id") in calls)]


def _pair(turns: list[list[Any]]) -> list[list[Any]]:
    """Every tool_use answered in the next user message, results first there; unanswered
    calls, results without their call and messages left empty go (module docstring);
    server tool calls paired within their turn (`_server_pairs`)."""
    for i, (role, blocks) in enumerate(turns):
        if role != "assistant":
            continue
        _server_pairs(blocks, last=i == len(turns) - 1)
        nxt = turns[i + 1][1] if i + 1 < len(turns) and turns[i + 1][0] == "user" else []
        answered = {b["tool_use_id"] for b in nxt if b["type"] == "tool_result"}
        blocks[:] = [b for b in blocks if b["type"] != "tool_use" or b["id"] in answered]
    for i, (role, blocks) in enumerate(turns):
        if role != "user":
            continue
        prev = turns[i - 1][1] if i > 0 and turns[i - 1][0] == "assistant" else []
        asked = {b["id"] for b in prev if b["type"] == "tool_use"}
        results = [b for b in blocks if b["type"] == "tool_result" and b["tool_use_id"] in asked]
        blocks[:] = results + [b for b in blocks if b["type"] != "tool_result"]
    kept = [t for t in turns if any(b["type"] not in THINKING_TYPES for b in t[1])]
    out: list[list[Any]] = []
    for role, blocks in kept:
        if out and out[-1][0] == role:  # a message left out between two of one role
            out[-1][1].extend(blocks)
        else:
            out.append([role, blocks])
    if len(out) != len(turns):
        return _pair(out)  # merging can put a user turn's results after its text: order again
    return out


def _current_loop_thinking(turns: list[list[Any]]) -> list[list[Any]]:
    """`turns` with the thinking blocks of every assistant turn before the current tool
    loop left out; an assistant turn left empty goes, and the user turns around it merge."""
    start = _loop_start(turns)
    if start < 0:
        return turns
    out: list[list[Any]] = []
    for i, (role, blocks) in enumerate(turns):
        if role == "assistant" and i < start:
            blocks = [b for b in blocks if b["type"] not in THINKING_TYPES]
            if not blocks:
                continue
        if out and out[-1][0] == role:
            out[-1][1].extend(blocks)
        else:
            out.append([role, blocks])
    return out


def kept_block_tokens(counter: TokenCounter, block: dict[str, Any], *,
                      document_tokens: int = DOCUMENT_REFERENCE_TOKENS) -> int:
    """What a kept block costs sent whole, by the rule of `tiers.formats` for what is not
    text: its JSON as sent (compact, no `cache_control`) counted as text with `counter`,
    less its payloads, which cost their decoded bytes at FILE_BYTES_PER_TOKEN each (the
    strings under PAYLOAD_KEYS, a base64 source's `data`), and `document_tokens`, an
    estimate, for each document the API reads by reference (REFERENCE_SOURCES)."""
    payload = 0
    root = copy.deepcopy(_without_cache_control(block))  # every container new: stripped in place
    stack: list[Any] = [root]
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            stack.extend(value)
            continue
        if not isinstance(value, dict):
            continue
        data_is_payload = value.get("type") == "base64"
        for k, v in value.items():
            if isinstance(v, str) and (k in PAYLOAD_KEYS or (k == "data" and data_is_payload)):
                payload += base64_tokens(v)  # decoded bytes at FILE_BYTES_PER_TOKEN
                value[k] = ""
            else:
                stack.append(v)
        source = value.get("source")
        if value.get("type") == DOCUMENT and isinstance(source, dict) and source.get("type") in REFERENCE_SOURCES:
            payload += document_tokens
    return counter.count(json.dumps(root, ensure_ascii=False, separators=(",", ":"))) + payload


def _counter(memory: MemoryLike | None) -> TokenCounter:
    """The token counter of the memory the context came from (a `Memory`'s, a namespaced
    view's), else one of the default tokenizer (a `Client`: its server's is not known
    here; the counts of the two differ by a few percent)."""
    for m in (memory, getattr(memory, "memory", None)):
        tokens = getattr(m, "tokens", None)
        if tokens is not None and callable(getattr(tokens, "count", None)):
            return tokens
    return BpeTokenCounter()


def opening_tokens(memory: MemoryLike | None = None) -> int:
    """What the user message `to_anthropic` opens a request with costs (`CONTINUED_TEXT`,
    where the context's first turn is the assistant's: the API refuses that opening),
    counted with the memory's counter (`_counter`). Give it as `pending_tokens` to plan a
    context for Anthropic with room for it: the request then stays within the budget."""
    return message_tokens(_counter(memory), {"role": "user", "content": CONTINUED_TEXT})


def thinking_tokens(counter: TokenCounter, block: dict[str, Any]) -> int:
    """What a thinking block costs where the API counts it (the current tool loop's): its
    `thinking` text counted with `counter`; a redacted one's `data`, encrypted thinking,
    as a payload (decoded bytes at FILE_BYTES_PER_TOKEN, as an `encrypted_content`). The
    `signature` is not counted: it verifies the block, it is no text the model reads."""
    if block.get("type") == "redacted_thinking":
        data = block.get("data")
        return base64_tokens(data) if isinstance(data, str) else 0
    text = block.get("thinking")
    return counter.count(text) if isinstance(text, str) else 0


def _loop_start(turns: list[list[Any]]) -> int:
    """The index of the current tool loop's opening user turn (the last that answers no
    tool call); -1 where every turn is in it."""
    return next((i for i in range(len(turns) - 1, -1, -1)
                 if turns[i][0] == "user" and all(b["type"] != "tool_result" for b in turns[i][1])), -1)


def _counted_thinking(turns: list[list[Any]], counter: TokenCounter) -> int:
    """The tokens of the thinking blocks the API counts: the current tool loop's (earlier
    turns' it strips from the context window, module docstring)."""
    start = _loop_start(turns)
    return sum(thinking_tokens(counter, b) for i, (role, blocks) in enumerate(turns)
               if role == "assistant" and i > start for b in blocks if b["type"] in THINKING_TYPES)


def _fit_kept(turns: list[list[Any]], kept: _Kept, counter: TokenCounter, ctx: Context, *,
              document_tokens: int, reserved: int, origin: dict[int, int],
              every_loop: Sequence[tuple[str, list[dict[str, Any]]]]) -> tuple[int, _Unfit | None]:
    """Keep the request within the plan's budget, in place: the plan counted each kept
    block as its words (the text part it is stored as), a text block without its
    citations and a tool result as its stored text, and what is sent whole costs
    `kept_block_tokens`. Blocks go whole in request order while the context's tokens
    with them stay within the budget; from the first that does not fit on, each goes as
    what the plan counted (a kept block as its words, a server call and its results
    together: the API's pairing; a block given extras without them; a result as its
    text). Where that would turn a block an earlier call of the epoch sent whole into its
    words (`_turned_before`: now or at an earlier call), every one goes as counted: one
    rewrite an epoch (module docstring); nor does one an earlier call sent as its words go
    whole. `origin`: the context message each block came from; `every_loop`: the turns
    with every tool loop's thinking (what the earlier calls counted). A request that ends
    with an assistant turn (a `pause_turn` reply with its server call, which the API goes
    on with) keeps that turn's blocks whole first.
    `reserved`: the tokens sent beyond the plan's besides these (the current tool loop's
    thinking), out of the room. Returns the tokens the blocks sent whole add, and where
    the others go as counted, the first of them, what they need whole and the room."""
    units: dict[tuple[Any, ...], list[tuple[dict[str, Any], str | dict[str, Any], int]]] = {}
    for t, (role, blocks) in enumerate(turns):
        for b in blocks:
            entry = kept.get(id(b))
            if entry is None or entry[0] is not b:
                continue
            stored = entry[1]
            counted = (max(0, counter.count(stored) - WORDS_JOIN_TOKENS) if isinstance(stored, str)
                       else kept_block_tokens(counter, stored, document_tokens=document_tokens))
            extra = max(0, kept_block_tokens(counter, b, document_tokens=document_tokens) - counted)
            server = b["type"] == SERVER_TOOL_USE or b["type"] in SERVER_RESULT_TYPES
            call = b.get("id") if b["type"] == SERVER_TOOL_USE else b.get("tool_use_id")
            key = (t, "server", call) if role == "assistant" and server and isinstance(stored, str) \
                else (t, "block", id(b))
            units.setdefault(key, []).append((b, stored, extra))
    room = ctx.plan.budget - ctx.tokens - reserved
    added = 0
    last = len(turns) - 1
    trailing = [k for k in units if k[0] == last and turns[last][0] == "assistant"]
    for key in trailing:  # each on its own: the paused call the API goes on with
        cost = sum(extra for _b, _s, extra in units[key])
        if cost <= room:
            room -= cost
            added += cost
        else:
            _as_counted(units[key])
    others = [unit for key, unit in units.items() if key not in trailing]  # in request order
    costs = [sum(extra for _b, _s, extra in unit) for unit in others]
    need = sum(costs)
    # without thinking an earlier call of the epoch had at least this room: every one went whole
    thought = any(b["type"] in THINKING_TYPES for role, bs in every_loop if role == "assistant" for b in bs)
    if not others or (need <= room and not thought):
        return added + need, None
    whole = _greedy(costs, room)
    before = None if ctx.plan.cache.new_epoch else _turned_before(  # the first call of an epoch: no earlier one
        costs, [min(origin.get(id(b), len(ctx.messages)) for b, _s, _e in unit) for unit in others], counter, ctx,
        every_loop, origin)
    turned = before is not None and (before.turned or whole < before.whole)  # a block sent whole must turn
    if turned:
        whole = 0
    elif before is not None and before.whole < before.shown:
        whole = before.whole  # the blocks it sent as words stay so: whole they would rewrite it
    if whole == len(others):
        return added + need, None
    for unit in others[whole:]:
        _as_counted(unit)
    sent = sum(costs[:whole])
    return added + sent, _Unfit(others[whole][0][0], len(others) - whole, need - sent, max(room - sent, 0), turned)


def _greedy(costs: list[int], room: int) -> int:
    """How many of `costs`, in order, fit `room` together (the first that does not ends it)."""
    n = 0
    for c in costs:
        if c > room:
            break
        room -= c
        n += 1
    return n


@dataclass(frozen=True)
class _Before:
    """What the previous call of a context's epoch did with the kept units (`_turned_before`)."""

    turned: bool  # an earlier call turned one it had sent whole into its words: all go so
    whole: int  # the units it sent whole (the first ones)
    shown: int  # the units it sent


def _turned_before(costs: list[int], origins: list[int], counter: TokenCounter, ctx: Context,
                   every_loop: Sequence[tuple[str, list[dict[str, Any]]]], origin: dict[int, int]) -> _Before:
    """What the previous call of this context's epoch did with the kept units (their `costs`
    whole, the context messages they came from in `origins`), by `_fit_kept`'s rule
    replayed over the earlier calls: turned where one of them had to turn a unit an
    earlier one sent whole into its words (from then on the epoch sends every one so);
    else how many it sent whole of how many, a unit sent as words staying so. The earlier
    calls' contexts are prefixes of this one (an epoch only grows), each ending with a
    user message or a tool result; each such prefix is taken for one (a prefix that was
    none, before the epoch began, can only turn them earlier), counted as the plan counts
    (`message_tokens`, with what `ctx.tokens` holds beyond its messages) and with the
    thinking of the tool loop that call was in (`_prefix_thinking`), which took the same
    room then."""
    msgs = ctx.messages
    counts = [message_tokens(counter, m) for m in msgs]
    used = ctx.tokens - REPLY_PRIMING_TOKENS - sum(counts)  # what the plan counts besides its messages
    tokens = REPLY_PRIMING_TOKENS + max(used, 0)
    thinking = _prefix_thinking(every_loop, origin, counter, len(msgs))
    whole = shown = 0
    for m in range(len(msgs) - 1):  # the calls before this one: prefixes through message m
        tokens += counts[m]
        if m < origins[0] or canonical_role(msgs[m]) not in ("user", "tool"):
            continue
        there = [c for c, o in zip(costs, origins, strict=True) if o <= m]
        fits = _greedy(there, ctx.plan.budget - tokens - thinking[m])
        if fits < whole:
            return _Before(True, 0, len(there))
        whole = whole if whole < shown else fits  # one sent as words stays so
        shown = len(there)
    return _Before(False, whole, shown)


def _prefix_thinking(turns: Sequence[tuple[str, list[dict[str, Any]]]], origin: dict[int, int],
                     counter: TokenCounter, messages: int) -> list[int]:
    """For each of the context's `messages`, the thinking tokens the call whose context ended
    with it counted (`_counted_thinking` over the blocks of `turns` from the messages
    through it): the assistant turns' after the last user turn that answers no tool call.
    A turn's blocks come from consecutive messages, the turns in order; a user turn's
    results go first in it (`_pair`), so it opens a loop up to the message before its
    first result."""
    out = [0] * messages
    if not any(b["type"] in THINKING_TYPES for role, bs in turns if role == "assistant" for b in bs):
        return out
    since = 0  # the thinking of the whole assistant turns since the last whole turn that opens a loop
    for t, (role, blocks) in enumerate(turns):
        lo = min(origin.get(id(b), messages) for b in blocks)
        hi = min((origin.get(id(b), messages) for b in turns[t + 1][1]), default=messages) \
            if t + 1 < len(turns) else messages
        if role == "assistant":
            spent = [(origin.get(id(b), messages), thinking_tokens(counter, b)) for b in blocks
                     if b["type"] in THINKING_TYPES]
            for m in range(lo, min(hi, messages)):  # the calls whose context ends within this turn
                out[m] = since + sum(n for o, n in spent if o <= m)
            since += sum(n for _o, n in spent)
            continue
        results = min((origin.get(id(b), messages) for b in blocks if b["type"] == "tool_result"), default=messages)
        for m in range(max(lo, results), min(hi, messages)):  # up to its first result it opens a loop: 0
            out[m] = since
        if results >= messages:
            since = 0
    return out


@dataclass(frozen=True)
class _Unfit:
    """Kept blocks sent as their words (`_fit_kept`): the first of them (by identity: its
    place is known once the request is built), how many go so, what they need whole and
    the room left for them."""

    first: dict[str, Any]
    units: int
    need: int
    room: int
    turned: bool  # whether blocks an earlier call sent whole turn into words (module docstring)


def _unfit_note(unfit: _Unfit, where: tuple[int | Literal["system"], int]) -> str:
    """The request's note on kept blocks sent as their words (module docstring, "Out")."""
    head = (f"messages[{where[0]}].content[{where[1]}]: this and the {unfit.units - 1} later kept blocks (server tool "
            f"calls and results, documents) go as their words: whole they need {unfit.need} more tokens, "
            f"{unfit.room} are left in the budget")
    if not unfit.turned:
        return head + " (the blocks before them go whole, as the previous call of the epoch sent them)"
    return (head + ". The context outgrew the room of the blocks an earlier call of the epoch sent whole: every "
            "one goes as its words from the call that first found so to the epoch's end, whose request "
            "rewrites the messages from here, once an epoch")

def _as_counted(unit: list[tuple[dict[str, Any], str | dict[str, Any], int]]) -> None:
    """Each block of `unit` as the plan counted it, in place (the breakpoints know a block
    by its identity): a kept block as a text block of its words, any other as stored (its
    ids as sent: `_unique_ids` renamed them)."""
    for b, stored, _extra in unit:
        if isinstance(stored, str):
            new: dict[str, Any] = {"type": "text", "text": stored}
        else:
            new = dict(stored)
            new.update((k, b[k]) for k in ("id", "tool_use_id") if k in b and k in new)
        b.clear()
        b.update(new)


def to_anthropic(ctx: Context, memory: MemoryLike | None = None, *,
                 max_breakpoints: int = MAX_BREAKPOINTS, thinking: str = "current_loop",
                 document_tokens: int = DOCUMENT_REFERENCE_TOKENS, reserved: int = 0) -> AnthropicRequest:
    """A context as a Messages API request (module docstring, "Out"); `reserved`, the
    tokens of the context's `pending_tokens` kept for this request (`opening_tokens`, for
    its opening user message), which it may send beyond the plan's budget; `memory`, the one
    the context came from, restores what `from_anthropic` kept in metadata; `thinking`,
    whose turns' thinking blocks go back (module docstring); `document_tokens`, what a
    document the API reads by URL or file id is counted at (an estimate: the request's
    `notes` name each one sent whole)."""
    if thinking not in THINKING_SCOPES:
        raise ValidationError("thinking", f"must be one of {', '.join(THINKING_SCOPES)}")
    check_int(max_breakpoints, "max_breakpoints", 0, MAX_BREAKPOINTS,
              "(Anthropic's limit on cache_control marks in a request)")
    check_int(document_tokens, "document_tokens", 0, MAX_DOCUMENT_TOKENS,
              "(the tokens a document the API fetches by URL or file id is counted at)")
    check_int(reserved, "reserved", 0, MAX_BUDGET_TOKENS, "(tokens of the context's pending_tokens kept for it)")
    budget = ctx.plan.budget + reserved  # what the request may send
    stored = _stored(ctx, check_memory(memory) if memory is not None else None)
    kept: _Kept = {}  # what was put back beyond the plan's count, with what it was counted as
    system: list[dict[str, Any]] = []
    turns: list[list[Any]] = []
    last_block: list[dict[str, Any] | None] = []  # per context message: the last markable block so far
    mark: dict[str, Any] | None = None
    origin: dict[int, int] = {}  # each block's context message (`_turned_before`)
    for mi, m in enumerate(ctx.messages):
        for chat in to_chat([m]):
            role, blocks = _blocks_of(chat, stored, kept)
            blocks = [b for b in blocks if _sendable(b)]
            if not blocks:
                continue
            origin.update((id(b), mi) for b in blocks)
            if role == "system" and not turns:
                system.extend(blocks)
            else:
                role = "user" if role == "system" else role
                if turns and turns[-1][0] == role:
                    turns[-1][1].extend(blocks)
                else:
                    turns.append([role, blocks])
            mark = next((b for b in reversed(blocks) if b["type"] not in THINKING_TYPES), mark)
        last_block.append(mark)
    _unique_ids(turns)
    turns = _pair(turns)
    # every loop's thinking, as the epoch's earlier calls each counted their own (`_turned_before`)
    every_loop = [(r, list(bs)) for r, bs in turns] if kept else []
    if thinking == "current_loop":
        turns = _current_loop_thinking(turns)
    for role, blocks in turns:
        if role == "assistant":  # merged from several messages: its thinking first, in order
            blocks.sort(key=lambda b: b["type"] not in THINKING_TYPES)
    sent = ctx.tokens  # what the request sends, counted: the plan's tokens and what it adds
    notes: list[str] = []
    unfit: _Unfit | None = None
    if kept or any(b["type"] in THINKING_TYPES for _r, bs in turns for b in bs):
        counter = _counter(memory)
        thought = _counted_thinking(turns, counter)
        added, unfit = _fit_kept(turns, kept, counter, ctx, document_tokens=document_tokens, reserved=thought,
                                 origin=origin, every_loop=every_loop)
        sent += thought + added
        thinking_past = sent > budget  # the API refuses a tool loop's turn without its thinking
    else:
        thought, thinking_past = 0, False
    if not turns or turns[0][0] == "assistant":  # the API refuses any other opening, and no message at all
        turns.insert(0, ["user", [{"type": "text", "text": CONTINUED_TEXT}]])
        # sent, so counted: the plan had room for it where it was planned with
        # `opening_tokens` among its pending tokens (the service, the LangChain adapters)
        opening = opening_tokens(memory)
        sent += opening
        if sent > budget and not thinking_past:
            notes.append(f"the opening user message the API requires ({opening} tokens) takes the request to "
                         f"{sent} tokens, past the budget of {budget} (keep room for it: plan with "
                         "pending_tokens=opening_tokens(memory), and give reserved=opening_tokens(memory))")
    if thinking_past:
        notes.insert(0, f"the current tool loop's thinking blocks ({thought} tokens), which the API requires, "
                     f"take the request to {sent} tokens, past the plan's budget of {budget}")
    trimmed: dict[str, Any] | None = None
    if turns and turns[-1][0] == "assistant":  # prefill: the API refuses it ending in whitespace
        last = turns[-1][1][-1]
        if last["type"] == "text" and last["text"] != last["text"].rstrip():
            last["text"] = last["text"].rstrip()  # not blank: _sendable kept it
            trimmed = last
    # where each block sent is: ("system", i) or (message, i)
    where: dict[int, tuple[int | Literal["system"], int]] = {id(b): ("system", i) for i, b in enumerate(system)}
    where.update((id(b), (t, i)) for t, (_r, bs) in enumerate(turns) for i, b in enumerate(bs))
    if trimmed is not None:
        # the next call sends this block untrimmed (a message follows it): a mark on it
        # would write a prefix no request reads. The prefix through the block before it
        # is the next call's too (the last block sent before it that can carry a mark)
        before = [b for _r, bs in turns for b in bs if b["type"] not in THINKING_TYPES]
        k = next(i for i, b in enumerate(before) if b is trimmed)
        instead = before[k - 1] if k else (system[-1] if system else None)
        last_block = [instead if b is trimmed else b for b in last_block]
    if unfit is not None:
        notes.append(_unfit_note(unfit, where[id(unfit.first)]))
    found, marked = chosen_breakpoints(
        ctx.plan.breakpoints, [id(b) if b is not None and id(b) in where else None for b in last_block],
        max_breakpoints)

    def marks(b: dict[str, Any]) -> dict[str, Any]:
        return {**b, "cache_control": dict(EPHEMERAL)} if id(b) in marked else b

    return AnthropicRequest(system=[marks(b) for b in system],
                            messages=[{"role": r, "content": [marks(b) for b in bs]} for r, bs in turns],
                            breakpoints=[AnthropicBreakpoint(bp.layer, bp.tokens, *where[end])
                                         for end, bp in found.items()],
                            notes=notes + _estimate_notes(turns, document_tokens), tokens=sent)


def _estimate_notes(turns: list[list[Any]], document_tokens: int) -> list[str]:
    """A line for each document the API fetches (by URL or file id) that the request
    sends whole, also inside a tool result: its cost is the estimate `document_tokens`."""
    notes: list[str] = []
    for t, (_role, blocks) in enumerate(turns):
        for i, b in enumerate(blocks):
            inner = b.get("content") if b["type"] == "tool_result" else None
            for j, d in enumerate(inner if isinstance(inner, list) else [b]):
                source = d.get("source") if isinstance(d, dict) and d.get("type") == DOCUMENT else None
                if isinstance(source, dict) and source.get("type") in REFERENCE_SOURCES:
                    where = f"messages[{t}].content[{i}]" + (f".content[{j}]" if inner is not None else "")
                    notes.append(f"{where}: a document given by {source['type']}, counted at {document_tokens} "
                                 "tokens, an estimate (its size is not known without fetching it: "
                                 "to_anthropic's document_tokens)")
    return notes


_End = TypeVar("_End", bound=Hashable)


def chosen_breakpoints(breakpoints: Sequence[Breakpoint], ends: Sequence[_End | None],
                       max_breakpoints: int) -> tuple[dict[_End, Breakpoint], set[_End]]:
    """Which of a plan's breakpoints get a `cache_control` mark, for any form of its
    context: `ends[i]` names the last block that can carry a mark of everything sent
    through the context's message `i` (None: none can), as the form sends it (the caller
    says which blocks can: never an empty one, nor a trimmed prefill). Returns each block
    a breakpoint ends on, with its breakpoint (one per block: two end there where a
    message between them sends nothing; the more valuable one), in the plan's order, and
    the blocks marked: at most `max_breakpoints`, the most valuable first
    (`BREAKPOINT_PRIORITY`, then the latest). The one placement `to_anthropic` and the
    LangChain adapters' `cache_marks` share."""
    rank = {layer: i for i, layer in enumerate(BREAKPOINT_PRIORITY)}

    def worth(bp: Breakpoint) -> tuple[int, int]:
        return rank.get(bp.layer, len(rank)), -bp.index

    found: dict[_End, Breakpoint] = {}
    for bp in breakpoints:
        end = ends[bp.index] if 0 <= bp.index < len(ends) else None
        if end is not None and (end not in found or worth(bp) < worth(found[end])):
            found[end] = bp
    marked = {end for end, _bp in sorted(found.items(), key=lambda f: worth(f[1]))[:max_breakpoints]}
    return found, marked

