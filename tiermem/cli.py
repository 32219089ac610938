"""`tiermem`: the command line.

    tiermem append conv-1 --role user --content "No red-eyes, please."
    tiermem context conv-1 -q "which flights did I rule out?" --budget 800
    tiermem serve --port 8080                # bearer tokens from auth_tokens
    tiermem demo                             # why this exists, in thirty seconds

Global options (`--data-dir`, `--config`, `--namespace`, `--debug`) go before the
command. Output is a readable table by default and one JSON document with `--json`;
a note on how it was made (`search` ranked by keywords only, the embedding model
unavailable) goes to stderr, so stdout stays what a script reads. A degraded embedder is
said in that one line, its reason in full (`_note_keywords_only`): each run is a new
process, which would otherwise log the degraded episode's traceback every time; with
`--debug` the log's records, traceback and all, come too; not the HTTP client libraries'
request records (`WIRE_LOGGERS`, held at WARNING: they quote URLs, which may carry a
password or tenant ids).
Exit codes: 0 done, 2 usage error (click's), 1 any other error, reported as one line
`error: ...` on stderr; `--debug` shows the traceback instead. Ctrl-C: 130 and one line
saying what the command left (`interrupted_text`), at any moment from the first import on
(the console script's entry point, `tiermem.entry`, loads this module under its handler);
`serve` and `consolidate --watch`, which run until Ctrl-C stops them, exit 0 saying
nothing. A command whose standard output was closed by its reader (`tiermem export |
head`) stops quietly with 141, as a process killed by SIGPIPE (`git log | head`) does, its
help (`tiermem --help | head`) too: the one handler is `_closed_stdout_exits_quietly`, around `TiermemGroup.invoke` and,
for the top-level --help and --version printed before it, `TiermemGroup.make_context`.

Heavy imports (Memory, the embedding model, FastAPI, the evals) happen inside the
commands that need them, so `tiermem --help` stays fast, and each command opens only
the tiers it uses (e.g. `history` never starts Redis). The read commands (`history`,
`search`, `stats`, `stop-redis`) work on a read-only data dir: the database is opened
read-only and the hot tier, when its directory cannot be prepared, is skipped.

A command that reads or changes what is stored (`history`, `search`, `context`, `facts`,
`stats`, `export`, `fork`, `pin`, `unpin`, `delete`, `delete-namespace`, `prune`,
`rebuild`) needs the SQLite log to exist: on a data dir without one (a typo in
`--data-dir` or `TIERMEM_DATA_DIR`) it says so, naming the path and where data_dir came
from, and creates nothing. The commands that may store the first messages (`append`,
`import`, `mcp`, `serve`) or work beside them (`consolidate`, `index`) create it, as
`Memory` does (`CliState.memory`'s `create`).
"""

from __future__ import annotations

if __name__ == "__main__":  # pragma: no cover - `python -m tiermem.cli`: as the console script,
    # the imports below under its Ctrl-C handling (tiermem.entry); it exits
    from tiermem.entry import main as _entry_main

    _entry_main()

import errno
import functools
import io
import json
import logging
import math
import os
import re
import select
import signal
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn

import click

# the slow imports (the config, the models, numpy): a Ctrl-C during them is handled by
# the console script's entry point (tiermem.entry), which imports this module
from tiermem.config import DEFAULT_MAX_ID_CHARS, MAX_ID_CHARS_LIMIT, MAX_SCHEDULER_INTERVAL_S
from tiermem.entry import INTERRUPTED_EXIT, STARTING_TEXT, debug_requested, stops_on_interrupt
from tiermem.memory import (
    DEFAULT_BUDGET_TOKENS,
    DEFAULT_NAMESPACE,
    DEFAULT_PIN_PRIORITY,
    EMBEDDER_EPISODE,
    EPISODE_ATTR,
    MAX_AGE_S,
    MAX_BATCH_MESSAGES,
    MAX_BUDGET_TOKENS,
    MAX_HISTORY_PAGE,
    MAX_PIN_PRIORITY,
    MAX_SEARCH_K,
    MIN_PIN_PRIORITY,
    SEARCH_KEYWORDS_ONLY,
)
from tiermem.tiers.errors import STANDARD_OUTPUT, ValidationError
from tiermem.tiers.files import PRIVATE_FILE_MODE
from tiermem.tiers.formats import CHAT_ROLES
from tiermem.tiers.models import (
    HIT_SUPERSEDED,
    HIT_SUPERSEDED_IN_PART,
    MAX_POSITION,
    NAMESPACE_SEPARATOR,
    SearchHit,
    check_idempotency_key,
    hit_supersession,
    parse_message,
    validate_id,
    validate_namespace,
)
from tiermem.tiers.zones import optional_timezone

if TYPE_CHECKING:
    import pydantic
    from rich.console import Console
    from rich.text import Text

    from tiermem.config import Config
    from tiermem.memory import Memory
    from tiermem.tiers.embed import Embedder
    from tiermem.tiers.models import ErasureReport

CONTENT_PREVIEW_CHARS = 100
# BudgetTooSmall's advice for a latest message over budget, in the library's words; `context`
# says its option instead
LIBRARY_TRUNCATE_KEYWORD = "truncate_latest=True"
# `append --role`: each chat role a text message may have (tiers.formats.CHAT_ROLES, which
# the README lists; the old "function" role needs a name: --json-file), developer included
CLI_ROLES = tuple(r for r in CHAT_ROLES if r != "function")
LIBRARY_TRUNCATE_ADVICE = f"pass {LIBRARY_TRUNCATE_KEYWORD}"
MIN_DEMO_BUDGET_TOKENS = 50
# `consolidate --watch --interval`'s floor, seconds; its ceiling is the config's own
# (MAX_SCHEDULER_INTERVAL_S), which the option's value goes through
MIN_WATCH_INTERVAL_S = 0.1
STDIN_NAME = "<stdin>"  # what errors and reports call `tiermem import -`'s input
# `config --export --format`: stdout has no name to say JSON by, and TOML cannot say a null
EXPORT_FORMATS = ("toml", "json")
# the status a shell shows for a process killed by SIGPIPE (`git log | head`): what a
# command whose stdout's reader went away exits with, saying nothing
SIGPIPE_EXIT = 128 + signal.SIGPIPE
# the longest write standard output's file gets at once (`_stdout_in_pieces`): what a Linux
# pipe holds
STDOUT_PIECE_BYTES = 64 * 1024
_AGE_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

# Lazily loaded subcommands: name -> (module, attribute, one-line help shown without importing).
LAZY_COMMANDS: dict[str, tuple[str, str, str]] = {
    "eval": ("tiermem.evals.cli", "eval_group", "Run the evals: LoCoMo recall, cost replay, eviction pressure."),
}


class CliError(click.ClickException):
    """An error reported as one line `error: ...` with exit code 1."""

    exit_code = 1

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


# The commands whose writes commit in several transactions (batches, steps, one per
# conversation): a storage failure partway leaves the earlier ones written, so their
# error says the command is incomplete and to run it again, never "nothing was written"
# (tiers.files INCOMPLETE_TEXT). Each finishes what is left when run again: import skips
# what is present, migrate-store resumes, rebuild and index redo, an erasure erases the rest.
SEVERAL_TRANSACTION_COMMANDS = frozenset({"rebuild", "import", "migrate-store", "index", "prune", "delete",
                                          "delete-namespace"})
# The commands that only read the store: a storage failure there says nothing of a write
# (storage_problem's reads_only), which they did not make. `context` is not one: it may
# write the hot set and warm views.
READ_ONLY_COMMANDS = frozenset({"history", "conversations", "facts", "search", "stats", "export"})


def _driver_words(exc: BaseException) -> str | None:
    """The driver's own words for a storage problem, on one line: those of the first
    exception in `exc`'s chain that has any; None when there are none. (SQLite's "cannot
    rollback - no transaction is active", which stood in for a full disk's error, is no
    longer raised: the cold store sends no ROLLBACK after SQLite rolled back itself.)"""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = " ".join(str(e).split())
        if text:
            return text
        e = e.__cause__ or e.__context__
    return None


def one_line(exc: BaseException, *, several_transactions: bool = False, the_store: bool = True,
             reads_only: bool = False, db_path: Path | None = None) -> str:
    """A one-line description of `exc` for `error: ...`; `several_transactions`: it ended
    a command of SEVERAL_TRANSACTION_COMMANDS, `reads_only` one of READ_ONLY_COMMANDS;
    `db_path`: the SQLite database it opened, whose disk a full-disk error names. `the_store`
    False: `exc` is not the database's (the hot tier's start): a refused or full disk is
    said as the file's (`PATH: strerror`), never in storage_problem's words about the database."""
    try:
        import pydantic

        if isinstance(exc, pydantic.ValidationError):
            parts = [f"{'.'.join(str(p) for p in e['loc']) or exc.title}: {e['msg']}" for e in exc.errors()]
            what = "invalid configuration" if exc.title == "Config" else f"invalid {exc.title}"
            return f"{what}: {'; '.join(parts)}"
    except ImportError:  # pragma: no cover
        pass
    from tiermem.tiers.errors import TiermemError
    from tiermem.tiers.files import storage_problem

    if not the_store and isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror}"
    # a read-only, full or failing disk: say so, not the driver's words
    problem = (storage_problem(exc, several_transactions=several_transactions, reads_only=reads_only,
                               db_path=db_path) if the_store else None)
    if problem is not None:
        said = _driver_words(exc)
        return problem.detail if said is None or said in problem.detail else f"{problem.detail} ({said})"
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, TiermemError | OSError | KeyError | ValueError):
        return text
    return f"{type(exc).__name__}: {text} (run with --debug for the traceback)"


@dataclass
class CliState:
    """What the global options chose; opens Config and Memory on demand."""

    data_dir: Path | None = None
    config_path: Path | None = None
    namespace_opt: str | None = None
    debug: bool = False
    embedder: Embedder | None = None  # injectable: tests share one loaded model
    _config: Config | None = field(default=None, repr=False)
    # the config of the store this command opened (`memory`, serve): a damaged SQLite file
    # found mid-read is named by its path (`damaged_database_line`)
    opened: Config | None = field(default=None, repr=False)

    @property
    def namespace(self) -> str:
        """The namespace to act in; a bad --namespace (or TIERMEM_NAMESPACE) is a usage
        error naming it (exit 2), as a bad conversation id is (`IdType`). It names stored
        data: bounded by what any config allows (MAX_ID_CHARS_LIMIT), so a namespace made
        before max_id_chars was lowered is still read and erased; `new_namespace` is the
        one a command writes in."""
        return self._checked_namespace(MAX_ID_CHARS_LIMIT)

    @property
    def new_namespace(self) -> str:
        """`namespace` for a command that writes messages in it (append, import): within
        the config's max_id_chars, as `Memory.append` checks it. Checked here, not while the
        group's options are parsed: the config's max_id_chars is not known then."""
        return self._checked_namespace(self.config().max_id_chars)

    def _checked_namespace(self, max_chars: int) -> str:
        if self.namespace_opt is None:
            return DEFAULT_NAMESPACE
        try:
            return validate_namespace(self.namespace_opt, "namespace", max_chars)
        except ValidationError as exc:
            raise click.BadParameter(exc.problem, ctx=click.get_current_context(silent=True),
                                     param_hint="'--namespace' (env TIERMEM_NAMESPACE)") from None

    def config(self, **overrides: Any) -> Config:
        if self._config is not None and not overrides:
            return self._config
        from tiermem.config import Config

        opts: dict[str, Any] = {}
        if self.data_dir is not None:
            opts["data_dir"] = self.data_dir
        opts.update(overrides)
        with self.naming_data_dir_source():
            cfg = Config.load(self.config_path, **opts)
        if not overrides:
            self._config = cfg
        return cfg

    @contextmanager
    def naming_data_dir_source(self, config_path: Path | None = None) -> Iterator[None]:
        """Around a read of the config (from `config_path`, else the global --config): a
        refused data_dir is a CliError that also says where data_dir came from. The message
        names data_dir as given (storage.data_dir in a file or in env), not which of them
        gave it; `tiermem config` read the config by itself and said no source."""
        import pydantic

        try:
            yield
        except pydantic.ValidationError as exc:
            if self.debug or not any(e["loc"] and e["loc"][-1] == "data_dir" for e in exc.errors()):
                raise
            source = self.data_dir_source(config_path)
            # said once, at the end: the Config's error names the variable of env as well
            raise CliError(f"{one_line(exc).replace(f' (from {source})', '')} (data_dir from {source})") from None

    def need_stored(self, cfg: Config) -> None:
        """Refuse, creating nothing, when the SQLite log `cfg` names does not exist. A read
        on a data dir with a typo in it (--data-dir, TIERMEM_DATA_DIR) created the directory
        and an empty database, then showed nothing, as if the user's history were gone. A
        PostgreSQL log (cold_url) is the server's to report."""
        if cfg.cold_url is not None or os.path.lexists(cfg.db_path):
            return
        source = self.data_dir_source()
        raise CliError(f"no tiermem database at {cfg.db_path} (data_dir from "
                       f"{'the default' if source == 'default' else source}): nothing is stored there, so there "
                       "is nothing to read or change; check the path, or store something first (tiermem append, "
                       "tiermem import)")

    def data_dir_source(self, config_path: Path | None = None) -> str:
        """Where data_dir came from, for an error about it (explain_sources' words, without
        building the Config, which may be what failed): `--data-dir`, `env NAME`, `file
        PATH` or `default`. The file is `config_path` (`config --check FILE`), else the one
        the global --config or env names."""
        from tiermem.config import config_file
        from tiermem.config_sections import env_names, flatten, read_file

        ctx = click.get_current_context(silent=True)
        if self.data_dir is not None:
            return _data_dir_source(ctx) if ctx is not None else "--data-dir"
        env = {k.upper() for k in os.environ}
        hit = next((n for n in env_names(("data_dir",)) if n in env), None)
        if hit is not None:
            return f"env {hit}"
        path = config_file(config_path or self.config_path)
        if path is not None and "data_dir" in flatten(read_file(path)):
            return f"file {path}"
        return "default"

    def memory(self, *, hot: bool, config: Config | None = None, create: bool = False) -> Memory:
        """A Memory closed when the command ends. With `hot`, the Redis tier is used
        when it can be reached or started, else the command says so and goes on cold-only.
        Without `create` (a command that reads or changes what is stored) the SQLite log
        must exist already (`need_stored`); a command that may store the first messages
        (append, import, mcp) or works beside one that does (consolidate, index) creates it."""
        from tiermem.memory import Memory, open_with_fallback

        cfg = config or self.config()
        # a bad --namespace is refused first: after the store was created it left an empty
        # one behind, and before "no tiermem database" it is the user's first mistake
        _ = self.namespace
        if not create:
            self.need_stored(cfg)
        self.opened = cfg
        mem: Memory
        if hot:
            with naming_the_database(cfg):
                mem, why = open_with_fallback(cfg, embedder=self.embedder)
            if why is not None:
                click.echo(
                    f"warning: hot tier unavailable ({one_line(why, the_store=False)}); answering from the cold log",
                    err=True
                )
        else:
            with naming_the_database(cfg):
                mem = Memory(cfg, hot=False, background_indexing=False, embedder=self.embedder)
        click.get_current_context().call_on_close(mem.close)
        return mem


