"""`DatabaseSessionService` stores on PostgreSQL, read natively.

The store's current schema (`events.event_data` a JSONB document, the
`adk_internal_metadata` table beside it) is read with asyncpg, the driver
google-adk's PostgreSQL URLs name, inside one read-only, repeatable-read
transaction: the sessions' keys first (from `sessions`, in key order, the
filters and the shard applied), then each session's events as text, in the
order `DatabaseSessionService.get_session` loads them (`timestamp`, then
`id`, on the index the service creates), through a server-side cursor
fetching `fetch` rows at a time. The rows go to `_native.audit_stored` as
the SQLite path's do; nothing builds a pydantic `Event`.

Memory is bounded by the audit's batch (and the largest session), not by
the store. The legacy pickled schema is left to google-adk's loader
(`ServiceStore`), which says so in the report's store line. Credentials come
from the URL or, when it leaves them out, from libpq's environment
(`PGPASSWORD`, `PGPASSFILE`, `PGUSER`, ...), as asyncpg reads them; the
report and every error show the URL with its password hidden.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from .audit_stores import (
    ORDER_STORED,
    Filters,
    StoredSession,
    StoreError,
    _LegacySchema,
)

FETCH_ROWS = 2048
"""Rows fetched from the server-side cursor at once."""

_KEYS = "SELECT app_name, user_id, id FROM sessions{where} ORDER BY app_name, user_id, id"
_EVENTS = (
    "SELECT id, invocation_id, event_data::text FROM events "
    "WHERE app_name = $1 AND user_id = $2 AND session_id = $3 ORDER BY timestamp, id"
)


class PostgresStore:
    """A `DatabaseSessionService` database on PostgreSQL (a
    `postgresql[+driver]://` URL), its current JSON schema read natively,
    read-only."""

    kind = "postgresql"
    #: The rows arrive in the order the service loads them.
    order = ORDER_STORED
    description: str

    def __init__(self, url: str, filters: Filters, *, shown: str, fetch: int = FETCH_ROWS) -> None:
        try:
            import asyncpg
        except ImportError as error:
            raise StoreError(
                f"{shown}: reading PostgreSQL needs asyncpg (pip install asyncpg), the "
                "driver DatabaseSessionService's postgresql+asyncpg:// URLs use"
            ) from error
        self.filters = filters
        self._shown = shown
        self._fetch = fetch
        self._loop = asyncio.new_event_loop()
        self._keys: list[tuple[str, str, str]] | None = None
        try:
            self._conn: Any = self._run(asyncpg.connect(_dsn(url)))
        except Exception as error:
            self._loop.close()
            raise StoreError(f"{shown}: cannot connect: {_reason(error)}") from error
        try:
            # One snapshot for the whole scan; nothing can be written through it.
            self._transaction = self._conn.transaction(isolation="repeatable_read", readonly=True)
            self._run(self._transaction.start())
            self._check()
        except BaseException:
            self.close()
            raise

    def _run(self, awaitable: Any) -> Any:
        return self._loop.run_until_complete(awaitable)

    def _check(self) -> None:
        tables = {
            row[0]
            for row in self._run(
                self._conn.fetch(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = current_schema()"
                )
            )
        }
        if "events" not in tables or "sessions" not in tables:
            raise StoreError(
                f"{self._shown}: not a google-adk session store (no `sessions` and `events` tables)"
            )
        columns = {
            row[0]
            for row in self._run(
                self._conn.fetch(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = current_schema() AND table_name = 'events'"
                )
            )
        }
        if "event_data" not in columns:
            raise _LegacySchema(self._shown)
        missing = {"id", "app_name", "user_id", "session_id", "invocation_id", "timestamp"}
        missing -= columns
        if missing:
            raise StoreError(
                f"{self._shown}: not a google-adk session store (missing {sorted(missing)})"
            )
        self.description = (
            f"{self._shown}: DatabaseSessionService (JSON schema) on PostgreSQL, read "
            "natively; loads by timestamp, ties by event id"
        )

    def _admitted(self) -> list[tuple[str, str, str]]:
        """The admitted sessions' keys, in key order (read once)."""
        if self._keys is None:
            clauses, params = [], []
            for column, value in zip(
                ("app_name", "user_id", "id"),
                (self.filters.app, self.filters.user, self.filters.session),
                strict=True,
            ):
                if value is not None:
                    params.append(value)
                    clauses.append(f"{column} = ${len(params)}")
            where = " WHERE " + " AND ".join(clauses) if clauses else ""
            rows = self._run(self._conn.fetch(_KEYS.format(where=where), *params))
            shard = self.filters.shard
            self._keys = [
                (a, u, s)
                for a, u, s in ((str(r[0]), str(r[1]), str(r[2])) for r in rows)
                if shard is None or shard.holds(a, u, s)
            ]
        return self._keys

    def total(self) -> int | None:
        return len(self._admitted())

    def sessions(self) -> Iterator[tuple[StoredSession | None, int]]:
        statement = self._run(self._conn.prepare(_EVENTS))
        for app, user, session in self._admitted():
            try:
                fetched = self._run(self._events(statement, app, user, session))
            except Exception as error:  # reported per session, never aborts the scan
                unreadable = f"unreadable: {_reason(error)}"
                yield StoredSession(app, user, session, [], None, unreadable), 1
                continue
            # A NULL document (the column allows one) is declined natively.
            rows: list[str | bytes] = ["null" if r[2] is None else r[2] for r in fetched]
            meta = [(r[0], r[1], None) for r in fetched]
            yield StoredSession(app, user, session, rows, meta), 1

    async def _events(
        self, statement: Any, app: str, user: str, session: str
    ) -> list[tuple[Any, ...]]:
        cursor = await statement.cursor(app, user, session)
        rows: list[tuple[Any, ...]] = []
        while True:
            batch = await cursor.fetch(self._fetch)
            rows.extend(tuple(r) for r in batch)
            if len(batch) < self._fetch:
                return rows

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            conn = getattr(self, "_conn", None)
            if conn is not None and not conn.is_closed():
                transaction = getattr(self, "_transaction", None)
                if transaction is not None:
                    try:
                        self._run(transaction.rollback())
                    except Exception:
                        pass
                self._run(conn.close())
        finally:
            self._loop.close()


def _dsn(url: str) -> str:
    """The libpq connection string of a SQLAlchemy PostgreSQL URL (its
    `+driver` dropped)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def _reason(error: BaseException) -> str:
    """An error's message, its class named (never the URL: it may hold a password)."""
    message = str(error).strip()
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
