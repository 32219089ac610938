"""Who may act on which namespace: bearer tokens bound to namespace prefixes, the
separate metrics tokens, and the FastAPI dependencies that resolve a request's namespace.

Invariants (DESIGN invariant 10, tiermem.service states the rules): a token acts on its
prefix and every namespace below it, never on a sibling or a parent; a token is looked
up by its SHA-256 digest, so the time of the lookup depends neither on how many tokens
there are nor, usefully, on the token given (what a probe could learn is where the
digest of its guess falls, not how much of a real token it matched); a request names its namespace
in `NAMESPACE_HEADER` (absent: the token's own prefix); outside the prefix a
conversation route answers exactly what a missing conversation gets (404, the same
body) and a namespace route 403, the same for every outside namespace, so nothing a
caller sees depends on another namespace's contents. A configured token (`auth_tokens`,
`metrics_tokens`) is visible ASCII (`HEADER_TOKEN`: 0x21-0x7E, what an HTTP header
carries as text), refused at startup otherwise, never printed: a request's header is read
as Latin-1, so a token past ASCII never matched the UTF-8 configured one, and whitespace
or a control character is trimmed or refused on the way. Every visible ASCII character is
taken, RFC 6750's b64token or not (`:`, `@`, `"`, `%`...: every client sends them), so a
token that authenticated before still does; the inspector's cookie percent-encodes it.
"""

import hashlib
import hmac
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request
from fastapi.params import Depends as DependsParam
from fastapi.security import HTTPBearer

# what a token holds (visible ASCII): the one rule `tiermem.client` refuses its token by too
from tiermem.config import DEFAULT_MAX_ID_CHARS, HEADER_TOKEN, HEADER_TOKEN_RULE, MAX_ID_CHARS_LIMIT
from tiermem.errors import ConversationNotFound, ValidationError
from tiermem.errors import ServiceConfigError as ServiceConfigError  # defined in tiers.errors; found here too
from tiermem.service.runtime import runtime_of
from tiermem.service.schemas import error_type
from tiermem.tiers.models import NAMESPACE_PATTERN, NAMESPACE_SEPARATOR, namespace_within, validate_namespace

log = logging.getLogger("tiermem.service")

NAMESPACE_HEADER = "X-Tiermem-Namespace"
MIN_TOKEN_CHARS = 16  # shorter tokens are accepted with a warning: they are guessable

_NS_DOC = (
    "the namespace this request acts in: ids joined by '/' (e.g. `acme/user-7`), which must be the "
    "token's namespace prefix or below it; absent: the token's own prefix. Outside the prefix, "
    "conversation routes answer 404 exactly like a missing conversation and namespace routes 403"
)
NsHeader = Annotated[
    str | None,
    Header(
        alias=NAMESPACE_HEADER,
        description=_NS_DOC,
        json_schema_extra={"pattern": NAMESPACE_PATTERN.pattern, "maxLength": DEFAULT_MAX_ID_CHARS},
    ),
]


