"""Exact-mode coverage records: written, stored, read back, and refused.

A record rides in a compaction event's `custom_metadata`; it must survive
what google-adk does to events (deep copies, JSON storage with timestamps
kept at microseconds), name its holes so that they are still found after
that, and a record that cannot be used must cost one warning and leave the
compaction read as its interval, never a crash.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from adk_fastcompact import _exact, _native
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.genai import types


def _compaction(start: float, end: float, record: Any = None) -> Event:
    event = Event(
        invocation_id="summary",
        author="user",
        timestamp=end + 0.5,
        actions=EventActions(
            compaction=EventCompaction(
                start_timestamp=start,
                end_timestamp=end,
                compacted_content=types.Content(role="model", parts=[types.Part(text="s")]),
            )
        ),
    )
    if record is not None:
        event.custom_metadata = {_exact.METADATA_KEY: record, "app": 1}
    return event


@pytest.fixture(autouse=True)
def _fresh_warnings() -> Iterator[None]:
    _exact.reset_warnings()
    yield
    _exact.reset_warnings()


def test_a_record_survives_copies_and_json_storage() -> None:
    hole = Event(invocation_id="inv-2", author="agent", timestamp=1_700_000_000.123_456_7)
    record = _exact.new_record(1_700_000_000.0, 1_700_000_001.0, [hole, hole])
    assert record == {
        "v": 1,
        "start": 1_700_000_000.0,
        "end": 1_700_000_001.0,
        "holes": [{"i": "inv-2", "t": 1_700_000_000_123_457}],
    }
    event = _exact.with_record(_compaction(1_700_000_000.0, 1_700_000_001.0), record)
    assert event.custom_metadata[_exact.METADATA_KEY] == record
    for stored in (
        copy.deepcopy(event),  # InMemorySessionService
        Event.model_validate_json(event.model_dump_json()),  # SqliteSessionService
        Event.model_validate(event.model_dump(mode="json")),  # DatabaseSessionService v1
    ):
        assert _exact.read_record(stored) == record


def test_plain_events_and_interval_only_compactions_have_no_record() -> None:
    assert _exact.read_record(Event(author="user")) is None
    assert _exact.read_record(_compaction(1.0, 2.0)) is None
    plain = _compaction(1.0, 2.0)
    plain.custom_metadata = {"other": {"v": 1}}
    assert _exact.read_record(plain) is None


@pytest.mark.parametrize(
    ("record", "kind"),
    [
        ("not a record", "malformed"),
        ({"v": 1, "start": 1.0, "end": 2.0}, "malformed"),
        ({"v": 1, "start": 1.0, "end": 2.0, "holes": [], "extra": 1}, "malformed"),
        ({"v": 1, "start": 1.0, "end": 2.0, "holes": [{"i": 3, "t": 1}]}, "malformed"),
        ({"v": 9, "future": True}, "coverage record version 9"),
        ({"v": 1, "start": 1.5, "end": 2.0, "holes": []}, "coverage record bounds"),
        ({"v": 1, "start": 2.0, "end": 1.0, "holes": []}, "coverage record bounds"),
        (
            {"v": 1, "start": 1.0, "end": 2.0, "holes": [{"i": "a", "t": 1}] * 4097},
            "coverage record names 4097 holes",
        ),
    ],
)
def test_a_record_that_cannot_be_used_is_warned_about_once(record: Any, kind: str) -> None:
    event = _compaction(1.0, 2.0, record)
    with pytest.warns(_exact.CoverageRecordWarning, match=kind):
        assert _exact.read_record(event) is None
    # The same kind again: no second warning (pytest turns warnings into errors).
    assert _exact.read_record(event) is None


def test_versions_and_sizes_are_one_kind_each() -> None:
    with pytest.warns(_exact.CoverageRecordWarning, match="version 9"):
        assert _exact.read_record(_compaction(1.0, 2.0, {"v": 9})) is None
    assert _exact.read_record(_compaction(1.0, 2.0, {"v": 10})) is None


def test_the_native_validation_raises_value_error() -> None:
    with pytest.raises(ValueError, match="version 2"):
        _native.coverage_record({"v": 2}, 1.0, 2.0)
    with pytest.raises(ValueError, match="no key"):
        _native.new_coverage_record(1.0, 2.0, [("i", float("nan"))])
    with pytest.raises(ValueError, match="bounds"):
        _native.new_coverage_record(2.0, 1.0, [])


def _service(kind: str, tmp_path: Path) -> Any:
    from google.adk.sessions.database_session_service import DatabaseSessionService
    from google.adk.sessions.in_memory_session_service import InMemorySessionService
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    if kind == "sqlite":
        return SqliteSessionService(str(tmp_path / "sqlite.db"))
    if kind == "database":
        return DatabaseSessionService(f"sqlite+aiosqlite:///{tmp_path / 'database.db'}")
    return InMemorySessionService()


@pytest.mark.parametrize("kind", ["memory", "sqlite", "database"])
def test_every_session_service_keeps_the_record_and_the_holes_keys(
    kind: str, tmp_path: Path
) -> None:
    """google-adk 2.13.0's in-process services keep `custom_metadata` and
    the timestamps a hole's key names (to the microsecond; the SQL schemas
    of `DatabaseSessionService` keep datetimes). Vertex AI needs a live
    project: docs/exact-mode.md says what its code keeps."""

    async def main() -> tuple[list[Event], list[Event]]:
        service = _service(kind, tmp_path)
        try:
            return await converse(service)
        finally:
            # (google-adk 2.11's SqliteSessionService has no close(): it
            # holds no connection between calls.)
            if kind != "memory" and hasattr(service, "close"):
                await service.close()

    async def converse(service: Any) -> tuple[list[Event], list[Event]]:
        session = await service.create_session(app_name="a", user_id="u", session_id="s")
        stamps = (1_700_000_000.123_456_7, 1_700_000_000.987_654_3, 1_700_000_001.5)
        written = [
            Event(invocation_id=f"inv-{k}", author="agent", timestamp=t)
            for k, t in enumerate(stamps)
        ]
        for event in written:
            await service.append_event(session, event)
        compaction = _compaction(stamps[0], stamps[2])
        compaction.timestamp = stamps[2] + 1.0
        compaction.custom_metadata = {"app": 1}
        # The record is written from the events in memory, as exact mode does.
        _exact.with_record(compaction, _exact.new_record(stamps[0], stamps[2], written[1:2]))
        await service.append_event(session, compaction)
        read = await service.get_session(app_name="a", user_id="u", session_id="s")
        assert read is not None
        return [*written, compaction], list(read.events)

    import asyncio

    written, read = asyncio.run(main())
    assert [e.id for e in read] == [e.id for e in written]
    record = _exact.read_record(read[-1])
    assert record == _exact.read_record(written[-1])
    assert record is not None
    (hole,) = record["holes"]
    stored = read[1]
    assert hole["i"] == stored.invocation_id
    # Named within the one microsecond of slack the core allows.
    assert abs(round(stored.timestamp * 1e6) - hole["t"]) <= 1
    assert read[-1].custom_metadata["app"] == 1


def _raw(invocation: str, timestamp: float) -> Event:
    return Event(
        author="user",
        invocation_id=invocation,
        timestamp=timestamp,
        content=types.Content(role="user", parts=[types.Part(text=f"{invocation}@{timestamp}")]),
    )


def test_every_hole_keeps_its_own_invocation() -> None:
    # Regression: the holes' invocation ids were interned through an address
    # cache, and each temporary string took the freed address of the one
    # before, so every hole named the first hole's invocation and the
    # others read as covered (lost from the prompt).
    # (Ids of more than one character: CPython keeps one-character strings
    # as singletons, which are never freed.)
    events = [_raw("inv-a", 1.0), _raw("inv-b", 2.0), _raw("inv-c", 3.0), _raw("inv-a", 4.0)]
    record = _native.new_coverage_record(1.0, 4.0, [("inv-b", 2.0), ("inv-c", 3.0)])
    events.append(_exact.with_record(_compaction(1.0, 1.0), record))
    out = _native.exact_prompt(events, lambda event: event)
    assert out is not None
    prompt, problems = out
    assert problems == []
    assert prompt[:2] == [events[1], events[2]]
    assert len(prompt) == 3


def _stats(name: str) -> int:
    return int(_native.index_stats()[name])


def test_a_hole_is_found_on_events_the_index_read_without_invocations() -> None:
    # Exact mode's prompt reads what parity's does; the invocation ids a
    # hole names are read only when a record has holes, so events the
    # index first read for parity's prompt must be completed, not taken as
    # having no invocation (which no hole names: the event would be lost).
    _native.index_clear()
    events = [_raw("inv-a", 1.0), _raw("inv-b", 2.0), _raw("inv-a", 3.0)]
    assert _native.process_compaction_events(events, lambda event: event) == events
    record = _native.new_coverage_record(1.0, 3.0, [("inv-b", 2.0)])
    events.append(_exact.with_record(_compaction(1.0, 3.0), record))
    out = _native.exact_prompt(events, lambda event: event)
    assert out is not None
    prompt, problems = out
    assert problems == []
    assert prompt == [events[1], events[3]]


def test_exact_answers_are_reused_only_for_the_very_same_events() -> None:
    _native.index_clear()
    events = [_raw("inv-a", 1.0), _raw("inv-b", 2.0), _compaction(1.0, 1.5), _raw("inv-c", 3.0)]
    # The first call on a session reads directly, the second binds the
    # events to the index; from then on an answer can be reused.
    _native.exact_prompt(events, lambda event: event)
    first = _native.exact_prompt(events, lambda event: event)
    before = _stats("exact_reused")
    again = _native.exact_prompt(list(events), lambda event: event)
    assert _stats("exact_reused") == before + 1
    assert first is not None and again is not None
    assert [id(e) for e in again[0]] == [id(e) for e in first[0]]
    # Extended by an event stamped after the prompt's last: answered from
    # the last prompt; by one stamped before it: computed again.
    events.append(_raw("inv-d", 4.0))
    longer = _native.exact_prompt(events, lambda event: event)
    assert _stats("exact_reused") == before + 2
    assert longer is not None and longer[0][-1] is events[-1]
    events.append(_raw("inv-e", 2.5))
    late = _native.exact_prompt(events, lambda event: event)
    assert _stats("exact_reused") == before + 2
    assert late is not None
    assert [e.timestamp for e in late[0] if e.actions.compaction is None] == [2.0, 2.5, 3.0, 4.0]
    _native.index_clear()
    assert [id(e) for e in _native.exact_prompt(events, lambda event: event)[0]] == [
        id(e) for e in late[0]
    ]
    before = _stats("exact_reused")
    window = _native.exact_sliding_window(events, 1, 0)
    again = _native.exact_sliding_window(events, 1, 0)
    assert window is not None and again is not None
    assert window[:5] == again[:5]
    assert _stats("exact_reused") == before + 1
    # The record written from the selection's handle is the one written by
    # reading the events again; a list that is not the handed-out one is
    # read.
    scoped, handed, _, _, _, handle = window
    assert handle is not None
    by_handle = _native.exact_record(scoped, handed, [], [], math.inf, handle)
    assert by_handle == _native.exact_record(scoped, handed, [], [], math.inf)
    assert by_handle == _native.exact_record(list(scoped), handed, [], [], math.inf, handle)
    # Kept with the handle for the same positions: written again alike; a
    # foreign event or other positions are worked out anew, never the kept one.
    assert _native.exact_record(scoped, handed, [], [], math.inf, handle) == by_handle
    foreign = [("inv-other", scoped[handed[-1]].timestamp)]
    with_foreign = _native.exact_record(scoped, handed, [], foreign, math.inf, handle)
    assert with_foreign == _native.exact_record(scoped, handed, [], foreign, math.inf)
    assert with_foreign != by_handle
    shorter = _native.exact_record(scoped, handed[:1], [], [], math.inf, handle)
    assert shorter == _native.exact_record(scoped, handed[:1], [], [], math.inf)
    assert _native.exact_record(scoped, handed, [], [], math.inf, handle) == by_handle
    # Asked otherwise, it is computed again.
    _native.exact_sliding_window(events, 2, 0)
    assert _stats("exact_reused") == before + 1


def test_a_sliding_selection_extends_the_last_coverage_over_raw_events_only() -> None:
    # A list extended by raw events keeps its compactions' coverage (an event
    # stored after every compaction is covered by none, even stamped inside
    # an interval); the answer equals one computed from scratch.
    def selection(events: list[Event]) -> Any:
        out = _native.exact_sliding_window(events, 2, 1)
        assert out is not None
        scoped, handed, covered, since, problems, handle = out
        record = (
            None
            if handle is None
            else _native.exact_record(scoped, handed, [], [], math.inf, handle)
        )
        return [id(e) for e in scoped], handed, covered, since, problems, record

    def fresh(events: list[Event]) -> Any:
        _native.index_clear()
        return selection(events)

    _native.index_clear()
    events = [_raw("inv-a", 1.0), _raw("inv-a", 1.1), _raw("inv-b", 2.0), _compaction(1.0, 2.0)]
    events += [_raw("inv-c", 3.0), _raw("inv-c", 3.1)]
    for _ in range(2):  # the second call binds the events to the index
        selection(events)
    appended = [
        [_raw("inv-d", 4.0)],
        [_raw("inv-e", 1.5)],  # inside the compaction's interval, stored after it
        [_raw("inv-f", 5.0), _raw("inv-f", 0.5)],
        [_raw("inv-g", 6.0)],
    ]
    for more in appended:
        events = [*events, *more]
        before = _stats("exact_extended")
        got = selection(events)
        assert _stats("exact_extended") == before + 1
        assert got == fresh(events)
        selection(events)  # bound again for the next extension
    # A compaction among the new events: computed again.
    selection(events)
    events = [*events, _compaction(3.0, 6.0), _raw("inv-h", 7.0)]
    before = _stats("exact_extended")
    got = selection(events)
    assert _stats("exact_extended") == before
    assert got == fresh(events)
    _native.index_clear()


def test_events_another_invocation_appended_are_found_by_id() -> None:
    from adk_fastcompact import _exact_mode
    from google.adk.sessions.session import Session

    _native.index_clear()
    stored = [_raw("inv-a", 1.0), _raw("inv-b", 2.0), _raw("inv-a", 3.0)]
    session = Session(id="s", app_name="app", user_id="u", events=copy.deepcopy(stored))
    # This invocation's copy was read; another invocation appended one event
    # with an id it never saw, and one with the id of an event it holds.
    _native.exact_prompt(session.events, lambda event: event)
    foreign = _raw("inv-x", 1.5)
    stored += [foreign, copy.deepcopy(stored[0])]
    seen = len(session.events)
    assert _exact_mode._foreign(session, stored, seen) == [foreign]
    assert _exact_mode._foreign(session, session.events, seen) == []
    # One appended to this very copy after the selection (a sibling branch's).
    sibling = _raw("inv-a", 2.5)
    session.events.append(sibling)
    assert _exact_mode._foreign(session, session.events, seen) == [sibling]
    assert _exact_mode._foreign(session, stored, seen) == [sibling, foreign]
    # A list that does not go through the index: the caller compares ids.
    assert _native.exact_foreign([], stored) is None


@pytest.mark.adk_2_13("exact mode")
def test_events_another_invocation_appended_are_found_through_the_index() -> None:
    # As a session service runs it: the stored session read, this
    # invocation's deep copy (bound to the originals' slots at copy time),
    # then another invocation's append to the stored list.
    import adk_fastcompact
    from google.adk.sessions.session import Session

    _native.index_clear()
    adk_fastcompact.uninstall()
    assert adk_fastcompact.install(mode="exact") is True
    try:
        stored = Session(
            id="s",
            app_name="app",
            user_id="u",
            events=[_raw("inv-a", 1.0), _raw("inv-b", 2.0), _raw("inv-a", 3.0)],
        )
        for _ in range(2):
            _native.exact_prompt(stored.events, lambda event: event)
        ours = copy.deepcopy(stored)
        _native.exact_prompt(ours.events, lambda event: event)
        stored.events.append(_raw("inv-x", 1.5))
        assert _native.exact_foreign(ours.events, stored.events) == [3]
        assert _native.exact_foreign(ours.events, ours.events) == []
    finally:
        adk_fastcompact.uninstall()
        _native.index_clear()


def test_several_summaries_seed_one_event_the_summarizer_reads_alike() -> None:
    from adk_fastcompact import _compaction as compaction
    from adk_fastcompact import _exact_mode
    from google.adk.apps.llm_event_summarizer import LlmEventSummarizer

    seeds = [_compaction(float(k), k + 0.5) for k in range(3)]
    for k, seed in enumerate(seeds):
        seed.actions.compaction.compacted_content = types.ModelContent(
            [types.Part(text=f"summary {k}"), types.Part(text=f"and more {k}")]
        )
    parts, role, sizes, start = _native.exact_seeds(seeds, [0, 1, 2], compaction._content_size)
    (rolled,) = _exact_mode._rolled_seed(seeds, parts, role, start)
    assert rolled.timestamp == 0.0 and rolled.author == "model"
    assert rolled.actions.compaction is None
    one_each = [compaction.seed_event(seed) for seed in seeds]
    summarizer = LlmEventSummarizer.__new__(LlmEventSummarizer)
    text = summarizer._format_events_for_prompt([rolled])
    assert text == summarizer._format_events_for_prompt(one_each)
    assert "summary 0" in text and "and more 2" in text
    # The content equals one validated the ordinary way.
    assert rolled.content == types.Content(
        role="model", parts=[p for s in one_each for p in s.content.parts]
    )
    # Each summary sized as it weighs in the prompt: its own content.
    assert sizes == [
        compaction._content_size(s.actions.compaction.compacted_content) for s in seeds
    ]
    # One summary: google-adk's own seed.
    parts, role, sizes, start = _native.exact_seeds(seeds, [0], compaction._content_size)
    (single,) = _exact_mode._rolled_seed(seeds[:1], parts, role, start)
    assert single.model_dump(exclude={"id", "invocation_id"}) == one_each[0].model_dump(
        exclude={"id", "invocation_id"}
    )


def test_seeds_are_read_once_per_selection_and_checked() -> None:
    from adk_fastcompact import _compaction as compaction

    _native.index_clear()
    events = [_raw("inv-a", 1.0), _raw("inv-a", 2.0)]
    for k in range(3):
        events.append(_compaction(k + 1.0, k + 1.5))
        # A part the core does not size: `size` is asked for each summary.
        events[-1].actions.compaction.compacted_content = types.Content(
            role="model", parts=[types.Part(text="s", thought_signature=b"sig")]
        )
        events.append(_raw(f"inv-{k}", k + 3.0))
    events += [_raw("inv-z", 9.0 + k) for k in range(8)]
    selected = _native.exact_token_threshold(events, None, 2, "", 0)
    assert selected is not None
    _, scoped, _, _, seeds, _, _, handle = selected
    assert handle is not None and len(seeds) == 3
    calls: list[object] = []

    def size(content: object) -> int:
        calls.append(content)
        return compaction._content_size(content)

    first = _native.exact_seeds(scoped, list(seeds), size, handle)
    assert len(calls) == 3
    again = _native.exact_seeds(scoped, list(seeds), size, handle)
    # Kept with the selection: no summary read again, the parts in a new list.
    assert len(calls) == 3 and again == first and again[0] is not first[0]
    # Other positions, or no handle: read.
    _native.exact_seeds(scoped, list(seeds)[1:], size, handle)
    assert len(calls) == 5
    _native.exact_seeds(scoped, list(seeds), size)
    assert len(calls) == 8
    with pytest.raises(ValueError, match="not in the"):
        _native.exact_seeds(scoped, [len(scoped)], size)
    with pytest.raises(ValueError, match="holds no compaction"):
        _native.exact_seeds(scoped, [0], size)
    # Summaries of text parts are sized natively, as pydantic writes them.
    for p in seeds:
        scoped[p].actions.compaction.compacted_content = types.Content(
            role="model", parts=[types.Part(text=f'summary "{p}"\n')]
        )
    del calls[:]
    _, _, sizes, _ = _native.exact_seeds(scoped, list(seeds), size)
    assert calls == []
    assert sizes == [
        len(scoped[p].actions.compaction.compacted_content.model_dump_json(exclude_none=True))
        for p in seeds
    ]
    _native.index_clear()


@pytest.mark.adk_2_13("exact mode")
def test_a_record_read_off_a_stored_original_is_read_again_when_it_is_replaced() -> None:
    # Records are parsed once per binding off the stored original a session
    # service deep-copies for every invocation; a compaction event replaced
    # in the store (same id, another record) is parsed anew.
    import adk_fastcompact
    from google.adk.sessions.session import Session

    def summary_only(events: list[Event]) -> list[str]:
        out = _native.exact_prompt(events, lambda event: event)
        assert out is not None and out[1] == []
        return [e.invocation_id for e in out[0]]

    _native.index_clear()
    adk_fastcompact.uninstall()
    assert adk_fastcompact.install(mode="exact") is True
    try:
        events = [_raw("inv-a", 1.0), _raw("inv-b", 2.0)]
        plain = _native.new_coverage_record(1.0, 2.0, [])
        events.append(_exact.with_record(_compaction(1.0, 2.0), plain))
        stored = Session(id="s", app_name="app", user_id="u", events=events)
        # The stored list read, as a session service's own is.
        for _ in range(2):
            assert summary_only(stored.events) == ["summary"]
        for _ in range(3):
            assert summary_only(copy.deepcopy(stored).events) == ["summary"]
        holed = _native.new_coverage_record(1.0, 2.0, [("inv-b", 2.0)])
        replaced = _exact.with_record(_compaction(1.0, 1.0), holed)
        replaced.id = events[2].id
        stored.events[2] = replaced
        for _ in range(2):
            assert summary_only(stored.events) == ["inv-b", "summary"]
        for _ in range(3):
            assert summary_only(copy.deepcopy(stored).events) == ["inv-b", "summary"]
    finally:
        adk_fastcompact.uninstall()
        _native.index_clear()


def test_the_live_events_alone_are_read_without_a_selection() -> None:
    events = [_raw("inv-a", 1.0), _raw("inv-b", 2.0)]
    scoped = _raw("inv-c", 3.0)
    scoped.isolation_scope = "task"
    events.append(scoped)
    out = _native.exact_sliding_window(events, 0, 0, select=False)
    assert out is not None
    live, handed, covered, since, problems, handle = out
    assert live == events[:2] and all(a is b for a, b in zip(live, events, strict=False))
    assert (handed, covered, problems, handle) == ([], [], [], None)
    assert since == float("-inf")
    # The same list selected: the window is there.
    selected = _native.exact_sliding_window(events, 1, 0)
    assert selected is not None and selected[1] == [0, 1]


@pytest.mark.adk_2_13("exact mode")
def test_exact_answers_carry_over_to_a_session_copy() -> None:
    # A session service deep-copies the stored session for every
    # invocation: the copies are bound to the originals' slots at copy time,
    # and exact mode's last answers move onto them, as parity's do, so the
    # invocation's first prompt is answered without reading the session.
    import adk_fastcompact
    from google.adk.sessions.session import Session

    _native.index_clear()
    adk_fastcompact.uninstall()
    assert adk_fastcompact.install(mode="exact") is True
    try:
        events = [_raw("inv-a", 1.0), _raw("inv-b", 2.0), _raw("inv-c", 3.0)]
        record = _native.new_coverage_record(1.0, 3.0, [("inv-b", 2.0)])
        events.append(_exact.with_record(_compaction(1.0, 3.0), record))
        stored = Session(id="s", app_name="app", user_id="u", events=events)
        for _ in range(2):
            first = _native.exact_prompt(stored.events, lambda event: event)
        ours = copy.deepcopy(stored)
        before = _stats("exact_reused")
        carried = _native.exact_prompt(ours.events, lambda event: event)
        assert _stats("exact_reused") == before + 1
        assert first is not None and carried is not None
        # The copy's own events, in the same places.
        assert carried[0][0] is ours.events[1]
        assert [e.id for e in carried[0]] == [e.id for e in first[0]]
        _native.index_clear()
        assert [e.id for e in _native.exact_prompt(ours.events, lambda e: e)[0]] == [
            e.id for e in carried[0]
        ]
    finally:
        adk_fastcompact.uninstall()
        _native.index_clear()
