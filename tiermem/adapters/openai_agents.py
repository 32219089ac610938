"""The OpenAI Agents SDK's `Session` protocol over tiermem (`pip install 'tiermem[agents]'`).

    session = TiermemSession(mem, "user-42")
    result = await Runner.run(agent, "Where did we land on the airline?", session=session,
                              run_config=RunConfig(call_model_input_filter=session.model_input_filter(budget=2000)))

- `add_items` appends the SDK's items (Responses input items, stored losslessly), in one
  batch (all or nothing) where one append takes them. More (past 10,000 items, or over a
  `tiermem.client.Client` past its server's `max_body_bytes`: a turn of large tool
  outputs) go as a LangChain `add_messages` does (`_common.append_chunks`,
  `_common.append_chunked`): in consecutive chunks, in order, each item once, each chunk
  an ordinary append readers may see and, after the first, written only where the
  previous one left the conversation (another writer's append between two goes between
  them; an erasure between two stops the add, `HistoryErased`); an item too large alone
  for the server is refused before anything is sent (`RequestTooLarge`), and so is one the
  store refuses in any chunk (`_common.checked_chunks`: named by its index in the whole
  add, nothing written). A string with a lone surrogate (a tool's output holding a file
  name decoded with `surrogateescape`), which the store refuses as not UTF-8, is stored
  with U+FFFD in its place, one warning logged per add (`without_lone_surrogates`): the
  SDK's `SQLiteSession` stores the turn, and a refusal would keep the run's question
  and lose its calls, outputs and reply. The adapter's choice: the library and the HTTP
  API refuse such a string, named by its field. The filter reads the SDK's input alike.
- `get_items(limit)` returns the session's view (`tiermem.adapters._common.visible`: the
  whole log, folds included, less what pops and clears hide) as Responses items, the
  latest `limit` of them, or of `session_settings.limit` when `limit` is None, as the
  SDK's `SQLiteSession` does (0: none; negative: all). Stored Responses items come back
  as stored, explicit nulls included, equal to what `SQLiteSession` returns, but for a
  reasoning item stored before its summary was required (summary null, or none), which
  comes back with `summary: []` (`tiers.formats.as_appended`): the SDK sends the items
  as they come, and the provider refuses null with a 400. Chat messages other clients
  wrote are converted. A call id used before in the session (a server that numbers its
  calls per reply, `call_0` every round) comes back renamed with its outputs
  (`tiers.formats.unique_item_call_ids`, "Ids sent": `call_0_2`, `call_0_3`): the runner
  sends the items as model input, where the Responses API refuses a repeated `call_id`,
  and the SDK itself merges the items of one `call_id` before sending (the latest call's
  arguments in the first call's place, every earlier output dropped). The ids are given
  over the whole view, oldest first, before `limit` takes its tail, so an item's id is
  the same in every read while the rows before it stay; the rows keep the ids appended,
  and `pop_item` returns the row's item as stored. Only the items read back are renamed:
  a call the model makes within a run under an id the history holds meets it in the
  SDK's own input (the SDK merges the two), so with such a server use
  `model_input_filter`, whose context is read from the log and renamed whole at every
  model call. The SDK's checks of a resumed run's pending write compare what it appended
  with what `get_items` returns, so a batch holding a renamed id reads as changed there.
- `pop_item` appends a retraction row that hides the latest item from `get_items` and
  from every planned context, and returns that item; `clear_session` appends a clear
  row, a read boundary for `get_items` and for a planned context's recent tail, not for
  its memory: pins, retrieval and the rolling summary may still recall the turns before
  it (README "Control rows"; to forget, retract or erase). Neither changes or deletes a
  row: `history()` keeps the items and the control rows, for audit. Pops are serialised per conversation
  (`tiermem.adapters._common.retract_latest`): concurrent pops return distinct items.
- `model_input_filter(budget)` makes what the model receives tiermem's planned context
  under the budget (pinned facts, summary, retrieved turns, the recent tail), not the
  whole history. Its items from the log carry the `provider_data` and the SDK's
  placeholder id they were stored with, as the SDK's own input does (`with_sdk_fields`:
  a Chat Completions model reads a Gemini call's thought signature or Anthropic thinking
  blocks there, and an assistant message item only with an id; a Responses model strips
  both itself). `context_items` is the Responses API's form: neither. The context is planned from the log; the input's items the log does not
  hold yet follow it, in order, as the SDK gave them (`unsaved_items`): a streamed run
  (`Runner.run_streamed`) saves its new input only after the first model call (a
  non-streamed one before it), and a conversation not stored yet is planned from the
  input alone (tests/test_agents_filter_streamed.py, both runners). Those items count
  against `budget` too: the context is planned under the budget less their tokens (the
  memory's tokenizer; over a `Client`, the larger count of the tokenizers a server may
  use), so the whole input stays within it (docs/design.md invariant 5), counted as the
  items sent: a Chat Completions reply with N tool calls, one message in the plan, is
  1 + N items, each with a message's overhead, and the SDK's fields come back to the
  log's items, so where the items take more than the plan counted the context is
  planned again with that much less room (`_within`; `context_items` too), given to the
  planner as `pending_tokens`: the prompt-cache epoch stays keyed by `budget`, so
  consecutive streamed turns extend one epoch as non-streamed turns do
  (tests/test_agents_filter_streamed_epoch.py); where they alone do not fit,
  `BudgetTooSmall` as a non-streamed run's oversized question raises,
  and where the room left cannot hold the log's latest user message they go alone
  (tests/test_agents_filter_streamed_budget.py). They are told by position: the input
  holds first the items `get_items` last returned, then those saved since, so a new
  question equal to an old one is new (under `session_settings` limit 0 too); where it
  does not (an input the SDK rebuilt), by count (a question asked again is new where
  the input holds its text once more than the log, or, before the run saved anything,
  where it ends the input), as `unsaved_items` says. What the SDK's input
  leaves out of the log's items it holds from its first on (a handoff's `input_filter`,
  `handoff_filters.remove_all_tools`: the previous agent's calls, outputs and reasoning)
  is left out of the plan too (`left_out_items`, told by row, not call id: a call id used
  again, by a call the input holds, keeps that call and its output; where the input begins is found from its
  end, so a question asked again under a session limit is matched to its own row, not
  to the first one equal to it); older items, which a session limit kept from the SDK,
  are still planned. `TiermemSession(...,
  timezone="America/Los_Angeles")` plans every context (`context_items`, the filter) in
  that user's zone, checked when the session is made (None: the memory's, or the
  namespaced view's, zone).
- `memory`: a `Memory`, a `NamespacedMemory`, or a blocking `tiermem.client.Client` of a
  shared `tiermem serve` (the same items, pops and contexts, confined to the client's
  namespace by its token). The session runs every call in `asyncio.to_thread`, so the
  blocking client keeps the event loop free; an `AsyncClient` is refused when the
  session is made (its coroutines would need a second, async copy of the pop and view
  logic): pass a `Client` with the same URL, token and namespace.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any, get_args

from tiermem.adapters._common import (
    DEFAULT_BUDGET_TOKENS,
    MemoryLike,
    append_chunked,
    append_chunks,
    check_memory,
    clear,
    items_of,
    latest_user_text,
    retract_latest,
    visible,
)
from tiermem.tiers.errors import BudgetTooSmall, ConversationNotFound
from tiermem.tiers.formats import (
    PROVIDER_DATA_FIELD,
    SDK_PLACEHOLDER_ID,
    sdk_input_fields,
    to_responses,
    to_responses_rows,
    unique_item_call_ids,
    wire_body,
)
from tiermem.tiers.models import sdk_dump
from tiermem.tiers.plain_json import plain_deep
from tiermem.tiers.tokens import REPLY_PRIMING_TOKENS, BpeTokenCounter, TokenCounter, message_tokens
from tiermem.tiers.zones import optional_timezone

log = logging.getLogger(__name__)

# plans of one context past the first, each with less room by what the items sent took
# beyond the budget (TiermemSession._within): one fits unless a shorter plan converts worse
MAX_REPLANS = 3

if TYPE_CHECKING:
    from collections.abc import Callable

    from agents.memory import SessionSettings
    from agents.run_config import CallModelData, ModelInputData


def _plain(item: Any) -> Any:
    """`item` as JSON data where it is (or holds) the SDK's pydantic objects, as the store
    reads them (`parse_message`), so that its request bytes can be measured; an item
    nested past the interpreter's limit as it is, for the store to refuse by name."""
    try:
        return plain_deep(sdk_dump(item), sdk_dump)
    except RecursionError:
        return item


