"""Redis key names, shared by the hot tier and the warm tier's view cache.

Invariants:

- Every key of one conversation (hot set, cached views, rebuild scratch) starts with its
  hash tag `{<prefix>:<escaped conversation key>}`, so all of them live in one Redis
  Cluster slot, one Lua script can update them together, and erasure finds them all by
  that prefix.
- The escaping is injective (distinct keys never share a tag) and leaves only
  `[A-Za-z0-9._:@~%-]`: no `{` or `}` (which would move the tag) and no glob character
  (so the tag is its own SCAN pattern).
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
