"""Conversations from files, for `tiermem import`, `tiermem tune`, `tiermem eval` and the benchmarks.

Two formats, told apart by their content (not their file name):

**The conversations format** (JSONL: one JSON object per line, blank lines ignored; or a
`.json` file holding one list of the same objects). Each object is one of:

- a **message**: `{"conversation_id": "c1", "message": {...}}`, where `message` is any
  message `Memory.append` accepts (`tiers.formats`: every OpenAI Chat Completions
  message, system / developer / user / assistant with `tool_calls` / tool results, and
  every Responses API item). Optional beside it: `message_id` (a label that probes name
  as evidence), `session_id`, `created_at` (Unix seconds, or ISO 8601; no zone means
  UTC) and `metadata` (an object). The message's own fields may also sit at the top
  level instead of under `message` (`{"conversation_id": "c1", "role": "user", ...}`).
- a **conversation**: `{"conversation_id": "c1", "messages": [...], "probes": [...]}`,
  each item of `messages` a message object as above without `conversation_id`.
- a **probe**: `{"conversation_id": "c1", "probe": {...}}`. A probe is a labelled question
  for tuning: `{"question": "...", "evidence": ["m3", 7], "answer": "..."}`, where each
  evidence entry is a `message_id` or a 0-based index among the conversation's messages
  in file order (every line's messages counted, as a retraction's `position`);
  `answer` is optional (answer coverage). Probes are asked once the whole
  conversation is in memory.

Messages keep file order within a conversation; conversations keep the order of their
first line.

**LoCoMo** (a JSON list of samples with a `conversation` object, as `evals.locomo`
reads; a list in which any item has a `conversation` field is read as LoCoMo, and a
sample that is not an object or whose `conversation` is not one refuses the file, named
by `evals.locomo`): each sample becomes a conversation `locomo-<sample_id>` with the roles, times,
sessions and `dia_id`s `evals.locomo` gives it, its `qa` become probes (evidence: the
`dia_id`s; malformed ids are dropped and counted in `skipped_evidence`). A turn with no
`text`, a field of the wrong type (`locomo.turn_problem`), an item of a session that is
not a turn object or a `dia_id` an earlier turn of its sample has (which turn would a
question's evidence name?) is a bad turn; `checked_samples` checks a file so for
`tiermem eval`. An evidence id names the first turn (or message) that carries it
(`locomo.evidence_index`, the one mapping of every reader).

Every message is validated as `Memory.append` would (limits from the Config), and kept
in the form `append` stores (an openai SDK object's serialized form in its wire form:
`tiers.models.parse_message`), so that an import recognises the messages it wrote before
and a re-import adds nothing. A row an older release stored and exported before a check
was added (a reasoning item with no summary, or null) is read in the form append admits
today (`tiers.formats.as_appended`: `summary: []`), as an export now writes it, so a
store the previous release wrote can be moved or restored; a stored row is compared with
the file in that form too. A stored row with no such form (a reasoning item without an
`id`, tool calls repeating an id) is refused here as append refuses it: `export_lines`
checks every line so, and leaves such a row out, named, rather than write a file that
does not import. So is what `Memory.append_many` checks beyond the message:
the conversation id's length (`max_id_chars`) and that a retraction names an earlier
message of its conversation (positions counted in file order within the conversation,
every line's messages counted); `export_lines` checks the id so too, and leaves a
conversation whose id the import refuses (created before `max_id_chars` was lowered)
out whole, named. Where bad lines are skipped, the messages after one are
written at positions that count the good lines only, and a retraction is renumbered to
where the message it names is written, so it hides the same message; one that names a
skipped message, or whose message cannot be told (after a skipped line of no known
conversation, or whose messages are not a list), is a bad line too. A probe's index
evidence is renumbered the same way (`ConversationData.evidence_positions`); one naming a
skipped message, or one that cannot be told, names no message (counted as missing). A bad line is reported by line number (LoCoMo: the sample's number in the
list, its id and the turn's `dia_id`); `strict` (the default) refuses the file with every
bad line named and nothing read, otherwise bad lines (LoCoMo: bad turns) are skipped and
listed (a file whose every line is bad is refused with them named). So an import either writes the whole file or stops before writing anything.

A UTF-8 byte order mark that starts the file is ignored (as RFC 8259 allows). JSONL
lines end at "\n" only (a "\r" before it is dropped): U+2028, U+2029, U+0085 and
the other characters `str.splitlines` breaks at are text inside a JSON string.

**Memory.** No reader holds the file's text: JSONL is read a line at a time and a JSON
list an item at a time (`_json_items`; a syntax error is refused as soon as its item is
read, not after the rest of the list). `read_conversations` keeps every message (tune,
the evals and the benchmarks replay them); an import does not: `open_conversations`
checks the whole file in a first reading that keeps per conversation only counts and two
`BODY_DIGEST_BYTES` digests of each message (its body's, and the whole message's as it
would be stored: body, session_id, metadata, created_at), and `import_dataset` reads it
again (`FileData.rows`), appending chunk by chunk, with at most `MAX_PENDING_CHUNKS`
chunks' worth of messages waiting; what is stored is compared with the file by body
digest, a page of `STORED_PAGE_MESSAGES` at a time. A pipe or stream, which has one
reading, is copied to a temporary file first (the data dir's when there is one) that has
no name from its creation (`_spool_file`: no kill leaves a copy of the input behind) and
is read through its descriptor.

**A file that changes.** A regular file whose inode, size or modification time differ,
before the import's first write, from when its first reading began is refused with
nothing written (`FileData.check_unchanged`). A change during the second reading after
that is found at the first message read back unlike the one checked (body or envelope):
the import stops there with a DataFileError; chunks appended before it stay, as after a
killed import.
"""

from __future__ import annotations

import array
import datetime as dt
import hashlib
import io
import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, NoReturn, TextIO

from tiermem.config import MAX_ID_CHARS_LIMIT, Config
from tiermem.evals.locomo import (
    DIA_ID,
    LocomoError,
    Sample,
    conversation_ids,
    evidence_index,
    load_samples,
    parse_sample,
    session_times,
    turn_message,
)
from tiermem.tiers.errors import (
    ConversationNotFound,
    DataFileError,
    ImportConflict,
    ImportErased,
    ImportOfErased,
    LimitExceeded,
    PositionMismatch,
    ValidationError,
    shown,
)
from tiermem.tiers.formats import (
    RETRACT_TYPE,
    as_appended,
    canonical_role,
    hidden_positions,
    is_control,
    repeated_call_id,
)
from tiermem.tiers.models import ENVELOPE_FIELDS, ID_PATTERN, incarnation_token, parse_message
from tiermem.tiers.store import Erasure

Format = Literal["conversations", "locomo", "demo"]  # demo: evals.demo_data
BAD_LINES_SHOWN = 5  # in the error that refuses a file: the first few, then a count
# the end of that error: what the reader of it can do (import has --skip-bad; tune, the evals
# and the benchmarks have not)
SKIP_BAD_HINT = "fix them or pass --skip-bad to skip them"
FIX_HINT = "fix them"
ALL_BAD_HINT = "no good line is left to import: fix them"  # skipping bad lines skipped them all
ENVELOPE_KEYS = frozenset({"conversation_id", "message_id"})
# all an import keeps of a message between its two readings of the file: two digests this
# long (blake2b; 32 bytes a message, against the hundreds of its line): its body's, compared
# with what is stored, and the whole message's, compared with the second reading
BODY_DIGEST_BYTES = 16
JSON_READ_CHARS = 1 << 20  # a JSON list is parsed item by item from blocks of this many characters
# a JSON list's item that fails to parse this close to the end of what is read may only be
# cut short there (a literal like `tru`, a number like `1e`, an escape like `\u00`): more is
# read; an error further from the end is the file's, refused at once
JSON_CUT_SLACK_CHARS = 8
SPOOL_BLOCK_BYTES = 1 << 20  # a pipe is copied to its temporary file this many bytes at a time
SPOOL_PREFIX = "tiermem-import-"  # of that temporary file's name, where it has one (see _spool_file)
# an import's partial chunks of interleaved conversations wait at most this many chunks'
# worth of messages (batch x this), then are all appended: memory stays bounded however
# many conversations a file interleaves
MAX_PENDING_CHUNKS = 4
STORED_PAGE_MESSAGES = 1000  # an import compares what is stored with its file a page this long at a time
_JSON_SPACE = re.compile(r"[ \t\n\r]*")  # RFC 8259's whitespace, all json skips


