"""What every adapter shares: the conversation as a session sees it.

A session's view is the conversation's whole log (`history()`, read in pages) minus
tiermem's control rows and what they hide (`tiers.formats.hidden_positions`): a
retraction hides one item, a clear hides everything before it. A fold (a consolidation
checkpoint) is a read boundary for planned contexts only, never for a session's view:
a framework that sends its history to the model (`RunnableWithMessageHistory`, the
Agents SDK without `model_input_filter`) must still get every turn after a fold. The log
itself is never changed: `history()` still returns every row, control rows included.

The adapters act through `MemoryLike`: the few methods of `Memory` they call, which a
`NamespacedMemory` and a blocking `tiermem.client.Client` (a shared `tiermem serve`) both
have. Nothing here reads a store's configuration: the limits an adapter adapts to
(metadata bytes, for LangChain artifacts: `metadata_limit`; the messages and, over a
`Client`, the request bytes one append holds, for a long LangGraph sync or LangChain
`add_messages`: `batch_limit`,
`append_chunks`) are a local Memory's config or constants or a server's own
(`Client.limits()`, read once per client); only a server that does not say them (an
older one) leaves them unknown, and refuses what passes them.
An `AsyncClient` is refused when an adapter is made (`check_memory`): its methods are
coroutines, and the adapters' logic is blocking code (run off the event loop where the
framework is async).

Writes that read the view first (a pop, the LangGraph hooks' "stored yet?") hold a lock
per (Memory or Client, namespace, conversation) in this process (`conversation_lock`);
across instances and processes they check the log after writing, whose positions are one
total order (see `retract_latest`).
"""

from __future__ import annotations

import functools
import re
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, Union

from tiermem.tiers.errors import (
    ConversationNotFound,
    HistoryErased,
    PositionMismatch,
    RequestTooLarge,
    ValidationError,
)
from tiermem.tiers.formats import (
    CLEAR_TYPE,
    RETRACT_TYPE,
    hidden_positions,
    message_text,
    to_responses_rows,
)
from tiermem.tiers.models import AppendOutcome, StoredMessage, parse_message
from tiermem.tiers.plain_json import check_int_digits, unencodable

if TYPE_CHECKING:
    from tiermem.client import Client
    from tiermem.memory import Memory, NamespacedMemory
    from tiermem.planner.plan import Context

DEFAULT_BUDGET_TOKENS = 4000


class MemoryLike(Protocol):
    """What the session adapters (Agents, LangChain, LangGraph) and `to_anthropic` call:
    `Memory`, `NamespacedMemory` and `tiermem.client.Client` each have it."""

    def append(self, conversation_id: str, message: dict[str, Any]) -> int: ...

    def append_many(self, conversation_id: str, messages: Sequence[dict[str, Any]]) -> list[int]: ...

    # the conditional batch (`expect_position`); called only where `conditional_appends` says
    # the store takes it (a Client: its server says so)
    def append_outcome(self, conversation_id: str, messages: Sequence[dict[str, Any]], *,
                       expect_position: int | None = None,
                       expect_incarnation: str | None = None) -> AppendOutcome: ...

    def history(self, conversation_id: str, *, after: int | None = None,
                limit: int | None = None) -> list[StoredMessage]: ...

    def history_page(self, conversation_id: str, *, after: int | None = None,
                     limit: int | None = None) -> tuple[list[StoredMessage], int | None]: ...

    def context(self, conversation_id: str, query: str | None = None, budget: int = DEFAULT_BUDGET_TOKENS, *,
                system: str | None = None, namespace_recall: bool = True, timezone: str | None = None,
                pending_tokens: int = 0, truncate_latest: bool = False) -> Context: ...


if TYPE_CHECKING:
    def _all_memory_like(memory: Memory, view: NamespacedMemory, client: Client) -> list[MemoryLike]:
        """Never called: mypy holds the three to the protocol here."""
        return [memory, view, client]


# a store in this process: what the MCP server acts on (it calls more than MemoryLike has)
LocalMemory = Union["Memory", "NamespacedMemory"]
HISTORY_PAGE = 2000  # rows per history() read while building a view
POPPED_FROM_KEY = "tiermem_popped_from"  # metadata of the items a pop of a multi-item row put back
# The LangChain adapters' metadata keys (tiermem.adapters.langchain), here so that a pop
# knows them without importing LangChain: the message's LangChain id, and its LangChain
# content where the stored form had to leave blocks out
LANGCHAIN_ID_KEY = "langchain_id"
LANGCHAIN_CONTENT_KEY = "langchain_content"
# an AI message's invalid tool calls (`tiermem.adapters.langchain.METADATA_INVALID_CALLS_KEY`)
LANGCHAIN_INVALID_CALLS_KEY = "langchain_invalid_tool_calls"

