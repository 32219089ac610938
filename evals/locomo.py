"""LoCoMo under eviction: evidence recall and answer coverage at fixed token budgets.

    tiermem eval locomo --data ../shared/data/locomo-dev.json --budget 1000 --budget 2000 --json

Reads any file in the LoCoMo format (a JSON list of samples, see
../shared/data/README.md); nothing here names a sample, a speaker or a question. Every
turn is checked as `tiermem import` checks it (`evals.conversations.checked_samples`,
under the Memory's Config), before anything is written: a bad turn (no text, a field of
the wrong type, a date before 1970, ...) refuses the file with import's error, naming
its sample and dia_id. The probes' lenient reader (`load_samples`) checks only the file's
shape; each of its refusals, as each of the checked reader's, names the file once, in
front (`x.json: sample 'b': ...`).

Ingestion (one conversation per sample, each in its own namespace, so that a sample's
questions can never retrieve another sample's turns):

- conversation id and namespace: ``locomo-<sample_id>`` (characters outside the id
  alphabet become ``_``; cut to the Config's ``max_id_chars``, as `tiermem import`
  cuts them; a sample whose id maps to one an earlier sample of the file
  took gets ``-2``, ``-3``, ...); a conversation the data dir already holds is reused
  only when its turns are the sample's (else the run stops: use a fresh data dir);
- turns in session order (``session_1``, ``session_2``, ... by number), one
  `append_many` (one transaction) per session; a sample with no turns at all (every
  session empty) writes no conversation, and its questions are asked of an empty context
  (`baselines.no_context`, 0 ms; their evidence counts as missing);
- roles: ``speaker_a`` -> ``"user"``, ``speaker_b`` -> ``"assistant"``; ``name`` is the
  speaker's name as written (cut to 64 characters), so both speakers stay
  distinguishable; a speaker that is neither (none in the published data) becomes a
  ``"user"`` and is counted in ``unknown_speakers``;
- content: the turn's ``text``, plus `` [image: <blip_caption>]`` when it has one;
- ``session_id``: ``session_<N>``; ``created_at``: the parsed ``session_<N>_date_time``
  (UTC) plus one second per turn, so times increase within a session;
- metadata: ``{"dia_id": ...}``;
- never fed: ``observation``, ``session_summary``, ``event_summary`` (LLM-written), nor
  ``img_url``, ``query`` or any ``qa`` field.

Eviction is on: the Memory runs with its hot tier (budget `Config.hot_budget_tokens`).
If the hot tier cannot start, the run says so on stderr and in ``hot_tier`` and goes on
cold-only.

Every question is asked of a fresh context, as the first call of its conversation: tiermem's
`context()` runs as a what-if plan (``record=False``), which keeps no prompt-cache epoch
state (planner.epoch) for the next call, and the states a data dir's Redis may still hold
from earlier runs are dropped before the first question. So no question's context shows,
or makes way for, what another question (or another budget) retrieved, and a budget scores
the same alone, beside other budgets, in any order. (Before, one budget alone extended each
question's context from the previous question's epoch, while several budgets changed the
epoch's key at every call: 93.58% alone against 93.78% in the four-budget run at 2,000.)
A flow of questions within epochs is the session eval's (evals.session).

Scores per method and budget, over the questions (``qa``; an item of ``qa`` that is not
an object, or a question whose ``evidence`` is not a list, refuses the file, naming the
sample and the item):

- evidence recall: the share of a question's evidence turns whose log position the
  context includes verbatim or trimmed (for tiermem: plan items of that fidelity),
  averaged over questions with at least one usable evidence id; overall and by
  category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial).
  Malformed ids (not ``D<int>:<int>``, e.g. ``"D8:6; D9:17"``, a number, a null) are
  skipped and counted in ``skipped_evidence_ids``; well-formed ids absent from the conversation in
  ``missing_evidence_ids``. An id names the first turn that carries it
  (`evidence_index`, the one rule of every eval and `tune`); a file whose sample gives
  one `dia_id` to two turns is refused by the checked reader, naming the sample and the
  id, since a question's evidence would name both;
- answer coverage: the share of questions with an answer (``adversarial_answer`` for
  category 5) whose normalized answer (lowercase, punctuation and the articles a/an/the
  removed, whitespace collapsed) occurs in the normalized context text as a run of
  whole words;
- mean (and max) context tokens, the full conversation's tokens (mean over samples),
  latency p50/p99 in ms (for tiermem: the `context()` call, query embedding included).

``--limit-questions K`` takes the first K questions of each sample; ``--limit-samples S``
the first S samples.
"""

from __future__ import annotations

import calendar
import datetime as dt
import hashlib
import json
import re
import string
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.progress import Progress, TaskID
from rich.table import Table

