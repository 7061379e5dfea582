"""The audit of `DatabaseSessionService` stores on a real PostgreSQL server
(the one `tests/support/postgres.py` starts), read natively.

- Stores written by google-adk's own service through a real `Runner` (the
  ground-truth scenarios of tests/audit/test_audit_truth.py, plain and in
  exact mode, several apps in one database): the native reading finds what
  google-adk's truth says, and exactly what the audit finds in the same
  sessions read through google-adk's own loader, exported as JSON lines,
  and copied row by row into a SQLite file of the same service; every
  table's rows are unchanged after all of it.
- The shards of a PostgreSQL store (`--shard I/N`, then `audit merge`) and
  a Dask `LocalCluster` of 2 workers over 4 shards, the URL read from the
  environment (`env:NAME`), give the single process's report.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from adk_fastcompact._tooling import audit as _audit
from adk_fastcompact._tooling import audit_stores as _audit_stores
from adk_fastcompact._tooling import bench_store as _bench_store
from adk_fastcompact._tooling.audit_open import masked
from adk_fastcompact._tooling.audit_postgres import PostgresStore
from adk_fastcompact._tooling.audit_postgres import libpq_dsn as dsn
from google.adk.sessions.database_session_service import DatabaseSessionService
from sqlalchemy.engine import make_url

from support.audit_cli import comparable, merged, report_of
from support.ground_truth import Written
from support.truth_scenarios import SCENARIOS, write_scenario

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning"),
    pytest.mark.filterwarnings("ignore:The `plugins` argument is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:App .* can transfer between agents:UserWarning"),
]

TABLES = ("adk_internal_metadata", "sessions", "events", "app_states", "user_states")
# Three sessions audited with one setting (the two scenarios' own): the
# coarse clock hides events from plain google-adk, call recovery repeats
# one, and exact mode's records keep the third whole.
WRITTEN = (("coarse-clock", None), ("recovered", None), ("coarse-clock", "exact"))


def digest(url: str) -> dict[str, tuple[int, str]]:
    """Each google-adk table's row count and the md5 of its rows."""

    async def read() -> dict[str, tuple[int, str]]:
        import asyncpg

        conn = await asyncpg.connect(dsn(url))
        try:
            found = {}
            for table in TABLES:
                row = await conn.fetchrow(
                    f"SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), ''))"
                    f" FROM {table} t"
                )
                found[table] = (row[0], row[1])
            return found
        finally:
            await conn.close()

    return asyncio.run(read())


def audit_json(store: _audit.Store, settings: _audit.Settings) -> dict[str, Any]:
    try:
        return _audit.run_audit(store, settings, parallel=False).to_json()
    finally:
        store.close()


