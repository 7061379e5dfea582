"""What the per-session index's tests (`tests/index/`) share: realistic
sessions, binding a list, the counters of `index_stats()` and filtering
compared with google-adk's own functions."""

from __future__ import annotations

from typing import Any

import adk_fastcompact as fc
import pytest
from adk_fastcompact import _families, _native
from adk_fastcompact._tooling import sessions as _sessions
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.genai import types

from support.compare import (
    ORIG_PROCESS,
    ORIG_RECOVER,
    PROFILE,
    assert_same_events,
    call,
)

remembered_recovery = pytest.mark.skipif(
    PROFILE.recover_by_id,
    reason=(
        f"google-adk {_families.adk_version()} matches a response to its call by id: that"
        " recovery is not remembered between calls (src/py/recover.rs), 2.13's is"
    ),
)


def delta(before: dict[str, Any], key: str) -> int:
    return int(_native.index_stats()[key]) - int(before[key])


def filtered(events: list[Event], agent: str = "root") -> list[Event]:
    """process-then-recover, as `_get_contents` chains them."""
    return fc.recover_compacted_function_calls(fc.process_compaction_events(events, agent), events)


def reference(events: list[Event], agent: str = "root") -> list[Event]:
    return ORIG_RECOVER(ORIG_PROCESS(events, agent), events)


def assert_same_filtering(events: list[Event]) -> None:
    ours, orig = call(filtered, events), call(reference, events)
    assert ours.error is None and orig.error is None
    assert_same_events(ours.value, orig.value, [events])


def bind(events: list[Event]) -> None:
    """Makes the index bind `events`: objects seen once are read directly;
    seen again, they are bound."""
    fc.apply_rewinds(events)
    fc.apply_rewinds(events)


def session(seed: int = 3, n: int = 300) -> list[Event]:
    """A realistic session with ids of its own (uuid4)."""
    events = _sessions.build_session(n, seed)
    assert len(events) > 20
    return events


def compaction_event(events: list[Event], start: float, end: float) -> Event:
    return Event(
        id="compaction",
        invocation_id="c",
        author="user",
        timestamp=events[-1].timestamp + 1,
        actions=EventActions(
            compaction=EventCompaction(
                start_timestamp=start,
                end_timestamp=end,
                compacted_content=types.Content(role="model", parts=[types.Part(text="s")]),
            )
        ),
    )