@dataclass
class Probe:
    question: str
    evidence: list[str | int]
    answer: str | None = None
    category: int = 0  # LoCoMo's question category; 0 for the conversations format


@dataclass
class ConversationData:
    conversation_id: str
    messages: list[dict[str, Any]] = field(default_factory=list)  # as Memory.append takes them
    message_ids: list[str | None] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    # the file's numbering where bad lines were skipped (`read_conversations(strict=False)`):
    # an index evidence counts every line's messages, so it is renumbered as a retraction is
    numbering: _Numbering | None = None

    def evidence_positions(self, probe: Probe) -> tuple[list[int], int]:
        """Indexes (= log positions when the conversation was imported into an empty id)
        of a probe's evidence, deduplicated, and how many entries name no message. An id
        names the first message that carries it (`locomo.evidence_index`, as the evals
        read it: this took the last). An index is the file's (every line's messages
        counted): after a skipped line it is renumbered to `messages`' (`_Numbering`), and
        one naming a skipped message, or one that cannot be told, names no message."""
        by_id = evidence_index((m, i) for i, m in enumerate(self.message_ids))
        out: list[int] = []
        missing = 0
        for e in probe.evidence:
            i = self._index(e) if isinstance(e, int) and not isinstance(e, bool) else by_id.get(str(e))
            if i is None or not 0 <= i < len(self.messages):
                missing += 1
            elif i not in out:
                out.append(i)
        return out, missing

    def _index(self, file_index: int) -> int | None:
        """The index in `messages` of the file's message `file_index` (None: skipped, or
        not known after a skipped line of no known conversation)."""
        if self.numbering is None:
            return file_index
        try:
            return self.numbering.written(file_index, "evidence")
        except ValidationError:
            return None

    def is_user(self, index: int) -> bool:
        body = {k: v for k, v in self.messages[index].items() if k not in ENVELOPE_FIELDS}
        return canonical_role(body) == "user"


@dataclass
class BadLine:
    line: int  # 1-based line (JSONL) or 1-based item of the top-level list (JSON)
    problem: str


@dataclass
class Dataset:
    path: Path
    format: Format
    conversations: list[ConversationData]
    bad: list[BadLine] = field(default_factory=list)
    skipped_evidence: int = 0  # LoCoMo evidence ids that are not D<int>:<int>

    @property
    def n_messages(self) -> int:
        return sum(len(c.messages) for c in self.conversations)

    @property
    def n_probes(self) -> int:
        return sum(len(c.probes) for c in self.conversations)

    def counts(self) -> list[ConversationCount]:
        """Each conversation's counts and digests, as `open_conversations` keeps them."""
        out = []
        for c in self.conversations:
            count = ConversationCount(c.conversation_id, n_probes=len(c.probes))
            for m in c.messages:
                count.add(m)
            out.append(count)
        return out

    def rows(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(conversation id, message) of every message, a conversation after another."""
        for c in self.conversations:
            for m in c.messages:
                yield c.conversation_id, m

    def check_unchanged(self) -> None:
        """Held in memory: nothing to check (`FileData.check_unchanged`)."""


def _created_at(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValidationError("created_at", f"{value!r} is not ISO 8601 nor Unix seconds") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        return when.timestamp()
    raise ValidationError("created_at", f"must be Unix seconds or an ISO 8601 string, got {type(value).__name__}")


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, for an error a file's author reads."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "a list", float: "a number with a fraction",
            str: "a string", int: "an integer"}.get(type(value), type(value).__name__)


def _repeated_call_remedy(msg: dict[str, Any], exc: ValidationError) -> ValidationError:
    """`exc`, and when it refuses a chat message's tool call for repeating an earlier
    call's id (`formats.repeated_call_id`, append only since d95a9e0: an older release's
    export holds such rows) what to do about the line. Not renamed here: rows are stored
    as given (a re-import into the store the file came from must find the stored row
    present), and which result answers which call of the id is only the file's order."""
    calls = msg.get("tool_calls")
    if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("id"), str) for c in calls):
        return exc
    repeat = repeated_call_id([c["id"] for c in calls])
    if repeat is None or exc.field != f"tool_calls[{repeat[1]}].id":
        return exc
    again = repeat[1]
    return ValidationError(exc.field, f"{exc.problem}; append refuses this since an older release stored it, "
                           f"so an export of that release's store may hold it: give tool_calls[{again}] an id no "
                           "other call of the message has and put it in the tool_call_id of the result that "
                           f"answers it (the second result naming {shown(calls[again]['id'])} after this message); "
                           "skipping the line leaves its results without their call (a context sends their text "
                           "among retrieved turns, not as tool results)")


def _message(obj: dict[str, Any], limits: dict[str, int], *,
             remedy: bool = True) -> tuple[dict[str, Any], str | None]:
    """(the message as Memory.append takes it, its message_id), validated. `remedy`: an
    error a file's author can act on says how (`_repeated_call_remedy`); an export's check
    of a stored row (`_import_refusal`) says what the import would refuse only."""
    mid = obj.get("message_id")
    # a bool is an int to Python: `true` was stored as the label "True"
    if mid is not None and (isinstance(mid, bool) or not isinstance(mid, str | int)):
        raise ValidationError("message_id", f"must be a string or an integer, got {_json_type(mid)}")
    if "message" in obj:
        body = obj["message"]
        if not isinstance(body, dict):
            raise ValidationError("message", "must be an object")
        extra = set(obj) - {"message", *ENVELOPE_KEYS, *ENVELOPE_FIELDS}
        if extra:
            raise ValidationError(sorted(extra)[0], "is not a field of a message line (put message fields "
                                  "under 'message', caller data under 'metadata')")
        msg = dict(body)
        for k in ENVELOPE_FIELDS:
            if k in obj:
                msg[k] = obj[k]
    else:
        msg = {k: v for k, v in obj.items() if k not in ENVELOPE_KEYS}
    if msg.get("created_at") is not None:
        msg["created_at"] = _created_at(msg["created_at"])
    msg = as_appended(msg)  # an older release's export of a row stored before a check was added
    try:  # raises ValidationError naming the field
        parsed = parse_message(msg, max_content_bytes=limits["max_content_bytes"],
                               max_metadata_bytes=limits["max_metadata_bytes"])
    except ValidationError as exc:
        if not remedy:
            raise
        raise _repeated_call_remedy(msg, exc) from None
    # the body as append stores it (an SDK object's serialized form becomes its wire form):
    # what is already stored is recognised by comparing bodies (stored_prefix)
    envelope = {k: msg[k] for k in ENVELOPE_FIELDS if k in msg}
    return {**parsed.body(), **envelope}, None if mid is None else str(mid)


def _probe(raw: Any) -> Probe:
    if not isinstance(raw, dict):
        raise ValidationError("probe", "must be an object")
    q = raw.get("question")
    if not isinstance(q, str) or not q.strip():
        raise ValidationError("probe.question", "must be a non-empty string")
    ev = raw.get("evidence", [])
    if not isinstance(ev, list) or not all(isinstance(e, str | int) and not isinstance(e, bool) for e in ev):
        raise ValidationError("probe.evidence", "must be a list of message ids (strings) or indexes (integers)")
    extra = set(raw) - {"question", "evidence", "answer"}
    if extra:
        raise ValidationError(f"probe.{sorted(extra)[0]}", "is not a probe field (question, evidence, answer)")
    ans = raw.get("answer")
    return Probe(q, list(ev), None if ans is None else str(ans))


def _conv_id(obj: dict[str, Any], default: str | None, max_id_chars: int) -> str:
    cid = obj.get("conversation_id", default)
    if not isinstance(cid, str) or not ID_PATTERN.fullmatch(cid):
        raise ValidationError("conversation_id", f"must be an id matching {ID_PATTERN.pattern}, got {cid!r}")
    if len(cid) > max_id_chars:  # append_many would refuse it after the conversations before it
        raise LimitExceeded("conversation_id", len(cid), max_id_chars, unit="characters")
    return cid


