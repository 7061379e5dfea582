"""Bad input under a SQL lean load: google-adk's own answer or exception,
or a counted and logged whole load; never a partial session.

Each case runs the same `get_session` twice on the same store: with
google-adk's own code (not installed) and with a filled `LeanSessionConfig`
after `install(loading="lean")`. The stores are written through google-adk's
own `append_event` (a compaction covering the older half, so that lean
loads are lean), then damaged by SQL:

- a stored record that does not parse (not JSON): google-adk's exception,
  after a whole load counted as "a stored row does not parse";
- a row that parses but does not validate, among those the turn reads:
  google-adk's own `ValidationError`, from google-adk's decoder;
- the session deleted between google-adk's read of its row and the lean
  load's queries (`SqliteSessionService`): google-adk's `None`, after a whole
  load counted as "the session changed between two queries"; deleted before
  `DatabaseSessionService`'s event query: google-adk's own answer under the
  same deletion (the session row read, no events);
- `DatabaseSessionService` on a database of the legacy pickled schema (v0):
  the whole session, counted as "legacy (pickled) schema".
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import adk_fastcompact
import pytest
from adk_fastcompact import _lean, _lean_sql
from google.adk.apps.app import EventsCompactionConfig
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.schemas import v1
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types
from sqlalchemy import event as sa_event
from sqlalchemy.orm import Session as OrmSession

pytestmark = [
    pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

APP, USER, SESSION = "app", "user", "s1"
KINDS = ("sqlite", "database")


def _service(kind: str, db: Path) -> BaseSessionService:
    if kind == "sqlite":
        return SqliteSessionService(str(db))
    return DatabaseSessionService(f"sqlite+aiosqlite:///{db}")


async def _close(service: BaseSessionService) -> None:
    if isinstance(service, DatabaseSessionService):
        await service.close()


def _text(role: str, text: str) -> types.Content:
    return types.Content(role=role, parts=[types.Part(text=text)])


async def _write(service: BaseSessionService, turns: int = 8) -> None:
    """A session of `turns` user/model exchanges, the first half summarized."""
    session = await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    stamp = 1000.0
    for turn in range(turns):
        for author, role in (("user", "user"), ("agent", "model")):
            stamp += 1.0
            await service.append_event(
                session,
                Event(
                    id=f"e{turn}-{author}",
                    invocation_id=f"inv-{turn}",
                    author=author,
                    timestamp=stamp,
                    content=_text(role, f"{author} says {turn}"),
                ),
            )
        if turn == turns // 2:
            stamp += 1.0
            compaction = EventCompaction(
                start_timestamp=1001.0,
                end_timestamp=stamp - 1.0,
                compacted_content=_text("model", "summary"),
            )
            await service.append_event(
                session,
                Event(
                    id=f"c{turn}",
                    invocation_id=f"inv-{turn}",
                    author="agent",
                    timestamp=stamp,
                    actions=EventActions(compaction=compaction),
                ),
            )


def _filled_config() -> Any:
    """What the Runner hook hands `get_session` for an app compacting by a
    sliding window (`_lean.for_run`)."""
    config = EventsCompactionConfig(compaction_interval=3, overlap_size=1)
    runner = SimpleNamespace(app=SimpleNamespace(events_compaction_config=config))
    return _lean.for_run(runner, None, None, None).get_session_config


async def _get(service: BaseSessionService, config: Any = None) -> Any:
    return await service.get_session(app_name=APP, user_id=USER, session_id=SESSION, config=config)


def _both(
    kind: str, db: Path, prepare: Callable[[BaseSessionService], Any] | None = None
) -> tuple[Any, Any]:
    """`get_session` by google-adk's own code, then lean: each a session
    dump, or the exception raised as `(type, message)`."""

    async def load(lean: bool) -> Any:
        service = _service(kind, db)
        try:
            if prepare is not None:
                prepare(service)
            try:
                session = await _get(service, _filled_config() if lean else None)
            except Exception as error:
                return (type(error), str(error))
            return None if session is None else session.model_dump_json()
        finally:
            await _close(service)

    adk_fastcompact.uninstall()
    plain = asyncio.run(load(False))
    assert adk_fastcompact.install(loading="lean") is True
    try:
        lean = asyncio.run(load(True))
    finally:
        adk_fastcompact.uninstall()
    return plain, lean


def _lean_get(
    kind: str, db: Path, prepare: Callable[[BaseSessionService], Any] | None = None
) -> Any:
    """A lean `get_session`: its session's dump, or None."""
    assert adk_fastcompact.install(loading="lean") is True

    async def load() -> Any:
        service = _service(kind, db)
        try:
            if prepare is not None:
                prepare(service)
            session = await _get(service, _filled_config())
            return None if session is None else session.model_dump_json()
        finally:
            await _close(service)

    try:
        return asyncio.run(load())
    finally:
        adk_fastcompact.uninstall()


