"""Shared test configuration.

Hypothesis runs derandomized and without an example database, so a test run
is a pure function of the code: the same examples every time, on every
machine. `HYPOTHESIS_PROFILE=dev` explores more (random, still no database);
`HYPOTHESIS_PROFILE=quick` tries fewer examples (the other families' quick
parity runs, `tests/families/run.py parity --quick`).

`@pytest.mark.adk_2_13(what)` marks a test that needs `what`, something only
google-adk's 2.13 family has (exact mode, which `install(mode="exact")`
refuses on any other family; the audit's replay of 2.13's rules): it is
skipped, naming `what`, the installed release and its family, where the
installed google-adk's profile (`compare.PROFILE`) is another family's.

With `-n 2 --dist loadgroup` (tests/run.sh) the tests go to the workers one
by one, but for the files of `WHOLE_FILES`, which one worker runs whole.

`@pytest.mark.postgres` marks a test that runs on a PostgreSQL server (the
`postgres_database` fixture). The server is the one `tests/support/postgres.py`
started around the run (tests/run.sh: `ADK_FASTCOMPACT_POSTGRES_URL`), else
one each pytest process starts for itself through it. When none can be
had, the test skips saying why, and fails in CI (`CI=true`).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import adk_fastcompact
import pytest
from adk_fastcompact import _families, _native
from hypothesis import HealthCheck, settings
from pydantic import BaseModel

from support import postgres
from support.compare import NATIVE_OPS, PROFILE

_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=_SUPPRESSED,
)
settings.register_profile(
    "dev",
    derandomize=False,
    database=None,
    deadline=None,
    suppress_health_check=_SUPPRESSED,
)
settings.register_profile("quick", parent=settings.get_profile("ci"), max_examples=15)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


#: Files one pytest-xdist worker runs whole: test_window's totals tests read
#: what the blocks before them counted in that process, and test_audit's
#: module fixture writes its stores once.
WHOLE_FILES = ("tests/parity/test_window.py", "tests/audit/test_audit.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`, grouping by `WHOLE_FILES`. pytest-xdist's own
    loadgroup reads `xdist_group` marks by renaming `item._nodeid`, which
    pytest 9 no longer reads: it groups nothing (3.8.0, the newest)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WholeFiles(LoadScopeScheduling):
        # A scope is one test, or a whole file of WHOLE_FILES; the largest
        # scopes are handed out first (xdist's `loadscopereorder`).
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path in WHOLE_FILES else nodeid

    return WholeFiles(config, log)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "adk_2_13(what): needs `what`, which only google-adk's 2.13 family has;"
        " skipped on other families",
    )
    config.addinivalue_line(
        "markers",
        "postgres: runs on a PostgreSQL server (tests/support/postgres.py); skipped where none"
        " can be started, failed in CI",
    )


def _skip_without_2_13(what: str) -> pytest.MarkDecorator:
    """The skip of a test that needs `what`, on another family than 2.13."""
    found = _families.recognise().family
    family = found.label if found is not None else "no recorded family"
    return pytest.mark.skip(
        reason=(
            f"{what}: google-adk {_families.EXACT_PROFILE} family only;"
            f" google-adk {_families.adk_version()} is {family} (profile {PROFILE.name})"
        )
    )


@pytest.fixture(autouse=True)
def _never_leave_installed() -> Iterator[None]:
    """No test sees, or leaves behind, a patched google-adk."""
    adk_fastcompact.uninstall()
    yield
    adk_fastcompact.uninstall()


# -- PostgreSQL -----------------------------------------------------------------------


def _no_postgres(why: object) -> NoReturn:
    message = f"no PostgreSQL server: {why}"
    if postgres.in_ci():
        pytest.fail(f"{message} (CI=true: the PostgreSQL tests must run)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """SQLAlchemy URL (asyncpg) of a database on a PostgreSQL server: the one
    `tests/support/postgres.py` runs the tests under, else one started here for this
    process (one per pytest-xdist worker), stopped at the end."""
    url = os.environ.get(postgres.ENV)
    if url:
        yield url
        return
    why = os.environ.get(postgres.UNAVAILABLE_ENV)
    if why:
        _no_postgres(why)
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(postgres.server())
        except postgres.Unavailable as error:
            _no_postgres(error)
        yield server.url


@pytest.fixture
def postgres_database(postgres_url: str) -> Iterator[str]:
    """URL of a new empty database for this test alone, dropped after it."""
    with postgres.database(postgres_url) as url:
        yield url


# -- the index states ----------------------------------------------------------------

INDEX_MODES = ("off", "cold", "warm", "copies", "invalidated")
"""States of the per-session index a differential test runs under:

- off: no index (every call reads its events directly);
- cold: the index is dropped before every call;
- warm: every list a call receives was read just before (same objects),
  and a window selection was made just before with the same arguments (so
  it is answered from the remembered one);
- copies: deep copies of those lists were read just before, so the call
  meets new objects of known events (what a new invocation meets);