from tiermem.config import DEFAULT_MAX_ID_CHARS
from tiermem.evals.baselines import (
    BASELINES,
    METHODS,
    TIERMEM,
    ConvView,
    MethodOutput,
    mean,
    no_context,
    percentiles,
    rank_all,
    run_baseline,
    suffixed_id,
    tiermem_context,
    tiermem_runs,
    verify_positions,
)
from tiermem.memory import Memory
from tiermem.tiers.errors import LocomoError
from tiermem.tiers.models import ID_PATTERN, NAME_MAX_CHARS, StoredMessage, message_text
from tiermem.tiers.tokens import messages_tokens

DEFAULT_DATA = Path("..") / "shared" / "data" / "locomo-dev.json"
DEFAULT_BUDGETS: tuple[int, ...] = (500, 1000, 2000, 4000)
CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
DIA_ID = re.compile(r"^D(\d+):(\d+)$")
SESSION_KEY = re.compile(r"^session_(\d+)$")
FALLBACK_EPOCH = 1_600_000_000.0  # when no session date of a sample parses at all
DAY_S = 86_400.0
ID_MAX_CHARS = DEFAULT_MAX_ID_CHARS  # a conversation id the harness makes fits the default id limit
# a directory name made from a sample id (`sample_dir_names`): far below the 255 bytes a
# file system allows a name, with room for the digest
DIR_NAME_MAX_CHARS = 64
DIR_DIGEST_BYTES = 4  # of the blake2b digest that tells apart ids whose slugs agree (8 hex characters)
# a sample id used as a directory name as it is: one plain name, not ".", "..", a hidden
# or an option-like name, no separator
_PLAIN_DIR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


# ---------------------------------------------------------------------------------------
# Data


@dataclass
class Turn:
    speaker: str
    dia_id: str
    text: str
    blip_caption: str | None = None
    index: int = 0  # 1-based place in its session's list in the file (names a turn without a dia_id)
    # (field, problem) of a turn object that is not as the format says (`turn_problem`):
    # the checked reader (`evals.conversations`) refuses it, the other evals read it leniently
    problem: tuple[str, str] | None = None


@dataclass
class Session:
    number: int
    date_text: str | None
    turns: list[Turn]
    # items of the session's list that are not turn objects: (1-based place, JSON type);
    # left out of `turns`, refused by the checked reader
    malformed: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class QA:
    question: str
    answer: str | None
    category: int
    evidence: list[str]


@dataclass
class Sample:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: list[Session]
    qa: list[QA]

    @property
    def n_turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


_MONTHS: dict[str, int] = {}
for _i in range(1, 13):
    _MONTHS[calendar.month_name[_i].lower()] = _i
    _MONTHS[calendar.month_abbr[_i].lower()] = _i
_MONTHS["sept"] = 9
_TIME = re.compile(r"(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?\s*([ap])\.?\s*m\.?\b", re.I)
_TIME24 = re.compile(r"\b(\d{1,2}):(\d{2})(?::(\d{2}))?\b")
_DMY = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+([A-Za-z]{3,9})\.?,?\s+(\d{4})\b")
_MDY = re.compile(r"\b([A-Za-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b")
_ISO = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)")  # a "T" or a time may follow


def parse_session_date(text: str | None) -> float | None:
    """Unix seconds (UTC) for a LoCoMo session date such as ``"1:56 pm on 8 May, 2023"``.

    Tolerant: day-month-year or month-day-year with full or abbreviated month names,
    ISO dates, 12- or 24-hour times or none (midnight); None when no date is found. A
    whole ISO 8601 date-time (``2023-05-08T13:56:00Z``, an offset such as ``+02:00`` taken
    into account) is read as one, with its time; no zone means UTC."""
    if not text or not isinstance(text, str):
        return None
    s = text.strip()
    try:
        # a machine-written date: the regexes below find no time after its "T", and its
        # zone would be lost
        iso = dt.datetime.fromisoformat(s)
    except ValueError:
        pass
    else:
        return (iso if iso.tzinfo is not None else iso.replace(tzinfo=dt.UTC)).timestamp()
    year = month = day = None
    m_iso = _ISO.search(s)
    if m_iso:
        year, month, day = int(m_iso.group(1)), int(m_iso.group(2)), int(m_iso.group(3))
    else:
        for rx, order in ((_DMY, "dmy"), (_MDY, "mdy")):
            m = rx.search(s)
            if not m:
                continue
            if order == "dmy":
                d_s, mon_s, y_s = m.group(1), m.group(2), m.group(3)
            else:
                mon_s, d_s, y_s = m.group(1), m.group(2), m.group(3)
            mon = _MONTHS.get(mon_s.lower())
            if mon is None:
                continue
            year, month, day = int(y_s), mon, int(d_s)
            break
    if year is None or month is None or day is None:
        return None
    hour = minute = second = 0
    m_t = _TIME.search(s)
    if m_t:
        hour = int(m_t.group(1)) % 12 + (12 if m_t.group(4).lower() == "p" else 0)
        minute = int(m_t.group(2) or 0)
        second = int(m_t.group(3) or 0)
    else:
        m_t24 = _TIME24.search(s)
        if m_t24:
            hour, minute, second = int(m_t24.group(1)), int(m_t24.group(2)), int(m_t24.group(3) or 0)
    try:
        when = dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC)
    except ValueError:
        try:
            when = dt.datetime(year, month, day, tzinfo=dt.UTC)
        except ValueError:
            return None
    return when.timestamp()


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