def _store(kind: str, tmp_path: Path) -> Path:
    db = tmp_path / f"{kind}.db"

    async def write() -> None:
        service = _service(kind, db)
        try:
            await _write(service)
        finally:
            await _close(service)

    asyncio.run(write())
    return db


def _lean_load(kind: str, db: Path) -> int:
    """A lean load (warming what the process keeps): its event count."""
    assert adk_fastcompact.install(loading="lean") is True

    async def load() -> int:
        service = _service(kind, db)
        try:
            session = await _get(service, _filled_config())
            return len(session.events)
        finally:
            await _close(service)

    try:
        return asyncio.run(load())
    finally:
        adk_fastcompact.uninstall()


def _insert(kind: str, db: Path, event_id: str, stamp: float, data: str) -> None:
    """Stores a row by SQL, as another writer might have."""
    with sqlite3.connect(db) as conn:
        if kind == "sqlite":
            column: Any = stamp
        else:
            column = v1.timestamp_to_utc_datetime(stamp).strftime("%Y-%m-%d %H:%M:%S.%f")
        conn.execute(
            "INSERT INTO events (id, app_name, user_id, session_id, invocation_id, timestamp,"
            " event_data) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (event_id, APP, USER, SESSION, "inv-late", column, data),
        )
    conn.close()


