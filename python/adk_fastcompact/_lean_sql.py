"""Lean loads of the SQL session services: only the rows a turn reads are
decoded.

Under a filled `LeanSessionConfig` (`_lean.for_run`), `get_session` of
`SqliteSessionService` and of `DatabaseSessionService` (schema v1) lists
the session's rows (event id, invocation id, timestamp: a light query, in
the store's own order), reads the rows it has not seen before natively
into views (`_native.LeanRows`, one per service object; rows are
append-only, see docs/lean-loading.md), asks `core::lean::needed`
which the turn reads, and fetches and decodes only those, by google-adk's
own decoder (through the row memo, `_loading`). Everything else (the
session row, the state merge, the Session, a missing session's `None`) is
google-adk's own code:

- `SqliteSessionService`: google-adk's `get_session` runs with
  `GetSessionConfig(num_recent_events=0)` (its metadata-only read), then
  the events are read over the service's own connection and set on the
  Session it returned;
- `DatabaseSessionService`: google-adk's `get_session` runs as it is
  (`_loading`'s hook of it calls `database_get_session`), and the
  `do_orm_execute` listener of `_loading` answers its event query
  (`database_rows`) from queries derived from google-adk's own statement
  (its filters and ordering), in its own transaction.

Whatever cannot be loaded lean (a row that does not parse, a session that
changed between two queries, the legacy pickled schema) is loaded whole by
google-adk, counted and logged once (`_lean._fell_back`).
"""

from __future__ import annotations

import logging
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from typing import Any

from . import _native

logger = logging.getLogger(__name__)

#: Rows fetched per `IN (...)` list (within every backend's bound-parameter
#: limit).
CHUNK = 500


def _chunks(wanted: Sequence[Any], listed: int) -> list[list[Any]]:
    """`wanted` (keys of rows of a listing of `listed` rows) in lists of at
    most `CHUNK`; one empty list (a scan of the session's rows) where they
    are more than half the listing."""
    if 2 * len(wanted) > listed:
        return [[]]
    return [list(wanted[i : i + CHUNK]) for i in range(0, len(wanted), CHUNK)]


#: How lean loads listed the session's rows: `"since the last load"` or
#: `"whole"` (the first load of a session in a process, or one whose rows
#: before the last load's newest stamp changed).
listings: Counter[str] = Counter()

_caches: weakref.WeakKeyDictionary[Any, _native.LeanRows] = weakref.WeakKeyDictionary()
_indexed: set[str] = set()


def rows_of(service: Any) -> _native.LeanRows:
    """The rows `service`'s lean loads have read (made on first use)."""
    rows = _caches.get(service)
    if rows is None:
        rows = _caches[service] = _native.LeanRows()
    return rows


def _key(app_name: str, user_id: str, session_id: str) -> str:
    return f"{len(app_name)}:{app_name}{len(user_id)}:{user_id}{session_id}"


def _filled(config: Any) -> bool:
    """Whether `config` is a filled `LeanSessionConfig`; a bare one (exact
    mode's run, a direct call) is counted as a whole load, as the in-memory
    service counts it."""
    from ._lean import LeanSessionConfig

    if not isinstance(config, LeanSessionConfig):
        return False
    if not config._filled:
        _fell_back("not filled by a Runner run (exact mode, or a direct call)")
    return config._filled


def _positions(listing: _native.LeanListing, config: Any) -> list[int] | None:
    window = config._window
    return listing.needed(
        window[0] if window else None,
        window[1] if window else 0,
        config._rules,
        list(config._underway),
        list(config._answering),
    )


def _lean_counted() -> None:
    from . import _lean

    _lean._stats["lean"] += 1


def _fell_back(reason: str) -> None:
    from . import _lean

    _lean._fell_back(reason)


# ---------------------------------------------------------------- SQLite

_SQLITE_SESSION = " WHERE app_name=? AND user_id=? AND session_id=?"
_SQLITE_ORDER = " ORDER BY timestamp DESC, rowid DESC"
_SQLITE_LIST = "SELECT id, invocation_id, timestamp, rowid FROM events" + _SQLITE_SESSION
_SQLITE_COUNT = "SELECT count(*) FROM events" + _SQLITE_SESSION
_SQLITE_ROWS = "SELECT rowid, id, event_data FROM events" + _SQLITE_SESSION
#: Rows by rowid, the session's columns checked on them (`+` keeps SQLite
#: from scanning the session's index for them).
_SQLITE_ROWIDS = (
    "SELECT rowid, id, event_data FROM events"
    " WHERE +app_name=? AND +user_id=? AND +session_id=? AND rowid IN "
)


