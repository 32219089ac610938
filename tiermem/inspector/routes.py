"""The inspector's pages under `/ui`: server-rendered HTML (Jinja2) with htmx for the
parts that change in place (a plan as the budget slider moves, a pin, a view's sources).

Auth and scope, the same walls as the API (tiermem.service):
- The credential is an API token, typed once into `/ui/login` and kept in an HttpOnly,
  SameSite=Strict cookie limited to `/ui` (Secure over https, as uvicorn tells it: behind a
  proxy only one in `http_forwarded_allow_ips`; or always, `ui_cookie_secure`); it is never put in a URL
  and never echoed into a page. Where a browser will drop that Secure cookie (a page on
  plain http at a host other than loopback: `Inspector.cookie_refused`), the login page and
  the sign-in's answer say so and how to get out, instead of a redirect back to the login.
  The cookie holds it percent-encoded (`_cookie_value`):
  a configured token is visible ASCII (tiermem.service.auth), of which `"` `;` `,` `\\`
  are no cookie-octets (RFC 6265); a cookie set as the token itself (an older server's,
  of a token with no `%`) reads back as that token. Every request re-checks it against
  the configured tokens, so a token removed from the config stops working at once.
  `--no-auth` servers need no login (loopback only, like the API).
- The namespace a page acts in is `?ns=` (default: the token's own prefix). A
  conversation page outside the token's prefix answers 404 with exactly the page of a
  missing conversation; a namespace page (the list, the metrics) outside it answers 403,
  the same for every outside namespace.
- Every POST needs the `HX-Request` header (a cross-site form cannot send it without a
  CORS preflight, which this server never grants) and a JSON body (the service's guard
  refuses any other); with SameSite=Strict that is the CSRF defence.
- Every HTML answer (`_html`: a page, an htmx fragment, a refusal) sends a
  Content-Security-Policy that allows only this origin's scripts and styles (htmx, its
  json-enc extension and a few lines of our own, all packaged) and no framing, `no-store`,
  `nosniff` and `Referrer-Policy: no-referrer` (namespaces and ids appear in URLs, tokens
  never).
"""

from __future__ import annotations

import inspect
import ipaddress
import json
import logging
import re
import time
import urllib.parse
from collections import Counter as Tally
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import jinja2
import markupsafe
import pydantic
from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup
from pydantic import BaseModel, ConfigDict, Field

from tiermem.config import MAX_ID_CHARS_LIMIT
from tiermem.inspector import charts, data
from tiermem.inspector.metrics import PlanMetrics
from tiermem.memory import MAX_BUDGET_TOKENS, Memory
from tiermem.planner.plan import SLICES, Plan, read_stored_plan
from tiermem.service.guard import host_of
from tiermem.service.head import HeadRoute
from tiermem.tiers.errors import ConversationNotFound, TiermemError, ValidationError
from tiermem.tiers.models import MAX_POSITION, MAX_TIMESTAMP, validate_id, validate_namespace
from tiermem.tiers.zones import MAX_ZONE_NAME_CHARS

if TYPE_CHECKING:
    from tiermem.service import Grant, Runtime

log = logging.getLogger("tiermem.inspector")

COOKIE = "tiermem_ui"
COOKIE_PATH = "/ui"
MAX_TOKEN_CHARS = 4096  # of a token typed into the login form
MAX_QUERY_CHARS = 4000  # of a what-if query typed into the plan form
DEFAULT_PLAN_BUDGET = 2000  # tokens: the plan form's first value (the API's default)
SLIDER_MIN, SLIDER_STEP = 100, 50  # tokens: the slider's usual grid (slider_range moves it to a link's budget)
SLIDER_MAX_FLOOR = 16000  # tokens: the slider reaches at least this, or the hot budget if larger
METRICS_CHART_CALLS = 60  # calls drawn in the per-layer chart
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
PAGE_HEADERS = {"Content-Security-Policy": CSP, "Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
                "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY"}