_JSON_TYPES: dict[type, str] = {dict: "object", list: "array", str: "string", int: "number", float: "number",
                                bool: "boolean", type(None): "null"}
TURN_STRING_FIELDS = ("text", "speaker", "dia_id", "blip_caption")


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, for errors about the file."""
    return _JSON_TYPES.get(type(value), type(value).__name__)


def turn_problem(raw: dict[str, Any]) -> tuple[str, str] | None:
    """(field, problem) of the first field of a turn object that is not as the format
    says (`text` present and a string; `speaker`, `dia_id`, `blip_caption` strings when
    given), else None. `parse_sample` reads such a turn leniently (a missing text as
    "", a number as its digits) for the evals that replay files they trust; the checked
    reader (`evals.conversations`, for `tiermem import` and `tiermem eval`) refuses it
    rather than store a turn the file never said."""
    if raw.get("text") is None:
        return "text", "missing (every turn has a text, a string)"
    for name in TURN_STRING_FIELDS:
        value = raw.get(name)
        if value is not None and not isinstance(value, str):
            return name, f"must be a string, got {_json_type(value)}"
    return None


def parse_sample(raw: Any, index: int) -> Sample:
    if not isinstance(raw, dict):
        raise LocomoError(f"sample #{index} is not an object")
    sample_id = _as_text(raw.get("sample_id")) or f"sample{index}"
    conv = raw.get("conversation")
    if not isinstance(conv, dict):
        raise LocomoError(f"sample {sample_id!r} has no 'conversation' object")
    speaker_a = _as_text(conv.get("speaker_a")) or "speaker_a"
    speaker_b = _as_text(conv.get("speaker_b")) or "speaker_b"
    sessions: list[Session] = []
    for key, value in conv.items():
        m = SESSION_KEY.match(key)
        if not m or not isinstance(value, list):
            continue
        n = int(m.group(1))
        turns: list[Turn] = []
        malformed: list[tuple[int, str]] = []
        for place, t in enumerate(value, start=1):
            if not isinstance(t, dict):
                malformed.append((place, _json_type(t)))
                continue
            turns.append(
                Turn(
                    speaker=_as_text(t.get("speaker")) or "",
                    dia_id=_as_text(t.get("dia_id")) or "",
                    text=str(t.get("text") or ""),
                    blip_caption=_as_text(t.get("blip_caption")),
                    index=place,
                    problem=turn_problem(t),
                )
            )
        date = conv.get(f"session_{n}_date_time")
        sessions.append(Session(n, date if isinstance(date, str) else None, turns, malformed))
    sessions.sort(key=lambda s: s.number)
    qa: list[QA] = []
    raw_qa = raw.get("qa") or []
    if not isinstance(raw_qa, list):
        raise LocomoError(f"sample {sample_id!r}: 'qa' must be a list, got {_json_type(raw_qa)}")
    for place, q in enumerate(raw_qa, start=1):
        if not isinstance(q, dict):
            # refused as a malformed evidence list is: skipped, the question was lost from
            # every figure with nothing said (counted from 1, as a session's turns are)
            raise LocomoError(f"sample {sample_id!r}: qa item #{place} must be an object (a question with "
                              f"its answer and evidence), got {_json_type(q)}")
        try:
            category = int(q.get("category", 0))
        except (TypeError, ValueError):
            category = 0
        answer = q.get("answer")
        if answer is None:
            answer = q.get("adversarial_answer")
        evidence = q.get("evidence") or []
        if isinstance(evidence, str):
            evidence = [evidence]
        if not isinstance(evidence, list):
            raise LocomoError(f"sample {sample_id!r}: a question's 'evidence' must be a list of dia_ids, "
                              f"got {_json_type(evidence)}")
        qa.append(
            QA(
                str(q.get("question") or ""),
                _as_text(answer),
                category,
                # every entry kept as text, a null too ("None"): not an id, it is counted with
                # the other malformed ones (skipped_evidence_ids) instead of vanishing
                [str(e) for e in evidence],
            )
        )
    return Sample(sample_id, speaker_a, speaker_b, sessions, qa)


def load_samples(path: Path) -> list[Sample]:
    """The samples of the LoCoMo file at `path`, as parsed (the lenient reader: no turn is
    checked as import checks it). Every refusal is a LocomoError naming the file once, in
    front."""
    path = Path(path)
    if not path.is_file():
        raise LocomoError("is a directory, not a LoCoMo data file" if path.is_dir()
                          else "no such LoCoMo data file", path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8-sig"))  # a leading byte order mark is not JSON
    except (OSError, ValueError) as exc:
        raise LocomoError(f"cannot be read as JSON: {exc}", path) from None
    return samples_of(raw, path)


def samples_of(raw: Any, path: Path) -> list[Sample]:
    """The samples of a LoCoMo file's parsed JSON (`path` names the file in the error, once),
    for a reader that has read the file already: a pipe reads only once."""
    if not isinstance(raw, list):
        raise LocomoError("is not a JSON list of LoCoMo samples", path)
    try:
        return [parse_sample(s, i) for i, s in enumerate(raw)]
    except LocomoError as exc:
        # parse_sample names the sample and its item; which file they are in is said here
        raise LocomoError(exc.problem, path) from None


# ---------------------------------------------------------------------------------------
# Ingestion


def id_text(text: str) -> str:
    """`text` in the id alphabet: every other character becomes `_`."""
    return re.sub(r"[^A-Za-z0-9._:@-]", "_", text)


def conversation_id(sample_id: str) -> str:
    cid = "locomo-" + id_text(sample_id)
    if not ID_PATTERN.fullmatch(cid):  # pragma: no cover - the prefix makes it match
        raise LocomoError(f"cannot make an id from sample id {sample_id!r}")
    return cid[:ID_MAX_CHARS]


def conversation_ids(sample_ids: Sequence[str], max_chars: int = ID_MAX_CHARS) -> list[str]:
    """A conversation id per sample, unique within the file: `conversation_id`, and for a
    sample whose id maps to one already taken (`team/1` after `team_1`, or a sample id
    given twice) the same with `-2`, `-3`, ... (`baselines.suffixed_id`, as
    `baselines.unique_conversation_id` makes one against a data dir). Two samples in one conversation would have the second's
    questions scored against the first's turns. The same file gives the same ids every
    run, so a data dir's conversations are reused. `max_chars` (at most ID_MAX_CHARS):
    a lower id limit, which shortens the ids."""
    limit = min(ID_MAX_CHARS, max_chars)
    taken: set[str] = set()
    out: list[str] = []
    for sid in sample_ids:
        cid = suffixed_id(conversation_id(sid), limit, taken.__contains__)
        taken.add(cid)
        out.append(cid)
    return out


def sample_labels(sample_ids: Sequence[str]) -> list[str]:
    """A name per sample, unique within the file, for the figures kept per sample: its
    `sample_id`, and for an id given again the same with ``-2``, ``-3``, ... (as
    `conversation_ids` does): keyed by the bare id, the second sample's figures were
    merged into the first's, or replaced them."""
    taken: set[str] = set()
    out: list[str] = []
    for sid in sample_ids:
        label, n = sid, 1
        while label in taken:
            n += 1
            label = f"{sid}-{n}"
        taken.add(label)
        out.append(label)
    return out