def _check_control(msg: dict[str, Any], position: int, field: str) -> None:
    """A retraction must name an earlier message (Memory._check_controls): checked here,
    with `position` the message's index in its conversation, counted in file order (every
    line's messages, skipped ones too: `_Numbering`)."""
    if is_control(msg) and "position" in msg and msg["position"] >= position:
        raise ValidationError(field, f"must name an earlier message: {msg['position']} is not written yet "
                              f"(this row would be written at position {position})")


@dataclass
class _Numbering:
    """One conversation's positions: the file's (a message's index among the messages of
    every line of its conversation, as the file's author and `tiermem export` number
    them, and as a retraction's `position` names one) and the import's (the good lines'
    messages only: the log positions it writes). They differ after a skipped line
    (`--skip-bad`): a retraction is renumbered to the import's position of the message it
    names, or skipped, with the reason, where that message was skipped too or where a
    skipped line's count of messages is not known (`unknown_from`)."""
    file_next: int = 0  # the next message's position in the file's numbering
    # (first file position, line) of each skipped line's messages, with how many: (start, count, line)
    skipped: list[tuple[int, int, int]] = field(default_factory=list)
    # (file position, line): from there on the file's numbering is not known (a skipped line
    # whose messages could not be counted, or whose conversation could not be told)
    unknown_from: tuple[int, int] | None = None

    def skip(self, count: int | None, line: int) -> None:
        """A skipped line of this conversation holding `count` messages (None: not known)."""
        if count is None:
            if self.unknown_from is None:
                self.unknown_from = (self.file_next, line)
            return
        if count:
            self.skipped.append((self.file_next, count, line))
            self.file_next += count

    def written(self, target: int, field: str) -> int:
        """The import's position of the file's message `target` (earlier than `file_next`),
        or ValidationError (naming `field`) where it was not imported or is not known."""
        if self.unknown_from is not None and target >= self.unknown_from[0]:
            raise ValidationError(field, f"{target} cannot be told among the imported messages: line "
                                  f"{self.unknown_from[1]} was skipped and how many messages of this "
                                  "conversation it held is not known, so the message this names is not known")
        before = 0
        for start, count, line in self.skipped:
            if start <= target < start + count:
                raise ValidationError(field, f"names the message at position {target}, which line {line} held "
                                      "and was skipped: what it hides is not imported")
            if start + count <= target:
                before += count
        return target - before


# (conversation id, its messages each with its message_id, its probes): one good object
Item = tuple[str, list[tuple[dict[str, Any], str | None]], list[Probe]]


def _parse_item(obj: Any, numbering: Callable[[str], _Numbering], limits: dict[str, int],
                default_conv: str | None) -> Item:
    """One object of the conversations format, all or nothing. `numbering(cid)`: that
    conversation's positions so far (the file's and the import's: `_Numbering`); a
    retraction is checked in the file's numbering and stored in the import's."""
    if not isinstance(obj, dict):
        raise ValidationError("line", f"must be a JSON object, got {type(obj).__name__}")
    cid = _conv_id(obj, default_conv, limits["max_id_chars"])
    num = numbering(cid)
    start = num.file_next  # the next message's position in the file's numbering
    messages: list[tuple[dict[str, Any], str | None]] = []
    probes: list[Probe] = []

    def placed(msg: dict[str, Any], position: int, field: str) -> dict[str, Any]:
        _check_control(msg, position, field)
        if is_control(msg) and "position" in msg:
            return {**msg, "position": num.written(msg["position"], field)}
        return msg

    if "messages" in obj or "probes" in obj:
        extra = set(obj) - {"conversation_id", "messages", "probes"}
        if extra:
            raise ValidationError(sorted(extra)[0], "is not a field of a conversation (messages, probes)")
        items = obj.get("messages", [])
        if not isinstance(items, list):
            raise ValidationError("messages", "must be a list")
        for i, m in enumerate(items):
            if not isinstance(m, dict):
                raise ValidationError(f"messages[{i}]", "must be an object")
            try:
                msg, mid = _message(m, limits)
            except ValidationError as exc:
                raise ValidationError(f"messages[{i}].{exc.field}", exc.problem) from None
            messages.append((placed(msg, start + i, f"messages[{i}].position"), mid))
        raw_probes = obj.get("probes", [])
        if not isinstance(raw_probes, list):
            raise ValidationError("probes", "must be a list")
        probes = [_probe(p) for p in raw_probes]
    elif "probe" in obj:
        probes = [_probe(obj["probe"])]
    else:
        msg, mid = _message(obj, limits)
        messages.append((placed(msg, start, "position"), mid))
    return cid, messages, probes


def _bad_item_place(obj: Any, default_conv: str | None, max_id_chars: int) -> tuple[str | None, int | None]:
    """A bad object's conversation and how many messages it held in the file's numbering,
    each None where the object does not say (`_Numbering.skip`)."""
    if not isinstance(obj, dict):  # a line that is not JSON (a BadLine) or not an object
        return None, None
    try:
        cid = _conv_id(obj, default_conv, max_id_chars)
    except ValidationError:
        return None, None
    if "messages" in obj or "probes" in obj:
        items = obj.get("messages", [])
        return cid, len(items) if isinstance(items, list) else None
    return cid, 0 if "probe" in obj else 1


def locomo_ids(sample_ids: list[str], max_chars: int) -> list[str]:
    """`evals.locomo.conversation_ids` within `max_chars` as well: the same ids under the
    default limit (so a file imports into the conversations an earlier import or the
    eval made), shorter ones when the Config's `max_id_chars` is lower."""
    return conversation_ids(sample_ids, max_chars)


