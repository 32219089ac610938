"""The `server` / `admin` / `mem` fixtures of hot_fixtures as a pytest plugin: a test module
on a redis-server of its own sets `pytest_plugins = ["hot_server"]` and names them as its
parameters. A module's own fixture of the same name wins over these (its own server).
"""

from hot_fixtures import admin, mem, server

__all__ = ["admin", "mem", "server"]