async def _sqlite_texts(
    db: Any, params: Sequence[str], listing: _native.LeanListing, at: Sequence[int]
) -> list[Any] | None:
    """The `event_data` of the listed rows at `at`, in that order; None
    where one is no longer stored as listed."""
    keys = listing.keys(list(at))
    wanted = {rowid: event_id for event_id, rowid in keys}
    found: dict[int, Any] = {}
    for chunk in _chunks(list(wanted), len(listing)):
        sql = _SQLITE_ROWIDS + f"({','.join('?' * len(chunk))})" if chunk else _SQLITE_ROWS
        for rowid, event_id, text in await db.execute_fetchall(sql, [*params, *chunk]):
            if wanted.get(rowid) == event_id:
                found[rowid] = text
    if len(found) < len(wanted):
        return None
    return [found[rowid] for _, rowid in keys]


async def _sqlite_listing(db: Any, service: Any, params: Sequence[str]) -> Any:
    """The session's rows as a lean load lists them: those stamped from the
    last load's newest stamp on, with the count of all (the rows before
    that stamp are the last load's when the counts agree: rows are
    appended, never rewritten); else all of them. None where a row's
    columns are not google-adk's."""
    cache = rows_of(service)
    key = _key(*params)
    horizon = cache.horizon(key)
    if horizon is not None:
        # The count first: a row stored between the two queries is then
        # listed but not counted, and the session is listed whole.
        ((count,),) = await db.execute_fetchall(_SQLITE_COUNT, params)
        tail = await db.execute_fetchall(
            _SQLITE_LIST + " AND timestamp >= ?" + _SQLITE_ORDER, (*params, horizon)
        )
        listing = cache.tail_listing(key, list(reversed(tail)), count)
        if listing is not None:
            _listed("since the last load")
            return listing
    rows = await db.execute_fetchall(_SQLITE_LIST + _SQLITE_ORDER, params)
    _listed("whole")
    return cache.listing(key, list(reversed(rows)))


def _listed(how: str) -> None:
    listings[how] += 1


async def _sqlite_events(service: Any, session: Any, config: Any) -> list[Any] | None:
    """The events a turn reads of `session` (loaded by google-adk without
    its events), in the store's order; None (counted) where it loads
    whole."""
    from ._loading import _sqlite_module

    params = (session.app_name, session.user_id, session.id)
    async with service._get_db_connection() as db:
        await _sqlite_warn_unindexed(db, service)
        listing = await _sqlite_listing(db, service, params)
        if listing is None:
            _fell_back("a row's columns are not google-adk's")
            return None
        missing = listing.missing
        texts: dict[int, Any] = {}
        if missing:
            read = await _sqlite_texts(db, params, listing, missing)
            if read is None:
                _fell_back("the session changed between two queries")
                return None
            error = listing.parse(missing, read)
            if error is not None:
                _fell_back("a stored row does not parse")
                logger.info("adk_fastcompact: %s", error)
                return None
            texts = dict(zip(missing, read, strict=True))
        keep = _positions(listing, config)
        if keep is None:
            _fell_back("events not read exactly")
            return None
        fetch = [i for i in keep if i not in texts]
        if fetch:
            read = await _sqlite_texts(db, params, listing, fetch)
            if read is None:
                _fell_back("the session changed between two queries")
                return None
            texts.update(zip(fetch, read, strict=True))
        async with db.execute(
            "SELECT 1 FROM sessions WHERE app_name=? AND user_id=? AND id=?", params
        ) as cursor:
            if await cursor.fetchone() is None:
                _fell_back("the session changed between two queries")
                return None
    # google-adk's decoder, as its `get_session` calls it (the row memo's
    # where `install()` hooked it).
    decode = _sqlite_module().Event.model_validate_json
    return [decode(texts[i]) for i in keep]


def _sqlite_get_session(original: Callable[..., Any]) -> Callable[..., Any]:
    """`SqliteSessionService.get_session`, lean under a filled
    `LeanSessionConfig`."""
    from google.adk.sessions.base_session_service import GetSessionConfig

    async def get_session(
        self: Any,
        *,
        app_name: Any,
        user_id: Any,
        session_id: Any,
        config: Any = None,
    ) -> Any:
        filled = _filled(config)
        if filled and hasattr(self, "_get_db_connection"):
            session = await original(
                self,
                app_name=app_name,
                user_id=user_id,
                session_id=session_id,
                config=GetSessionConfig(num_recent_events=0),
            )
            if session is None:
                return None
            events = await _sqlite_events(self, session, config)
            if events is not None:
                session.events = events
                _lean_counted()
                return session
            config = None
        elif filled:
            _fell_back("SqliteSessionService has no connection of its own")
        return await original(
            self, app_name=app_name, user_id=user_id, session_id=session_id, config=config
        )

    return get_session