def sample_dir_names(labels: Sequence[str]) -> list[str]:
    """A directory name per sample (`sample_labels`' labels, unique within the file), for
    an eval that keeps a data dir per sample under a root the user gave: the label itself
    when it is a plain name (letters, digits, ``._-``, not starting with a dot or a dash,
    at most DIR_NAME_MAX_CHARS), else its slug with a short digest of the whole label
    (``team_1-3f2a9c1e``). Never a path from the file: a sample id ``/abs`` or ``..`` was
    joined to the root as one and put the store outside it. Names differ also where
    only their case does, for a file system that ignores it; the same file gives the same
    names every run, so the data dirs are reused."""
    taken: set[str] = set()
    out: list[str] = []
    for label in labels:
        name = label
        if not (_PLAIN_DIR_NAME.fullmatch(label) and len(label) <= DIR_NAME_MAX_CHARS) or name.lower() in taken:
            digest = hashlib.blake2b(label.encode("utf-8", "surrogatepass"), digest_size=DIR_DIGEST_BYTES).hexdigest()
            slug = re.sub(r"[^A-Za-z0-9._-]+", "_", label).lstrip("._-")[:DIR_NAME_MAX_CHARS - len(digest) - 1]
            name = f"{slug}-{digest}" if slug else f"sample-{digest}"
        taken.add(name.lower())
        out.append(name)
    return out


def turn_content(turn: Turn) -> str:
    if turn.blip_caption:
        return f"{turn.text} [image: {turn.blip_caption}]" if turn.text else f"[image: {turn.blip_caption}]"
    return turn.text


