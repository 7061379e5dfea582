"""Stored events read from their JSON in Rust against google-adk's own loader.

`SqliteSessionService` keeps each Event as `model_dump_json(exclude_none=True)`
and loads it with `Event.model_validate_json`. `_native.analyze_stored` reads
the same documents without building Events; on every generated session its
decisions must equal `analyze_sessions` on the Events google-adk's loader
builds from those documents (the views are the same), and a document the
loader refuses must be declined with its position, never dropped.
"""

from __future__ import annotations

import pydantic
import pytest
from adk_fastcompact import _native, _sessions
from google.adk.events.event import Event
from strategies import random_session


def _sessions_under_test() -> list[list[Event]]:
    out = [random_session(seed, max_events=150).events for seed in range(120)]
    out += [random_session(seed, max_events=150, realistic=True).events for seed in range(40)]
    out += [_sessions.build_session(n, seed) for seed, n in enumerate((300, 2500))]
    return out


SESSIONS = _sessions_under_test()


def _stored(events: list[Event]) -> list[str]:
    return [e.model_dump_json(exclude_none=True) for e in events]


def _loaded(rows: list[str]) -> list[Event] | None:
    try:
        return [Event.model_validate_json(r) for r in rows]
    except pydantic.ValidationError:
        return None


@pytest.mark.parametrize("parallel", [True, False])
def test_the_json_reader_decides_as_on_the_loaded_events(parallel: bool) -> None:
    stored = [_stored(events) for events in SESSIONS]
    got = _native.analyze_stored(stored, 3, 1, parallel)
    compared = 0
    for rows, ours in zip(stored, got, strict=True):
        loaded = _loaded(rows)
        if loaded is None:
            # google-adk cannot load it either: said, with the event.
            assert ours["declined"].startswith("event ")
            continue
        (expected,) = _native.analyze_sessions([loaded], 3, 1, False)
        if "declined" in expected:
            continue  # the per-object reader hands these to google-adk
        assert ours == expected
        compared += 1
    assert compared > len(SESSIONS) // 2


def test_bytes_and_str_read_alike_and_bad_rows_are_declined_by_position() -> None:
    rows = _stored(SESSIONS[-1])
    (as_str,) = _native.analyze_stored([rows])
    (as_bytes,) = _native.analyze_stored([[r.encode() for r in rows]])
    assert as_str == as_bytes and "live" in as_str
    broken = [*rows[:5], '{"timestamp": ', *rows[5:]]
    no_time = [*rows[:2], '{"id": "x"}']
    wrong = [*rows[:1], '{"timestamp": "noon"}']
    results = _native.analyze_stored([broken, no_time, wrong, rows])
    assert results[0]["declined"].startswith("event 5: not a stored Event")
    assert results[1] == {"declined": "event 2: no numeric timestamp"}
    assert results[2]["declined"].startswith("event 1: not a stored Event")
    assert results[3] == as_str
    with pytest.raises(TypeError, match="str or bytes"):
        _native.analyze_stored([[1.5]])
