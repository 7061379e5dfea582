"""The session stores the audit reads, read-only.

- a SQLite file of google-adk's `SqliteSessionService` (table `events`,
  column `event_data`), loaded in timestamp order (ties in rowid order);
- a SQLite file (or `sqlite://` URL) of `DatabaseSessionService`'s current
  JSON schema, loaded by timestamp, ties by event id;
- a JSON-lines export, one `Session.model_dump_json()` per line (see
  `export_sessions`, which writes one from any `BaseSessionService`), whose
  events are taken in the order given.

Each session comes out as its events' stored JSON documents, in storage
order, for `_native.audit_stored`; nothing here builds a pydantic `Event`
on the hot path. See docs/audit.md.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from google.adk.sessions.base_session_service import BaseSessionService

ORDER_TIMESTAMP = "timestamp"
"""The store loads a session sorted by timestamp, ties in storage order."""
ORDER_TIMESTAMP_ID = "timestamp_id"
"""The store loads a session sorted by timestamp, ties by event id."""
ORDER_STORED = "stored"
"""The store loads a session in the order its events are given."""


_SQLITE_MAGIC = b"SQLite format 3\x00"
_SNIFF_BYTES = 1 << 20


class SettingsError(ValueError):
    """Compaction settings that cannot be used (a bad --app-module, a half pair)."""


class _LegacySchema(Exception):
    """DatabaseSessionService's legacy schema: read through its loader."""


class StoreError(Exception):
    """A store that cannot be read at all (missing, foreign, a bad URL): exit 2."""


# -- shards -----------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Shard:
    """The `index`-th (from 1) of `count` disjoint parts of a store."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise ValueError(f"shard {self.index}/{self.count}: expected 1 <= I <= N")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`I/N`, as `--shard` takes it."""
        index, slash, count = text.partition("/")
        if not slash or not index.strip().isdigit() or not count.strip().isdigit():
            raise ValueError(f"{text!r}: a shard is I/N (the I-th of N, from 1)")
        return cls(int(index), int(count))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, app: str, user: str, session: str) -> bool:
        """Whether the session `(app, user, session)` is in this part."""
        return shard_of(app, user, session, self.count) == self.index


def shard_of(app: str, user: str, session: str, count: int) -> int:
    """The shard (from 1, of `count`) a session falls in: a stable hash of
    its three keys (BLAKE2b), the same in every process and on every machine."""
    key = "\x1f".join((app, user, session)).encode("utf-8", "surrogatepass")
    digest = hashlib.blake2b(key, digest_size=8).digest()
    return int.from_bytes(digest, "big") % count + 1


# -- stores ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """Which sessions to audit (None: any)."""

    app: str | None = None
    user: str | None = None
    session: str | None = None
    shard: Shard | None = None

    def admit(self, app: str, user: str, session: str) -> bool:
        return (
            (self.app is None or app == self.app)
            and (self.user is None or user == self.user)
            and (self.session is None or session == self.session)
            and (self.shard is None or self.shard.holds(app, user, session))
        )

    def whole(self) -> Filters:
        """These filters over the whole store (no shard)."""
        return Filters(self.app, self.user, self.session)


