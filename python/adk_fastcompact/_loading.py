"""Session loads that decode each stored row once.

google-adk's SQL session services decode every stored event row on every
`get_session`: `SqliteSessionService` by `Event.model_validate_json` of the
row's `event_data`. A long session's rows do not change between turns, so
`install()` answers a row it has seen decode to the same Event twice by a
fresh copy of that decoding (`_native.stored_event`, whose memo is keyed
on the row's exact bytes; see docs/session-load.md). A row seen for the first
or second time, and a row whose two decodings differed, is decoded by
google-adk's own code, with its own exceptions.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from . import _lean_sql, _native

logger = logging.getLogger("adk_fastcompact")


def _shape(value: Any, out: list[Any]) -> None:
    """Appends what `==` does not compare: each model's class and set
    fields, in tree order."""
    if isinstance(value, BaseModel):
        out.append(type(value))
        out.append(frozenset(value.model_fields_set))
        for item in value.__dict__.values():
            _shape(item, out)
        extra = value.__pydantic_extra__
        if extra:
            _shape(extra, out)
    elif isinstance(value, (list, tuple)):
        out.append(len(value))
        for item in value:
            _shape(item, out)
    elif isinstance(value, dict):
        out.append(len(value))
        for item in value.values():
            _shape(item, out)
    else:
        out.append(type(value))


def same(first: Any, second: Any) -> bool:
    """Whether two decodings of one row are interchangeable: equal, with the
    same classes and set fields at every level."""
    if first != second:
        return False
    a: list[Any] = []
    b: list[Any] = []
    _shape(first, a)
    _shape(second, b)
    return a == b


def _copy(value: Any) -> Any:
    """A fresh copy of a kept decoding, by the native copier
    (docs/session-copy.md): a decoding holds no cycle and shares nothing, so
    its copy is interchangeable with another decoding. (The copy the memo
    keeps is then untracked from the cyclic garbage collector; the copies
    handed out are new objects, tracked as a decoding is: docs/session-load.md.)"""
    return _native.deep_copy_model(value)


def _sqlite_module() -> Any:
    from google.adk.sessions import sqlite_session_service

    return sqlite_session_service


#: `_stored_event_class`'s classes, by the Event class they stand for (made
#: once: a pydantic class costs milliseconds to build).
_stored_classes: dict[type, type] = {}


def _stored_event_class(event_class: Any) -> Any:
    """A subclass of `event_class` whose `model_validate_json` of one stored
    row is answered through the row memo (the objects it returns are
    `event_class`'s)."""
    made = _stored_classes.get(event_class)
    if made is not None:
        return made
    from ._patch import carry_names

    decode = event_class.model_validate_json

    # google-adk's Event, whose `model_validate_json` of one stored row is
    # answered through the row memo. It stands where `Event` stood, so it
    # carries its names and docstring (pydantic's JSON schema reads the
    # docstring); its `model_validate_json` carries pydantic's names and
    # signature (`__wrapped__`), which it overrides, and hands any call but
    # the one of a row (a wrong one too: pydantic's binding raises its
    # `TypeError`) to pydantic's.
    class StoredEvent(event_class):  # type: ignore[misc,valid-type]
        @classmethod
        def model_validate_json(cls, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            if kwargs or len(args) != 1:
                return decode(*args, **kwargs)
            return _native.stored_event(args[0], decode, _copy, same)

    validate = vars(StoredEvent)["model_validate_json"].__func__
    carry_names(validate, decode.__func__)
    validate.__wrapped__ = decode.__func__
    for name in ("__name__", "__qualname__", "__module__", "__doc__"):
        setattr(StoredEvent, name, getattr(event_class, name))
    _stored_classes[event_class] = StoredEvent
    return StoredEvent


def hook_sqlite() -> Callable[[], None] | None:
    """Makes `SqliteSessionService.get_session` decode its rows through the
    memo; returns the undo, or None (logged) where its code is not the
    shape this relies on."""
    try:
        module = _sqlite_module()
    except ImportError as error:  # its driver (aiosqlite) is not installed
        logger.info("adk_fastcompact: SqliteSessionService not importable: %s", error)
        return None
    from google.adk.events.event import Event

    # (Through wrappers that name what they wrap, as functools.wraps does.)
    source = inspect.getsource(inspect.unwrap(module.SqliteSessionService.get_session))
    if module.__dict__.get("Event") is not Event or source.count("Event.model_validate_json(") != 1:
        logger.info(
            "adk_fastcompact: SqliteSessionService.get_session left as it is"
            " (its rows are not decoded by one Event.model_validate_json call)"
        )
        return None
    from ._patch import hooked_as

    StoredEvent = _stored_event_class(Event)
    module.Event = StoredEvent
    hooked_as(module, "Event", Event, StoredEvent)
    hooked_as(
        StoredEvent,
        "model_validate_json",
        Event.model_validate_json,
        StoredEvent.model_validate_json,
    )

    def undo() -> None:
        if module.__dict__.get("Event") is StoredEvent:
            module.Event = Event

    return undo


#: The `do_orm_execute` listener `hook_database` registered, while it is.
listener: Callable[[Any], Any] | None = None


class _Loaded:
    """Stands for a StorageEvent row whose Event is already made."""

    __slots__ = ("event",)

    def __init__(self, event: Any) -> None:
        self.event = event

    def to_event(self) -> Any:
        return self.event


def hook_database() -> Callable[[], None] | None:
    """Makes `DatabaseSessionService.get_session` (schema v1) select the
    event rows' columns instead of ORM objects and decode each row through
    the memo; returns the undo, or None (logged) where its code is not the
    shape this relies on.

    google-adk's own statement runs, with its filters, ordering and limit,
    through the service's own session: a `do_orm_execute` listener, active
    only inside `get_session`, swaps the selected entity for its `id`,
    `invocation_id`, `timestamp` and the `event_data` text, and answers
    with stand-ins whose `to_event()` is the Event. A row is decoded as the
    ORM would decode it (the column types' own result processing) and
    turned into an Event by google-adk's own `StorageEvent.to_event`.
    Under a lean load (`_lean_sql`) the stand-ins are those of the rows the
    turn reads only (`_lean_sql.database_rows`).
    """
    import contextvars
    import json

    from ._patch import carry_names, hooked_as, same_parameters

    try:
        from google.adk.sessions import database_session_service as dss
        from google.adk.sessions.schemas import v1
        from sqlalchemy import Text, cast, event, type_coerce
        from sqlalchemy.engine.result import IteratorResult, SimpleResultMetaData
        from sqlalchemy.orm import Session as OrmSession
    except ImportError as error:  # google-adk's "db" extra is not installed
        logger.info("adk_fastcompact: DatabaseSessionService not importable: %s", error)
        return None

    service = dss.DatabaseSessionService
    original: Any = service.__dict__.get("get_session")
    source = inspect.getsource(original) if original is not None else ""
    if (
        "select(schema.StorageEvent)" not in source
        or "e.to_event() for e in reversed(storage_events)" not in source
    ):
        logger.info(
            "adk_fastcompact: DatabaseSessionService.get_session left as it is"
            " (not the shape whose event query this selects columns of)"
        )
        return None
    storage_event = v1.StorageEvent
    json_type: Any = storage_event.__table__.c.event_data.type
    active: contextvars.ContextVar[bool] = contextvars.ContextVar(
        "adk_fastcompact_database_load", default=False
    )
    columns = (storage_event.id, storage_event.invocation_id, storage_event.timestamp)

    def loaded(row: Any, dialect: Any) -> Any:
        event_id, invocation_id, timestamp, text = row

        def decode(_key: Any) -> Any:
            if text is None:
                data = None
            elif dialect.name == "postgresql":
                loads = getattr(dialect, "_json_deserializer", None) or json.loads
                data = json_type.process_result_value(loads(text), dialect)
            else:
                data = json_type.process_result_value(text, dialect)
            return storage_event(
                id=event_id, invocation_id=invocation_id, timestamp=timestamp, event_data=data
            ).to_event()

        if text is None or not isinstance(event_id, str) or not isinstance(invocation_id, str):
            return _Loaded(decode(None))
        key = f"{len(event_id)}:{event_id}{len(invocation_id)}:{invocation_id}{timestamp!r}\0{text}"
        return _Loaded(_native.stored_event(key, decode, _copy, same))

    def on_execute(state: Any) -> Any:
        if not active.get() or not state.is_select:
            return None
        statement = state.statement
        described = statement.column_descriptions
        if len(described) != 1 or described[0].get("expr") is not storage_event:
            return None
        dialect = state.session.get_bind(mapper=storage_event.__mapper__).dialect
        data = (
            cast(storage_event.event_data, Text)
            if dialect.name == "postgresql"
            else type_coerce(storage_event.event_data, Text)
        )
        load = _lean_sql.taking()
        lean = None
        if load is not None:
            lean = _lean_sql.database_rows(
                load, state, statement, columns, data, lambda row: loaded(row, dialect)
            )
        if lean is not None:
            stand_ins = [(stand_in,) for stand_in in lean]
        else:
            rows = state.invoke_statement(
                statement=statement.with_only_columns(*columns, data)
            ).all()
            stand_ins = [(loaded(row, dialect),) for row in rows]
        return IteratorResult(SimpleResultMetaData(["StorageEvent"]), iter(stand_ins))

    # google-adk's parameters, so that a wrong call raises its `TypeError`
    # at the call, as its coroutine function does (checked below), under
    # its names (`carry_names`).
    async def get_session(
        self: Any, *, app_name: Any, user_id: Any, session_id: Any, config: Any = None
    ) -> Any:
        token = active.set(True)
        try:
            return await _lean_sql.database_get_session(
                lambda: original(
                    self, app_name=app_name, user_id=user_id, session_id=session_id, config=config
                ),
                self,
                app_name,
                user_id,
                session_id,
                config,
            )
        finally:
            active.reset(token)

    if not same_parameters(get_session, original):
        logger.info(
            "adk_fastcompact: DatabaseSessionService.get_session left as it is"
            " (its parameters are not the ones this hook takes)"
        )
        return None
    carry_names(get_session, original)
    get_session.__wrapped__ = original  # type: ignore[attr-defined]
    global listener
    event.listen(OrmSession, "do_orm_execute", on_execute)
    listener = on_execute
    service.get_session = get_session  # type: ignore[method-assign]
    hooked_as(service, "get_session", original, get_session)

    def undo() -> None:
        global listener
        if service.__dict__.get("get_session") is get_session:
            service.get_session = original  # type: ignore[method-assign]
        event.remove(OrmSession, "do_orm_execute", on_execute)
        listener = None

    return undo
