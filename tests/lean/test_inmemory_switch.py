"""What lean loading leaves whole, what it refuses, and where it falls back,
on `InMemorySessionService` through google-adk's real `Runner`.

Under `install(loading="lean")` only the Runner's own loads (`run_async`)
are lean: a direct `session_service.get_session()` and the load
`Runner.rewind_async` makes return the whole session, and the turns after a
rewind are lean and identical to plain google-adk's (the "rewind" scenario
of `test_inmemory_scenarios.py` compares those). Exact mode loads whole,
counted, with the same conversation as exact mode's full loading.
"""

from __future__ import annotations

from typing import Any

import adk_fastcompact
import pytest
from adk_fastcompact import LeanSessionConfig
from google.adk.runners import Runner
from google.adk.sessions.in_memory_session_service import InMemorySessionService

from support.ground_truth import SESSION, USER, send
from support.lean_runs import assert_identical, assert_loaded_lean, lean_run
from support.runner_harness import stepped_clock
from support.truth_scenarios import TIED, tied_app

SETTINGS, TIES = TIED["both"]


def test_unknown_loading_is_refused() -> None:
    with pytest.raises(ValueError, match="loading must be one of"):
        adk_fastcompact.install(loading="bogus")
    assert adk_fastcompact.installed() is None


@pytest.mark.parametrize(
    "cut", [{"num_recent_events": 5}, {"after_timestamp": 1.0}], ids=["recent", "after"]
)
def test_lean_config_refuses_a_cut(cut: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="num_recent_events and after_timestamp"):
        LeanSessionConfig(**cut)


async def _chat_then_look(service: InMemorySessionService) -> dict[str, Any]:
    """20 questions (compacted by both strategies), then what a direct
    `get_session` and `rewind_async` load, then 4 more questions."""
    app = tied_app(SETTINGS, "switch")
    runner = Runner(app=app, session_service=service)
    await service.create_session(app_name=app.name, user_id=USER, session_id=SESSION)
    for k in range(1, 21):
        await send(runner, f"<<u{k}>> tell me more")
    stored = service.sessions[app.name][USER][SESSION]
    direct = await service.get_session(app_name=app.name, user_id=USER, session_id=SESSION)
    assert direct is not None
    # What rewind_async loads: the calls into the service meanwhile.
    seen: list[int] = []
    get_session = service.get_session

    async def watched(**kwargs: Any) -> Any:
        session = await get_session(**kwargs)
        if session is not None:
            seen.append(len(session.events))
        return session

    service.get_session = watched  # type: ignore[method-assign]
    invocations = list(dict.fromkeys(e.invocation_id for e in stored.events if e.author == "user"))
    before = len(stored.events)
    await runner.rewind_async(
        user_id=USER, session_id=SESSION, rewind_before_invocation_id=invocations[-2]
    )
    service.get_session = get_session  # type: ignore[method-assign]
    for k in range(21, 25):
        await send(runner, f"<<u{k}>> tell me more")
    return {"direct": (len(direct.events), before), "rewind": (seen, before)}


def test_direct_loads_and_rewinds_hold_the_whole_session() -> None:
    clock = lambda: stepped_clock(0.25, TIES)  # noqa: E731
    full = lean_run(_chat_then_look, "full", clock=clock())
    lean = lean_run(_chat_then_look, "lean", clock=clock())
    assert_identical(full, lean, "lean")
    assert_loaded_lean(lean)
    loaded, stored = lean.returned["direct"]
    assert loaded == stored > 40
    seen, stored = lean.returned["rewind"]
    assert seen and all(n == stored for n in seen), (seen, stored)
    # ... while the Runner's loads of the turns before it held fewer.
    assert min(load.handed for load in lean.loads if load.lean) < stored // 2


@pytest.mark.adk_2_13("exact mode")
def test_exact_mode_loads_whole_and_counts_it() -> None:
    clock = lambda: stepped_clock(0.25, TIES)  # noqa: E731
    exact = lean_run(_chat_then_look, "installed", clock=clock(), mode="exact")
    lean = lean_run(_chat_then_look, "lean", clock=clock(), mode="exact")
    assert_identical(exact, lean, "exact mode, lean")
    # Each of the 24 runs fell back to the whole session, counted.
    assert lean.stats == {"full: exact mode": 24}, lean.stats
    assert not any(load.lean for load in lean.loads)
    assert all(load.handed == load.stored for load in lean.loads)