@dataclass
class StoredSession:
    """One session as its store holds it."""

    app_name: str
    user_id: str
    session_id: str
    #: Its events' JSON documents, in storage order.
    rows: list[str | bytes]
    #: `(id, invocation_id, timestamp, ...)` of each row, known without parsing
    #: it: the store's own columns (they win over the document's, as in
    #: google-adk's loaders; the timestamp None where the column does not hold
    #: the event's float), or what an export line held.
    meta: Sequence[tuple[Any, ...]] | None = None
    #: Why the whole session could not be read (then `rows` is empty).
    unreadable: str | None = None

    @property
    def size(self) -> int:
        return sum(len(row) for row in self.rows)

    def brief(self, position: int) -> tuple[Any, float | None]:
        """`(id, timestamp)` of the event at `position`, parsed only when
        the store's columns do not tell."""
        if self.meta is not None and 0 <= position < len(self.meta):
            event_id, _, stamp = self.meta[position][:3]
            if isinstance(stamp, float):
                return event_id, stamp
        found = self.describe(position)
        return found["id"], found["timestamp"]

    def describe(self, position: int) -> dict[str, Any]:
        """`id`, `invocation_id`, `timestamp`, `author` of the event at `position`."""
        found: dict[str, Any] = {"id": None, "invocation_id": None, "timestamp": None}
        found["author"] = None
        if not 0 <= position < len(self.rows):
            return found
        try:
            document = json.loads(self.rows[position])
        except ValueError:
            document = None
        if isinstance(document, dict):
            for key, alias in (("id", "id"), ("invocation_id", "invocationId")):
                found[key] = document.get(key, document.get(alias))
            found["author"] = document.get("author")
            stamp = document.get("timestamp")
            if isinstance(stamp, (int, float)) and not isinstance(stamp, bool):
                found["timestamp"] = float(stamp)
        if self.meta is not None:
            event_id, invocation, stamp = self.meta[position][:3]
            if event_id is not None:
                found["id"], found["invocation_id"] = event_id, invocation
            if isinstance(stamp, float):
                found["timestamp"] = stamp
        return found


class Store(Protocol):
    """A readable session store."""

    #: "sqlite", "database" or "jsonl".
    kind: str
    #: What `_native.audit_stored` is told of how the store loads a session.
    order: str
    #: One line saying what was opened and how it loads a session.
    description: str
    #: Which of its sessions are read.
    filters: Filters

    def total(self) -> int | None:
        """The progress total (sessions, or bytes for an export), if known."""
        ...

    def sessions(self) -> Iterator[tuple[StoredSession | None, int]]:
        """The admitted sessions, each with the progress it completes (None:
        progress over something not audited, a blank or filtered-out line)."""
        ...

    def close(self) -> None: ...


def _ro_uri(path: Path) -> str:
    return f"{path.resolve().as_uri()}?mode=ro"


