"""A caller's message as plain JSON data: the SDKs' objects in it converted, wherever they
sit, and the first value JSON cannot carry named by its place.

One home for every way a message comes in as Python values: `tiers.models.parse_message`
(the OpenAI formats, chat and Responses: the `openai` SDK's objects, which `Memory`, the
CLI, import and `tiermem.client` all parse by), `tiermem.adapters.anthropic.from_anthropic`
(the `anthropic` SDK's) and `tiermem.client`, which sends an Anthropic message as JSON for
the service to convert. Each format says how one object becomes data (`plain`: the
openai side keeps nulls and writes the wire's field names, the Anthropic one leaves unset
fields out); the walk over the caller's dicts, lists and tuples is this module's.

A value that is still no JSON after that (a date, NaN, an object no SDK made, a lone
surrogate) is refused, not stored as its repr or sent for httpx to fail on:
`unencodable` names the first one in document order as `tiers.formats` names a field
(`tool_calls[1].function.when`), as far as the keys are plain names.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tiermem.tiers.errors import ValidationError, field_error, plain_field, shown_key

# JSON's own scalar types: no SDK object is one of them (exactly), so the walk skips them
# without asking `plain` (most of a message is strings)
_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})
# Digits of one integer in what a message stores (its body, a tool call's input, its
# metadata), at most: the one limit of every way in (`check_int_digits` in the library, the
# client and the adapters; the HTTP service's body guard and `tiermem mcp` on the JSON text,
# tiermem.service.guard). Payloads carry big integers legitimately: a uint256 token amount
# has 78 digits, a uint512 155. Bounded because Python parses and prints an int in time
# quadratic in its digits: a body of max_body_bytes (2 MiB) made of 1,000-digit integers
# parses in ~47 ms, of 40-digit ones ~33 ms, of 4,300-digit ones (Python's own default
# limit, `sys.get_int_max_str_digits`, which a caller may change) ~144 ms.
MAX_JSON_INT_DIGITS = 1_000
# an int of more than MAX_JSON_INT_DIGITS digits is one at least this far from 0 (no str())
_INT_DIGITS_BOUND = 10 ** MAX_JSON_INT_DIGITS
# The problem of a value nested past the interpreter's recursion limit (json.dumps's
# RecursionError), one wording wherever a message is encoded: the library (`unencodable`,
# `tiers.models`), the Anthropic adapter, a Client before sending (which said "to be
# stored", "to store", "to be sent" of the same refusal). Shallower nesting past
# MAX_JSON_DEPTH is refused first, by tiers.models' check naming that limit.
NESTED_TOO_DEEP = "is nested too deep to store (past the interpreter's recursion limit)"


def plain_deep(value: Any, plain: Callable[[Any], Any]) -> Any:
    """`value` with every SDK object in it, at any depth of its dicts, lists and tuples, as
    `plain` makes it (`plain` answers any other value with the value itself; what it makes
    of an object is plain JSON data, not walked again). A container that holds no SDK
    object is returned itself, so a plain message costs a walk and no copy; one that does
    is a new container (a tuple stays a tuple): the caller's are never modified.
    Recursive: RecursionError for a value nested past the interpreter's limit (bound the
    depth first, or catch it)."""
    if type(value) in _SCALAR_TYPES:
        return value
    if isinstance(value, dict):
        out: dict[Any, Any] | None = None
        for k, v in value.items():
            if type(v) not in _SCALAR_TYPES and (done := plain_deep(v, plain)) is not v:
                if out is None:
                    out = dict(value)  # the caller's dict is left as it is
                out[k] = done
        return value if out is None else out
    if isinstance(value, list | tuple):
        items: list[Any] | None = None
        for i, v in enumerate(value):
            if type(v) not in _SCALAR_TYPES and (done := plain_deep(v, plain)) is not v:
                if items is None:
                    items = list(value)
                items[i] = done
        if items is None:
            return value
        return items if isinstance(value, list) else tuple(items)
    return plain(value)


def json_problem(value: Any) -> str | None:
    """Why `value` (a scalar, or an object JSON has no form for) cannot be stored as JSON;
    None when it can. The one wording of that refusal, whoever finds it (the library's
    parse, `from_anthropic`, a `Client` before sending: the same value, the same words)."""
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:  # an object, NaN or an infinity, a lone surrogate, a huge int
        return f"cannot be stored as JSON ({exc})"
    return None


def int_digits_problem(digits: int, limit: int = MAX_JSON_INT_DIGITS,
                       limit_name: str = "MAX_JSON_INT_DIGITS") -> str:
    """The refusal of an integer of `digits` digits (more than `limit`, called `limit_name`)."""
    return f"is an integer of {digits:,} digits, more than the limit of {limit:,} ({limit_name})"


def _digits_bound(limit: int) -> int:
    """The least int (in magnitude) of more than `limit` digits."""
    return _INT_DIGITS_BOUND if limit == MAX_JSON_INT_DIGITS else 10 ** limit


def _holds_long_int(value: Any, limit: int = MAX_JSON_INT_DIGITS) -> bool:
    """Whether an int of more than `limit` digits is anywhere in `value`: the walk of
    every append, without places (a walk building them cost 2.5 times as much on a
    3,000-row hosted-tool item)."""
    bound = _digits_bound(limit)
    stack = [value]
    while stack:
        node = stack.pop()
        items = node.values() if isinstance(node, dict) else node if isinstance(node, list | tuple) else (node,)
        for v in items:
            t = type(v)
            if t is str:
                continue
            if t is int:  # exactly int: a bool is no JSON integer
                if not -bound < v < bound:
                    return True
            elif t is dict or t is list or isinstance(v, dict | list | tuple):
                stack.append(v)
    return False


def long_int_place(value: Any, limit: int = MAX_JSON_INT_DIGITS) -> tuple[str | int, ...] | None:
    """The place (keys and indexes) inside `value`, in document order, of its first int of
    more than `limit` digits (a bool is no int here), () when `value` is one; None when it
    holds none. Iterative: any depth; no int is turned into text."""
    if not _holds_long_int(value, limit):
        return None
    bound = _digits_bound(limit)
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        node, place = stack.pop()
        if type(node) is int:  # exactly int: a bool is no JSON integer
            if not -bound < node < bound:
                return place
        elif isinstance(node, dict):
            stack.extend((v, (*place, k)) for k, v in reversed(node.items()) if type(v) is not str)
        elif isinstance(node, list | tuple):
            stack.extend((v, (*place, i)) for i, v in reversed(list(enumerate(node))) if type(v) is not str)
    return None


def int_digits(n: int) -> int:
    """How many decimal digits the int `n` has (its sign not counted), without `str()`,
    which refuses one past the interpreter's own digit limit."""
    n = abs(n)
    # bit_length * log10(2) is the digit count or one more
    guess = max(1, int(n.bit_length() * 0.30102999566398120))
    return guess + 1 if n >= 10 ** guess else guess