# -------------------------------------------------------------- Database


class _Load:
    """A lean load of `DatabaseSessionService` under way: taken by the
    listener's first event query."""

    __slots__ = ("config", "key", "lean", "service", "taken")

    def __init__(self, service: Any, key: str, config: Any) -> None:
        self.service = service
        self.key = key
        self.config = config
        #: Taken by an event query; answered lean.
        self.taken = False
        self.lean = False


_load: ContextVar[_Load | None] = ContextVar("adk_fastcompact_lean_sql_load", default=None)


def taking() -> _Load | None:
    """The lean load under way, once (its first event query takes it)."""
    load = _load.get()
    if load is None or load.taken:
        return None
    load.taken = True
    return load


#: The columns an index of the events table leads with for a lean load's
#: queries to read only the session's rows from the last load's newest
#: stamp on (`adk-fastcompact prepare-store` creates google-adk's own).
LEAD = ("app_name", "user_id", "session_id", "timestamp")


def _say_unindexed(store: str) -> None:
    logger.warning(
        "adk_fastcompact: the events table of %s has no index on"
        " (app_name, user_id, session_id, timestamp): each lean load reads all"
        " of the session's rows; `adk-fastcompact prepare-store STORE` creates"
        " google-adk's own index",
        store,
    )


#: SQLite's catalog queries for `leads`: the events table's indexes (the
#: primary key's included), then each one's columns.
SQLITE_INDEXES = "PRAGMA index_list(events)"


def sqlite_index_columns(name: str) -> str:
    """SQLite's catalog query of index `name`'s columns ((seqno, cid, name)
    rows)."""
    return "PRAGMA index_info(" + '"' + name.replace('"', '""') + '")'


def leads(columns: Sequence[Any]) -> bool:
    """Whether an index of `columns` (names in key order) leads with `LEAD`."""
    return tuple(columns[: len(LEAD)]) == LEAD


def sqlite_columns(info: Sequence[Any]) -> list[Any]:
    """The column names of SQLite's `index_info` rows, in key order."""
    return [column[2] for column in sorted(tuple(column) for column in info)]


async def _sqlite_warn_unindexed(db: Any, service: Any) -> None:
    """Logs once per `SqliteSessionService` file that its events table has
    no index leading with `LEAD` (its primary key leads with the session
    only)."""
    store = str(getattr(service, "_db_path", service))
    if store in _indexed:
        return
    _indexed.add(store)
    try:
        for index in await db.execute_fetchall(SQLITE_INDEXES):
            info = await db.execute_fetchall(sqlite_index_columns(index[1]))
            if leads(sqlite_columns(info)):
                return
    except Exception as error:  # a look at the catalog must not fail a load
        logger.info("adk_fastcompact: the events table's indexes not read: %s", error)
        return
    _say_unindexed(store)


def _warn_unindexed(state: Any) -> None:
    """Logs once per database that its events table has no index leading
    with `LEAD`."""
    try:
        connection = state.session.connection()
        url = connection.engine.url.render_as_string(hide_password=True)
        if url in _indexed:
            return
        _indexed.add(url)
        if not session_indexed(connection):
            _say_unindexed(url)
    except Exception as error:  # a look at the catalog must not fail a load
        logger.info("adk_fastcompact: the events table's indexes not read: %s", error)


def session_indexed(connection: Any) -> bool:
    """Whether the `events` table has an index (or primary key) leading with
    `LEAD`."""
    from sqlalchemy import inspect

    inspector = inspect(connection)
    keys = [inspector.get_pk_constraint("events").get("constrained_columns") or []]
    keys += [ix.get("column_names") or [] for ix in inspector.get_indexes("events")]
    return any(leads(k) for k in keys)