class SqliteStore:
    """A SQLite file of `SqliteSessionService`, or of `DatabaseSessionService`'s
    JSON schema, opened read-only (`mode=ro`): sessions in the `sessions`
    table's rowid order, each one's events in rowid order (append order)."""

    order = ORDER_TIMESTAMP
    #: "sqlite" or "database", and the description, decided by `_check`.
    kind: str
    description: str

    def __init__(self, path: Path, filters: Filters, *, label: str | None = None) -> None:
        self.path = path
        self.filters = filters
        try:
            self._conn = sqlite3.connect(_ro_uri(path), uri=True)
        except sqlite3.Error as error:
            raise StoreError(f"{path}: cannot open read-only: {error}") from error
        self.label = label or str(path)
        try:
            self._check(self.label)
        except sqlite3.Error as error:
            self._conn.close()
            raise StoreError(f"{self.label}: cannot read its schema: {error}") from error
        except BaseException:
            self._conn.close()
            raise

    def _columns(self, table: str) -> set[str]:
        return {row[1] for row in self._conn.execute(f"PRAGMA table_info({table})")}

    def _check(self, label: str) -> None:
        try:
            tables = {
                name
                for (name,) in self._conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                )
            }
        except sqlite3.DatabaseError as error:
            raise StoreError(f"{label}: not a SQLite database ({error})") from error
        if "events" not in tables or "sessions" not in tables:
            raise StoreError(
                f"{label}: not a google-adk session store (no `sessions` and `events` tables)"
            )
        events = self._columns("events")
        if "event_data" not in events:
            raise _LegacySchema(label)
        needed = {"id", "app_name", "user_id", "session_id", "invocation_id"}
        missing = needed - events
        if missing or not {"app_name", "user_id", "id"} <= self._columns("sessions"):
            raise StoreError(f"{label}: not a google-adk session store (missing {sorted(missing)})")
        if "adk_internal_metadata" in tables:
            self.kind = "database"
            self.order = ORDER_TIMESTAMP_ID
            self.description = (
                f"{label}: DatabaseSessionService (JSON schema) on SQLite; loads by "
                "timestamp, ties by event id"
            )
        else:
            self.kind = "sqlite"
            self.description = (
                f"{label}: SqliteSessionService; loads by timestamp, ties in rowid order"
            )

    def _where(self, names: tuple[str, str, str]) -> tuple[str, list[str]]:
        clauses, params = [], []
        for column, value in zip(
            names, (self.filters.app, self.filters.user, self.filters.session), strict=True
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), params

    def _listed(self, query: str, params: list[str]) -> list[Any]:
        """The rows of a query on the `sessions` table; a table SQLite cannot
        read (a corrupt page) makes the whole store unreadable."""
        try:
            return self._conn.execute(query, params).fetchall()
        except sqlite3.Error as error:
            raise StoreError(f"{self.label}: cannot read its `sessions` table: {error}") from error

    def _keys(self) -> list[tuple[Any, Any, Any]]:
        """The admitted sessions' keys, in the `sessions` table's rowid order."""
        where, params = self._where(("app_name", "user_id", "id"))
        keys = self._listed(
            f"SELECT app_name, user_id, id FROM sessions{where} ORDER BY rowid", params
        )
        shard = self.filters.shard
        if shard is None:
            return keys
        return [k for k in keys if shard.holds(str(k[0]), str(k[1]), str(k[2]))]

    def total(self) -> int | None:
        if self.filters.shard is not None:
            return len(self._keys())
        where, params = self._where(("app_name", "user_id", "id"))
        ((count,),) = self._listed(f"SELECT COUNT(*) FROM sessions{where}", params)
        return int(count)

    def sessions(self) -> Iterator[tuple[StoredSession | None, int]]:
        keys = self._keys()
        # SqliteSessionService's timestamp column is the event's float;
        # DatabaseSessionService's is a datetime (read from the JSON instead).
        stamp = "timestamp" if self.kind == "sqlite" else "NULL"
        query = (
            f"SELECT id, invocation_id, {stamp}, CAST(event_data AS BLOB) FROM events "
            "WHERE app_name = ? AND user_id = ? AND session_id = ? ORDER BY rowid"
        )
        for app, user, session in keys:
            try:
                fetched = self._conn.execute(query, (app, user, session)).fetchall()
            except sqlite3.Error as error:
                unreadable = f"unreadable: {error}"
                yield StoredSession(str(app), str(user), str(session), [], None, unreadable), 1
                continue
            # A NULL document (DatabaseSessionService allows one) is declined natively.
            rows: list[str | bytes] = [b"null" if r[3] is None else r[3] for r in fetched]
            yield StoredSession(str(app), str(user), str(session), rows, fetched), 1

    def close(self) -> None:
        self._conn.close()


class JsonLinesStore:
    """A JSON-lines export: one `Session.model_dump_json()` per line, its
    events in the order given (as `InMemorySessionService` holds them)."""

    kind = "jsonl"
    order = ORDER_STORED

    def __init__(self, path: Path, filters: Filters) -> None:
        self.path = path
        self.filters = filters
        self.description = f"{path}: JSON-lines session export; events in the order given"
        try:
            self._file = path.open("rb")
        except OSError as error:
            raise StoreError(f"{path}: {error.strerror}") from error
        if not self._looks_exported():
            self._file.close()
            raise StoreError(
                f"{path}: not a google-adk store (neither SQLite nor JSON lines of "
                "Session.model_dump_json())"
            )

    def _looks_exported(self) -> bool:
        """Whether the first session line reads as a Session (a file of
        blank lines holds none: it is no export); a line over 1 MiB is only
        checked to open an object, the scan reads it."""
        first = b""
        while not first.strip():
            first = self._file.readline(_SNIFF_BYTES)
            if not first:
                break
        self._file.seek(0)
        first = first.strip()
        if not first:
            return False  # blank lines only: no session in it
        if len(first) >= _SNIFF_BYTES - 1:
            return first.startswith(b"{")
        try:
            document = json.loads(first)
        except ValueError:
            return False
        return isinstance(document, dict) and isinstance(document.get("events"), list)

    def total(self) -> int | None:
        return self.path.stat().st_size

    def sessions(self) -> Iterator[tuple[StoredSession | None, int]]:
        for number, line in enumerate(self._file, 1):
            if not line.strip():
                yield None, len(line)
                continue
            session = _exported_session(line, number)
            # A line that is not a session is reported whatever the filters
            # (by the one shard its line number falls in).
            if session.unreadable is not None:
                shard = self.filters.shard
                keys = (session.app_name, session.user_id, session.session_id)
                admitted = shard is None or shard.holds(*keys)
            else:
                admitted = self.filters.admit(session.app_name, session.user_id, session.session_id)
            yield (session if admitted else None), len(line)

    def close(self) -> None:
        self._file.close()


