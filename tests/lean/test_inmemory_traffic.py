"""Lean loading on `InMemorySessionService`, the real-traffic conversations
of `tests/e2e/test_real_traffic.py` (`support.traffic_conversation`:
streaming, parallel tool calls, tool confirmations, long-running calls, an
`AgentTool`, a `ParallelAgent`, `LoopAgent` and `SequentialAgent`) under
each compaction config, and the plain agent's: full loading against
`install(loading="lean")` and `LeanSessionConfig`, as
`test_inmemory_runner.py` compares them (`compare`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from google.adk.sessions.in_memory_session_service import InMemorySessionService

from support import traffic_conversation
from support.lean_runs import comparable, compare, events_of


def _traffic(config_name: str | None) -> Callable[[InMemorySessionService], Any]:
    """The corpus conversation under `config_name`, or (None) the plain
    agent's conversation."""
    corpus = config_name is not None
    config = (
        traffic_conversation.CONFIGS[config_name] if corpus else traffic_conversation.PLAIN_CONFIG
    )
    turns = (traffic_conversation.CORPUS_TURNS if corpus else traffic_conversation.PLAIN_TURNS)[
        "memory"
    ]
    seed = f"{config_name or 'plain'}-memory"

    async def converse(service: InMemorySessionService) -> dict[str, Any]:
        found = await traffic_conversation._converse(service, config, turns, seed, corpus=corpus)
        return {**comparable(found), "artifacts": found.artifacts}

    return converse


@pytest.mark.parametrize(
    "config_name",
    [
        "window",
        "token",
        "both",
        None,
    ],
    ids=["corpus-window", "corpus-token", "corpus-both", "plain"],
)
def test_real_traffic_is_identical_loaded_lean(config_name: str | None) -> None:
    full = compare(_traffic(config_name), config_name or "plain")
    assert sum(1 for e in events_of(full) if e.actions.compaction) >= 8