# a page cursor over one turn's stored plans (how many of them come before the page): an
# OFFSET both engines take, a signed 64-bit integer
MAX_PLAN_NUMBER = 2**63 - 1
STARTING_RETRY_S = 5  # seconds a browser is told to wait while the service opens its Memory
LOG_TEXT_CHARS = 600  # characters of a turn's text a log row shows (then "…")
# characters of each turn's text the source-turns fragment shows (then "…" and a link to the
# turn in the log): it returned whole texts, 50 MB for a sentence citing 50 turns of 1 MB
SOURCE_TEXT_CHARS = 4_000
# Unicode's invisible bidirectional formatting characters (embeddings and overrides
# U+202A-202E, isolates U+2066-2069, the marks U+200E, U+200F and U+061C): they reorder
# the text around them, so stored text showed spoofed ("invoice \u202e4321-FDP.exe" read
# "invoice exe.PDF-1234"). Every page shows each as a visible mark instead (`_controls`).
BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


class _Answer(Exception):  # control flow inside this module, never an error a caller sees
    """Raised by a helper that has already decided the response (login, 404, 422)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


# The forms' bodies are strict, as the API's (tiermem.service.schemas): a number field takes
# a JSON number alone (an integer field no fraction), a boolean field true/false alone, so a
# refusal names the field. Pydantic's lax mode pinned on {"pinned": "yes"} and planned
# {"budget": true} at budget 1. The plan form sends its budget as a number (static/inspector.js
# types its slider as the request is built: json-enc sends form fields as text); a link's
# budget is read leniently (`_budget_of`).
class LoginIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    token: str = Field(min_length=1, max_length=MAX_TOKEN_CHARS)


class PlanIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    query: str = Field("", max_length=MAX_QUERY_CHARS)
    budget: int = Field(DEFAULT_PLAN_BUDGET, ge=1, le=MAX_BUDGET_TOKENS)
    # the user's IANA zone to plan in; empty: the server's `timezone` setting
    timezone: str = Field("", max_length=MAX_ZONE_NAME_CHARS)


class PinIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    position: int = Field(ge=0, le=MAX_POSITION)
    pinned: bool
    priority: int = Field(50, ge=0, le=100)


def slider_range(budget: int, top: int) -> tuple[int, int]:
    """The budget slider's min and max on a page that shows `budget`. A range input snaps
    its value to min + k * step, so a link's budget off the 50-token grid (525) or under
    SLIDER_MIN (75) put the slider at another value (550, 100) than the label and the plan
    showed, and the next submit planned that one. The grid is moved to pass through the
    budget: min is the largest value on it at or under both SLIDER_MIN and the budget (75
    for 525 and for 75; 100 for any budget on the usual grid), max the smallest at or over
    `top` (and the budget), one step less where that passes MAX_BUDGET_TOKENS, so the arrow
    keys still move by SLIDER_STEP and reach both ends."""
    low = min(SLIDER_MIN, budget)
    lo = low - (low - budget) % SLIDER_STEP
    high = max(min(top, MAX_BUDGET_TOKENS), budget)  # no slider value the form would refuse
    hi = high + (budget - high) % SLIDER_STEP
    if hi > MAX_BUDGET_TOKENS:
        hi -= SLIDER_STEP  # still at or over the budget: it is at most MAX_BUDGET_TOKENS, on this grid
    return lo, hi


def _ts(t: Any) -> str:
    """A stored time as UTC text; "-" for what is no time a page can show (a stored row
    may hold text, a non-finite number or one past the year 9999, where gmtime raises)."""
    at = data.stored_time(t)
    if at is None or not 0 <= at <= MAX_TIMESTAMP:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


def _mark(m: re.Match[str]) -> str:
    return f"\u27e8U+{ord(m.group()):04X}\u27e9"  # ⟨U+202E⟩


def _controls(value: Any, in_attribute: bool = False) -> Markup:
    """`value` escaped, each bidi control character (`BIDI_CONTROLS`) shown as a visible
    mark: in text a styled `<span class=ctl>⟨U+202E⟩</span>`, in an attribute's value
    (`in_attribute`) the mark alone. The span has no quote, so one put in an attribute by
    mistake cannot end it."""
    escaped = str(markupsafe.escape(value))
    if in_attribute:
        return Markup(BIDI_CONTROLS.sub(_mark, escaped))
    return Markup(BIDI_CONTROLS.sub(lambda m: f"<span class=ctl>{_mark(m)}</span>", escaped))


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("tiermem.inspector", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(SLICES=SLICES, LAYER_COLOURS=charts.LAYER_COLOURS, age=data.age,
                       LOG_TEXT_CHARS=LOG_TEXT_CHARS, SOURCE_TEXT_CHARS=SOURCE_TEXT_CHARS)
    # every template shows stored text through it: {{ t.text | controls }}
    env.filters["controls"] = _controls
    env.filters["ts"] = _ts
    env.filters["pct"] = lambda x: f"{x:.0%}"
    return env


def _first_error(exc: pydantic.ValidationError | RequestValidationError) -> str:
    """`field: problem` of the first error; a query parameter's or a body field's name
    without FastAPI's `query.` / `body.` before it, as the forms' own refusals name it."""
    e = exc.errors()[0]
    loc = [str(p) for p in e.get("loc", ())]
    if isinstance(exc, RequestValidationError) and len(loc) > 1 and loc[0] in ("query", "path", "body"):
        loc = loc[1:]
    where = ".".join(loc) or "body"
    return f"{where}: {e.get('msg', 'invalid')}"


def refusal_fragment(detail: str | list[dict[str, Any]]) -> str:
    """The HTML the service's body guard (tiermem.service.guard) answers under /ui instead
    of its error JSON (a body that is not UTF-8, a lone surrogate, too large, too slow):
    the form's refusal as the inspector's own (`Inspector.body`), which htmx swaps in where
    the answer goes; its `detail` (a string, or items of `loc` and `msg`) as `field: problem`,
    a field named as the forms name it (`query`, not `body.query`; `body.15`, the body's
    character 15, as it is)."""
    if isinstance(detail, str):
        return f'<p class="error" role="alert">{_escape(detail)}</p>'
    said = []
    for item in detail:
        loc = list(item["loc"])
        if len(loc) > 1 and loc[0] == "body" and isinstance(loc[1], str):
            loc = loc[1:]
        said.append(f"{'.'.join(map(str, loc))}: {item['msg']}")
    return f'<p class="error" role="alert">{_escape("; ".join(said))}</p>'


# A link's budget is read as links were before the forms turned strict (a saved link keeps
# planning): pydantic's lax integer, as Python's int() reads text (a sign, leading zeros,
# `_` between digits, spaces around) and a float's text with no fraction (`1500.0`). A JSON
# body stays strict (PlanIn). Digits too many to parse (past 4,300) are still a number out
# of range: refused naming the limit, as a shorter one is, not as no integer.
LINK_BUDGET = pydantic.TypeAdapter(int)
DIGITS = re.compile(r"\s*([+-]?)[0-9]+\s*")


def _budget_of(text: str) -> int | str:
    """A link's `budget` as the form's JSON number where it reads as an integer (lax, as
    above); else the text, which the strict form refuses naming `budget`."""
    try:
        return LINK_BUDGET.validate_python(text, strict=False)
    except pydantic.ValidationError:
        digits = DIGITS.fullmatch(text)
        if digits is None:
            return text
        return 0 if digits.group(1) == "-" else MAX_BUDGET_TOKENS + 1


class Inspector:
    """The pages of one app, bound to its Runtime."""

    def __init__(self, runtime: Runtime, metrics: PlanMetrics) -> None:
        self.runtime = runtime
        self.metrics = metrics
        self.env = _env()

    # -- rendering --------------------------------------------------------------------------

    def page(self, request: Request, template: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        grant = ctx.pop("grant", None)
        ns = ctx.pop("ns", None)
        if ns is None and grant is not None:  # an error page: the nav links to the token's own namespace
            ns = grant.default
        html = self.env.get_template(template).render(
            request=request, ns=ns, grant=grant, auth=self.runtime.auth.enabled, url=self.url, **ctx)
        return _html(html, status)

    @staticmethod
    def url(path: str, ns: str | None = None, **params: Any) -> str:
        q = {k: v for k, v in {"ns": ns, **params}.items() if v is not None}
        return "/ui" + path + ("?" + urllib.parse.urlencode(q) if q else "")

    def error(self, request: Request, status: int, message: str, grant: Grant | None = None) -> _Answer:
        return _Answer(self.page(request, "error.html", status, title=f"{status}", message=message, grant=grant))

    # -- auth and scope -----------------------------------------------------------------------

    def grant(self, request: Request) -> Grant:
        auth = self.runtime.auth
        if not auth.enabled:
            g = auth.grant(None)
        else:
            token = _cookie_token(request.cookies.get(COOKIE))
            g = auth.grant(f"Bearer {token}") if token else None
        if g is None:
            if request.headers.get("hx-request"):
                raise _Answer(Response(status_code=401, headers={"HX-Redirect": "/ui/login"}))
            raise _Answer(RedirectResponse("/ui/login", status_code=303))
        return g

    def namespace(self, request: Request, grant: Grant) -> str:
        raw = request.query_params.get("ns")
        if raw is None:
            return grant.default
        try:
            # stored data, bounded by any config: a namespace made before max_id_chars was lowered
            return validate_namespace(raw, "ns", MAX_ID_CHARS_LIMIT)
        except ValidationError as exc:
            raise self.error(request, 422, f"ns: {exc.problem}", grant) from None

    def space(self, request: Request) -> tuple[Grant, str]:
        """A namespace page: outside the token's prefix, 403 (the same for every outside one)."""
        grant = self.grant(request)
        ns = self.namespace(request, grant)
        if not grant.allows(ns):
            raise self.error(request, 403, f"namespace {ns!r} is outside this token's scope", grant)
        return grant, ns

    def conversation(self, request: Request, cid: str) -> tuple[Grant, str, str]:
        """A conversation page: outside the prefix, exactly the answer of a missing conversation."""
        grant = self.grant(request)
        try:
            validate_id(cid, "conversation_id", MAX_ID_CHARS_LIMIT)  # stored data: any config's bound
        except ValidationError as exc:
            raise self.error(request, 422, f"conversation_id: {exc.problem}", grant) from None
        ns = self.namespace(request, grant)
        if not grant.allows(ns) or self.mem().cold.key_of(ns, cid) is None:
            raise self.not_found(request, cid, grant)
        return grant, ns, cid

    def not_found(self, request: Request, cid: str, grant: Grant | None) -> _Answer:
        return self.error(request, 404, f"conversation {cid!r} not found", grant)

    def mem(self) -> Memory:
        unavailable = self.runtime.unavailable()  # starting, or shutting down
        if unavailable is not None or self.runtime.memory is None:
            raise _Answer(_html(unavailable or "the service is starting", 503, {"Retry-After": str(STARTING_RETRY_S)}))
        return self.runtime.memory

    def cookie_secure(self, request: Request) -> bool:
        """Whether the login cookie is Secure (`ui_cookie_secure`): the request's scheme is
        https only as uvicorn sees it, that is behind a proxy in `http_forwarded_allow_ips`."""
        return self.runtime.config.ui_cookie_secure == "always" or request.url.scheme == "https"

    def cookie_refused(self, request: Request) -> bool:
        """Whether a browser will refuse the login cookie this request gets: it is Secure
        (`always`) and the page is plain http to a host that is not loopback, where no
        browser keeps a Secure cookie; signing in then led back to the login page, silently.
        A hint for the page only, never for the cookie (it stays Secure): a TLS proxy that
        is not in `http_forwarded_allow_ips` still names https in its forwarded headers,
        which count here from any client, as a page on https is no loop."""
        if not (self.runtime.auth.enabled and self.cookie_secure(request)) or request.url.scheme == "https":
            return False
        if _forwarded_https(request.headers.get("x-forwarded-proto"), request.headers.get("forwarded")):
            return False
        return not _browser_loopback(request.headers.get("host"))

    @staticmethod
    def csrf(request: Request) -> None:
        if request.headers.get("hx-request") != "true":
            raise _Answer(_html("a form of this inspector is needed (HX-Request header)", 403))

    @staticmethod
    async def body(request: Request, model: type[pydantic.BaseModel]) -> Any:
        raw = await request.body()
        try:
            return model.model_validate(json.loads(raw) if raw else {})
        except (pydantic.ValidationError, ValueError) as exc:
            msg = _first_error(exc) if isinstance(exc, pydantic.ValidationError) else "body: not JSON"
            raise _Answer(_html(f'<p class="error" role="alert">{_escape(msg)}</p>', 422)) from None

    # -- plans ------------------------------------------------------------------------------------

    def what_if(self, ns: str, cid: str, query: str | None, budget: int, timezone: str = "") -> dict[str, Any]:
        """A plan the agent would get now, made without recording anything (`preview=True`:
        planned as the agent's recorded call would be, a first context's epoch reserve
        included, where `record=False` plans a fresh context that no call extends), in
        `timezone` (empty: the server's zone); a bad zone is the form's error, like a bad budget."""
        try:
            ctx = self.mem().context(cid, query or None, budget, namespace=ns, preview=True,
                                     timezone=timezone or None)
        except ConversationNotFound:
            raise
        except ValidationError as exc:
            return {"error": f"{exc.field}: {exc.problem}", "plan": None, "messages": []}
        return {"error": None, "plan": ctx.plan.to_dict(), "messages": ctx.messages}

    def slider_max(self) -> int:
        return max(SLIDER_MAX_FLOOR, self.runtime.config.hot_budget_tokens)