def turn_message(
    turn: Turn, sample: Sample, session: Session, created_at: float
) -> tuple[dict[str, Any], bool]:
    """The message for one turn, and whether its speaker was unknown."""
    if turn.speaker == sample.speaker_a:
        role, known = "user", True
    elif turn.speaker == sample.speaker_b:
        role, known = "assistant", True
    else:
        role, known = "user", False
    msg: dict[str, Any] = {
        "role": role,
        "content": turn_content(turn),
        "session_id": f"session_{session.number}",
        "created_at": created_at,
        "metadata": {"dia_id": turn.dia_id},
    }
    if turn.speaker:
        msg["name"] = turn.speaker[:NAME_MAX_CHARS]
    return msg, known


def session_times(sample: Sample) -> tuple[list[float], int]:
    """A start time per session, and how many dates did not parse (those follow the
    previous session by a day)."""
    out: list[float] = []
    unparsed = 0
    last: float | None = None
    for s in sample.sessions:
        ts = parse_session_date(s.date_text)
        if ts is None:
            unparsed += 1
            ts = (last + DAY_S) if last is not None else FALLBACK_EPOCH
        out.append(ts)
        last = ts
    return out, unparsed


@dataclass
class Ingested:
    sample: Sample
    conversation_id: str
    namespace: str
    dia_to_pos: dict[str, int]
    reused: bool = False
    unknown_speakers: int = 0
    unparsed_dates: int = 0


def ingest_sample(
    memory: Memory, sample: Sample, *, cid: str | None = None, progress: Progress | None = None,
    task: TaskID | None = None
) -> Ingested:
    """Append the sample as one conversation (one transaction per session), or reuse it
    when the data dir already holds it with the same turns (LocomoError when it holds
    other ones). `cid`: its conversation id (default `conversation_id(sample_id)`; a file
    of several samples passes `conversation_ids`' so that no two share one)."""
    cid = cid or conversation_ids([sample.sample_id], memory.config.max_id_chars)[0]
    ns = cid
    times, unparsed = session_times(sample)
    key = memory.cold.key_of(ns, cid)
    if key is not None:
        have = memory.cold.last_position(key) + 1
        if have != sample.n_turns:
            raise LocomoError(
                f"the data dir already holds conversation {cid} (namespace {ns}, {have} turns) but this "
                f"sample has {sample.n_turns} turns; use a fresh --data-dir"
            )
        stored = memory.history(cid, namespace=ns)
        _check_stored(cid, sample, stored, times)
        dia = evidence_index(((m.metadata or {}).get("dia_id"), m.position) for m in stored
                             if isinstance((m.metadata or {}).get("dia_id"), str))
        if progress is not None and task is not None:
            progress.advance(task, sample.n_turns)
        return Ingested(sample, cid, ns, dia, reused=True, unparsed_dates=unparsed)
    written: list[tuple[str, int]] = []  # (dia_id, position), in log order
    unknown = 0
    for session, start in zip(sample.sessions, times, strict=True):
        if not session.turns:
            continue
        batch: list[dict[str, Any]] = []
        for i, turn in enumerate(session.turns):
            msg, known = turn_message(turn, sample, session, start + i)
            unknown += 0 if known else 1
            batch.append(msg)
        positions = memory.append_many(cid, batch, namespace=ns)
        written += [(turn.dia_id, pos) for turn, pos in zip(session.turns, positions, strict=True)]
        if progress is not None and task is not None:
            progress.advance(task, len(batch))
    return Ingested(sample, cid, ns, evidence_index(written), unknown_speakers=unknown, unparsed_dates=unparsed)


def _check_stored(cid: str, sample: Sample, stored: Sequence[StoredMessage], times: Sequence[float]) -> None:
    """Refuse to reuse a stored conversation whose turns are not the sample's (another
    sample with as many turns, or an edited file): its questions would be scored against
    the wrong turns. Compared per turn: role, speaker name, text and dia_id."""
    want = [turn_message(t, sample, session, start + i)[0]
            for session, start in zip(sample.sessions, times, strict=True) for i, t in enumerate(session.turns)]
    if len(stored) != len(want):
        raise LocomoError(f"the data dir holds conversation {cid} with {len(stored)} readable turns, sample "
                          f"{sample.sample_id!r} has {len(want)}; use a fresh --data-dir")
    for m, w in zip(stored, want, strict=True):
        if (m.role, m.body.get("name"), m.text, (m.metadata or {}).get("dia_id")) != (
                w["role"], w.get("name"), message_text(w), w["metadata"]["dia_id"]):
            raise LocomoError(f"the data dir holds conversation {cid} with other turns than sample "
                              f"{sample.sample_id!r} (position {m.position} differs); use a fresh --data-dir")