- invalidated: as warm, with the index dropped before every other call.
"""


# The unwrapped functions (the fixture wraps the module's attributes).
_ORIGINAL = {name: getattr(_native, name) for name in NATIVE_OPS}


# The window selections, remembered per session for the same arguments.
_SELECTIONS = ("sliding_window", "token_threshold_selection")


def _read_ahead(lists: list[list[Any]], again: Callable[[], Any] | None = None) -> None:
    """Reads `lists` through the index on another thread (its declines are
    counted there, not on the test's thread), then makes the call `again`
    there too."""
    rewinds = _ORIGINAL["apply_rewinds"]
    ranges = _ORIGINAL["get_compaction_ranges"]
    recover = _ORIGINAL["recover_compacted_function_calls"]

    def run() -> None:
        for events in lists:
            rewinds(events)
            ranges(events)
            recover(events, events)
        if again is not None:
            again()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()


def _copies(events: list[Any]) -> list[Any]:
    """New objects of the same events, as a new invocation meets them: the
    copies an installed `InMemorySessionService.get_session` makes (the
    native copier of `deep_copy_model`, 3-4x faster here than
    `copy.deepcopy` of pydantic's models, whose copies it equals:
    tests/turn/test_session_copy.py), `copy.deepcopy` for what is not a
    model."""
    memo: dict[int, Any] = {}
    return [
        _native.deep_copy_model(event, memo)
        if isinstance(event, BaseModel)
        else copy.deepcopy(event, memo)
        for event in events
    ]


@pytest.fixture(params=INDEX_MODES)
def index_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Runs the test with the per-session index in one of `INDEX_MODES`."""
    mode: str = request.param
    if mode == "off":
        _native.index_configure(enabled=False)
        try:
            yield mode
        finally:
            _native.index_configure(enabled=True)
        return
    calls = itertools.count()

    def prepare(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        lists = [a for a in args if type(a) is list]
        if mode == "cold":
            _native.index_clear()
        elif mode == "warm":
            again = None
            if name in _SELECTIONS:
                original = _ORIGINAL[name]
                again = lambda: original(*args, **kwargs)  # noqa: E731
            _read_ahead(lists, again)
        elif mode == "copies":
            try:
                copies = [_copies(events) for events in lists]
            except Exception:  # an object deepcopy cannot take: no read-ahead
                return
            _read_ahead(copies)
        elif mode == "invalidated":
            _read_ahead(lists)
            if next(calls) % 2:
                _native.index_clear()

    for name in NATIVE_OPS:
        original = _ORIGINAL[name]

        def wrapper(
            *args: Any, __original: Any = original, __name: str = name, **kwargs: Any
        ) -> Any:
            prepare(__name, args, kwargs)
            return __original(*args, **kwargs)

        monkeypatch.setattr(_native, name, wrapper)
    yield mode


_SAMPLED_MODES = ("warm", "copies", "invalidated")
_SAMPLE_EVERY = 4
#: Every how many seeded blocks run in the other modes (off, cold): all of
#: them, but where `ADK_FASTCOMPACT_SEEDED_EVERY` says otherwise (the
#: family runs of CI, tests/families/run.py, run every fourth: their
#: releases' decisions are checked on five blocks of seeded sessions, the
#: hypothesis tests and a Runner conversation, while 2.13 runs all twenty).
_SEEDED_EVERY = max(1, int(os.environ.get("ADK_FASTCOMPACT_SEEDED_EVERY", "1")))


#: The tests that take longest (`--durations`, google-adk 2.13.0): each a
#: minute or more of a run of eight, most of it google-adk's own code on
#: long sessions. With `--dist loadgroup` they are handed out first, longest
#: first, after `WHOLE_FILES` (xdist hands out the largest scopes first):
#: handed out in file order, the longest came last and one worker ran them
#: alone while the other was done.
SLOWEST = (
    "tests/e2e/test_runner_e2e.py::test_runner_conversation_is_identical_with_install[both-memory]",
    "tests/e2e/test_runner_e2e.py::test_runner_conversation_is_identical_with_install[token-memory]",
    "tests/e2e/test_runner_e2e.py::test_runner_conversation_is_identical_with_install[token-sqlite]",
    "tests/e2e/test_postgres.py::test_runner_conversation_on_postgres_is_identical_with_install",
    "tests/exact/test_exact_mode.py::test_both_strategies_stay_bounded_over_300_turns",
    "tests/e2e/test_runner_e2e.py::test_runner_conversation_is_identical_with_install",
    "tests/install/test_install.py::test_the_bench_runs_on_the_installed_family",
    "tests/index/test_field_reads.py::",
    "tests/install/test_install.py::test_every_adk_module_in_a_fresh_interpreter",
    "tests/exact/test_exact_mode.py::test_tail_retention_near_the_threshold",
    "tests/parity/test_differential.py::test_seeded_sessions[copies-",
)


def _slowest_first(item: pytest.Item) -> int:
    """Where `item` goes in the hand-out order: its place in `SLOWEST`, or after."""
    return next(
        (k for k, prefix in enumerate(SLOWEST) if item.nodeid.startswith(prefix)), len(SLOWEST)
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Seeded blocks run in full with the index off and cold (every
    `_SEEDED_EVERY`th); in the other index modes every fourth block runs
    (the hypothesis tests run in all).
    `adk_2_13` tests are skipped on other families. Under `--dist
    loadgroup`, `SLOWEST` go first (else every test keeps its place)."""
    keep, drop = [], []
    for item in items:
        needs_2_13 = item.get_closest_marker("adk_2_13")
        if needs_2_13 is not None and PROFILE.name != _families.EXACT_PROFILE:
            item.add_marker(_skip_without_2_13(*needs_2_13.args))
        params = getattr(getattr(item, "callspec", None), "params", {})
        every = _SAMPLE_EVERY if params.get("index_mode") in _SAMPLED_MODES else _SEEDED_EVERY
        block = params.get("block")
        if isinstance(block, int) and block % every:
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    if config.getvalue("dist") == "loadgroup":
        items.sort(key=_slowest_first)  # stable: the rest keep their order
