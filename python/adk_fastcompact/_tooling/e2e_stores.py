"""The session stores the e2e regime grows once and copies per side.

A store holds the bench's one session in one of google-adk's session
services. `grow_to` appends the events it does not hold yet through the
service's own `append_event` (copies of them, on a session the service
handed out), so each service stores them as it stores a turn's events;
`copy` makes a copy of the store as grown so far for one side, and says
where it is in a `Copy` that pickles, so that the side's service can be
opened (`open_service`) in the bench's process or in one of its own:

* ``memory``: `InMemorySessionService`, copied by pickling the service's
  dicts (sessions, user and app state); the side's process unpickles them
  into a service of its own;
* ``sqlite``: `SqliteSessionService` on a file, copied with SQLite's backup
  API (a consistent file copy) after the growth service is closed; the file
  is prepared as `adk-fastcompact prepare-store` prepares one (google-adk's
  own index on the events' session and timestamp, which lean loading's
  docs ask for; google-adk's queries use it as well), so both sides run on
  the same file;
* ``database``: `DatabaseSessionService` on ``sqlite+aiosqlite:///FILE``,
  copied the same way;
* ``postgres``: `DatabaseSessionService` on a PostgreSQL URL
  (``postgresql+asyncpg://...``): the store is a database of its own, copied
  by ``CREATE DATABASE ... TEMPLATE ...``; every database made is dropped by
  `release` or `close`.

google-adk installs neither SQLAlchemy (its ``db`` extra) nor asyncpg:
`unavailable` says what ``database`` and ``postgres`` need where they are
missing, and this module imports `DatabaseSessionService` only when a
store of those kinds opens a service.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import NamedTuple

from google.adk.events.event import Event
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService

from .. import _native, _patch
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


@contextmanager
def _appending(kind: str) -> Iterator[None]:
    """While a store of `kind` receives the grown session's events:
    `InMemorySessionService.append_event` with `install()` active (its
    re-delivery test compares the new event with every stored event of its
    id, a scan of the session per append: 100,000 events would take an
    hour; installed, the same test reads only the new events' ids, with the
    same outcome), the others as they are."""
    if kind != "memory" or _patch.installed() is not None:
        yield
        return
    _patch.install("parity", strict=True)
    try:
        yield
    finally:
        _patch.uninstall()
        _native.index_clear()


class Copy(NamedTuple):
    """Where one side's copy of a store is (it pickles: a side's process
    opens it with `open_service`)."""

    kind: str
    #: The file (``sqlite``, ``database``) or the database URL (``postgres``).
    where: str = ""
    #: ``memory``: the pickled sessions, user state and app state.
    memory: bytes = b""


def open_service(copy: Copy) -> BaseSessionService:
    """A new service on `copy` (in this process)."""
    if copy.kind == "memory":
        service = InMemorySessionService()
        service.sessions, service.user_state, service.app_state = pickle.loads(copy.memory)
        return service
    if copy.kind == "sqlite":
        return SqliteSessionService(copy.where)
    from google.adk.sessions.database_session_service import DatabaseSessionService

    if copy.kind == "database":
        return DatabaseSessionService(f"sqlite+aiosqlite:///{copy.where}")
    return DatabaseSessionService(copy.where)


async def close_service(service: BaseSessionService) -> None:
    """Closes a service `open_service` opened (its engine, its connections)."""
    close = getattr(service, "close", None)
    if close is not None:
        await close()


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
        self._databases: list[str] = []
        self._grown = ""
        if kind == "postgres":
            self._grown = self._new_database_name()

    # -- naming ---------------------------------------------------------------------

    def _new_database_name(self) -> str:
        return f"adkfc_e2e_{os.getpid()}_{uuid.uuid4().hex[:8]}"

    def _file(self, name: str) -> Path:
        return self._folder / f"{name}.db"

    def _where(self, name: str) -> Copy:
        """The store called `name` (a file or a database)."""
        if self.kind != "postgres":
            return Copy(self.kind, str(self._file(name)))
        from sqlalchemy.engine import make_url

        assert self._url is not None
        url = make_url(self._url).set(database=name)
        return Copy(self.kind, url.render_as_string(hide_password=False))

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
            service = open_service(self._where(self._grown or "grown"))
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
            with _appending(self.kind):
                for event in events[self.stored :]:
                    await service.append_event(session, event.model_copy(deep=True))
            self.stored = len(events)
        finally:
            if self.kind != "memory":
                await close_service(service)
        if self.kind == "sqlite":
            from .cli_store import prepare_store

            await prepare_store(str(self._file("grown")))

    async def copy(self) -> Copy:
        """A copy of the store as grown so far, for one side."""
        self._copies += 1
        name = f"side{self._copies}"
        if self.kind == "memory":
            grown = self._memory
            state = (grown.sessions, grown.user_state, grown.app_state)
            return Copy(self.kind, memory=pickle.dumps(state, pickle.HIGHEST_PROTOCOL))
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
        return self._where(name)

    async def release(self, copy: Copy) -> None:
        """Deletes a side's copy, once the services opened on it are closed."""
        if copy.kind == "memory":
            return
        if copy.kind == "postgres":
            from sqlalchemy.engine import make_url

            name = make_url(copy.where).database
            if name in self._databases:
                await self._admin(f'DROP DATABASE IF EXISTS "{name}"')
                self._databases.remove(name)
        else:
            Path(copy.where).unlink(missing_ok=True)

    async def close(self) -> None:
        """Deletes every copy and database."""
        if self._databases:
            await self._admin(*(f'DROP DATABASE IF EXISTS "{name}"' for name in self._databases))
            self._databases.clear()
        self._memory.sessions.clear()
        shutil.rmtree(self._folder, ignore_errors=True)