def embed_pending(
    memory: Memory, conv: str, *, progress: Progress | None = None, task: TaskID | None = None
) -> int:
    def tick(n: int) -> None:
        if progress is not None and task is not None:
            progress.advance(task, n)

    return memory.cold.index_pending(
        conversation_id=conv, batch=memory.config.embedding_batch_size, progress=tick
    )


# ---------------------------------------------------------------------------------------
# Scoring

_PUNCT = str.maketrans({c: " " for c in string.punctuation + "‘’“”–—…"})
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize(text: str) -> str:
    """Lowercase, punctuation and articles removed, whitespace collapsed (SQuAD-style)."""
    t = text.lower().translate(_PUNCT)
    t = _ARTICLES.sub(" ", t)
    return " ".join(t.split())


def answer_covered(answer: str, context_text: str) -> bool | None:
    """Whether the normalized answer occurs in the normalized context as whole words;
    None when the answer normalizes to nothing."""
    a = normalize(answer)
    if not a:
        return None
    return f" {a} " in f" {normalize(context_text)} "


@dataclass
class Question:
    sample_index: int
    qa: QA
    evidence_positions: list[int]  # resolved, deduplicated


def evidence_index(ids: Iterable[tuple[str | None, int]]) -> dict[str, int]:
    """Evidence id -> position, from (id, position) pairs in log order: the first turn (or
    message) that carries an id. The one mapping every reader of evidence uses (the
    evals, `tune`, recall_rounds, second_model): the evals took the first and `tune` the
    last, so a repeated id scored different turns. A checked LoCoMo file repeats no
    `dia_id` (`conversations._sample_turns` refuses it); a lenient reader or the
    conversations format's `message_id` may. An empty id (a turn without one) names
    nothing."""
    out: dict[str, int] = {}
    for i, pos in ids:
        if i:
            out.setdefault(i, pos)
    return out


def resolve_evidence(ids: Iterable[str], index: dict[str, int], counts: EvidenceCounts) -> list[int]:
    """The positions of a question's evidence ids (`evidence_index`'s), deduplicated in
    the order given; a malformed id (not ``D<int>:<int>``) is counted in
    `counts.skipped`, one absent from the conversation in `counts.missing`, never
    dropped unseen."""
    out: list[int] = []
    for e in ids:
        e = e.strip()
        if not DIA_ID.match(e):
            counts.skipped += 1
            continue
        pos = index.get(e)
        if pos is None:
            counts.missing += 1
        elif pos not in out:
            out.append(pos)
    return out


@dataclass
class EvidenceCounts:
    skipped: int = 0  # malformed ids
    missing: int = 0  # well-formed, not in the conversation


def resolve_questions(
    ing: Ingested, sample_index: int, limit: int | None, counts: EvidenceCounts
) -> list[Question]:
    out: list[Question] = []
    qas = ing.sample.qa if limit is None else ing.sample.qa[:limit]
    for qa in qas:
        out.append(Question(sample_index, qa, resolve_evidence(qa.evidence, ing.dia_to_pos, counts)))
    return out


@dataclass
class Record:
    category: int
    recall: float | None
    covered: bool | None
    tokens: int
    ms: float
    over_budget: bool
    token_mismatch: bool
    degraded: bool = False
    unverified: int = 0  # positions the plan claimed verbatim/trimmed whose text is not in the messages


def score(q: Question, out: MethodOutput, ms: float, budget: int | None, token_ok: bool) -> Record:
    recall = None
    if q.evidence_positions:
        hit = sum(1 for p in q.evidence_positions if p in out.positions)
        recall = hit / len(q.evidence_positions)
    covered = answer_covered(q.qa.answer, out.text) if q.qa.answer else None
    return Record(
        q.qa.category,
        recall,
        covered,
        out.tokens,
        ms,
        over_budget=budget is not None and out.tokens > budget,
        token_mismatch=not token_ok,
        degraded=out.degraded,
    )


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def summarize(
    records: Sequence[Record], *, full_context_tokens: float | None, counts: EvidenceCounts
) -> dict[str, Any]:
    recalls = [r.recall for r in records if r.recall is not None]
    covered = [r.covered for r in records if r.covered is not None]
    by_cat: dict[str, float | None] = {}
    by_cat_n: dict[str, int] = {}
    for c in CATEGORIES:
        rs = [r.recall for r in records if r.category == c and r.recall is not None]
        by_cat[str(c)] = _r(mean(rs))
        by_cat_n[str(c)] = len(rs)
    return {
        "evidence_recall": _r(mean(recalls)),
        "by_category": by_cat,
        "by_category_questions": by_cat_n,
        "answer_coverage": _r(mean([1.0 if c else 0.0 for c in covered])),
        # category 5's "answer" is the adversarial trap answer: also report coverage without it
        "answer_coverage_non_adversarial": _r(
            mean([1.0 if r.covered else 0.0 for r in records if r.covered is not None and r.category != 5])
        ),
        "mean_context_tokens": _r(mean([r.tokens for r in records]), 1),
        "max_context_tokens": max((r.tokens for r in records), default=None),
        "full_context_tokens": _r(full_context_tokens, 1),
        "context_ms": percentiles([r.ms for r in records]),
        "questions": len(records),
        "questions_with_evidence": len(recalls),
        "questions_with_answer": len(covered),
        "skipped_evidence_ids": counts.skipped,
        "missing_evidence_ids": counts.missing,
        "budget_violations": sum(1 for r in records if r.over_budget),
        "token_mismatches": sum(1 for r in records if r.token_mismatch),
        "degraded": sum(1 for r in records if r.degraded),
        "unverified_positions": sum(r.unverified for r in records),
    }


