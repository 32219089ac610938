"""Config files in sections (`[hot]`, `[warm]`, `[planner]`, ...) over the flat fields.

`Config` keeps one flat attribute per setting (`config.hot_budget_tokens`); this module is
the layer between a reader's file and those attributes. A file (TOML or JSON), keyword
arguments and env may give a setting either way:

    hot_budget_tokens = 3000          # the flat name: every file written before sections
    [hot]
    budget_tokens = 3000              # the same setting in its section

and env `TIERMEM_HOT_BUDGET_TOKENS=3000` or `TIERMEM_HOT__BUDGET_TOKENS=3000`.

Invariants: every flat field is in at most one section, under one key (tests check the
table against `Config`'s fields); `flatten` maps a section key to exactly its flat field
and changes nothing else; a setting given both ways in one place (one file, one set of
keyword arguments, the environment) is an error naming both, never a silent pick; an
unknown key in a section is an error naming the dotted key and the section's keys.
A relative path setting (`PATH_FIELDS`) read from a file is relative to the file's own
directory (`anchor_paths`); env and keyword arguments keep the working directory's.
Between places the usual precedence holds (arguments > env > file > defaults), whichever
way each names the setting. `export_text` writes every effective value in sections, so
the file loads back to an identical Config (`config.export_text` refuses a TOML file that
could not say a value: a null whose default is not null).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

ENV_PREFIX = "TIERMEM_"
ENV_NESTED = "__"
TITLE = "Config"  # the title of the ValidationErrors raised here, as pydantic gives Config's


def _section(prefix: str, fields: Iterable[str]) -> dict[str, str]:
    """key in the section -> flat field: the field's name without the section's prefix."""
    return {(f[len(prefix):] if prefix and f.startswith(prefix) else f): f for f in fields}


# section -> {key in the section: flat Config field}. Fields not listed stay top level
# (`pricing`, already a table of its own).
SECTIONS: dict[str, dict[str, str]] = {
    "storage": _section("", ["data_dir", "db_filename", "sqlite_synchronous", "busy_timeout_ms",
                             "cold_url", "cold_schema", "cold_synchronous_commit", "cold_pool_size",
                             "cold_pool_wait_s", "cold_operation_timeout_s", "cold_erase_scrub",
                             "cold_pool_mode"]),
    "limits": _section("", ["max_content_bytes", "max_metadata_bytes", "max_id_chars", "max_body_bytes"]),
    "hot": _section("hot_", ["redis_url", "redis_idle_timeout_s", "hot_budget_tokens", "head_protect", "tail_protect",
                            "eviction_bias", "hot_idle_ttl_s"]),
    "embedding": _section("embedding_", ["embedding_model", "embedding_batch_size", "embedding_query_precision",
                                         "embedding_runtime", "embedding_cache_dir", "tokenizer"]),
    "retrieval": _section("retrieval_", ["retrieval_k", "rrf_k", "namespace_recall", "turn_cache_mb"]),
    "planner": _section("", ["slice_shares", "layer_shares", "context_epochs", "tool_trim_tokens", "store_plans",
                             "retrieved_placement", "system_messages", "context_format", "tail_anchor_turns",
                             "timezone", "cache_ttl_s"]),
    "warm": _section("warm_", ["warm_max_turns_behind", "warm_max_seconds_behind", "summary_target_tokens",
                               "warm_keep_versions", "summarizer", "llm_base_url", "llm_model", "llm_api_key_env",
                               "llm_timeout_s"]),
    "scheduler": _section("scheduler_", ["scheduler_interval_s", "scheduler_max_views_per_run",
                                         "scheduler_enabled"]),
    "service": _section("http_", ["http_host", "http_port", "http_allowed_hosts", "auth_tokens",
                                  "metrics_tokens", "metrics_public", "http_header_timeout_s",
                                  "http_body_timeout_s", "http_max_connections", "http_forwarded_allow_ips",
                                  "ui_cookie_secure"]),
}
# settings that name a path: in a config file a relative one is read against the file's own
# directory (as docker compose and git read theirs), not the directory a command runs in
PATH_FIELDS = ("data_dir", "embedding_cache_dir", "embedding_model")
# flat field -> its dotted name in a file ("hot_budget_tokens" -> "hot.budget_tokens")
DOTTED: dict[str, str] = {flat: f"{sec}.{key}" for sec, keys in SECTIONS.items() for key, flat in keys.items()}


def dotted_name(flat: str) -> str:
    """The name a sectioned file gives a flat field (itself for top-level fields)."""
    return DOTTED.get(flat, flat)


def _error(kind: str, message: str, loc: tuple[str, ...], value: Any) -> InitErrorDetails:
    return {"type": PydanticCustomError(kind, message), "loc": loc, "input": value}


def flatten(data: Mapping[str, Any], origins: dict[str, str] | None = None) -> dict[str, Any]:
    """`data` with each section's keys as the flat fields they name; `origins` (when given)
    gets flat field -> dotted name for the values that came from a section. Raises a
    ValidationError naming every unknown section key and every setting given twice."""
    out: dict[str, Any] = {}
    where: dict[str, str] = {}  # flat field -> how `data` named it
    errors: list[InitErrorDetails] = []
    for key, value in data.items():
        if key not in SECTIONS:
            if key in where:
                errors.append(_error("given_twice", f"given twice: as {where[key]} and as {key}; give it once",
                                     (key,), value))
            out[key], where[key] = value, key
            continue
        if not isinstance(value, Mapping):
            errors.append(_error("section_type", f"[{key}] must be a table of settings, got {type(value).__name__}",
                                 (key,), value))
            continue
        for sub, v in value.items():
            flat = SECTIONS[key].get(str(sub))
            name = f"{key}.{sub}"
            if flat is None:
                errors.append(_error("unknown_setting",
                                     f"no such setting in [{key}]; it has {sorted(SECTIONS[key])}", (key, str(sub)), v))
                continue
            if flat in where:
                errors.append(_error("given_twice", f"given twice: as {where[flat]} and as {name}; give it once",
                                     (key, str(sub)), v))
                continue
            out[flat], where[flat] = v, name
            if origins is not None:
                origins[flat] = name
    if errors:
        raise ValidationError.from_exception_data(TITLE, errors)
    return out


def absolute_paths(flat: dict[str, Any], cwd: str) -> dict[str, Any]:
    """`flat` (effective values) with each relative path setting joined to `cwd`, the
    directory it was read against (env, arguments): a file written elsewhere reads a
    relative one against its own directory (`anchor_paths`), another directory, and an
    append there a new store. Joined, not normalized: "link/.." is where the OS takes it."""
    out = dict(flat)
    for key in PATH_FIELDS:
        text = out.get(key)
        if isinstance(text, str) and not os.path.isabs(text):
            out[key] = os.path.join(cwd, text)
    return out


def anchor_paths(flat: dict[str, Any], file: str | os.PathLike[str]) -> dict[str, Any]:
    """`flat` (a file's settings, flattened) with each relative path setting joined to the
    directory of `file` as its path names it (made absolute against the working directory;
    links not followed). Left as given: absolute paths, a leading `~` (the home directory),
    and what the setting's own check refuses (empty, blank, a NUL, not text), so that it is
    refused as given rather than read as the file's directory."""
    where = os.path.dirname(os.path.abspath(file))
    out = dict(flat)
    for key in PATH_FIELDS:
        text = out.get(key)
        if (isinstance(text, str) and text.strip() and "\x00" not in text and not text.startswith("~")
                and not os.path.isabs(text)):
            out[key] = os.path.join(where, text)
    return out


def _env_value(text: str) -> Any:
    # a JSON object or list (a whole table or list setting); anything else stays a string
    # that pydantic coerces to the field's type, as it does for the flat env names
    if text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def env_sections(environ: Mapping[str, str] | None = None, *, tables: Collection[str] = ()) -> dict[str, Any]:
    """Settings named by section in env: `TIERMEM_HOT__BUDGET_TOKENS=3000` ->
    `{"hot": {"budget_tokens": "3000"}}` (names case-insensitive; deeper `__` nest further,
    e.g. `TIERMEM_PLANNER__SLICE_SHARES__TEMPORAL__TAIL`, for the flat fields in `tables`
    only: a name nesting below a setting of one value, `TIERMEM_HOT__BUDGET_TOKENS__X`, names
    no setting and is left to Config's check of unknown variables, which names it, as its flat
    spelling is; read as a table, it was a type error naming no variable)."""
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for name, text in env.items():
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX):
            continue
        parts = [p.lower() for p in upper[len(ENV_PREFIX):].split(ENV_NESTED)]
        if len(parts) < 2 or parts[0] not in SECTIONS or not all(parts):
            continue
        if len(parts) > 2 and SECTIONS[parts[0]].get(parts[1]) not in tables:
            continue
        cur = out
        for p in parts[:-1]:
            nxt = cur.setdefault(p, {})
            if not isinstance(nxt, dict):
                break
            cur = nxt
        else:
            cur[parts[-1]] = _env_value(text)
    return out