def check_int_digits(value: Any, field: str, limit: int = MAX_JSON_INT_DIGITS,
                     limit_name: str = "MAX_JSON_INT_DIGITS") -> None:
    """Refuse `value` (named `field`, a name of tiermem's; "" for a message itself) when an
    int in it, at any depth, has more than `limit` digits (by default the library's own,
    MAX_JSON_INT_DIGITS; a client holds a server's own, `limit_name` saying which):
    ValidationError named by its place (`content[0].input.amount`: `place_error`) and
    the limit."""
    place = long_int_place(value, limit)
    if place is None:
        return
    node = value
    for part in place:
        node = node[part]
    raise placed(field, place, place_error(place, int_digits_problem(int_digits(node), limit, limit_name)))


def placed(field: str, place: tuple[str | int, ...], err: ValidationError) -> ValidationError:
    """`err`, the refusal of `place` within a value named `field` (a name of tiermem's; ""
    for a message itself: `err` as it is), named from `field` down (`content[0].input.when`)."""
    if not field:
        return err
    if not place or not (isinstance(place[0], int) or plain_field(place[0])):
        return ValidationError(field, err.problem)  # the place, quoted, opens the problem
    return ValidationError(field + ("" if isinstance(place[0], int) else ".") + err.field, err.problem)


