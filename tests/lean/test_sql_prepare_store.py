"""`adk-fastcompact prepare-store` and the lean load's word on a missing
index.

google-adk's `DatabaseSessionService` creates its per-session index
(`idx_events_app_user_session_ts_id`) when it prepares its tables;
`SqliteSessionService`'s files have only a primary key leading with the
session's key (not its timestamps). A store whose events table has no
index leading with (app_name, user_id, session_id, timestamp) (a
SqliteSessionService file, a database whose index was dropped after the
service prepared its tables) is named once in the log by the first lean
load, and `prepare-store` creates google-adk's own index there, explicitly
(`--check` only says).
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import adk_fastcompact
import pytest
from adk_fastcompact import _lean, _lean_sql
from adk_fastcompact._tooling.cli import main
from google.adk.apps.app import EventsCompactionConfig
from google.adk.events.event import Event
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService

pytestmark = pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning")

INDEX = "idx_events_app_user_session_ts_id"


def _indexes(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events'"
        ).fetchall()
    conn.close()
    return sorted(name for (name,) in rows)


def _database(tmp_path: Path) -> tuple[Path, DatabaseSessionService]:
    db = tmp_path / "database.db"
    return db, DatabaseSessionService(f"sqlite+aiosqlite:///{db}")


async def _session(service: Any) -> None:
    session = await service.create_session(app_name="app", user_id="u", session_id="s")
    await service.append_event(
        session, Event(id="e1", invocation_id="i1", author="user", timestamp=1.0)
    )


def _filled() -> Any:
    config = EventsCompactionConfig(compaction_interval=3, overlap_size=1)
    runner = SimpleNamespace(app=SimpleNamespace(events_compaction_config=config))
    return _lean.for_run(runner, None, None, None).get_session_config


def test_a_sqlite_service_file_is_said_once_and_indexed_by_prepare_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "sqlite.db"

    async def write() -> None:
        await _session(SqliteSessionService(str(db)))

    async def load_twice() -> list[int]:
        service = SqliteSessionService(str(db))
        counts = []
        for _ in range(2):
            session = await service.get_session(
                app_name="app", user_id="u", session_id="s", config=_filled()
            )
            counts.append(len(session.events))  # type: ignore[union-attr]
        return counts

    asyncio.run(write())
    _lean_sql._indexed.clear()
    assert adk_fastcompact.install(loading="lean") is True
    try:
        with caplog.at_level("WARNING", logger="adk_fastcompact"):
            assert asyncio.run(load_twice()) == [1, 1]
    finally:
        adk_fastcompact.uninstall()
    said = [r for r in caplog.records if "has no index on" in r.getMessage()]
    assert len(said) == 1
    assert "prepare-store" in said[0].getMessage()
    before = _indexes(db)
    assert INDEX not in before
    capsys.readouterr()
    assert main(["prepare-store", f"sqlite:///{db}", "--check"]) == 1
    assert "no index leading with" in capsys.readouterr().out
    assert _indexes(db) == before
    assert main(["prepare-store", str(db)]) == 0
    assert f"created {INDEX}" in capsys.readouterr().out
    assert _indexes(db) == sorted([*before, INDEX])
    assert main(["prepare-store", f"sqlite:///{db}", "--check"]) == 0
    assert "indexed by session and timestamp already" in capsys.readouterr().out
    # Prepared, a lean load says nothing.
    _lean_sql._indexed.clear()
    caplog.clear()
    assert adk_fastcompact.install(loading="lean") is True
    try:
        with caplog.at_level("WARNING", logger="adk_fastcompact"):
            assert asyncio.run(load_twice()) == [1, 1]
    finally:
        adk_fastcompact.uninstall()
    assert not [r for r in caplog.records if "has no index on" in r.getMessage()]


def test_a_missing_index_is_said_once_and_made_by_prepare_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    db, service = _database(tmp_path)

    async def write() -> None:
        await _session(service)
        await service.close()

    asyncio.run(write())
    assert INDEX in _indexes(db)
    assert main(["prepare-store", f"sqlite+aiosqlite:///{db}", "--check"]) == 0
    with sqlite3.connect(db) as conn:
        conn.execute(f"DROP INDEX {INDEX}")
    conn.close()
    _lean_sql._indexed.clear()

    async def load_twice() -> list[int]:
        # A service whose tables are prepared already (its index dropped
        # since), as in a process that was running when it went.
        _, running = _database(tmp_path)
        await running.prepare_tables()
        with sqlite3.connect(db) as conn:
            conn.execute(f"DROP INDEX IF EXISTS {INDEX}")
        conn.close()
        counts = []
        for _ in range(2):
            session = await running.get_session(
                app_name="app", user_id="u", session_id="s", config=_filled()
            )
            counts.append(len(session.events))  # type: ignore[union-attr]
        await running.close()
        return counts

    assert adk_fastcompact.install(loading="lean") is True
    try:
        with caplog.at_level("WARNING", logger="adk_fastcompact"):
            assert asyncio.run(load_twice()) == [1, 1]
    finally:
        adk_fastcompact.uninstall()
    said = [r for r in caplog.records if "has no index on" in r.getMessage()]
    assert len(said) == 1
    assert "prepare-store" in said[0].getMessage()
    assert INDEX not in _indexes(db)
    capsys.readouterr()
    assert main(["prepare-store", str(db), "--check"]) == 1
    assert "no index leading with" in capsys.readouterr().out
    assert INDEX not in _indexes(db)
    assert main(["prepare-store", str(db)]) == 0
    assert f"created {INDEX}" in capsys.readouterr().out
    assert INDEX in _indexes(db)
    assert main(["prepare-store", str(db)]) == 0
    assert "indexed by session and timestamp already" in capsys.readouterr().out


def test_what_is_no_store_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prepare-store", str(tmp_path / "missing.db")]) == 2
    assert "no such file" in capsys.readouterr().err
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    assert main(["prepare-store", str(empty)]) == 2
    assert "not a google-adk session store" in capsys.readouterr().err
    assert main(["prepare-store", "env:ADK_FASTCOMPACT_NO_SUCH_VARIABLE"]) == 2
    assert "is not set" in capsys.readouterr().err


def test_the_sqlite_file_index_is_google_adk_s_own() -> None:
    """The DDL prepare-store runs on a SqliteSessionService file is what
    SQLAlchemy compiles of google-adk's own index on SQLite."""
    from adk_fastcompact._tooling.cli_store import SQLITE_INDEX_DDL
    from google.adk.sessions.schemas import v1
    from sqlalchemy.dialects import sqlite
    from sqlalchemy.schema import CreateIndex

    table: Any = v1.StorageEvent.__table__
    index = next(ix for ix in table.indexes if ix.name == INDEX)
    compiled = CreateIndex(index, if_not_exists=True).compile(dialect=sqlite.dialect())
    assert str(compiled).strip() == SQLITE_INDEX_DDL


def test_a_sqlite_service_file_is_prepared_without_sqlalchemy(tmp_path: Path) -> None:
    """google-adk alone installs no SQLAlchemy: prepare-store of a
    SqliteSessionService file (which the bench runs on its SQLite copy)
    needs none."""
    db = tmp_path / "sqlite.db"
    asyncio.run(_session(SqliteSessionService(str(db))))
    script = (
        "import sys, asyncio\n"
        "sys.modules['sqlalchemy'] = None\n"
        "from adk_fastcompact._tooling.cli_store import prepare_store\n"
        "print(asyncio.run(prepare_store(sys.argv[1])))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(db)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"created {INDEX}" in done.stdout
    assert INDEX in _indexes(db)
