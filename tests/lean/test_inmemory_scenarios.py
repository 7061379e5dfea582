"""Lean loading on `InMemorySessionService`, the ground-truth scenarios.

Each scenario of `tests/support/truth_scenarios.py` (a `ParallelAgent` and
its tool rounds, long-running calls resumed late by a message answering
them or by the invocation's id, a rewind and the turns after it, an
isolation scope of a task agent, coarse and tied clocks) and of
`tests/support/lean_scenarios.py` (overlapping invocations, one under way
while another compacts, ordered by gates) runs through google-adk's real
`Runner` three times, on a new service each, with the same ids and clock:
plain google-adk loading every event, `install(loading="lean")`, and
`install()` with `RunConfig(get_session_config=LeanSessionConfig())`. Every
model request, every appended event, every compaction and the stored
session must be the same, and the lean runs must have loaded lean, holding
fewer events than the stored session (`lean_runs`).

The ground truth's "overlap" and "under-way" are left out: they race
wall-clock sleeps, and two runs of the same code (plain google-adk, or
`install()` alone) can interleave differently; `lean_scenarios` has them
ordered by gates instead.

"recovered" answers a long-running call after a summary covered it: the
sliding window's compaction after that turn is handed the same events as
under full loading (it failed before `core::lean` counted the answered
invocation as new).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from google.adk.runners import Runner
from google.adk.sessions.in_memory_session_service import InMemorySessionService

from support.ground_truth import SESSION, USER
from support.lean_runs import assert_identical, assert_loaded_lean, lean_run
from support.lean_scenarios import LEAN_SCENARIOS
from support.runner_harness import stepped_clock
from support.truth_scenarios import SCENARIOS

RACING = ("overlap", "under-way")

#: name -> (app factory, conversation, clock factory or None).
ALL: dict[str, tuple[Any, Any, Any]] = {
    **{name: (make, chat, clock) for name, (make, chat, _, clock, _) in SCENARIOS.items()},
    **{name: (make, chat, None) for name, (make, chat) in LEAN_SCENARIOS.items()},
}


def _converse(name: str) -> Callable[[InMemorySessionService], Any]:
    make, converse, _ = ALL[name]

    async def run(service: InMemorySessionService) -> None:
        app = make(name)
        await service.create_session(app_name=app.name, user_id=USER, session_id=SESSION)
        await converse(Runner(app=app, session_service=service), service)

    return run


def _clock(name: str) -> Callable[[], float]:
    clock = ALL[name][2]
    return stepped_clock(0.25) if clock is None else clock()


@pytest.mark.parametrize(
    "name",
    [pytest.param(name) for name in ALL if name not in RACING],
)
def test_scenario_is_identical_loaded_lean(name: str) -> None:
    full = lean_run(_converse(name), "full", clock=_clock(name))
    assert full.compactions, "no compaction: the comparison would be vacuous"
    for loading in ("lean", "config"):
        run = lean_run(_converse(name), loading, clock=_clock(name))
        assert_identical(full, run, f"{name} ({loading})")
        assert_loaded_lean(run)