# -- tokens and grants ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """What one request's credential allows: the namespaces it may act on (`prefix` and
    below; None: every namespace, for `--no-auth`) and the namespace it acts in when the
    request names none."""

    prefix: str | None
    default: str

    def allows(self, namespace: str) -> bool:
        return self.prefix is None or namespace_within(namespace, self.prefix)


class TokenAuth:
    """Bearer token -> namespace prefix (and the separate metrics tokens). A request
    costs the same with 20 or 20,000 tokens: `grant` is one lookup by digest, `reach`
    one set lookup per level of the namespace (audit_scale: the loops over every token
    and every prefix took 2.7 ms and 10 ms a request at 20,000 tokens)."""

    def __init__(
        self,
        tokens: dict[str, str],
        *,
        enabled: bool,
        default_namespace: str,
        max_id_chars: int,
        metrics_tokens: Iterable[str] = (),
    ) -> None:
        self.enabled = enabled
        try:
            self.default_namespace = validate_namespace(default_namespace, "namespace", max_id_chars)
        except ValidationError as exc:
            raise ServiceConfigError(f"namespace {default_namespace!r}: {exc.problem}") from None
        # SHA-256 of the token -> its prefix: the key a request's token is looked up by
        self._by_digest: dict[bytes, str] = {}
        for token, ns in tokens.items():
            if not token or not token.strip():
                raise ServiceConfigError("auth_tokens: a token is empty")
            if not HEADER_TOKEN.fullmatch(token):  # named by its prefix: a token is never printed
                raise ServiceConfigError(
                    f"auth_tokens: the token of namespace prefix {ns!r} is refused; a token may hold "
                    f"{HEADER_TOKEN_RULE}")
            try:
                validate_namespace(ns, "namespace", max_id_chars)
            except ValidationError as exc:
                raise ServiceConfigError(
                    f"auth_tokens: namespace prefix {ns!r} is not a valid namespace ({exc.problem})"
                ) from None
            self._by_digest[_digest(token.encode("utf-8"))] = ns
        self._prefixes = frozenset(self._by_digest.values())
        self._metrics: list[bytes] = []
        for i, token in enumerate(metrics_tokens):
            if not token or not token.strip():
                raise ServiceConfigError("metrics_tokens: a token is empty")
            if not HEADER_TOKEN.fullmatch(token):
                raise ServiceConfigError(
                    f"metrics_tokens: token {i + 1} of the list is refused; a token may hold "
                    f"{HEADER_TOKEN_RULE}")
            if token in tokens:
                raise ServiceConfigError(
                    "metrics_tokens: a token is also in auth_tokens; a metrics token must not be a tenant's"
                )
            self._metrics.append(token.encode("utf-8"))
        if enabled and not self._by_digest:
            raise ServiceConfigError(
                "auth is on but no tokens are configured: set auth_tokens (env TIERMEM_AUTH_TOKENS="
                '\'{"<token>": "<namespace prefix>"}\') or run without auth (loopback only)'
            )
        if (enabled and any(len(t.encode("utf-8")) < MIN_TOKEN_CHARS for t in tokens)) or any(
                len(t) < MIN_TOKEN_CHARS for t in self._metrics):
            log.warning("some auth tokens are shorter than %d characters; use long random tokens", MIN_TOKEN_CHARS)

    @staticmethod
    def _given(authorization: str | None) -> bytes | None:
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return token.strip().encode("utf-8", "surrogateescape")

    def grant(self, authorization: str | None) -> Grant | None:
        """What the request's token allows; None when it has none or a bad one."""
        if not self.enabled:
            return Grant(None, self.default_namespace)
        given = self._given(authorization)
        if given is None:
            return None
        # Looked up by digest, not compared token by token: a dict compares the digests
        # (after their hashes), never the tokens, so a timing difference tells a caller
        # about SHA-256 of its guess only, which says nothing about a real token's bytes.
        found = self._by_digest.get(_digest(given))
        return Grant(found, found) if found is not None else None

    def reach(self, namespace: str) -> str | None:
        """The most specific token prefix that covers `namespace` (the reach of the
        narrowest token that may act on it); None when no token covers it."""
        # The prefixes covering `namespace` are itself and its ancestors (a prefix covers
        # exactly the namespaces equal to it or starting with it and a separator), so walk
        # those from the longest: at most MAX_NAMESPACE_DEPTH lookups for a valid namespace.
        candidate = namespace
        while True:
            if candidate in self._prefixes:
                return candidate
            cut = candidate.rfind(NAMESPACE_SEPARATOR)
            if cut < 0:
                return None
            candidate = candidate[:cut]

    def namespace(self, authorization: str | None) -> str | None:
        """The namespace a request with this token acts in by default; None: no valid token."""
        g = self.grant(authorization)
        return None if g is None else g.default

    def metrics_token(self, authorization: str | None) -> bool:
        """True when the request carries one of `metrics_tokens`."""
        given = self._given(authorization)
        if given is None:
            return False
        ok = False
        for known in self._metrics:
            ok |= hmac.compare_digest(known, given)
        return ok


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


# -- the request's namespace (FastAPI dependencies) ----------------------------------------------------


def _no_credentials() -> None:
    return None


