"""Strict query-string and path parameters: an integer is written in decimal digits, and a
parameter is given once.

FastAPI reads an `int` query or path parameter in pydantic's lax mode, where Python's
`int()` rules apply: `k=1.0` was 1 (the JSON body's `{"k": 1.0}` is a 422: the body
models are strict), `k=1_0` was 10, `k=%205` (" 5") was 5, `+5` was 5, and
`DELETE /v1/conversations/c1/pins/1_0` unpinned position 10 (a write). Starlette keeps
every value of a repeated parameter and FastAPI took the last one: `k=5&k=6` searched
with 6, whatever a proxy or a log that reads the first took it to be.

`DIGITS` (`Annotated[int, Query(...), DIGITS]`) refuses, before the value is converted,
any text that is not `0` or digits without a leading zero (`CURSOR`: `-1` too, the
history's "before the first position"); the refusal is the service's 422 naming the
parameter. `single_values`, a dependency of the routers that take query parameters,
refuses a parameter given twice, by name, before the route runs: nothing is read or
written. The OpenAPI schema is unchanged (`integer`, its bounds)."""

from __future__ import annotations

import re
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BeforeValidator

from tiermem.errors import ValidationError
from tiermem.service.schemas import error_type
from tiermem.tiers.errors import shown

DIGITS_TEXT = re.compile(r"0|[1-9][0-9]*")  # a non-negative integer as written in a URL
CURSOR_TEXT = re.compile(r"-1|0|[1-9][0-9]*")  # ... or -1 (a cursor before position 0)


def _written_as(pattern: re.Pattern[str], what: str) -> BeforeValidator:
    """A check of the parameter's text against `pattern`, before pydantic's lax `int`."""
    def check(value: Any) -> Any:
        if isinstance(value, str) and pattern.fullmatch(value) is None:
            raise ValueError(f"must be {what}, got {shown(value)}")
        return value

    return BeforeValidator(check)


DIGITS = _written_as(DIGITS_TEXT, "an integer in decimal digits (no sign, point, space, '_' or leading zero)")
CURSOR = _written_as(CURSOR_TEXT, "-1 or an integer in decimal digits (no sign, point, space, '_' or "
                     "leading zero)")


def single_values(request: Request) -> None:
    """Refuse a query parameter given more than once (a 422 located at it, `["query", name]`,
    whether or not the route declares it): which value counts is not the server's to guess."""
    seen: set[str] = set()
    for name, _value in request.query_params.multi_items():
        if name in seen:
            exc = ValidationError(name, "given more than once; give it once")
            raise RequestValidationError([{"loc": ("query", name), "msg": exc.problem, "type": error_type(exc)}])
        seen.add(name)
