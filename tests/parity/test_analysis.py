"""`analyze_sessions` against google-adk's own functions, serial and parallel."""

from __future__ import annotations

import warnings
from typing import Any

import adk_fastcompact as fc
import pytest
from adk_fastcompact import _native
from adk_fastcompact._tooling import sessions as _sessions
from google.adk.apps.app import EventsCompactionConfig
from google.adk.events.event import Event
from google.adk.sessions.session import Session

from support.compare import (
    ORIG_APPLY_REWINDS,
    ORIG_GET_COMPACTION_RANGES,
    ORIG_PROCESS,
    same_number,
)
from support.strategies import random_session

with warnings.catch_warnings():  # google-adk marks the config experimental
    warnings.simplefilter("ignore", UserWarning)
    CONFIG = EventsCompactionConfig(compaction_interval=3, overlap_size=1)


def _sessions_under_test() -> list[list[Event]]:
    out = [random_session(seed, max_events=150).events for seed in range(120)]
    out += [_sessions.build_session(n, seed) for seed, n in enumerate((300, 1000, 2500))]
    return out


SESSIONS = _sessions_under_test()


def _expected_prompt(events: list[Event]) -> list[Any] | None:
    """google-adk's prompt: raw events by identity, summaries by the
    compaction event whose content they carry."""
    live = ORIG_APPLY_REWINDS(events)
    try:
        prompt = ORIG_PROCESS(live, "")
    except TypeError:
        return None
    inputs = {id(e) for e in events}
    by_content = {
        id(e.actions.compaction.compacted_content): e
        for e in events
        if e.actions and e.actions.compaction and e.actions.compaction.compacted_content
    }
    return [e if id(e) in inputs else ("summary", by_content[id(e.content)]) for e in prompt]


def _same_objects(a: list[Any], b: list[Any]) -> bool:
    def key(x: Any) -> Any:
        return ("summary", id(x[1])) if isinstance(x, tuple) else id(x)

    return [key(x) for x in a] == [key(x) for x in b]


@pytest.mark.parametrize("parallel", [True, False])
def test_matches_google_adk(parallel: bool) -> None:
    results = fc.analyze_sessions(SESSIONS, CONFIG, parallel=parallel)
    assert len(results) == len(SESSIONS)
    checked = 0
    for events, got in zip(SESSIONS, results, strict=True):
        if "declined" in got:
            assert (
                _native.apply_rewinds(events) is None
                or _native.sliding_window(events, 3, 1) is None
            )
            continue
        checked += 1
        assert _same_objects([events[i] for i in got["live"]], ORIG_APPLY_REWINDS(events))
        if ORIG_GET_COMPACTION_RANGES is not None:  # (google-adk 2.13 on)
            ranges = ORIG_GET_COMPACTION_RANGES(events)
            assert [r[0] for r in got["ranges"]] == [r[0] for r in ranges]
            assert all(
                same_number(a[1], b[1]) and same_number(a[2], b[2])
                for a, b in zip(got["ranges"], ranges, strict=True)
            )
        expected = _expected_prompt(events)
        if "prompt_declined" in got:
            # Where google-adk's order is undefined (a NaN sort key) the
            # per-call binding hands the call to google-adk; the analysis
            # says so instead of guessing.
            live = ORIG_APPLY_REWINDS(events)
            assert _native.process_compaction_events(live, lambda e: e) is None
        elif expected is None:
            raise AssertionError("google-adk raised where the analysis did not decline")
        else:
            ours = [
                ("summary", events[x[1]]) if isinstance(x, tuple) else events[x]
                for x in got["prompt"]
            ]
            assert _same_objects(ours, expected)
        selected = _native.sliding_window(events, 3, 1)
        if selected is not None:
            assert _same_objects([events[i] for i in got["window"]], list(selected[1]))
    assert checked > len(SESSIONS) // 2


def test_sessions_objects_and_no_window_without_interval() -> None:
    events = SESSIONS[-1]
    session = Session(id="s", app_name="a", user_id="u", events=events)
    (got,) = fc.analyze_sessions([session])
    assert got["window"] is None
    assert got == fc.analyze_sessions([events], parallel=False)[0]


def test_a_session_that_cannot_be_read_is_declined_not_dropped() -> None:
    results = fc.analyze_sessions([SESSIONS[-1], [None], "not a list"])  # type: ignore[list-item]
    assert "live" in results[0]
    assert results[1] == {"declined": "not an Event"}
    assert "declined" in results[2]


def test_bad_config_raises() -> None:
    with pytest.raises(ValueError, match="compaction_interval"):
        _native.analyze_sessions([SESSIONS[0]], 0)


def test_the_switch_turns_parallelism_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from adk_fastcompact import _analysis

    monkeypatch.setenv(_analysis.PARALLELISM_ENV, "false")
    assert _analysis._parallel_default() is False
    monkeypatch.setenv(_analysis.PARALLELISM_ENV, "1")
    assert _analysis._parallel_default() is True


class _EventList(list):  # type: ignore[type-arg]
    """A list subclass: not the plain list the native reading takes."""


@pytest.mark.parametrize(
    ("session", "reason"),
    [
        (None, "sessions[1] is None, not a Session or a plain list of Events"),
        (5, "sessions[1] is an int, not a Session or a plain list of Events"),
        ({"events": []}, "sessions[1] is a dict, not a Session or a plain list of Events"),
        ((), "sessions[1] is a tuple, not a Session or a plain list of Events"),
        (_EventList(), "sessions[1] is a _EventList, not a Session or a plain list of Events"),
        (
            Session.model_construct(id="s", app_name="a", user_id="u", events=None),
            "sessions[1].events is None, not a plain list of Events",
        ),
    ],
    ids=["None", "int", "dict", "tuple", "list-subclass", "session-without-events"],
)
def test_a_bad_session_is_declined_saying_what_it_is(session: Any, reason: str) -> None:
    """Each entry is a Session or a plain list of Events; anything else is
    declined in its place, the reason naming the entry and what it is."""
    results = fc.analyze_sessions([SESSIONS[-1], session, SESSIONS[-1]])
    assert results[1] == {"declined": reason}
    assert results[0] == results[2] and "live" in results[0]


@pytest.mark.parametrize(
    ("sessions", "config", "message"),
    [
        (None, None, r"^analyze_sessions\(\) takes an iterable .*, not None$"),
        (5, None, r"^analyze_sessions\(\) takes an iterable .*, not an int$"),
        ([], 3, r"^config must be an EventsCompactionConfig or None, not an int$"),
    ],
    ids=["sessions-None", "sessions-int", "config-int"],
)
def test_bad_arguments_raise_type_errors(sessions: Any, config: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        fc.analyze_sessions(sessions, config)
