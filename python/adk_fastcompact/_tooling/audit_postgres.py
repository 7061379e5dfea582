"""`DatabaseSessionService` stores on PostgreSQL, read natively.

The store's current schema (`events.event_data` a JSONB document, the
`adk_internal_metadata` table beside it) is read with asyncpg, the driver
google-adk's PostgreSQL URLs name, in read-only, repeatable-read
transactions that share one snapshot (`pg_export_snapshot`): the sessions'
keys first (from `sessions`, in key order, the filters and the shard
applied), then each session's events as text, in the order
`DatabaseSessionService.get_session` loads them (`timestamp`, then `id`, on
the index the service creates), through a server-side cursor fetching
`fetch` rows at a time. The server's conversion of JSONB to text is most of
the reading's cost (docs/audit.md measures it), so `connections` sessions
are fetched at once, one per connection (`default_connections`), and handed
on in key order. The rows go to `_native.audit_stored` as the SQLite path's
do; nothing builds a pydantic `Event`.

Memory is bounded by the audit's batch and the sessions in flight (one per
connection), not by the store. The legacy pickled schema is left to
google-adk's loader (`ServiceStore`), which says so in the report's store line. Credentials come
from the URL or, when it leaves them out, from libpq's environment
(`PGPASSWORD`, `PGPASSFILE`, `PGUSER`, ...), as asyncpg reads them; the
report and every error show the URL with its password hidden.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
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


def default_connections() -> int:
    """Connections reading at once: one more than the cores, three to four
    (docs/audit.md gives the bench store's scan with one to four)."""
    return max(3, min(4, (os.cpu_count() or 1) + 1))


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

    def __init__(
        self,
        url: str,
        filters: Filters,
        *,
        shown: str,
        fetch: int = FETCH_ROWS,
        connections: int | None = None,
    ) -> None:
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
        self._conns: list[Any] = []
        self._transactions: list[Any] = []
        self._pending: dict[int, tuple[int, asyncio.Task[list[Any]]]] = {}
        count = connections or default_connections()
        try:
            try:
                for _ in range(count):
                    self._conns.append(self._run(asyncpg.connect(libpq_dsn(url))))
            except Exception as error:
                raise StoreError(f"{shown}: cannot connect: {_reason(error)}") from error
            # One snapshot for the whole scan, shared by every connection;
            # nothing can be written through them.
            snapshot = None
            for conn in self._conns:
                transaction = conn.transaction(isolation="repeatable_read", readonly=True)
                self._run(transaction.start())
                self._transactions.append(transaction)
                if snapshot is None:
                    snapshot = self._run(conn.fetchval("SELECT pg_export_snapshot()"))
                else:
                    self._run(conn.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'"))
            self._conn = self._conns[0]
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
        statements = [self._run(conn.prepare(_EVENTS)) for conn in self._conns]
        keys = self._admitted()
        free = deque(range(len(self._conns)))
        launched = 0

        def launch() -> None:
            # Every free connection starts on the next session: the server
            # converts it while this one is handed on.
            nonlocal launched
            while free and launched < len(keys):
                j = free.popleft()
                task = self._loop.create_task(self._events(statements[j], *keys[launched]))
                self._pending[launched] = (j, task)
                launched += 1

        for i, (app, user, session) in enumerate(keys):
            launch()
            j, task = self._pending.pop(i)
            try:
                fetched = self._run(task)
            except Exception as error:  # reported per session, never aborts the scan
                unreadable = f"unreadable: {_reason(error)}"
                yield StoredSession(app, user, session, [], None, unreadable), 1
                continue
            finally:
                free.append(j)
            launch()
            # A NULL document (the column allows one) is declined natively.
            rows: list[str | bytes] = ["null" if r[2] is None else r[2] for r in fetched]
            meta = [(r[0], r[1], None) for r in fetched]
            yield StoredSession(app, user, session, rows, meta), 1

    async def _events(self, statement: Any, app: str, user: str, session: str) -> list[Any]:
        cursor = await statement.cursor(app, user, session)
        rows: list[Any] = []
        while True:
            batch = await cursor.fetch(self._fetch)
            rows.extend(batch)
            if len(batch) < self._fetch:
                return rows

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            for _, task in self._pending.values():
                task.cancel()
            for _, task in self._pending.values():
                try:
                    self._run(task)
                except (asyncio.CancelledError, Exception):  # cancelled or failed: closing
                    pass
            self._pending.clear()
            for conn, transaction in zip(self._conns, self._transactions, strict=False):
                if not conn.is_closed():
                    try:
                        self._run(transaction.rollback())
                    except Exception:  # closing regardless
                        pass
            for conn in self._conns:
                if not conn.is_closed():
                    self._run(conn.close())
        finally:
            self._loop.close()


def libpq_dsn(url: str) -> str:
    """The libpq connection string of a SQLAlchemy PostgreSQL URL (its
    `+driver` dropped)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def _reason(error: BaseException) -> str:
    """An error's message, its class named (never the URL: it may hold a password)."""
    message = str(error).strip()
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