def _exported_session(line: bytes, number: int) -> StoredSession:
    """One export line's session: its events re-serialized compactly; a
    camelCase export (`by_alias=True`) goes through google-adk's Event model,
    which reads both spellings (the native reader takes field names)."""
    try:
        document = json.loads(line)
    except ValueError as error:
        return StoredSession("?", "?", f"line {number}", [], unreadable=f"not JSON: {error}")
    if not isinstance(document, dict) or not isinstance(document.get("events"), list):
        return StoredSession(
            "?", "?", f"line {number}", [], unreadable="not a Session (no `events` list)"
        )
    aliased = "appName" in document or "userId" in document
    app = document.get("appName" if aliased else "app_name")
    user = document.get("userId" if aliased else "user_id")
    session = StoredSession(str(app), str(user), str(document.get("id")), [], [])
    meta: list[tuple[Any, ...]] = []
    invocation_key = "invocationId" if aliased else "invocation_id"
    for event in document["events"]:
        session.rows.append(_alias_free(event) if aliased else _compact(event))
        if isinstance(event, dict):
            stamp = event.get("timestamp")
            known = float(stamp) if isinstance(stamp, (int, float)) else None
            if isinstance(stamp, bool):
                known = None
            meta.append((event.get("id"), event.get(invocation_key), known))
        else:
            meta.append((None, None, None))
    session.meta = meta
    return session


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _alias_free(event: object) -> str:
    from google.adk.events.event import Event
    from pydantic import ValidationError

    try:
        return Event.model_validate(event).model_dump_json(exclude_none=True)
    except (ValidationError, TypeError):
        # Unreadable as an Event: handed on as it is, and declined natively.
        return _compact(event)