def _unavailable(reason: str, *, full_context_tokens: float | None, counts: EvidenceCounts) -> dict[str, Any]:
    """The tiermem entry when the method did not run: the shared fields, with no scores."""
    return {
        "available": False,
        "reason": reason,
        "evidence_recall": None,
        "by_category": {str(c): None for c in CATEGORIES},
        "answer_coverage": None,
        "mean_context_tokens": None,
        "full_context_tokens": _r(full_context_tokens, 1),
        "context_ms": {"p50": None, "p99": None},
        "questions": 0,
        "skipped_evidence_ids": counts.skipped,
        "missing_evidence_ids": counts.missing,
    }


# ---------------------------------------------------------------------------------------
# The run


@dataclass
class LocomoRun:
    result: dict[str, Any]
    latencies: dict[int, dict[str, list[float]]] = field(default_factory=dict)  # budget -> method -> ms


def run_locomo(
    memory: Memory,
    data: Path,
    budgets: Sequence[int],
    *,
    limit_samples: int | None = None,
    limit_questions: int | None = None,
    methods: Iterable[str] = METHODS,
    hot: bool = True,
    progress: Progress | None = None,
) -> LocomoRun:
    """Ingest (or reuse) every sample, then answer every question with every method at
    every budget. Returns the JSON-able result and the raw latencies."""
    budgets = sorted({int(b) for b in budgets})
    if not budgets or budgets[0] < 1:
        raise LocomoError("budgets must be positive integers")
    wanted = list(dict.fromkeys(methods))
    unknown = set(wanted) - set(METHODS)
    if unknown:
        raise LocomoError(f"unknown methods {sorted(unknown)}; known: {list(METHODS)}")
    from tiermem.evals.conversations import checked_samples  # that module imports this one

    # every turn checked as `tiermem import` checks it (limits from the Memory's Config),
    # before anything is written: a bad one refuses the file, naming its sample and dia_id
    samples = checked_samples(data, memory.config)
    if limit_samples is not None:
        samples = samples[:limit_samples]
    if not samples:
        raise LocomoError(f"{data} holds no samples")
    use_tiermem = tiermem_runs(memory, wanted, ", baselines only")
    baselines = [m for m in BASELINES if m in wanted]

    t0 = time.perf_counter()
    ingested: list[Ingested] = []
    total_turns = sum(s.n_turns for s in samples)
    if progress is not None:
        t_ing = progress.add_task("ingest (append)", total=total_turns)
        t_emb = progress.add_task("ingest (embed)", total=total_turns)
    # within the Config's max_id_chars: the ids `tiermem import` gives the same file
    ids = conversation_ids([s.sample_id for s in samples], memory.config.max_id_chars)
    for s, cid in zip(samples, ids, strict=True):
        ing = ingest_sample(memory, s, cid=cid, progress=progress, task=t_ing if progress is not None else None)
        embed_pending(
            memory, ing.conversation_id, progress=progress, task=t_emb if progress is not None else None
        )
        ingested.append(ing)
    if progress is not None:
        progress.update(t_emb, completed=total_turns)
    ingest_s = time.perf_counter() - t0

    counts = EvidenceCounts()
    questions_by_sample = [
        resolve_questions(ing, i, limit_questions, counts) for i, ing in enumerate(ingested)
    ]
    views = [ConvView.load(memory, ing.conversation_id) for ing in ingested]
    full_tokens = mean([float(v.total_tokens()) for v in views])
    if use_tiermem:
        # a reused data dir's Redis may still hold an epoch state of an earlier run's (or
        # another process's) call: the first question would extend it. The questions below
        # keep none (record=False), so each is planned as its conversation's first call
        for ing in ingested:
            key = memory.cold.key_of(ing.namespace, ing.conversation_id)
            if key is not None:
                memory.planner.forget(key)

    records: dict[int, dict[str, list[Record]]] = {b: {m: [] for m in wanted} for b in budgets}
    n_questions = sum(len(qs) for qs in questions_by_sample)
    t1 = time.perf_counter()
    if progress is not None:
        t_q = progress.add_task("questions", total=n_questions)
    for ing, view, qs in zip(ingested, views, questions_by_sample, strict=True):
        for q in qs:
            rankings = rank_all(memory, view, q.qa.question, baselines) if baselines else None
            full_rec: Record | None = None
            for b in budgets:
                for name in baselines:
                    if name == "full_context" and full_rec is not None:
                        records[b][name].append(full_rec)
                        continue
                    out, ms = run_baseline(name, view, rankings, b)
                    rec = score(q, out, ms, None if name == "full_context" else b, token_ok=True)
                    if name == "full_context":
                        full_rec = rec
                    records[b][name].append(rec)
                if use_tiermem:
                    t = time.perf_counter()
                    out = (tiermem_context(memory, ing.conversation_id, q.qa.question, b,
                                          namespace=ing.conversation_id, record=False)
                           if ing.sample.n_turns else no_context())
                    ms = (time.perf_counter() - t) * 1000
                    ok = messages_tokens(memory.tokens, out.messages) == out.tokens
                    unverified = verify_positions(memory, ing.conversation_id, out)
                    rec = score(q, out, ms, b, token_ok=ok)
                    rec.unverified = unverified
                    records[b][TIERMEM].append(rec)
            if progress is not None:
                progress.advance(t_q)
    questions_s = time.perf_counter() - t1

    budget_results: dict[str, Any] = {}
    latencies: dict[int, dict[str, list[float]]] = {}
    for b in budgets:
        latencies[b] = {m: [r.ms for r in records[b][m]] for m in wanted}
        entry: dict[str, Any]
        if TIERMEM in wanted and use_tiermem:
            entry = {
                "method": TIERMEM,
                "available": True,
                **summarize(records[b][TIERMEM], full_context_tokens=full_tokens, counts=counts),
            }
        elif TIERMEM in wanted:
            entry = {
                "method": TIERMEM,
                **_unavailable(
                    "Memory has no context() in this build", full_context_tokens=full_tokens, counts=counts
                ),
            }
        else:
            entry = {
                "method": TIERMEM,
                **_unavailable("not requested", full_context_tokens=full_tokens, counts=counts),
            }
        entry["baselines"] = {
            name: {
                "available": True,
                **summarize(records[b][name], full_context_tokens=full_tokens, counts=counts),
            }
            for name in baselines
        }
        budget_results[str(b)] = entry

    result: dict[str, Any] = {
        "data": str(data),
        "samples": [s.sample_id for s in samples],
        "conversation_ids": [i.conversation_id for i in ingested],
        "turns": total_turns,
        "hot_tier": hot,
        "hot_budget_tokens": memory.config.hot_budget_tokens if hot else None,
        "tokenizer": memory.tokens.name,
        "limit_questions": limit_questions,
        "ingest_s": round(ingest_s, 2),
        "questions_s": round(questions_s, 2),
        "reused_conversations": sum(1 for i in ingested if i.reused),
        "unknown_speakers": sum(i.unknown_speakers for i in ingested),
        "unparsed_dates": sum(i.unparsed_dates for i in ingested),
        "budgets": budget_results,
    }
    if len(budgets) == 1:
        result.update({k: v for k, v in budget_results[str(budgets[0])].items()})
        result["budget"] = budgets[0]
    return LocomoRun(result, latencies)