_locks_guard = threading.Lock()
_locks: weakref.WeakKeyDictionary[object, dict[tuple[str | None, str], threading.Lock]] = weakref.WeakKeyDictionary()


def _base(mem: MemoryLike) -> tuple[object, str | None]:
    """What `mem` writes through (the Memory behind a view; a Client itself) and the
    namespace it acts in (a Client's None: its token's prefix)."""
    from tiermem.client import Client
    from tiermem.memory import DEFAULT_NAMESPACE, Memory, NamespacedMemory

    if isinstance(mem, NamespacedMemory):
        return mem.memory, mem.namespace
    if isinstance(mem, Client):
        return mem, mem.namespace
    if isinstance(mem, Memory):
        return mem, DEFAULT_NAMESPACE
    return mem, None  # another MemoryLike: its own lock set


def check_memory(mem: object) -> MemoryLike:
    """`mem` as an adapter takes it, refused at once (not mid-run) when it is not one."""
    from tiermem.client import AsyncClient

    if isinstance(mem, AsyncClient):
        raise ValidationError("memory", "an AsyncClient's methods are coroutines; the adapters call the memory "
                              "from blocking code (off the event loop where the framework is async): pass "
                              "tiermem.client.Client, with the same URL, token and namespace")
    missing = [name for name in _MEMORY_METHODS if not callable(getattr(mem, name, None))]
    if missing:
        raise ValidationError("memory", f"must be a Memory, a NamespacedMemory or a tiermem.client.Client, got "
                              f"{type(mem).__name__} (no {', '.join(missing)})")
    return mem  # type: ignore[return-value]


_MEMORY_METHODS = ("append", "append_many", "history", "history_page", "context")


def metadata_limit(mem: MemoryLike) -> int | None:
    """The store's metadata byte limit: a local Memory's config, or the server's as a
    client reads it (`Client.limits()`, one request per client); None where it is not
    known (a server without /v1/limits, another MemoryLike): the store then refuses
    (422, nothing written) what passes it."""
    from tiermem.client import Client
    from tiermem.memory import Memory, NamespacedMemory

    if isinstance(mem, Memory | NamespacedMemory):
        return mem.config.max_metadata_bytes
    if isinstance(mem, Client):
        limits = mem.limits()
        return limits.max_metadata_bytes if limits is not None else None
    return None


def batch_limit(mem: MemoryLike) -> int:
    """The most messages one append of `mem` holds: the library's `MAX_BATCH_MESSAGES`,
    or below it a server's own (`Client.limits()`, one request per client; a `Client`
    refuses more than the library's before sending, whatever its server says)."""
    from tiermem.client import Client
    from tiermem.memory import MAX_BATCH_MESSAGES

    if isinstance(mem, Client):
        limits = mem.limits()
        if limits is not None:
            return min(limits.max_batch_messages, MAX_BATCH_MESSAGES)
    return MAX_BATCH_MESSAGES


def body_limit(mem: MemoryLike) -> int | None:
    """The most bytes one request to `mem`'s server holds: a `Client`'s server's
    `max_body_bytes` (`Client.limits()`, one request per client); None for a store in
    this process (no request) or a server that does not say it (an older one: its 413)."""
    from tiermem.client import Client

    limits = mem.limits() if isinstance(mem, Client) else None
    return limits.max_body_bytes if limits is not None else None


