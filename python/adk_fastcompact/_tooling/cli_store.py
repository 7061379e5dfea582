"""`prepare-store`: the index that keeps a lean load's queries within its
session (docs/lean-loading.md, "Indexes")."""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
from typing import Any

from .cli_args import error_line

ENV_PREFIX = "env:"

#: google-adk's own index of the per-session event queries
#: (`schemas.v1.StorageEvent`), created where an events table has no index
#: leading with the session's key.
INDEX = "idx_events_app_user_session_ts_id"

#: That index's DDL on SQLite, for a SqliteSessionService file, which
#: google-adk alone (no SQLAlchemy) writes: what SQLAlchemy compiles of
#: google-adk's `Index` (tests/lean/test_sql_prepare_store.py compares).
SQLITE_INDEX_DDL = (
    f"CREATE INDEX IF NOT EXISTS {INDEX} ON events "
    "(app_name, user_id, session_id, timestamp DESC, id DESC)"
)

_NO_EVENTS = "no events table: not a google-adk session store"
_UNINDEXED = "the events table has no index leading with (app_name, user_id, session_id, timestamp)"
_INDEXED = "the events table is indexed by session and timestamp already"
_CREATED = f"created {INDEX} on events (app_name, user_id, session_id, timestamp, id)"


def store_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    prepare = commands.add_parser(
        "prepare-store",
        help="index a session store's events by session for lean loading",
        description=(
            "Make sure a session store's events table has an index leading with "
            "(app_name, user_id, session_id, timestamp), so that a lean load's queries "
            "read only the session's rows since its last load. google-adk 2.13's "
            f"DatabaseSessionService creates {INDEX} itself; where it is not there "
            "(SqliteSessionService's files, older stores), this creates google-adk's own "
            f"{INDEX} on (app_name, user_id, session_id, timestamp DESC, id DESC). "
            "Nothing else is changed. Exit status: 0 when the index is there (or was "
            "made), 1 with --check when it is not, 2 when the store cannot be read."
        ),
    )
    prepare.add_argument(
        "store",
        metavar="STORE",
        help=(
            "a SqliteSessionService file, a DatabaseSessionService URL "
            "(sqlite+aiosqlite:///..., postgresql+asyncpg://...), or env:NAME, the URL in "
            "the environment variable NAME"
        ),
    )
    prepare.add_argument(
        "--check",
        action="store_true",
        help="only say whether the index is there (exit status 1 when it is not)",
    )


def _url(spec: str) -> str:
    """The store `spec` names: a SQLAlchemy URL, or the path of a file."""
    if spec.startswith(ENV_PREFIX):
        name = spec[len(ENV_PREFIX) :]
        value = os.environ.get(name)
        if not name or not value:
            raise ValueError(f"the environment variable {name or '(none)'} is not set")
        spec = value
    if "://" in spec or spec.startswith("sqlite:"):
        from sqlalchemy.engine import make_url

        url = make_url(spec)
        if url.get_backend_name() == "sqlite" and url.get_driver_name() != "aiosqlite":
            # SqliteSessionService takes sqlite:///PATH too.
            url = url.set(drivername="sqlite+aiosqlite")
        return url.render_as_string(hide_password=False)
    if not os.path.isfile(spec):
        raise ValueError("no such file")
    return spec


def _prepare_file(path: str, check: bool) -> tuple[int, str]:
    """`_prepare` of a SQLite file, by the standard library's `sqlite3`
    (a SqliteSessionService file needs no SQLAlchemy)."""
    from contextlib import closing

    from .._lean_sql import SQLITE_INDEXES, leads, sqlite_columns, sqlite_index_columns

    with closing(sqlite3.connect(f"file:{path}?mode=rw", uri=True)) as db:
        found = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'"
        ).fetchone()
        if found is None:
            return 2, _NO_EVENTS
        for index in db.execute(SQLITE_INDEXES).fetchall():
            if leads(sqlite_columns(db.execute(sqlite_index_columns(index[1])).fetchall())):
                return 0, _INDEXED
        if check:
            return 1, _UNINDEXED
        with db:
            db.execute(SQLITE_INDEX_DDL)
    return 0, _CREATED


def _prepare(connection: Any, check: bool) -> tuple[int, str]:
    """What the store's events table has, after making the index unless
    `check`: `(status, message)`."""
    from google.adk.sessions.schemas import v1
    from sqlalchemy import inspect

    from .._lean_sql import session_indexed

    inspector = inspect(connection)
    if not inspector.has_table("events"):
        return 2, _NO_EVENTS
    if session_indexed(connection):
        return 0, _INDEXED
    if check:
        return 1, _UNINDEXED
    table: Any = v1.StorageEvent.__table__
    index = next(ix for ix in table.indexes if ix.name == INDEX)
    index.create(bind=connection, checkfirst=True)
    return 0, _CREATED


async def _run(url: str, check: bool) -> tuple[int, str]:
    if "://" not in url:
        return _prepare_file(url, check)
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            return await connection.run_sync(_prepare, check)
    finally:
        await engine.dispose()


async def prepare_store(store: str) -> str:
    """Prepares `store` (as `prepare-store STORE` does); what it did.

    Raises:
      ValueError: The store is not a google-adk session store.
    """
    status, message = await _run(_url(store), check=False)
    if status:
        raise ValueError(f"{store}: {message}")
    return message


def run_prepare_store(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console(stderr=True)
    try:
        url = _url(args.store)
        status, message = asyncio.run(_run(url, args.check))
    except Exception as error:  # the store's driver's own errors, named
        error_line(console, f"{args.store}: {error}")
        return 2
    if status == 2:
        error_line(console, f"{args.store}: {message}")
    else:
        print(message)
    return status
