"""The session stores the e2e regime grows once and copies per side.

A store holds the bench's one session in one of google-adk's session
services. `grow_to` appends the events it does not hold yet through the
service's own `append_event` (copies of them, on a session the service
handed out), so each service stores them as it stores a turn's events; `side`
gives a service of its own on a copy of the store as grown so far:

* ``memory``: `InMemorySessionService`, copied by a deep copy of the
  service's dicts (sessions, user and app state);
* ``sqlite``: `SqliteSessionService` on a file, copied with SQLite's backup
  API (a consistent file copy) after the growth service is closed;
* ``database``: `DatabaseSessionService` on ``sqlite+aiosqlite:///FILE``,
  copied the same way;
* ``postgres``: `DatabaseSessionService` on a PostgreSQL URL
  (``postgresql+asyncpg://...``): the store is a database of its own, copied
  by ``CREATE DATABASE ... TEMPLATE ...``; every database made is dropped by
  `close`.

google-adk installs neither SQLAlchemy (its ``db`` extra) nor asyncpg:
`unavailable` says what ``database`` and ``postgres`` need where they are
missing, and this module imports `DatabaseSessionService` only when a
store of those kinds opens a service.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

from google.adk.events.event import Event
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService

from .bench_options import POSTGRES_ENV, SERVICES
from .e2e_app import APP_NAME, SESSION_ID, USER_ID

LABELS = {
    "memory": "InMemorySessionService",
    "sqlite": "SqliteSessionService",
    "database": "DatabaseSessionService (SQLite)",
    "postgres": "DatabaseSessionService (PostgreSQL)",
}

#: The packages each service needs beyond google-adk's own dependencies, and
#: how to install each.
_SQLALCHEMY = ("sqlalchemy", "pip install 'sqlalchemy[asyncio]' (google-adk's db extra)")
_GREENLET = ("greenlet", "pip install 'sqlalchemy[asyncio]'")
_NEEDS: dict[str, tuple[tuple[str, str], ...]] = {
    "database": (_SQLALCHEMY, _GREENLET),
    "postgres": (_SQLALCHEMY, _GREENLET, ("asyncpg", "pip install 'adk-fastcompact[postgres]'")),
}


def unavailable(kind: str) -> str | None:
    """Why the service `kind` cannot run here (the package it lacks and how
    to install it), or None when it can."""
    for module, install in _NEEDS.get(kind, ()):
        if importlib.util.find_spec(module) is None:
            return f"{LABELS[kind]} needs {module}, which is not installed: {install}"
    return None


class Store:
    """One service's store of the bench session (see the module docstring)."""

    def __init__(self, kind: str, database_url: str | None = None) -> None:
        if kind not in SERVICES:
            raise ValueError(f"unknown service {kind!r}; expected one of {', '.join(SERVICES)}")
        if kind == "postgres" and not database_url:
            raise ValueError(f"the postgres service needs a database URL (or {POSTGRES_ENV})")
        missing = unavailable(kind)
        if missing is not None:
            raise ValueError(missing)
        self.kind = kind
        self.stored = 0
        self._url = database_url
        self._folder = Path(tempfile.mkdtemp(prefix=f"adkfc-e2e-{kind}-"))
        self._memory = InMemorySessionService()
        self._copies = 0
        self._services: list[BaseSessionService] = []
        self._databases: list[str] = []
        self._names: dict[int, str] = {}
        self._grown = ""
        if kind == "postgres":
            self._grown = self._new_database_name()

    # -- naming ---------------------------------------------------------------------

    def _new_database_name(self) -> str:
        return f"adkfc_e2e_{os.getpid()}_{uuid.uuid4().hex[:8]}"

    def _file(self, name: str) -> Path:
        return self._folder / f"{name}.db"

    def _service(self, name: str) -> BaseSessionService:
        """A new service on the store called `name` (a file or a database)."""
        if self.kind == "sqlite":
            return SqliteSessionService(str(self._file(name)))
        from google.adk.sessions.database_session_service import DatabaseSessionService

        if self.kind == "database":
            return DatabaseSessionService(f"sqlite+aiosqlite:///{self._file(name)}")
        from sqlalchemy.engine import make_url

        assert self._url is not None
        url = make_url(self._url).set(database=name)
        return DatabaseSessionService(url.render_as_string(hide_password=False))

    async def _admin(self, *statements: str) -> None:
        """Runs statements on the given PostgreSQL URL's database, autocommit."""
        from sqlalchemy import text
        from sqlalchemy.ext.asyncio import create_async_engine

        assert self._url is not None
        engine = create_async_engine(self._url, isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as connection:
                for statement in statements:
                    await connection.execute(text(statement))
        finally:
            await engine.dispose()

    # -- growing and copying --------------------------------------------------------

    async def grow_to(self, events: Sequence[Event]) -> None:
        """Appends `events[self.stored:]` through the service's `append_event`."""
        if self.kind == "memory":
            service: BaseSessionService = self._memory
        else:
            if self.kind == "postgres" and not self.stored:
                await self._admin(f'CREATE DATABASE "{self._grown}"')
                self._databases.append(self._grown)
            service = self._service(self._grown or "grown")
        try:
            if not self.stored:
                session = await service.create_session(
                    app_name=APP_NAME, user_id=USER_ID, session_id=SESSION_ID
                )
            else:
                found = await service.get_session(
                    app_name=APP_NAME, user_id=USER_ID, session_id=SESSION_ID
                )
                assert found is not None
                session = found
            for event in events[self.stored :]:
                await service.append_event(session, event.model_copy(deep=True))
            self.stored = len(events)
        finally:
            if self.kind != "memory":
                await _close(service)

    async def side(self) -> BaseSessionService:
        """A service of its own on a copy of the store as grown so far."""
        self._copies += 1
        name = f"side{self._copies}"
        if self.kind == "memory":
            grown = self._memory
            memory = InMemorySessionService()
            memory.sessions = copy.deepcopy(grown.sessions)
            memory.user_state = copy.deepcopy(grown.user_state)
            memory.app_state = copy.deepcopy(grown.app_state)
            return memory
        if self.kind == "postgres":
            name = f"{self._grown}_{self._copies}"
            await self._admin(f'CREATE DATABASE "{name}" TEMPLATE "{self._grown}"')
            self._databases.append(name)
        else:
            with (
                closing(sqlite3.connect(self._file("grown"))) as source,
                closing(sqlite3.connect(self._file(name))) as target,
            ):
                source.backup(target)
        service = self._service(name)
        self._services.append(service)
        self._names[id(service)] = name
        return service

    async def release(self, service: BaseSessionService) -> None:
        """Closes a side's service and deletes its copy."""
        if isinstance(service, InMemorySessionService):
            service.sessions.clear()
            return
        if service in self._services:
            self._services.remove(service)
            await _close(service)
        name = self._names.pop(id(service), None)
        if name is None:
            return
        if self.kind == "postgres":
            await self._admin(f'DROP DATABASE IF EXISTS "{name}"')
            self._databases.remove(name)
        else:
            self._file(name).unlink(missing_ok=True)

    async def close(self) -> None:
        """Closes every service and deletes every copy and database."""
        for service in self._services:
            await _close(service)
        self._services.clear()
        if self._databases:
            await self._admin(*(f'DROP DATABASE IF EXISTS "{name}"' for name in self._databases))
            self._databases.clear()
        self._memory.sessions.clear()
        shutil.rmtree(self._folder, ignore_errors=True)


async def _close(service: BaseSessionService) -> None:
    close = getattr(service, "close", None)
    if close is not None:
        await close()