def append_chunks(mem: MemoryLike, bodies: Sequence[dict[str, Any]], *,
                  fields: Sequence[str] | None = None) -> list[list[dict[str, Any]]]:
    """`bodies` in order, in as few consecutive chunks as one append of `mem` takes each:
    at most `batch_limit(mem)` messages, and over a `Client` whose server says its
    `max_body_bytes` (`Client.limits()`) a request body within them
    (`tiermem.client.batch_request_bytes`), where a server without /v1/limits leaves the
    bytes to its own refusal (413). A message whose request alone passes them as this
    process sends it (`tiermem.client.sent_batch_bytes`) is refused here, before any
    chunk is sent (`RequestTooLarge`, naming it as `fields` does, one per body: the
    caller's numbering; by default `messages[i]`); one past them only by the bound that
    never falls short goes alone. A batch within what every server takes (the library's
    `MAX_BATCH_MESSAGES`, a request within the least `max_body_bytes` a server is
    configured with) is one chunk without asking a `Client`'s server its limits."""
    from tiermem.client import (
        BATCH_ENVELOPE_BYTES,
        BATCH_SEPARATOR_BYTES,
        Client,
        request_bytes,
        sent_batch_bytes,
    )

    names = list(fields) if fields is not None else [f"messages[{i}]" for i in range(len(bodies))]
    for body, name in zip(bodies, names, strict=True):
        # an integer past the one limit, named as an append names it: sizing a batch encodes
        # each body, and json.dumps raised a bare ValueError past Python's own digit limit
        check_int_digits(body, name)
    if isinstance(mem, Client) and _within_every_server(mem, bodies, names):
        return [list(bodies)] if bodies else []
    count = batch_limit(mem)
    max_bytes = body_limit(mem)
    chunks: list[list[dict[str, Any]]] = []
    chunk: list[dict[str, Any]] = []
    size = BATCH_ENVELOPE_BYTES
    for body, name in zip(bodies, names, strict=True):
        grown = _sized(mem, body, name, request_bytes) + BATCH_SEPARATOR_BYTES if max_bytes is not None else 0
        if max_bytes is not None and BATCH_ENVELOPE_BYTES + grown > max_bytes and \
                (alone := _sized(mem, [body], name, sent_batch_bytes)) > max_bytes:
            raise RequestTooLarge(name, alone, max_bytes)
        if chunk and (len(chunk) == count or (max_bytes is not None and size + grown > max_bytes)):
            chunks.append(chunk)
            chunk, size = [], BATCH_ENVELOPE_BYTES
        chunk.append(body)
        size += grown
    if chunk:
        chunks.append(chunk)
    return chunks


def _within_every_server(mem: MemoryLike, bodies: Sequence[dict[str, Any]], names: Sequence[str]) -> bool:
    """Whether one append batch of `bodies` is within what any server takes."""
    from tiermem.client import BATCH_ENVELOPE_BYTES, BATCH_SEPARATOR_BYTES, request_bytes
    from tiermem.config import MIN_BODY_BYTES
    from tiermem.memory import MAX_BATCH_MESSAGES

    if len(bodies) > MAX_BATCH_MESSAGES:
        return False
    size = BATCH_ENVELOPE_BYTES
    for body, name in zip(bodies, names, strict=False):  # stops within the first KiB or so: a
        size += _sized(mem, body, name, request_bytes) + BATCH_SEPARATOR_BYTES  # long batch is not measured twice
        if size > MIN_BODY_BYTES:
            return False
    return True


_S = TypeVar("_S")


def _sized(mem: MemoryLike, value: _S, name: str, measure: Callable[[_S], int]) -> int:
    """`measure(value)`, a size of `bodies`' message `name` (`value`: it, or a batch of it
    alone) as sent; where it cannot be encoded (NaN or an infinity, an object JSON has no
    form for, a lone surrogate, nesting past the interpreter's recursion limit: the
    sizing's json.dumps and httpx raised a bare ValueError, TypeError or
    UnicodeEncodeError), the refusal its append would give, before any chunk is sent."""
    try:
        return measure(value)
    except (TypeError, ValueError, RecursionError):
        body: dict[str, Any] = value[0] if isinstance(value, list) else value  # type: ignore[assignment]
        raise _refusal(mem, body, name) from None


def _refusal(mem: MemoryLike, body: dict[str, Any], name: str) -> ValidationError:
    """What an append of `mem` (only a `Client`'s batches are sized) raises for `body`, the
    message `name` of its batch: the check a `Client` makes before sending
    (`tiermem.client.check_wire`, `Memory`'s own, within the server's limits once read),
    named as `Memory` names a batch's message (`messages[2].output[0].score`), its class
    kept (a `LimitExceeded` carries the value and the limit); a value JSON cannot carry
    found by its place (`unencodable`) should that check pass it."""
    from tiermem.client import Client, check_wire

    try:
        if isinstance(mem, Client):
            check_wire(mem, body)
        exc = unencodable(body)
    except ValidationError as refused:
        exc = refused
    return exc.renamed(f"{name}.{exc.field}")


_T = TypeVar("_T")


class Mend(Protocol):
    """How an adapter writes one batch: `write(bodies)`, or with bodies it mends and writes
    again on a refusal it knows how to mend (LangChain's artifacts: `langchain._mended`)."""

    def __call__(self, bodies: list[dict[str, Any]], write: Callable[[list[dict[str, Any]]], _T]) -> _T: ...


