"""The per-session index: how it recognises events (bound objects, new
objects at old addresses, copies matched by id), what it never trusts
(changed events under known ids, in-place edits), eviction, memory, view
buffers and threads.

Results are always compared with google-adk's own functions on the same
input; the counters of `index_stats()` show which path answered. The rest
of the index's tests are beside this file: the answers it remembers, the
summaries it reuses, session copies and how fields are read.
"""

from __future__ import annotations

import copy
import gc
import threading
import weakref

import adk_fastcompact as fc
import pytest
from adk_fastcompact import _native
from adk_fastcompact._tooling import sessions as _sessions
from google.adk.events.event import Event

from support.compare import (
    ORIG_APPLY_REWINDS,
    ORIG_GET_COMPACTION_RANGES,
    ORIG_PROCESS,
    assert_same_events,
    call,
    needs,
)
from support.index_checks import (
    assert_same_filtering,
    bind,
    compaction_event,
    delta,
    filtered,
    reference,
    session,
)
from support.strategies import random_session


def test_objects_seen_once_are_read_directly_and_bound_when_seen_again() -> None:
    events = session()
    before = _native.index_stats()
    fc.apply_rewinds(events)
    assert delta(before, "direct") == 1 and delta(before, "read") == 0
    fc.apply_rewinds(events)
    assert delta(before, "read") == len(events)


def test_new_objects_at_the_addresses_of_a_list_read_once_are_read_directly() -> None:
    # A session's fresh Events are often allocated where the last
    # invocation's, freed since, were: by their addresses alone they would
    # pass for the objects read once and be bound (paid for, and read
    # again the next time). A list that does not begin with the very first
    # object of the list read last holds new objects.
    events = copy.deepcopy(session())
    before = _native.index_stats()
    fc.apply_rewinds(events)
    assert delta(before, "direct") == 1
    # Most addresses the same, the first object new.
    renewed = [copy.deepcopy(events[0]), *events[1:]]
    assert fc.apply_rewinds(renewed) == ORIG_APPLY_REWINDS(renewed)
    assert delta(before, "direct") == 2 and delta(before, "read") == 0
    # The same list again: seen twice, bound.
    assert fc.apply_rewinds(renewed) == ORIG_APPLY_REWINDS(renewed)
    assert delta(before, "direct") == 2 and delta(before, "read") == len(renewed)


def test_recovery_reads_directly_what_filtering_just_read_directly() -> None:
    # `_get_contents` recovers calls from the list it has just filtered: an
    # invocation with one model call (fresh objects, used once) must not
    # pay for binding them; the next model call's filtering binds them.
    events = session()
    before = _native.index_stats()
    assert_same_filtering(events)
    assert delta(before, "direct") == 2 and delta(before, "read") == 0
    assert_same_filtering(events)
    assert delta(before, "read") == len(events)


@needs("get_compaction_ranges")
def test_range_tuples_of_numbers_are_made_once() -> None:
    # `(index, start, end)` of numbers is immutable: an equal tuple made for
    # an earlier call is handed out again (not rebuilt per call), while a
    # NaN bound is the caller's own object, as in google-adk.
    events = session()
    first, second = fc.get_compaction_ranges(events), fc.get_compaction_ranges(events)
    assert first == second == ORIG_GET_COMPACTION_RANGES(events) and first
    assert all(a is b for a, b in zip(first, second, strict=True))
    nan = copy.deepcopy(events)
    compaction = next(e for e in nan if e.actions.compaction).actions.compaction
    compaction.end_timestamp = float("nan")
    ours = fc.get_compaction_ranges(nan)
    assert any(r[2] is compaction.end_timestamp for r in ours)
    assert [r[0] for r in ours] == [r[0] for r in ORIG_GET_COMPACTION_RANGES(nan)]


def test_an_object_at_a_dead_bound_objects_address_is_read_as_new() -> None:
    # While no weakly bound object died, an item at a bound address is
    # taken for the bound object without asking its weak reference; a death
    # ends that (the allocator hands the freed address to the next object
    # of the type, which here carries another event's values).
    events = session()
    bind(events)
    # The latest event's values: uncovered, sorted last, where the event it
    # replaces is covered by a summary.
    template = events[-1]
    gc.disable()
    try:
        position = 5
        victim = events[position]
        address = id(victim)
        events[position] = None
        del victim
        new = Event.__new__(Event)
    finally:
        gc.enable()
    if id(new) != address:
        pytest.skip("the allocator did not hand out the freed address")
    object.__setattr__(new, "__dict__", copy.deepcopy(template.__dict__))
    object.__setattr__(new, "__pydantic_fields_set__", set(template.__pydantic_fields_set__))
    object.__setattr__(new, "__pydantic_extra__", None)
    object.__setattr__(new, "__pydantic_private__", None)
    events[position] = new
    assert [e.id for e in fc.process_compaction_events(events, "root")].count(template.id) == 2
    assert_same_filtering(events)


def test_the_same_objects_are_recognised_without_reading() -> None:
    events = session()
    bind(events)
    # (Rewinds on the same list again are answered from the last result,
    # see below: other operations show the identity pass.)
    before = _native.index_stats()
    ours = call(fc.process_compaction_events, events, "root")
    orig = call(ORIG_PROCESS, events, "root")
    assert ours.error is None and orig.error is None
    assert_same_events(ours.value, orig.value, [events])
    assert delta(before, "by_identity") == len(events)
    assert delta(before, "by_id") == delta(before, "read") == 0
    if ORIG_GET_COMPACTION_RANGES is not None:  # (google-adk 2.13 on)
        before = _native.index_stats()
        assert fc.get_compaction_ranges(events) == ORIG_GET_COMPACTION_RANGES(events)
        assert delta(before, "by_identity") == len(events)
        assert delta(before, "by_id") == delta(before, "read") == 0