class ServiceStore:
    """A `DatabaseSessionService` database read through google-adk's own
    loader (`get_session`): a non-SQLite URL (PostgreSQL, MySQL, ...), or a
    SQLite file of the legacy schema (each event pickled column by column),
    which only unpickling can read. Each session it loads is handed on as
    its events' JSON, in the order it loads them; pydantic Events are built,
    so this reads at google-adk's speed.

    The service sets up its tables when first used (nothing to do on a
    database it wrote; it would create what is missing): a SQLite file is
    therefore read through a private copy, and a database URL should name
    the real store."""

    order = ORDER_STORED

    def __init__(self, url: str, filters: Filters, *, kind: str, description: str) -> None:
        self.filters = filters
        self.kind = kind
        self.description = description
        self._url = url
        self._dir: Any = None

    @classmethod
    def legacy_copy(cls, path: Path, filters: Filters, *, label: str | None = None) -> ServiceStore:
        """The legacy-schema SQLite file at `path`, read through a copy."""
        import shutil
        import tempfile

        scratch = tempfile.TemporaryDirectory(prefix="adk-fastcompact-audit-")
        copy = Path(scratch.name) / "store.db"
        try:
            shutil.copyfile(path, copy)
        except OSError as error:
            scratch.cleanup()
            raise StoreError(f"{label or path}: cannot copy it to read: {error}") from error
        store = cls(
            f"sqlite+aiosqlite:///{copy}",
            filters,
            kind="database-legacy",
            description=(
                f"{label or path}: DatabaseSessionService (legacy pickled schema), read "
                "through google-adk's own loader on a private copy; events as it loads them"
            ),
        )
        store._dir = scratch
        return store

    def total(self) -> int | None:
        return None

    def sessions(self) -> Iterator[tuple[StoredSession | None, int]]:
        import asyncio
        import warnings

        from google.adk.sessions.database_session_service import DatabaseSessionService
        from sqlalchemy import text

        async def keys(service: DatabaseSessionService) -> list[tuple[str, str, str]]:
            async with service.db_engine.connect() as conn:
                rows = await conn.execute(text("SELECT app_name, user_id, id FROM sessions"))
                return [(str(a), str(u), str(i)) for a, u, i in rows]

        async def load(service: DatabaseSessionService, app: str, user: str, sid: str) -> Any:
            return await service.get_session(app_name=app, user_id=user, session_id=sid)

        with warnings.catch_warnings():
            # google-adk warns that a legacy schema is legacy, once per service.
            warnings.simplefilter("ignore")
            try:
                service = DatabaseSessionService(self._url)
            except Exception as error:  # a missing driver, a bad URL: exit 2
                raise StoreError(f"{self.description}: cannot open it: {error}") from error
            loop = asyncio.new_event_loop()
            try:
                try:
                    listed = loop.run_until_complete(keys(service))
                except Exception as error:
                    raise StoreError(
                        f"{self.description}: cannot list its sessions: {error}"
                    ) from error
                for app, user, sid in listed:
                    if not self.filters.admit(app, user, sid):
                        continue
                    try:
                        session = loop.run_until_complete(load(service, app, user, sid))
                    except Exception as error:  # reported per session, never aborts the scan
                        reason = f"unreadable through google-adk's loader: {error}"
                        yield StoredSession(app, user, sid, [], None, reason), 1
                        continue
                    events = [] if session is None else session.events
                    rows: list[str | bytes] = [e.model_dump_json(exclude_none=True) for e in events]
                    meta = [(e.id, e.invocation_id, e.timestamp) for e in events]
                    yield StoredSession(app, user, sid, rows, meta), 1
            finally:
                loop.run_until_complete(service.db_engine.dispose())
                loop.close()

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()


# -- export ----------------------------------------------------------------------------


def load_service(spec: str) -> BaseSessionService:
    """The session service `spec` names (`pkg.module:attr`): an instance, or a
    callable returning one. The current directory is importable.

    Raises:
      SettingsError: It cannot be loaded or is not a `BaseSessionService`.
    """
    from google.adk.sessions.base_session_service import BaseSessionService

    target = _load_attr(spec, "--service")
    if callable(target) and not isinstance(target, (type, BaseSessionService)):
        target = target()
    if not isinstance(target, BaseSessionService):
        raise SettingsError(f"{spec} is a {type(target).__name__}, not a BaseSessionService")
    return target


async def export_sessions(
    service: BaseSessionService,
    out: IO[str],
    *,
    app_name: str,
    user_id: str | None = None,
    session_id: str | None = None,
) -> int:
    """Writes the sessions of any `BaseSessionService` as JSON lines, one
    `Session.model_dump_json()` per line, each with its events in the order
    the service loads them. Returns the number of sessions written.

    `session_id` needs `user_id`. The export is what a service without a
    file of its own (Vertex AI, a custom one) is audited from.
    """
    if session_id is not None:
        if user_id is None:
            raise ValueError("a session id needs its user id")
        keys = [(user_id, session_id)]
    else:
        listed = await service.list_sessions(app_name=app_name, user_id=user_id)
        keys = [(session.user_id, session.id) for session in listed.sessions]
    written = 0
    for user, session_key in keys:
        session = await service.get_session(app_name=app_name, user_id=user, session_id=session_key)
        if session is None:
            continue
        out.write(session.model_dump_json())
        out.write("\n")
        written += 1
    return written


def _load_attr(spec: str, option: str) -> Any:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise SettingsError(f"{option} expects pkg.module:attr, got {spec!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise SettingsError(f"cannot import {module_name!r}: {error!r}") from error
    target: Any = module
    for name in attr.split("."):
        try:
            target = getattr(target, name)
        except AttributeError:
            raise SettingsError(f"{module_name!r} has no attribute {attr!r}") from None
    return target
