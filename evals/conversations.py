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
  in file order; `answer` is optional (answer coverage). Probes are asked once the whole
  conversation is in memory.

Messages keep file order within a conversation; conversations keep the order of their
first line.

**LoCoMo** (a JSON list of samples with a `conversation` object, as `evals.locomo`
reads; a list in which any item has a `conversation` field is read as LoCoMo, and a
sample that is not an object or whose `conversation` is not one refuses the file, named
by `evals.locomo`): each sample becomes a conversation `locomo-<sample_id>` with the roles, times,
sessions and `dia_id`s `evals.locomo` gives it, its `qa` become probes (evidence: the
`dia_id`s; malformed ids are dropped and counted in `skipped_evidence`). A turn with no
`text`, a field of the wrong type (`locomo.turn_problem`) or an item of a session that is
not a turn object is a bad turn; `checked_samples` checks a file so for `tiermem eval`.

Every message is validated as `Memory.append` would (limits from the Config), and kept
in the form `append` stores (an openai SDK object's serialized form in its wire form:
`tiers.models.parse_message`), so that an import recognises the messages it wrote before
and a re-import adds nothing. So is what `Memory.append_many` checks beyond the message:
the conversation id's length (`max_id_chars`) and that a retraction names an earlier
message of its conversation (positions counted in file order within the conversation:
the positions the import writes). A bad line is reported by line number (LoCoMo: the sample's number in the
list, its id and the turn's `dia_id`); `strict` (the default) refuses the file with every
bad line named and nothing read, otherwise bad lines (LoCoMo: bad turns) are skipped and
listed (a file whose every line is bad is refused with them named). So an import either writes the whole file or stops before writing anything.

A UTF-8 byte order mark that starts the file is ignored (as RFC 8259 allows). JSONL
lines end at "\n" only (a "\r" before it is dropped): U+2028, U+2029, U+0085 and
the other characters `str.splitlines` breaks at are text inside a JSON string.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn

from tiermem.config import MAX_ID_CHARS_LIMIT, Config
from tiermem.evals.locomo import (
    DIA_ID,
    LocomoError,
    Sample,
    conversation_ids,
    load_samples,
    samples_of,
    session_times,
    turn_message,
)
from tiermem.tiers.errors import DataFileError, LimitExceeded, ValidationError
from tiermem.tiers.formats import canonical_role, is_control
from tiermem.tiers.models import ENVELOPE_FIELDS, ID_PATTERN, parse_message

Format = Literal["conversations", "locomo", "demo"]  # demo: evals.demo_data
BAD_LINES_SHOWN = 5  # in the error that refuses a file: the first few, then a count
# the end of that error: what the reader of it can do (import has --skip-bad; tune, the evals
# and the benchmarks have not)
SKIP_BAD_HINT = "fix them or pass --skip-bad to skip them"
FIX_HINT = "fix them"
ALL_BAD_HINT = "no good line is left to import: fix them"  # skipping bad lines skipped them all
ENVELOPE_KEYS = frozenset({"conversation_id", "message_id"})
IMPORT_KEY_PREFIX = "tiermem-import"  # of the idempotency keys an import appends its chunks under


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

    def evidence_positions(self, probe: Probe) -> tuple[list[int], int]:
        """Indexes (= log positions when the conversation was imported into an empty id)
        of a probe's evidence, deduplicated, and how many entries name no message."""
        by_id = {m: i for i, m in enumerate(self.message_ids) if m is not None}
        out: list[int] = []
        missing = 0
        for e in probe.evidence:
            i = e if isinstance(e, int) and not isinstance(e, bool) else by_id.get(str(e))
            if i is None or not 0 <= i < len(self.messages):
                missing += 1
            elif i not in out:
                out.append(i)
        return out, missing

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


def _message(obj: dict[str, Any], limits: dict[str, int]) -> tuple[dict[str, Any], str | None]:
    """(the message as Memory.append takes it, its message_id), validated."""
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
    # raises ValidationError naming the field
    parsed = parse_message(msg, max_content_bytes=limits["max_content_bytes"],
                           max_metadata_bytes=limits["max_metadata_bytes"])
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
    with `position` the message's index in its conversation, which is its log position
    once imported (an import appends to an empty conversation or after the same messages)."""
    if is_control(msg) and "position" in msg and msg["position"] >= position:
        raise ValidationError(field, f"must name an earlier message: {msg['position']} is not written yet "
                              f"(this row would be written at position {position})")


def _add(obj: Any, convs: dict[str, ConversationData], limits: dict[str, int], default_conv: str | None) -> None:
    """Parse one object of the conversations format into `convs`; all or nothing."""
    if not isinstance(obj, dict):
        raise ValidationError("line", f"must be a JSON object, got {type(obj).__name__}")
    cid = _conv_id(obj, default_conv, limits["max_id_chars"])
    new = ConversationData(cid)
    start = len(convs[cid].messages) if cid in convs else 0  # the next message's position
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
            _check_control(msg, start + i, f"messages[{i}].position")
            new.messages.append(msg)
            new.message_ids.append(mid)
        probes = obj.get("probes", [])
        if not isinstance(probes, list):
            raise ValidationError("probes", "must be a list")
        new.probes = [_probe(p) for p in probes]
    elif "probe" in obj:
        new.probes = [_probe(obj["probe"])]
    else:
        msg, mid = _message(obj, limits)
        _check_control(msg, start, "position")
        new.messages.append(msg)
        new.message_ids.append(mid)
    have = convs.setdefault(cid, ConversationData(cid))
    have.messages += new.messages
    have.message_ids += new.message_ids
    have.probes += new.probes


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
    refuses (a date before 1970, a lone surrogate, a text over `max_content_bytes`)."""
    def refuse(turn_name: str, problem: object) -> None:
        bad.append(BadLine(number, f"sample {s.sample_id!r}, turn {turn_name!r}: {problem}"))

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
            yield turn.dia_id, msg


def _samples(path: Path, doc: Any = None) -> list[Sample]:
    """The file's samples: read from `path`, or from `doc` when its JSON is read already."""
    try:
        return load_samples(path) if doc is None else samples_of(doc, path)
    except LocomoError as exc:
        raise DataFileError(str(path), str(exc)) from None


def _read_locomo(path: Path, doc: Any, limits: dict[str, int], strict: bool, hint: str) -> Dataset:
    """A LoCoMo file (`doc`: its JSON, read once), every turn checked as `append` would
    check it; a bad turn is named by its sample (number in the list and id) and `dia_id`,
    and refuses the file (`strict`) or is left out."""
    samples = _samples(path, doc)
    convs: list[ConversationData] = []
    bad: list[BadLine] = []
    skipped = 0
    # unique within the file: two samples under one id would be replayed as one conversation
    ids = locomo_ids([s.sample_id for s in samples], limits["max_id_chars"])
    for number, (s, cid) in enumerate(zip(samples, ids, strict=True), start=1):
        c = ConversationData(cid)
        for dia_id, msg in _sample_turns(number, s, limits, bad):
            c.messages.append(msg)
            c.message_ids.append(dia_id or None)
        for qa in s.qa:
            ev: list[str | int] = []
            for e in qa.evidence:
                if DIA_ID.match(e.strip()):
                    ev.append(e.strip())
                else:
                    skipped += 1
            c.probes.append(Probe(qa.question, ev, qa.answer, qa.category))
        convs.append(c)
    if bad and strict:
        _refuse(path, bad, "turn", "sample #", hint)
    return Dataset(path, "locomo", convs, bad, skipped_evidence=skipped)


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


def _is_locomo(doc: Any) -> bool:
    # one sample with a `conversation` field makes the list LoCoMo (no object of the
    # conversations format has that field): a malformed sample among good ones is then
    # named by the LoCoMo reader, not every sample refused for lacking a conversation_id
    return isinstance(doc, list) and any(isinstance(s, dict) and "conversation" in s for s in doc)


def _jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based number, line) of a JSONL text. Lines end at "\n" only, not where
    `str.splitlines` would also break (U+2028, U+2029, U+0085, \x0b, \x0c, \x1c-\x1e):
    those are text inside a JSON string, as `tiermem export` writes it. A "\r" before the
    "\n" (a CRLF file) is dropped."""
    for n, line in enumerate(text.split("\n"), start=1):
        yield n, line.removesuffix("\r")


def read_conversations(
    path: Path,
    *,
    max_content_bytes: int,
    max_metadata_bytes: int,
    max_id_chars: int = MAX_ID_CHARS_LIMIT,
    strict: bool = True,
    conversation_id: str | None = None,
    hint: str = SKIP_BAD_HINT,
) -> Dataset:
    """Read a conversations-format file (JSONL or JSON) or a LoCoMo file, once: `path` may
    be a pipe (`/dev/stdin`). `conversation_id` is the id of lines that give none. Raises DataFileError naming the file and line,
    ending with `hint` (what the caller's user can do). `max_id_chars`: the Config's
    (every reader of a user's file passes it, so that a file `tiermem import` refuses is
    refused by all of them; the default is the largest any Config allows)."""
    path = Path(path)
    if path.is_dir():
        raise DataFileError(str(path), "is a directory, not a file")
    try:
        # utf-8-sig: a byte order mark a Windows tool put first is no part of the text
        # (RFC 8259 lets a reader ignore it); one inside a JSON string stays text. Read
        # once, whatever the path is: a pipe (`/dev/stdin`, `<(zcat f.jsonl.gz)`) has no
        # second reading
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise DataFileError(str(path), "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFileError(str(path), f"cannot be read as UTF-8 text: {exc}") from None
    limits = {"max_content_bytes": max_content_bytes, "max_metadata_bytes": max_metadata_bytes,
              "max_id_chars": max_id_chars}
    stripped = text.lstrip()
    doc: Any = None
    if stripped.startswith("["):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as exc:  # an integer past 4,300 digits, deep nesting
            raise DataFileError(str(path), f"is not valid JSON: {exc}") from None
        if _is_locomo(doc):
            return _read_locomo(path, doc, limits, strict, hint)
        if not isinstance(doc, list):  # pragma: no cover - starts with '['
            raise DataFileError(str(path), "is not a JSON list")
        objects: list[tuple[int, Any]] = list(enumerate(doc, start=1))
    else:
        objects = []
        bad_json: list[BadLine] = []
        for n, line in _jsonl_lines(text):
            if not line.strip():
                continue
            try:
                objects.append((n, json.loads(line)))
            except json.JSONDecodeError as exc:
                bad_json.append(BadLine(n, f"not valid JSON ({exc.msg})"))
            except (ValueError, RecursionError) as exc:  # an integer past 4,300 digits, deep nesting
                bad_json.append(BadLine(n, f"not valid JSON ({type(exc).__name__}: {str(exc)[:200]})"))
    convs: dict[str, ConversationData] = {}
    bad = [] if stripped.startswith("[") else bad_json
    for n, obj in objects:
        try:
            _add(obj, convs, limits, conversation_id)
        except ValidationError as exc:
            bad.append(BadLine(n, str(exc)))
    bad.sort(key=lambda b: b.line)
    if bad and strict:
        _refuse(path, bad, "line", "line ", hint)
    if not convs and bad:  # skipping every line left nothing: say why, not just that
        _refuse(path, bad, "line", "line ", ALL_BAD_HINT)
    if not convs:
        raise DataFileError(str(path), "holds no conversation")
    return Dataset(path, "conversations", list(convs.values()), bad)


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


def _body(msg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in msg.items() if k not in ENVELOPE_FIELDS}


def stored_prefix(memory: Any, conv: ConversationData, namespace: str) -> int:
    """How many of `conv`'s messages the data dir already holds, in order (0 when the
    conversation is new; all of them when the stored conversation went on past the file).
    ImportConflict when a stored message differs from the file's at the same position."""
    from tiermem.tiers.errors import ImportConflict

    if memory.cold.key_of(namespace, conv.conversation_id) is None:
        return 0
    stored = memory.history(conv.conversation_id, namespace=namespace)
    for i, m in enumerate(stored[: len(conv.messages)]):
        if m.body != _body(conv.messages[i]):
            raise ImportConflict(conv.conversation_id, m.position)
    # a conversation that went on after the import: the file is a prefix of it, all present
    return min(len(stored), len(conv.messages))