def as_is(bodies: list[dict[str, Any]], write: Callable[[list[dict[str, Any]]], _T]) -> _T:
    """`write(bodies)`, nothing mended (the `Mend` of an adapter whose items are stored as given)."""
    return write(bodies)


def append_chunked(mem: MemoryLike, conversation_id: str, chunks: list[list[dict[str, Any]]], *,
                   mend: Mend = as_is, call: str = "add_messages") -> list[int]:
    """Append `chunks` (`append_chunks`'s) in order, each an ordinary append readers may
    see; returns their positions. Each chunk after the first is conditional on the
    incarnation the first went to and the position the previous one left
    (`conditional_appends`): another writer's append between two chunks refuses the next
    (nothing of it written), which is sent again after that append (each body once, in
    order; the other writer's rows between two chunks, as between two calls); an erasure
    between two chunks stops it (`HistoryErased`, naming `call`, the adapter's method)
    rather than begin the conversation again with only their tail. A store that takes no
    condition (an older server) gets the chunks as they are. Every message of every chunk
    is checked (and mended) as its append checks it before the first chunk is written
    (`checked_chunks`): a refusal leaves nothing written and names the message by its
    index in the whole add."""
    chunks = checked_chunks(mem, chunks, mend=mend)
    if not conditional_appends(mem):
        return [p for chunk in chunks for p in mend(chunk, functools.partial(mem.append_many, conversation_id))]
    first = mend(chunks[0], functools.partial(mem.append_outcome, conversation_id))
    positions = list(first.positions)
    for chunk in chunks[1:]:
        at = positions[-1] + 1
        while True:
            try:
                # no bound on these rounds: each is another writer's append landing, never this one's
                got = mend(chunk, functools.partial(mem.append_outcome, conversation_id, expect_position=at,
                                                    expect_incarnation=first.incarnation))
            except PositionMismatch as exc:
                if exc.found is None:
                    raise HistoryErased(conversation_id, at, len(positions), call=call) from None
                at = exc.found
                continue
            positions += got.positions
            break
    return positions


def check_message(mem: MemoryLike, body: dict[str, Any]) -> None:
    """Refuse `body` as an append of `mem` refuses it, writing and sending nothing: a
    store in this process by `parse_message` within its config's limits (what its append
    parses each message with), a `Client` by `tiermem.client.check_wire` (the same, within
    its server's limits once read); `ValidationError` naming the field (no batch index).
    Another MemoryLike's append is its own: nothing checked here."""
    from tiermem.client import Client, check_wire
    from tiermem.memory import Memory, NamespacedMemory

    if isinstance(mem, Client):
        # the server's integer limit too (an older server's is 40 digits): only an add in
        # chunks is checked here, whose later chunk the server would refuse after the first
        check_wire(mem, body, server_ints=True)
    elif isinstance(mem, Memory | NamespacedMemory):
        parse_message(body, max_content_bytes=mem.config.max_content_bytes,
                      max_metadata_bytes=mem.config.max_metadata_bytes)


def checked_chunks(mem: MemoryLike, chunks: list[list[dict[str, Any]]], *, mend: Mend = as_is,
                   fields: Sequence[str] | None = None) -> list[list[dict[str, Any]]]:
    """`chunks` (`append_chunks`'s, of one add), each message checked as its append will
    check it (`check_message`, through `mend`: a LangChain artifact the store's limit
    refuses is left out here, as its append would) before any chunk is written, so that a
    message the store refuses in a later chunk leaves nothing written (it was found once
    the chunks before it were, and named by its index in its chunk). The refusal names
    the message as `fields` does (one per message of the whole add, `append_chunks`'s;
    by default `messages[i]`, its index among all the chunks' messages), its class kept.
    Returns the chunks as mended. One chunk is left to its own append (all or nothing,
    naming `messages[i]`): no message is parsed twice where chunks are not needed; where
    they are, each is parsed once more."""
    if len(chunks) < 2:
        return chunks
    names = list(fields) if fields is not None else [f"messages[{i}]" for i in range(sum(map(len, chunks)))]
    checked: list[list[dict[str, Any]]] = []
    offset = 0
    for chunk in chunks:
        try:
            checked.append(mend(chunk, functools.partial(_checked, mem)))
        except ValidationError as exc:
            raise shifted(exc, names, offset) from None
        offset += len(chunk)
    return checked


