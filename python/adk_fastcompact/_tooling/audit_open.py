"""Opening the store an audit names: a SQLite file, a JSON-lines export, a
SQLAlchemy URL (SQLite, PostgreSQL natively; any other database through
google-adk's own loader), or `env:NAME`, the URL held by the environment
variable NAME (so that a password never stands on a command line, in a
Dask task or in a report)."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from .audit_postgres import PostgresStore
from .audit_stores import (
    _SQLITE_MAGIC,
    Filters,
    JsonLinesStore,
    ServiceStore,
    SqliteStore,
    Store,
    StoreError,
    _LegacySchema,
)

ENV_PREFIX = "env:"

_PASSWORD = re.compile(r"(://[^:/@]*:)[^@/]*@")


def open_store(spec: str, filters: Filters) -> Store:
    """Opens the store `spec` names: a SQLite file, a SQLAlchemy URL, a
    JSON-lines export, or `env:NAME` (the URL in the environment variable NAME).

    Raises:
      StoreError: It does not exist, cannot be read, or is not a google-adk store.
    """
    if spec.startswith(ENV_PREFIX):
        name = spec[len(ENV_PREFIX) :]
        value = os.environ.get(name)
        if not name or not value:
            raise StoreError(f"{spec}: the environment variable {name or '(none)'} is not set")
        spec = value
    if "://" in spec or spec.startswith("sqlite:"):
        return _open_url(spec, filters)
    path = Path(spec)
    if not path.exists():
        raise StoreError(f"{spec}: no such file")
    if not path.is_file():
        raise StoreError(f"{spec}: not a file")
    try:
        with path.open("rb") as file:
            head = file.read(len(_SQLITE_MAGIC))
    except OSError as error:
        raise StoreError(f"{spec}: {error.strerror}") from error
    if not head:
        raise StoreError(
            f"{spec}: an empty file, not a store (neither a SQLite file nor JSON lines "
            "of Session.model_dump_json())"
        )
    if head == _SQLITE_MAGIC:
        try:
            return SqliteStore(path, filters)
        except _LegacySchema:
            return ServiceStore.legacy_copy(path, filters)
    return JsonLinesStore(path, filters)


def masked(url: str) -> str:
    """`url` with the password of its `user:password@` hidden."""
    return _PASSWORD.sub(r"\1***@", url)


def _open_url(url: str, filters: Filters) -> Store:
    try:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError
    except ImportError as error:  # pragma: no cover - google-adk requires it
        raise StoreError(f"{masked(url)}: reading a database URL needs SQLAlchemy") from error
    try:
        parsed = make_url(url)
    except ArgumentError as error:
        raise StoreError(f"{masked(url)}: not a SQLAlchemy URL") from error
    backend = parsed.get_backend_name()
    shown = parsed.render_as_string(hide_password=True)
    if backend == "postgresql":
        try:
            return PostgresStore(url, filters, shown=shown)
        except _LegacySchema:
            pass
    if backend != "sqlite":
        schema = " (legacy pickled schema)" if backend == "postgresql" else ""
        return ServiceStore(
            url,
            filters,
            kind="database-url",
            description=(
                f"{shown}: DatabaseSessionService ({backend}){schema}, read through "
                "google-adk's own loader; events as it loads them"
            ),
        )
    database = parsed.database
    if not database or database == ":memory:" or database.startswith("file:"):
        raise StoreError(f"{url}: not a SQLite file URL")
    path = Path(database)
    if not path.is_file():
        raise StoreError(f"{url}: no such file {database}")
    try:
        return SqliteStore(path, filters, label=url)
    except _LegacySchema:
        return ServiceStore.legacy_copy(path, filters, label=url)


@contextlib.contextmanager
def opened(spec: str, filters: Filters) -> Iterator[Store]:
    """`open_store`, closed on exit."""
    store = open_store(spec, filters)
    try:
        yield store
    finally:
        store.close()