def chunk_key(position: int, chunk: list[dict[str, Any]]) -> str:
    """The idempotency key an import appends `chunk` under: its position in the
    conversation and a digest of its messages (envelopes included), so the same chunk of
    the same file has the same key whoever writes it, and another chunk never shares it."""
    text = json.dumps(chunk, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return f"{IMPORT_KEY_PREFIX}:{position}:{hashlib.sha256(text.encode('utf-8')).hexdigest()}"


def import_dataset(memory: Any, data: Dataset, *, namespace: str, batch: int = 1000,
                   progress: Any = None, finished: Any = None) -> ImportReport:
    """Append every conversation of `data` in `namespace`. Idempotent: messages the data
    dir already holds (the same bodies, in order) are skipped, so a re-import appends
    nothing and an import of a longer file appends only the new tail. Two imports of the
    same file at once write it once: both may find a conversation without what the file
    adds (each checks before writing), so each chunk is appended under `chunk_key`, and
    the second writer of a chunk writes nothing (counted as already present).
    `finished(n, name)` is called after each conversation with the messages it appended
    and its name (tiermem/ingest.py)."""
    report = ImportReport(bad_lines=list(data.bad))
    # check every conversation before writing any, so a conflict writes nothing
    starts = [stored_prefix(memory, c, namespace) for c in data.conversations]
    for conv, start in zip(data.conversations, starts, strict=True):
        report.conversations += 1
        report.probes += len(conv.probes)
        report.already_present += start
        if progress is not None:
            progress(start)
        appended = 0
        for i in range(start, len(conv.messages), batch):
            chunk = conv.messages[i:i + batch]
            outcome = memory.append_outcome(conv.conversation_id, chunk, namespace=namespace,
                                            idempotency_key=chunk_key(i, chunk))
            if outcome.replayed:  # another import wrote this chunk since the check above
                report.already_present += len(chunk)
            else:
                appended += len(chunk)
            if progress is not None:
                progress(len(chunk))
        report.appended += appended
        if finished is not None:
            finished(appended, conv.conversation_id)
    return report


def export_lines(memory: Any, conversation_ids: list[str] | None, *, namespace: str) -> Iterator[dict[str, Any]]:
    """Every stored message of the conversations (all of `namespace`'s when None) as lines
    of the conversations format, in log order: `tiermem import` of them gives the same
    histories (bodies, sessions, metadata, times), and re-importing into the same data dir
    appends nothing. A conversation named twice is exported once (import would read the
    second copy as more messages of the same conversation)."""
    ids = memory.conversations(namespace) if conversation_ids is None else list(dict.fromkeys(conversation_ids))
    for cid in ids:
        for m in memory.history(cid, namespace=namespace):
            line: dict[str, Any] = {"conversation_id": cid, "message": m.body, "created_at": m.created_at}
            if m.session_id is not None:
                line["session_id"] = m.session_id
            if m.metadata is not None:
                line["metadata"] = m.metadata
            yield line
