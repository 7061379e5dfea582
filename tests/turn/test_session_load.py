"""Session loads through the row memo (`_loading`, `_native.stored_event`).

With `install()`, `SqliteSessionService` and `DatabaseSessionService`
answer a stored row decoded twice to equal Events by a fresh copy. Each
load must return what google-adk's own code returns from the same rows:
equal sessions, byte-identical `model_dump_json()`, the same classes and
set fields at every level, objects the caller may mutate without touching
later loads, and google-adk's own exception for a corrupt row.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sqlite3
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import adk_fastcompact
import pytest
from adk_fastcompact import _native
from adk_fastcompact._tooling.sessions import build_session
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions import sqlite_session_service
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types
from pydantic import BaseModel

APP, USER, SID = "app", "user", "s1"


def _special_events(start: float) -> list[Event]:
    """Events of the shapes real traffic stores: ModelContent with thoughts,
    UserContent, inline bytes, metadata, state deltas, long-running ids."""
    return [
        Event(
            invocation_id="inv-x",
            author="user",
            content=types.UserContent(parts=[types.Part(text="hello é ✓")]),
            timestamp=start,
        ),
        Event(
            invocation_id="inv-x",
            author="agent",
            content=types.ModelContent(
                parts=[
                    types.Part(text="thinking", thought=True, thought_signature=b"\x00sig\xff"),
                    types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG\x00")),
                    types.Part(
                        function_call=types.FunctionCall(
                            id="c1", name="tool", args={"a": [1, 2.5, None]}
                        )
                    ),
                ]
            ),
            long_running_tool_ids={"c1"},
            custom_metadata={"k": {"nested": [1, "two"]}},
            actions=EventActions(state_delta={"x": 1, "user:y": "z"}),
            timestamp=start + 1,
        ),
        Event(
            invocation_id="inv-x",
            author="agent",
            content=types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(
                            id="c1", name="tool", response={"r": 1}
                        )
                    )
                ],
            ),
            timestamp=start + 2,
        ),
    ]


def _events(n: int) -> list[Event]:
    events = build_session(n)
    return events + _special_events(events[-1].timestamp + 1)


def _shape(value: Any) -> Any:
    """Every model's class and set fields, recursively, with the values'
    types: what `==` does not compare."""
    if isinstance(value, BaseModel):
        return (
            type(value),
            sorted(value.model_fields_set),
            {k: _shape(v) for k, v in value.__dict__.items()},
            _shape(value.__pydantic_extra__),
        )
    if isinstance(value, (list, tuple)):
        return [type(value)] + [_shape(v) for v in value]
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, set):
        return (set, sorted(value))
    return type(value)


def _assert_same(expected: Any, actual: Any) -> None:
    assert actual == expected
    assert actual.model_dump_json() == expected.model_dump_json()
    assert _shape(actual) == _shape(expected)


def _mutable_ids(value: Any, out: set[int]) -> None:
    if isinstance(value, BaseModel):
        out.add(id(value))
        out.add(id(value.__dict__))
        for v in value.__dict__.values():
            _mutable_ids(v, out)
    elif isinstance(value, (list, dict, set)):
        out.add(id(value))
        for v in value.values() if isinstance(value, dict) else value:
            _mutable_ids(v, out)


@pytest.fixture
def memo() -> Iterator[None]:
    adk_fastcompact.uninstall()
    yield
    adk_fastcompact.uninstall()
    _native.index_configure(max_row_bytes=256 << 20)


def _sqlite(tmp_path: Path) -> SqliteSessionService:
    return SqliteSessionService(str(tmp_path / "s.db"))


def _database(tmp_path: Path) -> DatabaseSessionService:
    return DatabaseSessionService(f"sqlite+aiosqlite:///{tmp_path / 'd.db'}")


SERVICES = {"sqlite": _sqlite, "database": _database}


async def _fill(service: Any, events: list[Event]) -> None:
    session = await service.create_session(app_name=APP, user_id=USER, session_id=SID)
    for event in events:
        await service.append_event(session, event)


async def _load(service: Any, config: GetSessionConfig | None = None) -> Any:
    return await service.get_session(app_name=APP, user_id=USER, session_id=SID, config=config)


def _with_service(kind: str, tmp_path: Path, body: Callable[[Any], Awaitable[None]]) -> None:
    """Runs `body` on a new service of `kind` in one event loop, closed after."""

    async def main() -> None:
        service = SERVICES[kind](tmp_path)
        try:
            await body(service)
        finally:
            await service.close()

    asyncio.run(main())


@pytest.mark.parametrize("kind", SERVICES)
def test_loads_equal_google_adk_s_at_every_sighting(kind: str, tmp_path: Path, memo: None) -> None:
    async def body(service: Any) -> None:
        await _fill(service, _events(150))
        expected = await _load(service)
        adk_fastcompact.install()
        loads = [await _load(service) for _ in range(4)]
        stats = _native.index_stats()
        assert stats["rows_reused"] >= 2 * len(expected.events), stats
        seen: list[set[int]] = []
        for loaded in loads:
            _assert_same(expected, loaded)
            ids: set[int] = set()
            _mutable_ids(loaded, ids)
            for earlier in seen:
                assert not ids & earlier
            seen.append(ids)

    _with_service(kind, tmp_path, body)


@pytest.mark.parametrize("kind", SERVICES)
@pytest.mark.parametrize(
    "config",
    [
        GetSessionConfig(num_recent_events=5),
        GetSessionConfig(num_recent_events=0),
        GetSessionConfig(after_timestamp=1_700_000_100.0),
        GetSessionConfig(num_recent_events=3, after_timestamp=1_700_000_100.0),
    ],
    ids=["recent", "none", "after", "both"],
)
def test_get_session_config_is_google_adk_s(
    kind: str, config: GetSessionConfig, tmp_path: Path, memo: None
) -> None:
    async def body(service: Any) -> None:
        await _fill(service, _events(60))
        expected = await _load(service, config)
        adk_fastcompact.install()
        for _ in range(3):
            _assert_same(expected, await _load(service, config))

    _with_service(kind, tmp_path, body)


@pytest.mark.parametrize("kind", SERVICES)
def test_a_mutated_load_does_not_reach_the_next(kind: str, tmp_path: Path, memo: None) -> None:
    async def body(service: Any) -> None:
        await _fill(service, _events(20))
        expected = await _load(service)
        adk_fastcompact.install()
        for _ in range(3):
            loaded = await _load(service)
            for event in loaded.events:
                event.author = "mutated"
                event.actions.state_delta["mutated"] = True
                if event.content and event.content.parts:
                    event.content.parts[0].text = "mutated"
                    event.content.parts.append(types.Part(text="more"))
            _assert_same(expected, await _load(service))

    _with_service(kind, tmp_path, body)


def test_a_row_decoding_to_the_clock_is_decoded_every_time(tmp_path: Path, memo: None) -> None:
    """A stored row without a timestamp decodes to the clock's reading
    (Event's default): its two decodings differ, so it is never answered
    from the memo and every load reads the clock, as google-adk's does."""

    async def body(service: Any) -> None:
        await _fill(service, _events(5))
        with sqlite3.connect(tmp_path / "s.db") as db:
            row = db.execute("SELECT event_data FROM events ORDER BY timestamp LIMIT 1").fetchone()
            data = json.loads(row[0])
            data.pop("timestamp")
            db.execute(
                "UPDATE events SET event_data=? WHERE event_data=?", (json.dumps(data), row[0])
            )
        adk_fastcompact.install()
        stamps = set()
        for _ in range(4):
            loaded = await _load(service)
            (stamped,) = [e for e in loaded.events if e.id == data["id"]]
            stamps.add(stamped.timestamp)
        assert len(stamps) == 4
        assert _native.index_stats()["rows_unsettled"] >= 1

    _with_service("sqlite", tmp_path, body)


@pytest.mark.parametrize("kind", SERVICES)
@pytest.mark.parametrize("sighting", [0, 1, 2])
def test_a_corrupt_row_raises_google_adk_s_error(
    kind: str, sighting: int, tmp_path: Path, memo: None
) -> None:
    """A row truncated after it was seen `sighting` times raises what
    google-adk raises, and nothing is returned."""

    async def body(service: Any) -> None:
        await _fill(service, _events(10))
        adk_fastcompact.install()
        for _ in range(sighting):
            await _load(service)
        path = tmp_path / ("s.db" if kind == "sqlite" else "d.db")
        with sqlite3.connect(path) as db:
            db.execute("UPDATE events SET event_data = substr(event_data, 1, 40) WHERE rowid = 3")
        with pytest.raises(Exception) as ours:
            await _load(service)
        adk_fastcompact.uninstall()
        with pytest.raises(Exception) as theirs:
            await _load(service)
        assert type(ours.value) is type(theirs.value)
        assert str(ours.value) == str(theirs.value)

    _with_service(kind, tmp_path, body)


@pytest.mark.parametrize("kind", SERVICES)
def test_the_memo_keeps_within_its_budget(kind: str, tmp_path: Path, memo: None) -> None:
    async def body(service: Any) -> None:
        await _fill(service, _events(80))
        expected = await _load(service)
        adk_fastcompact.install()
        _native.index_configure(max_row_bytes=20_000)
        for _ in range(3):
            _assert_same(expected, await _load(service))
            stats = _native.index_stats()
            assert stats["row_bytes"] <= 20_000, stats
            assert stats["max_row_bytes"] == 20_000
        assert stats["rows_evicted"] > 0
        _native.index_configure(max_row_bytes=0)
        assert _native.index_stats()["rows"] == 0
        _assert_same(expected, await _load(service))
        assert _native.index_stats()["rows"] == 0

    _with_service(kind, tmp_path, body)


def test_uninstall_restores_google_adk_s_loads(memo: None) -> None:
    from adk_fastcompact import _loading
    from sqlalchemy import event
    from sqlalchemy.orm import Session as OrmSession

    own_event = sqlite_session_service.Event
    own_get = DatabaseSessionService.__dict__["get_session"]
    adk_fastcompact.install()
    assert sqlite_session_service.Event is not own_event
    assert DatabaseSessionService.__dict__["get_session"] is not own_get
    listener = _loading.listener
    assert listener is not None
    assert event.contains(OrmSession, "do_orm_execute", listener)
    adk_fastcompact.uninstall()
    assert sqlite_session_service.Event is own_event
    assert DatabaseSessionService.__dict__["get_session"] is own_get
    assert not event.contains(OrmSession, "do_orm_execute", listener)
    assert _loading.listener is None


def _tracking(value: Any, out: list[tuple[type, bool]]) -> list[tuple[type, bool]]:
    """Each model, list, dict and set of `value`'s tree in order, with
    whether the cyclic garbage collector tracks it."""
    if isinstance(value, BaseModel):
        out.append((type(value), gc.is_tracked(value)))
        _tracking(value.__dict__, out)
        _tracking(value.__pydantic_fields_set__, out)
    elif isinstance(value, (list, dict, set)):
        out.append((type(value), gc.is_tracked(value)))
        for item in value.values() if isinstance(value, dict) else value:
            _tracking(item, out)
    return out


@pytest.mark.parametrize("kind", SERVICES)
def test_the_kept_decodings_cost_the_collector_nothing(
    kind: str, tmp_path: Path, memo: None
) -> None:
    """The memo's private decodings live across loads; the collector does
    not track them (a full collection would walk every one of their
    objects). The loads handed out are tracked as google-adk's own
    decodings are, and stay equal to them and independent."""
    marker = f"untracked-{uuid.uuid4().hex}"
    start = 1_800_000_000.0
    marked = [
        Event(
            invocation_id="inv-m",
            author="agent",
            content=types.ModelContent(parts=[types.Part(text=f"{marker} {i}")]),
            actions=EventActions(state_delta={"n": i}),
            timestamp=start + i,
        )
        for i in range(20)
    ]
    ids = {event.id for event in marked}

    def tracked_parts() -> set[int]:
        return {
            id(o)
            for o in gc.get_objects()
            if isinstance(o, types.Part) and isinstance(o.text, str) and o.text.startswith(marker)
        }

    def tracked_events() -> set[int]:
        return {id(o) for o in gc.get_objects() if isinstance(o, Event) and o.id in ids}

    def held(*sessions: Any) -> tuple[set[int], set[int]]:
        events = marked + [e for s in sessions for e in s.events if e.id in ids]
        parts = {id(p) for e in events for p in e.content.parts}
        return {id(e) for e in events}, parts

    async def body(service: Any) -> None:
        await _fill(service, _events(30) + marked)
        expected = await _load(service)
        adk_fastcompact.install()
        for _ in range(2):
            await _load(service)
        loaded = await _load(service)
        again = await _load(service)
        stats = _native.index_stats()
        assert stats["rows_reused"] >= 2 * len(expected.events), stats
        gc.collect()
        # Tracked: the events appended and the three sessions held here, not
        # the memo's decodings of the same rows.
        events, parts = held(expected, loaded, again)
        assert tracked_events() == events
        assert tracked_parts() == parts
        for session in (loaded, again):
            _assert_same(expected, session)
            assert _tracking(session.events, []) == _tracking(expected.events, [])
        ours: set[int] = set()
        theirs: set[int] = set()
        _mutable_ids(loaded, ours)
        _mutable_ids(again, theirs)
        assert not ours & theirs

    _with_service(kind, tmp_path, body)
