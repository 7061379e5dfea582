"""A large google-adk session store, for timing the audit: a SQLite file of
`SqliteSessionService` (`build_store`), or `DatabaseSessionService`'s
tables on PostgreSQL (`build_postgres_store`).

`build_store` writes the store `SqliteSessionService` would hold after many
long conversations compacted by google-adk's sliding window: its sessions
are created through the service itself, and each event is stored as the
service stores it (`Event.model_dump_json(exclude_none=True)` in
`events.event_data`, with its id, invocation id and timestamp beside). The
conversations are the bench's google-adk-written due sessions
(`sessions.build_due_session`), their tool responses padded to a realistic
size (records of several KB), `templates` distinct ones repeated across the
sessions under their own session ids: the audit's work per session is that
of a real one; writing 2,000 sessions through `append_event` would take
minutes for no other difference.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from contextlib import closing
from pathlib import Path

from google.adk.events.event import Event
from google.adk.sessions.sqlite_session_service import SqliteSessionService

from .sessions import build_due_session

APP_NAME = "audit-bench"
USER_ID = "user"

_WORDS = (
    "order shipment invoice customer warehouse status pending approved total "
    "region forecast budget priority outage owner cluster month year list"
).split()


def _padded(events: list[Event], payload_bytes: int, rng: random.Random) -> list[Event]:
    """`events` with each tool response carrying about `payload_bytes` of
    records (what a lookup tool returns), as copies."""
    out: list[Event] = []
    for event in events:
        responses = event.get_function_responses()
        if not responses or payload_bytes <= 0:
            out.append(event)
            continue
        event = event.model_copy(deep=True)
        for response in event.get_function_responses():
            rows = []
            size = 0
            while size < payload_bytes:
                row = {
                    "id": rng.randrange(10**9),
                    "name": " ".join(rng.choice(_WORDS) for _ in range(4)),
                    "note": " ".join(rng.choice(_WORDS) for _ in range(12)),
                    "amount": round(rng.uniform(0, 10_000), 2),
                }
                rows.append(row)
                size += 140
            response.response = {**(response.response or {}), "rows": rows}
        out.append(event)
    return out


async def _create_sessions(path: Path, n_sessions: int) -> None:
    service = SqliteSessionService(str(path))
    for k in range(n_sessions):
        await service.create_session(app_name=APP_NAME, user_id=USER_ID, session_id=f"s{k:05d}")


def build_store(
    path: Path,
    *,
    n_sessions: int = 2000,
    n_events: int = 500,
    payload_bytes: int = 3000,
    templates: int = 40,
    seed: int = 0,
) -> int:
    """Writes the store at `path` (which must not exist) and returns its
    size in bytes."""
    if path.exists():
        raise FileExistsError(f"{path} exists; remove it or choose another path")
    asyncio.run(_create_sessions(path, n_sessions))
    stored = [
        [(e.id, e.invocation_id, e.timestamp, e.model_dump_json(exclude_none=True)) for e in events]
        for events in _templates(n_events, payload_bytes, templates, seed)
    ]
    # The connection's own `with` commits; `closing` closes it.
    with closing(sqlite3.connect(path)) as db, db:
        for k in range(n_sessions):
            session_id = f"s{k:05d}"
            db.executemany(
                "INSERT INTO events (id, app_name, user_id, session_id, invocation_id,"
                " timestamp, event_data) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (event_id, APP_NAME, USER_ID, session_id, invocation, timestamp, data)
                    for event_id, invocation, timestamp, data in stored[k % templates]
                ],
            )
    return path.stat().st_size


def _templates(n_events: int, payload_bytes: int, templates: int, seed: int) -> list[list[Event]]:
    rng = random.Random(seed)
    return [
        _padded(build_due_session(n_events, seed + t), payload_bytes, rng) for t in range(templates)
    ]


def build_postgres_store(
    url: str,
    *,
    n_sessions: int = 2000,
    n_events: int = 500,
    payload_bytes: int = 3000,
    templates: int = 40,
    seed: int = 0,
) -> int:
    """Writes the same sessions as `build_store` into the PostgreSQL database
    `url` (`postgresql+asyncpg://...`, holding no google-adk tables yet) as
    `DatabaseSessionService` stores them: its tables made and its sessions
    created by the service itself, each event's row as `StorageEvent.from_event`
    makes it (`model_dump(exclude_none=True, mode="json")` in the JSONB
    `event_data`, the UTC timestamp beside), copied in with COPY. Returns the
    events table's size in bytes."""
    from google.adk.sessions.database_session_service import DatabaseSessionService
    from google.adk.sessions.schemas.shared import timestamp_to_utc_datetime

    from .audit_postgres import libpq_dsn

    stored = [
        [
            (
                e.id,
                e.invocation_id,
                timestamp_to_utc_datetime(e.timestamp),
                e.model_dump_json(exclude_none=True),
            )
            for e in events
        ]
        for events in _templates(n_events, payload_bytes, templates, seed)
    ]

    async def write() -> int:
        import asyncpg

        service = DatabaseSessionService(url)
        try:
            for k in range(n_sessions):
                await service.create_session(
                    app_name=APP_NAME, user_id=USER_ID, session_id=f"s{k:05d}"
                )
        finally:
            await service.close()
        conn = await asyncpg.connect(libpq_dsn(url))
        try:
            for k in range(n_sessions):
                session_id = f"s{k:05d}"
                await conn.copy_records_to_table(
                    "events",
                    columns=[
                        "id",
                        "app_name",
                        "user_id",
                        "session_id",
                        "invocation_id",
                        "timestamp",
                        "event_data",
                    ],
                    records=[
                        (event_id, APP_NAME, USER_ID, session_id, invocation, stamp, data)
                        for event_id, invocation, stamp, data in stored[k % templates]
                    ],
                )
            await conn.execute("ANALYZE events")
            return int(await conn.fetchval("SELECT pg_total_relation_size('events')"))
        finally:
            await conn.close()

    return asyncio.run(write())
