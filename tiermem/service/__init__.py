"""The HTTP service: every Memory operation as JSON over HTTP (`tiermem serve`).

    app = create_app(Config.load(), auth=True)      # Memory is opened in the lifespan
    uvicorn.run(app, host=config.http_host, port=config.http_port)

Rules this module keeps:

- **Tenancy.** Namespaces are hierarchical (`acme`, `acme/alice`). Each bearer token in
  `config.auth_tokens` is bound to a namespace *prefix*: it may act on that namespace and
  every namespace below it, never on a sibling or a parent. Every /v1 request acts in one
  namespace, named by the `X-Tiermem-Namespace` header (absent: the token's own prefix),
  and passes it to Memory. What a caller sees never depends on another namespace:
  - a conversation route (`/v1/conversations/{id}/...`, and `/v1/search` with a
    `conversation_id`) in a namespace outside the token's prefix answers 404 with exactly
    the body a missing conversation gets, whatever that namespace holds;
  - a namespace-level route (`/v1/conversations`, `/v1/search` without a conversation,
    `/v1/stats`, `/v1/prune`, `DELETE /v1/namespace`) outside the prefix answers 403
    `namespace '<ns>' is outside this token's scope`, the same for every outside
    namespace, existing or not (it tells the caller only what its own token allows);
  - a malformed namespace header answers 422 naming the header; a duplicated one 400.
  Without a valid token, 401. `auth=False` (the CLI's `--no-auth`, loopback only) serves
  every namespace; without the header it acts in the `namespace` given to `create_app`.
- **Idempotent appends.** Both appends take an optional `Idempotency-Key` header
  (routes.conversations): a request sent again under its key stores nothing and answers
  the first answer (201, the same body) with `Idempotent-Replayed: true`; a malformed key,
  or one the conversation holds for a different request, is a 422 naming the header.
  `GET /v1/limits` says `idempotency_keys: true`, which an older server does not.
- **Erasure.** `DELETE /v1/conversations/{id}` and `DELETE /v1/namespace` erase on
  request (Memory.delete_conversation / delete_namespace) and answer the erasure report;
  the namespace route needs the header: nothing is erased by default.
- **Metrics.** `/metrics` counts every namespace (messages, conversations, requests per
  route), so a tenant token may not read it (403): it needs a token from
  `config.metrics_tokens`, or `config.metrics_public` (loopback `http_host` only, served
  only to loopback clients), or a `--no-auth` server.
- **DNS rebinding.** Bound to a loopback `http_host`, the service answers (every path
  but /healthz) only a `Host` of 127.0.0.1, localhost or [::1] (any port) or a name in
  `config.http_allowed_hosts` (else 421), and an `Origin`, when sent, of such a host
  (else 403); bound elsewhere, only when `http_allowed_hosts` is set (`guard.HostCheck`).
- **Hostile input.** Bodies are read into memory up to `config.max_body_bytes` (413
  past it, from Content-Length or by counting the stream; never below
  `max_content_bytes`: `create_app` refuses such a config), then checked before any
  handler sees them, whatever the headers say: `Content-Type`, `Content-Length`,
  `Authorization`, the namespace header and `Idempotency-Key` at most once each (400), a non-empty body
  only as `application/json` in UTF-8 or with no Content-Type, which is taken for JSON
  (else 415), and every non-empty
  body must be strict UTF-8 JSON without NaN/Infinity, nested at most `MAX_JSON_DEPTH`
  plus the levels its route wraps a message in (`guard.ENVELOPE_LEVELS`: a message nests
  `MAX_JSON_DEPTH` on every route, as in the library), without lone surrogates; then
  pydantic models, then Memory's own validation. Every refusal is 4xx with a message
  naming the field (at /v1/mcp a body's refusal is a JSON-RPC error carrying it);
  nothing is written.
- **Stalled clients.** (`tiermem serve`) A request's head must arrive whole within
  `config.http_header_timeout_s` of its connection's opening or previous answer (else the
  connection is closed) and its body within `config.http_body_timeout_s` of its head
  (else 408, nothing written); past `config.http_max_connections` connections a request
  is answered 503 with Retry-After at once (/healthz still served): `server`, the guard.
- **Storage that refuses.** A full disk answers 507; a read-only or failing database
  (read-only mount, immutable file, I/O errors) answers 503 with `Retry-After`, never 500,
  and `/healthz` reports the cold tier `read-only` (the kernel's answer to "may this
  process write the database, its sidecars and its directory?", plus any storage failure
  of the last `STORAGE_FAILURE_MEMORY_S`).
- **No 500s.** An unexpected exception is logged and answered 500, and counted in
  `/metrics`; the tests (tests/test_service_fuzz.py) show no input reaches it.
- **Startup order.** Memory (with the embedding model) and the consolidation scheduler
  are created in the lifespan, i.e. in the worker process after uvicorn has started it,
  never at import. Until then a route that needs the Memory answers 503 with Retry-After,
  "the service is starting"; from the start of the shutdown on (whoever owns the Memory),
  the same 503 "the service is shutting down" (/healthz: `"status": "stopping"`).
- **Methods and paths.** Every path that takes GET takes HEAD (the same status and
  headers, no body; `head`), and the OpenAPI document gives each GET a HEAD twin; a
  method a path does not take is 405 with `Allow` naming every method of the path; a
  path spelt with a trailing slash is 404, never a redirect the document does not declare
  (but `/v1/mcp/`, the MCP endpoint itself).

Where each rule lives: `app` (create_app, the lifespan), `runtime` (what one app holds),
`auth` (tokens, prefix grants, the namespace header and the scope dependencies), `guard`
(the Host check and the body guard middleware), `head` (HEAD wherever GET), `server` (how `tiermem serve` runs
uvicorn: the head deadline and the connection bound), `handlers` (exceptions to status
codes), `metrics` (Prometheus), `schemas` (request and response models), `routes` (one
module per area: ops, conversations, recall, admin).
"""

from tiermem.config import is_loopback
from tiermem.service.app import create_app, lifespan
from tiermem.service.auth import NAMESPACE_HEADER, Grant, ServiceConfigError, TokenAuth
from tiermem.service.guard import MAX_JSON_DEPTH, GuardMiddleware, check_json_body, json_content_type
from tiermem.service.handlers import STORAGE_RETRY_AFTER_S
from tiermem.service.metrics import MetricsMiddleware
from tiermem.service.routes.ops import STORAGE_FAILURE_MEMORY_S, cold_health
from tiermem.service.runtime import Runtime
from tiermem.service.schemas import MAX_CREATED_AT, MAX_POSITION, finite

__all__ = [
    "MAX_CREATED_AT",
    "MAX_JSON_DEPTH",
    "MAX_POSITION",
    "NAMESPACE_HEADER",
    "STORAGE_FAILURE_MEMORY_S",
    "STORAGE_RETRY_AFTER_S",
    "Grant",
    "GuardMiddleware",
    "MetricsMiddleware",
    "Runtime",
    "ServiceConfigError",
    "TokenAuth",
    "check_json_body",
    "cold_health",
    "create_app",
    "finite",
    "is_loopback",
    "json_content_type",
    "lifespan",
]
