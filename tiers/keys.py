"""Redis key names, shared by the hot tier and the warm tier's view cache, and the
fingerprint that ties what they copy from the log to one timeline of it.

Invariants:

- Every key of one conversation (hot set, cached views, rebuild scratch) starts with its
  hash tag `{<prefix>:<escaped conversation key>}`, so all of them live in one Redis
  Cluster slot, one Lua script can update them together, and erasure finds them all by
  that prefix.
- The escaping is injective (distinct keys never share a tag) and leaves only
  `[A-Za-z0-9._:@~%-]`: no `{` or `}` (which would move the tag) and no glob character
  (so the tag is its own SCAN pattern).
- A turn's fingerprint (`turn_fingerprint`) is its content hash and its append time. Two
  timelines of one log (a backup restored after the live file had moved on: same
  database uuid, same conversation keys and created_at) agree on a position's
  fingerprint exactly when it is the same append, and then on every position before it:
  past the point where they part, every turn was appended anew, at another time. So a
  Redis copy that records the fingerprint of the last turn it covers proves, with one
  index seek, that it was derived from this log and not from a discarded timeline.
"""

from __future__ import annotations

import urllib.parse

_SAFE = "._:@-"  # with letters, digits and `~`, which quote() never escapes


def escape_id(conversation_id: str) -> str:
    """Percent-encode everything outside [A-Za-z0-9._:@~-]."""
    return urllib.parse.quote(conversation_id, safe=_SAFE)


def hash_tag(prefix: str, conversation_id: str) -> str:
    """`{<prefix>:<escaped conversation key>}`: the start of every key of a conversation."""
    return "{" + prefix + ":" + escape_id(conversation_id) + "}"


def turn_fingerprint(content_hash: str, created_at: float) -> str:
    """The identity of one append in its log (see the module docstring): equal content
    re-appended later has another. repr() keeps the float exact."""
    return f"{content_hash}@{created_at!r}"