def _delete(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM events WHERE session_id = ?", (SESSION,))
        conn.execute("DELETE FROM sessions WHERE id = ?", (SESSION,))
    conn.close()


@pytest.mark.parametrize("kind", KINDS)
def test_the_store_is_lean_to_begin_with(kind: str, tmp_path: Path) -> None:
    db = _store(kind, tmp_path)
    _lean.loading_stats(reset=True)
    plain, lean = _both(kind, db)
    assert isinstance(plain, str) and isinstance(lean, str)
    assert len(lean) < len(plain)
    assert _lean.loading_stats(reset=True) == {"lean": 1}


@pytest.mark.parametrize("kind", KINDS)
def test_a_record_that_does_not_parse_is_google_adks_exception(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = _store(kind, tmp_path)
    assert _lean_load(kind, db) > 0
    _insert(kind, db, "bad", 5000.0, "this is not JSON")
    _lean.loading_stats(reset=True)
    _lean._logged.discard("a stored row does not parse")
    with caplog.at_level("INFO", logger="adk_fastcompact"):
        plain, lean = _both(kind, db)
    assert isinstance(plain, tuple), plain
    assert lean == plain
    assert _lean.loading_stats(reset=True) == {"full: a stored row does not parse": 1}
    assert "fell back to the whole session: a stored row does not parse" in caplog.text


@pytest.mark.parametrize("kind", KINDS)
def test_a_read_row_that_does_not_validate_is_google_adks_exception(
    kind: str, tmp_path: Path
) -> None:
    db = _store(kind, tmp_path)
    data = '{"id": "odd", "invocation_id": "inv-late", "author": "user", "timestamp": 5000.0,'
    data += ' "partial": "perhaps"}'
    _insert(kind, db, "odd", 5000.0, data)
    _lean.loading_stats(reset=True)
    plain, lean = _both(kind, db)
    assert isinstance(plain, tuple) and plain[0].__name__ == "ValidationError", plain
    assert lean == plain
    assert _lean.loading_stats(reset=True) == {}


def test_a_session_deleted_before_the_listing_is_none(tmp_path: Path) -> None:
    """`SqliteSessionService`: deleted after google-adk read the session
    row, before the lean load lists its rows: google-adk's answer for the
    deleted session."""
    db = _store("sqlite", tmp_path)

    def prepare(service: Any) -> None:
        connect = service._get_db_connection
        entered = [0]

        @asynccontextmanager
        async def deleting() -> AsyncIterator[Any]:
            entered[0] += 1
            if entered[0] == 2:
                _delete(db)
            async with connect() as conn:
                yield conn

        service._get_db_connection = deleting

    _lean.loading_stats(reset=True)
    lean = _lean_get("sqlite", db, prepare)
    assert _lean.loading_stats(reset=True) == {"full: the session changed between two queries": 1}
    plain, _ = _both("sqlite", db)
    assert plain is None and lean is None


def test_a_session_deleted_between_the_listing_and_the_rows_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _store("sqlite", tmp_path)
    texts = _lean_sql._sqlite_texts

    async def deleting(*args: Any) -> Any:
        _delete(db)
        return await texts(*args)

    monkeypatch.setattr(_lean_sql, "_sqlite_texts", deleting)
    _lean.loading_stats(reset=True)
    assert _lean_get("sqlite", db) is None
    assert _lean.loading_stats(reset=True) == {"full: the session changed between two queries": 1}


def test_a_session_deleted_before_the_event_query_is_google_adks_answer(
    tmp_path: Path,
) -> None:
    """`DatabaseSessionService`: deleted after its session row was read,
    before its event query: both sides answer the same (no events)."""
    db = _store("database", tmp_path)
    done = [False]

    def before_events(state: Any) -> None:
        described = state.statement.column_descriptions if state.is_select else []
        if not done[0] and described and described[0].get("expr") is v1.StorageEvent:
            done[0] = True
            _delete(db)

    sa_event.listen(OrmSession, "do_orm_execute", before_events)
    try:
        plain, _ = _both("database", db)
        assert done[0]
        db.unlink()
        db = _store("database", tmp_path)
        done[0] = False
        _lean.loading_stats(reset=True)
        lean = _lean_get("database", db)
        assert done[0]
    finally:
        sa_event.remove(OrmSession, "do_orm_execute", before_events)
    assert isinstance(plain, str) and '"events":[]' in plain
    assert lean == plain
    assert _lean.loading_stats(reset=True) == {"lean": 1}


def test_the_legacy_pickled_schema_loads_whole(tmp_path: Path) -> None:
    from google.adk.sessions.schemas import v0
    from sqlalchemy import create_engine

    db = tmp_path / "v0.db"
    engine = create_engine(f"sqlite:///{db}")
    v0.Base.metadata.create_all(engine)
    engine.dispose()
    asyncio.run(_write_v0(db))
    _lean.loading_stats(reset=True)
    plain, lean = _both("database", db)
    assert isinstance(plain, str) and lean == plain
    assert _lean.loading_stats(reset=True) == {"full: legacy (pickled) schema": 1}


async def _write_v0(db: Path) -> None:
    service = _service("database", db)
    try:
        await _write(service, turns=4)
    finally:
        await _close(service)


@pytest.mark.parametrize("kind", KINDS)
def test_a_row_the_turn_does_not_read_is_not_validated(kind: str, tmp_path: Path) -> None:
    """What lean loading does not decode, it cannot find invalid: a row
    inside a standing summary's range that google-adk's decoder rejects
    fails google-adk's whole load, not the lean one (which never shows it).
    A row that is not JSON at all is found by the native read (above)."""
    db = _store(kind, tmp_path)
    data = '{"id": "odd", "invocation_id": "inv-0", "author": "user", "timestamp": 1001.5,'
    data += ' "partial": "perhaps"}'
    _insert(kind, db, "odd", 1001.5, data)
    _lean.loading_stats(reset=True)
    plain, lean = _both(kind, db)
    assert isinstance(plain, tuple) and plain[0].__name__ == "ValidationError", plain
    assert isinstance(lean, str) and '"odd"' not in lean
    assert _lean.loading_stats(reset=True) == {"lean": 1}


@pytest.mark.parametrize("kind", KINDS)
def test_a_bare_lean_config_loads_whole_counted(kind: str, tmp_path: Path) -> None:
    """A `LeanSessionConfig` no Runner run filled (application code calling
    `get_session` with one): the whole session, as google-adk loads it."""
    db = _store(kind, tmp_path)
    plain, _ = _both(kind, db)
    _lean.loading_stats(reset=True)
    assert adk_fastcompact.install(loading="lean") is True
    try:

        async def load() -> Any:
            service = _service(kind, db)
            try:
                session = await _get(service, _lean.LeanSessionConfig())
                return session.model_dump_json()
            finally:
                await _close(service)

        assert asyncio.run(load()) == plain
    finally:
        adk_fastcompact.uninstall()
    reason = "full: not filled by a Runner run (exact mode, or a direct call)"
    assert _lean.loading_stats(reset=True) == {reason: 1}
