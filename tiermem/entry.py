"""`tiermem`'s console-script entry point (pyproject's `[project.scripts]`), kept light.

The CLI's module (`tiermem.cli`) imports the config, the models and numpy (about a second
on a cold start) before any of its code runs. A Ctrl-C in that time used to end with a
KeyboardInterrupt traceback and the process killed by SIGINT. Here the import is inside
the handler, so a Ctrl-C at any moment of a command's life is what the CLI says of one:

- `serve` and `consolidate --watch` (`stops_on_interrupt`) run until Ctrl-C stops them:
  exit 0 and no error line, whether it came while they started or later;
- any other command: one line, `error: ...` on stderr, exit 130 (`INTERRUPTED_EXIT`);
  before the command began, STARTING_TEXT (nothing was done), after, the command's own
  line (`tiermem.cli.interrupted_text`). `--debug` shows the traceback instead.

This module imports nothing of tiermem's at its own import (the package's `__init__`
loads its names lazily), so nothing slow runs before the handler is in place.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

# the status of a command interrupted by Ctrl-C (SIGINT), as a shell shows a process it killed
INTERRUPTED_EXIT = 128 + signal.SIGINT
# said of a Ctrl-C that came while the CLI was being loaded, before any command ran
STARTING_TEXT = "interrupted while starting; nothing was done"
# the group's options that take a value (`tiermem --data-dir D serve`): skipped, with
# their value, to find the command's name
GLOBAL_OPTIONS_WITH_VALUES = frozenset({"--data-dir", "--config", "--namespace"})
DEBUG_OPTION = "--debug"


def command_args(args: Sequence[str]) -> tuple[str | None, list[str]]:
    """The command named in a command line's arguments (after the group's options), and
    the arguments after it; (None, []) where none is named."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return (args[i + 1], list(args[i + 2:])) if i + 1 < len(args) else (None, [])
        if arg in GLOBAL_OPTIONS_WITH_VALUES:
            i += 2
        elif arg.startswith("-"):
            i += 1
        else:
            return arg, list(args[i + 1:])
    return None, []


def stops_on_interrupt(args: Sequence[str]) -> bool:
    """Whether the command line runs until Ctrl-C stops it (`serve`, `consolidate
    --watch`): a Ctrl-C at any time is its clean stop, exit 0."""
    name, rest = command_args(args)
    return name == "serve" or (name == "consolidate" and "--watch" in rest)


def debug_requested(args: Sequence[str]) -> bool:
    """Whether --debug is among the group's options (before the command's name)."""
    name, rest = command_args(args)
    before = list(args)[:len(args) - len(rest) - (name is not None)]
    return DEBUG_OPTION in before


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: the CLI, loaded under the Ctrl-C handling."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        from tiermem.cli import main as cli_main
    except KeyboardInterrupt:
        if stops_on_interrupt(args):
            sys.exit(0)
        if debug_requested(args):
            raise
        print(f"error: {STARTING_TEXT}", file=sys.stderr)
        sys.exit(INTERRUPTED_EXIT)
    cli_main(args)