# ---------------------------------------------------------------------------------------
# Presentation


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * float(x):.1f}"


def _num(x: Any, nd: int = 0) -> str:
    return "-" if x is None else f"{float(x):,.{nd}f}"


def table(result: dict[str, Any]) -> Table:
    t = Table(
        title=f"LoCoMo ({', '.join(result.get('samples', []))}; hot tier "
        f"{'on' if result.get('hot_tier') else 'OFF'})"
    )
    for col in (
        "budget",
        "method",
        "recall %",
        *(f"c{c}" for c in CATEGORIES),
        "answer %",
        "tokens",
        "p50 ms",
        "p99 ms",
    ):
        t.add_column(col, justify="left" if col in ("budget", "method") else "right")
    for b, entry in result["budgets"].items():
        rows = []
        if entry.get("available"):
            rows.append((TIERMEM, entry))
        rows.extend(entry.get("baselines", {}).items())
        for name, e in rows:
            t.add_row(
                b,
                name,
                _pct(e["evidence_recall"]),
                *(_pct(e["by_category"].get(str(c))) for c in CATEGORIES),
                _pct(e["answer_coverage"]),
                _num(e["mean_context_tokens"]),
                _num(e["context_ms"]["p50"], 1),
                _num(e["context_ms"]["p99"], 1),
            )
        t.add_section()
    return t