def _checked(mem: MemoryLike, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`bodies`, once each passes `check_message`; else its refusal, named
    `messages[i].<field>` as an append names a batch's message (a `Mend` reads the index)."""
    for i, body in enumerate(bodies):
        try:
            check_message(mem, body)
        except ValidationError as exc:
            raise exc.renamed(f"messages[{i}].{exc.field}") from None
    return bodies


_BATCH_INDEX = re.compile(r"messages\[(\d+)\]")


def shifted(exc: ValidationError, names: Sequence[str], offset: int) -> ValidationError:
    """`exc` of a chunk whose first message is the `offset`-th of the whole add: its
    `messages[i]` named `names[offset + i]` (the caller's name of that message)."""
    return exc.renamed(_BATCH_INDEX.sub(lambda m: names[int(m[1]) + offset], exc.field, count=1))


def conditional_appends(mem: MemoryLike) -> bool:
    """Whether `mem` appends conditionally (`append_outcome(expect_position=)`): a store in
    this process does; a `Client` where its server says so (`Client.limits()`, one request
    per client; a server older than them does not); another MemoryLike does not."""
    from tiermem.client import Client
    from tiermem.memory import Memory, NamespacedMemory

    if isinstance(mem, Memory | NamespacedMemory):
        return True
    if isinstance(mem, Client):
        limits = mem.limits()
        return limits is not None and limits.conditional_appends
    return False


def conversation_lock(mem: MemoryLike, conversation_id: str) -> threading.Lock:
    """One lock per conversation of one Memory, whichever view or adapter instance asks."""
    base, ns = _base(mem)
    with _locks_guard:
        per = _locks.setdefault(base, {})
        return per.setdefault((ns, conversation_id), threading.Lock())


def in_context_namespace(mem: MemoryLike, ctx: Context) -> MemoryLike:
    """`mem` as it reads back the rows of `ctx`'s conversation: in the namespace the context
    was planned in (`Context.namespace`). A root `Memory` reads through a view of it (its
    own default is "default", where the same conversation id can be another tenant's); a
    view of another namespace is refused, naming `memory`. A context of unknown namespace
    (None), or a Client (its server confines it to its token's namespace): `mem` as given."""
    from tiermem.memory import Memory, NamespacedMemory

    ns = ctx.namespace
    if ns is None:
        return mem
    if isinstance(mem, NamespacedMemory):
        if mem.namespace != ns:
            raise ValidationError("memory", f"is a view of namespace {mem.namespace!r}, but the context was "
                                  f"planned in namespace {ns!r}: pass the Memory it came from or a view of {ns!r}")
        return mem
    if isinstance(mem, Memory):
        return mem.namespaced(ns)
    return mem


def log_pages(mem: MemoryLike, conversation_id: str, after: int | None = None) -> list[StoredMessage]:
    """The log's rows after position `after` (None: all), read a page at a time
    ([] for a conversation that does not exist, or no longer does)."""
    rows: list[StoredMessage] = []
    try:
        while True:
            page, after = mem.history_page(conversation_id, after=after, limit=HISTORY_PAGE)
            rows.extend(page)
            if after is None:
                return rows
    except ConversationNotFound:
        return []


def visible(mem: MemoryLike, conversation_id: str) -> list[StoredMessage]:
    """The session's items in log order, from the whole log (folds do not cut it)."""
    rows = log_pages(mem, conversation_id)
    hidden, cleared = hidden_positions([(m.position, m.body) for m in rows])
    return [m for m in rows if m.position > cleared and m.position not in hidden]


def items_of(stored: list[StoredMessage], *, verbatim: bool = True) -> list[tuple[StoredMessage, list[dict[str, Any]]]]:
    """Each row with the Responses items it converts to (`tiers.formats.to_responses_rows`):
    Responses items as stored (explicit nulls kept, as the SDK's own sessions return
    them), chat messages converted (an assistant turn with text and calls is several)."""
    return list(zip(stored, to_responses_rows([m.body for m in stored], verbatim=verbatim), strict=True))


def _lost(mem: MemoryLike, conversation_id: str, target: int, mine: int) -> bool:
    """Whether a row between `target` and the retraction at `mine` hid `target` first:
    an earlier retraction of it (another process's pop) or a clear."""
    between = [m for m in log_pages(mem, conversation_id, after=target) if m.position < mine]
    for m in between:
        t = m.body.get("type")
        if t == CLEAR_TYPE or (t == RETRACT_TYPE and m.body.get("position") == target):
            return True
    return False


def put_back_metadata(row: StoredMessage, item: dict[str, Any], *, first: bool) -> dict[str, Any]:
    """The metadata of `item`, one of the items a pop of `row` puts back (`retract_latest`):
    the row's, and `POPPED_FROM_KEY`. The items put back are a prefix of the row's message
    (the popped one is its last), which readers read as that message again (the first item
    opening it), so:
    - the keys that stand for the message once go on the first item only: its LangChain
      id (on two items LangChain reads two messages with one id, which LangGraph merges),
      its Anthropic thinking (restored on every item, it went back twice in one turn) and
      reply fields;
    - the Anthropic extras of the item's own blocks (a call's `caller` and `toolset_name`,
      the text's citations) go on it, indexed among its own blocks
      (`tiermem.adapters.anthropic.item_extras`): the row's index the whole message's
      blocks, and on an item would land on another block or none;
    - the Anthropic kept blocks (a server tool's call and its result, `anthropic_blocks`)
      go on the text item, whose text holds their words, indexed among the blocks it is
      cut into (`tiermem.adapters.anthropic.item_blocks`): with the row's indexes the
      text item sent its first kept block in place of all its text and lost the rest
      (the server call without its result is left out), and a call item carried them;
    - the keys that hold or index the whole message's content otherwise are left out: its
      LangChain content (it holds the popped call's block too, which would come back with
      the first item), its LangChain invalid calls (they name the message's last calls)
      and the Anthropic block order (an item is one text or one call);
    - every other key (the caller's) goes on every item."""
    from tiermem.adapters.anthropic import (
        BLOCKS_KEY,
        EXTRA_KEY,
        ORDER_KEY,
        REPLY_KEY,
        THINKING_KEY,
        item_blocks,
        item_extras,
    )

    once = {LANGCHAIN_ID_KEY, THINKING_KEY, REPLY_KEY}
    left_out = {LANGCHAIN_CONTENT_KEY, LANGCHAIN_INVALID_CALLS_KEY, EXTRA_KEY, ORDER_KEY, BLOCKS_KEY}
    metadata = row.metadata or {}
    kept = {k: v for k, v in metadata.items() if k not in left_out and (first or k not in once)}
    thinking = first and THINKING_KEY in kept
    extras = item_extras(row.body, metadata, item, thinking=thinking)
    blocks = item_blocks(row.body, metadata, item, thinking=thinking)
    return {**kept, **({EXTRA_KEY: extras} if extras else {}), **({BLOCKS_KEY: blocks} if blocks else {}),
            POPPED_FROM_KEY: row.position}


def retract_latest(mem: MemoryLike, conversation_id: str) -> dict[str, Any] | None:
    """Pop the session's latest Responses item; returns it (None: the session is empty).

    The row holding the item is hidden by a retraction row. When that row converts to
    several items (a chat assistant turn with text and tool calls), the items before the
    popped one are appended again after the retraction, in the same batch, so the view
    loses exactly one item; the re-appended rows carry `POPPED_FROM_KEY` and the row's
    metadata (`put_back_metadata`).

    Serialised per conversation within the process (`conversation_lock`). Across
    processes the log decides: a pop whose retraction follows another hiding the same
    row (or a clear) lost the race, leaves its redundant row (it hides nothing more) and
    pops again, so two pops never return the same item.
    """
    with conversation_lock(mem, conversation_id):
        while True:
            rows = [(m, items) for m, items in items_of(visible(mem, conversation_id)) if items]
            if not rows:
                return None
            target, items = rows[-1]
            batch: list[dict[str, Any]] = [{"type": RETRACT_TYPE, "position": target.position}]
            batch += [{**item, "metadata": put_back_metadata(target, item, first=i == 0)}
                      for i, item in enumerate(items[:-1])]
            positions = mem.append_many(conversation_id, batch)
            if not _lost(mem, conversation_id, target.position, positions[0]):
                return items[-1]
            if len(positions) > 1:  # the winner put these items back already: hide this copy
                mem.append_many(conversation_id, [{"type": RETRACT_TYPE, "position": p} for p in positions[1:]])


def clear(mem: MemoryLike, conversation_id: str) -> None:
    """A read boundary: nothing before it is in the session's view or the recent tail."""
    if visible(mem, conversation_id):
        mem.append(conversation_id, {"type": CLEAR_TYPE})


def latest_user_text(bodies: list[dict[str, Any]]) -> str | None:
    """The text of the newest user message, the query a context is planned for."""
    for b in reversed(bodies):
        if b.get("role") == "user":
            return message_text(b)
    return None
