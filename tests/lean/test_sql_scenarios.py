"""Lean loading on the SQL session services, the ground-truth scenarios.

The ground-truth scenarios google-adk runs on its SQL stores (long-running
calls resumed late, by a message or by the invocation's id, a rewind, an
isolation scope of a task agent, coarse and tied clocks) run through
google-adk's real `Runner` on `SqliteSessionService` and on
`DatabaseSessionService` (SQLite), each twice on a new store with the same
ids and clock: plain google-adk loading every row, and
`install(loading="lean")`. Every model request, every appended event, every
compaction and the stored session must be the same
(`lean_runs.assert_identical`), and the lean run must have loaded lean:
every Runner load counted lean, one at least holding fewer events than the
store. A `ParallelAgent`'s scenarios are left out: their branches interleave
by the store's I/O, so two runs of plain google-adk differ already.
"""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from pathlib import Path
from typing import Any

import adk_fastcompact
import pytest
from adk_fastcompact import LeanSessionConfig
from google.adk.events.event import Event
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService

from support.ground_truth import SESSION, USER
from support.lean_runs import IGNORED, Load, Recorded, _recording, assert_identical
from support.runner_harness import deterministic, stepped_clock
from support.truth_scenarios import SCENARIOS

#: Scenarios no two runs of plain google-adk on a SQL store repeat: a
#: `ParallelAgent`'s branches interleave by the store's I/O (its requests and
#: event ids come in another order from run to run).
UNREPEATABLE = ("parallel", "parallel-tools")

#: The ground-truth scenarios google-adk runs on its SQL stores (not the
#: overlapping invocations of `lean_scenarios`: on a SQL store one of them
#: meets google-adk's `StaleSessionError`, loaded whole or lean).
ALL: dict[str, tuple[Any, Any, Any]] = {
    name: (make, chat, clock)
    for name, (make, chat, _, clock, kinds) in SCENARIOS.items()
    if "sqlite" in kinds and name not in UNREPEATABLE
}


def _service(kind: str, db: Path) -> BaseSessionService:
    if kind == "sqlite":
        return SqliteSessionService(str(db))
    return DatabaseSessionService(f"sqlite+aiosqlite:///{db}")


def _watch(service: BaseSessionService, found: Recorded, key: dict[str, Any]) -> None:
    """Records every appended event and every session `get_session` hands
    out (with the stored session's length, by google-adk's whole load)."""
    kind = type(service)

    async def recorded_get(**kwargs: Any) -> Any:
        session = await kind.get_session(service, **kwargs)
        if session is not None:
            key.update(app_name=kwargs["app_name"], user_id=kwargs["user_id"])
            whole = await kind.get_session(
                service,
                app_name=kwargs["app_name"],
                user_id=kwargs["user_id"],
                session_id=kwargs["session_id"],
            )
            lean = isinstance(kwargs.get("config"), LeanSessionConfig)
            found.loads.append(Load(len(session.events), len(whole.events), lean))  # type: ignore[union-attr]
        return session

    async def recorded_append(session: Any, event: Event) -> Event:
        out = await kind.append_event(service, session, event)
        if not event.partial:
            found.appended.append(event.model_dump(mode="json"))
        return out

    service.get_session = recorded_get  # type: ignore[method-assign]
    service.append_event = recorded_append  # type: ignore[method-assign]


def _run(name: str, kind: str, db: Path, lean: bool) -> Recorded:
    make, converse, clock = ALL[name]
    found = Recorded()
    adk_fastcompact.uninstall()
    adk_fastcompact.loading_stats(reset=True)
    key: dict[str, Any] = {}

    async def main() -> None:
        service = _service(kind, db)
        _watch(service, found, key)
        app = make(name)
        with deterministic(stepped_clock(0.25) if clock is None else clock()):
            await service.create_session(app_name=app.name, user_id=USER, session_id=SESSION)
            found.returned = await converse(Runner(app=app, session_service=service), service)
        stored = await type(service).get_session(
            service, app_name=app.name, user_id=USER, session_id=SESSION
        )
        found.stored = [e.model_dump(mode="json") for e in stored.events]  # type: ignore[union-attr]
        if isinstance(service, DatabaseSessionService):
            await service.close()

    with warnings.catch_warnings(), _recording(found), contextlib.ExitStack() as stack:
        for category, message in IGNORED:
            warnings.filterwarnings("ignore", message=message, category=category)
        stack.callback(adk_fastcompact.uninstall)
        if lean:
            assert adk_fastcompact.install(loading="lean") is True
        asyncio.run(main())
    found.stats = adk_fastcompact.loading_stats(reset=True)
    return found


def _lean_loads(run: Recorded) -> None:
    lean = [load for load in run.loads if load.lean]
    assert lean
    # An AgentTool's inner Runner runs an app without compaction: whole.
    assert set(run.stats) <= {"lean", "full: no compaction configured"}, run.stats
    assert run.stats.get("lean") == len(lean) - run.stats.get("full: no compaction configured", 0)
    assert any(load.handed < load.stored for load in lean), lean
    whole = [load for load in run.loads if not load.lean]
    assert all(load.handed == load.stored for load in whole), whole


@pytest.mark.parametrize("kind", ["sqlite", "database"])
@pytest.mark.parametrize("name", list(ALL))
def test_scenario_is_identical_loaded_lean_from_sql(name: str, kind: str, tmp_path: Path) -> None:
    full = _run(name, kind, tmp_path / "full.db", lean=False)
    assert full.compactions, "no compaction: the comparison would be vacuous"
    lean = _run(name, kind, tmp_path / "lean.db", lean=True)
    assert_identical(full, lean, f"{name} ({kind})")
    _lean_loads(lean)
