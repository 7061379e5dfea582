"""Ours against google-adk's pure-Python originals, on generated sessions.

Each of the four functions, and process-then-recover chained exactly as
`_get_contents` chains them, runs on the same inputs through both sides;
results must match element by element: the caller's events by identity,
materialized summaries field by field (with deterministic ids), ranges with
bit-equal bounds, list identity where google-adk returns its input, and the
type and message of anything the original raises.

Sessions per run: 2,000 seeded plain-random sessions of 0-300 events (each
through every function) plus 5 x 200 hypothesis sessions of 0-40 events.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

import adk_fastcompact as fc
import pytest
from adk_fastcompact import _native
from google.adk.events.event import Event
from hypothesis import given, note, settings
from hypothesis import strategies as st

from support.compare import (
    ORIG_APPLY_REWINDS,
    ORIG_GET_COMPACTION_RANGES,
    ORIG_PROCESS,
    ORIG_RECOVER,
    OURS_PROCESS,
    assert_same_error,
    assert_same_events,
    assert_same_ranges,
    call,
    examples,
    needs,
)
from support.strategies import (
    Chooser,
    DrawChooser,
    RandomChooser,
    describe,
    random_session,
    sessions,
    subset,
)

pytestmark = pytest.mark.usefixtures("index_mode")

SEEDED_BLOCKS = 20
SESSIONS_PER_BLOCK = 100
HYPOTHESIS_EXAMPLES = examples(200)
AGENT_NAMES = ("", "root", "helper")


# -- one comparison per function ---------------------------------------------


def check_apply_rewinds(events: list[Event], stats: Counter[str]) -> None:
    before = list(events)
    orig = call(ORIG_APPLY_REWINDS, events)
    ours = call(fc.apply_rewinds, events)
    assert _unchanged(events, before)
    if assert_same_error(ours, orig):
        assert_same_events(ours.value, orig.value, [events])
        stats["rewound"] += len(orig.value) < len(events)
    else:
        stats["raised"] += 1


def check_ranges(events: list[Event], stats: Counter[str]) -> None:
    if ORIG_GET_COMPACTION_RANGES is None:  # google-adk before 2.13
        return
    before = list(events)
    orig = call(ORIG_GET_COMPACTION_RANGES, events)
    ours = call(fc.get_compaction_ranges, events)
    assert _unchanged(events, before)
    if assert_same_error(ours, orig):
        assert_same_ranges(ours.value, orig.value)
        valid = sum(
            1
            for e in events
            if e.actions.compaction is not None
            and e.actions.compaction.compacted_content is not None
            and e.actions.compaction.start_timestamp is not None
            and e.actions.compaction.end_timestamp is not None
        )
        stats["subsumed"] += len(orig.value) < valid
    else:
        stats["raised"] += 1


def check_process(events: list[Event], agent_name: str, stats: Counter[str]) -> None:
    before = list(events)
    orig = call(ORIG_PROCESS, events, agent_name)
    ours = call(OURS_PROCESS, events, agent_name)
    assert _unchanged(events, before)
    if assert_same_events_or_error(ours, orig, [events]):
        stats["summaries"] += sum(1 for e in orig.value if not _is_in(e, events))


def check_recover(events: list[Event], source: Sequence[Event], stats: Counter[str]) -> None:
    before, source_before = list(events), list(source)
    orig = call(ORIG_RECOVER, events, source)
    ours = call(fc.recover_compacted_function_calls, events, source)
    assert _unchanged(events, before) and _unchanged(source, source_before)
    if assert_same_error(ours, orig):
        assert_same_events(ours.value, orig.value, [events, source], returned_input=events)
        stats["recovered"] += orig.value is not events


def check_chain(raw: list[Event], agent_name: str, stats: Counter[str]) -> None:
    """`recover(process(raw, name), raw)`, as `_get_contents` runs it."""
    before = list(raw)

    def chain(process, recover):
        middle: list[list[Event]] = []

        def run() -> list[Event]:
            middle.append(process(raw, agent_name))
            return recover(middle[0], raw)

        return run, middle

    if ORIG_RECOVER is None:  # google-adk before 2.5 recovers nothing
        orig_run, orig_mid = chain(ORIG_PROCESS, _no_recovery)
        ours_run, ours_mid = chain(OURS_PROCESS, _no_recovery)
    else:
        orig_run, orig_mid = chain(ORIG_PROCESS, ORIG_RECOVER)
        ours_run, ours_mid = chain(OURS_PROCESS, fc.recover_compacted_function_calls)
    orig = call(orig_run)
    ours = call(ours_run)
    assert _unchanged(raw, before)
    if assert_same_error(ours, orig):
        assert (ours.value is ours_mid[0]) == (orig.value is orig_mid[0])
        assert_same_events(ours.value, orig.value, [raw])
        stats["reinjected"] += orig.value is not orig_mid[0]
    else:
        stats["raised"] += 1


def _no_recovery(events: list[Event], source: Sequence[Event]) -> list[Event]:
    return events


def assert_same_events_or_error(ours, orig, inputs) -> bool:
    if assert_same_error(ours, orig):
        assert_same_events(ours.value, orig.value, inputs)
        return True
    return False


def _unchanged(seq: Sequence[object], before: list[object]) -> bool:
    return len(seq) == len(before) and all(a is b for a, b in zip(seq, before, strict=True))


def _is_in(event: object, events: Sequence[object]) -> bool:
    return any(event is e for e in events)


def check_session(events: list[Event], c: Chooser, stats: Counter[str]) -> None:
    """Every function, on the session and on what google-adk feeds them."""
    agent_name = c.choice(AGENT_NAMES)
    # Before 2.5 google-adk has neither rewinds nor recovery.
    rewinds, recovery = ORIG_APPLY_REWINDS is not None, ORIG_RECOVER is not None
    if rewinds:
        check_apply_rewinds(events, stats)
    check_ranges(events, stats)
    check_process(events, agent_name, stats)
    check_chain(events, agent_name, stats)
    try:
        live = ORIG_APPLY_REWINDS(events) if rewinds else None
    except Exception:
        live = None
    if live is not None and len(live) < len(events):
        check_chain(live, agent_name, stats)
    if recovery:
        check_recover(subset(c, events), events, stats)
        check_recover(events, events, stats)
    try:
        processed = ORIG_PROCESS(events, agent_name)
    except Exception:
        processed = None
    if processed:
        # Summaries fed back in: they carry their compaction event's actions.
        check_process(processed, agent_name, stats)
        if recovery:
            check_recover(processed, processed, stats)


# -- seeded plain-random sessions --------------------------------------------


@pytest.mark.parametrize("block", range(SEEDED_BLOCKS))
def test_seeded_sessions(block: int) -> None:
    stats: Counter[str] = Counter()
    for seed in range(block * SESSIONS_PER_BLOCK, (block + 1) * SESSIONS_PER_BLOCK):
        session = random_session(seed)
        stats["events"] += len(session.events)
        c = RandomChooser(random.Random(~seed))
        declines = _declines()
        try:
            check_session(session.events, c, stats)
            stats["declined"] += _declines() > declines
        except AssertionError as error:
            raise AssertionError(
                f"session seed {seed} ({session.profile}):\n{describe(session.events)}"
            ) from error
    # The Rust path must decide most sessions (a decline runs google-adk's own
    # function, which trivially agrees with itself), and the generator must
    # reach the hard cases, or the checks above are vacuous.
    assert stats["declined"] <= SESSIONS_PER_BLOCK * 0.3, stats
    if ORIG_RECOVER is not None:  # counted by check_chain and check_recover
        assert stats["reinjected"] >= SESSIONS_PER_BLOCK // 10, stats
        assert stats["recovered"] >= SESSIONS_PER_BLOCK // 10, stats
    if ORIG_APPLY_REWINDS is not None:  # counted by check_apply_rewinds
        assert stats["rewound"] >= SESSIONS_PER_BLOCK // 20, stats
    if ORIG_GET_COMPACTION_RANGES is not None:  # counted by check_ranges
        assert stats["subsumed"] >= SESSIONS_PER_BLOCK // 10, stats
    assert stats["summaries"] >= SESSIONS_PER_BLOCK, stats


def _declines() -> int:
    return sum(_native.decline_counts().values())


def test_seeded_sessions_cover_fallback_cases() -> None:
    """Enough seeded sessions carry NaN and int timestamps, odd compactions and
    duplicated Event objects that the fallback paths are compared too."""
    features: Counter[str] = Counter()
    for seed in range(SESSIONS_PER_BLOCK * 3):
        events = random_session(seed).events
        declines = _declines()
        fc.process_compaction_events(events)
        if ORIG_GET_COMPACTION_RANGES is not None:  # its fallback
            fc.get_compaction_ranges(events)
        features["declined"] += _declines() > declines
        stamps = [e.timestamp for e in events]
        features["nan"] += any(t != t for t in stamps)
        features["int"] += any(type(t) is int for t in stamps)
        features["dup"] += len({id(e) for e in events}) < len(events)
        comps = [e.actions.compaction for e in events if e.actions.compaction]
        features["none_bound"] += any(
            c.start_timestamp is None or c.end_timestamp is None for c in comps
        )
        features["no_content"] += any(c.compacted_content is None for c in comps)
        features["nan_bound"] += any(
            c.start_timestamp != c.start_timestamp or c.end_timestamp != c.end_timestamp
            for c in comps
        )
        features["empty_id"] += any(not f.id for e in events for f in e.get_function_calls())
    assert min(features.values()) >= 5 and len(features) == 8, features


# -- hypothesis sessions -----------------------------------------------------


@needs("apply_rewinds")
@settings(max_examples=HYPOTHESIS_EXAMPLES)
@given(sessions())
def test_apply_rewinds(session) -> None:
    note(describe(session.events))
    check_apply_rewinds(session.events, Counter())


@needs("get_compaction_ranges")
@settings(max_examples=HYPOTHESIS_EXAMPLES)
@given(sessions())
def test_get_compaction_ranges(session) -> None:
    note(describe(session.events))
    check_ranges(session.events, Counter())


@settings(max_examples=HYPOTHESIS_EXAMPLES)
@given(sessions(), st.sampled_from(AGENT_NAMES))
def test_process_compaction_events(session, agent_name: str) -> None:
    note(describe(session.events))
    check_process(session.events, agent_name, Counter())


@needs("recover_compacted_function_calls")
@settings(max_examples=HYPOTHESIS_EXAMPLES)
@given(sessions(), st.data())
def test_recover_compacted_function_calls(session, data) -> None:
    events = subset(DrawChooser(data.draw), session.events)
    note(describe(session.events))
    note(f"events: {describe(events)}")
    check_recover(events, session.events, Counter())


@settings(max_examples=HYPOTHESIS_EXAMPLES)
@given(sessions(), st.sampled_from(AGENT_NAMES))
def test_process_then_recover(session, agent_name: str) -> None:
    note(describe(session.events))
    check_chain(session.events, agent_name, Counter())


# -- fixed cases worth naming ------------------------------------------------


@needs("recover_compacted_function_calls")
def test_recover_reinjects_a_compacted_long_running_call() -> None:
    """The documented case, so the chain test is known to exercise it."""
    from google.adk.events.event_actions import EventActions, EventCompaction
    from google.genai import types

    def fn(fid: str, response: dict | None = None) -> types.Content:
        if response is None:
            part = types.Part(function_call=types.FunctionCall(id=fid, name="t"))
            return types.Content(role="model", parts=[part])
        part = types.Part(
            function_response=types.FunctionResponse(id=fid, name="t", response=response)
        )
        return types.Content(role="user", parts=[part])

    call_event = Event(
        id="c", author="root", timestamp=1.0, content=fn("a"), long_running_tool_ids={"a"}
    )
    placeholder = Event(id="p", author="root", timestamp=2.0, content=fn("a", {"s": 0}))
    summary = Event(
        id="s",
        author="user",
        timestamp=3.0,
        actions=EventActions(
            compaction=EventCompaction(
                start_timestamp=1.0,
                end_timestamp=2.0,
                compacted_content=types.Content(role="model", parts=[types.Part(text="x")]),
            )
        ),
    )
    result = Event(id="r", author="user", timestamp=4.0, content=fn("a", {"s": 1}))
    raw = [call_event, placeholder, summary, result]
    stats: Counter[str] = Counter()
    check_chain(raw, "root", stats)
    assert stats["reinjected"] == 1
    out = fc.recover_compacted_function_calls(fc.process_compaction_events(raw), raw)
    assert [e.id for e in out[1:]] == ["c", "r"]