def database_rows(
    load: _Load,
    state: Any,
    statement: Any,
    columns: Sequence[Any],
    data: Any,
    loaded: Callable[[Any], Any],
) -> list[Any] | None:
    """What google-adk's event query (`statement`) answers under a lean
    load: stand-ins (`loaded` of a row of `columns` and `data`) of only the
    rows the turn reads, in the statement's order; None (counted) where the
    load is whole (the statement then runs as it is)."""
    from google.adk.sessions.schemas.shared import utc_datetime_to_timestamp
    from sqlalchemy import func

    _warn_unindexed(state)
    event_id = columns[0]

    def run(stmt: Any) -> list[Any]:
        return list(state.invoke_statement(statement=stmt).all())

    # The session's rows as the SQLite service's lean load lists them
    # (`_sqlite_listing`): from the last load's newest stamp on, with the
    # count of all, else all; google-adk orders newest first and
    # reverses, a listing is oldest first.
    cache = rows_of(load.service)
    listing = None
    horizon = cache.horizon(load.key)
    if horizon is not None:
        counting = statement.with_only_columns(func.count(), maintain_column_froms=True)
        count = state.invoke_statement(statement=counting.order_by(None)).scalar()
        tail = run(statement.with_only_columns(*columns).where(columns[2] >= horizon))
        listing = cache.tail_listing(load.key, tail[::-1], count, columns=True)
        if listing is not None:
            _listed("since the last load")
    if listing is None:
        rows = run(statement.with_only_columns(*columns))[::-1]
        _listed("whole")
        listing = cache.listing(load.key, rows, columns=True)
    if listing is None:
        _fell_back("a row's columns are not google-adk's")
        return None

    def fetch(at: Sequence[int]) -> dict[int, Any] | None:
        keys = listing.keys(list(at))
        wanted = {key: i for i, (key, _) in zip(at, keys, strict=True)}
        full = statement.with_only_columns(*columns, data)
        stmts = [
            full.where(event_id.in_(chunk)) if chunk else full
            for chunk in _chunks(list(wanted), len(listing))
        ]
        found: dict[int, Any] = {}
        for stmt in stmts:
            for row in run(stmt):
                i = wanted.get(row[0])
                if i is not None:
                    found[i] = row
        if len(found) != len(wanted):
            return None
        at_found = list(found)
        if not listing.holds(at_found, [tuple(found[i][:3]) for i in at_found]):
            return None
        return found

    missing = listing.missing
    got: dict[int, Any] = {}
    if missing:
        read = fetch(missing)
        if read is None:
            _fell_back("the session changed between two queries")
            return None
        got = read
        texts = [got[i][3] for i in missing]
        stamps = [
            None if got[i][2] is None else utc_datetime_to_timestamp(got[i][2]) for i in missing
        ]
        error = listing.parse(missing, texts, stamps)
        if error is not None:
            _fell_back("a stored row does not parse")
            logger.info("adk_fastcompact: %s", error)
            return None
    keep = _positions(listing, load.config)
    if keep is None:
        _fell_back("events not read exactly")
        return None
    more = [i for i in keep if i not in got]
    if more:
        read = fetch(more)
        if read is None:
            _fell_back("the session changed between two queries")
            return None
        got.update(read)
    load.lean = True
    return [loaded(got[i]) for i in reversed(keep)]


async def database_get_session(
    load_whole: Callable[[], Awaitable[Any]],
    service: Any,
    app_name: Any,
    user_id: Any,
    session_id: Any,
    config: Any,
) -> Any:
    """`DatabaseSessionService.get_session` as `_loading`'s hook runs it
    (`load_whole`: google-adk's, with the listener active), lean under a
    filled `LeanSessionConfig` (its event query answered by
    `database_rows`)."""
    if not _filled(config):
        return await load_whole()
    load = _Load(service, _key(app_name, user_id, session_id), config)
    token = _load.set(load)
    try:
        session = await load_whole()
    finally:
        _load.reset(token)
    if session is not None and not load.taken:
        _fell_back("legacy (pickled) schema")
    if load.lean:
        _lean_counted()
    return session


def _database_unhooked(original: Callable[..., Any]) -> Callable[..., Any]:
    """`DatabaseSessionService.get_session` where `_loading` left it as it
    is: a lean run's load is whole, counted."""

    async def get_session(
        self: Any,
        *,
        app_name: Any,
        user_id: Any,
        session_id: Any,
        config: Any = None,
    ) -> Any:
        if _filled(config):
            _fell_back("DatabaseSessionService's event query not hooked")
            config = None
        return await original(
            self, app_name=app_name, user_id=user_id, session_id=session_id, config=config
        )

    return get_session


Target = tuple[Any, str, Callable[[Callable[..., Any]], Callable[..., Any]]]


def sqlite_targets() -> list[Target]:
    """`(owner, name, wrap)` of `SqliteSessionService.get_session`, which
    loads lean, for `_lean.hook_methods` (none where it is not importable)."""
    try:
        from google.adk.sessions.sqlite_session_service import SqliteSessionService
    except ImportError:  # its driver (aiosqlite) is not installed
        return []
    return [(SqliteSessionService, "get_session", _sqlite_get_session)]


def database_targets() -> list[Target]:
    """`DatabaseSessionService.get_session` where `_loading` left it as it
    is (its lean runs then load whole, counted)."""
    from google.adk.sessions.database_session_service import DatabaseSessionService

    return [(DatabaseSessionService, "get_session", _database_unhooked)]