def place_error(place: tuple[str | int, ...], problem: str) -> ValidationError:
    """A refusal named by `place` (keys and indexes from the message down) as
    `tiers.formats` names a field (`content[1].input.when`) as far as its keys are plain
    names (`plain_field`); the rest of the place, quoted (`shown_key`), opens the problem."""
    field = ""
    for n, part in enumerate(place):
        if isinstance(part, int):
            field += f"[{part}]"
        elif plain_field(part):
            field += f".{part}" if field else part
        else:
            rest = "".join(f"[{p}]" if isinstance(p, int) else f".{shown_key(p)}" for p in place[n:])
            return ValidationError(field or "message", f"at {rest.lstrip('.')}: {problem}")
    return ValidationError(field or "message", problem)


# the refusal of a string (or a key) with a lone surrogate, which UTF-8 cannot encode
LONE_SURROGATE_PROBLEM = "is not valid UTF-8 (lone surrogate)"


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def lone_surrogate(message: Any, field: str = "") -> ValidationError:
    """The refusal of the first string in `message` (in document order) that holds a lone
    surrogate, a dict key included, named by its place (`output[0].text`: `place_error`)
    below `field` (`placed`; "": `message` is a message itself), not the `content` it may
    not be in. Call it once encoding `message` as UTF-8 failed. Iterative: any depth."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(message, ())]
    while stack:
        value, place = stack.pop()
        if isinstance(value, dict):
            for k in value:
                if isinstance(k, str) and not _encodes(k):
                    return placed(field, place, place_error(place, f"a key {LONE_SURROGATE_PROBLEM}"))
            stack.extend((v, (*place, k)) for k, v in reversed(value.items()))
        elif isinstance(value, list | tuple):
            stack.extend((v, (*place, i)) for i, v in reversed(list(enumerate(value))))
        elif isinstance(value, str) and not _encodes(value):
            return placed(field, place, place_error(place, LONE_SURROGATE_PROBLEM))
    return ValidationError(field or "message", LONE_SURROGATE_PROBLEM)  # not reached: encoding failed somewhere


def unencodable(message: Any, field: str = "") -> ValidationError:
    """The refusal of the first value in `message` (in document order) that JSON cannot
    carry, a dict key with a lone surrogate included, named by its place (`place_error`)
    below `field` (`placed`; "": `message` is a message itself); a field that holds none but
    is nested past the interpreter's recursion limit (the encoder's RecursionError) by that
    field. Worded by `json_problem`. Call it once `json.dumps` of `message` failed.
    Iterative: any depth."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(message, ())]
    while stack:
        value, place = stack.pop()
        if isinstance(value, dict):
            for k in value:
                if (problem := json_problem(k)) is not None:
                    return placed(field, place, place_error(place, f"a key {problem}"))
            stack.extend((v, (*place, k)) for k, v in reversed(value.items()))
        elif isinstance(value, list | tuple):
            stack.extend((v, (*place, i)) for i, v in reversed(list(enumerate(value))))
        elif (problem := json_problem(value)) is not None:
            return placed(field, place, place_error(place, problem))
    for name, value in (message.items() if isinstance(message, dict) else ()):
        try:
            json.dumps(value, ensure_ascii=False, allow_nan=False)
        except RecursionError:
            return placed(field, (name,), field_error(name, NESTED_TOO_DEEP))
    return ValidationError(field or "message", "cannot be stored as JSON")  # not reached: json.dumps refused something