def _sample_turns(number: int, s: Sample, limits: dict[str, int],
                  bad: list[BadLine]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(dia_id, message) of each good turn of sample `s` (the `number`th of its file), in
    log order, checked as `append` would check it; each bad turn goes to `bad`, named by its
    sample and its dia_id (else its place in its session): an item that is not a turn
    object, a field of the wrong type (`locomo.turn_problem`), a message `parse_message`
    refuses (a date before 1970, a lone surrogate, a text over `max_content_bytes`), a
    `dia_id` an earlier good turn of the sample has (a question's evidence would name
    two turns; skipped as bad, the first keeps it)."""
    def refuse(turn_name: str, problem: object) -> None:
        bad.append(BadLine(number, f"sample {s.sample_id!r}, turn {turn_name!r}: {problem}"))

    first: dict[str, str] = {}  # dia_id -> the good turn that has it (its place), for the error

    times, _ = session_times(s)
    for session, start in zip(s.sessions, times, strict=True):
        for place, kind in session.malformed:
            refuse(f"#{place} of session_{session.number}", f"must be an object, got {kind}")
        for i, turn in enumerate(session.turns):
            named_by_dia_id = turn.dia_id and (turn.problem is None or turn.problem[0] != "dia_id")
            turn_name = turn.dia_id if named_by_dia_id else f"#{turn.index} of session_{session.number}"
            if turn.problem is not None:
                refuse(turn_name, ValidationError(*turn.problem))
                continue
            msg, _known = turn_message(turn, s, session, start + i)
            try:
                parse_message(msg, max_content_bytes=limits["max_content_bytes"],
                              max_metadata_bytes=limits["max_metadata_bytes"])
            except ValidationError as exc:
                refuse(turn_name, exc)
                continue
            here = f"#{turn.index} of session_{session.number}"
            if turn.dia_id and turn.dia_id in first:
                # which turn its evidence means is not in the file: the evals took the
                # first, tune the last
                refuse(turn_name, ValidationError(
                    "dia_id", f"{turn.dia_id!r} is also the dia_id of turn {first[turn.dia_id]} (this is turn "
                    f"{here}): each turn needs its own, the one a question's evidence names"))
                continue
            if turn.dia_id:
                first[turn.dia_id] = here
            yield turn.dia_id, msg


def _samples(path: Path) -> list[Sample]:
    """The samples of the LoCoMo file at `path`, all at once (`tiermem eval`'s reader)."""
    try:
        return load_samples(path)
    except LocomoError as exc:
        # its problem without the path: DataFileError names the file in front, once
        raise DataFileError(exc.path or str(path), exc.problem) from None


def checked_samples(path: Path, config: Config) -> list[Sample]:
    """The samples of a LoCoMo file for `tiermem eval` (locomo, cost, session), every turn
    checked as `tiermem import` checks the file (under `config`'s limits), before the eval
    writes anything: a bad turn refuses the file with import's error (DataFileError naming
    each bad turn's sample and dia_id)."""
    path = Path(path)
    samples = _samples(path)
    limits = {"max_content_bytes": config.max_content_bytes, "max_metadata_bytes": config.max_metadata_bytes}
    bad: list[BadLine] = []
    for number, s in enumerate(samples, start=1):
        for _ in _sample_turns(number, s, limits, bad):
            pass
    if bad:
        _refuse(path, bad, "turn", "sample #", FIX_HINT)
    return samples


def _refuse(path: Path, bad: list[BadLine], what: str, where: str, hint: str) -> NoReturn:
    """The error of a strict read: how many bad `what`s, the first few by `where`."""
    shown = "; ".join(f"{where}{b.line}: {b.problem}" for b in bad[:BAD_LINES_SHOWN])
    more = f"; and {len(bad) - BAD_LINES_SHOWN} more" if len(bad) > BAD_LINES_SHOWN else ""
    raise DataFileError(str(path), f"{len(bad)} bad {what}(s), nothing imported ({shown}{more}); {hint}")


def body_digest(body: dict[str, Any]) -> bytes:
    """A message body's digest (its canonical JSON): what is stored is compared with the
    file by it (a re-import recognises its messages by their bodies, as before: a stored
    message's created_at is the time it was written when the file gives none)."""
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(text.encode("utf-8"), digest_size=BODY_DIGEST_BYTES).digest()


def message_digest(msg: dict[str, Any]) -> bytes:
    """The digest of a message as it would be stored, body and envelope (session_id,
    metadata, created_at): the second reading of the file is compared with the first by
    it, so a field rewritten in between is not written unchecked."""
    return body_digest(msg)


def _body(msg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in msg.items() if k not in ENVELOPE_FIELDS}


@dataclass
class ConversationCount:
    """What an import keeps of a conversation between its two readings of the file."""
    conversation_id: str
    n_messages: int = 0
    n_probes: int = 0
    digests: bytearray = field(default_factory=bytearray)  # body_digest of each message, in order
    checks: bytearray = field(default_factory=bytearray)  # message_digest of each message, in order
    # each message's created_at, in order (Unix seconds; NaN: none given, written now):
    # the lines an import would write, past what is stored, are compared with the
    # conversation's erasure (`oldest_from`, `import_dataset`)
    times: array.array[float] = field(default_factory=lambda: array.array("d"))

    def add(self, msg: dict[str, Any]) -> None:
        self.n_messages += 1
        at = msg.get("created_at")
        self.times.append(float(at) if isinstance(at, int | float) and not isinstance(at, bool) else math.nan)
        self.digests += body_digest(_body(msg))
        self.checks += message_digest(msg)

    def oldest_from(self, start: int) -> float | None:
        """The oldest created_at of messages `start` on (None: none of them gives one)."""
        given = [t for t in self.times[start:] if not math.isnan(t)]
        return min(given) if given else None

    def digest(self, index: int) -> bytes:
        """The body's digest of message `index` (compared with what is stored)."""
        return bytes(self.digests[index * BODY_DIGEST_BYTES:(index + 1) * BODY_DIGEST_BYTES])

    def check(self, index: int) -> bytes:
        """The whole message's digest of message `index` (compared with the second reading)."""
        return bytes(self.checks[index * BODY_DIGEST_BYTES:(index + 1) * BODY_DIGEST_BYTES])


# --- reading a file: each pass opens it anew, and holds a line (a JSON list: an item) at a time


class _PositionalReader(io.RawIOBase):
    """Reads an open descriptor from its start with pread, at an offset of its own: each
    pass over a spool reads it whole whatever another reader of the descriptor did.
    Closing it leaves the descriptor open (the spool's owner closes it)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._offset = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = os.pread(self._fd, len(view), self._offset)
        view[:len(data)] = data
        self._offset += len(data)
        return len(data)


@dataclass(frozen=True)
class Spool:
    """A pipe's copy, read through its open descriptor: the file has no name from the
    moment it exists (O_TMPFILE, else unlinked at once), so no kill of the process, not
    even SIGKILL, can leave a copy of the input behind; closing the descriptor frees it."""
    fd: int


Readable = Path | Spool  # what a pass reads: a regular file by its path, or a spool


def _text(source: Readable) -> TextIO:
    # utf-8-sig: a byte order mark a Windows tool put first is no part of the text (RFC 8259
    # lets a reader ignore it); one inside a JSON string stays text. newline="\n": lines end
    # at "\n" only, untranslated (a lone "\r" is no line end)
    if isinstance(source, Path):
        return source.open(encoding="utf-8-sig", newline="\n")
    return io.TextIOWrapper(io.BufferedReader(_PositionalReader(source.fd)), encoding="utf-8-sig", newline="\n")


@contextmanager
def _decoding(name: str) -> Iterator[None]:
    """A file that is not UTF-8 (found wherever a pass meets it) refuses the file."""
    try:
        yield
    except UnicodeDecodeError as exc:
        raise DataFileError(name, f"cannot be read as UTF-8 text: {exc}") from None
    except OSError as exc:
        raise DataFileError(name, f"cannot be read: {exc}") from None


def _is_json_list(path: Readable, name: str) -> bool:
    """Whether the text starts with '[' (after whitespace): a JSON list, else JSONL."""
    with _decoding(name), _text(path) as fh:
        while block := fh.read(JSON_READ_CHARS):
            rest = block.lstrip()
            if rest:
                return rest.startswith("[")
    return False


def _jsonl_objects(path: Readable, name: str) -> Iterator[tuple[int, Any]]:
    """(1-based line number, parsed object or the BadLine of a line that is not JSON) of
    each non-blank line. Lines end at "\n" only, not where `str.splitlines` would also
    break (U+2028, U+2029, U+0085, \x0b, \x0c, \x1c-\x1e): those are text inside a JSON
    string, as `tiermem export` writes it. A "\r" before the "\n" (a CRLF file) is dropped."""
    with _decoding(name), _text(path) as fh:
        for n, raw in enumerate(fh, start=1):
            line = raw.removesuffix("\n").removesuffix("\r")
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as exc:
                yield n, BadLine(n, f"not valid JSON ({exc.msg})")
            except (ValueError, RecursionError) as exc:  # an integer past 4,300 digits, deep nesting
                yield n, BadLine(n, f"not valid JSON ({type(exc).__name__}: {str(exc)[:200]})")


def _json_items(path: Readable, name: str) -> Iterator[tuple[int, Any]]:
    """(1-based number, item) of each item of the JSON list the file holds, parsed one at a
    time from blocks of the text: the list is never held whole. JSON that is not valid
    refuses the file (DataFileError), as a whole-file parse would, and as soon as the item
    it is in is read up to the error: more is read only for an item that may just be cut
    by the end of what is read (`_maybe_cut`), so a syntax error early in a large list
    is refused without reading the rest of it."""
    decoder = json.JSONDecoder()
    buf, pos, eof = "", 0, False

    def fill() -> None:
        # read at least as much as is held: an item longer than a block is parsed again
        # after each read, so the reads grow and parsing it stays linear in its length
        nonlocal buf, pos, eof
        block = fh.read(max(JSON_READ_CHARS, len(buf) - pos))
        eof = not block
        buf, pos = buf[pos:] + block, 0

    def next_char() -> str | None:
        nonlocal pos
        while True:
            pos = _JSON_SPACE.match(buf, pos).end()  # type: ignore[union-attr]  # matches ""
            if pos < len(buf):
                return buf[pos]
            if eof:
                return None
            fill()

    def invalid(problem: str) -> NoReturn:
        raise DataFileError(name, f"is not valid JSON: {problem}")

    with _decoding(name), _text(path) as fh:
        if next_char() != "[":
            invalid("it does not start with '['")
        pos += 1
        n = 0
        if next_char() == "]":
            pos += 1
        else:
            while True:
                if next_char() is None:  # raw_decode takes no leading whitespace
                    invalid(f"the list ends inside, after item {n}")
                while True:
                    try:
                        obj, end = decoder.raw_decode(buf, pos)
                    except json.JSONDecodeError as exc:
                        if eof or not _maybe_cut(buf, exc):
                            invalid(f"item {n + 1}: {exc.msg}")
                        fill()
                        continue
                    except (ValueError, RecursionError) as exc:  # 4,300 digits, deep nesting
                        invalid(f"item {n + 1}: {type(exc).__name__}: {str(exc)[:200]}")
                    if end == len(buf) and not eof:  # a number may go on in the next block
                        fill()
                        continue
                    break
                n += 1
                pos = end
                yield n, obj
                sep = next_char()
                if sep == "]":
                    pos += 1
                    break
                if sep != ",":
                    invalid(f"expected ',' or ']' after item {n}")
                pos += 1
        if next_char() is not None:
            invalid(f"extra data after the list's {n} item(s)")


def _maybe_cut(buf: str, exc: json.JSONDecodeError) -> bool:
    """Whether a parse error may only be the end of what was read cutting the item short:
    at (or within JSON_CUT_SLACK_CHARS of) that end, or a string not closed before it.
    Any other error is the file's whatever follows."""
    return exc.pos >= len(buf) - JSON_CUT_SLACK_CHARS or exc.msg.startswith("Unterminated string")


def _objects(path: Readable, name: str, as_list: bool) -> Iterator[tuple[int, Any]]:
    return _json_items(path, name) if as_list else _jsonl_objects(path, name)


def _is_locomo(path: Readable, name: str) -> bool:
    # one sample with a `conversation` field makes the list LoCoMo (no object of the
    # conversations format has that field): a malformed sample among good ones is then
    # named by the LoCoMo reader, not every sample refused for lacking a conversation_id
    return any(isinstance(s, dict) and "conversation" in s for _n, s in _json_items(path, name))


def _conversation_items(path: Readable, name: str, as_list: bool, limits: dict[str, int],
                        default_conv: str | None, bad: list[BadLine], *, skipping: bool,
                        numbering: dict[str, _Numbering] | None = None) -> Iterator[Item]:
    """Each good object of a conversations-format file, in file order; each bad one (a
    line or item) goes to `bad`. `skipping` (the file is imported without its bad lines):
    a bad line writes nothing, so the messages after it are written at positions that
    count good objects only, and a later retraction of its conversation is renumbered to
    them (or is bad itself, where what it names was skipped or cannot be told:
    `_Numbering`); a bad line whose conversation cannot be told makes the file's numbering
    unknown from there in every conversation. Not skipping, a bad line refuses the file:
    a retraction is only checked in the file's numbering (what it names is not bad for a
    line before it being bad). `numbering`: where each conversation's `_Numbering` is kept
    (the caller's, to renumber what it reads after the file: a probe's index evidence)."""
    numbering = {} if numbering is None else numbering
    unknown_line: int | None = None  # the first bad line of no known conversation

    def of(cid: str) -> _Numbering:
        if cid not in numbering:
            numbering[cid] = _Numbering(unknown_from=None if unknown_line is None else (0, unknown_line))
        return numbering[cid]

    for n, obj in _objects(path, name, as_list):
        if isinstance(obj, BadLine):
            bad.append(obj)
        else:
            try:
                item = _parse_item(obj, of, limits, default_conv)
            except ValidationError as exc:
                bad.append(BadLine(n, str(exc)))
            else:
                of(item[0]).file_next += len(item[1])
                yield item
                continue
        cid, count = _bad_item_place(obj, default_conv, limits["max_id_chars"])
        if not skipping:
            if cid is not None:
                of(cid).file_next += count or 0
            continue
        if cid is not None:
            of(cid).skip(count, n)
            continue
        if unknown_line is None:
            unknown_line = n
        for num in numbering.values():
            num.skip(None, n)


def _locomo_items(path: Readable, name: str, limits: dict[str, int],
                  bad: list[BadLine]) -> Iterator[tuple[Sample, list[tuple[str, dict[str, Any]]]]]:
    """Each sample of a LoCoMo file with its good turns ((dia_id, message), log order);
    each bad turn goes to `bad`. A malformed sample refuses the file."""
    for number, raw in _json_items(path, name):
        try:
            s = parse_sample(raw, number - 1)
        except LocomoError as exc:
            raise DataFileError(name, str(exc)) from None
        yield s, list(_sample_turns(number, s, limits, bad))


def _locomo_probes(s: Sample) -> tuple[list[Probe], int]:
    """A sample's qa as probes (evidence: the well-formed dia_ids), and how many evidence
    ids were dropped as malformed."""
    probes: list[Probe] = []
    skipped = 0
    for qa in s.qa:
        ev: list[str | int] = []
        for e in qa.evidence:
            if DIA_ID.match(e.strip()):
                ev.append(e.strip())
            else:
                skipped += 1
        probes.append(Probe(qa.question, ev, qa.answer, qa.category))
    return probes, skipped


def _judge(name: str, fmt: Format, bad: list[BadLine], any_conversation: bool, strict: bool, hint: str) -> None:
    """Refuse a file after its reading: bad lines (strict), nothing good left, nothing at all."""
    bad.sort(key=lambda b: b.line)
    what, where = ("turn", "sample #") if fmt == "locomo" else ("line", "line ")
    if bad and strict:
        _refuse(Path(name), bad, what, where, hint)
    if fmt == "locomo":
        return
    if not any_conversation and bad:  # skipping every line left nothing: say why, not just that
        _refuse(Path(name), bad, "line", "line ", ALL_BAD_HINT)
    if not any_conversation:
        raise DataFileError(name, "holds no conversation")


@contextmanager
def _readable(source: Path | BinaryIO, name: str, spool_dir: Path | None) -> Iterator[Readable]:
    """What can be read more than once: a regular file's own path, else (a pipe,
    `/dev/stdin`, a stream) a `Spool`, a copy of what it gives that has no name in any
    directory (see `_spool_file`), freed when it is closed on leaving."""
    if isinstance(source, Path):
        if source.is_dir():
            raise DataFileError(name, "is a directory, not a file")
        try:
            regular = stat.S_ISREG(source.stat().st_mode)
        except FileNotFoundError:
            raise DataFileError(name, "no such file") from None
        except OSError as exc:
            raise DataFileError(name, f"cannot be read: {exc}") from None
        if regular:
            yield source
            return
    spool, where = _spool_file(spool_dir)
    with spool:
        if isinstance(source, Path):
            try:
                src = source.open("rb")
            except OSError as exc:
                raise DataFileError(name, f"cannot be read: {exc}") from None
            with src:
                _copy(src, spool, name, where)
        else:
            _copy(source, spool, name, where)
        yield Spool(spool.fileno())


def _copy(src: BinaryIO, spool: IO[bytes], name: str, where: str) -> None:
    """`src` whole into `spool`, flushed (it is read back through its descriptor)."""
    while True:
        try:
            block = src.read(SPOOL_BLOCK_BYTES)
        except OSError as exc:
            raise DataFileError(name, f"cannot be read: {exc}") from None
        try:
            if not block:
                spool.flush()
                return
            spool.write(block)
        except OSError as exc:  # the spool's disk (full, read-only): say where
            raise DataFileError(name, f"cannot be copied to a temporary file in {where} to be read twice: "
                                f"{exc}") from None


def _spool_file(spool_dir: Path | None) -> tuple[IO[bytes], str]:
    """A new private temporary file in `spool_dir`, else in the system's temporary
    directory, and that directory's name. It never has a name a kill could leave behind:
    created with O_TMPFILE where the file system has it, else unlinked right after it is
    made (tempfile.TemporaryFile), and read through its descriptor."""
    if spool_dir is not None:
        with suppress(OSError):  # a read-only or missing data dir: the system's then
            return tempfile.TemporaryFile(dir=spool_dir, prefix=SPOOL_PREFIX), str(spool_dir)
    return tempfile.TemporaryFile(prefix=SPOOL_PREFIX), tempfile.gettempdir()


def read_conversations(
    path: Path | BinaryIO,
    *,
    max_content_bytes: int,
    max_metadata_bytes: int,
    max_id_chars: int = MAX_ID_CHARS_LIMIT,
    strict: bool = True,
    conversation_id: str | None = None,
    hint: str = SKIP_BAD_HINT,
    name: str | None = None,
) -> Dataset:
    """Read a conversations-format file (JSONL or JSON) or a LoCoMo file, every message in
    memory (`tune`, the evals and the benchmarks replay them; an import streams:
    `open_conversations`). `path` may be a pipe (`/dev/stdin`) or a binary stream (`name`
    names it). `conversation_id` is the id of lines that give none. Raises DataFileError
    naming the file and line, ending with `hint` (what the caller's user can do).
    `max_id_chars`: the Config's (every reader of a user's file passes it, so that a file
    `tiermem import` refuses is refused by all of them; the default is the largest any
    Config allows)."""
    shown = name or str(path)
    limits = {"max_content_bytes": max_content_bytes, "max_metadata_bytes": max_metadata_bytes,
              "max_id_chars": max_id_chars}
    with _readable(Path(path) if isinstance(path, str) else path, shown, None) as src:
        as_list = _is_json_list(src, shown)
        bad: list[BadLine] = []
        if as_list and _is_locomo(src, shown):
            samples = list(_locomo_items(src, shown, limits, bad))
            _judge(shown, "locomo", bad, True, strict, hint)
            ids = locomo_ids([s.sample_id for s, _turns in samples], max_id_chars)
            out: list[ConversationData] = []
            skipped = 0
            for (s, turns), cid in zip(samples, ids, strict=True):
                probes, dropped = _locomo_probes(s)
                skipped += dropped
                out.append(ConversationData(cid, [m for _d, m in turns], [d or None for d, _m in turns], probes))
            return Dataset(Path(shown), "locomo", out, bad, skipped_evidence=skipped)
        convs: dict[str, ConversationData] = {}
        numbering: dict[str, _Numbering] = {}
        for cid, messages, probes in _conversation_items(src, shown, as_list, limits, conversation_id, bad,
                                                         skipping=not strict, numbering=numbering):
            have = convs.setdefault(cid, ConversationData(cid))
            have.messages += [m for m, _mid in messages]
            have.message_ids += [mid for _m, mid in messages]
            have.probes += probes
        if bad:  # lines were skipped: a probe's index evidence is the file's, not `messages`'
            for cid, conv in convs.items():
                conv.numbering = numbering.get(cid)
        _judge(shown, "conversations", bad, bool(convs), strict, hint)
        return Dataset(Path(shown), "conversations", list(convs.values()), bad)


FileState = tuple[int, int, int, int]  # (st_dev, st_ino, st_size, st_mtime_ns)


def _file_state(path: Path) -> FileState:
    st = path.stat()
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


@dataclass
class FileData:
    """A file `open_conversations` validated, read again by `rows()` to be written: what
    is held of it are the counts and digests of its conversations (`ConversationCount`)
    and its bad lines, never its messages."""
    path: Path  # the file's name, as errors and reports give it
    format: Format
    conversations: list[ConversationCount]
    bad: list[BadLine]
    skipped_evidence: int
    source: Readable  # what is read: the file, or the spool of a pipe
    limits: dict[str, int]
    conversation_id: str | None  # the id of lines that give none
    # a regular file's (device, inode, size, mtime_ns) when its first reading began; None
    # for a spool, which nothing else can write
    seen: FileState | None = None

    @property
    def n_messages(self) -> int:
        return sum(c.n_messages for c in self.conversations)

    @property
    def n_probes(self) -> int:
        return sum(c.n_probes for c in self.conversations)

    def counts(self) -> list[ConversationCount]:
        return self.conversations

    def rows(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(conversation id, message) of every good message, in file order, read again."""
        name = str(self.path)
        scratch: list[BadLine] = []  # the bad lines again: known already
        if self.format == "locomo":
            for c, (_s, turns) in zip(self.conversations, _locomo_items(self.source, name, self.limits, scratch),
                                      strict=False):
                for _dia_id, msg in turns:
                    yield c.conversation_id, msg
            return
        as_list = _is_json_list(self.source, name)
        # a file with bad lines read this far was checked skipping them (or had none)
        for cid, messages, _probes in _conversation_items(self.source, name, as_list, self.limits,
                                                          self.conversation_id, scratch, skipping=True):
            for msg, _mid in messages:
                yield cid, msg

    def check_unchanged(self) -> None:
        """Before an import's first write: a regular file whose inode, size or
        modification time differ from when its first reading began changed since it was
        checked, and is refused (DataFileError naming it) before anything is written.
        (A change during the second reading after this is found at the first message
        unlike the one checked: `import_dataset`.)"""
        if self.seen is None or not isinstance(self.source, Path):
            return
        try:
            now: FileState | None = _file_state(self.source)
        except OSError:
            now = None
        if now != self.seen:
            raise DataFileError(str(self.path), "changed after it was checked (its inode, size or modification time "
                                "differ); nothing was imported: import it again")


@contextmanager
def open_conversations(
    path: Path | BinaryIO,
    *,
    max_content_bytes: int,
    max_metadata_bytes: int,
    max_id_chars: int = MAX_ID_CHARS_LIMIT,
    strict: bool = True,
    conversation_id: str | None = None,
    hint: str = SKIP_BAD_HINT,
    name: str | None = None,
    spool_dir: Path | None = None,
) -> Iterator[FileData]:
    """A file for an import, checked as `read_conversations` checks it (the same errors)
    in a first pass that keeps only counts and digests, then read again, a line at a time,
    by `FileData.rows()`: the import holds a chunk of messages, not the file. A pipe or
    stream (`tiermem import -`) is copied to a temporary file in `spool_dir` (else the
    system's) first, as it cannot be read twice; the copy has no name (`_spool_file`) and
    is freed on leaving. A regular file's inode, size and modification time are taken
    before the first reading (`FileData.check_unchanged`)."""
    shown = name or str(path)
    limits = {"max_content_bytes": max_content_bytes, "max_metadata_bytes": max_metadata_bytes,
              "max_id_chars": max_id_chars}
    with _readable(Path(path) if isinstance(path, str) else path, shown, spool_dir) as src:
        try:
            seen = _file_state(src) if isinstance(src, Path) else None
        except OSError as exc:
            raise DataFileError(shown, f"cannot be read: {exc}") from None
        as_list = _is_json_list(src, shown)
        bad: list[BadLine] = []
        if as_list and _is_locomo(src, shown):
            sample_ids: list[str] = []
            counts: list[ConversationCount] = []
            skipped = 0
            for s, turns in _locomo_items(src, shown, limits, bad):
                sample_ids.append(s.sample_id)
                probes, dropped = _locomo_probes(s)
                skipped += dropped
                c = ConversationCount("", n_probes=len(probes))
                for _dia_id, msg in turns:
                    c.add(msg)
                counts.append(c)
            _judge(shown, "locomo", bad, True, strict, hint)
            for c, cid in zip(counts, locomo_ids(sample_ids, max_id_chars), strict=True):
                c.conversation_id = cid
            yield FileData(Path(shown), "locomo", counts, bad, skipped, src, limits, None, seen)
            return
        convs: dict[str, ConversationCount] = {}
        for cid, messages, probes in _conversation_items(src, shown, as_list, limits, conversation_id, bad,
                                                         skipping=not strict):
            c = convs.setdefault(cid, ConversationCount(cid))
            for msg, _mid in messages:
                c.add(msg)
            c.n_probes += len(probes)
        _judge(shown, "conversations", bad, bool(convs), strict, hint)
        yield FileData(Path(shown), "conversations", list(convs.values()), bad, 0, src, limits, conversation_id,
                       seen)


@dataclass
class ImportReport:
    conversations: int = 0
    appended: int = 0
    already_present: int = 0  # messages skipped because the same message was stored there
    probes: int = 0
    bad_lines: list[BadLine] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"conversations": self.conversations, "appended": self.appended,
                "already_present": self.already_present, "probes": self.probes,
                "bad_lines": [{"line": b.line, "problem": b.problem} for b in self.bad_lines]}


def stored_prefix(memory: Any, conv: ConversationCount, namespace: str) -> tuple[str | None, int]:
    """The incarnation of `conv`'s conversation in the data dir, as an append answers it
    (`incarnation_token`; None when there is none), and how many of `conv`'s messages it
    already holds, in order (0 when it is new; all of them when it went on past the file).
    ImportConflict when a stored message differs from the file's at the same position
    (compared by `body_digest`). Read by key, so every page is of the one incarnation
    returned."""
    key = memory.cold.key_of(namespace, conv.conversation_id)
    if key is None:
        return None, 0
    # a page at a time: a long stored conversation is not held whole either
    i = 0
    while i < conv.n_messages:
        page = memory.cold.history(key, start=i, end=i + STORED_PAGE_MESSAGES - 1)
        for m in page[: conv.n_messages - i]:
            # in the form the file has it (`as_appended`): a re-import of an export of a row
            # stored before a check was added finds it present
            if body_digest(as_appended(m.body)) != conv.digest(i):
                raise ImportConflict(conv.conversation_id, m.position)
            i += 1
        if len(page) < STORED_PAGE_MESSAGES:
            break
    # a conversation that went on after the import: the file is a prefix of it, all present
    return incarnation_token(memory.cold.db_uuid, key), i


Source = Dataset | FileData  # what an import writes from


def erased_in_file(conv: ConversationCount, start: int, erasure: Erasure | None) -> ImportOfErased | None:
    """The refusal of `conv` when it was erased on request (`erasure`: its tombstones of
    reason 'erase', `ColdStore.erasures_of`; None: none) and a line the import would
    write, from `start` on (past what is stored), was created at or before
    `erasure.until`: the later of the erasure's server time and the newest created_at
    among the messages it erased. Such a line is the erased data from a copy made before
    it, its stamp ahead of the server clock where a client's clock ran ahead or the
    caller set created_at (None: no refusal). Lines already stored are not written
    again, so a conversation restored with --restore-erased, or recreated, is not refused
    its own re-import or later export. Lines created after both are a new conversation
    of the same name, as an append after it is. A pruned conversation is not refused
    (`ImportOfErased`)."""
    if erasure is None:
        return None
    oldest = conv.oldest_from(start)
    if oldest is not None and oldest <= erasure.until:
        return ImportOfErased(conv.conversation_id, erasure.at, oldest, newest=erasure.newest)
    return None


def import_dataset(memory: Any, data: Source, *, namespace: str, batch: int = 1000,
                   progress: Any = None, finished: Any = None, restore_erased: bool = False) -> ImportReport:
    """Append every conversation of `data` in `namespace`, from `data.rows()` in file order,
    each conversation in chunks of `batch` (at most `MAX_PENDING_CHUNKS` chunks' worth of
    messages wait at once: past it, every conversation's partial chunk is appended).
    Idempotent: messages the data dir already holds (the same bodies, in order) are
    skipped, so a re-import appends nothing and an import of a longer file appends only
    the new tail; every conversation is checked before any is written, so a conflict
    writes nothing, and so is the file (`check_unchanged`: a file changed since its first
    reading is refused before the first write).

    Each chunk is a conditional append (`Memory.append_outcome(expect_position=,
    expect_incarnation=)`): written only if the conversation is still the incarnation
    the import saw (or created) and ends exactly where the chunk starts, checked in the
    append's own transaction. When it is not, the data dir is checked against the file
    again (`stored_prefix`): another import of the same file that wrote there first
    (whatever its batch size) leaves a prefix of the file, counted as already present,
    and the chunk's rest goes after it; a stored message unlike the file's is an
    ImportConflict; a conversation erased or pruned while the import ran stops it
    (ImportErased, naming it) instead of re-creating it holding only the file's tail.
    The import stops there: what it wrote before stays (as after a killed import, and
    the report it would have returned counts no more than landed).

    A message read back unlike the one checked (body and envelope: `message_digest`; the
    file changed during the second reading) stops the import at that message with a
    DataFileError; chunks appended before it stay. `finished(n, name)` is called once a
    conversation is all written, with the messages it appended and its name
    (tiermem/ingest.py).

    A conversation erased on request whose lines in the file that are not stored already
    (past its stored prefix) include one created at or before its erasure, or before its
    newest erased message where that was stamped later (an export made before it) is
    refused, ImportOfErased naming it and the erasure's time, before
    anything of the file is written: an erasure is not undone by restoring an old copy,
    unless `restore_erased` says so (`erased_in_file`). Lines already present are not
    refused: a conversation restored or recreated since re-imports its own exports."""
    report = ImportReport(bad_lines=list(data.bad))
    counts = data.counts()
    erasures: dict[str, Erasure] = {}
    if not restore_erased:
        erasures = memory.cold.erasures_of(namespace, [c.conversation_id for c in counts])
    # check every conversation before writing any, so a conflict or an erasure writes nothing
    seen: dict[str, tuple[str | None, int]] = {}
    for c in counts:
        erasure = erasures.get(c.conversation_id)
        try:
            seen[c.conversation_id] = stored_prefix(memory, c, namespace)
        except ImportConflict as conflict:
            # the file differs from what is stored from there on: the lines there, when older
            # than the erasure, are the erased data (the name stored again since)
            refusal = erased_in_file(c, conflict.position, erasure)
            raise (refusal or conflict) from None
        refusal = erased_in_file(c, seen[c.conversation_id][1], erasure)
        if refusal is not None:
            raise refusal
    starts = {cid: n for cid, (_token, n) in seen.items()}
    # the incarnation each conversation's next chunk must go to, as appends answer it
    # (`AppendOutcome.incarnation`, `expect_incarnation`: a token, never the key; None: none yet)
    incarnation: dict[str, str | None] = {cid: token for cid, (token, _n) in seen.items()}
    by_id = {c.conversation_id: c for c in counts}
    for c in counts:
        report.conversations += 1
        report.probes += c.n_probes
        report.already_present += starts[c.conversation_id]
        if progress is not None:
            progress(starts[c.conversation_id])
    read: dict[str, int] = dict.fromkeys(by_id, 0)  # messages of each conversation read back
    waiting: dict[str, list[dict[str, Any]]] = {}  # each conversation's partial chunk
    appended: dict[str, int] = dict.fromkeys(by_id, 0)
    held = 0  # messages in `waiting`
    skip_to: dict[str, int] = {}  # stored by another import meanwhile, found at a mismatch (flush)
    unchanged = [False]  # the file was found as its first reading began, before the first write

    def recheck(cid: str, first: int) -> int:
        """After a conditional append found the conversation elsewhere than `first`:
        where it ends now, once what it holds is checked against the file."""
        expected = incarnation[cid]
        token, now = stored_prefix(memory, by_id[cid], namespace)  # ImportConflict if another file's
        if expected is not None and token != expected:
            # the incarnation this import checked or wrote is gone: erased or pruned meanwhile
            raise ImportErased(cid, first, appended[cid])
        if token is None:  # created by another writer and erased again since: as new
            return first
        if now <= first:  # the same incarnation, not ending at `first`: not this file's
            raise ImportConflict(cid, first)
        incarnation[cid] = token
        return now

    def flush(cid: str) -> None:
        nonlocal held
        chunk = waiting.pop(cid, [])
        held -= len(chunk)
        first = read[cid] - len(chunk)
        if not unchanged[0]:
            data.check_unchanged()
            unchanged[0] = True
        while chunk:
            try:
                outcome = memory.append_outcome(cid, chunk, namespace=namespace, expect_position=first,
                                                expect_incarnation=incarnation[cid])
            except PositionMismatch:
                now = recheck(cid, first)
                # another import wrote from `first`: what it holds is present, the rest of
                # the chunk goes after it
                report.already_present += now - first
                if progress is not None and now > first:
                    progress(now - first)
                skip_to[cid] = now  # messages not read yet up to there are stored already
                chunk, first = chunk[now - first:], now
                continue
            incarnation[cid] = outcome.incarnation
            appended[cid] += len(chunk)
            if progress is not None:
                progress(len(chunk))
            chunk = []

    def changed(problem: str) -> NoReturn:
        raise DataFileError(str(data.path), f"changed while it was imported ({problem}); import it again")

    for cid, msg in data.rows():
        conv = by_id.get(cid)
        if conv is None or read[cid] >= conv.n_messages:
            changed(f"conversation {cid!r} has more messages than when it was checked")
        if message_digest(msg) != conv.check(read[cid]):
            changed(f"message {read[cid]} of conversation {cid!r} is not the one checked")
        read[cid] += 1
        if read[cid] <= starts[cid]:
            continue  # stored already
        if read[cid] <= skip_to.get(cid, 0):  # stored by another import, counted by flush
            if read[cid] == conv.n_messages and finished is not None:
                finished(appended[cid], cid)
            continue
        waiting.setdefault(cid, []).append(msg)
        held += 1
        if len(waiting[cid]) >= batch or read[cid] == conv.n_messages:
            flush(cid)
            if read[cid] == conv.n_messages and finished is not None:
                finished(appended[cid], cid)
        elif held >= batch * MAX_PENDING_CHUNKS:  # many conversations interleaved: bound what waits
            for other in list(waiting):
                flush(other)
    for c in counts:
        if read[c.conversation_id] != c.n_messages:
            changed(f"conversation {c.conversation_id!r} has fewer messages than when it was checked")
        if c.n_messages == starts[c.conversation_id] and finished is not None:
            finished(0, c.conversation_id)  # all stored already: nothing was appended to call it
    report.appended = sum(appended.values())
    return report


@dataclass
class ExportReport:
    """What `export_lines` left out, for its caller to say: stored rows the store could
    not read (`Memory.history` skips them, logging a salvage warning: a row an older
    release stored in a form read today refuses), stored rows read but that `tiermem
    import` refuses (`refused`), retractions that hid one of those (kept, they would hide
    whatever the import writes at that place), as (conversation, position) pairs in the
    store's numbering."""
    unreadable: list[tuple[str, int]] = field(default_factory=list)
    # (conversation, position, import's error): rows history reads as stored but an import
    # of their line refuses, as append refuses them today (stored before a check was added:
    # a reasoning item without an id, a message whose tool calls repeat an id; or over this
    # store's content or metadata limit): written, the file would not restore
    refused: list[tuple[str, int, str]] = field(default_factory=list)
    # (conversation, import's error): conversations whose id the import refuses (`_conv_id`:
    # longer than this store's `max_id_chars`, lowered after they were created, or outside
    # today's id rules): every line of theirs would be refused, so none is written
    refused_ids: list[tuple[str, str]] = field(default_factory=list)
    dropped_retractions: list[tuple[str, int]] = field(default_factory=list)
    # of `unreadable` and `refused`, those no view shows (conversation, position, how:
    # "retracted", or "before the clear at position N"): still rows of the history, which
    # history() returns whatever hides them, so they are left out all the same and said apart
    hidden: list[tuple[str, int, str]] = field(default_factory=list)
    # conversations of the namespace's listing erased or pruned before their reading:
    # rightly not exported (an erasure is meant to leave no copy), said to the user
    vanished: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.unreadable and not self.refused and not self.refused_ids and not self.dropped_retractions


def _import_refusal(line: dict[str, Any], limits: dict[str, int]) -> str | None:
    """What `tiermem import` would say of an export's `line` (None: it reads it), checked
    as the import checks a message line (`_message`)."""
    try:
        _message(line, limits, remedy=False)
    except ValidationError as exc:
        return str(exc)
    return None


def _id_refusal(cid: str, max_id_chars: int) -> str | None:
    """What `tiermem import` would say of a line of conversation `cid` (None: it reads
    it), checked as the import checks each line's conversation id (`_conv_id`)."""
    try:
        _conv_id({"conversation_id": cid}, None, max_id_chars)
    except ValidationError as exc:
        return str(exc)
    return None


def export_lines(memory: Any, conversation_ids: list[str] | None, *, namespace: str,
                 report: ExportReport | None = None) -> Iterator[dict[str, Any]]:
    """Every stored message of the conversations (all of `namespace`'s when None) as lines
    of the conversations format, in log order: `tiermem import` of them gives the same
    histories (bodies, sessions, metadata, times), and re-importing into the same data dir
    appends nothing. A body is written in the form append admits today
    (`tiers.formats.as_appended`: a reasoning item stored before its summary was required
    gets `summary: []`, so the line imports; its copy is read as the original is sent). A
    conversation named twice is exported once (import would read the second copy as more
    messages of the same conversation). Only messages (control rows included) are
    exported: pins, checkpoints, facts and supersessions, fork ancestry (parent, fork
    position), idempotency keys, plans and vectors are not (`tiers.migrate_store` copies
    them; vectors are computed again after an import).

    Positions: an import numbers a conversation's messages by their place in the file,
    so a stored row that cannot be read (a gap in what history returns, or missing at its
    end) would move every later message down one, and a retraction, which names a
    position, would hide another message. Each retraction's position is written in the
    file's numbering (the place of the message it hides among the lines written), and
    one that hid an unreadable row is left out; both go to `report`, which the caller
    must say (the export is not the store's whole log). An unreadable row a later clear
    or a retraction hides is left out as any other (history() returns hidden rows, so
    the export without it is not the log either) and also goes to `report.hidden`: its
    loss changes no context.

    Every line is checked as the import will read it (`_message`, under this store's
    limits): a row history reads as stored but append refuses today (stored before a
    check was added: a reasoning item without an `id`, tool calls repeating an id) would
    make a file whose import refuses it, a backup that does not restore. Such a row is
    left out as an unreadable one is (a retraction naming it too) and goes to
    `report.refused` with the import's error. So is each conversation id (`_conv_id`,
    under this store's `max_id_chars`): a conversation created before the limit was
    lowered (or under looser id rules) is left out whole, its rows unread, and goes to
    `report.refused_ids` with the import's error.

    The namespace is listed once, then each conversation read (by its key, whole, then
    its name looked up again): one erased or pruned meanwhile (before or during its
    reading: an erasure detaches a large conversation, then deletes its rows in batches)
    is not exported and goes to `report.vanished`; one the caller named raises
    ConversationNotFound instead, as it would have before the export began."""
    report = report if report is not None else ExportReport()
    config = memory.config
    limits = {"max_content_bytes": config.max_content_bytes, "max_metadata_bytes": config.max_metadata_bytes}
    ids = memory.conversations(namespace) if conversation_ids is None else list(dict.fromkeys(conversation_ids))
    for cid in ids:
        key = memory.cold.key_of(namespace, cid)
        id_problem = None if key is None else _id_refusal(cid, config.max_id_chars)
        if id_problem is not None:
            report.refused_ids.append((cid, id_problem))
            continue
        # read before the rows: what is appended meanwhile is past it, and no gap
        last = memory.cold.last_position(key) if key is not None else -1
        rows = memory.cold.history(key) if key is not None else []
        if key is None or memory.cold.key_of(namespace, cid) != key:
            if conversation_ids is not None:
                raise ConversationNotFound(cid, namespace)
            report.vanished.append(cid)
            continue
        at: dict[int, int] = {}  # a stored position -> its place in the file
        expected = 0  # the stored position the next row read should have
        gaps: list[int] = []  # this conversation's unreadable positions
        refused: list[int] = []  # its rows read but refused by an import (`_import_refusal`)
        controls: list[tuple[int, dict[str, Any]]] = []  # what may hide them
        for m in rows:
            gaps += range(expected, m.position)
            expected = m.position + 1
            body = as_appended(m.body)
            if is_control(body):
                controls.append((m.position, body))
            if body.get("type") == RETRACT_TYPE:
                if body["position"] not in at:  # an unreadable row, or a retraction left out itself
                    report.dropped_retractions.append((cid, m.position))
                    continue
                body = {**body, "position": at[body["position"]]}
            line: dict[str, Any] = {"conversation_id": cid, "message": body, "created_at": m.created_at}
            if m.session_id is not None:
                line["session_id"] = m.session_id
            if m.metadata is not None:
                line["metadata"] = m.metadata
            problem = _import_refusal(line, limits)
            if problem is not None:
                refused.append(m.position)
                report.refused.append((cid, m.position, problem))
                continue
            at[m.position] = len(at)
            yield line
        # rows past the last one read: no later clear or retraction hides them
        gaps += range(expected, last + 1)
        report.unreadable += [(cid, p) for p in gaps]
        hidden, clear = hidden_positions(controls)
        report.hidden += [(cid, p, f"before the clear at position {clear}" if p < clear else "retracted")
                          for p in sorted(gaps + refused) if p < clear or p in hidden]