def test_copies_are_matched_by_id_and_read_again() -> None:
    events = session()
    bind(events)
    copied = copy.deepcopy(events)
    fc.apply_rewinds(copied)  # seen once: read directly
    before = _native.index_stats()
    out = fc.apply_rewinds(copied)
    assert [e.id for e in out] == [e.id for e in ORIG_APPLY_REWINDS(copied)]
    assert all(any(o is c for c in copied) for o in out)
    assert delta(before, "by_id") == len({e.id for e in events})
    assert delta(before, "read") == delta(before, "changed") == 0


def test_a_changed_event_under_a_known_id_is_never_mistaken() -> None:
    events = session()
    first, last = events[0].timestamp, events[len(events) // 2].timestamp
    events = [*events, compaction_event(events, first, last)]
    assert_same_filtering(events)
    # Same ids and top-level fields, other compaction bounds: a new object
    # that must be read, not matched.
    assert_same_filtering(events)  # now bound
    edited = copy.deepcopy(events)
    edited[-1].actions.compaction.end_timestamp = events[3].timestamp
    assert_same_filtering(edited)  # seen once: read directly
    before = _native.index_stats()
    assert_same_filtering(edited)
    assert delta(before, "changed") >= 1
    assert fc.process_compaction_events(edited) != fc.process_compaction_events(events)


def test_two_objects_of_one_id_in_one_call_keep_their_own_views() -> None:
    events = session()
    twin = copy.deepcopy(events[5])
    twin.timestamp = events[-1].timestamp + 10
    mixed = [*events, twin]
    assert_same_filtering(mixed)
    before = _native.index_stats()
    assert_same_filtering(mixed)
    assert delta(before, "transient") >= 1


def test_ids_reused_across_sessions_with_other_content() -> None:
    # Generated sessions reuse ids ("e0", "e1", ...) with other content,
    # as a test suite with a deterministic id provider would.
    for seed in range(40):
        assert_same_filtering(random_session(seed, max_events=80).events)


def test_an_in_place_edit_needs_index_clear() -> None:
    events = session()
    events.append(compaction_event(events, events[0].timestamp, events[10].timestamp))
    assert_same_filtering(events)
    events[-1].actions.compaction.end_timestamp = events[20].timestamp
    _native.index_clear()
    assert_same_filtering(events)


def test_the_index_does_not_keep_events_alive() -> None:
    events = session()
    bind(events)
    probe = weakref.ref(events[1])
    del events
    gc.collect()
    assert probe() is None


def test_least_recently_used_sessions_are_evicted() -> None:
    _native.index_configure(max_sessions=2)
    lists = [session(seed) for seed in (3, 4, 5)]
    before = _native.index_stats()
    for events in lists:
        bind(events)
    stats = _native.index_stats()
    assert stats["sessions"] == 2
    assert delta(before, "evictions") == 1
    # The first one is gone: it is read again.
    before = _native.index_stats()
    bind(lists[0])
    assert delta(before, "read") == len({e.id for e in lists[0]})


def test_uninstall_drops_the_indexes_and_disabling_bypasses_them() -> None:
    fc.install()
    bind(session())
    assert _native.index_stats()["sessions"] == 1
    fc.uninstall()
    assert _native.index_stats()["sessions"] == 0
    _native.index_configure(enabled=False)
    events = session()
    assert fc.apply_rewinds(events) == ORIG_APPLY_REWINDS(events)
    assert _native.index_stats()["sessions"] == 0


def test_memory_per_indexed_event_is_reported_and_bounded() -> None:
    # Every result a session's index remembers, over one list: they share
    # one record of its objects.
    events = _sessions.build_session(5_000)
    for _ in range(2):
        filtered(events)
        fc.apply_rewinds(events)
        fc.get_compaction_ranges(events)
        assert _native.sliding_window(events, 3, 1) is not None
        assert _native.token_threshold_selection(events, None, 4, "assistant") is not None
    stats = _native.index_stats()
    assert stats["events"] == len(events)
    per_event = stats["bytes"] / stats["events"]
    assert 64 < per_event < 300, per_event
    # The cached summaries are counted apart: whole Events, one per
    # surviving compaction.
    assert stats["summaries"] > 0
    assert stats["summary_bytes"] > 1000 * stats["summaries"]


def shape(out: list[Event], events: list[Event]) -> list[tuple[str | None, float]]:
    """Input events by id, summaries (new objects, random ids) by timestamp."""
    inputs = {id(e) for e in events}
    return [(e.id if id(e) in inputs else None, e.timestamp) for e in out]


def test_concurrent_calls_give_the_serial_results() -> None:
    sessions = [session(seed) for seed in (3, 4, 5, 6)]
    sessions += [random_session(seed, max_events=200).events for seed in (1, 2)]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for round_ in range(30):
                events = sessions[(k + round_) % len(sessions)]
                if round_ % 3 == 0:
                    events = copy.deepcopy(events)
                assert shape(filtered(events), events) == shape(reference(events), events)
                assert fc.apply_rewinds(events) == ORIG_APPLY_REWINDS(events)
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_view_buffers_are_reused_and_bounded() -> None:
    # A call's views go back to a per-thread pool of at most two buffers
    # (so a growing session does not fault in new pages on every call); a
    # smaller list after a larger one gets a cleared buffer: same results.
    large = session(seed=11, n=3000)
    small = session(seed=12, n=300)
    for events in (large, small, large, small):
        bind(events)
        assert_same_filtering(events)
    pooled = int(_native.index_stats()["scratch_bytes"])
    assert pooled > 0
    # Two buffers, each at most double what the larger list needs (~150
    # bytes per view).
    assert pooled <= 2 * 2 * 3000 * 200
