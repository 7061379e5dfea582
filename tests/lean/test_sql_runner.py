"""Lean loading on the SQL session services, through a real google-adk
`Runner`: `SqliteSessionService`, `DatabaseSessionService` on SQLite
(aiosqlite) and on PostgreSQL (asyncpg).

The e2e bench's app (`_tooling/e2e_app.py`: a scripted model, a tool, a
summarizer) runs a conversation deterministically (ids from a counter, a
stepped clock) twice, each on a store of its own: with google-adk's own code
(every load whole) and after `install(loading="lean")`. Under each
compaction strategy alone and both together:

- every model request, every event the Runner yields and the stored session
  are the same;
- the lean side's loads are lean (fewer events than stored, once compaction
  has run) and Python decodes only the rows a load returns (the row memo's
  entry point, `_native.stored_event`, is called once per returned event);
- a session plain google-adk wrote goes on the same, lean and whole;
- a second writer process appends through google-adk's own `append_event`
  between turns, one event stamped after every row and one stamped before
  rows the lean side has already read, in a gap no compaction covers: the
  next turn's requests are the same on both sides, and they show both.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import adk_fastcompact
import pytest
from adk_fastcompact import _lean, _lean_sql, _native
from adk_fastcompact._tooling import e2e_app
from google.adk.apps.app import EventsCompactionConfig
from google.adk.platform import uuid as platform_uuid
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService

from support import postgres
from support.runner_harness import assert_same, deterministic, stepped_clock

pytestmark = [
    pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning"),
]

#: Compaction settings, each strategy alone and both together (the token
#: threshold low enough for this conversation's prompts to cross it).
STRATEGIES: dict[str, dict[str, int]] = {
    "window": {"compaction_interval": 3, "overlap_size": 1},
    "threshold": {"token_threshold": 2_500, "event_retention_size": 6},
    "both": {
        "compaction_interval": 3,
        "overlap_size": 1,
        "token_threshold": 2_500,
        "event_retention_size": 6,
    },
}
TURNS = 24


@dataclass
class Run:
    """What one side of a conversation shows."""

    requests: list[str] = field(default_factory=list)
    yielded: list[str] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)
    #: Each `get_session` that returned a session: (events returned, rows
    #: handed to the row memo meanwhile, rows stored).
    loads: list[tuple[int, int, int]] = field(default_factory=list)


def _counting_loads(service: BaseSessionService, run: Run) -> None:
    """Records in `run.loads` what each `get_session` of `service` returned
    and how many rows Python decoded for it."""
    get_session = service.get_session
    decoded = [0]
    stored_event = _native.stored_event

    def counted(*args: Any) -> Any:
        decoded[0] += 1
        return stored_event(*args)

    async def recorded(**kwargs: Any) -> Any:
        before = decoded[0]
        original, _native.stored_event = _native.stored_event, counted  # type: ignore[assignment]
        try:
            session = await get_session(**kwargs)
        finally:
            _native.stored_event = original  # type: ignore[assignment]
        if session is not None:
            rows = await _stored_rows(service, kwargs)
            run.loads.append((len(session.events), decoded[0] - before, rows))
        return session

    service.get_session = recorded  # type: ignore[method-assign]


async def _stored_rows(service: BaseSessionService, key: dict[str, Any]) -> int:
    """How many rows the session has (by google-adk's own whole load)."""
    method = type(service).get_session
    whole = await method(
        service,
        app_name=key["app_name"],
        user_id=key["user_id"],
        session_id=key["session_id"],
    )
    return len(whole.events) if whole is not None else 0


def make_service(kind: str, where: str) -> BaseSessionService:
    if kind == "sqlite":
        return SqliteSessionService(where)
    if kind == "database":
        return DatabaseSessionService(f"sqlite+aiosqlite:///{where}")
    assert kind == "postgres"
    return DatabaseSessionService(where)


async def converse(
    service: BaseSessionService,
    strategy: str,
    turns: int = TURNS,
    between: Callable[[int], Awaitable[None]] | None = None,
    first: int = 0,
) -> Run:
    """The app's conversation on `service` from its turn `first` (the
    session made when 0), `between(turn)` awaited before each turn."""
    run = Run()
    _counting_loads(service, run)
    app, llm = e2e_app.build_app(0)
    summarizer = app.events_compaction_config.summarizer  # type: ignore[union-attr]
    config = EventsCompactionConfig(summarizer=summarizer, **STRATEGIES[strategy])
    app = app.model_copy(update={"events_compaction_config": config})
    runner = Runner(app=app, session_service=service)
    if first == 0:
        await service.create_session(
            app_name=e2e_app.APP_NAME, user_id=e2e_app.USER_ID, session_id=e2e_app.SESSION_ID
        )
    script = e2e_app.Script(0)
    for _ in range(first):
        script.turn()
    for number in range(first, first + turns):
        if between is not None:
            await between(number)
        turn = script.turn()
        llm.play(turn)
        async for event in runner.run_async(
            user_id=e2e_app.USER_ID, session_id=e2e_app.SESSION_ID, new_message=turn.message
        ):
            run.yielded.append(event.model_dump_json())
    run.requests = [e2e_app.snapshot_request(r) for r in llm.take_requests()]
    whole = await type(service).get_session(
        service,
        app_name=e2e_app.APP_NAME,
        user_id=e2e_app.USER_ID,
        session_id=e2e_app.SESSION_ID,
    )
    assert whole is not None
    run.stored = [e.model_dump_json() for e in whole.events]
    if isinstance(service, DatabaseSessionService):
        await service.close()
    return run


def run_side(
    kind: str,
    where: str,
    strategy: str,
    *,
    lean: bool,
    between: Callable[[int], Awaitable[None]] | None = None,
    turns: int = TURNS,
    first: int = 0,
) -> Run:
    if lean:
        assert adk_fastcompact.install(loading="lean") is True
    else:
        adk_fastcompact.uninstall()
    # A later part of a conversation: a clock after every stored stamp, ids
    # of its own.
    clock = stepped_clock(0.25) if first == 0 else lambda: 2_000_000.0 + next(ticks) * 0.25
    ticks = itertools.count()
    try:
        with deterministic(clock), _ids(f"part{first}-" if first else None):
            return asyncio.run(converse(make_service(kind, where), strategy, turns, between, first))
    finally:
        adk_fastcompact.uninstall()


@contextmanager
def _ids(prefix: str | None) -> Iterator[None]:
    """google-adk's ids under `prefix` inside (`deterministic`'s when None)."""
    if prefix is None:
        yield
        return
    serial = itertools.count()
    platform_uuid.set_id_provider(lambda: f"{prefix}{next(serial):06d}")
    yield


def assert_same_runs(plain: Run, lean: Run) -> None:
    assert plain.requests, "no model request"
    assert_same("requests", plain.requests, lean.requests)
    assert_same("yielded events", plain.yielded, lean.yielded)
    assert_same("stored events", plain.stored, lean.stored)
    compacted = [e for e in plain.stored if '"compaction":{' in e]
    assert len(compacted) >= 2, "the conversation never compacted"


def assert_lean_loads(lean: Run) -> None:
    """Every load decoded only what it returned, and loads after compaction
    returned fewer events than the store holds."""
    assert lean.loads
    for returned, decoded, _stored in lean.loads:
        assert decoded == returned
    assert any(returned < stored for returned, _, stored in lean.loads)
    last_returned, _, last_stored = lean.loads[-1]
    assert last_returned < last_stored


@pytest.fixture
def stores(tmp_path: Path) -> tuple[str, str]:
    """Two SQLite files: google-adk's side's store and the lean side's."""
    return str(tmp_path / "plain.db"), str(tmp_path / "lean.db")


@pytest.fixture
def two_postgres(postgres_url: str) -> Iterator[tuple[str, str]]:
    with postgres.database(postgres_url) as plain, postgres.database(postgres_url) as lean:
        yield plain, lean


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("kind", ["sqlite", "database"])
def test_lean_turns_equal_whole_loads_on_sqlite_files(
    kind: str, strategy: str, stores: tuple[str, str]
) -> None:
    plain_db, lean_db = stores
    _lean.loading_stats(reset=True)
    plain = run_side(kind, plain_db, strategy, lean=False)
    assert _lean.loading_stats(reset=True) == {}
    _lean_sql.listings.clear()
    lean = run_side(kind, lean_db, strategy, lean=True)
    assert _lean.loading_stats(reset=True) == {"lean": TURNS}
    # The session's first two loads list it whole (the first finds it
    # empty); each later one lists only the rows from the last one's newest
    # stamp on.
    assert _lean_sql.listings == {"whole": 2, "since the last load": TURNS - 2}
    assert_same_runs(plain, lean)
    assert_lean_loads(lean)


@pytest.mark.postgres
@pytest.mark.parametrize("strategy", ["both"])
def test_lean_turns_equal_whole_loads_on_postgres(
    strategy: str, two_postgres: tuple[str, str]
) -> None:
    plain_db, lean_db = two_postgres
    _lean.loading_stats(reset=True)
    plain = run_side("postgres", plain_db, strategy, lean=False)
    _lean_sql.listings.clear()
    lean = run_side("postgres", lean_db, strategy, lean=True)
    assert _lean.loading_stats(reset=True) == {"lean": TURNS}
    assert _lean_sql.listings == {"whole": 2, "since the last load": TURNS - 2}
    assert_same_runs(plain, lean)
    assert_lean_loads(lean)


@pytest.mark.parametrize("kind", ["sqlite", "database"])
def test_a_store_written_by_plain_google_adk_goes_on_lean_as_whole(
    kind: str, stores: tuple[str, str]
) -> None:
    """A session google-adk wrote without the accelerator, then continued by
    google-adk and, on a copy, with lean loading."""
    plain_db, lean_db = stores
    before = run_side(kind, plain_db, "both", lean=False, turns=12)
    assert len([e for e in before.stored if '"compaction":{' in e]) >= 2
    shutil.copyfile(plain_db, lean_db)
    plain = run_side(kind, plain_db, "both", lean=False, turns=8, first=12)
    _lean.loading_stats(reset=True)
    lean = run_side(kind, lean_db, "both", lean=True, turns=8, first=12)
    assert _lean.loading_stats(reset=True) == {"lean": 8}
    assert_same_runs(plain, lean)
    assert_lean_loads(lean)


# -- a second writer ------------------------------------------------------------------

#: The other process: loads the session whole through google-adk and appends
#: two user events through google-adk's own `append_event`: one stamped after
#: every stored row, and one stamped between the two oldest rows after every
#: compaction's end (before rows earlier lean loads listed, in a gap no
#: compaction covers). Exits 3 when the session has no such gap.
WRITER = r"""
import asyncio, sys, warnings
warnings.simplefilter("ignore")
from google.adk.events.event import Event
from google.genai import types
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.adk.sessions.database_session_service import DatabaseSessionService

kind, where, app, user, sid, tag = sys.argv[1:]

def note(text, stamp, suffix):
    return Event(
        id=f"writer-{tag}-{suffix}", invocation_id=f"writer-{tag}", author="user",
        timestamp=stamp, content=types.UserContent(parts=[types.Part(text=text)]),
    )

async def main():
    if kind == "sqlite":
        service = SqliteSessionService(where)
    elif kind == "database":
        service = DatabaseSessionService(f"sqlite+aiosqlite:///{where}")
    else:
        service = DatabaseSessionService(where)
    session = await service.get_session(app_name=app, user_id=user, session_id=sid)
    ends = [e.actions.compaction.end_timestamp for e in session.events if e.actions.compaction]
    end = max(ends, default=0.0)
    raw = sorted(e.timestamp for e in session.events
                 if not e.actions.compaction and e.timestamp > end)
    if len(raw) < 2:
        sys.exit(3)
    late = raw[-1] + 0.125
    # Between the two oldest raw rows: before rows earlier loads listed.
    early = (raw[0] + raw[1]) / 2
    await service.append_event(
        session, note(f"late note {tag} from another replica", late, "late"))
    await service.append_event(
        session, note(f"early note {tag} from another replica", early, "early"))
    if kind != "sqlite":
        await service.close()

asyncio.run(main())
"""

#: Turns before which the other process writes (none right after a sliding
#: window compaction, which leaves no raw gap).
WRITES = (5, 8, 14)


def writer(kind: str, where: str) -> Callable[[int], Awaitable[None]]:
    async def between(turn: int) -> None:
        if turn not in WRITES:
            return
        done = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            WRITER,
            kind,
            where,
            e2e_app.APP_NAME,
            e2e_app.USER_ID,
            e2e_app.SESSION_ID,
            str(turn),
        )
        assert await done.wait() == 0

    return between


