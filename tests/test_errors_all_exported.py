"""Every error a caller can meet is importable from `tiermem.errors`, the public home of
tiermem's exceptions, as the very class the library raises.

`IdempotencyKeyReused` (an append's key reused for another request), `HotOutOfMemory`,
`HotReadOnly` and `HotAccessDenied` (Redis refusing the hot tier) were defined in
`tiers.errors` but not exported, and `ServiceConfigError` (`create_app` refusing a
configuration) was defined in the service's auth module, not with the others: a caller had
to import them from internal modules. The lists are read from the code, not written out,
so a class added later without its export fails here: every exception class of
`tiers.errors` is exported but the internal ones below, and every exception class defined
anywhere else in the package is one of the internal ones below.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder

import tiermem
import tiermem.errors
import tiermem.tiers.errors
from tiermem import Config, Memory

# classes of tiers.errors no call raises to a caller, each with why
INTERNAL_IN_ERRORS = {
    "CatchUpStopped",  # ends an embedding catch-up from its own hook; the hook's owner catches it
    # a pin's script asked to wait for another's (tiers.hot flag w); tiermem.hotlink waits and
    # tries again, its last try never asking, so it never leaves the hot link
    "PinChangeGap",
    # a command's output that cannot be written (tiermem.cli): the CLI says it as `error: ...`
    "OutputUnwritable",
}

# exception classes defined outside tiers.errors, none of which reaches a library caller
INTERNAL_ELSEWHERE = {
    # the CLI's one-line error: click prints it and exits 1
    "tiermem.cli.CliError",
    # MCP's ToolError: the MCP server answers it to the model as the tool's error result
    "tiermem.adapters.mcp_server.MemoryToolError",
    # a turn row a read cannot use: that read salvages the row
    "tiermem.tiers.dialect.UnusableTurn",
    # rolls back an append whose key another transaction recorded first; never leaves the store
    "tiermem.tiers.postgres._KeyTaken",
    # a summarizer answer past its limit or encoded: the request turns it into a SummarizerError
    "tiermem.consolidation.summarize._AnswerTooLarge",
    "tiermem.consolidation.summarize._AnswerEncoded",
    # a view's lease taken by another: the refresh stops
    "tiermem.consolidation.views._LeaseLost",
    # the inspector's page answered early (a login redirect, an error page)
    "tiermem.inspector.routes._Answer",
    # a refused request body: the service answers it as a 4xx
    "tiermem.service.guard._BodyProblem",
    # a LangGraph sync's snapshot copy past its size: the field is kept as a digest instead
    "tiermem.adapters._langchain_sync._TooLarge",
}


def _exceptions_of(module: object) -> dict[str, type[BaseException]]:
    """The exception classes `module` defines itself (not those it imports)."""
    return {name: obj for name, obj in vars(module).items()
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__}


def test_every_public_class_of_the_errors_module_is_exported() -> None:
    defined = _exceptions_of(tiermem.tiers.errors)
    assert defined.keys() >= INTERNAL_IN_ERRORS  # the list names no class that is gone
    public = defined.keys() - INTERNAL_IN_ERRORS
    missing = sorted(public - set(tiermem.errors.__all__))
    assert missing == [], f"not in tiermem.errors.__all__: {missing}"
    for name in public:
        assert getattr(tiermem.errors, name) is defined[name]  # the one class, not a copy
        assert issubclass(defined[name], tiermem.errors.TiermemError), name


def test_the_public_module_exports_nothing_else() -> None:
    exported = set(tiermem.errors.__all__)
    assert len(exported) == len(tiermem.errors.__all__)  # each name once
    assert exported == _exceptions_of(tiermem.tiers.errors).keys() - INTERNAL_IN_ERRORS


def test_every_other_exception_class_of_the_package_is_internal() -> None:
    elsewhere: set[str] = set()
    for module_info in pkgutil.walk_packages(tiermem.__path__, "tiermem."):
        module = importlib.import_module(module_info.name)
        if module is tiermem.tiers.errors:
            continue
        elsewhere |= {f"{module.__name__}.{name}" for name in _exceptions_of(module)}
    assert elsewhere == INTERNAL_ELSEWHERE, (
        f"define these in tiers.errors (exported by tiermem.errors), or list them here with why: "
        f"{sorted(elsewhere - INTERNAL_ELSEWHERE)}; gone: {sorted(INTERNAL_ELSEWHERE - elsewhere)}")


def test_the_service_config_error_is_the_one_class_wherever_it_is_imported_from() -> None:
    import tiermem.service
    import tiermem.service.auth

    assert tiermem.service.ServiceConfigError is tiermem.errors.ServiceConfigError
    assert tiermem.service.auth.ServiceConfigError is tiermem.errors.ServiceConfigError
    assert issubclass(tiermem.errors.ServiceConfigError, ValueError)  # caught as before


def test_a_reused_key_is_caught_as_the_public_class(tmp_path: Path) -> None:
    from tiermem.errors import IdempotencyKeyReused

    with Memory(Config(data_dir=tmp_path / "data"), embedder=HashEmbedder(), hot=False,
                background_indexing=False) as mem:
        mem.append("c", {"role": "user", "content": "hi"}, idempotency_key="k-1")
        with pytest.raises(IdempotencyKeyReused) as caught:
            mem.append("c", {"role": "user", "content": "another request"}, idempotency_key="k-1")
        assert (caught.value.key, caught.value.first, caught.value.last) == ("k-1", 0, 0)
        assert len(mem.history("c")) == 1  # nothing written