def _utf8_text(text: str) -> str:
    """`text` with each lone surrogate as U+FFFD (the replacement character); a pair written as
    two code points (a UTF-16 pair) joined into its character, as JSON decodes one."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def without_lone_surrogates(items: list[Any]) -> tuple[list[Any], int]:
    """The SDK's items (as `_plain` gives them) with every string, keys included, valid
    UTF-8 (`_utf8_text`), and how many strings changed. A tool's output holding a file
    name decoded with `surrogateescape` (`caf\\udce9.txt`) is a lone surrogate, which the
    store refuses (UTF-8 cannot encode it; the library's and the HTTP API's refusal, named
    by its field): the session would keep the run's question and lose its calls, outputs
    and reply, where the SDK's `SQLiteSession` stores them. The items given are not
    changed; items nested past the interpreter's limit come back as they are, for the
    store to refuse by name."""
    try:  # the common case, in C: nothing to replace
        json.dumps(items, ensure_ascii=False, default=repr).encode("utf-8")
        return items, 0
    except (ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        pass
    changed = 0

    def fix(value: Any) -> Any:
        nonlocal changed
        if isinstance(value, str):
            out = _utf8_text(value)
            changed += out is not value
            return out
        if isinstance(value, dict):
            return {fix(k): fix(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [fix(v) for v in value]
        return value

    try:
        return [fix(item) for item in items], changed
    except RecursionError:
        return items, 0


def _key(item: dict[str, Any]) -> str:
    return json.dumps(item, sort_keys=True, default=repr)


def unsaved_items(inputs: list[dict[str, Any]], saved: list[dict[str, Any]],
                  read: list[dict[str, Any]], last_read: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """The trailing items of a model call's `inputs` that the session's log does not hold
    yet: in a streamed run (`Runner.run_streamed`) the SDK saves the run's new input only
    after the first model call (a non-streamed run saves it before). `saved`: the view's
    items as stored, `read`: as `get_items` returns them (call ids renamed), the forms the
    SDK's input holds them in (its history as read, its own items of this run as stored).

    By position first: `last_read` is (the view's length, the items returned) of the
    session's latest `get_items`, the history the SDK put first in its input; the view's
    items after it were saved since, and the input holds them next. Where the input's
    first items are those, item for item, the rest are new, whatever their content: a
    question equal to one stored before (under `session_settings` limit 0, or where the
    log ends with it) is new. Where they are not (the SDK rebuilt or reordered its input:
    a handoff's `input_filter`, `nest_handoff_history`, a `session_input_callback`; a pop
    or another writer since the read), by count where nothing was saved since the read
    (the new input is not saved yet, and the SDK puts it last: `_unsaved_by_count`), else
    by content: the items after the latest item of the view; an input without that item
    is one the SDK rebuilt (`nest_handoff_history`'s summary of the conversation, which
    the filter's context plans from the log instead) or one of a session that read no
    history: of it, the trailing user messages the input holds more often than the view
    (`_beyond`). A question equal to one stored before is new wherever the input holds it
    once more than the log: it is matched by count, not content alone."""
    if not saved:
        return list(inputs)  # nothing stored yet (a new conversation, or cleared)
    # nothing saved since the SDK read its history: this run's new input is not saved yet
    # (a streamed run's first model call), so the input holds at least one new item
    fresh = last_read is not None and last_read[0] == len(saved) and bool(inputs)
    if last_read is not None:
        at, count = last_read
        start = at - count  # the view's first item the SDK read
        if 0 <= start <= at <= len(saved) and len(saved) - start <= len(inputs):
            held = len(saved) - start
            if (all(inputs[i] in (saved[start + i], read[start + i]) for i in range(held))
                    and (held < len(inputs) or not fresh)):
                return inputs[held:]
        if fresh:  # rebuilt (a session_input_callback), the new items last
            return _unsaved_by_count(inputs, saved[start:], read[start:])
    start = last_read[0] - last_read[1] if last_read is not None and 0 <= last_read[1] <= last_read[0] else 0
    latest = (saved[-1], read[-1])
    for j in range(len(inputs) - 1, -1, -1):
        if inputs[j] in latest:
            # after it, what the view since the read does not hold by count: a callback
            # that put the history after the new items leaves the history's items there
            surplus = _surplus(inputs, saved[start:], read[start:])
            return [item for item, new in zip(inputs[j + 1:], surplus[j + 1:], strict=True) if new]
    k = len(inputs)
    while k > 0 and inputs[k - 1].get("role") == "user" and _beyond(inputs, k - 1, saved, read):
        k -= 1
    return inputs[k:]


def _count(item: dict[str, Any], saved: list[dict[str, Any]], read: list[dict[str, Any]]) -> int:
    """How many of the view's items (`saved` as stored, `read` as returned) `item` equals."""
    return sum(1 for s, r in zip(saved, read, strict=True) if item in (s, r))


def _beyond(inputs: list[dict[str, Any]], k: int, saved: list[dict[str, Any]], read: list[dict[str, Any]]) -> bool:
    """Whether `inputs[k]` is an occurrence of its content past what the view holds: the
    input holds it (up to k) more often than the view does. A question asked again is
    then told from its earlier row by count, not taken for it by content."""
    return sum(1 for i in inputs[:k + 1] if i == inputs[k]) > _count(inputs[k], saved, read)


def _surplus(inputs: list[dict[str, Any]], window: list[dict[str, Any]],
             window_read: list[dict[str, Any]]) -> list[bool]:
    """For each of `inputs`, whether it is past the `window`'s count of its content (as
    stored; `window_read` as returned), the earliest of equal items taken for the
    window's: the SDK rebuilds its input from the history it read and the run's items,
    each once, so an item it holds more often than the window is new."""
    alias = {_key(r): _key(s) for s, r in zip(window, window_read, strict=True)}
    left: dict[str, int] = {}
    for s in window:
        left[_key(s)] = left.get(_key(s), 0) + 1
    out: list[bool] = []
    for item in inputs:
        k = alias.get(_key(item), _key(item))
        out.append(left.get(k, 0) <= 0)
        if not out[-1]:
            left[k] -= 1
    return out


def _unsaved_by_count(inputs: list[dict[str, Any]], window: list[dict[str, Any]],
                      window_read: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`unsaved_items` where nothing was saved since the SDK read the history `window`
    (as stored; `window_read` as returned) and its input is not that history then the new
    items (a `session_input_callback` rebuilt it, which may drop, reorder or keep any of
    either): the input's items past the window's count (`_surplus`), in order; where
    every item is the window's by count (the history's copy of a question asked again
    dropped), the input's last item, as the run's new input is not saved yet and the SDK
    puts it last. A question equal to one in the history is new wherever the input holds
    it once more than the window."""
    new = [item for item, extra in zip(inputs, _surplus(inputs, window, window_read), strict=True) if extra]
    return new or inputs[-1:]


def _counters(memory: MemoryLike) -> list[TokenCounter]:
    """The tokenizers a context of `memory` is counted with: a `Memory`'s (a namespaced
    view's, its Memory's); a `Client` does not say its server's, so every one a server may
    be configured with (`Config.tokenizer`), the larger count taken (never under it)."""
    from tiermem.memory import Memory, NamespacedMemory

    if isinstance(memory, NamespacedMemory):
        return [memory.memory.tokens]
    if isinstance(memory, Memory):
        return [memory.tokens]
    from tiermem.config import Config

    return [BpeTokenCounter(name) for name in get_args(Config.model_fields["tokenizer"].annotation)]


def _same(item: dict[str, Any], stored: dict[str, Any], renamed: dict[str, Any]) -> bool:
    """Whether an input item is the view's item (`stored`, or `renamed` as `get_items`
    returns it): a call or output by its type and call id (the SDK's own items of a run
    are not byte for byte as stored), any other whole."""
    if isinstance(stored.get("call_id"), str):
        return item.get("type") == stored.get("type") and item.get("call_id") in (stored["call_id"],
                                                                                   renamed.get("call_id"))
    return item in (stored, renamed)


def _input_start(held: list[dict[str, Any]], saved: list[dict[str, Any]],
                 read: list[dict[str, Any]]) -> int | None:
    """Where in the view the SDK's input begins: its items the log holds (`held`, the
    input less its unsaved items) matched from the end, each to the latest view item
    before the one its successor matched, an item the log does not hold (a summary
    `nest_handoff_history` wrote) skipped. Anchored on the latest, a question asked again
    matches its own row, not the first one equal to it (which would take every typed item
    between the two, older than what a session limit let the SDK read, for left out);
    Chat Completions items all carry one fake id, so whole items are matched, not ids.
    None: the input holds none of the view."""
    k, first = len(saved), None
    for item in reversed(held):
        for j in range(k - 1, -1, -1):
            if _same(item, saved[j], read[j]):
                k = first = j
                break
    return first


def left_out_items(inputs: list[dict[str, Any]], saved: list[dict[str, Any]],
                   read: list[dict[str, Any]], unsaved: int = 0) -> set[int]:
    """What the SDK's model input leaves out of the log, for the filter to leave out too:
    a handoff's `input_filter` (`handoff_filters.remove_all_tools`) gives the receiving
    agent its input without the tool items, which the session saved all the same. Of the
    view's items from where the input begins (`_input_start`: the last `unsaved` items of
    the input, not saved yet, aside; `saved` as stored, `read` as `get_items` renames
    them, as `unsaved_items`), the typed items other than messages the input does not
    hold: a call or output by its call id (the id as stored; held when an input item has
    it stored or renamed), any other by its whole item (in wire form, as a context holds
    it); a reasoning item only with the item after it, which it belongs to (a call sent
    without its reasoning is a 400). Older items (before what the SDK read, under a
    session limit) are tiermem's to plan and stay; messages stay.
    Returns their indexes in `saved`, not their call ids: a call id used again later (a
    server that numbers its calls per reply, `call_0` every round) names a call the input
    holds too, and `_left_out_of_plan` leaves out only the planned items of these rows."""
    ids_in = {i["call_id"] for i in inputs if isinstance(i.get("call_id"), str)}
    keys_in = {_key(i) for i in inputs}

    def held(stored: dict[str, Any], renamed: dict[str, Any]) -> bool:
        if isinstance(stored.get("call_id"), str):
            return stored["call_id"] in ids_in or renamed.get("call_id") in ids_in
        return _key(stored) in keys_in or _key(renamed) in keys_in

    start = _input_start(inputs[:len(inputs) - unsaved], saved, read)
    if start is None:
        return set()
    gone_at: set[int] = set()
    next_gone = False
    for k in range(len(saved) - 1, start - 1, -1):  # newest first: a reasoning item's next is known
        item, kind = saved[k], saved[k].get("type")
        gone = (isinstance(kind, str) and kind != "message" and (kind != "reasoning" or next_gone)
                and not held(item, read[k]))
        if gone:
            gone_at.add(k)
        next_gone = gone
    return gone_at


def _typed(item: dict[str, Any]) -> bool:
    """Whether `item` is a typed Responses item other than a message (a call, an output,
    reasoning, a hosted tool's item): what `left_out_items` may leave out."""
    kind = item.get("type")
    return isinstance(kind, str) and kind != "message"


def _is_row_item(planned: dict[str, Any], stored: dict[str, Any]) -> bool:
    """Whether a planned message is the tail row's item `stored`, as the plan shows it: a
    call or output by its type and call id (an output may be trimmed), any other whole
    in wire form."""
    if isinstance(stored.get("call_id"), str):
        return planned.get("type") == stored.get("type") and planned.get("call_id") == stored["call_id"]
    return _key(planned) == _key(wire_body(stored))


def _left_out_of_plan(planned: list[dict[str, Any]], rows: list[tuple[Any, list[dict[str, Any]]]],
                      tail: set[int], gone: set[int]) -> list[dict[str, Any]]:
    """`planned` less the items of the rows at the log positions `gone` (`left_out_items`,
    its indexes mapped to their rows). A context shows a row's item as a message of its
    own only in the tail (`tail`: the plan's tail positions), in log order, so each typed
    planned message is the next tail row holding one Responses item that it is
    (`_is_row_item`), and goes where that row's position is not in `gone`. Told by row, not
    by call id: a call id used again names the left-out call and a later one the input
    holds, whose call and output are sent. A typed message no such row is (none expected)
    goes unless a `gone` row's item is it by the same test."""
    cands = [(m.position, items[0]) for m, items in rows
             if m.position in tail and len(items) == 1 and _typed(items[0])
             and m.body.get("type") == items[0].get("type")]  # stored as a Responses item, not a chat message
    gone_items = [items[0] for m, items in rows if m.position in gone and len(items) == 1]
    out: list[dict[str, Any]] = []
    at = 0
    for msg in planned:
        if not _typed(msg):
            out.append(msg)
            continue
        j = next((j for j in range(at, len(cands)) if _is_row_item(msg, cands[j][1])), None)
        if j is not None:
            at = j + 1
            keep = cands[j][0] not in gone
        else:
            keep = not any(_is_row_item(msg, g) for g in gone_items)
        if keep:
            out.append(msg)
    return out


def with_sdk_fields(planned: list[dict[str, Any]], rows: list[tuple[Any, list[dict[str, Any]]]],
                    positions: set[int]) -> list[dict[str, Any]]:
    """The planned context's messages as Responses items, each item the log holds with the
    fields the SDK's own input gives it that a context leaves out (`wire_body`): its
    `provider_data` and the SDK's placeholder id (`SDK_PLACEHOLDER_ID`), with that id an
    assistant message's output parts and status (`sdk_input_fields`). The SDK's input
    holds a session's items as `get_items` returns them, and its models read both there:
    a Chat Completions model's converter sends a Gemini call's `thought_signature` and
    Anthropic thinking blocks from `provider_data` (Gemini refuses a call of the current
    turn without its signature), and takes an assistant message item for one only with an
    id ("Unhandled item type or structure" without); an OpenAI Responses model strips both
    itself (and leaves out the reasoning items `provider_data` marks as another
    provider's). An item gets them back from the row (`rows`: the view's rows with their
    items, `items_of`) it is the wire form of, among the rows at the plan's `positions`,
    the n-th planned equal item the n-th such row (a Chat Completions reply's items all
    carry the one placeholder id, so two replies alike differ only in `provider_data`).
    Items from no row whole (a summary, a trimmed output, a chat row) stay as planned."""
    kept: dict[str, list[dict[str, Any]]] = {}
    for m, items in rows:
        if m.position not in positions or len(items) != 1:
            continue
        item = items[0]
        fields = sdk_input_fields(item)
        if fields:
            kept.setdefault(_key(wire_body(item)), []).append(fields)
    out: list[dict[str, Any]] = []
    for item in (i for row in to_responses_rows(planned) for i in row):
        given = kept.get(_key(item)) if kept else None
        out.append({**item, **given.pop(0)} if given else item)
    return out


def _converts(rows: list[tuple[Any, list[dict[str, Any]]]]) -> bool:
    """Whether the items of some row may take more as sent than the plan counts: a row
    of several items (a chat assistant message with tool calls), or one the SDK's fields
    come back to (`with_sdk_fields`)."""
    return any(len(items) != 1 or PROVIDER_DATA_FIELD in items[0] or items[0].get("id") == SDK_PLACEHOLDER_ID
               for _m, items in rows)


class TiermemSession:
    """An Agents SDK `Session` whose items live in a tiermem conversation."""

    def __init__(self, memory: MemoryLike, conversation_id: str, *,
                 session_settings: SessionSettings | dict[str, Any] | None = None,
                 timezone: str | None = None) -> None:
        self.memory = check_memory(memory)
        self.session_id = conversation_id
        # refused here, not at the first model call mid-run
        self.timezone = optional_timezone(timezone)
        if isinstance(session_settings, dict):  # the SDK's sessions take a dict too
            from agents.memory.session_settings import coerce_session_settings

            session_settings = coerce_session_settings(session_settings)
        self.session_settings = session_settings
        # the latest get_items: (the view's length, the items returned), the history the
        # SDK puts first in a run's input, which the filter tells the new items by
        self._last_read: tuple[int, int] | None = None
        self._token_counters: list[TokenCounter] | None = None

    def _stored_items(self) -> list[dict[str, Any]]:
        return [item for _m, items in items_of(visible(self.memory, self.session_id)) for item in items]

    def _stored_rows(self) -> list[tuple[Any, list[dict[str, Any]]]]:
        return items_of(visible(self.memory, self.session_id))

    def _items(self) -> list[dict[str, Any]]:
        # renamed over the whole view before `limit` cuts it: an id depends only on the
        # items before it, so every read (and every limit) gives an item the same one
        return unique_item_call_ids(self._stored_items())

    async def get_items(self, limit: int | None = None) -> list[Any]:
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        items = await asyncio.to_thread(self._items)
        # SQLiteSession's LIMIT: the latest N; 0 none; a negative one is no limit
        out = items[-limit:] if limit is not None and limit > 0 else ([] if limit == 0 else items)
        self._last_read = (len(items), len(out))
        return out

    async def add_items(self, items: list[Any]) -> None:
        if items:
            await asyncio.to_thread(self._add, list(items))

    def _add(self, items: list[Any]) -> None:
        # in one batch (all or nothing) where one append takes them; else in chunks, as a
        # LangChain add_messages: a turn of large tool outputs passes a server's max_body_bytes
        bodies, replaced = without_lone_surrogates([_plain(item) for item in items])
        if replaced:  # stored whole, with U+FFFD, rather than refused with the turn half-saved
            log.warning("TiermemSession %r: %d string(s) of the items added held a lone surrogate (not UTF-8), "
                        "stored with U+FFFD in its place", self.session_id, replaced)
        chunks = append_chunks(self.memory, bodies)
        if len(chunks) == 1:
            self.memory.append_many(self.session_id, chunks[0])
        else:
            append_chunked(self.memory, self.session_id, chunks, call="add_items")

    async def pop_item(self) -> Any | None:
        return await asyncio.to_thread(retract_latest, self.memory, self.session_id)

    async def clear_session(self) -> None:
        await asyncio.to_thread(clear, self.memory, self.session_id)

    def context_items(self, query: str | None, budget: int = DEFAULT_BUDGET_TOKENS,
                      system: str | None = None) -> list[dict[str, Any]]:
        """tiermem's planned context for `query`, as Responses input items, never more
        than `budget` tokens as sent (`_within`: the items, not the plan's messages)."""

        def plan(pending: int, record: bool) -> Any:
            what_if: dict[str, Any] = {} if record else {"record": False}  # a Memory's or a view's argument
            return self.memory.context(self.session_id, query, budget, system=system, timezone=self.timezone,
                                       pending_tokens=pending, **what_if)

        return self._within(budget, 0, plan, lambda ctx: to_responses(ctx.messages), probe=True)

    def _within(self, budget: int, pending: int, plan: Callable[[int, bool], Any],
                send: Callable[[Any], list[dict[str, Any]]], *, probe: bool) -> list[dict[str, Any]]:
        """The items `send` makes of the context `plan(pending, record)` gives, within
        `budget` as sent. A context is planned and counted in its messages' form (a Chat
        Completions log: one assistant message with N tool calls); as Responses items that
        message is 1 + N items, each with a message's overhead, and an item from the log
        gets back its `provider_data` and id (`with_sdk_fields`), so the items can take
        more than the plan counted. Where they do, the context is planned with that much
        less room (`pending_tokens`, so the prompt-cache epoch stays keyed by `budget`).
        With `probe` (the items may take more) and a local memory, the room is found by
        what-if plans (`record=False`, planned as the recorded call would be) before the
        one recorded plan: a second recorded plan would meet the first's epoch, which it
        cannot extend with less room, and start a new one at its reserve (half the
        context). A `Client`, which records every plan, plans again recorded. At most
        `MAX_REPLANS` plans past the first of each kind; past them, `BudgetTooSmall` (a
        shorter plan that converts worse each time: one replan fits in practice)."""
        from tiermem.memory import Memory, NamespacedMemory

        def less(room: int, ctx: Any, over: int) -> int:
            # the next plan's pending tokens: its messages at least `over` fewer than this
            # one's (an epoch's extension keeps its prefix while the room holds it)
            return max(room + over, budget - ctx.tokens + over)

        extra = pending
        if probe and isinstance(self.memory, Memory | NamespacedMemory):
            for _try in range(1 + MAX_REPLANS):
                ctx = plan(extra, False)
                over = self._sent(send(ctx)) - budget
                if over <= 0:
                    break
                extra = less(extra, ctx, over)
        sent = 0
        for _try in range(1 + MAX_REPLANS):
            ctx = plan(extra, True)
            items = send(ctx)
            sent = self._sent(items)
            if sent <= budget:
                return items
            extra = less(extra, ctx, sent - budget)
        raise BudgetTooSmall(budget, sent, priming=REPLY_PRIMING_TOKENS, pending=extra)

    def _sent(self, items: list[dict[str, Any]]) -> int:
        """What `items` take as a request's input, counted as a context is."""
        return REPLY_PRIMING_TOKENS + self._tokens(items) if items else 0

    def model_input_filter(self, budget: int = DEFAULT_BUDGET_TOKENS) -> Any:
        """A `RunConfig.call_model_input_filter`: the model gets tiermem's context."""

        async def _filter(data: CallModelData[Any]) -> ModelInputData:
            from agents.run_config import ModelInputData

            # as add_items stores them: a lone surrogate as U+FFFD (`without_lone_surrogates`)
            inputs, _replaced = without_lone_surrogates([_plain(i) for i in data.model_data.input])
            items = await asyncio.to_thread(self._filter_items, inputs, budget)
            return ModelInputData(input=items, instructions=data.model_data.instructions)  # type: ignore[arg-type]

        return _filter

    def _tokens(self, items: list[dict[str, Any]]) -> int:
        """What `items` take in a context, counted as the context counts its messages."""
        if self._token_counters is None:
            self._token_counters = _counters(self.memory)
        return max(sum(message_tokens(c, i) for i in items) for c in self._token_counters)

    def _context(self, query: str | None, budget: int, pending: int, record: bool = True) -> Any:
        """The planned context under `budget` less the `pending` tokens sent after it
        (`pending_tokens`, a `Client`'s request too): the prompt-cache epoch stays keyed by
        `budget`, so consecutive streamed turns, whose first call has them, extend one
        epoch as non-streamed turns do. `record=False`: a what-if plan (local memory only)."""
        what_if: dict[str, Any] = {} if record else {"record": False}  # a Memory's or a view's argument
        return self.memory.context(self.session_id, query, budget, timezone=self.timezone, pending_tokens=pending,
                                   **what_if)

    def _filter_items(self, inputs: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
        """The planned context less what the SDK's input leaves out (`left_out_items`: a
        handoff's input filter), then the input's items not saved yet (`unsaved_items`: a
        streamed run's new input at its first model call), in order, as the SDK gave them;
        each call id sent once over the whole (`unique_item_call_ids`). The context is
        planned under `budget` less those items' tokens, so the whole stays within it
        (docs/design.md invariant 5), its epoch keyed by `budget` (`_context`). Those items alone past it: `BudgetTooSmall`, as the
        plan of a non-streamed run raises for its latest user message (the filter does
        not truncate). A room left too small for the log's own latest user message (the
        previous question, in a streamed turn): those items alone, as a non-streamed
        context leaves out the tail turns that do not fit."""
        rows = self._stored_rows()
        saved = [item for _m, items in rows for item in items]
        read = unique_item_call_ids(saved)
        new = unsaved_items(inputs, saved, read, self._last_read)
        where = [m.position for m, items in rows for _item in items]  # each view item's row
        gone = {where[k] for k in left_out_items(inputs, saved, read, len(new))}
        need = self._tokens(new) if new else 0
        if new and REPLY_PRIMING_TOKENS + need > budget:
            raise BudgetTooSmall(budget, REPLY_PRIMING_TOKENS + need, priming=REPLY_PRIMING_TOKENS, latest=need)
        def send(ctx: Any) -> list[dict[str, Any]]:
            positions = {p for it in ctx.plan.items for p in it.positions}
            tail = {p for it in ctx.plan.items if it.slice == "tail" for p in it.positions}
            planned = _left_out_of_plan(ctx.messages, rows, tail, gone) if gone else ctx.messages
            return unique_item_call_ids([*with_sdk_fields(planned, rows, positions), *new])

        query = latest_user_text(inputs)
        try:  # within the budget as sent: the items, the new ones included (`_within`)
            return self._within(budget, need, lambda pending, record: self._context(query, budget, pending, record),
                                send, probe=_converts(rows))
        except ConversationNotFound:
            if saved:
                raise
            return unique_item_call_ids(new)  # not stored yet: a streamed run's first call plans from its input alone
        except BudgetTooSmall:
            if not need:
                raise  # the log's latest user message is this call's question: as a non-streamed run
            return unique_item_call_ids(new)
