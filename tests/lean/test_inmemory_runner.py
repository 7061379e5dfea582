"""Lean loading on `InMemorySessionService`, the Runner suites' conversations.

The seeded conversation of `tests/e2e/test_runner_e2e.py` (`support.conversation`:
an `LlmAgent` with tools, an `AgentTool`, a sub-agent reached by transfer,
long-running jobs answered turns later, rewinds of the newest invocation)
runs through google-adk's real `Runner` three times under each compaction
config,
with the same ids and clock: plain google-adk loading every event,
`install(loading="lean")`, and `install()` with
`RunConfig(get_session_config=LeanSessionConfig())`. Every model request
(each agent's flow's, and every request each scripted model received, the
summarizer's included), every yielded and appended event, every compaction
and the stored session must be the same, and the lean runs must have loaded
lean, holding fewer events than the stored session (`support.lean_runs`).

A store written by plain google-adk before `install(loading="lean")` is
covered by installing half-way through the conversation.

Under the sliding window ("window", "both") the conversation answers a job
turns after a summary covered its call: the sliding window after that turn
reads from the answered invocation's first event, which the lean load
keeps (`core::lean`, an invocation the turn continues is new).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from google.adk.sessions.in_memory_session_service import InMemorySessionService

from support import conversation
from support.lean_runs import (
    INNER_RUNNER,
    assert_identical,
    assert_loaded_lean,
    comparable,
    compare,
    events_of,
    lean_run,
)
from support.runner_harness import stepped_clock

#: User messages of the seeded conversation (140 in tests/e2e; fewer here,
#: each comparison runs it three times).
TURNS = 100


def _seeded(config_name: str, turns: int) -> Callable[[InMemorySessionService], Any]:
    async def converse(service: InMemorySessionService) -> dict[str, Any]:
        found = await conversation._converse(
            service, conversation.CONFIGS[config_name], turns, f"{config_name}-memory"
        )
        return comparable(found)

    return converse


@pytest.mark.parametrize(
    "config_name",
    [
        "window",
        "token",
        "both",
    ],
)
def test_runner_conversation_is_identical_loaded_lean(config_name: str) -> None:
    full = compare(_seeded(config_name, TURNS), config_name)
    # Not vacuous: summaries stored and shown, a rewind, a long-running
    # call answered after a compaction covered it.
    stored = [e for e in events_of(full) if e.actions.compaction]
    assert len(stored) >= 8, len(stored)
    log = full.returned["log"]
    assert any(": rewind " in entry for entry in log), log
    holder = conversation.Conversation(
        requests={},
        responses={},
        yielded=[],
        stored=[],
        session={},
        log=log,
        events=events_of(full),
    )
    assert conversation._resumed_after_compaction(holder)


def test_a_store_written_before_install() -> None:
    # Half the conversation by plain google-adk, then install(loading="lean")
    # and the rest lean, against the whole conversation by plain google-adk.
    converse = _seeded("token", TURNS)
    full = lean_run(converse, "full", clock=stepped_clock(0.25))
    late = lean_run(converse, "lean", clock=stepped_clock(0.25), install_at=TURNS // 2)
    assert_identical(full, late, "installed half-way")
    assert_loaded_lean(late, fallbacks=(INNER_RUNNER,))
    # The runs before install() loaded the whole session, and no lean load
    # came before the first of them.
    first = next(k for k, load in enumerate(late.loads) if load.lean)
    assert first >= TURNS // 2
    assert all(load.handed == load.stored for load in late.loads[:first])
