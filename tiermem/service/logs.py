"""What `tiermem serve` writes to its log: uvicorn's, with request lines cut at the path.

Invariant: no query string reaches the log. An access log outlives erasure (log files are
rotated and shipped, never scrubbed), so it may hold what an erasure report's tombstone
holds anyway (paths: routes and conversation ids; times, statuses, client addresses) and
never content: the text of a search (`GET /v1/search?q=`) or any other query parameter.
`POST /v1/search` keeps the query out of the URL for clients and proxies too.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

ACCESS_LOGGER = "uvicorn.access"
PACKAGE_LOGGER = "tiermem"  # every module's logger is below it (logging.getLogger(__name__))
# the position of the path in uvicorn's access record: (client, method, path, http version, status)
ACCESS_PATH_ARG = 2


class DropQueryString(logging.Filter):
    """Cut the path of an access-log record at its `?`."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) > ACCESS_PATH_ARG:
            path = args[ACCESS_PATH_ARG]
            if isinstance(path, str):
                record.args = (*args[:ACCESS_PATH_ARG], path.split("?", 1)[0], *args[ACCESS_PATH_ARG + 1:])
        return True


def log_config(level: str = "info") -> dict[str, Any]:
    """uvicorn's own logging config, with `DropQueryString` on its access logger and
    handler (a handler an operator adds to the logger gets cut records too), and
    tiermem's own loggers at `level` (`serve --log-level`): their records go on to the
    root handler the CLI set up. Without it they sat at the CLI's WARNING, so what the
    service logs for the operator at INFO (an erasure's bytes reclaimed, the hot tier's
    recovery) was never written."""
    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"][PACKAGE_LOGGER] = {"level": level.upper()}
    config.setdefault("filters", {})["drop_query_string"] = {"()": DropQueryString}
    config["loggers"][ACCESS_LOGGER].setdefault("filters", []).append("drop_query_string")
    config["handlers"]["access"].setdefault("filters", []).append("drop_query_string")
    return config
