"""A LangChain agent's message state kept in one tiermem conversation: what the LangGraph
hooks (`tiermem.adapters.langgraph`) and the `create_agent` middleware
(`tiermem.adapters.langchain_agent`) share.

`sync(messages)` appends the messages tiermem has not stored yet, matched by LangChain
message id (kept in each row's metadata, `tiermem.adapters.langchain.METADATA_ID_KEY`);
a message without an id is always appended. `model_input(messages)` syncs, then returns
tiermem's planned context for the latest human message under the budget: what the model
is sent in place of the whole state, which the caller leaves unchanged, each tool call id
in it once (`tiermem.adapters.langchain.unique_call_ids`: a repeat, such as a server's
`call_0` every round, renamed with its tool messages, in every `context_format`; the rows
and the state keep the ids they have), and with `cache_marks` Anthropic's cache marks at
the plan's breakpoints (`tiermem.adapters.langchain.context_input`), with
`system_messages="in_turn"` its memory blocks between the turns as user-turn text
(`tiermem.adapters.langchain.in_turn`: ChatAnthropic's form; None, the default: the
form `model_input` is given for the call, the model's, else "as_is"). `timezone` (an
IANA name, checked when the instance is made) is the user's zone for every context it
plans: the calendar of the days turns tell of and the clock of the dates shown (None:
the memory's, or the namespaced view's, zone; a `tiermem.client.Client`'s: the server's).
`memory` may be a `Client` of a shared `tiermem serve`: the same rows are stored and the
same contexts planned as over the server's Memory. `namespace_recall=False` plans every
context from this conversation alone, never the namespace's other conversations (what the
LangGraph adapters do for a conversation that is a run's thread id: `_threads`).

A message stored already whose content the state changed under the same id (LangGraph's
`add_messages` replaces a message of that id in place: `update_state`, time travel) is
an edit. The log is append-only, so an edit is one batch, one transaction on either
engine (`Memory.append_many`): a retraction row for the edited row and for every visible
row after it, then the new version and copies of those later rows (same body, metadata,
session and `created_at`; the new version keeps the edited row's `created_at` and
session), then the state's new messages. The view keeps its order (`[H1, A1', H2, A2]`)
and the log keeps the old versions. The edit's own rows (the retractions and copies) must
fit one append (`batch_limit`: the library's `MAX_BATCH_MESSAGES`, a server's
`max_batch_messages`; over a `Client`, a request within its server's `max_body_bytes`, as
this process sends it): an edit reaching back over more visible messages than half of
it, or whose request is larger, is refused before anything is written (`EditTooLong`,
naming the limit and how far an edit may reach). The state's new messages go in the same
batch where one append takes it all; else they follow the edit's batch in chunks, as new
messages alone do (below), the first conditional on where the edit left the log. The
edit's rows are not written in
chunks: the log is append-only and every committed chunk is what readers see, so a
reader between chunks would find the later rows retracted and not yet copied back (or
copies beside the rows they replace, the other way round), and a chunk refused by another
writer's append would leave it so for good (a hidden row is never written again).
New messages (alone, or after an edit's batch) too many for one append (`append_chunks`: `batch_limit`
messages, and over a `Client` its server's `max_body_bytes`), such as a first sync of a
long imported state, are appended in chunks, in order, since appends may be: each chunk
is an ordinary append readers may see, conditional on the position the previous one left
(the first: the log as read), so another writer's append between two chunks refuses the
next, nothing of it written, and the sync reads the log and appends what is not stored
yet (a message without an id that a chunk of this sync stored is not written again), at
most `MAX_EDIT_ROUNDS` refusals in a sync (then `EditConflict`, the chunks before it
stored). A sync ended between chunks (the process killed, a store error) leaves the
chunks before stored: the next sync reads them from the log and appends the rest (each
message once; one without an id is appended again, as always). A store that takes no
condition gets the chunks as they are, checked after writing as below. The content compared is the stored body (text,
parts, tool calls and their arguments, a tool result) and the LangChain content kept
beside it (`METADATA_CONTENT_KEY`) where the row has one, and a tool message's status and
artifact (kept in metadata; an artifact over the store's metadata limit is left out of
both sides): a message the same there is no edit, and writes nothing. Nor is a message the state holds as it did at this
instance's last sync: the state did not change it, and another worker's edit of it since
stands. "As it did" is each field the stored form is made of (and the id) equal to a
snapshot taken then, whatever object holds it: a field set anew or a list or dict in it
changed in place (LangChain messages are mutable) is a change, a number equal in Python
but of another type (1, 1.0, True) too, and a checkpoint's copy of an unchanged message
is none. A field's value whose copy would hold more than `MAX_SNAPSHOT_COPY_BYTES` (a
large artifact: numbers, bytes) is kept as a digest of its pickle, not copied, and each
comparison pickles the message's value again: a change of it in place is a change still,
and the instance holds a digest for it, not a copy (~114 bytes a number). A sync costs
what changed: a state that begins with the one the last sync ended with, each message
as it was (one comparison in C of their fields with the snapshots, no conversion or
hash of them), has only its further messages looked at (the common
case: an agent's next model call, the same state plus new messages); any other state
(a message changed, removed or moved) is looked at whole, each message compared with its
own snapshot. `model_input` finds the latest human message from the state's end.
A context that showed a retracted row ends its prompt-cache epoch (`planner.build`: the
items it showed were retracted or edited).
A message removed from the state (`RemoveMessage`) is not retracted: removing old
messages is how a graph keeps its state short, and the past is what tiermem supplies.
For that reason the summary langchain's `SummarizationMiddleware` puts in their place (a
human message marked `lc_source: summarization`, `is_summary`) is not stored, nor taken
for the latest human message: tiermem holds the messages it summarised.
A row hidden already (retracted, or before a clear) is not written or edited again.

"Already stored" is read from the log, not remembered: each sync first reads the rows
appended since its last read (by this instance, another one, or another process), so
several instances on one conversation (workers sharing a checkpointer) store each message
once. The read starts at the last row read before: when that row is gone or another, the
conversation was erased since (and maybe begun again, longer or not), and the whole log
is read anew; the ids the log held before it are noted as erased (`_erased`), and
a state that still holds those messages (a checkpointer keeps its state: erase it
there too, `delete_thread`) does not store them again, so an erasure is not undone at
the thread's next run; messages new since are stored. An instance made after the
erasure (another process, or one whose sync the adapter's `max_threads` let go) never
read those ids and stores the checkpointer's state as new. Syncs of one conversation are serialised in a process (`_common.conversation_lock`);
two processes that both append a message in the same instant leave it twice in the log,
and the later copy is hidden at once by a retraction row (the first by position wins),
so views and contexts show it once while `history()` keeps both. An edit's batch is
conditional on the log it was made from (`append_outcome(expect_position=)`, a `Client`'s
too: the HTTP appends take the condition): another writer's append since (its own edit,
a pop, a new message) refuses it, nothing is written, and the sync reads the log and
plans again from what is visible then, at most `MAX_EDIT_ROUNDS` times (then
`EditConflict`): the view keeps the state's order and every worker's edit of another
message. Only a store that takes no condition (a `Client` of a server older than them,
which does not say `conditional_appends`; `_common.conditional_appends`) appends the
batch as it is: where another writer hid a row its batch retracts first, the copy of
that row is retracted again and the other's stands, so nothing is lost, but the rows
after it come after the other's. `sync` counts the state's messages it wrote that stay
visible.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from tiermem.adapters._common import (
    DEFAULT_BUDGET_TOKENS,
    MemoryLike,
    append_chunks,
    batch_limit,
    body_limit,
    check_memory,
    conditional_appends,
    conversation_lock,
    latest_user_text,
    log_pages,
    metadata_limit,
    shifted,
    visible,
)
from tiermem.adapters.anthropic import opening_tokens
from tiermem.adapters.langchain import (
    METADATA_ARTIFACT_KEY,
    METADATA_CONTENT_KEY,
    METADATA_ID_KEY,
    METADATA_INVALID_CALLS_KEY,
    METADATA_STATUS_KEY,
    append_bodies,
    check_cache_marks,
    check_system_messages,
    checked,
    context_input,
    to_openai,
)
from tiermem.tiers.errors import EditConflict, EditTooLong, PositionMismatch, ValidationError
from tiermem.tiers.formats import CLEAR_TYPE, RETRACT_TYPE
from tiermem.tiers.models import MAX_BUDGET_TOKENS, StoredMessage, check_int
from tiermem.tiers.zones import optional_timezone

# the `additional_kwargs` item langchain's SummarizationMiddleware marks its summary with
SUMMARY_MARK = ("lc_source", "summarization")
DIGEST_BYTES = 16  # of a stored body's canonical JSON: a collision would hide one edit
# the fields of a LangChain message its stored form (`to_openai`) is made of, its content aside
_BODY_FIELDS = ("type", "tool_calls", "invalid_tool_calls", "additional_kwargs", "name",
                "tool_call_id", "status", "artifact")
# the fields a `_Snapshot` copies: the stored form's and the id (matched on); the others
# (`response_metadata`, `usage_metadata`) it holds as they are, the same object, which
# a comparison passes in C without looking into it (the row keeps them in its metadata
# as first stored, `METADATA_FIELD_KEYS`: a change of them alone is no edit)
_COMPARED = frozenset(("content", "id", *_BODY_FIELDS))
# nesting a snapshot copies; a value deeper is kept by its repr (`_Exact`), so a state's
# message never exhausts the interpreter's recursion limit here
MAX_SNAPSHOT_DEPTH = 64
# bytes (`sys.getsizeof` of its containers and `_Exact`s; strings are the message's own,
# not copied) a snapshot's copy of one field may hold: a larger value (an artifact of
# 200,000 floats held 22.8 MB, ~114 bytes a number, for the instance's life; a bytes
# artifact its whole repr) is kept as a digest of its pickle (`_Large`, `DIGEST_BYTES`),
# which a comparison pickles the message's value again for (~6 ms for those floats)
MAX_SNAPSHOT_COPY_BYTES = 64 * 1024
# rounds of one sync whose edit (or chunk of new messages) found the log moved by another
# writer (nothing of it written, read again) before it gives up (`EditConflict`): each such
# round is another writer's append landing in the few milliseconds between a read and a write
MAX_EDIT_ROUNDS = 8
# the metadata keys `to_openai` derives from a message's fields (a tool message's, an AI
# message's invalid calls), compared
# as its body is: not the id (matched on), the kept content (compared as its body's
# stand-in), the message's own metadata (`additional_kwargs`, `response_metadata`,
# `usage_metadata`: a reply's, kept as first stored, never an edit alone, which would
# rewrite every row after it) or what tiermem adds (a pop's `POPPED_FROM_KEY`)
_FIELD_KEYS = (METADATA_STATUS_KEY, METADATA_ARTIFACT_KEY, METADATA_INVALID_CALLS_KEY)


def is_summary(message: BaseMessage) -> bool:
    """Whether `message` is the summary langchain's `SummarizationMiddleware` puts in the
    state in place of the messages it summarised (a human message it marks with
    `SUMMARY_MARK`): not a turn of the user's, and tiermem holds those messages."""
    key, value = SUMMARY_MARK
    return isinstance(message, HumanMessage) and message.additional_kwargs.get(key) == value