def sessions_of(report: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(report["sessions"], key=lambda s: (s["app_name"], s["user_id"], s["session_id"]))


def findings(report: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Per session: the ids found hidden, duplicated and undecidable, and
    the stored compactions (id, replayed, record, handed) and prompt size."""
    return {
        (s["app_name"], s["user_id"], s["session_id"]): {
            "events": s["events"],
            "prompt_size": s.get("prompt_size"),
            "hidden": sorted(e["id"] for e in s.get("hidden", [])),
            "duplicated": sorted(e["id"] for e in s.get("duplicated", [])),
            "undecidable": sorted(e["id"] for e in s.get("undecidable", [])),
            "compactions": [
                (c["id"], c["replayed"], c["record"], c["handed"]) for c in s.get("compactions", [])
            ],
            "declined": s.get("declined"),
        }
        for s in report["sessions"]
    }


def copy_to_sqlite(url: str, path: Path) -> None:
    """The database's google-adk tables, row by row, into a SQLite file of
    `DatabaseSessionService` (its tables made by the service), rows in the
    server's physical order."""

    async def run() -> dict[str, tuple[list[str], list[Any]]]:
        import asyncpg

        service = DatabaseSessionService(f"sqlite+aiosqlite:///{path}")
        await service.prepare_tables()
        await service.close()
        conn = await asyncpg.connect(dsn(url))
        try:
            rows = {}
            for table in TABLES:
                fetched = await conn.fetch(f"SELECT * FROM {table} ORDER BY ctid")
                columns = list(fetched[0].keys()) if fetched else []
                rows[table] = (columns, [tuple(r) for r in fetched])
            return rows
        finally:
            await conn.close()

    def stored(value: Any) -> Any:
        from datetime import datetime

        if isinstance(value, datetime):
            # SQLAlchemy's SQLite DATETIME storage format.
            return value.strftime("%Y-%m-%d %H:%M:%S.%f")
        if isinstance(value, (dict, list)):
            return json.dumps(value)
        return value

    rows = asyncio.run(run())
    with closing(sqlite3.connect(path)) as db, db:
        for table, (columns, values) in rows.items():
            db.execute(f"DELETE FROM {table}")
            if not values:
                continue
            marks = ", ".join("?" for _ in columns)
            db.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
                [tuple(stored(v) for v in row) for row in values],
            )


def export(url: str, apps: list[str], path: Path) -> None:
    async def run() -> None:
        service = DatabaseSessionService(url)
        try:
            with path.open("w") as out:
                for app in apps:
                    await _audit.export_sessions(service, out, app_name=app)
        finally:
            await service.close()

    asyncio.run(run())


def test_the_native_reading_finds_what_google_adks_loader_and_the_copies_find(
    tmp_path: Path, postgres_database: str
) -> None:
    written: list[Written] = [
        write_scenario(tmp_path, name, "postgres", mode, url=postgres_database)
        for name, mode in WRITTEN
    ]
    settings_dict = SCENARIOS["coarse-clock"][2]
    assert SCENARIOS["recovered"][2] == settings_dict
    settings = _audit.Settings(
        compaction_interval=settings_dict["compaction_interval"],
        overlap_size=settings_dict["overlap_size"],
        source="given",
    )
    before = digest(postgres_database)
    assert before["events"][0] > 0

    native_store = _audit.open_store(postgres_database, _audit.Filters())
    assert isinstance(native_store, PostgresStore)
    native = audit_json(native_store, settings)
    assert native["kind"] == "postgresql" and "read natively" in native["store"]
    assert len(native["sessions"]) == 3

    # The truth of each plain run: what google-adk's own assembly and the
    # summarizer's ledger say it hid and repeated; in exact mode, nothing
    # hidden or repeated (the records say what each summary covers).
    by_app = {s["app_name"]: s for s in native["sessions"]}
    for (name, mode), run in zip(WRITTEN, written, strict=True):
        where = f"{name} ({mode or 'plain'})"
        session = by_app[f"{name}-{mode or 'plain'}"]
        hidden = {e["id"] for e in session["hidden"]}
        duplicated = {e["id"] for e in session["duplicated"]}
        if mode is None:
            assert hidden == run.truth.hidden, where
            assert duplicated == run.truth.duplicated, where
        else:
            assert run.plain_hidden == set(), where
            assert hidden == duplicated == set(), where
        assert session["undecidable"] == [], where
    assert any(s["hidden"] for s in native["sessions"]), "nothing hidden: the test is vacuous"
    assert any(s["duplicated"] for s in native["sessions"]), "nothing repeated: vacuous"

    # google-adk's own loader, on the same URL: the same sessions, in the
    # same order, so the same report session for session.
    loader = audit_json(
        _audit_stores.ServiceStore(
            postgres_database, _audit.Filters(), kind="database-url", description="loader"
        ),
        settings,
    )
    assert sessions_of(loader) == sessions_of(native)

    # Exported as JSON lines through the service: the same again.
    apps = sorted(by_app)
    jsonl = tmp_path / "export.jsonl"
    export(postgres_database, apps, jsonl)
    exported = audit_json(_audit.open_store(str(jsonl), _audit.Filters()), settings)
    assert sessions_of(exported) == sessions_of(native)

    # Copied into a SQLite file of DatabaseSessionService: the same findings
    # (its rows are sorted by the audit, as the service sorts them).
    copy = tmp_path / "copy.db"
    copy_to_sqlite(postgres_database, copy)
    sqlite_report = audit_json(_audit.open_store(str(copy), _audit.Filters()), settings)
    assert sqlite_report["kind"] == "database"
    assert findings(sqlite_report) == findings(native)

    assert digest(postgres_database) == before


def test_the_reading_is_read_only_and_hides_the_password(postgres_database: str) -> None:
    _bench_store.build_postgres_store(
        postgres_database, n_sessions=2, n_events=40, payload_bytes=0, templates=1
    )
    before = digest(postgres_database)
    store = _audit.open_store(postgres_database, _audit.Filters())
    assert isinstance(store, PostgresStore)
    try:
        import asyncpg

        # The transaction the scan runs in refuses writes.
        with pytest.raises(asyncpg.exceptions.ReadOnlySQLTransactionError):
            store._run(store._conn.execute("DELETE FROM events"))
    finally:
        store.close()
    assert digest(postgres_database) == before
    assert masked("postgresql+asyncpg://me:s3cret@db:5432/x") == (
        "postgresql+asyncpg://me:***@db:5432/x"
    )
    wrong = make_url(postgres_database).set(password="not-the-password", port=1)
    spec = wrong.render_as_string(hide_password=False)
    with pytest.raises(_audit.StoreError) as raised:
        _audit.open_store(spec, _audit.Filters())
    assert "not-the-password" not in str(raised.value)
    assert "cannot connect" in str(raised.value)


def test_postgres_shards_and_dask_merge_into_the_single_report(
    tmp_path: Path, postgres_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("distributed", reason="the dask extra (tests/requirements.txt pins it)")
    _bench_store.build_postgres_store(
        postgres_database, n_sessions=16, n_events=120, payload_bytes=200, templates=4
    )
    before = digest(postgres_database)
    # The URL from the environment: never on a command line or in a task.
    monkeypatch.setenv("ADK_FASTCOMPACT_TEST_STORE", postgres_database)
    store = "env:ADK_FASTCOMPACT_TEST_STORE"
    whole = report_of([store])
    assert whole["kind"] == "postgresql"
    assert whole["summary"]["sessions"] == 16 and whole["summary"]["compactions"] > 0
    paths = []
    for index in range(1, 5):
        path = tmp_path / f"shard-{index}.json"
        path.write_text(json.dumps(report_of([store, "--shard", f"{index}/4"])))
        paths.append(path)
    assert comparable(merged(paths)) == comparable(whole)
    on_dask = report_of([store, "--dask", "local:2", "--shards", "4"])
    assert comparable(on_dask) == comparable(whole)
    assert digest(postgres_database) == before


def test_every_connection_reads_the_snapshot_taken_at_open(postgres_database: str) -> None:
    _bench_store.build_postgres_store(
        postgres_database, n_sessions=6, n_events=40, payload_bytes=0, templates=2
    )
    store = _audit.open_store(postgres_database, _audit.Filters())
    assert isinstance(store, PostgresStore) and len(store._conns) >= 3

    async def write() -> None:
        import asyncpg

        conn = await asyncpg.connect(dsn(postgres_database))
        try:
            # A session's events gone, after the store was opened.
            await conn.execute("DELETE FROM events WHERE session_id = 's00005'")
        finally:
            await conn.close()

    try:
        asyncio.run(write())
        found = {s.session_id: len(s.rows) for s, _ in store.sessions() if s is not None}
    finally:
        store.close()
    assert found == {f"s{k:05d}": 40 for k in range(6)}


def test_a_scan_stopped_early_closes_its_connections(postgres_database: str) -> None:
    _bench_store.build_postgres_store(
        postgres_database, n_sessions=8, n_events=40, payload_bytes=0, templates=1
    )
    store = _audit.open_store(postgres_database, _audit.Filters())
    assert isinstance(store, PostgresStore)
    scan = store.sessions()
    first, _ = next(scan)
    assert first is not None and len(first.rows) == 40
    scan.close()
    store.close()
    assert all(conn.is_closed() for conn in store._conns)