def credentials(enabled: bool) -> list[DependsParam]:
    """The dependency every authenticated route carries, so that OpenAPI shows the bearer
    scheme on it, only when auth is on (the check itself is `grant_of`'s, and the guard
    middleware's before it)."""
    bearer = HTTPBearer(
        auto_error=False, description="a token from auth_tokens; it is bound to a namespace prefix"
    )
    return [Depends(bearer if enabled else _no_credentials)]


def grant_of(request: Request) -> Grant:
    grant = runtime_of(request).auth.grant(request.headers.get("authorization"))
    if grant is None:  # the middleware refused it already; kept for direct callers
        raise HTTPException(401, "missing or invalid bearer token", headers={"WWW-Authenticate": "Bearer"})
    return grant


def named(request: Request, header: str | None, grant: Grant) -> str:
    """The request's namespace: the header, validated, else the grant's default. Bounded
    by what any config allows, not today's max_id_chars: a namespace made before it was
    lowered is still read and erased (an append in it is refused by `Memory.append`,
    which checks the namespace it writes in against max_id_chars)."""
    if header is None:
        return grant.default
    try:
        return validate_namespace(header, NAMESPACE_HEADER, MAX_ID_CHARS_LIMIT)
    except ValidationError as exc:
        raise HTTPException(
            422,
            [{"loc": ["header", NAMESPACE_HEADER], "msg": exc.problem, "type": error_type(exc)}],
        ) from None


def conversation_scope(request: Request, x_tiermem_namespace: NsHeader = None) -> str:
    """Namespace of a conversation route. Outside the token's prefix, the answer of a
    missing conversation (raised before the body is validated, so neither a body nor
    an id can make it differ between outside namespaces)."""
    grant = grant_of(request)
    ns = named(request, x_tiermem_namespace, grant)
    if not grant.allows(ns):
        conv = request.path_params.get("conversation_id") or request.query_params.get("conversation_id", "")
        raise ConversationNotFound(conv)
    return ns


def namespace_scope(request: Request, x_tiermem_namespace: NsHeader = None) -> str:
    """Namespace of a namespace-level route: outside the prefix, 403, the same for
    every outside namespace."""
    grant = grant_of(request)
    ns = named(request, x_tiermem_namespace, grant)
    if not grant.allows(ns):
        raise HTTPException(403, f"namespace {ns!r} is outside this token's scope")
    return ns


def search_scope(request: Request, x_tiermem_namespace: NsHeader = None) -> str:
    """/v1/search is a conversation route with `conversation_id`, a namespace route without."""
    if request.query_params.get("conversation_id") is not None:
        return conversation_scope(request, x_tiermem_namespace)
    return namespace_scope(request, x_tiermem_namespace)


async def search_body_scope(request: Request, x_tiermem_namespace: NsHeader = None) -> str:
    """`POST /v1/search`'s scope, as the GET's: with a `conversation_id` in the body a
    conversation route, without one a namespace route; decided before the body is
    validated, so no body makes an outside namespace answer differently. The guard has
    checked the body is JSON; a body that is no object has no conversation_id."""
    try:
        doc = json.loads(await request.body() or b"{}")
    except ValueError:
        doc = None
    cid = doc.get("conversation_id") if isinstance(doc, dict) else None
    grant = grant_of(request)
    ns = named(request, x_tiermem_namespace, grant)
    if grant.allows(ns):
        return ns
    if cid is not None:
        raise ConversationNotFound(cid if isinstance(cid, str) else "")
    raise HTTPException(403, f"namespace {ns!r} is outside this token's scope")


def explicit_namespace(request: Request, x_tiermem_namespace: NsHeader = None) -> str:
    """Like `namespace_scope`, but the header is required: a whole namespace is never
    erased by default."""
    if x_tiermem_namespace is None:
        raise HTTPException(
            422,
            [
                {
                    "loc": ["header", NAMESPACE_HEADER],
                    "msg": "required: name the namespace to erase explicitly",
                    "type": "missing",
                }
            ],
        )
    return namespace_scope(request, x_tiermem_namespace)


Ns = Annotated[str, Depends(conversation_scope)]
SpaceNs = Annotated[str, Depends(namespace_scope)]
SearchNs = Annotated[str, Depends(search_scope)]
SearchBodyNs = Annotated[str, Depends(search_body_scope)]
ExplicitNs = Annotated[str, Depends(explicit_namespace)]