def env_names(parts: Sequence[str]) -> list[str]:
    """Every env name that sets the leaf `parts` (flat field first, then its subkeys), the
    most specific first: the flat names and the sectioned ones."""
    names: list[str] = []
    dotted = DOTTED.get(parts[0])
    for i in range(len(parts), 0, -1):
        names.append(ENV_PREFIX + ENV_NESTED.join(parts[:i]).upper())
        if dotted is not None:
            names.append(ENV_PREFIX + ENV_NESTED.join([*dotted.split("."), *parts[1:i]]).upper())
    return names


# -- files ------------------------------------------------------------------------------------


def is_json(path: Path) -> bool:
    return path.suffix.lower() == ".json"


def read_file(path: str | Path) -> dict[str, Any]:
    """A config file's raw settings: JSON when its name ends in `.json`, else TOML. Raises
    ValueError naming the file when it does not parse or is not one table."""
    import tomllib

    p = Path(path)
    try:
        if is_json(p):
            data = json.loads(p.read_text(encoding="utf-8"))
        else:
            with p.open("rb") as fh:
                data = tomllib.load(fh)
    except ValueError as exc:
        # the decoders' errors, and what they raise that is not theirs: Python's limit on an
        # integer's digits (4,300) is a bare ValueError naming no file
        kind = "JSON" if is_json(p) else "TOML"
        detail = " ".join(str(exc).split()).split("; use sys.set_int_max_str_digits")[0]  # no Python advice
        raise ValueError(f"{p} is not valid {kind}: {detail}") from None
    except RecursionError:
        # nested deeper than the parser's recursion (~1,000 levels); no setting nests past 4
        raise ValueError(f"{p} is nested too deeply to be a config file") from None
    if not isinstance(data, dict):
        raise ValueError(f"{p} must hold one JSON object of settings, got {type(data).__name__}")
    return data


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


