"""The Redis URLs tiermem accepts, parsed once for the client (tiers.hot.make_client) and
for the config check (`Config.redis_url`), so that a URL the config accepts is one the
client can open, and a bad one is refused at startup naming the field.

Invariants:

- Schemes: `redis://` and `rediss://` (TCP, TLS) with an optional integer port in
  1..65535, `unix:///path/to.sock` with a non-empty path, and a Redis Cluster as
  `redis+cluster://` or `rediss+cluster://`, or any TCP URL with the query flag
  `cluster=1` (also `true`/`yes`). A cluster over a unix socket does not exist.
- The cluster flag is removed from what redis-py sees; nothing else of the URL changes
  (user, password, database, other query parameters pass through).
- No import of redis here: `tiermem --help` and the config check do not need it.
- A URL is printed (errors, `tiermem config`) only through `redacted_url`: no password,
  however its userinfo is written, and no secret-looking query value.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

TCP_SCHEMES = ("redis", "rediss")
UNIX_SCHEME = "unix"
CLUSTER_SUFFIX = "+cluster"
CLUSTER_TRUE = ("1", "true", "yes")
MAX_PORT = 65535
ACCEPTED = "redis://, rediss://, unix://, redis+cluster:// or rediss+cluster://"
REDACTED = "<redacted>"
# query parameters that may carry a credential (redis-py and libpq read `password=`)
SECRET_QUERY_KEY = re.compile(r"pass|secret|token|key", re.IGNORECASE)


@dataclass(frozen=True)
class RedisURL:
    url: str  # for redis-py's from_url: the cluster flag removed
    cluster: bool


def parse_redis_url(url: str) -> RedisURL:
    """The URL as redis-py should see it and whether it names a Cluster; ValueError
    saying what is wrong (the caller names the field)."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"must be a {ACCEPTED} URL (or unset for the embedded redis-server), got {url!r}")
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    cluster = False
    if scheme.endswith(CLUSTER_SUFFIX):
        scheme, cluster = scheme.removesuffix(CLUSTER_SUFFIX), True
    if scheme not in (*TCP_SCHEMES, UNIX_SCHEME):
        raise ValueError(f"must be a {ACCEPTED} URL, got scheme {parts.scheme!r} in {_shown(url)}")
    query = []
    for key, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if key == "cluster":
            cluster = cluster or value.lower() in CLUSTER_TRUE
        else:
            query.append((key, value))
    if scheme == UNIX_SCHEME:
        if cluster:
            raise ValueError(f"a Redis Cluster URL needs redis:// or rediss://, not {_shown(url)}")
        if not parts.path:
            raise ValueError(f"a unix:// URL needs the socket's path (unix:///path/to.sock), got {_shown(url)}")
    else:
        try:
            port = parts.port  # ValueError for a port that is not an integer in 0..65535
        except ValueError:
            raise ValueError(f"the port must be an integer in 1..{MAX_PORT}, got {_shown(url)}") from None
        if port == 0:
            raise ValueError(f"the port must be an integer in 1..{MAX_PORT}, got {_shown(url)}")
    # Reassembled by hand: urlunsplit drops the "//" of "unix:///path" (empty netloc).
    clean = f"{scheme}://{parts.netloc}{parts.path}"
    if query:
        clean += "?" + urllib.parse.urlencode(query)
    return RedisURL(clean, cluster)


def _shown(url: str) -> str:
    return repr(redacted_url(url))


def redacted_url(url: str) -> str:
    """`url` as it may be printed: its userinfo's password (everything up to the last
    `@`, which a password holding an unescaped `/`, `?` or `#` hides from urlsplit) and
    the values of secret-looking query parameters replaced by REDACTED. A user name
    stays when one precedes a `:`."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    userinfo, at, hostpart = rest.rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        shown_user = f"{user}:{REDACTED}" if colon and "/" not in user else REDACTED
        rest = f"{shown_user}@{hostpart}"
    head, q, query = rest.partition("?")
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    if any(SECRET_QUERY_KEY.search(k) for k, _ in pairs):  # else the query stays as written
        rest = head + q + "&".join(f"{k}={REDACTED if SECRET_QUERY_KEY.search(k) else v}" for k, v in pairs)
    return f"{scheme}{sep}{rest}"