def _writers_shown(run: Run, tag: int) -> bool:
    """Whether both of the writer's notes before turn `tag` are in a
    request made after it."""
    return any(f"late note {tag} from" in r and f"early note {tag} from" in r for r in run.requests)


@pytest.mark.parametrize("kind", ["sqlite", "database"])
def test_a_second_writer_between_turns_is_seen_by_the_next_lean_turn(
    kind: str, stores: tuple[str, str]
) -> None:
    plain_db, lean_db = stores
    plain = run_side(kind, plain_db, "window", lean=False, between=writer(kind, plain_db))
    _lean.loading_stats(reset=True)
    _lean_sql.listings.clear()
    lean = run_side(kind, lean_db, "window", lean=True, between=writer(kind, lean_db))
    assert _lean.loading_stats(reset=True) == {"lean": TURNS}
    # The early note (stamped before rows the last load listed) makes the
    # next load list the session whole.
    whole = 2 + len(WRITES)
    assert _lean_sql.listings == {"whole": whole, "since the last load": TURNS - whole}
    assert_same_runs(plain, lean)
    assert_lean_loads(lean)
    for tag in WRITES:
        assert _writers_shown(plain, tag)
        assert _writers_shown(lean, tag)
    stamps = [json.loads(e)["timestamp"] for e in lean.stored]
    assert stamps == sorted(stamps)


@pytest.mark.postgres
def test_a_second_writer_between_turns_on_postgres(two_postgres: tuple[str, str]) -> None:
    plain_db, lean_db = two_postgres
    plain_writes, lean_writes = writer("postgres", plain_db), writer("postgres", lean_db)
    plain = run_side("postgres", plain_db, "window", lean=False, between=plain_writes)
    _lean_sql.listings.clear()
    lean = run_side("postgres", lean_db, "window", lean=True, between=lean_writes)
    whole = 2 + len(WRITES)
    assert _lean_sql.listings == {"whole": whole, "since the last load": TURNS - whole}
    assert_same_runs(plain, lean)
    assert_lean_loads(lean)
    for tag in WRITES:
        assert _writers_shown(lean, tag)