def _html(body: str, status: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    """Every HTML answer of the inspector, with the page headers: a fragment or a refusal
    is as much a page to a browser that is sent to its URL (or frames it) as a full one."""
    return HTMLResponse(body, status_code=status, headers={**PAGE_HEADERS, **(headers or {})})


def _cookie_value(token: str) -> str:
    """The token as the cookie keeps it: percent-encoded, so only cookie-octets whatever
    visible ASCII the token holds (a browser keeps a value with `"`, `;`, `,` or `\\` only
    in part, or not at all)."""
    return urllib.parse.quote(token, safe="")


def _cookie_token(value: str | None) -> str | None:
    """The token a cookie of `_cookie_value` holds. A cookie an older server set as the
    token itself holds no `%` (the b64token it took has none), so it reads back unchanged."""
    return urllib.parse.unquote(value) if value else None


def _forwarded_https(x_forwarded_proto: str | None, forwarded: str | None) -> bool:
    """Whether a proxy says the browser's request was https: `X-Forwarded-Proto: https`, or
    `Forwarded: proto=https` (RFC 7239). The first entry of each, the proxy nearest the
    browser (each further proxy appends its own)."""
    if x_forwarded_proto and x_forwarded_proto.split(",")[0].strip().lower() == "https":
        return True
    for pair in (forwarded or "").split(",")[0].split(";"):
        name, _, value = pair.partition("=")
        if name.strip().lower() == "proto" and value.strip().strip('"').lower() == "https":
            return True
    return False


def _browser_loopback(host_header: str | None) -> bool:
    """Whether browsers take the Host a page was opened at for this machine, where they keep
    a Secure cookie over plain http too: `localhost`, a name under `.localhost`, a
    loopback address (127.0.0.0/8, ::1). No Host, or one of no such form: not loopback."""
    host = host_of(host_header) if host_header else None
    if host is None:
        return False
    host = host.rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name
        return False


def _escape(s: str) -> str:
    return str(markupsafe.escape(s))


def build_router(ins: Inspector) -> APIRouter:
    # HEAD answered wherever GET is, as on the service's routes (tiermem.service.head)
    r = APIRouter(prefix="/ui", include_in_schema=False, route_class=HeadRoute)

    @r.get("")
    def root() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=307)

    @r.get("/login")
    def login_page(request: Request) -> HTMLResponse:
        # said before the token is typed: where the browser will refuse the cookie
        return ins.page(request, "login.html", title="Sign in", cookie_refused=ins.cookie_refused(request))

    @r.post("/login")
    async def login(request: Request) -> Response:
        ins.csrf(request)
        body: LoginIn = await ins.body(request, LoginIn)
        grant = ins.runtime.auth.grant(f"Bearer {body.token}")
        if grant is None or not ins.runtime.auth.enabled:
            return _html('<p class="error" role="alert">That token is not valid here.</p>', 401)
        if ins.cookie_refused(request):
            # no redirect into the loop: the form says why the browser drops the cookie and
            # the two ways out. The cookie is still set, Secure (a browser over http drops it,
            # and the token crossed the network in this POST anyway); where the hint is wrong
            # (a TLS proxy that names no scheme) it is kept, and the page's link goes on.
            resp: Response = _html(ins.env.get_template("_cookie_refused.html").render(signed_in=True))
        else:
            resp = Response(status_code=200, headers={"HX-Redirect": "/ui/"})
        resp.set_cookie(COOKIE, _cookie_value(body.token.strip()), path=COOKIE_PATH, httponly=True,
                        samesite="strict", secure=ins.cookie_secure(request))
        return resp

    @r.post("/logout")
    def logout(request: Request) -> Response:
        ins.csrf(request)
        resp = Response(status_code=200, headers={"HX-Redirect": "/ui/login"})
        resp.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict", secure=ins.cookie_secure(request))
        return resp

    @r.get("/")
    def conversations(request: Request, after: str | None = None) -> HTMLResponse:
        grant, ns = ins.space(request)
        try:
            listing = data.conversations_page(ins.mem(), ns, after)
        except ValidationError as exc:  # a cursor that is no id
            raise ins.error(request, 422, str(exc), grant) from None
        return ins.page(request, "conversations.html", title=f"Conversations in {ns}", grant=grant, ns=ns,
                        listing=listing)

    @r.get("/c/{cid}")
    def conversation(request: Request, cid: str, page: int | None = None) -> HTMLResponse:
        grant, ns, cid = ins.conversation(request, cid)
        mem = ins.mem()
        try:
            turns = data.turns_page(mem, ns, cid, page)
            row = data.conversation_row(mem, ns, cid)
        except ConversationNotFound:
            raise ins.not_found(request, cid, grant) from None
        chart = charts.hot_composition(row.hot.pinned_tokens, row.hot.tokens - row.hot.pinned_tokens,
                                       row.hot.budget, row.hot.overflow_tokens) if row.hot.state == "ok" else None
        return ins.page(request, "conversation.html", title=cid, grant=grant, ns=ns, cid=cid, turns=turns,
                        row=row, chart=chart, tab="log")

    @r.post("/c/{cid}/pins")
    async def pin(request: Request, cid: str) -> HTMLResponse:
        ins.csrf(request)
        grant, ns, cid = ins.conversation(request, cid)
        body: PinIn = await ins.body(request, PinIn)
        mem = ins.mem()
        try:
            if body.pinned:
                mem.pin(cid, body.position, priority=body.priority, namespace=ns)
            else:
                mem.unpin(cid, body.position, namespace=ns)
            turns = data.turns_page(mem, ns, cid, body.position // data.TURNS_PER_PAGE)
        except ConversationNotFound:
            raise ins.not_found(request, cid, grant) from None
        except TiermemError as exc:
            return _html(f'<tr><td colspan="9" class="error" role="alert">{_escape(str(exc))}</td></tr>', 422)
        row = next((t for t in turns.rows if t.position == body.position), None)
        if row is None:
            return _html(f'<tr><td colspan="9" class="error" role="alert">no turn at position '
                         f'{body.position}</td></tr>', 422)
        html = ins.env.get_template("_turn_row.html").render(t=row, ns=ns, cid=cid, url=ins.url)
        return _html(html)

    @r.get("/c/{cid}/plan")
    def plan_page(request: Request, cid: str, q: str = "", budget: str = str(DEFAULT_PLAN_BUDGET),
                  timezone: str = "") -> HTMLResponse:
        grant, ns, cid = ins.conversation(request, cid)
        status = 200
        result: dict[str, Any]
        try:
            # the what-if form's own check, so a link refuses exactly what the form's POST does
            form = PlanIn.model_validate({"query": q, "budget": _budget_of(budget), "timezone": timezone})
        except pydantic.ValidationError as exc:
            # the page again with the refusal where a plan would be; what is echoed stays
            # within the form's limits, and nothing is planned
            status, result = 422, {"error": _first_error(exc), "plan": None, "messages": []}
            form = PlanIn(query=q[:MAX_QUERY_CHARS], timezone=timezone[:MAX_ZONE_NAME_CHARS])
        else:
            try:
                result = ins.what_if(ns, cid, form.query, form.budget, form.timezone)
            except ConversationNotFound:
                raise ins.not_found(request, cid, grant) from None
            if result["error"] is not None:  # refused by the planner (a zone, a budget too small)
                status = 422
        slider_min, slider_max = slider_range(form.budget, ins.slider_max())
        return ins.page(request, "plan.html", status, title=f"Plan a context: {cid}", grant=grant, ns=ns, cid=cid,
                        query=form.query, budget=form.budget, timezone=form.timezone,
                        max_query_chars=MAX_QUERY_CHARS, max_zone_chars=MAX_ZONE_NAME_CHARS,
                        slider_min=slider_min, slider_max=slider_max,
                        slider_step=SLIDER_STEP, tab="plan", **_plan_ctx(result))

    @r.post("/c/{cid}/plan")
    async def plan(request: Request, cid: str) -> HTMLResponse:
        ins.csrf(request)
        grant, ns, cid = ins.conversation(request, cid)
        body: PlanIn = await ins.body(request, PlanIn)
        try:
            result = ins.what_if(ns, cid, body.query, body.budget, body.timezone)
        except ConversationNotFound:
            raise ins.not_found(request, cid, grant) from None
        html = ins.env.get_template("_plan.html").render(url=ins.url, ns=ns, cid=cid, **_plan_ctx(result))
        # a refusal is a 422 whoever refuses (the form's check or the planner's), as the GET
        return _html(html, 422 if result["error"] is not None else 200)

    @r.get("/c/{cid}/plans")
    def plans(request: Request, cid: str,
              turn: Annotated[int | None, Query(ge=0, le=MAX_POSITION)] = None,
              turns_before: Annotated[int | None, Query(ge=0, le=MAX_POSITION)] = None,
              after_plan: Annotated[int | None, Query(ge=0, le=MAX_PLAN_NUMBER)] = None) -> HTMLResponse:
        # the cursor was `after`, a row id of the table every namespace's plans share (its
        # gaps counted others' plans); an old link's `after` is an unknown parameter now,
        # ignored: the turn's first plans, never a global id read as a plan's number
        grant, ns, cid = ins.conversation(request, cid)
        try:
            stored = data.stored_plans(ins.mem(), ns, cid, turn, turns_before=turns_before, after=after_plan)
        except ConversationNotFound:
            raise ins.not_found(request, cid, grant) from None
        rendered = [{"number": p["number"], "created_at": p["created_at"], **_stored_plan_ctx(p["plan"])}
                    for p in stored.plans]
        return ins.page(request, "plans.html", title=f"Stored plans: {cid}", grant=grant, ns=ns, cid=cid,
                        stored=stored, rendered=rendered, enabled=ins.runtime.config.store_plans, tab="plans")

    @r.get("/c/{cid}/views")
    def views(request: Request, cid: str, kind: str | None = None, key: str = "",
              version: Annotated[int | None, Query(ge=0, le=MAX_POSITION)] = None,
              after: str | None = None) -> HTMLResponse:
        grant, ns, cid = ins.conversation(request, cid)
        want = (kind, key, version) if kind is not None and version is not None else None
        try:
            views = data.view_panels(ins.mem(), ns, cid, want, after)
        except ConversationNotFound:
            raise ins.not_found(request, cid, grant) from None
        except ValidationError as exc:  # a cursor that is no session id
            raise ins.error(request, 422, str(exc), grant) from None
        cfg = ins.runtime.config
        return ins.page(request, "views.html", title=f"Warm views: {cid}", grant=grant, ns=ns, cid=cid,
                        views=views, max_turns=cfg.warm_max_turns_behind, max_seconds=cfg.warm_max_seconds_behind,
                        tab="views")

    @r.get("/c/{cid}/turns")
    def turns(request: Request, cid: str, positions: str = "") -> HTMLResponse:
        grant, ns, cid = ins.conversation(request, cid)
        try:
            wanted = [int(p) for p in positions.split(",") if p.strip()][: data.TURNS_PER_PAGE]
            if any(not 0 <= p <= MAX_POSITION for p in wanted):
                raise ValueError("out of range")
        except ValueError:
            return _html('<p class="error" role="alert">positions: comma-separated integers '
                         f'from 0 to {MAX_POSITION}</p>', 422)
        try:
            msgs = data.source_turns(ins.mem(), ns, cid, wanted)
        except ConversationNotFound:
            raise ins.not_found(request, cid, grant) from None
        html = ins.env.get_template("_sources.html").render(msgs=msgs, ns=ns, cid=cid, url=ins.url)
        return _html(html)

    @r.get("/metrics")
    def metrics_page(request: Request) -> HTMLResponse:
        grant, ns = ins.space(request)
        samples = ins.metrics.history([ns])
        recent = samples[-METRICS_CHART_CALLS:]
        classes = Tally(s.query_class for s in samples)
        stale = Tally(k for s in samples for k in s.stale_views)
        totals = {
            "calls": len(samples),
            "degraded": sum(1 for s in samples if s.degraded),
            "load_bearing_left_out": sum(s.load_bearing_left_out for s in samples),
            "stale_reads": sum(stale.values()),
            "epochs_started": sum(1 for s in samples if s.new_epoch),
            "full": sum(1 for s in samples if s.budget and s.tokens >= s.budget),
        }
        pending = ins.mem().cold.namespace_stats(ns).get("pending_embeddings", 0)
        return ins.page(
            request, "metrics.html", title=f"Metrics: {ns}", grant=grant, ns=ns, totals=totals, classes=classes,
            stale=stale, pending=pending, tracked=ins.metrics.namespaces(grant.allows),
            use_chart=charts.ratio_series([s.tokens / s.budget for s in samples if s.budget],
                                          "budget use per call (tokens / budget)"),
            layer_chart=charts.layer_columns([(s.layers, s.budget) for s in recent],
                                             f"tokens per layer, last {len(recent)} calls"),
            tune_chart=tune_chart(grant, ins.runtime.config.last_tune_path),
            recent=list(reversed(samples[-20:])))

    return r


def tune_chart(grant: Grant, path: Path) -> Markup | None:
    """The latest `tiermem tune` result as recall against cost, for an operator only: the
    run's conversation ids and configuration belong to no single namespace."""
    if grant.prefix not in (None, ""):
        return None
    points, kind = data.tune_points(path)
    return charts.recall_vs_cost(points, f"latest tiermem tune: {kind or 'recall'} against billed cost, "
                                         "one point per candidate and budget")


def _plan_ctx(result: dict[str, Any]) -> dict[str, Any]:
    """What `_plan.html` needs: the plan (a dict in `Plan.to_dict`'s shape), its messages,
    a chart, and `notes`: the parts of a stored plan that could not be shown."""
    plan = result.get("plan")
    notes = result.get("notes") or []
    if plan is None:
        return {"plan": None, "messages": [], "error": result.get("error"), "chart": None, "by_layer": {},
                "layers": {}, "notes": notes}
    by_layer: dict[str, list[dict[str, Any]]] = {}
    for it in plan.get("items", []):
        by_layer.setdefault(it["slice"], []).append(it)
    # what each layer costs as sent (Plan.slice_tokens: a block's shared headings once),
    # not its items' sum, which counts a heading with each item
    layers = Plan.from_dict(plan).slice_tokens()
    chart = charts.budget_bar(layers, int(plan.get("budget") or 0), "token budget use per layer",
                              total=int(plan.get("tokens") or 0))
    return {"plan": plan, "messages": result.get("messages") or [], "error": result.get("error"), "chart": chart,
            "by_layer": by_layer, "layers": layers, "notes": notes}


def _stored_plan_ctx(raw: Any) -> dict[str, Any]:
    """A stored plan is whatever its row holds: only what passes `read_stored_plan` is
    rendered, and each part that does not becomes a visible note."""
    plan, notes = read_stored_plan(raw)
    return _plan_ctx({"plan": plan or None, "messages": [], "error": None, "notes": notes})


def install_ui(app: FastAPI, runtime: Runtime, metrics: PlanMetrics) -> Inspector:
    ins = Inspector(runtime, metrics)

    async def answer(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, _Answer)
        return exc.response

    # a typed query parameter of a page (`page`, `turn`, `version`) that is no integer in
    # range: the inspector's error page, not the API's JSON 422 (the service's handler,
    # installed before this one, answers every other path as before)
    api_refusal = app.exception_handlers.get(RequestValidationError, request_validation_exception_handler)

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        if not _under_ui(request.url.path):
            answer = api_refusal(request, exc)  # a handler may be a coroutine function or not
            return await answer if inspect.isawaitable(answer) else answer
        message = _first_error(exc)
        if request.headers.get("hx-request"):  # a fragment's refusal, where htmx puts the answer
            return _html(f'<p class="error" role="alert">{_escape(message)}</p>', 422)
        try:  # the nav of a signed-in page; the refusal alone before the sign-in (it shows no data)
            grant: Grant | None = ins.grant(request)
        except _Answer:
            grant = None
        return ins.page(request, "error.html", 422, title="422", message=message, grant=grant)

    app.add_exception_handler(_Answer, answer)
    app.add_exception_handler(RequestValidationError, refused)
    app.include_router(build_router(ins))
    return ins


def _under_ui(path: str) -> bool:
    """Whether `path` is the inspector's (`/ui`, `/ui/...`)."""
    return path == COOKIE_PATH or path.startswith(COOKIE_PATH + "/")