def _same_row(a: StoredMessage, b: StoredMessage) -> bool:
    """Whether two reads of a position are one row: its incarnation's rows never change,
    and another incarnation's row there differs in its time of writing at least (an
    import of an export of this log is the one exception, and holds the same rows)."""
    return (a.position, a.created_at, a.session_id, a.body, a.metadata) == \
        (b.position, b.created_at, b.session_id, b.body, b.metadata)


def _digest(value: object) -> bytes:
    """A JSON value's digest, the same for equal values however their keys are ordered
    (a row read back, and the body the state's message converts to)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=DIGEST_BYTES).digest()


class _Exact:
    """A value a snapshot keeps by its type and repr: a number (1, 1.0 and True are equal
    in Python, and stored as 1, 1.0 and true), or a value that is no JSON (an artifact's
    object, compared by its repr as the state's hash compared it before)."""

    __slots__ = ("kind", "text")

    def __init__(self, value: object) -> None:
        self.kind = type(value)
        self.text = repr(value)

    def __eq__(self, other: object) -> bool:
        return type(other) is self.kind and repr(other) == self.text

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:  # what `_digest` writes of it: the type kept
        return f"{self.kind.__qualname__}:{self.text}"


class _TooLarge(Exception):
    """A field's copy grew past `MAX_SNAPSHOT_COPY_BYTES` (`_frozen`): kept as a `_Large`."""


def _pickled(value: object) -> bytes:
    """The digest of `value`'s pickle without its memo (`Pickler.fast`), so that how a value
    shares its objects (a checkpoint's copy holds its own strings) does not change it; the
    pickle keeps what a snapshot must (1, 1.0 and True differ, every item of a list and
    byte of a bytes). Raises for a value no pickle holds (cyclic, nested too deep, an
    object that refuses it)."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.fast = True
    pickler.dump(value)
    return hashlib.blake2b(buffer.getvalue(), digest_size=DIGEST_BYTES).digest()


class _Large:
    """A field's value a snapshot keeps by the digest of its pickle (`_pickled`): one whose
    copy would hold more than `MAX_SNAPSHOT_COPY_BYTES`. Equal to the value while its
    pickle is the same, so an in-place change of it is a change (a digest collision aside);
    a value that no longer pickles, or pickles otherwise while equal (a set built in
    another order), is not equal: the message is looked at then."""

    __slots__ = ("value",)

    def __init__(self, digest: bytes) -> None:
        self.value = digest

    def __eq__(self, other: object) -> bool:
        return _pickled(other) == self.value

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:  # what `_digest` writes of it (`_Digest`)
        return f"_Large:{self.value.hex()}"


def _kept(value: object) -> object:
    """What a snapshot keeps of a field's value: a copy (`_frozen`) equal (`==`) to the
    value exactly while the value's stored form is the same, or for a value whose copy
    would hold more than `MAX_SNAPSHOT_COPY_BYTES`, its digest (`_Large`)."""
    if type(value) is str or value is None:
        return value
    try:
        return _frozen(value, 0, [MAX_SNAPSHOT_COPY_BYTES])
    except _TooLarge:
        pass
    try:
        return _Large(_pickled(value))
    except Exception:  # any object's pickling: its copy, however large (as before the limit)
        return _frozen(value, 0, [sys.maxsize])


def _frozen(value: object, depth: int, left: list[int]) -> object:
    """A copy of a field's value that a later in-place change of the value does not
    reach, equal (`==`) to the value exactly while the value's stored form is the same:
    strings and None as they are (immutable), dicts with string keys, lists and tuples
    copied, anything else an `_Exact`. `left[0]`: the bytes the copy may still hold
    (`MAX_SNAPSHOT_COPY_BYTES`); past it, `_TooLarge` is raised."""
    kind = type(value)
    if kind is str or value is None:
        return value
    copy: object
    if depth < MAX_SNAPSHOT_DEPTH and kind is dict and all(type(k) is str for k in value):  # type: ignore[attr-defined]
        copy = {k: _frozen(v, depth + 1, left) for k, v in value.items()}  # type: ignore[attr-defined]
        size = sys.getsizeof(copy)
    elif depth < MAX_SNAPSHOT_DEPTH and (kind is list or kind is tuple):
        copy = kind(_frozen(v, depth + 1, left) for v in value)  # type: ignore[attr-defined]
        size = sys.getsizeof(copy)
    else:
        copy = exact = _Exact(value)
        size = sys.getsizeof(exact) + sys.getsizeof(exact.text)
    left[0] -= size
    if left[0] < 0:
        raise _TooLarge
    return copy


# a message's fields as a sync saw them (`_snapshot`)
_Snapshot = dict[str, object]


def _snapshot(message: BaseMessage) -> _Snapshot:
    """The message's fields as they are now, for a later sync to tell whether the state
    changed the message since: `vars(message) == snapshot` (a comparison in C, no
    conversion or hash of the message) holds while every field its stored form is made
    of holds the same value, however the message was changed (a field set anew, or a
    list or dict in it changed in place: LangChain messages are mutable) and whether the
    state holds this object or another one (a checkpoint's copy)."""
    return {k: _kept(v) if k in _COMPARED else v for k, v in vars(message).items()}


class _Digest:
    """A snapshot kept as a digest of its compared fields (`DIGEST_BYTES`), for a message
    that left the state: a message removed from it (`RemoveMessage`) is not held in full
    for as long as the instance lives; one that comes back is compared with it."""

    __slots__ = ("value",)

    def __init__(self, snapshot: _Snapshot) -> None:
        self.value = _digest({k: v for k, v in snapshot.items() if k in _COMPARED})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, dict) and \
            _digest({k: _kept(v) for k, v in other.items() if k in _COMPARED}) == self.value

    __hash__ = None  # type: ignore[assignment]


def _same(fields: dict[str, Any] | list[dict[str, Any]], snapshot: _Snapshot | _Digest | list[_Snapshot]) -> bool:
    """Whether message fields (`vars`) equal their snapshot, or a list of them a list of
    snapshots: False where comparing raised (a field the stored form leaves out holding
    another object whose `==` raises, such as an array's): the message is looked at then."""
    try:
        return bool(fields == snapshot)
    except Exception:  # any object's __eq__: not the same, so the message is converted and compared
        return False


@dataclass(frozen=True)
class _Version:
    """The content of a visible row holding a LangChain id, as an edit compares it."""

    position: int
    body: bytes  # the stored body's digest
    content: bytes | None  # the kept LangChain content's (`METADATA_CONTENT_KEY`), None without one
    fields: bytes  # the digest of the message fields kept in metadata (`_FIELD_KEYS`)
    artifact: bool  # whether the row kept an artifact

    @classmethod
    def of(cls, row: StoredMessage) -> _Version:
        meta = row.metadata or {}
        return cls(row.position, _digest(row.body),
                   _digest(meta[METADATA_CONTENT_KEY]) if METADATA_CONTENT_KEY in meta else None,
                   _digest({k: meta[k] for k in _FIELD_KEYS if k in meta}), METADATA_ARTIFACT_KEY in meta)

    def differs(self, message: BaseMessage, limit: Callable[[], int | None]) -> bool:
        """Whether `message` is an edit of this row: another body, another content where
        the row kept one (a row without one was stored without it: too big, or from an
        older server's refusal; its body is what is compared then), or another tool
        status or artifact. An artifact over the store's metadata limit (`limit`) is
        left out of the message's as it was of the row's; one the row lacks is compared
        only where that limit is known (an older server's refusal left it out)."""
        stored = to_openai([message], max_metadata_bytes=limit, non_finite="null", warn=False)[0]
        body = {k: v for k, v in stored.items() if k != "metadata"}
        if _digest(body) != self.body:
            return True
        if self.content is not None and _digest(message.content) != self.content:
            return True
        meta = stored.get("metadata") or {}
        fields = {k: meta[k] for k in _FIELD_KEYS if k in meta}
        if METADATA_ARTIFACT_KEY in fields and not self.artifact and limit() is None:
            del fields[METADATA_ARTIFACT_KEY]
        return _digest(fields) != self.fields


class ConversationSync:
    """One tiermem conversation as the store and the model input of a LangChain agent."""

    def __init__(self, memory: MemoryLike, conversation_id: str, *, budget: int = DEFAULT_BUDGET_TOKENS,
                 system: str | None = None, timezone: str | None = None, namespace_recall: bool = True,
                 cache_marks: int = 0, system_messages: str | None = None,
                 truncate_latest: bool = False) -> None:
        self.memory = check_memory(memory)
        # refused here, not after the turn is stored (the first context planned mid-run)
        budget = check_int(budget, "budget", 1, MAX_BUDGET_TOKENS, "tokens")
        if type(truncate_latest) is not bool:
            raise ValidationError("truncate_latest", f"must be True or False, got {truncate_latest!r}")
        # a latest message over the budget is cut to fit (`Memory.context`), not refused (`BudgetTooSmall`)
        self.truncate_latest = truncate_latest
        self.conversation_id = conversation_id
        self.budget = budget
        self.system = system
        self.namespace_recall = namespace_recall
        self.cache_marks = check_cache_marks(cache_marks)
        self.system_messages = check_system_messages(system_messages)
        # refused here, not at the first model call mid-run
        self.timezone = optional_timezone(timezone)
        # LangChain ids an erasure of the conversation covered (stored before it, as this
        # instance read the log): the checkpointer still holds those messages, and storing
        # them again would bring back what was erased (`_load_seen`); never stored again
        self._erased: set[str] = set()
        self._reset()

    def _reset(self) -> None:
        # LangChain id -> its visible rows in log order (one, but for a race's duplicate
        # until it is retracted); the latest is the version an edit replaces
        self._seen: dict[str, list[_Version]] = {}
        self._id_at: dict[int, str | None] = {}  # every visible row's id (None: none) by position
        self._stored: set[str] = set()  # every id the log holds, visible or hidden
        self._last: StoredMessage | None = None  # the last row read into _seen
        # LangChain id -> the state's message (`_snapshot`) when this instance's sync of
        # it last ended: the message as this worker's state last held it
        self._synced: dict[str, _Snapshot | _Digest] = {}
        # the state the last sync ended with, each message's snapshot in order: a state
        # that begins with it unchanged (`_unchanged`) is the common case, the state
        # before plus new messages at its end, and only those are looked at one by one
        self._state: list[_Snapshot] = []
        self._state_ids: set[str] = set()  # the ids in `_state`
        self._state_idless: list[int] = []  # the indexes of its messages without an id

    def _load_seen(self) -> set[int]:
        """Note the rows appended since the last read; returns the positions of the
        retractions among them that hid no visible row (another's hid it first).

        The read starts at the last row read before, which must come back the same: rows
        never change, so a different row there (or none) means the conversation was
        erased since, and maybe begun again, longer or not, by another instance or
        process; `_seen` then belongs to the gone incarnation and the log is read anew.
        (Only "nothing after the last position" was noticed: a conversation begun again
        longer left its rows at or below that position unread, and their messages were
        stored twice.)"""
        last = self._last
        rows = log_pages(self.memory, self.conversation_id, after=None if last is None else last.position - 1)
        if last is not None:
            if rows and _same_row(rows[0], last):
                rows = rows[1:]
            else:
                # the erasure covered every id the log held: a state that still holds those
                # messages (the checkpointer's) does not store them again, its new ones it does
                self._erased |= self._stored
                self._reset()
                rows = log_pages(self.memory, self.conversation_id)
                self._erased -= {str(i) for m in rows if (i := (m.metadata or {}).get(METADATA_ID_KEY))}
        redundant: set[int] = set()
        for m in rows:
            kind = m.body.get("type")
            if kind == RETRACT_TYPE:
                named = m.body.get("position")
                if not (isinstance(named, int) and named < m.position and named in self._id_at):
                    redundant.add(m.position)
                elif (lc_id := self._id_at.pop(named)) is not None:
                    kept = [v for v in self._seen[lc_id] if v.position != named]
                    if kept:
                        self._seen[lc_id] = kept
                    else:
                        del self._seen[lc_id]
            elif kind == CLEAR_TYPE:  # hides every row before it: none is edited again
                self._seen.clear()
                self._id_at.clear()
            else:
                lc_id = (m.metadata or {}).get(METADATA_ID_KEY)
                self._id_at[m.position] = str(lc_id) if lc_id else None
                if lc_id:
                    self._seen.setdefault(str(lc_id), []).append(_Version.of(m))
                    self._stored.add(str(lc_id))
            self._last = m
        return redundant

    def _append(self, chunk: list[dict[str, Any]], names: Sequence[str], offset: int,
                expect_position: int | None = None) -> list[int]:
        """`chunk` appended, its first message the `offset`-th of the sync's batch; a
        refusal names the message as `names` does (its index in the graph state), its class
        kept: a batch of one chunk is checked only by this append (`checked`), which names
        the message by its index in the batch (232828a named a chunked sync's only)."""
        try:
            return append_bodies(self.memory, self.conversation_id, chunk, expect_position=expect_position)
        except PositionMismatch:
            raise  # the log moved: planned again, no message of the state to name
        except ValidationError as exc:
            raise shifted(exc, names, offset) from None

    def sync(self, messages: Sequence[BaseMessage]) -> int:
        """Append the messages not stored yet (all of those without an id) and the edits
        of stored ones (each with the rows after it: the module's docstring); returns how
        many of `messages` were written and stay visible."""
        with conversation_lock(self.memory, self.conversation_id):
            written = 0
            sent: set[int] = set()  # indexes of `messages` a chunk of this call appended
            refused_chunk = False  # whether the last write refused was a chunk (else an edit)
            for _ in range(MAX_EDIT_ROUNDS):
                self._load_seen()
                new: list[BaseMessage] = []
                new_at: list[int] = []  # each new message's index in `messages`
                edited: dict[int, BaseMessage] = {}  # the replaced row's position -> its new version
                # the messages the last sync ended with, unchanged, are neither new nor
                # edited (their ids are stored: an erasure since reset `_state`); those
                # without an id are appended again, as at every sync
                start = len(self._state) if self._unchanged(messages) else 0
                taken = self._state_ids if start else set()  # ids of an earlier message of the state
                idless = list(self._state_idless) if start else []  # the state's messages without an id
                for i in idless:
                    if i not in sent:
                        new.append(messages[i])
                        new_at.append(i)
                keys: dict[str, _Snapshot] = {}  # the first of each id from `start` on
                snaps: list[_Snapshot] = []  # of each message from `start` on
                for i in range(start, len(messages)):
                    m, same = messages[i], False
                    if is_summary(m):  # never stored: the messages it stands for are
                        snaps.append(_snapshot(m))
                        continue
                    if not m.id:
                        snaps.append(_snapshot(m))
                        idless.append(i)
                    elif m.id in keys or m.id in taken:
                        snaps.append(_snapshot(m))
                        continue
                    else:
                        before = self._synced.get(m.id)
                        same = before is not None and _same(vars(m), before)
                        keys[m.id] = snap = before if isinstance(before, dict) and same else _snapshot(m)
                        snaps.append(snap)
                    if i in sent:  # stored as this state holds it (one without an id, too)
                        continue
                    if m.id:
                        versions = self._seen.get(m.id)
                        # a message this state holds as it did at the last sync is no edit of
                        # this worker's: another one's edit of it since stands
                        if versions and not same and versions[-1].differs(m, self._limit):
                            edited[versions[-1].position] = m
                        if versions or m.id in self._stored or m.id in self._erased:
                            continue
                    new.append(m)
                    new_at.append(i)
                if not new and not edited:
                    self._ended(messages, start, keys, snaps, idless)
                    return written
                batch, retracted, mine = self._batch(edited, new)
                fields = [f"messages[{i}]" for i in new_at]
                copied = 2 * retracted  # the edit's own rows open the batch: its retractions and copies
                if edited:
                    # refused before anything is written: chunks of it would each be seen by
                    # readers (the module's docstring)
                    self._check_edit(min(edited), batch[:copied], retracted)
                # one batch where one append takes it all, else the edit's own rows, then the
                # new messages in chunks (appends may be chunked: the module's docstring)
                # (the edit's rows are never named: they passed _check_edit together)
                names = [*(["messages"] * copied), *fields]
                chunks = append_chunks(self.memory, batch, fields=names)
                if edited and len(chunks) > 1:
                    chunks = [batch[:copied], *append_chunks(self.memory, batch[copied:], fields=fields)]
                # every message checked before the first chunk is written: one the store
                # refuses in a later chunk was found once the chunks before it were stored
                # (the sync half written), and named by its index in its chunk
                chunks = checked(self.memory, chunks, names)
                if conditional_appends(self.memory) and (edited or len(chunks) > 1):
                    at = 0 if self._last is None else self._last.position + 1
                    done = 0  # the batch index the next chunk begins at (`start` is the state's)
                    try:
                        for chunk in chunks:
                            # written only where the previous chunk (the first: this read) left
                            # the log: the rows an edit retracts are still visible and none came
                            # after them, and a message another writer stored since is not stored again
                            at = self._append(chunk, names, done, expect_position=at)[-1] + 1
                            end = done + len(chunk)
                            written += sum(1 for k in mine if done <= k < end)
                            sent.update(new_at[max(done - copied, 0):max(end - copied, 0)])
                            done = end
                    except PositionMismatch:
                        # an edit's own batch refused is nothing written; a later chunk, the ones before stand
                        refused_chunk = not (edited and done == 0)
                        continue  # plan (the rest) again from what the log holds now
                    self._ended(messages, start, keys, snaps, idless)
                    return written
                positions, done = [], 0
                for chunk in chunks:
                    positions += self._append(chunk, names, done)
                    done += len(chunk)
                # a batch that cannot be conditional (a Client of an older server): another
                # process may have hidden one of the rows it retracts first (its own edit, a
                # pop), and then that row's copy goes (theirs stands; the retractions that hid a row stand with their
                # copies); and a message another process stored between the read and the
                # append: the copy at the lower position stands
                redundant = self._load_seen()
                again = [positions[retracted + k] for k in range(retracted) if positions[k] in redundant]
                again += [p for p in positions[retracted:] if p not in again and self._earlier(p)]
                # as many retractions as the chunks' messages: each chunk of them hides its own
                for chunk in append_chunks(self.memory, [{"type": RETRACT_TYPE, "position": p} for p in again]):
                    self.memory.append_many(self.conversation_id, chunk)
                written += sum(1 for k in mine if positions[k] not in again)
                if not any(positions[k] in redundant for k in range(retracted)):
                    self._ended(messages, start, keys, snaps, idless)
                    return written
            raise EditConflict(self.conversation_id, MAX_EDIT_ROUNDS, chunk=refused_chunk)

    def _check_edit(self, position: int, batch: list[dict[str, Any]], retracted: int) -> None:
        """Refuse (`EditTooLong`) an edit's own rows `batch` (the opening of `_batch`'s:
        `retracted` retractions, then the copies) that one append does not take: past `batch_limit` messages, or over a
        `Client` a request past its server's `max_body_bytes` as this process sends it
        (conditional: `expect_position`; measured so only where the bound that never falls
        short, `batch_request_bytes`, passes it)."""
        # as _common imports it: only where a sync needs it
        from tiermem.client import (
            BATCH_ENVELOPE_BYTES,
            BATCH_SEPARATOR_BYTES,
            batch_request_bytes,
            request_bytes,
            sent_batch_bytes,
        )

        limit = batch_limit(self.memory)
        if len(batch) > limit:
            raise EditTooLong(self.conversation_id, position, retracted, len(batch), limit)
        max_bytes = body_limit(self.memory)
        if max_bytes is None or batch_request_bytes(batch) <= max_bytes:
            return
        assert self._last is not None  # an edited row was read
        size = sent_batch_bytes(batch, expect_position=self._last.position + 1)
        if size <= max_bytes:
            return
        # the latest rows' retractions and copies, as far back as they fit (the bound that
        # never falls short: an edit of that reach fits)
        used = BATCH_ENVELOPE_BYTES + sum(request_bytes(b) + BATCH_SEPARATOR_BYTES for b in batch[2 * retracted:])
        farthest = 0
        for k in reversed(range(retracted)):
            used += request_bytes(batch[k]) + request_bytes(batch[retracted + k]) + 2 * BATCH_SEPARATOR_BYTES
            if used > max_bytes:
                break
            farthest += 1
        farthest = min(farthest, max(0, (limit - (len(batch) - 2 * retracted)) // 2))
        raise EditTooLong(self.conversation_id, position, retracted, len(batch), max_bytes, size=size,
                          farthest=farthest)

    def _unchanged(self, messages: Sequence[BaseMessage]) -> bool:
        """Whether `messages` begins with the state the last sync ended with, each message
        as it was then (`_snapshot`): one comparison in C over those messages' fields."""
        n = len(self._state)
        return 0 < n <= len(messages) and _same(list(map(vars, messages[:n])), self._state)

    def _ended(self, messages: Sequence[BaseMessage], start: int, keys: dict[str, _Snapshot],
               snaps: list[_Snapshot], idless: list[int]) -> None:
        """Note the state a sync ended with: `_state` up to `start` unchanged (its ids'
        snapshots are in `_synced` already), then `snaps` (of the messages from `start`
        on, `keys` those of their ids)."""
        self._synced.update(keys)
        if start and len(self._state) != start:
            # the log was read anew during this sync (`_reset`, an erasure since): the
            # unchanged head is noted again, as the messages hold it now
            head = [_snapshot(m) for m in messages[:start]]
            firsts = {m.id: snap for m, snap in reversed(list(zip(messages, head, strict=False))) if m.id}
            self._synced.update(firsts)
            self._state, self._state_ids = head, set(firsts)
        if start:
            self._state.extend(snaps)
            self._state_ids.update(keys)
        else:
            for lc_id in self._state_ids.difference(keys):  # the messages the state no longer holds
                if isinstance(kept := self._synced.get(lc_id), dict):
                    self._synced[lc_id] = _Digest(kept)
            self._state, self._state_ids = snaps, set(keys)
        self._state_idless = idless

    def _limit(self) -> int | None:
        """The store's metadata byte limit (a `Client` asks its server once)."""
        return metadata_limit(self.memory)

    def _earlier(self, position: int) -> bool:
        """Whether the message at `position` is visible at an earlier position too."""
        lc_id = self._id_at.get(position)
        return lc_id is not None and self._seen[lc_id][0].position < position

    def _batch(self, edited: dict[int, BaseMessage], new: list[BaseMessage]
               ) -> tuple[list[dict[str, Any]], int, list[int]]:
        """The one batch that writes the edits and the new messages (a retraction of the
        first edited row and of every visible row after it, then the new versions in their
        places among copies of the rest, then the new messages), how many retractions open
        it, and the batch indexes of the state's messages in it (not the copies)."""
        # only an edit replays rows; appending alone must not read the whole log
        tail = [r for r in visible(self.memory, self.conversation_id) if r.position >= min(edited)] if edited else []
        batch: list[dict[str, Any]] = [{"type": RETRACT_TYPE, "position": r.position} for r in tail]
        mine: list[int] = []
        for r in tail:
            m = edited.get(r.position)
            if m is not None:
                mine.append(len(batch))
            body = to_openai([m], max_metadata_bytes=self._limit, non_finite="null")[0] if m is not None else \
                {**r.body, **({"metadata": r.metadata} if r.metadata else {})}
            batch.append({**body, "created_at": r.created_at, **({"session_id": r.session_id} if r.session_id else {})})
        mine += range(len(batch), len(batch) + len(new))
        return batch + to_openai(new, max_metadata_bytes=self._limit, non_finite="null"), len(tail), mine

    def context_messages(self, query: str | None, system_messages: str | None = None) -> list[BaseMessage]:
        # as_stored sends a repeated call id as appended: renamed here, where it is model input
        # (and, with cache_marks, Anthropic's cache marks at the plan's breakpoints); the form
        # made explicit wins over the call's (the model it goes to), "as_is" without either
        form = self.system_messages or check_system_messages(system_messages) or "as_is"
        # in_turn may open with a user message of its own (`in_turn`: an AI message first):
        # planned with room for it, so what is sent stays within the budget
        pending = opening_tokens(self.memory) if form == "in_turn" else 0
        ctx = self.memory.context(self.conversation_id, query, self.budget, system=self.system,
                                  namespace_recall=self.namespace_recall, timezone=self.timezone,
                                  pending_tokens=pending, truncate_latest=self.truncate_latest)
        return context_input(ctx, self.cache_marks, form, memory=self.memory)

    def model_input(self, messages: Sequence[BaseMessage], system_messages: str | None = None) -> list[BaseMessage]:
        """Store the state's new messages, then plan the context for its latest human message
        (`system_messages`: the form for the model this call goes to, where the instance was
        made without one)."""
        self.sync(messages)
        # from the end, one message at a time: converting the whole state cost a turn on a
        # long conversation its whole history
        for m in reversed(messages):
            if is_summary(m):
                continue
            body = to_openai([m], non_finite="null", warn=False)[0]
            if body.get("role") == "user":
                return self.context_messages(latest_user_text([body]), system_messages)
        return self.context_messages(None, system_messages)