# TOML's basic strings take every character raw but `"`, `\\` and the control characters
# other than tab (U+0000-U+0008, U+000A-U+001F, U+007F). JSON's escapes are TOML's and cover
# all of them but DEL, which JSON leaves raw: written so, the file did not parse
_TOML_RAW_DEL = "\x7f"
_TOML_DEL_ESCAPE = "\\u007F"


def _toml_string(text: str) -> str:
    """`text` as a TOML basic string (every character TOML needs escaped, escaped)."""
    return json.dumps(text, ensure_ascii=False).replace(_TOML_RAW_DEL, _TOML_DEL_ESCAPE)


def _toml_key(k: str) -> str:
    return k if _BARE_KEY.match(k) else _toml_string(k)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):  # only inside a list (a table's own keys become a [table])
        return "{" + ", ".join(f"{_toml_key(str(k))} = {_toml_value(x)}" for k, x in v.items()) + "}"
    return _toml_string(str(v))


def to_toml(data: Mapping[str, Any], header: Sequence[str] = ()) -> str:
    """Nested settings as TOML: top-level keys first, then one table per nested mapping.
    `None` values are left out (TOML has no null): one whose default is not None would load
    back as that default, which `config.export_text` refuses before it gets here."""
    lines = [f"# {h}" for h in header]

    def emit(prefix: str, d: Mapping[str, Any]) -> None:
        scalars = {k: v for k, v in d.items() if not isinstance(v, dict) and v is not None}
        if prefix and scalars:
            lines.append(f"\n[{prefix}]")
        for k, v in scalars.items():
            lines.append(f"{_toml_key(str(k))} = {_toml_value(v)}")
        for k, v in d.items():
            if isinstance(v, dict):
                emit(f"{prefix}.{_toml_key(str(k))}" if prefix else _toml_key(str(k)), v)

    emit("", data)
    return "\n".join(lines) + "\n"


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Flat settings grouped in their sections (the inverse of `flatten`), in SECTIONS'
    order; top-level fields first."""
    top = {k: v for k, v in flat.items() if k not in DOTTED}
    out: dict[str, Any] = dict(top)
    for sec, keys in SECTIONS.items():
        part = {key: flat[f] for key, f in keys.items() if f in flat}
        if part:
            out[sec] = part
    return out


def export_text(values: Mapping[str, Any], *, as_json: bool, header: Sequence[str] = ()) -> str:
    """Flat effective values (`Config.model_dump(mode="json")`) as a sectioned file."""
    data = nest({k: v for k, v in values.items() if v is not None})
    if as_json:
        return json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    return to_toml(data, header)