# SQLite's primary result codes for a damaged file and for one that is no database
SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26


def _sqlite_damage(exc: BaseException) -> BaseException | None:
    """The error in `exc`'s chain (itself, its causes and contexts) that is SQLite's for a
    damaged file or one that is no database; None when there is none."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        code = getattr(e, "sqlite_errorcode", None)
        if isinstance(code, int) and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB):
            return e
        e = e.__cause__ or e.__context__
    return None


@contextmanager
def naming_the_database(cfg: Config) -> Iterator[None]:
    """Around opening the store `cfg` names: a SQLite file that is no database, or a
    damaged one, is a CliError naming its path. The driver's "file is not a database"
    named none, so the user could not tell which file (--data-dir, env, the config) was
    read."""
    try:
        yield
    except Exception as exc:
        damage = _sqlite_damage(exc) if cfg.cold_url is None else None
        if damage is not None:
            raise CliError(f"{cfg.db_path} cannot be read as a tiermem database ({_driver_words(damage)}): the "
                           "file is damaged or is no SQLite database; check --data-dir or data_dir, or restore "
                           "the file from a backup") from None
        raise


def damaged_database_line(exc: BaseException, opened: Config | None) -> str | None:
    """The one line for `exc` when it is SQLite's for a damaged file met after the store
    `opened` was opened (a read that reached pages overwritten since: "database disk image
    is malformed"): it names the file, which the driver's words do not. None for any other
    error, and for a PostgreSQL store (the server's to report)."""
    if opened is None or opened.cold_url is not None:
        return None
    damage = _sqlite_damage(exc)
    if damage is None:
        return None
    return (f"{opened.db_path} is damaged ({_driver_words(damage)}): it opened, but part of it cannot be read; "
            "restore the file from a backup")


def _debug_requested(ctx: click.Context) -> bool:
    root = ctx.find_root()
    return bool(getattr(root.obj, "debug", False) or root.params.get("debug"))


class TiermemGroup(click.Group):
    """Lazy subcommands, and the one place where errors become `error: ...` + exit 1."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            return _load_lazy(cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            if name in LAZY_COMMANDS and name not in self.commands:
                rows.append((name, LAZY_COMMANDS[name][2]))
                continue
            cmd = self.commands.get(name)
            if cmd is None or cmd.hidden:
                continue
            rows.append((name, cmd.get_short_help_str(limit=limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        # the top-level --help and --version print while the arguments are parsed, before
        # invoke: a closed stdout there ends as it does in a command
        with _closed_stdout_exits_quietly(None):
            try:
                ctx = super().make_context(info_name, args, parent=parent, **extra)
            except KeyboardInterrupt:  # click's own handler: "Aborted!", exit 1
                if stops_on_interrupt(args):
                    raise click.exceptions.Exit(0) from None
                if debug_requested(args):
                    raise
                click.echo(f"error: {STARTING_TEXT}", err=True)
                raise click.exceptions.Exit(INTERRUPTED_EXIT) from None
            except BrokenPipeError:
                raise  # a closed pipe: quietly, as above
            except OSError as exc:  # `--help > /dev/full`: one line, as a command's output, not a traceback
                if debug_requested(args):
                    raise
                from tiermem.tiers.errors import OutputUnwritable

                _discard_stdout()
                click.echo(f"error: {one_line(OutputUnwritable(STANDARD_OUTPUT, exc))}", err=True)
                raise click.exceptions.Exit(1) from None
        ctx.meta[COMMAND_LINE_KEY] = list(args)
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        with _noting_interrupts(), _closed_stdout_exits_quietly(ctx), _stdout_in_pieces(ctx):
            try:
                done = super().invoke(ctx)
                sys.stdout.flush()  # what is still buffered meets a closed pipe here, not at exit
                return done
            except (click.ClickException, click.exceptions.Exit, click.Abort, BrokenPipeError):
                raise
            except KeyboardInterrupt:
                # Ctrl-C: click's own handler printed "Aborted!" and exited 1. The
                # command's context has closed its Memory by now (an unwinding `with`).
                # `serve` and `consolidate --watch` are stopped so: exit 0, in any phase
                # (loading, opening the store, starting uvicorn or the scheduler, running)
                if stops_on_interrupt(ctx.meta.get(COMMAND_LINE_KEY, ())):
                    raise click.exceptions.Exit(0) from None
                if _debug_requested(ctx):
                    raise
                click.echo(f"error: {interrupted_text(ctx.invoked_subcommand)}", err=True)
                raise click.exceptions.Exit(INTERRUPTED_EXIT) from None
            except Exception as exc:
                if _debug_requested(ctx):
                    raise
                opened = getattr(ctx.obj, "opened", None)
                damaged = damaged_database_line(exc, opened)
                if damaged is not None:
                    raise CliError(damaged) from None
                several = ctx.invoked_subcommand in SEVERAL_TRANSACTION_COMMANDS
                db_path = opened.db_path if opened is not None and opened.cold_url is None else None
                raise CliError(one_line(exc, several_transactions=several, db_path=db_path,
                                        reads_only=ctx.invoked_subcommand in READ_ONLY_COMMANDS)) from None


# the command line's arguments, kept in the group's context for its Ctrl-C handler
COMMAND_LINE_KEY = "tiermem.command_line"
# what an interrupted command left, by command: each of these commits in steps and, run
# again, goes on from what is stored (import skips what is present, migrate-store resumes,
# index and rebuild redo what is missing, an erasure erases the rest)
RESUMED_TEXT = "interrupted; what was committed stays, rerun to resume"
ERASED_TEXT = "interrupted; what was erased stays erased, run it again to erase the rest"
INTERRUPTED_TEXTS = {"import": RESUMED_TEXT, "migrate-store": RESUMED_TEXT, "index": RESUMED_TEXT,
                     "rebuild": RESUMED_TEXT, "prune": ERASED_TEXT, "delete": ERASED_TEXT,
                     "delete-namespace": ERASED_TEXT}
# any other command reads, or writes in one transaction, which either committed or not
INTERRUPTED_TEXT = "interrupted; a write in one transaction either committed whole or not at all"


def interrupted_text(command: str | None) -> str:
    """The `error:` line of `command` ended by Ctrl-C: what it left behind."""
    return INTERRUPTED_TEXTS.get(command or "", INTERRUPTED_TEXT)


# Set once Ctrl-C reached this process (`_noting_interrupts`): a PostgreSQL connection the
# interrupt cut mid-query is then rolled back, found broken and discarded by psycopg and
# its pool, each step a WARNING (three lines before the `interrupted` line, migrate-store
# stopped in its verify phase); the `interrupted` line says what matters
_INTERRUPT_SEEN = threading.Event()
# the loggers whose records, after a Ctrl-C, are that cleanup's (shown with --debug)
INTERRUPT_CLEANUP_LOGGERS = frozenset({"psycopg"})


@contextmanager
def _noting_interrupts() -> Iterator[None]:
    """While a command runs, SIGINT raises KeyboardInterrupt as Python's own handler does,
    noting first that it came (`_INTERRUPT_SEEN`). A handler of the host's (a test
    runner's) or outside the main thread: left as it is."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    _INTERRUPT_SEEN.clear()

    def on_sigint(_signum: int, _frame: Any) -> None:
        _INTERRUPT_SEEN.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@contextmanager
def _closed_stdout_exits_quietly(ctx: click.Context | None) -> Iterator[None]:
    """The one handler of a closed standard output (`tiermem ... | head`): exit 141 saying
    nothing, as a process killed by SIGPIPE. A BrokenPipeError of another pipe (a socket,
    a child's) is an error: one line, or the traceback under --debug (`ctx` None: the
    arguments are still being parsed, so --debug is not known yet and the line is shown)."""
    try:
        yield
    except BrokenPipeError as exc:
        if not _stdout_reader_gone():
            if ctx is not None and _debug_requested(ctx):
                raise
            raise CliError(one_line(exc)) from None
        _discard_stdout()
        raise click.exceptions.Exit(SIGPIPE_EXIT) from None


class _PiecewiseBuffer(io.BufferedWriter):
    """A buffered writer whose long writes reach the file in pieces of STDOUT_PIECE_BYTES.
    A write that fails (a full disk, `> /dev/full`) raises OutputUnwritable, said as
    standard output's, not as the database's; a closed pipe stays BrokenPipeError
    (`_closed_stdout_exits_quietly`)."""

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        with _said_as_output(STANDARD_OUTPUT):
            if len(view) <= STDOUT_PIECE_BYTES:
                return super().write(view)
            for start in range(0, len(view), STDOUT_PIECE_BYTES):
                super().write(view[start:start + STDOUT_PIECE_BYTES])
        return len(view)

    def flush(self) -> None:
        with _said_as_output(STANDARD_OUTPUT):
            super().flush()


@contextmanager
def _said_as_output(target: str) -> Iterator[None]:
    """An OSError in the block (but a closed pipe's) is OutputUnwritable naming `target`."""
    from tiermem.tiers.errors import OutputUnwritable

    try:
        yield
    except (BrokenPipeError, OutputUnwritable):
        raise
    except OSError as exc:
        raise OutputUnwritable(target, exc) from exc


@contextmanager
def _stdout_in_pieces(ctx: click.Context) -> Iterator[None]:
    """Standard output, when it is a real file (a pipe), written in pieces while a command
    runs: a reader that leaves mid-write must be noticed. CPython's buffered writer returns
    from one long write that the reader's exit cut short without an error and drops the
    rest (SIGPIPE is ignored, so the write just comes back short): `tiermem history | head
    -1` exited 0 having printed 64 KiB of its table. The next piece meets EPIPE instead."""
    stream = sys.stdout
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # a test runner's buffer: nothing to cut short
        yield
        return
    if isinstance(getattr(stream, "buffer", None), _PiecewiseBuffer):  # a nested group's invoke
        yield
        return
    stream.flush()
    pieces = io.TextIOWrapper(_PiecewiseBuffer(io.FileIO(fd, "w", closefd=False)),
                              encoding=stream.encoding, errors=stream.errors,
                              line_buffering=bool(stream.line_buffering))
    sys.stdout = pieces
    try:
        yield
    except click.exceptions.Exit as done:  # `ctx.exit(0)` is done: its output must be written
        _restore_stdout(stream, pieces, ctx, failed=done.exit_code != 0)
        raise
    except BaseException:
        _restore_stdout(stream, pieces, ctx, failed=True)
        raise
    _restore_stdout(stream, pieces, ctx, failed=False)


def _restore_stdout(stream: IO[str], pieces: io.TextIOWrapper, ctx: click.Context, *, failed: bool) -> None:
    """Put `stream` back as standard output and flush what the command left buffered in
    `pieces`: a closed pipe raises here, inside `_closed_stdout_exits_quietly`. Where the
    output cannot be written (a full disk) the rest is dropped (its file pointed at
    /dev/null, or the flush at exit printed a traceback) and, unless the command `failed`
    already (said once), it is one line `error: standard output: ...`, exit 1."""
    from tiermem.tiers.errors import OutputUnwritable

    if sys.stdout is not pieces:
        return
    sys.stdout = stream
    try:
        pieces.flush()
    except OutputUnwritable as exc:
        _discard_stdout()
        pieces.flush()
        if not failed:
            if _debug_requested(ctx):
                raise
            raise CliError(one_line(exc)) from None


def _stdout_reader_gone() -> bool:
    """Whether standard output is a pipe whose reader closed it (poll says POLLERR for the
    writing end of a pipe without readers)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test runner's buffer)
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(ev & (select.POLLERR | select.POLLHUP) for _fd, ev in poller.poll(0))


def _discard_stdout() -> None:
    """Point standard output at /dev/null: what is still buffered in `sys.stdout` is
    flushed at exit, and into the closed pipe that flush would print a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def _load_lazy(name: str) -> click.Command:
    module, attr, doc = LAZY_COMMANDS[name]
    try:
        import importlib

        cmd = getattr(importlib.import_module(module), attr)
        if not isinstance(cmd, click.Command):
            raise ImportError(f"{module}.{attr} is not a click command")
        return cmd
    except ImportError as exc:
        reason = one_line(exc)

        @click.command(
            name,
            help=f"{doc} (unavailable: {reason})",
            add_help_option=False,
            context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        )
        def unavailable() -> NoReturn:
            raise CliError(f"'tiermem {name}' is not available: {reason}")

        return unavailable


def _keep_last_tune(path: Path, result: dict[str, Any]) -> None:
    """The latest tune result in the data dir (0600, replaced atomically), for the
    inspector's recall/cost chart; a data dir that cannot be written only loses the chart."""
    from tiermem.tiers.files import create_private_file

    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.unlink(missing_ok=True)
        create_private_file(tmp)
        tmp.write_text(json.dumps(result, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        click.echo(f"warning: could not keep the result for the inspector in {path}: {exc}", err=True)


@functools.cache
def _edge_console_class() -> type[Console]:
    from rich.console import Console

    class EdgeConsole(Console):
        def render_str(self, text: str, **options: Any) -> Text:
            # every plain string a command prints (table cells, titles) is stored or
            # user-given text: its control characters are shown, not sent to the terminal
            return super().render_str(terminal_text(text), **options)

        def on_broken_pipe(self) -> None:
            # rich's own exits 1 on the spot: the CLI's edge decides, as for click.echo
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, "the reader of standard output went away")

    return EdgeConsole


# C0 and C1 control characters (and DEL) but the newline and the tab: what a terminal acts on
# (ESC sequences retitle it, clear it, colour what follows; BEL, backspace, carriage return)
_CONTROL_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Unicode's bidirectional embeddings, overrides and isolates (LRE RLE PDF LRO RLO, LRI RLI
# FSI PDI): invisible, they reorder what follows them on the line ("Trojan Source"), so a
# stored text could show a terminal other words than it holds. The marks (LRM U+200E, RLM
# U+200F, ALM U+061C) are left as they are: they reorder only the neutral characters beside
# them and are common in right-to-left text, which would show escapes throughout.
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")
# a line break as Windows clients send it: shown as the newline it is, not as `\x0d`
_CRLF = "\r\n"


def terminal_text(text: str) -> str:
    """`text` as shown on a terminal: each control character but \\n and \\t as a visible
    escape (`\\x1b`), each bidi control too (`\\u202e`), a CRLF as a newline (a lone \\r
    stays `\\x0d`: it returns the cursor over what was shown). Stored messages, ids and
    session ids are shown by the table commands and `context`; an ESC sequence in one
    reached the terminal raw. Not for --json or export output, which stays byte-exact."""
    shown = _CONTROL_CHARS.sub(lambda m: f"\\x{ord(m.group()):02x}", text.replace(_CRLF, "\n"))
    return _BIDI_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", shown)


def rich_console(**options: Any) -> Console:
    """A rich Console for a command's output: a closed stdout raises BrokenPipeError to
    `TiermemGroup.invoke` (141, quietly) rather than rich's own exit 1."""
    return _edge_console_class()(**options)


def _console(stderr: bool = False) -> Console:
    # no markup and no emoji codes: a string printed is stored or user-given text, where
    # `[/i]` raised MarkupError, `[red]x[/red]` was coloured and the id `user:id:7` an emoji
    return rich_console(stderr=stderr, highlight=False, soft_wrap=False, markup=False, emoji=False)


def _emit_json(obj: Any) -> None:
    from tiermem.service import finite

    click.echo(json.dumps(finite(obj), ensure_ascii=False, default=str))


def _preview(text: str, limit: int = CONTENT_PREVIEW_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _fmt_time(ts: float) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))
    except (OverflowError, OSError, ValueError):
        return str(ts)


def parse_age(value: str) -> float:
    """'30d', '12h', '90m', '45s', '2w' or plain seconds -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", value.lower())
    if not m:
        raise ValueError(f"{value!r} is not an age: use e.g. 30d, 12h, 90m, 45s or a number of seconds")
    return float(m.group(1)) * _AGE_UNITS[m.group(2)]


class AgeType(click.ParamType):
    """An age (`parse_age`) of at most `max_s` seconds."""

    name = "AGE"

    def __init__(self, max_s: float = MAX_AGE_S) -> None:
        self.max_s = max_s

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, int | float):
            seconds = float(value)
        else:
            try:
                seconds = parse_age(str(value))
            except ValueError as exc:
                self.fail(str(exc), param, ctx)
        if not 0 <= seconds <= self.max_s:  # also NaN, and the infinity of a too long number
            self.fail(f"must be an age of at most {self.max_s:.0f} seconds", param, ctx)
        return seconds


def unicode_problem(text: str) -> str | None:
    """Why `text` is not valid Unicode, or None. An argument with bytes that are not UTF-8
    reaches Python with each such byte as a lone surrogate (surrogateescape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's stand-in for the byte code - 0xDC00
            return f"byte 0x{code - 0xDC00:02x} at character {exc.start + 1} is not UTF-8"
        return f"character {exc.start + 1} is a lone surrogate (U+{code:04X})"
    return None


class TextType(click.ParamType):
    """Text from the command line or env: a usage error naming the option when it is not
    valid Unicode (the library could neither store nor embed it) or, unless `allow_empty`,
    when it is empty."""

    name = "TEXT"

    def __init__(self, *, allow_empty: bool = True) -> None:
        self.allow_empty = allow_empty

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text: str = click.STRING.convert(value, param, ctx)
        problem = unicode_problem(text)
        if problem is not None:
            self.fail(f"must be valid UTF-8 text: {problem}", param, ctx)
        if not text and not self.allow_empty:
            self.fail("must not be empty", param, ctx)
        return text


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange without NaN and the infinities (a range check lets NaN through)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        number: float = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def output_path_problem(path: str | os.PathLike[str], *, create_parents: bool = False) -> str | None:
    """Why the file `path` cannot be written, or None: it is a directory, or its directory
    does not exist, is not a directory or is not writable. With `create_parents` (a writer
    that makes its missing directories first) the nearest part that exists must be a
    writable directory. The one early check of an output path: the CLI's `OutputPath` and
    the benchmarks' argparse options (`evals.bench.output_file`), so that a run of minutes
    is not lost at its end to a typo in the output's directory."""
    text = os.fsdecode(path)
    if not text.strip():
        return "must name a file, got an empty string"
    if os.path.isdir(text):
        return f"{text!r} cannot be written: it is a directory"
    where = Path(os.path.realpath(text)).parent  # a link is written through (_replacing)
    if create_parents:
        while not os.path.lexists(where) and where.parent != where:
            where = where.parent
    if not where.is_dir():
        why = "is not a directory" if where.exists() else "does not exist"
        return f"{text!r} cannot be written: {str(where)!r} {why}"
    if not os.access(where, os.W_OK | os.X_OK):
        return f"{text!r} cannot be written: its directory {str(where)!r} is not writable"
    return None


class OutputPath(click.Path):
    """A file a command writes (`-`: standard output, where `allow_dash`): its directory must
    exist and be writable, checked while the arguments are parsed (`output_path_problem`)."""

    def __init__(self, *, allow_dash: bool = False) -> None:
        super().__init__(path_type=Path, dir_okay=False, allow_dash=allow_dash)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        if self.allow_dash and str(path) == "-":
            return path
        problem = output_path_problem(os.fsdecode(path)) or _store_file_problem(os.fsdecode(path), ctx)
        if problem is not None:
            self.fail(problem, param, ctx)
        return path


# the files SQLite keeps beside a database: the write-ahead log, its index, the rollback journal
SQLITE_SIDE_SUFFIXES = ("", "-wal", "-shm", "-journal")


def _store_file_problem(path: str | os.PathLike[str], ctx: click.Context | None) -> str | None:
    """Why `path` must not be written: it is the store's own database (or one of its
    -wal/-shm/-journal files), by realpath, links and `..` included. `export -o tiermem.db`
    replaced the live database with JSON and said nothing. A config that cannot be loaded
    here is left to the command, which says why."""
    state = ctx.find_root().obj if ctx is not None else None
    if not isinstance(state, CliState):
        return None
    try:
        db = os.path.realpath(state.config().db_path)
    except Exception:  # a bad config: the command says why itself
        return None
    if os.path.realpath(path) in {db + suffix for suffix in SQLITE_SIDE_SUFFIXES}:
        return f"{os.fsdecode(path)!r} is the store's own database file ({db}): writing it would destroy the store"
    return None


class ConfigFilePath(click.Path):
    """A config file to read: a leading `~` is the home directory, as Config reads
    `TIERMEM_CONFIG` (`config.config_file`): a value from env, or `--config=~/c.toml`, is
    not expanded by a shell, and was said not to exist. Then it must exist, as a file."""

    def __init__(self) -> None:
        super().__init__(path_type=Path, dir_okay=False, exists=True)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from tiermem.config import config_file

        if isinstance(value, str | os.PathLike):
            try:
                value = config_file(value)
            except ValueError as exc:
                self.fail(str(exc), param, ctx)
        return super().convert(value, param, ctx)


class IdType(click.ParamType):
    """A conversation id (`validate_id`), or with `namespace` a namespace
    (`validate_namespace`), from the command line: checked while the command's arguments
    are parsed, so that a bad one is a usage error (exit 2) naming the argument before the
    command asks or opens anything. One that names stored data is bounded by what any
    config allows (MAX_ID_CHARS_LIMIT: an id made before max_id_chars was lowered is still
    read and erased); with `creates`, one a command writes under (append's, fork's new id),
    by the config's `max_id_chars`. Only for a command's own parameters: the group's
    callback has set CliState up by then."""

    name = "TEXT"

    def __init__(self, *, namespace: bool = False, creates: bool = False) -> None:
        self.namespace = namespace
        self.creates = creates

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = TEXT.convert(value, param, ctx)
        state = ctx.find_root().obj if ctx is not None else None
        max_chars = MAX_ID_CHARS_LIMIT
        if self.creates:
            max_chars = state.config().max_id_chars if isinstance(state, CliState) else DEFAULT_MAX_ID_CHARS
        check = validate_namespace if self.namespace else validate_id
        try:
            return check(text, param.name if param is not None and param.name else "value", max_chars)
        except ValidationError as exc:
            self.fail(exc.problem, param, ctx)


TEXT = TextType()
NON_EMPTY_TEXT = TextType(allow_empty=False)
NAMESPACE = IdType(namespace=True)
CONVERSATION = IdType()
NEW_CONVERSATION = IdType(creates=True)  # an id a command writes messages under
POSITION = click.IntRange(0, MAX_POSITION)


def _data_dir_given(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Path | None:
    # read as text: Path("") is Path("."), so an unset shell variable in
    # `--data-dir "$DIR"` would put the log in whatever directory the command ran from
    if value is None:
        return None
    if not value.strip():
        raise click.BadParameter("must name a directory (empty; write . for the current one)")
    return Path(value)


def _env_set_empty(param: click.Parameter, value: Any) -> None:
    """Refuse an option's env variable that is set but empty (an unset shell variable in
    `TIERMEM_NAMESPACE="$TENANT"`): click reads "" as unset, so the command acted on the
    default namespace (or read no config file) where `--namespace ""` is a usage error."""
    envvar = param.envvar if isinstance(param, click.Option) else None
    if value is None and isinstance(envvar, str) and envvar in os.environ and not os.environ[envvar].strip():
        raise click.BadParameter(f"env {envvar} is set but empty; unset it, or give a value")


def _namespace_given(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    _env_set_empty(param, value)
    return value


def _config_given(_ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    from tiermem.config import CONFIG_ENV, EMPTY_CONFIG_ENV_TEXT

    if value is None and CONFIG_ENV in os.environ and not os.environ[CONFIG_ENV].strip():
        raise click.BadParameter(EMPTY_CONFIG_ENV_TEXT)  # the library's words: both refuse it
    return value


def _timezone_given(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    # refused while parsing, before the command opens the data dir: a usage error (exit 2)
    # naming the option, with nothing read or written
    try:
        return optional_timezone(value)
    except ValidationError as exc:
        raise click.BadParameter(exc.problem) from None


def _idempotency_key_given(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    # the library's check, while parsing: a usage error (exit 2) before the data dir is opened
    try:
        return None if value is None else check_idempotency_key(value)
    except ValidationError as exc:
        raise click.BadParameter(exc.problem) from None


def _session_id_given(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    # the library's check of the envelope field (on a message of nothing else), while
    # parsing: a usage error (exit 2) naming the option, as --idempotency-key's
    if value is None:
        return None
    try:
        parse_message({"role": "user", "content": ""}, max_content_bytes=1, max_metadata_bytes=1,
                      session_id=value, stamp=False)
    except ValidationError as exc:
        raise click.BadParameter(exc.problem) from None
    return value


# -- the group ------------------------------------------------------------------------------------------


@click.group(cls=TiermemGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--data-dir",
    type=click.Path(path_type=str, file_okay=False),
    callback=_data_dir_given,
    envvar="TIERMEM_DATA_DIR",
    # the rule of config.default_data_dir, said whole: "~/.local/share/tiermem" alone was
    # wrong wherever XDG_DATA_HOME is set
    help="Data directory (env TIERMEM_DATA_DIR; else the config file's data_dir; "
    "default $XDG_DATA_HOME/tiermem, or ~/.local/share/tiermem where XDG_DATA_HOME is unset or relative).",
)
@click.option(
    "--config",
    "config_path",
    type=ConfigFilePath(),
    callback=_config_given,
    envvar="TIERMEM_CONFIG",
    help="TOML config file (env TIERMEM_CONFIG).",
)
@click.option(
    "--namespace",
    "namespace",
    type=NON_EMPTY_TEXT,
    default=None,
    callback=_namespace_given,
    envvar="TIERMEM_NAMESPACE",
    help="Namespace (user/tenant) to act in (env TIERMEM_NAMESPACE) [default: default].",
)
@click.option("--debug", is_flag=True, help="Debug logging, and tracebacks on errors.")
@click.version_option(package_name="tiermem", prog_name="tiermem")
@click.pass_context
def cli(
    ctx: click.Context, data_dir: Path | None, config_path: Path | None, namespace: str | None, debug: bool
) -> None:
    """tiermem: tiered hot/warm/cold memory for LLM agents."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    state = ctx.ensure_object(CliState)
    if data_dir is not None:
        state.data_dir = data_dir
    if config_path is not None:
        state.config_path = config_path
    if namespace is not None:
        state.namespace_opt = namespace
    state.debug = state.debug or debug
    root = logging.getLogger()
    hosts = list(root.handlers)  # a host's (a test runner's): basicConfig then adds none
    logging.basicConfig(
        level=logging.DEBUG if state.debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not state.debug:
        for handler in root.handlers:
            if handler not in hosts:
                handler.addFilter(_not_said_by_the_command)
    for name in WIRE_LOGGERS:
        wire = logging.getLogger(name)
        if wire.level == logging.NOTSET:  # a host's (a test runner's, an embedding app's) choice stays
            wire.setLevel(logging.WARNING)


# HTTP client libraries whose INFO/DEBUG records quote each request's URL and headers (httpx:
# "HTTP Request: POST http://host/v1/chat/completions"; httpcore: the wire events): held at
# WARNING under --debug too. A URL can carry a password (`llm_base_url`'s userinfo, which the
# summarizer now sends as basic auth, but a proxy's or a future caller's may not) and a path
# tenant ids, and a --debug log is pasted into bug reports. No setting lifts it: who needs the
# wire records runs the code under their own logging setup (a level set before the CLI runs
# is kept).
WIRE_LOGGERS = ("httpx", "httpcore")


def _not_said_by_the_command(record: logging.LogRecord) -> bool:
    """Whether a log record goes to stderr without --debug: not one of a degraded
    embedder's episode (its start logs a traceback), which `_note_keywords_only` says,
    nor, after a Ctrl-C, psycopg's about the connection it cut (`_INTERRUPT_SEEN`),
    which the `interrupted` line says."""
    if _INTERRUPT_SEEN.is_set() and record.name.split(".")[0] in INTERRUPT_CLEANUP_LOGGERS:
        return False
    return getattr(record, EPISODE_ATTR, None) != EMBEDDER_EPISODE


def _note_keywords_only(mem: Memory, degraded: str | None) -> None:
    """Where a read ranked by keywords only (`degraded`: what it answered, the error's
    type only, as a tenant is told), say so on stderr in one line with the reason in
    full (type and message, naming the model's path: a CLI's user runs it on the
    machine that holds the model)."""
    if degraded is None:
        return
    reason = mem.embedding_failure
    click.echo(f"note: {SEARCH_KEYWORDS_ONLY.format(error=reason) if reason is not None else degraded}", err=True)


pass_state = click.make_pass_decorator(CliState, ensure=True)


@cli.command()
@pass_state
def mcp(state: CliState) -> None:
    """Run the MCP server on stdio (tools: append, context, history, search, pin, unpin,
    erase); `tiermem serve` mounts the same tools at /v1/mcp (streamable HTTP)."""
    try:
        from tiermem.adapters.mcp_server import build_server
        from tiermem.adapters.mcp_stdio import run_stdio
    except ImportError as exc:
        raise CliError(f"the MCP server needs the mcp package: pip install 'tiermem[mcp]' ({exc})") from None
    mem = state.memory(hot=True, create=True)
    # not server.run("stdio"): the mcp package's reader leaves a line it cannot parse unanswered
    run_stdio(build_server(mem.namespaced(state.namespace)))


# -- serving ------------------------------------------------------------------------------------------------


def _serve_config(state: CliState, overrides: dict[str, Any]) -> Config:
    """The config with `serve`'s --host and --port: a value the config refuses (an empty or
    malformed host name) is a usage error naming the option (exit 2, as the README's rule
    says of a bad value on the command line); before, "invalid configuration", exit 1."""
    import pydantic

    try:
        return state.config(**overrides)
    except pydantic.ValidationError as exc:
        options = {"http_host": "--host", "http_port": "--port"}
        for e in exc.errors():
            field_name = e["loc"][-1] if e["loc"] else None
            if field_name in options and field_name in overrides:
                raise click.BadParameter(e["msg"].removeprefix("Value error, "),
                                         param_hint=f"'{options[str(field_name)]}'") from None
        raise


@cli.command()
@click.option("--host", type=TEXT, default=None, help="Bind address [default: config http_host, 127.0.0.1].")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=None, help="Port [default: config http_port, 8080]."
)
@click.option(
    "--no-auth",
    is_flag=True,
    help="Serve without bearer tokens (any namespace, by the X-Tiermem-Namespace header; without it "
    "--namespace); loopback addresses only.",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
    help="Log level of uvicorn and of tiermem's own messages (--debug: debug for both).",
)
@pass_state
def serve(state: CliState, host: str | None, port: int | None, no_auth: bool, log_level: str) -> None:
    """Run the HTTP service (FastAPI + uvicorn)."""
    overrides: dict[str, Any] = {}
    if host is not None:
        overrides["http_host"] = host
    if port is not None:
        overrides["http_port"] = port
    cfg = _serve_config(state, overrides)
    from tiermem.memory import open_with_fallback
    from tiermem.service import ServiceConfigError, create_app, is_loopback
    from tiermem.service.app import hand_over

    if no_auth and not is_loopback(cfg.http_host):
        if host is not None:  # both on the command line: a usage error (exit 2), as the README's rule says
            raise click.UsageError(f"--no-auth serves only on loopback addresses; --host {host!r} is not one "
                                   "(configure auth_tokens to serve on other addresses)")
        raise CliError(  # the config's http_host: found in the configuration, exit 1
            f"--no-auth serves only on loopback addresses; {cfg.http_host!r} is not one "
            "(configure auth_tokens to serve on other addresses)"
        )
    _check_port_free(cfg.http_host, cfg.http_port)  # before seconds of loading, not after
    try:
        app = create_app(cfg, auth=not no_auth, namespace=state.namespace)
    except ServiceConfigError as exc:
        raise CliError(f"{exc}; or pass --no-auth" if "no tokens" in str(exc) else str(exc)) from None
    # The store is opened here, after the config's checks and before uvicorn starts: one
    # that cannot be opened (a corrupt file, a schema newer than this code, PostgreSQL out
    # of reach) is one `error:` line and exit 1 like every command's, not uvicorn's
    # traceback from the lifespan and exit 3 after "serving on". The app owns it
    # (`hand_over`): its lifespan warms the model and, at shutdown, closes the Memory after
    # the scheduler stopped, before uvicorn re-raises a SIGTERM it caught (which would end
    # the process before this command's cleanup). The context's close is for a start that
    # fails before the lifespan runs; a second close does nothing. A hot tier that cannot
    # start (Redis out of reach, or a read-only data dir where the embedded one cannot
    # prepare its directory) is a warning, as for `mcp` and the read commands: the service
    # answers from the cold log, /healthz says "degraded" (and the cold tier "read-only"
    # where the dir cannot be written), and writes there answer 503 unwritten.
    # A file that is no database, or a damaged one, is named as the other commands name it
    # (`naming_the_database`); the hot tier's error is the file's, not the database's
    # (a Redis launch.lock refused: "PATH: Permission denied", not "the database cannot be
    # written")
    state.opened = cfg
    with naming_the_database(cfg):
        mem, why = open_with_fallback(cfg, embedder=state.embedder, background_indexing=True)
    if why is not None:
        click.echo(f"warning: hot tier unavailable ({one_line(why, the_store=False)}); answering from the cold log",
                   err=True)
    click.get_current_context().call_on_close(mem.close)
    hand_over(app, mem)
    import uvicorn

    click.echo(
        f"tiermem serving on http://{cfg.http_host}:{cfg.http_port} (data dir {cfg.data_dir}, "
        f"{f'no auth, default namespace {state.namespace!r}' if no_auth else f'{len(cfg.auth_tokens)} token(s)'})",
        err=True,
    )
    from tiermem.service.logs import log_config

    # request lines are logged without their query strings: a log outlives erasure
    level = "debug" if state.debug else log_level
    # deadlines on a request's head and a bound on connections (tiermem.service.server):
    # uvicorn's defaults let stalled clients hold every file descriptor
    from tiermem.service.server import uvicorn_options

    uvicorn.run(app, host=cfg.http_host, port=cfg.http_port, log_level=level, lifespan="on",
                log_config=log_config(level), **uvicorn_options(cfg))


def check_service_settings(cfg: Config) -> None:
    """Refuse what `tiermem serve` would refuse of `cfg` beyond its fields' own checks (an empty
    token, a token's namespace prefix that is no namespace, a metrics token that is also a
    tenant's, a body limit below the content limit), by the code serve runs (`TokenAuth`
    and `check_service_limits`, both run by `create_app`). Having no token is no error
    here: `serve --no-auth` needs none. A PostgreSQL store's connection settings that it
    refuses at open without reaching the server (`check_pool_mode`: cold_pool_mode
    "transaction" with cold_erase_scrub "full") are refused with the line serve prints;
    only a store that serve opens on PostgreSQL (cold_url set) is checked."""
    from tiermem.service.app import check_service_limits
    from tiermem.service.auth import ServiceConfigError, TokenAuth

    try:
        TokenAuth(cfg.auth_tokens, enabled=False, default_namespace=DEFAULT_NAMESPACE,
                  max_id_chars=cfg.max_id_chars, metrics_tokens=cfg.metrics_tokens)
        check_service_limits(cfg)
    except ServiceConfigError as exc:
        raise CliError(f"invalid configuration: {exc}") from None
    if cfg.cold_url is not None:
        from tiermem.tiers.postgres import check_pool_mode

        try:
            check_pool_mode(cfg.cold_pool_mode, cfg.cold_erase_scrub)
        except ValidationError as exc:
            raise CliError(str(exc)) from None


def _check_port_free(host: str, port: int) -> None:
    """Fail with exit code 1 and the port named when `host:port` cannot be bound (another
    process listens there, or the port needs privileges); uvicorn would only find out after
    the app has loaded, and exit 3."""
    import socket

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            # as uvicorn binds: SO_REUSEADDR lets a port in TIME_WAIT go, never one with a listener
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        import errno

        why = "is already in use" if exc.errno == errno.EADDRINUSE else f"cannot be used ({exc.strerror or exc})"
        raise CliError(f"port {port} on {host} {why}; choose another with --port or http_port") from None


@cli.command()
@click.option(
    "--budget",
    type=click.IntRange(MIN_DEMO_BUDGET_TOKENS, MAX_BUDGET_TOKENS),
    default=800,
    show_default=True,
    help="Token budget for both tiermem and tail truncation.",
)
@click.option("--explain", is_flag=True, help="Also print tiermem's plan for every question.")
@click.option("--keep", is_flag=True, help="Keep the demo's temporary data dir (its path is printed).")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@pass_state
def demo(state: CliState, budget: int, explain: bool, keep: bool, as_json: bool) -> None:
    """Show what tiermem loads vs tail truncation on a long bundled conversation."""
    from tiermem.demo import render, run_demo

    result = run_demo(
        budget=budget, embedder=state.embedder, keep=keep, progress=not as_json, console=_console(stderr=True)
    )
    if as_json:
        _emit_json(result)
    else:
        render(result, _console(), explain=explain)


# -- writes -------------------------------------------------------------------------------------------------


def _read_messages(source: IO[str], name: str) -> list[dict[str, Any]]:
    try:
        text = source.read()
    except UnicodeDecodeError as exc:  # --json-file is decoded strictly: say which file, and where
        raise CliError(f"{name} is not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset {exc.start} "
                       f"({exc.reason})") from None
    text = text.removeprefix("\ufeff")  # a UTF-8 byte order mark (Windows editors): import skips it too
    if not text.strip():
        raise CliError(f"no JSON message on {name}")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"invalid JSON on {name}: {exc}") from None
    except ValueError as exc:
        # not the decoder's: Python's limit on an integer's digits is a bare ValueError
        # naming no input (and advising a Python call)
        detail = " ".join(str(exc).split()).split("; use sys.set_int_max_str_digits")[0]
        raise CliError(f"invalid JSON on {name}: {detail}") from None
    except RecursionError:
        # the decoder recurses per level (~1,000 deep); no message nests anywhere near that
        raise CliError(f"invalid JSON on {name}: nested too deeply to read") from None
    items = doc if isinstance(doc, list) else [doc]
    if not items:
        raise CliError(f"{name} holds an empty list: nothing to append")
    for i, m in enumerate(items):
        if not isinstance(m, dict):
            raise CliError(f"{name}: item {i} is a {type(m).__name__}, not a message object")
    return items


@cli.command()
@click.argument("conversation", type=NEW_CONVERSATION)
@click.option("--role", type=click.Choice(CLI_ROLES), help="Role of the message (with --content).")
@click.option("--content", type=TEXT, help="Text of the message (with --role).")
@click.option("--tool-call-id", type=NON_EMPTY_TEXT, default=None,
              help="With --role tool (required there): the id of the assistant's tool call it answers.")
@click.option(
    "--json-file",
    type=click.File("r", encoding="utf-8"),
    help="A JSON message or list of messages ('-' for stdin; stdin is also read when piped).",
)
@click.option("--session-id", type=TEXT, default=None, callback=_session_id_given,
              help="Session id for the appended message(s).")
@click.option("--idempotency-key", "idempotency_key", metavar="KEY", default=None, callback=_idempotency_key_given,
              help="Your id of this append: run again with the same KEY and messages, it stores nothing twice.")
@click.option("--json", "as_json", is_flag=True, help="Print the positions as JSON.")
@pass_state
def append(
    state: CliState,
    conversation: str,
    role: str | None,
    content: str | None,
    tool_call_id: str | None,
    json_file: IO[str] | None,
    session_id: str | None,
    idempotency_key: str | None,
    as_json: bool,
) -> None:
    """Append messages to a conversation; prints their positions."""
    if (role is None) != (content is None):
        raise click.UsageError("--role and --content go together")
    if role is not None and json_file is not None:
        raise click.UsageError("use either --role/--content or --json-file, not both")
    # a tool result answers a call by its id: without one it was refused (exit 1) after
    # --help had offered --role tool
    if role == "tool" and tool_call_id is None:
        raise click.UsageError("--role tool needs --tool-call-id (the id of the tool call it answers)")
    if tool_call_id is not None and role != "tool":
        raise click.UsageError("--tool-call-id goes with --role tool")
    if role is not None:
        messages: list[dict[str, Any]] = [{"role": role, "content": content}]
        if tool_call_id is not None:
            messages[0]["tool_call_id"] = tool_call_id
    elif json_file is not None:
        messages = _read_messages(json_file, "stdin" if json_file.name == "<stdin>" else json_file.name)
    else:
        stdin = sys.stdin
        if stdin.isatty():
            raise click.UsageError(
                "give --role and --content, --json-file FILE, or pipe a JSON message to stdin"
            )
        messages = _read_messages(stdin, "stdin")
    _check_append(state.config(), conversation, messages, session_id=session_id)
    namespace = state.new_namespace  # before the store is opened: a refused append creates nothing
    # The hot tier is not opened: it catches up with the log on its next read.
    mem = state.memory(hot=False, create=True)
    out = mem.append_outcome(conversation, messages, namespace=namespace, session_id=session_id,
                             idempotency_key=idempotency_key)
    positions = out.positions
    if as_json:
        # "replayed" only with a key: the answer without one is as it always was
        _emit_json({"conversation_id": conversation, "positions": positions,
                    **({"replayed": out.replayed} if idempotency_key is not None else {})})
    else:
        where = (
            f"position {positions[0]}"
            if len(positions) == 1
            else f"positions {positions[0]}..{positions[-1]}"
        )
        if out.replayed:
            click.echo(f"already appended under idempotency key {idempotency_key}: {len(positions)} message(s) "
                       f"in {conversation} at {where}; nothing stored now")
        else:
            click.echo(f"appended {len(positions)} message(s) to {conversation} at {where}")


def _check_append(cfg: Config, conversation: str, messages: list[dict[str, Any]], *, session_id: str | None) -> None:
    """Refuse what `Memory.append_outcome` would refuse of the arguments alone (the
    conversation id, each message with --session-id folded in, the batch size, by the
    checks and limits it applies), before the store is opened: a refused append created
    the data dir and an empty database, so a later read said "conversation not found"
    instead of naming the missing database (`need_stored`). The namespace is checked by
    `CliState.memory`; what needs the stored log (a retraction's position) stays the
    append's own."""
    validate_id(conversation, "conversation_id", cfg.max_id_chars)
    if len(messages) > MAX_BATCH_MESSAGES:
        raise ValidationError("messages", f"{len(messages)} messages exceed the batch limit of {MAX_BATCH_MESSAGES}")
    for i, m in enumerate(messages):
        try:
            parse_message(m, max_content_bytes=cfg.max_content_bytes, max_metadata_bytes=cfg.max_metadata_bytes,
                          session_id=session_id, stamp=False)
        except ValidationError as exc:  # named as the append names it: messages[i].field
            exc.field = f"messages[{i}].{exc.field}"
            exc.args = (f"{exc.field}: {exc.problem}",)
            raise


@cli.command()
@click.argument("conversation", type=CONVERSATION)
@click.argument("up_to", type=POSITION)
@click.option("--new-id", type=NEW_CONVERSATION, default=None,
              help="Id of the new conversation [default: generated].")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_state
def fork(state: CliState, conversation: str, up_to: int, new_id: str | None, as_json: bool) -> None:
    """Copy positions 0..UP_TO into a new conversation; prints its id."""
    mem = state.memory(hot=False)  # the fork's hot set is built on its first read
    child = mem.fork(conversation, up_to, new_id=new_id, namespace=state.namespace)
    if as_json:
        _emit_json({"conversation_id": child, "parent_id": conversation, "up_to": up_to})
    else:
        click.echo(child)


@cli.command()
@click.argument("conversation", type=CONVERSATION)
@click.argument("position", type=POSITION)
@click.option(
    "--priority",
    type=click.IntRange(MIN_PIN_PRIORITY, MAX_PIN_PRIORITY),
    default=DEFAULT_PIN_PRIORITY,
    show_default=True,
    help="Lower priorities are demoted first when pins must go to keep the hot budget.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_state
def pin(state: CliState, conversation: str, position: int, priority: int, as_json: bool) -> None:
    """Pin a turn: the hot set keeps it before any unpinned turn; contexts show pins by priority."""
    state.memory(hot=True).pin(conversation, position, priority=priority, namespace=state.namespace)
    if as_json:
        _emit_json({"conversation_id": conversation, "position": position, "pinned": True, "priority": priority})
    else:
        click.echo(f"pinned {conversation} #{position} (priority {priority})")


@cli.command()
@click.argument("conversation", type=CONVERSATION)
@click.argument("position", type=POSITION)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_state
def unpin(state: CliState, conversation: str, position: int, as_json: bool) -> None:
    """Remove an explicit pin from a turn."""
    state.memory(hot=True).unpin(conversation, position, namespace=state.namespace)
    if as_json:
        _emit_json({"conversation_id": conversation, "position": position, "pinned": False})
    else:
        click.echo(f"unpinned {conversation} #{position}")


@cli.command()
@click.option(
    "--older-than",
    "older_than",
    type=AgeType(),
    required=True,
    help="Age of the last activity (the last message; a fork's creation): 30d, 12h, 90m, 45s, 2w, or seconds.",
)
@click.option("--all-namespaces", is_flag=True, help="Prune every namespace, not only --namespace.")
@click.option("--dry-run", is_flag=True, help="List what would be erased now; erase nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_state
def prune(state: CliState, older_than: float, all_namespaces: bool, dry_run: bool, as_json: bool) -> None:
    """Delete whole conversations idle for longer than --older-than; reclaims disk."""
    mem = state.memory(hot=not dry_run)  # a dry run drops no Redis copy
    if all_namespaces:
        report = mem.prune(older_than, all_namespaces=True, dry_run=dry_run)
    else:
        report = mem.prune(older_than, namespace=state.namespace, dry_run=dry_run)
    if dry_run:
        _prune_preview_out(report, as_json)
    else:
        _erasure_out(report, "pruned", as_json)


def _prune_preview_out(report: ErasureReport, as_json: bool) -> None:
    """`prune --dry-run`: the conversations a prune would erase now, one a line, each as
    namespace/id (an id holds no `/`, so the last one splits them): with --all-namespaces
    the same id is listed once per namespace that has it. JSON: `conversation_ids` as it
    was (names alone) and `namespaced_ids` (`{"namespace", "id"}`, a tombstone's fields)."""
    if as_json:
        _emit_json({"dry_run": True, "conversations": report.conversations, "messages": report.messages,
                    "conversation_ids": report.conversation_ids, "namespaced_ids": report.named(),
                    "keys": report.keys})
        return
    click.echo(f"would prune {report.conversations} conversation(s), {report.messages} message(s); "
               "nothing erased (--dry-run)")
    for one in report.named():
        click.echo(f"  {one['namespace']}{NAMESPACE_SEPARATOR}{one['id']}")


@cli.command()
@click.argument("conversation", type=CONVERSATION)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_state
def delete(state: CliState, conversation: str, as_json: bool) -> None:
    """Erase one conversation and every byte derived from it; leaves a tombstone."""
    report = state.memory(hot=True).delete_conversation(conversation, namespace=state.namespace)
    _erasure_out(report, "erased", as_json)


@cli.command("delete-namespace")
@click.argument("namespace", type=NAMESPACE)  # checked before the confirmation is asked
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_state
def delete_namespace(state: CliState, namespace: str, yes: bool, as_json: bool) -> None:
    """Erase a namespace and every namespace below it (a user's right to erasure)."""
    if not yes:
        _confirm_erasure(f"Erase every conversation of {namespace!r} and the namespaces below it?")
    report = state.memory(hot=True).delete_namespace(namespace)
    _erasure_out(report, "erased", as_json)


# delete-namespace's answers to its question other than yes: one line, nothing erased
NOT_CONFIRMED_TEXT = "not confirmed: nothing was erased"
NO_ANSWER_TEXT = "no answer (standard input ended): nothing was erased; pass --yes to erase without asking"
PROMPT_INTERRUPTED_TEXT = "interrupted at the question: nothing was erased"


def _confirm_erasure(question: str) -> None:
    """Ask `question`; return on yes. No (or Enter) is `error: not confirmed...`, exit 1;
    standard input ending unanswered says so and names --yes, exit 1; Ctrl-C is exit 130
    (INTERRUPTED_EXIT, as anywhere else). Before, each was click's "Aborted!", exit 1.
    click turns both EOFError and KeyboardInterrupt into Abort; the one it met is its
    `__context__` (raised `from None`, which only hides it)."""
    try:
        confirmed = click.confirm(question, default=False)
    except click.Abort as exc:
        click.echo("", err=True)  # end the prompt's line
        if isinstance(exc.__context__, KeyboardInterrupt):
            click.echo(f"error: {PROMPT_INTERRUPTED_TEXT}", err=True)
            raise click.exceptions.Exit(INTERRUPTED_EXIT) from None
        raise CliError(NO_ANSWER_TEXT) from None
    if not confirmed:
        raise CliError(NOT_CONFIRMED_TEXT)


def _erasure_out(report: ErasureReport, verb: str, as_json: bool) -> None:
    if as_json:
        _emit_json({**report.to_json(), "bytes_before": report.bytes_before, "bytes_after": report.bytes_after})
    else:
        click.echo(
            f"{verb} {report.conversations} conversation(s), {report.messages} message(s); "
            f"files {report.bytes_before} -> {report.bytes_after} bytes"
        )
        if report.conversations and not report.scrubbed and report.not_rewritten:
            # what the store says kept the bytes (PostgreSQL: pg_statistic not rewritten, or
            # an open snapshot older than the erasure, which any rewrite must keep them for)
            click.echo(f"note: the rows are deleted, but not every copy of their bytes is rewritten: "
                       f"{report.not_rewritten}: erased values may stay in the store's files for now "
                       "(README, \"Erasure on real bytes\")", err=True)
        elif report.conversations and not report.scrubbed:
            click.echo("note: the rows are deleted, but the store did not rewrite their storage: their bytes "
                       "may stay in its files for now (README, \"Erasure on real bytes\")", err=True)


# -- reads ------------------------------------------------------------------------------------------


@cli.command()
@click.argument("conversation", type=CONVERSATION)
@click.option("--query", "-q", type=TEXT, default=None, help="The new turn's question.")
@click.option(
    "--budget", "-b", type=click.IntRange(min=1, max=MAX_BUDGET_TOKENS), default=DEFAULT_BUDGET_TOKENS, show_default=True,
    help="Token budget."
)
@click.option("--system", type=TEXT, default=None, help="A system message to put first.")
@click.option(
    "--timezone", type=TEXT, default=None, callback=_timezone_given,
    help="The user's IANA time zone for this call (e.g. America/Los_Angeles): the calendar of the days turns "
         "tell of and the query names, and the clock of the dates shown (default: the config's timezone)."
)
@click.option("--no-namespace-recall", is_flag=True, help="Retrieve from this conversation only.")
@click.option(
    "--truncate-latest", is_flag=True, help="Cut the latest user message if it alone is over budget."
)
@click.option("--json", "as_json", is_flag=True, help='Print {"messages", "tokens", "plan"} as JSON.')
@pass_state
def context(
    state: CliState,
    conversation: str,
    query: str | None,
    budget: int,
    system: str | None,
    timezone: str | None,
    no_namespace_recall: bool,
    truncate_latest: bool,
    as_json: bool,
) -> None:
    """Assemble the context for a turn under a budget, and explain the plan."""
    from tiermem.tiers.errors import BudgetTooSmall

    mem = state.memory(hot=True)
    try:
        ctx = mem.context(
            conversation,
            query,
            budget,
            system=system,
            namespace_recall=not no_namespace_recall,
            namespace=state.namespace,
            truncate_latest=truncate_latest,
            timezone=timezone,
        )
    except BudgetTooSmall as exc:
        # its advice in this command's words: the library's keyword is no option here
        if exc.part != exc.PART_LATEST:
            raise
        if exc.problem.endswith(LIBRARY_TRUNCATE_ADVICE):
            raise ValidationError(exc.field, exc.problem.removesuffix(LIBRARY_TRUNCATE_ADVICE)
                                  + "pass --truncate-latest") from None
        if LIBRARY_TRUNCATE_KEYWORD in exc.problem:  # "... cannot help": named as this command's option
            raise ValidationError(exc.field, exc.problem.replace(LIBRARY_TRUNCATE_KEYWORD, "--truncate-latest")) \
                from None
        raise
    if ctx.plan.tiers.get("embedder") == "degraded":
        _note_keywords_only(mem, ctx.plan.retrieval)
    if as_json:
        _emit_json({"messages": ctx.messages, "tokens": ctx.tokens, "plan": ctx.plan.to_dict()})
        return
    from rich.rule import Rule
    from rich.text import Text

    from tiermem.tiers.models import message_text

    con = _console()
    piped = not con.is_terminal  # piped output keeps its lines whole (no wrapping at 80 columns)
    for m in ctx.messages:
        con.print(Rule(Text(terminal_text(str(m.get("role") or m.get("type") or "?")), style="bold"),
                       align="left"))
        con.print(Text(terminal_text(message_text(m))), soft_wrap=piped)
    con.print(Rule(Text(f"plan: {ctx.tokens}/{budget} tokens", style="bold"), align="left"))
    con.print(Text(terminal_text(ctx.plan.explain())), soft_wrap=piped)


@cli.command()
@click.option("--json", "as_json", is_flag=True,
              help='Print {"namespace", "conversations"} as JSON.')
@pass_state
def conversations(state: CliState, as_json: bool) -> None:
    """List the namespace's conversation ids (--namespace; not those below it), one a line."""
    # the library's call (as GET /v1/conversations and Client.conversations answer), all pages
    got = state.memory(hot=False).conversations(namespace=state.namespace)
    if as_json:
        _emit_json({"namespace": state.namespace, "conversations": got})
        return
    if not got:  # said on stderr: stdout stays the list (empty) for a script
        click.echo(f"no conversations in namespace {state.namespace!r}", err=True)
    for conversation in got:
        click.echo(conversation)


@cli.command()
@click.argument("conversation", type=CONVERSATION)
@click.option("--json", "as_json", is_flag=True, help="Print the facts as JSON.")
@pass_state
def facts(state: CliState, conversation: str, as_json: bool) -> None:
    """What the agent believes now: current statements, and superseded ones with when they held."""
    got = state.memory(hot=False).facts(conversation, namespace=state.namespace)
    if as_json:
        _emit_json([f.to_json() for f in got])
        return
    from rich.table import Table

    table = Table(title=f"{conversation}: {len(got)} statement(s)", title_justify="left")
    for col in ("#", "role", "status", "valid from", "valid until", "text"):
        table.add_column(col, overflow="fold")
    for f in got:
        until = "-" if f.until_position is None else f"#{f.until_position} {_fmt_time(f.until or 0.0)}"
        table.add_row(str(f.position), f.role, f.status, _fmt_time(f.valid_from), until, f.text)
    _console().print(table)


@cli.command()
@click.argument("conversation", type=CONVERSATION)
@click.option("--limit", type=click.IntRange(1, MAX_HISTORY_PAGE), default=None,
              help="Only the last N messages (with --after: the N positions after it).")
@click.option("--after", type=click.IntRange(-1, MAX_POSITION), default=None,
              help="Page cursor: only positions after this one (the previous page's next_after).")
@click.option("--json", "as_json", is_flag=True, help="Print the messages as JSON.")
@pass_state
def history(state: CliState, conversation: str, limit: int | None, after: int | None, as_json: bool) -> None:
    """Print the messages of a conversation, in order (all, the last N, or a page)."""
    mem = state.memory(hot=False)
    if after is not None:
        msgs, next_after = mem.history_page(conversation, namespace=state.namespace, after=after, limit=limit)
        if next_after is not None:
            click.echo(f"next page: --after {next_after}", err=True)
    else:
        msgs = mem.history(conversation, namespace=state.namespace)
        if limit is not None:
            msgs = msgs[-limit:]
    if as_json:
        _emit_json(
            [
                {
                    "position": m.position,
                    "role": m.role,
                    "message": m.body,
                    "session_id": m.session_id,
                    "metadata": m.metadata,
                    "created_at": m.created_at,
                    "tokens": m.tokens,
                }
                for m in msgs
            ]
        )
        return
    from rich.table import Table

    table = Table(title=f"{conversation}: {len(msgs)} message(s)", title_justify="left")
    for col, kw in (
        ("#", {"justify": "right"}),
        ("role", {}),
        ("session", {}),
        ("time", {}),
        ("tok", {"justify": "right"}),
        ("content", {"overflow": "fold"}),
    ):
        table.add_column(col, **kw)  # type: ignore[arg-type]
    for m in msgs:
        table.add_row(
            str(m.position),
            m.role,
            m.session_id or "",
            _fmt_time(m.created_at),
            str(m.tokens),
            _preview(m.text),
        )
    _console().print(table)


@cli.command()
@click.argument("query", type=TEXT)
@click.option("--conversation", "-c", type=CONVERSATION, default=None, help="Search one conversation [default: the namespace].")
@click.option("-k", type=click.IntRange(1, MAX_SEARCH_K), default=10, show_default=True, help="How many hits.")
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON.")
@pass_state
def search(state: CliState, query: str, conversation: str | None, k: int, as_json: bool) -> None:
    """Hybrid search (vectors + bm25) over a conversation or the namespace."""
    mem = state.memory(hot=False)
    hits = mem.search(conversation, query, k, namespace=state.namespace)
    # on stderr: a script reading the hits on stdout gets them as ever
    _note_keywords_only(mem, hits.degraded)
    if hits.vectors_pending:  # this process embedded one pool of them, and has no indexer left after
        click.echo(f"note: {hits.vectors_pending} turn(s) have no vector yet and were found by keywords only; "
                   "`tiermem index` embeds them", err=True)
    if as_json:
        _emit_json(
            [
                {
                    "conversation_id": h.conversation_id,
                    "position": h.position,
                    "score": h.score,
                    "ranks": h.ranks,
                    "text": h.text,
                    # the search's, on each hit: the output stays a list of hits
                    "degraded": hits.degraded,
                    **hit_supersession(h),  # whether it still holds: status, valid_until
                }
                for h in hits
            ]
        )
        return
    from rich.table import Table

    table = Table(title=f"{len(hits)} hit(s) for {query!r}", title_justify="left")
    for col in ("conversation", "#", "score", "text"):
        table.add_column(col)
    for h in hits:
        table.add_row(h.conversation_id, str(h.position), f"{h.score:.4f}", _hit_marker(h) + _preview(h.text))
    _console().print(table)


def _hit_marker(h: SearchHit) -> str:
    """A short mark before a hit's text that no longer holds (`SearchHit.status`), so a
    stale value is never read as current: what superseded it, where the whole turn."""
    if h.status == HIT_SUPERSEDED:
        # parentheses: the table's cells are rich markup, where brackets are tags
        return f"(superseded by #{h.superseded_by}) " if h.superseded_by is not None else "(superseded) "
    if h.status == HIT_SUPERSEDED_IN_PART:
        return "(superseded in part) "
    return ""


def _flatten(d: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for k, v in d.items():
        if isinstance(v, dict) and v:
            yield from _flatten(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the stats as JSON.")
@pass_state
def stats(state: CliState, as_json: bool) -> None:
    """Counts and health of every tier (one namespace's counts with --namespace)."""
    mem = state.memory(hot=True)
    data = mem.stats(namespace=state.namespace if state.namespace_opt else None)
    if as_json:
        _emit_json(data)
        return
    from rich.table import Table

    scope = f"namespace {state.namespace_opt!r}" if state.namespace_opt else "all namespaces"
    table = Table(title=f"tiermem stats ({scope})", title_justify="left")
    table.add_column("key")
    table.add_column("value", overflow="fold")
    for k, v in _flatten(data):
        table.add_row(k, json.dumps(v, default=str) if isinstance(v, dict | list) else str(v))
    _console().print(table)


# -- maintenance ------------------------------------------------------------------------------------


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_state
def rebuild(state: CliState, as_json: bool) -> None:
    """Recompute every derived index and the hot sets from the log."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    mem = state.memory(hot=True)
    total = int(mem.cold.stats().get("messages", 0))
    with Progress(
        TextColumn("rebuilding"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_console(stderr=True),
        transient=True,
        disable=as_json,
    ) as bar:
        task = bar.add_task("rebuild", total=total or None)
        report = mem.rebuild(progress=lambda n: bar.advance(task, n))
    if as_json:
        _emit_json(report)
    else:
        click.echo("rebuilt: " + ", ".join(f"{k}={v}" for k, v in report.items()))


@cli.command()
@click.option("--watch", is_flag=True, help="Keep running the scheduler until interrupted.")
@click.option(
    "--interval",
    type=FiniteFloatRange(MIN_WATCH_INTERVAL_S, MAX_SCHEDULER_INTERVAL_S),
    default=None,
    help="Seconds between runs with --watch [default: config scheduler_interval_s].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the scheduler stats as JSON.")
@pass_state
def consolidate(state: CliState, watch: bool, interval: float | None, as_json: bool) -> None:
    """Refresh warm summary views that are over their freshness budget.

    Once (without --watch), refreshes that failed (a store busy behind another writer:
    "storage busy", as append says; a summarizer that failed, its view keeping its
    previous version) make it exit 1 with one line per cause, after the report;
    --json's report lists them (`failures`). With --watch each failed run
    is one log line and the scheduler goes on. --debug: each failure's traceback. A view
    whose lease another process holds ("held by another refresher": its refresh is under
    way there) was not refreshed by this run: said in one line, exit 0; --json lists it,
    and every other view left untried, under `skipped`."""
    try:
        from tiermem.consolidation.scheduler import SKIP_HELD, failure_causes
    except ImportError as exc:
        raise CliError(f"consolidation is not available: {one_line(exc)}") from None
    cfg = state.config(scheduler_interval_s=interval) if interval is not None else state.config()
    mem = state.memory(hot=True, config=cfg, create=True)
    sched = mem.make_scheduler()
    if not watch:
        refreshed = sched.run_once(log_failures=False)  # said here, in the CLI's words
        # a summarizer's failure is no error to the scheduler (its runs go on, the view
        # backed off) but the refresh asked for here did not happen
        failed = sched.last_failures + sched.last_summarizer_failures
        skipped = sched.last_skipped
        if as_json:
            _emit_json({**sched.snapshot(), "failures": [
                {"conversation": f.conversation, "kind": f.kind, "key": f.key, "error": one_line(f.error)}
                for f in failed], "skipped": [
                {"conversation": v.conversation, "kind": v.kind, "key": v.key, "reason": v.reason, "cause": v.cause}
                for v in skipped]})
        else:
            click.echo(f"refreshed {refreshed} view(s)")
            # the other views left untried (after a busy store's refusal) are the failure's,
            # said in its `error:` line below; --json lists them all
            held = sum(1 for v in skipped if v.reason == SKIP_HELD)
            if held:
                click.echo(f"not refreshed: {held} view(s) {SKIP_HELD} (its refresh is under way in another "
                           "process, which brings the view up to date)")
        if failed:
            picked = sched.stats.last_selected
            for cause, n in failure_causes(failed, one_line):
                click.echo(f"error: {cause} [{n} view refresh(es) failed; {refreshed} of {picked} refreshed]",
                           err=True)
            raise click.exceptions.Exit(1)
        return
    try:
        # Ctrl-C as soon as the scheduler's thread runs (its first run under way) or the
        # line below is read stops it as cleanly as later: the scheduler is stopped before
        # the store is closed. Started outside this block, a Ctrl-C right after the start
        # closed the store under the run ("the store is closed" logged) and exited 130
        sched.start(run_now=True)
        click.echo(f"consolidating every {sched.interval_s:g}s; Ctrl-C to stop", err=True)
        while True:
            time.sleep(sched.interval_s)
            snap = sched.snapshot()
            if as_json:
                _emit_json(snap)
            else:
                click.echo(
                    f"runs={snap.get('runs')} refreshed={snap.get('refreshed_total')} "
                    f"lag_turns={snap.get('lag_turns')} errors={snap.get('errors')}"
                )
    except KeyboardInterrupt:
        pass
    finally:
        sched.shutdown(wait=True)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@pass_state
def index(state: CliState, as_json: bool) -> None:
    """Embed every turn that has no vector yet (appends leave that to later)."""
    mem = state.memory(hot=True, create=True)
    started = time.perf_counter()
    done = mem.catch_up()
    pending = mem.cold.pending_embeddings()
    if pending and getattr(mem.cold, "read_only", False):
        # the catch-up stores nothing on storage opened read-only (it returns 0): the
        # write the command exists for failed, as every write there does, not "done".
        # Said here, not by the group's handler: nothing at all was written
        from tiermem.tiers.errors import StorageReadOnly

        why = f"{pending} turn(s) wait for their embeddings, which are written to it"
        raise CliError(one_line(StorageReadOnly(str(mem.config.db_path), why)))
    report = {"embedded": done, "pending": pending, "seconds": round(time.perf_counter() - started, 3),
              "runtime": str(getattr(mem.embedder, "active_runtime", "external"))}
    if as_json:
        _emit_json(report)
    else:
        click.echo(f"embedded {done} turn(s) in {report['seconds']:g}s ({report['runtime']}); "
                   f"{report['pending']} pending")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_state
def model(state: CliState, as_json: bool) -> None:
    """Prepare the embedding model now (export to ONNX once, check it) and say which runtime runs."""
    from tiermem.tiers.embed import bundled_model_path
    from tiermem.tiers.embed_onnx import MANIFEST, build_embedder, default_cache_dir, export_dir

    cfg = state.config()
    emb = state.embedder or build_embedder(cfg.embedding_model, runtime=cfg.embedding_runtime,
                                           batch_size=cfg.embedding_batch_size,
                                           query_precision=cfg.embedding_query_precision,
                                           cache_dir=cfg.embedding_cache_dir)
    started = time.perf_counter()
    load = getattr(emb, "load", None)
    if callable(load):
        runtime = load()
    else:  # the torch pipeline and embedders of the caller's own load on their first call
        emb.embed(["warm-up"])
        runtime = str(getattr(emb, "active_runtime", "external"))
    report: dict[str, Any] = {"runtime": runtime, "seconds": round(time.perf_counter() - started, 3),
                              "dim": emb.dim, "fallback_reason": getattr(emb, "load_error", None)}
    if runtime == "onnx":
        where = export_dir(cfg.embedding_model or bundled_model_path(), cfg.embedding_cache_dir or default_cache_dir())
        manifest = json.loads((where / MANIFEST).read_text("utf-8"))
        prepare = getattr(emb, "prepare_query_graph", None)
        report.update(export=str(where), cosine_to_pipeline=manifest.get("export_cosine_min"),
                      query_graph=prepare() if callable(prepare) else None)
    if as_json:
        _emit_json(report)
    else:
        click.echo(", ".join(f"{k}={v}" for k, v in report.items() if v is not None))


@cli.command("migrate-store")
@click.option("--to", "target", type=TEXT, required=True,
              help="Where to copy the log: a postgresql:// URL, or a SQLite file or data dir (from PostgreSQL).")
@click.option("--from", "source", type=TEXT, default=None,
              help="The log to copy [default: this config's cold store: cold_url, else the data dir's file].")
@click.option("--schema", "target_schema", type=TEXT, default=None, help="PostgreSQL schema of the target [default: cold_schema].")
@click.option("--from-schema", "source_schema", type=TEXT, default=None,
              help="PostgreSQL schema of the source [default: cold_schema].")
@click.option("--into-non-empty", is_flag=True, help="Merge into a target that already holds other conversations.")
@click.option("--accept-unfinished", is_flag=True,
              help="Copy nothing: clear every unfinished-copy mark of --to (all sources') and let it open as it is "
                   "(the sources are gone).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_state
def migrate_store_command(state: CliState, target: str, source: str | None, target_schema: str | None,
                          source_schema: str | None, into_non_empty: bool, accept_unfinished: bool,
                          as_json: bool) -> None:
    """Copy the cold log between SQLite and PostgreSQL, verified; rerun to resume."""
    from tiermem.tiers.migrate_store import is_postgres, migrate_store
    from tiermem.tiers.tokens import BpeTokenCounter

    cfg = state.config()
    if accept_unfinished:
        _accept_unfinished(cfg, target, target_schema, source, into_non_empty, as_json)
        return
    src = source if source is not None else (cfg.cold_url or str(cfg.db_path))
    # a schema names a place in PostgreSQL only: given for a SQLite side it would be
    # ignored, and `--schema S` copying back to a file read the default schema, not S
    for given, side, option, other in ((target_schema, target, "--schema", "--from-schema"),
                                       (source_schema, src, "--from-schema", "--schema")):
        if given is not None and not is_postgres(side):
            raise click.UsageError(f"{option} names the schema of a PostgreSQL "
                                   f"{'target' if option == '--schema' else 'source'}, and {side!r} is "
                                   f"SQLite; for the other side's schema use {other}")
    report = migrate_store(src, target, tokens=BpeTokenCounter(cfg.tokenizer),
                           source_schema=source_schema or cfg.cold_schema,
                           target_schema=target_schema or cfg.cold_schema, into_non_empty=into_non_empty,
                           busy_timeout_ms=cfg.busy_timeout_ms, operation_timeout_s=cfg.cold_operation_timeout_s,
                           erase_scrub=cfg.cold_erase_scrub, pool_mode=cfg.cold_pool_mode,
                           on_erased=_target_hot_purge(cfg, target),
                           progress=None if as_json else lambda i, n: click.echo(f"copied {i}/{n}", err=True)
                           if i == n or i % 100 == 0 else None)
    if as_json:
        _emit_json(report.to_json())
        return
    click.echo(f"{report.conversations} conversation(s), {report.messages} message(s), {report.vectors} vector(s), "
               f"{report.keys} key(s), {report.tombstones} tombstone(s) verified in {report.target} "
               f"({report.copied} copied now, {report.already_present} already there"
               + (f", {report.erased_in_target} erased in the target and left erased (the source still holds them)"
                  if report.erased_in_target else "")
               + (f", {report.erased_from_source} erased in the source and now erased in the target too"
                  if report.erased_from_source else "")
               + f"; sha256 {report.digest[:16]}; {report.seconds:.1f} s)")


def _accept_unfinished(cfg: Config, target: str, target_schema: str | None, source: str | None,
                       into_non_empty: bool, as_json: bool) -> None:
    """`migrate-store --to T --accept-unfinished`: T's marks of unfinished copies removed,
    every source's, each named (tiers.migrate_store.accept_unfinished), nothing copied."""
    from tiermem.tiers.migrate_store import accept_unfinished, is_postgres
    from tiermem.tiers.tokens import BpeTokenCounter

    if source is not None or into_non_empty:  # it copies nothing: a source named would read as copied
        raise click.UsageError("--accept-unfinished copies nothing, so it takes no --from or --into-non-empty; "
                               "to finish the copy instead, rerun without it")
    if target_schema is not None and not is_postgres(target):
        raise click.UsageError(f"--schema names the schema of a PostgreSQL target, and {target!r} is SQLite")
    named, was = accept_unfinished(target, tokens=BpeTokenCounter(cfg.tokenizer),
                                   target_schema=target_schema or cfg.cold_schema,
                                   busy_timeout_ms=cfg.busy_timeout_ms, operation_timeout_s=cfg.cold_operation_timeout_s,
                                   pool_mode=cfg.cold_pool_mode)
    if as_json:
        _emit_json({"target": named, "was_unfinished": bool(was), "accepted": [m.to_json() for m in was]})
    elif not was:
        click.echo(f"{named} holds no unfinished copy: nothing to accept")
    else:
        for mark in was:  # every source's, each named: the operator accepted all of them
            click.echo(f"{named} accepted as it is: it opens from now on, and may lack part of the history of "
                       f"{mark.source}")


def _target_hot_purge(cfg: Config, target: str) -> Callable[[Any, Sequence[str]], None] | None:
    """For migrate-store's erasures in the target (a conversation the source erased):
    delete their Redis keys as `Memory.delete_conversation` does (`HotLink.erase`: the hot
    set, cached views, the epoch states that show their turns; keys per incarnation, so
    another process's too) and cross them off the target's `redis_purge`. A `tiermem
    serve` of the target would otherwise keep the erased text in Redis until
    hot_idle_ttl_s. The config's Redis (redis_url), else the embedded one of the target's
    data dir (the config's for a PostgreSQL target) only while it runs: a migration
    starts no Redis. None where there is neither: the keys stay owed, deleted by the
    next Memory that opens on the target."""
    from tiermem.tiers.hot import make_client
    from tiermem.tiers.migrate_store import is_postgres, sqlite_path
    from tiermem.tiers.redis_server import EmbeddedRedis

    url = cfg.redis_url
    if url is None:
        server = EmbeddedRedis(cfg.data_dir if is_postgres(target) else sqlite_path(target).parent)
        if not server.is_running():
            return None
        url = server.url

    def purge(store: Any, keys: Sequence[str]) -> None:
        from tiermem.hotlink import HotLink

        client = make_client(url)
        try:
            left = set(HotLink(cfg, store, redis_client=client).erase(list(keys)))
            if done := [k for k in keys if k not in left]:
                store.purged(done)
        finally:
            client.close()

    return purge


@cli.command("stop-redis")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_state
def stop_redis(state: CliState, as_json: bool) -> None:
    """Stop the embedded redis-server of this data dir (the hot tier rebuilds later)."""
    from tiermem.tiers.redis_server import EmbeddedRedis

    server = EmbeddedRedis(state.config().data_dir)
    # orphans: servers on this data dir's socket path whose pidfile is gone (a removed
    # and re-created data dir, a killed watchdog)
    running = server.pid is not None or server.is_running() or bool(server.orphans())
    if running:
        server.stop()
    if as_json:
        _emit_json({"stopped": running})
    elif running:
        click.echo("stopped the embedded redis-server")
    else:
        click.echo("no embedded redis-server is running for this data dir")


# -- configuration, import, tuning (issue 20) -------------------------------------------------------


def _data_dir_source(ctx: click.Context) -> str:
    """How the global --data-dir got its value: the option or its env var."""
    src = ctx.find_root().get_parameter_source("data_dir")
    return "env TIERMEM_DATA_DIR" if src == click.core.ParameterSource.ENVIRONMENT else "--data-dir"


@cli.command("config")
@click.option("--check", "check_file", type=ConfigFilePath(), default=None,
              help="Validate this file (TOML, or JSON by its name; every bad field named) and show its config.")
@click.option("--export", "export_to", type=OutputPath(allow_dash=True),
              default=None, help="Write the effective config here in sections (JSON when the name ends in "
              ".json, else TOML; - for stdout, TOML unless --format json); it loads back to the same config.")
@click.option("--format", "export_format", type=click.Choice(EXPORT_FORMATS), default=None,
              help="With --export: the format (default: JSON for a name ending in .json, else TOML; stdout TOML). "
                   "A file's must match its name, which is how it is read back; a null setting "
                   "(pricing.min_prefix_tokens) needs JSON.")
@click.option("--with-secrets", is_flag=True,
              help="With --export: include bearer tokens and URL passwords (left out by default).")
@click.option("--json", "as_json", is_flag=True, help='Print [{"key", "file_key", "value", "source"}] as JSON.')
@pass_state
@click.pass_context
def config_command(ctx: click.Context, state: CliState, check_file: Path | None, export_to: Path | None,
                   export_format: str | None, with_secrets: bool, as_json: bool) -> None:
    """Show the effective config and each value's source (secrets redacted), or export it."""
    from tiermem.config import dropped_shares_said_once, explain_sources
    from tiermem.config_sections import is_json, read_file

    if export_format is not None:
        if export_to is None:
            raise click.BadParameter("is for --export", param_hint="'--format'")
        named = "json" if is_json(export_to) else "toml"
        if str(export_to) != "-" and export_format != named:
            # a file is read back by its name's format: written in the other, it would not load
            raise click.BadParameter(f"{export_format} does not match {export_to}, read back as {named} by its "
                                     f"name; name it {'*.json' if export_format == 'json' else 'without .json'}",
                                     param_hint="'--format'")
    path = check_file or state.config_path
    if path is not None:
        read_file(path)  # a file that does not parse is named as such, before any field
    overrides: dict[str, Any] = {} if state.data_dir is None else {"data_dir": state.data_dir}
    # the config is loaded twice here (checked, then shown): an old export's warning once
    with state.naming_data_dir_source(path), dropped_shares_said_once():
        if check_file is not None:
            from tiermem.config import Config

            check_service_settings(Config.load(path, **overrides))
        if export_to is not None:
            _export_config(path, overrides, export_to, with_secrets=with_secrets,
                           data_dir_source=_data_dir_source(ctx), as_json=export_format == "json")
            return
        rows = explain_sources(path, argument_sources={"data_dir": _data_dir_source(ctx)}, **overrides)
    if as_json:
        _emit_json(rows)
        return
    from rich.table import Table

    table = Table(title="tiermem config (kwargs > env > file > defaults)", title_justify="left")
    for col in ("key", "in a file", "value", "source"):
        table.add_column(col, overflow="fold")
    for r in rows:
        v = r["value"]
        table.add_row(r["key"], r["file_key"], json.dumps(v) if isinstance(v, dict | list | None) else str(v),
                      r["source"])
    _console().print(table)


def _sources_used(rows: list[dict[str, Any]]) -> str:
    """The sources the effective config's values came from (`explain_sources`' rows), each
    once, by precedence (arguments, env, file, defaults): only those actually used."""
    from tiermem.config import DEFAULT_SOURCE

    seen = list(dict.fromkeys(str(r["source"]) for r in rows))
    rank = {"env": 1, "file": 2, DEFAULT_SOURCE: 3}
    ordered = sorted(seen, key=lambda s: rank.get(s.split(" ", 1)[0], 0))  # stable: arguments first
    return ", ".join("defaults" if s == DEFAULT_SOURCE else s for s in ordered)


def _export_config(path: Path | None, overrides: dict[str, Any], target: Path, *, with_secrets: bool,
                   data_dir_source: str, as_json: bool = False) -> None:
    """Write the effective config as a sectioned file (mode 0600: it may hold secrets),
    its path settings absolute, so that it loads back to the same Config wherever it is
    written (a relative one in a file is read against the file's directory). Its header
    names the sources its values came from, only those used. JSON for a name ending in
    .json, or `as_json` (stdout's --format json: TOML cannot say a null, and stdout has no
    name to end in .json), else TOML."""
    from tiermem.config import (
        JSON_FILE_HINT,
        SECRETS_LEFT_OUT,
        Config,
        explain_sources,
        export_text,
        leave_out_secrets,
    )
    from tiermem.config_sections import absolute_paths, is_json

    # a relative path here is the working directory's (--data-dir, env; a file's were joined
    # to its directory as it was read)
    values = absolute_paths(Config.load(path, **overrides).model_dump(mode="json"), os.getcwd())
    left_out = [] if with_secrets else leave_out_secrets(values)
    sources = _sources_used(explain_sources(path, argument_sources={"data_dir": data_dir_source}, **overrides))
    header = [f"tiermem config --export (sources: {sources}); "
              f"load with tiermem --config FILE or env TIERMEM_CONFIG=FILE"]
    if left_out:
        header.append(SECRETS_LEFT_OUT.format(", ".join(left_out)))
    to_stdout = str(target) == "-"
    text = export_text(values, as_json=as_json or (not to_stdout and is_json(target)), header=header,
                       hint="print JSON instead (--format json)" if to_stdout else JSON_FILE_HINT)
    if to_stdout:
        click.echo(text, nl=False)
    else:
        with _replacing(target, mode=PRIVATE_FILE_MODE) as fh:  # it may hold bearer tokens
            fh.write(text)
        click.echo(f"wrote {target}" + (f" (left out: {', '.join(left_out)})" if left_out else ""), err=True)


@cli.command("import")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, allow_dash=True))
@click.option("--conversation", type=NEW_CONVERSATION, default=None, help="Conversation id for lines that give none.")
@click.option("--skip-bad", is_flag=True, help="Skip bad lines (listed) instead of refusing the file.")
@click.option("--index", "and_index", is_flag=True,
              help="Also embed the imported turns, beside the writes: returns with every turn embedded, as `tiermem index` after it would.")
@click.option("--restore-erased", is_flag=True,
              help="Also restore conversations erased on request (`tiermem delete`) from lines created before "
                   "their erasure: brings back data someone asked to erase. Without it such a file is refused.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_state
def import_command(state: CliState, file: Path, conversation: str | None, skip_bad: bool, and_index: bool,
                   restore_erased: bool, as_json: bool) -> None:
    """Import conversations (OpenAI messages as JSONL/JSON, or LoCoMo); re-imports add nothing.

    FILE is a path, a pipe (`<(zcat f.jsonl.gz)`, /dev/stdin) or `-` for standard input
    (`zcat f.jsonl.gz | tiermem import -`; a file named `-` is `./-`). The file is read
    twice, checked whole before anything is written (a file changed since is refused); a
    pipe is first copied to a temporary file (in the data dir when it exists) that has no
    name, so nothing is left behind even if the import is killed. A conversation erased
    on request is not brought back from lines created before its erasure (an export made
    before it): the file is refused, naming it, unless --restore-erased.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tiermem.evals.conversations import import_dataset, open_conversations

    stdin = str(file) == "-"
    if not stdin and not os.path.exists(file):  # a bad value on the command line: exit 2, before anything
        raise click.BadParameter(f"{file}: no such file", param_hint="'FILE'")
    cfg = state.config()
    namespace = state.new_namespace  # before the file is read or the store opened
    with open_conversations(sys.stdin.buffer if stdin else file, name=STDIN_NAME if stdin else None,
                            spool_dir=cfg.data_dir if cfg.data_dir.is_dir() else None,
                            max_content_bytes=cfg.max_content_bytes, max_metadata_bytes=cfg.max_metadata_bytes,
                            max_id_chars=cfg.max_id_chars, strict=not skip_bad, conversation_id=conversation) as data:
        mem = state.memory(hot=False, config=cfg, create=True)  # the hot tier catches up with the log on its next read
        with Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=_console(stderr=True), transient=True, disable=as_json) as bar:
            task = bar.add_task("import", total=data.n_messages)
            if and_index:  # the catch-up runs beside the writes (tiermem/ingest.py)
                from tiermem.ingest import import_and_index
                from tiermem.memory import load_in_background

                load_in_background(mem.embedder)  # the model loads while the first chunk is written
                report, embedded = import_and_index(mem, data, namespace=namespace,
                                                    progress=lambda n: bar.advance(task, n),
                                                    restore_erased=restore_erased)
            else:
                report = import_dataset(mem, data, namespace=namespace,
                                        progress=lambda n: bar.advance(task, n), restore_erased=restore_erased)
    extra = {"embedded": embedded, "pending": mem.cold.pending_embeddings()} if and_index else {}
    if as_json:
        _emit_json({"format": data.format, **report.to_json(), **extra})
        return
    click.echo(f"imported {report.appended} message(s) into {report.conversations} conversation(s) "
               f"({data.format}); {report.already_present} already present; {report.probes} probe(s)"
               + (f"; embedded {extra['embedded']} turn(s), {extra['pending']} pending" if and_index else ""))
    for b in report.bad_lines:
        click.echo(f"skipped {data.path}:{b.line}: {b.problem}", err=True)


# Characters JSON leaves raw with ensure_ascii=False that line-based readers (Python's
# str.splitlines, JavaScript before ES2019) take for line breaks: escaped in an export, so
# every record stays one line for any reader. Only ever inside a JSON string, where the
# escape reads back as the same character.
EXPORT_ESCAPES = str.maketrans({c: f"\\u{ord(c):04x}" for c in "\u0085\u2028\u2029"})


def export_json(line: dict[str, Any]) -> str:
    """One export record: readable UTF-8 (ensure_ascii=False), but no character a
    line-based reader would break the record at."""
    return json.dumps(line, ensure_ascii=False).translate(EXPORT_ESCAPES)


# an export's note of the rows it left out names this many positions of a conversation,
# then a count: a store damaged throughout is named, not listed
EXPORT_POSITIONS_SHOWN = 10


def _positions_text(positions: list[int]) -> str:
    shown = ", ".join(map(str, positions[:EXPORT_POSITIONS_SHOWN]))
    more = len(positions) - EXPORT_POSITIONS_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def _export_losses(report: Any) -> list[str]:
    """One line per conversation the export could not carry whole (`ExportReport`)."""
    by_conv: dict[str, tuple[list[int], list[int], dict[str, list[int]], list[tuple[int, str]]]] = {}
    for cid, pos in report.unreadable:
        by_conv.setdefault(cid, ([], [], {}, []))[0].append(pos)
    for cid, pos in report.dropped_retractions:
        by_conv.setdefault(cid, ([], [], {}, []))[1].append(pos)
    for cid, pos, how in report.hidden:
        by_conv.setdefault(cid, ([], [], {}, []))[2].setdefault(how, []).append(pos)
    for cid, pos, problem in report.refused:
        by_conv.setdefault(cid, ([], [], {}, []))[3].append((pos, problem))
    out = []
    for cid, (unreadable, dropped, hidden, refused) in by_conv.items():
        parts = []
        if unreadable:
            parts.append(f"stored row(s) at position(s) {_positions_text(unreadable)} cannot be read "
                         "(see the salvage warning) and are not exported")
        if refused:
            # stored before append checked what it checks today: the line as stored would
            # refuse the import of the whole file; the first one's error says why
            first, problem = refused[0]
            parts.append(f"stored row(s) at position(s) {_positions_text([p for p, _ in refused])} are refused "
                         f"by tiermem import as stored (position {first}: {problem}) and are not exported")
        if hidden:
            # hidden rows are still the log's: said apart, as their loss changes no context
            hows = ", ".join(f"{_positions_text(ps)} {how}" for how, ps in hidden.items())
            parts.append(f"of them, hidden from every context ({hows}) but still part of the history "
                         "(history() returns them)")
        if dropped:
            parts.append(f"the retraction(s) at position(s) {_positions_text(dropped)} hid one of them "
                         "and are not exported either")
        out.append(f"conversation {cid!r}: " + "; ".join(parts))
    for cid, problem in report.refused_ids:
        # created before max_id_chars was lowered (or under looser id rules): the import
        # would refuse every one of its lines, so the whole conversation is left out
        out.append(f"conversation {cid!r}: its id is refused by tiermem import ({problem}), "
                   "so none of its messages is exported")
    return out


@cli.command("export")
@click.argument("conversations", nargs=-1, type=CONVERSATION)
@click.option("--out", "-o", "out", type=OutputPath(allow_dash=True), default="-",
              show_default=True, help="The JSONL file to write (- for stdout).")
@click.option("--skip-unreadable", is_flag=True,
              help="Export without the stored rows that cannot be read or that import would refuse, "
                   "and without conversations whose id import would refuse (each named on stderr), "
                   "instead of failing.")
@pass_state
def export_command(state: CliState, conversations: tuple[str, ...], out: Path, skip_unreadable: bool) -> None:
    """Export conversations (all of the namespace's without ids) as JSONL that `tiermem import` reads back.

    It carries the messages (bodies, sessions, metadata, times; retractions and clears are
    messages too), not what tiermem keeps beside them: pins, checkpoints, facts and
    supersessions, fork ancestry, idempotency keys, plans, vectors (computed again
    after an import). `tiermem migrate-store` copies a store whole.

    A stored row that cannot be read (an older release's, skipped by history with a
    salvage warning) fails the export: each is named, -o writes nothing (a file there
    stays) and the exit status is 1, as a backup without it is not the store's log;
    --skip-unreadable exports the rest. Either way each retraction hides the message it
    hid (its position is the file's), and one that hid an unreadable row is left out.
    An unreadable row a later clear or a retraction hides fails the export too (history
    shows it: it is part of the log), and is named as hidden: --skip-unreadable then
    changes no context. So does a row read as stored that import would refuse (stored
    before append checked it: a reasoning item without an id, tool calls repeating an
    id), named with import's error: the file would not restore; and a conversation whose
    id import would refuse (longer than today's max_id_chars, lowered after it was
    created): named with import's error, left out whole with --skip-unreadable."""
    from tiermem.evals.conversations import ExportReport, export_lines

    mem = state.memory(hot=False)
    ids = list(conversations) or None
    if ids is not None:
        known = set(mem.conversations(state.namespace))
        missing = [c for c in ids if c not in known]
        if missing:
            raise CliError(f"no conversation {missing[0]!r} in namespace {state.namespace!r}")
    report = ExportReport()
    lines = (export_json(x) + "\n" for x in export_lines(mem, ids, namespace=state.namespace, report=report))

    def said_losses() -> None:
        """Name what was left out; fail unless that was asked for (inside `_replacing`,
        so the file is not written). A conversation erased meanwhile is rightly left out:
        said, not failed."""
        for cid in report.vanished:
            click.echo(f"note: conversation {cid!r} was erased or pruned after the export listed the namespace's "
                       "conversations; it is not exported", err=True)
        if report.complete:
            return
        for loss in _export_losses(report):
            click.echo(f"warning: {loss}", err=True)
        if not skip_unreadable:
            n = len(report.unreadable) + len(report.refused)
            where = ("the lines written lack them" if str(out) == "-"
                     else f"nothing was written to {out} (a file there stays as it was)")
            # a hidden row is refused too: a backup keeps the history, which shows it
            hidden = len(report.hidden)
            which = ("" if not hidden else
                     f" ({'all' if hidden == n else hidden} hidden by a clear or a retraction, "
                     "still part of the history)")
            # a retraction is dropped only with a row it hid: one of these is never empty
            lost = " and ".join(
                [f"{len(report.unreadable)} stored row(s) cannot be read"] * bool(report.unreadable)
                + [f"{len(report.refused)} stored row(s) would be refused by tiermem import "
                   "(stored before append checked them)"] * bool(report.refused)
                + [f"{len(report.refused_ids)} conversation(s) have an id tiermem import would refuse "
                   "(created under a higher max_id_chars or looser id rules)"] * bool(report.refused_ids))
            raise CliError(f"{lost}{which}, so the export is not the store's whole log: {where}; "
                           "pass --skip-unreadable to export the rest")

    if str(out) == "-":
        for line in lines:
            click.echo(line, nl=False)
        said_losses()
        return
    n = 0
    with _replacing(out) as fh:
        for line in lines:
            fh.write(line)
            n += 1
        said_losses()
    click.echo(f"exported {n} message(s) to {out}", err=True)


class _OutputFile:
    """A text file a command writes (`_replacing`): a failed write is OutputUnwritable
    naming the file (a full disk there is the output's, not the database's)."""

    def __init__(self, fh: IO[str], name: str) -> None:
        self._fh, self._name = fh, name

    def write(self, text: str) -> int:
        with _said_as_output(self._name):
            return self._fh.write(text)


@contextmanager
def _replacing(target: Path, *, mode: int | None = None) -> Iterator[_OutputFile]:
    """A text file that takes `target`'s place only once it is all written: written beside
    it under a temporary name, fsynced, then renamed over it (the directory fsynced too),
    so a failure part-way leaves the file that was there, and the temporary is removed
    (`export -o`, `config --export`). The file keeps `target`'s mode, or gets `mode` when
    given; a new one is private (0600, as everything tiermem creates: an export holds the
    conversations), and the temporary is 0600 from its creation (mkstemp), so no other
    user reads it meanwhile; a link is followed, so the link
    stays. A target that is no regular file (a FIFO, /dev/stderr) cannot be replaced so and
    is written in place, its mode untouched. What fails in writing it (a full disk, a
    refused permission) is OutputUnwritable naming `target`; an error of the block's own
    (the store's) passes as it is."""
    name = str(target)
    real = Path(os.path.realpath(target))
    try:
        st = real.stat()
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        with _said_as_output(name):
            fh = real.open("w", encoding="utf-8")
        try:
            yield _OutputFile(fh, name)
        except BaseException:
            with suppress(OSError):  # what is still buffered has nowhere to go
                fh.close()
            raise
        with _said_as_output(name):
            fh.close()
        return
    if mode is None:
        mode = stat.S_IMODE(st.st_mode) if st is not None else PRIVATE_FILE_MODE
    with _said_as_output(name):
        fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
    fh = os.fdopen(fd, "w", encoding="utf-8")
    try:
        yield _OutputFile(fh, name)
        with _said_as_output(name):
            fh.flush()
            os.fsync(fh.fileno())  # the data on disk before the name points at it
            fh.close()
            os.chmod(tmp, mode)
            os.replace(tmp, real)
    except BaseException:
        with suppress(OSError):  # a failed flush's data is dropped with the temporary
            fh.close()
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with _said_as_output(name):
        dir_fd = os.open(real.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself survives a crash
        finally:
            os.close(dir_fd)


def _tune_value_given(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """`tune --budgets` / `--grid` checked as they are parsed (the README's rule: a bad
    value on the command line is exit 2, before anything is opened): refused later, they
    were exit 1 after the run had begun ("tuning on the bundled demo ...")."""
    from tiermem.evals.tune import parse_budgets, parse_grid

    try:
        if param.name == "budgets":
            parse_budgets(value)
        else:
            parse_grid(value)
    except ValidationError as exc:
        raise click.BadParameter(exc.problem, ctx=ctx, param=param) from None
    return value


def _grid_problem(exc: pydantic.ValidationError, keys: Sequence[str], base: Path | None) -> str | None:
    """What of a candidate's refused Config (`exc`, pydantic's) the `tune --grid` values
    caused, in one line naming each setting as the grid gave it and its limit, with a "did
    you mean" for a name that is no setting; None when the base config (its file, env) is at
    fault: an error outside the grid's keys while the base alone does not load either."""
    import difflib

    import pydantic

    from tiermem.config import Config, setting_names

    errors = exc.errors()

    def grid_key(loc: str) -> str | None:
        # `retrieval.k` for an error at it or below it; `foo` for `foo.bar`'s unknown `foo`
        return next((k for k in keys if loc == k or loc.startswith(k + ".") or k.startswith(loc + ".")), None)

    def where(e: Any) -> str:
        return ".".join(str(p) for p in e["loc"])

    if not all(grid_key(where(e)) for e in errors):
        try:  # a combination the grid made (max_content_bytes above max_body_bytes) is the grid's
            Config.load(base)
        except pydantic.ValidationError:
            return None
    parts = []
    for e in errors:
        loc, msg = where(e), e["msg"]
        key = grid_key(loc)
        if e["type"] in ("extra_forbidden", "unknown_setting") and key is not None:
            if e["type"] == "extra_forbidden":
                msg = "no such setting"
            # the unknown name's last part among its siblings' (`retrieval.kk`: [retrieval]'s
            # keys), so that a shared prefix makes no match (`planner.layer_shares.bogus`)
            head, _, last = loc.rpartition(".")
            siblings = [n.rpartition(".")[2] for n in setting_names() if n.rpartition(".")[0] == head]
            close = difflib.get_close_matches(last, siblings, n=1)
            if close:
                msg += f" (did you mean {f'{head}.{close[0]}' if head else close[0]!r}?)"
        parts.append(f"{loc or 'grid'}: {msg}")
    return "; ".join(parts)


def _tunes_to_toml(cands: Sequence[Any], write_config: Path) -> None:
    """Refuse, before anything is run (exit 2, as the other up-front checks), a TOML
    --write-config that the best candidate might not be written to: a candidate whose
    config holds a null TOML cannot say (`toml_lost_nulls`: a null pricing.min_prefix_tokens,
    from the base or the grid). Found after the run, the whole tune ran, then the command
    exited 1 without printing its results."""
    from tiermem.config import TOML_NULL_PROBLEM, toml_lost_nulls

    for cand in cands:
        lost = toml_lost_nulls(cand.config.model_dump(mode="json"))
        if lost:
            hint = f"name a file ending in .json instead ({write_config.with_suffix('.json')})"
            grid = f" ({', '.join(f'{k}={v}' for k, v in cand.values.items())})" if cand.values else ""
            raise click.BadParameter(f"{write_config}: candidate {cand.name}{grid}: {lost[0]} "
                                     + TOML_NULL_PROBLEM.format(hint=hint) + "; nothing was run",
                                     param_hint="'--write-config'")


@cli.command("tune")
@click.argument("data", type=click.Path(path_type=Path, dir_okay=False, exists=True), required=False)
@click.option("--budgets", type=TEXT, default="500,1000,2000", show_default=True, callback=_tune_value_given,
              help="Context budgets, comma-separated.")
@click.option("--config", "base_config", type=ConfigFilePath(),
              default=None, help="Base TOML config of every candidate [default: the global --config].")
@click.option("--grid", "grid_specs", type=TEXT, multiple=True, metavar="KEY=V1,V2", callback=_tune_value_given,
              help="Values to try for a setting (dotted for nested ones: layer_shares.tail=0.05,0.2); "
              "repeat: every combination runs.")
@click.option("--conversation", "conversations", type=TEXT, multiple=True, help="Only this conversation id (repeat).")
@click.option("--min-recall", type=FiniteFloatRange(0, 1), default=None, help="Best: cheapest with this recall.")
@click.option("--max-cost-ratio", type=FiniteFloatRange(min=0), default=None,
              help="Best: only points billed at most this times full context.")
@click.option("--json-out", type=OutputPath(), default=None,
              help="Write the results (each candidate's effective config and figures) as JSON here.")
@click.option("--write-config", type=OutputPath(), default=None,
              help="Write the best candidate's whole config, as measured (base, env, grid values), here: TOML, "
                   "JSON for a name ending in .json (mode 0600).")
@click.option("--with-secrets", is_flag=True,
              help="With --write-config: keep the bearer tokens (auth_tokens, metrics_tokens) and URL passwords "
                   "(redis_url, cold_url, llm_base_url) of the config measured, from the base file or env "
                   "(TIERMEM_*); left out by default.")
@click.option("--plot", type=OutputPath(), default=None,
              help="Write a PNG of recall against billed cost here (matplotlib, the `eval` extra).")
@click.option("--no-hot", is_flag=True, help="Without the hot tier (eviction off); for debugging only.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead of a table.")
@pass_state
def tune_command(state: CliState, data: Path | None, budgets: str, base_config: Path | None, grid_specs: tuple[str, ...],
                 conversations: tuple[str, ...], min_recall: float | None, max_cost_ratio: float | None,
                 json_out: Path | None, write_config: Path | None, with_secrets: bool, plot: Path | None,
                 no_hot: bool, as_json: bool) -> None:
    """Recall and billed cost of candidate configs at several budgets, on a conversations file
    (without DATA: the bundled demo conversation)."""
    import pydantic

    from tiermem.config_sections import is_json
    from tiermem.evals.baselines import make_progress
    from tiermem.evals.conversations import FIX_HINT, read_conversations
    from tiermem.evals.tune import best_toml, candidates, parse_budgets, parse_grid, run_tune, table

    base = base_config or state.config_path
    grid = parse_grid(grid_specs)
    try:
        cands = candidates(base, grid)
    except ValidationError as exc:  # more candidates than MAX_CANDIDATES
        raise click.BadParameter(exc.problem, param_hint="'--grid'") from None
    except pydantic.ValidationError as exc:
        # a grid value or key the Config refuses is a usage error naming --grid (exit 2), as
        # a malformed spec is (`_tune_value_given`); the base config's own fault stays exit 1
        problem = _grid_problem(exc, list(grid), base)
        if problem is None:
            raise
        raise click.BadParameter(problem, param_hint="'--grid'") from None
    if write_config is not None and not is_json(write_config):
        _tunes_to_toml(cands, write_config)
    if plot is not None:
        try:
            import matplotlib  # noqa: F401  (checked before the run, used after it)
        except ImportError:
            raise CliError("--plot needs matplotlib: pip install 'tiermem[eval]'") from None
    # where the result is kept for the inspector: the data dir (--data-dir, else the
    # config's), read now with a candidate's grid values over the config, as every candidate
    # is. Read after the run without them, a setting of the environment that the grid
    # overrides (TIERMEM_RETRIEVAL_K=bad, --grid retrieval.k=3,5) failed the command at its
    # end, exit 1, --json-out written; anything else wrong there now fails before the run
    last_tune_path = state.config(**cands[0].overrides).last_tune_path
    cfg = cands[0].config
    if data is None:
        from tiermem.evals.demo_data import demo_dataset

        dataset = demo_dataset()
        if not as_json:
            click.echo(f"no data file given: tuning on the bundled demo conversation ({dataset.path.name})", err=True)
    else:
        # every candidate appends the whole file under its own limits (a grid may set them):
        # read under the strictest, so that a line any candidate would refuse is named now,
        # with import's error, not met midway through the run
        dataset = read_conversations(data, max_content_bytes=min(c.config.max_content_bytes for c in cands),
                                     max_metadata_bytes=min(c.config.max_metadata_bytes for c in cands),
                                     max_id_chars=min(c.config.max_id_chars for c in cands), hint=FIX_HINT)
    if conversations:
        unknown = set(conversations) - {c.conversation_id for c in dataset.conversations}
        if unknown:
            raise CliError(f"{dataset.path} has no conversation {sorted(unknown)[0]!r}; it has "
                           f"{[c.conversation_id for c in dataset.conversations][:10]}")
        dataset.conversations = [c for c in dataset.conversations if c.conversation_id in conversations]
    embedder = state.embedder
    if embedder is None and not any(k.startswith("embedding") for k in parse_grid(grid_specs)):
        from tiermem.tiers.embed_onnx import build_embedder

        # one model for every candidate (they share the embedding settings)
        embedder = build_embedder(cfg.embedding_model, runtime=cfg.embedding_runtime,
                                  batch_size=cfg.embedding_batch_size,
                                  query_precision=cfg.embedding_query_precision,
                                  cache_dir=cfg.embedding_cache_dir)
    with make_progress(not as_json) as progress:
        result = run_tune(dataset, parse_budgets(budgets), cands, base=base, embedder=embedder, hot=not no_hot,
                          min_recall=min_recall,
                          max_cost_ratio=max_cost_ratio, progress=progress)
    if json_out is not None:
        with _said_as_output(str(json_out)):
            json_out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    _keep_last_tune(last_tune_path, result)
    if write_config is not None:
        measured = next(c.config for c in cands if c.name == result["best"]["candidate"]) if result["best"] else None
        text, left_out = best_toml(result, base, config=measured, with_secrets=with_secrets,
                                   as_json=is_json(write_config))
        # 0600 and replaced whole, as config --export writes: it may hold what the base holds
        with _replacing(write_config, mode=PRIVATE_FILE_MODE) as fh:
            fh.write(text)
        if left_out:
            click.echo(f"{write_config}: left out {', '.join(left_out)} (secrets; --with-secrets keeps them)",
                       err=True)
    if plot is not None:
        from tiermem.evals.plots import tune_recall_vs_cost

        tune_recall_vs_cost(result, plot)
    if as_json:
        _emit_json(result)
        return
    from rich.console import Console

    con = _console()
    if not con.is_terminal:
        con = Console(width=160, highlight=False, soft_wrap=False)  # piped: do not squeeze the table
    con.print(table(result))
    best = result["best"]
    agree = result["reply_recall_vs_evidence_recall"]
    if agree["spearman"] is not None:
        click.echo(f"reply recall (no labels) vs evidence recall: Spearman {agree['spearman']} over "
                   f"{agree['points']} points")
    click.echo("best (*): " + ("none meets the constraints" if best is None else
                              f"{best['candidate']} at {best['budget']} tokens ({best['rule']})"))


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="tiermem")


if __name__ == "__main__":  # pragma: no cover
    main()
