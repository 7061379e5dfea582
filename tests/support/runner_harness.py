"""What the Runner end-to-end tests share: a deterministic run of one
conversation, with or without `install()`, and the probes that watch it.

A run draws ids from a counter (`google.adk.platform.uuid.set_id_provider`)
and time from a fixed-step clock (`set_time_provider`, every reading
advances it), so a conversation is a pure function of the code that runs
it; the probes count the calls into each Rust entry point (and the ones that
declined), the classes of the event contents they were handed, and the
trigger of every summary google-adk's compaction asked for. On request a
run also records every session the service's `get_session` handed out.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import time
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import adk_fastcompact
import pytest
from adk_fastcompact import _native
from google.adk.apps import compaction as adk_compaction
from google.adk.events.event import Event
from google.adk.platform import time as platform_time
from google.adk.platform import uuid as platform_uuid
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService

from support.compare import NATIVE_OPS

# Warnings google-adk emits on this path whatever the accelerator does
# (pytest turns warnings into errors): the experimental-API notice and the
# deprecated `plugins` argument AgentTool passes to its inner Runner.
EXPECTED_WARNINGS: tuple[tuple[type[Warning], str], ...] = (
    (UserWarning, r"\[EXPERIMENTAL\]"),
    (DeprecationWarning, r"The `plugins` argument is deprecated"),
)


@dataclass
class Probes:
    """What a test watches during a run, besides what the run returns."""

    #: Calls into each Rust entry point, and how many of them declined (None).
    native_calls: Counter[str] = field(default_factory=Counter)
    native_declined: Counter[str] = field(default_factory=Counter)
    #: The classes of the event contents the Rust entry points were handed.
    contents: Counter[str] = field(default_factory=Counter)
    #: The trigger of every summary google-adk's compaction asked for.
    triggers: list[str] = field(default_factory=list)

    def clear(self) -> None:
        self.native_calls.clear()
        self.native_declined.clear()
        self.contents.clear()
        self.triggers.clear()


def install_probes(monkeypatch: pytest.MonkeyPatch) -> Probes:
    """Wraps the Rust entry points and google-adk's summary call with probes.

    Both compaction paths, google-adk's and ours, reach the summarizer
    through `google.adk.apps.compaction._summarize_events_with_trace`
    (looked up on the module at call time), which `install()` leaves alone.
    """
    found = Probes()
    for name in NATIVE_OPS:
        fn = getattr(_native, name)

        def counted(*args: Any, _fn: Any = fn, _name: str = name, **kwargs: Any) -> Any:
            found.native_calls[_name] += 1
            for arg in args:
                if type(arg) is list:
                    found.contents.update(
                        type(e.content).__name__ for e in arg if getattr(e, "content", None)
                    )
            out = _fn(*args, **kwargs)
            if out is None:
                found.native_declined[_name] += 1
            return out

        monkeypatch.setattr(_native, name, counted)
    summarize = adk_compaction._summarize_events_with_trace

    async def recorded(**kwargs: Any) -> Event | None:
        found.triggers.append(kwargs["trigger"])
        return await summarize(**kwargs)

    monkeypatch.setattr(adk_compaction, "_summarize_events_with_trace", recorded)
    return found


@dataclass(kw_only=True)
class Observed:
    """What `run_conversation` sets on the conversation a run returns."""

    #: The trigger of every summary asked for, in order.
    triggers: list[str] = field(default_factory=list)
    native_calls: Counter[str] = field(default_factory=Counter)
    native_declined: Counter[str] = field(default_factory=Counter)
    native_contents: Counter[str] = field(default_factory=Counter)
    #: `_native.decline_counts()` of the run's thread.
    declines: dict[str, int] = field(default_factory=dict)
    #: With `record_loads`: every session `get_session` handed out, in
    #: order, as (events, SHA-256 of its JSON dump).
    loads: list[tuple[int, str]] = field(default_factory=list)
    seconds: float = 0.0


C = TypeVar("C", bound=Observed)


def stepped_clock(step: float, ties: int = 1) -> Callable[[], float]:
    """A clock advancing `step` every `ties` readings (`ties > 1`: events
    made in a row share a timestamp)."""
    readings = itertools.count()
    return lambda: 1_000_000.0 + step * (next(readings) // ties)


@contextmanager
def deterministic(clock: Callable[[], float]) -> Iterator[None]:
    """google-adk draws ids from a counter and time from `clock` inside."""
    ids = itertools.count()
    platform_uuid.set_id_provider(lambda: f"id-{next(ids):06d}")
    platform_time.set_time_provider(clock)
    try:
        yield
    finally:
        platform_uuid.reset_id_provider()
        platform_time.reset_time_provider()


def new_service(service_kind: str, db: Path | str) -> BaseSessionService:
    """A session service: `"sqlite"` (`SqliteSessionService` on the file
    `db`), `"postgres"` (`DatabaseSessionService` on the SQLAlchemy URL
    `db`), or `"memory"`."""
    if service_kind == "sqlite":
        return SqliteSessionService(str(db))
    if service_kind == "postgres":
        # Imported here: the other families' parity venvs (tests/families)
        # run this harness on in-process services only.
        from google.adk.sessions.database_session_service import DatabaseSessionService

        assert str(db).startswith("postgresql"), db
        return DatabaseSessionService(str(db))
    assert service_kind == "memory", service_kind
    return InMemorySessionService()


def _record_loads(service: BaseSessionService, loads: list[tuple[int, str]]) -> None:
    """Appends to `loads` every session `service.get_session` hands out."""
    get_session = service.get_session

    async def recorded(**kwargs: Any) -> Any:
        session = await get_session(**kwargs)
        if session is not None:
            dump = session.model_dump_json().encode()
            loads.append((len(session.events), hashlib.sha256(dump).hexdigest()))
        return session

    service.get_session = recorded  # type: ignore[method-assign]


def run_conversation(
    converse: Callable[[BaseSessionService], Awaitable[C]],
    service_kind: str,
    db: Path | str,
    *,
    install: bool,
    probes: Probes,
    ignore: tuple[tuple[type[Warning], str], ...] = EXPECTED_WARNINGS,
    record_loads: bool = False,
) -> C:
    """Runs `converse` on a new session service (`new_service(service_kind,
    db)`), deterministically, with google-adk's own code or after
    `install()`, and sets on the conversation it returns what the probes
    saw: `seconds`, `triggers`, `native_calls`, `native_declined`,
    `native_contents`, `declines` (the thread's decline counts), and with
    `record_loads` the sessions `get_session` handed out (`loads`)."""
    probes.clear()
    _native.decline_counts(reset=True)
    if install:
        assert adk_fastcompact.install() is True
        assert adk_fastcompact.installed() == "parity"
    else:
        adk_fastcompact.uninstall()

    loads: list[tuple[int, str]] = []

    async def main() -> C:
        with deterministic(stepped_clock(0.25)):
            service = new_service(service_kind, db)
            if record_loads:
                _record_loads(service, loads)
            try:
                return await converse(service)
            finally:
                if service_kind == "postgres":
                    # Its engine's connections belong to this event loop.
                    await service.close()  # type: ignore[attr-defined]

    started = time.perf_counter()
    try:
        with warnings.catch_warnings():
            for category, message in ignore:
                warnings.filterwarnings("ignore", message=message, category=category)
            conversation = asyncio.run(main())
    finally:
        adk_fastcompact.uninstall()
    conversation.seconds = time.perf_counter() - started
    conversation.triggers = list(probes.triggers)
    conversation.native_calls = Counter(probes.native_calls)
    conversation.native_declined = Counter(probes.native_declined)
    conversation.native_contents = Counter(probes.contents)
    conversation.declines = _native.decline_counts(reset=True)
    conversation.loads = loads
    return conversation


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The path of the first place two dumps differ, with both values."""
    if type(a) is not type(b):
        return f"{path}: {a!r} != {b!r}"
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{path}: keys {list(a)} != {list(b)}"
        for key in a:
            found = first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{path}[{index}]")
            if found:
                return found
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def assert_same(name: str, plain: Any, fast: Any) -> None:
    if plain != fast:
        pytest.fail(f"{name} differ at {first_difference(plain, fast, name)}")


def compactions(events: list[Event]) -> list[tuple[int, Event]]:
    """`(position, event)` of the compaction events."""
    return [(i, e) for i, e in enumerate(events) if e.actions and e.actions.compaction]
