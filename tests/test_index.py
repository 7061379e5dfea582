"""The per-session index: how it recognises events, what it never trusts,
eviction, memory, threads, and summary reuse.

Results are always compared with google-adk's own functions on the same
input; the counters of `index_stats()` show which path answered.
"""

from __future__ import annotations

import copy
import gc
import os
import subprocess
import sys
import sysconfig
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import adk_fastcompact as fc
import pytest
from adk_fastcompact import _families, _native
from adk_fastcompact._tooling import sessions as _sessions
from compare import (
    ORIG_APPLY_REWINDS,
    ORIG_GET_COMPACTION_RANGES,
    ORIG_PROCESS,
    ORIG_RECOVER,
    PROFILE,
    assert_same_error,
    assert_same_events,
    assert_same_ranges,
    call,
    needs,
)
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.platform import uuid as platform_uuid
from google.genai import types
from strategies import random_session
from test_summaries import assert_equal_but_id

_remembered_recovery = pytest.mark.skipif(
    PROFILE.recover_by_id,
    reason=(
        f"google-adk {_families.adk_version()} matches a response to its call by id: that"
        " recovery is not remembered between calls (src/py/recover.rs), 2.13's is"
    ),
)


@pytest.fixture(autouse=True)
def _fresh_index() -> Iterator[None]:
    _native.index_configure(enabled=True, max_sessions=64)
    _native.index_clear()
    yield
    _native.index_configure(enabled=True, max_sessions=64)
    _native.index_clear()


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


def _compaction_event(events: list[Event], start: float, end: float) -> Event:
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


def test_a_changed_event_under_a_known_id_is_never_mistaken() -> None:
    events = session()
    first, last = events[0].timestamp, events[len(events) // 2].timestamp
    events = [*events, _compaction_event(events, first, last)]
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
    events.append(_compaction_event(events, events[0].timestamp, events[10].timestamp))
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


def _reuse_check(
    events: list[Event],
    ours: Callable[[list[Event]], Any],
    theirs: Callable[[list[Event]], Any],
    counter: str,
    same: Callable[[Any, Any], None],
) -> Callable[[bool], None]:
    """A check that `ours` on `events` was answered from its remembered
    result (`counter` moved) or not, as expected, and agrees with
    google-adk's `theirs`."""

    def check(expect_reused: bool) -> None:
        before = _native.index_stats()
        mine = call(ours, events)
        assert delta(before, counter) == int(expect_reused)
        orig = call(theirs, events)
        assert mine.error is None and orig.error is None
        same(mine.value, orig.value)

    return check


def _rewinds_check(events: list[Event]) -> Callable[[bool], None]:
    """`_reuse_check` of `apply_rewinds` on `events`."""
    return _reuse_check(
        events,
        fc.apply_rewinds,
        ORIG_APPLY_REWINDS,
        "rewinds_reused",
        lambda ours, orig: assert_same_events(ours, orig, [events]),
    )


def _ranges_check(events: list[Event]) -> Callable[[bool], None]:
    """`_reuse_check` of `get_compaction_ranges` on `events`."""
    return _reuse_check(
        events,
        fc.get_compaction_ranges,
        ORIG_GET_COMPACTION_RANGES,
        "ranges_reused",
        assert_same_ranges,
    )


@needs("get_compaction_ranges")
def test_compaction_ranges_are_answered_from_the_last_call_on_the_same_list() -> None:
    # The same list again, or extended (by plain events, by compactions
    # that subsume, overlap, tie, have a NaN or no bound or no content), is answered
    # from the last result and the new events' ranges; an item replaced is
    # computed again. Every answer is google-adk's.
    events = session(seed=7, n=300)
    bind(events)

    check = _ranges_check(events)

    def compaction(start: float | None, end: float | None, content: bool = True) -> Event:
        # Without validation: a store may hold what validation refuses.
        text = types.Content(role="model", parts=[types.Part(text="s")]) if content else None
        return Event(
            author="user",
            invocation_id=f"inv-c{len(events)}",
            timestamp=events[-1].timestamp + 1,
            actions=EventActions(
                compaction=EventCompaction.model_construct(
                    start_timestamp=start, end_timestamp=end, compacted_content=text
                )
            ),
        )

    check(False)
    check(True)
    first, last = events[0].timestamp, events[-1].timestamp
    events.append(Event(author="user", invocation_id="inv-new", timestamp=last + 1))
    check(True)
    for new in [
        compaction(first, last),  # subsumes every range so far
        compaction(first + 1, last + 5),  # overlaps it
        compaction(first, last),  # ties the first: the later one stays
        compaction(float("nan"), last),
        compaction(first, None),
        compaction(first, last + 9, content=False),
    ]:
        events.append(new)
        check(True)
    check(True)
    events[50] = events[50].model_copy(deep=True)
    check(False)
    check(True)


def test_rewinds_are_answered_from_the_last_call_on_the_same_list() -> None:
    # The same list again, or extended by events that rewind nothing, is
    # answered from the last result; a rewind appended, an item replaced
    # or an event changed under a known id is computed again. Every answer
    # is google-adk's.
    events = session(seed=7, n=300)
    bind(events)

    check = _rewinds_check(events)

    check(True)
    # New events (read and stored) or known ones extend the last result.
    before = _native.index_stats()
    events.append(Event(author="user", invocation_id="inv-new", timestamp=events[-1].timestamp + 1))
    check(True)
    assert delta(before, "read") == 1
    check(True)
    extra = Event(author="user", invocation_id="inv-2", timestamp=events[-1].timestamp + 1)
    call(fc.get_compaction_ranges, [*events, extra])
    events.append(extra)
    check(True)
    # A rewind appended: computed again (then answered again).
    events.append(
        Event(
            author="user",
            invocation_id="inv-3",
            timestamp=events[-1].timestamp + 1,
            actions=EventActions(rewind_before_invocation_id=events[100].invocation_id),
        )
    )
    check(False)
    check(True)
    events[50] = events[50].model_copy(deep=True)
    check(False)


def test_a_session_copy_inherits_the_last_rewinds_result() -> None:
    # The copies are bound to the slots of the objects they copy, so the
    # last result holds for them: the invocation's first rewinds call on
    # its copy is answered from it (and is google-adk's).
    from google.adk.sessions.session import Session

    stored = Session(id="s", app_name="a", user_id="u", events=session(seed=9, n=300))
    fc.install()
    try:
        bind(stored.events)
        copied = copy.deepcopy(stored)
        before = _native.index_stats()
        ours = call(fc.apply_rewinds, copied.events)
        assert delta(before, "rewinds_reused") == 1
        assert_same_events(ours.value, ORIG_APPLY_REWINDS(copied.events), [copied.events])
        assert all(a is b for a, b in zip(ours.value, copied.events, strict=True))
    finally:
        fc.uninstall()


def test_session_copies_get_the_summaries_of_the_stored_originals() -> None:
    # A summary is built once per compaction event: the compaction events of
    # a session copy (deep copies of the stored originals, bound at copy
    # time) get the originals' summaries, equal to google-adk's summaries of
    # the copy but for the drawn id, and holding the originals' actions and
    # compacted content (google-adk's hold the copy's, equal to them).
    from google.adk.sessions.session import Session

    stored = Session(id="s", app_name="a", user_id="u", events=session(seed=11, n=400))
    fc.install()
    try:
        bind(stored.events)
        fc.process_compaction_events(stored.events, "root")
        handed: list[Event] | None = None
        for k in range(3):
            copied = copy.deepcopy(stored)
            before = _native.index_stats()
            ours = fc.process_compaction_events(copied.events, "root")
            orig = ORIG_PROCESS(copied.events, "root")
            assert len(ours) == len(orig)
            summaries = []
            for a, b in zip(ours, orig, strict=True):
                if any(a is x for x in copied.events):
                    assert a is b
                else:
                    assert_equal_but_id(a, b, shared=False)
                    assert any(a.actions is e.actions for e in stored.events)
                    summaries.append(a)
            assert summaries
            if k:
                assert delta(before, "summaries_built") == 0
            if handed is not None:
                assert all(a is b for a, b in zip(summaries, handed, strict=True))
            handed = summaries
        # The stored list gets them too, sharing its own objects, as
        # google-adk's summaries of it do.
        ours = fc.process_compaction_events(stored.events, "root")
        orig = ORIG_PROCESS(stored.events, "root")
        assert handed == [a for a in ours if not any(a is x for x in stored.events)]
        for a, b in zip(ours, orig, strict=True):
            if not any(a is x for x in stored.events):
                assert_equal_but_id(a, b)
    finally:
        fc.uninstall()


def test_a_stored_original_replaced_gets_a_new_summary() -> None:
    # The summary of a stored original is handed out while the slot holds
    # that original with the same values: when the service replaces the
    # stored compaction event by one with the same id and another summary,
    # the copies made after get a summary of the new one.
    from google.adk.sessions.session import Session

    stored = Session(id="s", app_name="a", user_id="u", events=session(seed=11, n=400))
    fc.install()
    try:
        bind(stored.events)
        for _ in range(2):
            fc.process_compaction_events(copy.deepcopy(stored).events, "root")
        i = next(k for k, e in enumerate(stored.events) if e.actions.compaction)
        edited = stored.events[i].model_copy(deep=True)
        compaction = edited.actions.compaction
        assert compaction is not None
        compaction.compacted_content = types.Content(
            role="model", parts=[types.Part(text="another summary")]
        )
        stored.events[i] = edited
        copied = copy.deepcopy(stored)
        ours = fc.process_compaction_events(copied.events, "root")
        orig = ORIG_PROCESS(copied.events, "root")
        assert any("another summary" in str(e.content) for e in orig)
        assert len(ours) == len(orig)
        for a, b in zip(ours, orig, strict=True):
            if any(a is x for x in copied.events):
                assert a is b
            else:
                assert_equal_but_id(a, b, shared=False)
    finally:
        fc.uninstall()


def test_summaries_are_reused_while_unchanged() -> None:
    events = _sessions.build_session(400)
    bind(events)
    first = fc.process_compaction_events(events, "root")
    before = _native.index_stats()
    second = fc.process_compaction_events(events, "root")
    new = [e for e in second if not any(e is x for x in events)]
    assert new and all(any(e is f for f in first) for e in new)
    assert delta(before, "summaries_reused") == len(new)
    # A summary someone changed gets a new summary, and so does another
    # author.
    new[0].author = "someone"
    # So does one whose node_info changed, or whose instance dict or
    # node_info's was replaced by one with other contents; the other
    # summaries are still handed out again.
    new[1].node_info.path = "edited"
    object.__setattr__(new[2], "__dict__", {**new[2].__dict__, "branch": "edited"})
    object.__setattr__(new[3].node_info, "__dict__", {**new[3].node_info.__dict__, "path": "x"})
    third = fc.process_compaction_events(events, "root")
    for edited in new[:4]:
        assert not any(e is edited for e in third)
    assert all(any(e is f for e in third) for f in new[4:])
    assert not any(e is f for e in fc.process_compaction_events(events, "other") for f in new)
    # New copies of the compaction events get new summaries.
    copied = copy.deepcopy(events)
    fc.process_compaction_events(copied, "root")
    fourth = fc.process_compaction_events(copied, "root")
    assert not any(e is f for e in fourth for f in second)


def test_summary_checks_without_dict_version_tags() -> None:
    # Where dict version tags are not readable (other interpreters), cached
    # summaries are checked by their values: the same tests, on that path.
    env = {**os.environ, "ADK_FASTCOMPACT_DICT_TAGS": "false"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{__file__}::test_summaries_are_reused_while_unchanged",
            f"{__file__}::test_recovery_knows_a_slots_plain_summaries_on_later_session_copies",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout


def _switched(variable: str, value: str | None, code: str) -> str:
    env = dict(os.environ)
    env.pop(variable, None)
    if value is not None:
        env[variable] = value
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def _prefetch_switched(value: str | None, code: str) -> str:
    return _switched("ADK_FASTCOMPACT_PREFETCH", value, code)


def test_prefetch_hints_are_given_where_the_layout_is_proved() -> None:
    # The hints read two CPython internals (see src/py/prefetch.rs); they
    # are given on the interpreters whose layout the self-test proves, and
    # the switch turns them off.
    code = "from adk_fastcompact import _native; print(_native.index_stats()['prefetch'])"
    gil = not sysconfig.get_config_var("Py_GIL_DISABLED")
    version = sys.version_info[:2]
    proved = sys.implementation.name == "cpython" and gil and (3, 11) <= version <= (3, 13)
    assert _prefetch_switched(None, code) == str(proved)
    assert _prefetch_switched("false", code) == "False"


_COLD_DECISIONS = (
    "import copy\n"
    "from adk_fastcompact import _native\n"
    "from adk_fastcompact._tooling import sessions as _sessions\n"
    "import adk_fastcompact as fc\n"
    "events = _sessions.build_session(3000, 7)\n"
    "due = _sessions.build_due_session(3000, 7)\n"
    "out = fc.process_compaction_events(copy.deepcopy(events), 'root')\n"
    "rec = fc.recover_compacted_function_calls(out, events)\n"
    "kept = fc.apply_rewinds(copy.deepcopy(events))\n"
    "w = _native.sliding_window(copy.deepcopy(due), 3, 1)\n"
    "key = lambda es: [(e.invocation_id, e.timestamp, e.author) for e in es]\n"
    "print(key(out), key(rec), [e.id for e in kept],\n"
    "      [e.id for e in w[0]], [e.id for e in w[1]], w[2] and w[2][2:])\n"
)
"""A cold read (fresh objects) of sessions with calls, compactions and
rewinds through every operation, printed."""


def test_reads_without_prefetch_hints_give_the_same_decisions() -> None:
    # Hints choose only what to load early; the values are read through the
    # API either way.
    assert _prefetch_switched("false", _COLD_DECISIONS) == _prefetch_switched(None, _COLD_DECISIONS)


def test_fields_are_read_at_their_entry_position_where_the_layout_is_proved() -> None:
    # Entry reads use CPython internals (see src/py/fields.rs): on the
    # interpreters whose layout the self-test proves, and not when switched
    # off; the decisions are the same either way.
    code = "from adk_fastcompact import _native; print(_native.index_stats()['direct_fields'])"
    gil = not sysconfig.get_config_var("Py_GIL_DISABLED")
    version = sys.version_info[:2]
    proved = sys.implementation.name == "cpython" and gil and (3, 11) <= version <= (3, 13)
    variable = "ADK_FASTCOMPACT_DIRECT_FIELDS"
    assert _switched(variable, None, code) == str(proved)
    assert _switched(variable, "false", code) == "False"
    assert _switched(variable, "false", _COLD_DECISIONS) == _switched(
        variable, None, _COLD_DECISIONS
    )


def _shuffled_dicts(events: list[Event]) -> None:
    """Puts the fields of the events' (and their actions') instance dicts at
    other entry positions: reversed, one field deleted and set again (to
    the end), and a non-`str` key added to some (a table of another kind)."""
    for k, event in enumerate(events):
        for d in (event.__dict__, event.actions.__dict__):
            if k % 3 == 0:
                items = list(d.items())[::-1]
                d.clear()
                d.update(items)
            elif k % 3 == 1:
                first = next(iter(d))
                d[first] = d.pop(first)
        if k % 7 == 0:
            event.__dict__[7] = "not a field"


def test_fields_are_found_wherever_a_dict_holds_them() -> None:
    # Entry reads look where a field was found last (see src/py/fields.rs);
    # dicts holding it elsewhere, or of another kind, must read the same.
    events = session(seed=5, n=400)
    shuffled = copy.deepcopy(events)
    _shuffled_dicts(shuffled)
    _native.decline_counts(reset=True)
    assert list(shuffled[0].__dict__) != list(events[0].__dict__)
    assert_same_filtering(shuffled)
    assert [e.id for e in fc.apply_rewinds(shuffled)] == [e.id for e in ORIG_APPLY_REWINDS(events)]
    due = _sessions.build_due_session(600, 5)
    plain, moved = copy.deepcopy(due), copy.deepcopy(due)
    _shuffled_dicts(moved)
    ours, theirs = _native.sliding_window(moved, 3, 1), _native.sliding_window(plain, 3, 1)
    assert ours is not None and theirs is not None
    assert [e.id for e in ours[1]] and [e.id for e in ours[1]] == [e.id for e in theirs[1]]
    assert [e.id for e in ours[0]] == [e.id for e in theirs[0]]
    # Read by Rust, not handed back to google-adk.
    assert _native.decline_counts() == {}


def test_summaries_are_built_anew_under_a_custom_id_provider() -> None:
    events = _sessions.build_session(400)
    counter = iter(range(10**6))
    token = platform_uuid._id_provider_context_var.set(lambda: f"id-{next(counter)}")
    try:
        first = fc.process_compaction_events(events, "root")
        second = fc.process_compaction_events(events, "root")
    finally:
        platform_uuid._id_provider_context_var.reset(token)
    new1 = [e for e in first if not any(e is x for x in events)]
    new2 = [e for e in second if not any(e is x for x in events)]
    assert new1 and len(new1) == len(new2)
    assert not any(a is b for a in new1 for b in new2)
    assert [e.id for e in new2] == [f"id-{len(new1) + k}" for k in range(len(new2))]


def test_session_copies_inherit_what_the_index_knows() -> None:
    from google.adk.sessions.session import Session

    events = session()
    stored = Session(id="s", app_name="a", user_id="u", events=events)
    google_adks_own = Session.__dict__.get("__deepcopy__")
    fc.install()
    try:
        assert_same_filtering(stored.events)
        # Seen again, bound (google-adk 2.13's own filtering has just read
        # them again through the helpers install() bound; 2.12's reads none).
        fc.apply_rewinds(stored.events)
        before = _native.index_stats()
        copied = copy.deepcopy(stored)  # what InMemorySessionService.get_session does
        assert delta(before, "copied") == len(events)
        before = _native.index_stats()
        assert_same_filtering(copied.events)
        # Every event recognised as a copy: none read again.
        assert delta(before, "by_id") == delta(before, "read") == 0
        # The stored originals stay recognised too.
        before = _native.index_stats()
        fc.apply_rewinds(stored.events)
        assert delta(before, "by_identity") == len(events)
    finally:
        fc.uninstall()
    assert Session.__dict__.get("__deepcopy__") is google_adks_own


def test_a_copy_edited_after_copying_is_trusted_like_any_object() -> None:
    # An in-place edit of a copy is an in-place edit: index_clear() is the
    # documented remedy, and with it the result is google-adk's again.
    from google.adk.sessions.session import Session

    events = session()
    events.append(_compaction_event(events, events[0].timestamp, events[10].timestamp))
    stored = Session(id="s", app_name="a", user_id="u", events=events)
    fc.install()
    try:
        assert_same_filtering(stored.events)
        copied = copy.deepcopy(stored)
        copied.events[-1].actions.compaction.end_timestamp = events[20].timestamp
        _native.index_clear()
        assert_same_filtering(copied.events)
    finally:
        fc.uninstall()


def _stored_with_a_compaction_seen_only_as_a_copy(edit: bool) -> Any:
    """A stored session whose last event, a compaction event appended to
    the stored session and an invocation's copy at once (as google-adk
    appends after the invocation's last model call), was read only through
    the next invocation's copy. `edit` edits the stored original in place
    afterwards (it must then not be mistaken for the copy read before)."""
    from google.adk.sessions.session import Session

    events = session()
    stored = Session(id="s", app_name="a", user_id="u", events=events)
    assert_same_filtering(stored.events)
    assert_same_filtering(stored.events)  # bound
    first = copy.deepcopy(stored)
    compaction = _compaction_event(events, events[0].timestamp, events[30].timestamp)
    stored.events.append(compaction)
    first.events.append(compaction)
    second = copy.deepcopy(stored)
    assert_same_filtering(second.events)  # reads the compaction event's copy
    del first, second
    gc.collect()
    if edit:
        compaction.actions.compaction.end_timestamp = events[40].timestamp
    return stored


@pytest.mark.parametrize("edit", [False, True])
def test_originals_known_only_through_copies_are_adopted_at_copy_time(edit: bool) -> None:
    fc.install()
    try:
        stored = _stored_with_a_compaction_seen_only_as_a_copy(edit)
        before = _native.index_stats()
        third = copy.deepcopy(stored)
        # The original is read once, at copy time, and bound with its copy.
        assert delta(before, "by_id") == 1
        assert delta(before, "changed") == int(edit)
        before = _native.index_stats()
        assert_same_filtering(third.events)
        assert delta(before, "by_id") == delta(before, "read") == 0
        before = _native.index_stats()
        fourth = copy.deepcopy(stored)
        assert_same_filtering(fourth.events)
        assert delta(before, "by_id") == delta(before, "read") == 0
    finally:
        fc.uninstall()


def test_a_cached_summary_goes_with_its_compaction_event() -> None:
    events = session()
    events.append(_compaction_event(events, events[0].timestamp, events[30].timestamp))
    copied = copy.deepcopy(events)
    bind(copied)
    before = _native.index_stats()["summaries"]
    known = {id(e) for e in copied}
    summaries = [e for e in fc.process_compaction_events(copied, "root") if id(e) not in known]
    assert summaries and _native.index_stats()["summaries"] == before + len(summaries)
    alive = [weakref.ref(e) for e in summaries]
    shared = [weakref.ref(e.actions) for e in summaries]
    del summaries, copied
    gc.collect()
    # Neither the summaries nor what they share with the copies of their
    # compaction events (actions and content) outlive those copies.
    assert all(ref() is None for ref in alive + shared)
    assert _native.index_stats()["summaries"] == before


def test_recovery_over_filtered_lists_in_any_order() -> None:
    # The filtered list is matched against the source by a cursor, a map
    # when out of order, and the summary cache for summaries.
    events = session(seed=5, n=400)
    bind(events)
    filtered_list = fc.process_compaction_events(events, "root")
    for candidate in (
        filtered_list,
        list(reversed(filtered_list)),
        filtered_list[::2] + filtered_list[1::2],
        [*filtered_list, *events[:5]],
    ):
        ours = call(fc.recover_compacted_function_calls, candidate, events)
        orig = call(ORIG_RECOVER, candidate, events)
        assert ours.error is None and orig.error is None
        assert_same_events(ours.value, orig.value, [candidate, events], returned_input=candidate)


def test_a_summary_given_other_content_is_read_again_by_recovery() -> None:
    events = session(seed=5, n=400)
    bind(events)
    filtered_list = fc.process_compaction_events(events, "root")
    # Remembers the summaries' plain views.
    fc.recover_compacted_function_calls(filtered_list, events)
    summaries = [e for e in filtered_list if not any(e is x for x in events)]
    # New content whose parts google-adk cannot read: it raises, and so
    # must we (by handing the call to it), not answer from the old view.
    broken = types.Content(role="model", parts=[types.Part(text="s")])
    broken.__dict__["parts"] = [object()]
    summaries[-1].content = broken
    ours = call(fc.recover_compacted_function_calls, filtered_list, events)
    orig = call(ORIG_RECOVER, filtered_list, events)
    assert orig.error is not None
    assert_same_error(ours, orig)


def test_recovery_knows_a_slots_plain_summaries_on_later_session_copies() -> None:
    # What recovery learned of a compaction's summary (no calls, no
    # responses) holds for every deep copy of the compaction event: the
    # next invocation's copy gets new summaries and is not read again.
    # Shown by an in-place edit of the copy (trusted like any object, see
    # the test above) that a read would trip over.
    from google.adk.sessions.session import Session

    stored = Session(id="s", app_name="a", user_id="u", events=session(seed=5, n=400))
    broken = types.Content(role="model", parts=[types.Part(text="s")])
    broken.__dict__["parts"] = [object()]
    fc.install()
    try:
        bind(stored.events)
        first = copy.deepcopy(stored)
        fc.recover_compacted_function_calls(
            fc.process_compaction_events(first.events, "root"), first.events
        )
        second = copy.deepcopy(stored)
        last = next(e for e in reversed(second.events) if e.actions.compaction)
        last.actions.compaction.compacted_content.__dict__["parts"] = broken.parts
        filtered_list = fc.process_compaction_events(second.events, "root")
        assert call(fc.recover_compacted_function_calls, filtered_list, second.events).error is None
        # Objects bound anew to the slots (matched by id: a database-backed
        # service's fresh Events) are read again, and the call goes to
        # google-adk, which raises.
        fresh = copy.deepcopy(list(second.events))
        bind(fresh)
        filtered_list = fc.process_compaction_events(fresh, "root")
        ours = call(fc.recover_compacted_function_calls, filtered_list, fresh)
        orig = call(ORIG_RECOVER, filtered_list, fresh)
        assert orig.error is not None
        assert_same_error(ours, orig)
    finally:
        fc.uninstall()


def test_copies_are_held_while_their_session_copy_lives_and_no_longer() -> None:
    from google.adk.sessions.session import Session

    events = session()
    stored = Session(id="s", app_name="a", user_id="u", events=events)
    fc.install()
    try:
        bind(stored.events)
        copied = copy.deepcopy(stored)
        held = weakref.ref(copied.events[5])
        kept = copied.events
        # While the session copy lives its events are known by address.
        before = _native.index_stats()
        assert_same_filtering(kept)
        assert delta(before, "by_id") == delta(before, "read") == 0
        # Once it dies the index lets go of them: a list that outlived it
        # is matched by id (and read), never by a stale address.
        del copied
        gc.collect()
        before = _native.index_stats()
        assert_same_filtering(kept)
        # Seen again (as above: google-adk 2.13's filtering reads them twice).
        fc.apply_rewinds(kept)
        assert delta(before, "by_id") == len(kept)
        del kept
        gc.collect()
        assert held() is None
    finally:
        fc.uninstall()


def test_copy_holders_go_with_their_session_copies() -> None:
    from google.adk.sessions.session import Session

    stored = Session(id="s", app_name="a", user_id="u", events=session())

    def copies(n: int) -> int:
        for _ in range(n):
            copied = copy.deepcopy(stored)
            fc.apply_rewinds(copied.events)
            del copied
        gc.collect()
        return sys.getallocatedblocks()

    fc.install()
    try:
        bind(stored.events)
        before = copies(20)  # steady state
        # Nothing per copy is left behind (a holder, its weak reference):
        # one block per copy would be 200.
        assert copies(200) - before < 100
    finally:
        fc.uninstall()


@needs("prompt_chars_saved")
def test_pricing_reuses_what_the_window_selection_read_of_its_list() -> None:
    from adk_fastcompact import _compaction
    from google.adk.apps import compaction as adk_compaction

    def saved(events: list[Event], extra: Event, handle: object) -> Any:
        token = _compaction._selected.set(handle)
        try:
            return call(
                lambda: _compaction.prompt_chars_saved(events=events, compaction_event=extra)
            )
        finally:
            _compaction._selected.reset(token)

    def original(events: list[Event], extra: Event) -> Any:
        return call(
            lambda: adk_compaction._prompt_chars_saved(events=events, compaction_event=extra)
        )

    def reads() -> int:
        s = _native.index_stats()
        return int(s["by_identity"] + s["by_id"] + s["read"] + s["direct"])

    checked = 0
    for seed in range(80):
        events = session(seed=seed, n=200)
        selected = _native.sliding_window(events, 3, 1)
        assert selected is not None
        live, pricing, handle = selected[0], selected[2], selected[3]
        # Only a window that will be summarized (and so priced) gets one.
        assert (handle is None) == (pricing is None)
        if handle is None:
            continue
        extra = _compaction_event(live, live[0].timestamp, live[len(live) // 2].timestamp)
        before = reads()
        ours = saved(live, extra, handle)
        assert reads() == before  # answered from the handle
        assert_same_error(ours, original(live, extra))
        assert ours.value == original(live, extra).value
        # A changed list (an event replaced, or one more) is read again.
        for changed in (
            [*live[:-1], copy.deepcopy(live[-1])],
            [*live, copy.deepcopy(live[-1])],
        ):
            before = reads()
            ours = saved(changed, extra, handle)
            assert reads() > before
            assert ours.value == original(changed, extra).value
        # The very list, edited in place, too.
        live[0] = copy.deepcopy(live[0])
        live[0].actions = EventActions(
            compaction=EventCompaction(
                start_timestamp=live[0].timestamp,
                end_timestamp=live[-1].timestamp,
                compacted_content=types.Content(role="model", parts=[types.Part(text="x")]),
            )
        )
        before = reads()
        ours = saved(live, extra, handle)
        assert reads() > before
        assert ours.value == original(live, extra).value
        checked += 1
    assert checked >= 20, checked


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


def test_filtering_is_answered_from_the_last_call_on_the_list_extended() -> None:
    # The same list again, or extended, is answered from the last result:
    # plain events after the last item and outside every compacted range
    # are appended to it; a compaction, an event sorting before the last
    # item or one inside a compacted range is merged into it (from the last
    # result's items and the new events alone). A replaced item is computed
    # again. Every answer is google-adk's.
    events = session(seed=7, n=300)
    bind(events)
    call(fc.process_compaction_events, list(events), "root")

    def check(expect_reused: bool) -> None:
        before = _native.index_stats()
        ours = call(fc.process_compaction_events, list(events), "root")
        assert delta(before, "filters_reused") == int(expect_reused)
        orig = call(ORIG_PROCESS, list(events), "root")
        assert ours.error is None and orig.error is None
        assert_same_events(ours.value, orig.value, [events])

    def plain(timestamp: float, invocation: str) -> Event:
        return Event(author="user", invocation_id=invocation, timestamp=timestamp)

    check(True)
    events.append(plain(events[-1].timestamp + 1, "inv-new"))
    check(True)
    events.append(plain(events[-1].timestamp, "inv-tie"))
    check(True)
    # Sorting before the last item.
    events.append(plain(events[-1].timestamp - 0.5, "inv-early"))
    check(True)
    check(True)
    # A compaction appended (covering nothing yet).
    last = events[-1].timestamp
    events.append(
        Event(
            author="user",
            invocation_id="inv-compaction",
            timestamp=last + 1,
            actions=EventActions(
                compaction=EventCompaction(
                    start_timestamp=last + 0.25,
                    end_timestamp=last + 0.5,
                    compacted_content=types.Content(role="model", parts=[types.Part(text="s")]),
                )
            ),
        )
    )
    check(True)
    check(True)
    # At the end of that range: after every item (a tie with the summary,
    # the last item), and covered.
    events.append(plain(last + 0.5, "inv-covered"))
    check(True)
    check(True)
    # A compaction covering most of the session, and one inside it.
    for start, end in [(events[10].timestamp, last + 0.5), (events[20].timestamp, last)]:
        events.append(
            Event(
                author="user",
                invocation_id=f"inv-compaction-{start}",
                timestamp=events[-1].timestamp + 1,
                actions=EventActions(
                    compaction=EventCompaction(
                        start_timestamp=start,
                        end_timestamp=end,
                        compacted_content=types.Content(role="model", parts=[types.Part(text="s")]),
                    )
                ),
            )
        )
        check(True)
    # An item replaced by an equal object (same id): read again.
    events[50] = events[50].model_copy(deep=True)
    check(False)
    check(True)
    # An object of a known id appended after every item (a copy of the last
    # event): it takes that event's slot with the same values, so the
    # result extends; the next call finds the original unbound and
    # computes (the list then holds an id twice, and is not remembered).
    events.append(plain(events[-1].timestamp + 1, "inv-last"))
    check(True)
    events.append(events[-1].model_copy(deep=True))
    check(True)
    check(False)
    check(False)


def test_a_session_copy_inherits_the_last_filtering_result() -> None:
    # As with rewinds: the invocation's first filtering call on its copy is
    # answered from the last result, and its summaries are those of the
    # stored originals (equal to google-adk's but the id).
    from google.adk.sessions.session import Session

    stored = Session(id="s", app_name="a", user_id="u", events=session(seed=9, n=300))
    fc.install()
    try:
        bind(stored.events)
        fc.process_compaction_events(list(stored.events), "root")
        for _ in range(2):
            copied = copy.deepcopy(stored)
            before = _native.index_stats()
            ours = fc.process_compaction_events(list(copied.events), "root")
            assert delta(before, "filters_reused") == 1
            orig = ORIG_PROCESS(copied.events, "root")
            assert len(ours) == len(orig)
            for a, b in zip(ours, orig, strict=True):
                if any(a is x for x in copied.events):
                    assert a is b
                else:
                    assert_equal_but_id(a, b, shared=False)
    finally:
        fc.uninstall()


@_remembered_recovery
def test_a_recovery_that_reinjects_is_answered_again_on_the_same_lists() -> None:
    # A recovery that re-injected call events is answered from its result
    # when called on the very same lists (here with google-adk's own
    # summaries in the filtered list, which the memo holds); another object
    # in either list is computed again. Every answer is google-adk's.
    events = _sessions.build_session(2000)
    bind(events)
    processed = ORIG_PROCESS(events, "root")
    orig = ORIG_RECOVER(processed, events)
    assert len(orig) > len(processed)  # it re-injects

    def check(expect_reused: bool, filtered_list: list[Event]) -> None:
        before = _native.index_stats()
        ours = call(fc.recover_compacted_function_calls, filtered_list, events)
        assert delta(before, "recoveries_reused") == int(expect_reused)
        assert_same_events(
            ours.value,
            ORIG_RECOVER(filtered_list, events),
            [filtered_list, events],
            returned_input=filtered_list,
        )

    check(False, processed)
    check(True, processed)
    check(True, processed)
    # Another list with the same objects is the same call.
    check(True, list(processed))
    # A summary replaced by an equal one: computed again.
    k = next(i for i, e in enumerate(processed) if not any(e is x for x in events))
    other = list(processed)
    other[k] = processed[k].model_copy()
    check(False, other)
    check(True, other)
    # A source item replaced by an equal object: computed again.
    events[5] = events[5].model_copy(deep=True)
    check(False, other)


@_remembered_recovery
def test_recovery_is_answered_from_the_last_call_on_both_lists_extended() -> None:
    # After a recovery that re-injected nothing, the same lists again, or
    # both extended at their ends (new events; some of them filtered in),
    # are answered from what it learned of the source's calls, unless a
    # new response belongs to a call event the filtered list lacks. Every
    # answer is google-adk's.
    events = session(seed=7, n=300)
    bind(events)

    def check(expect_reused: bool, filtered_list: list[Event]) -> None:
        before = _native.index_stats()
        ours = call(fc.recover_compacted_function_calls, filtered_list, events)
        assert delta(before, "recoveries_reused") == int(expect_reused)
        orig = call(ORIG_RECOVER, filtered_list, events)
        assert ours.error is None and orig.error is None
        assert_same_events(
            ours.value, orig.value, [filtered_list, events], returned_input=filtered_list
        )

    # The session re-injects a call (a long-running call answered after it
    # was compacted); the list with it re-injected is one that needs
    # nothing.
    filtered_list = fc.process_compaction_events(list(events), "root")
    filtered_list = fc.recover_compacted_function_calls(filtered_list, events)
    check(False, filtered_list)
    check(True, filtered_list)
    check(True, list(filtered_list))

    def tool_call(call_id: str, ts: float) -> Event:
        part = types.Part(function_call=types.FunctionCall(id=call_id, name="f", args={}))
        return Event(
            author="root",
            invocation_id="inv-x",
            timestamp=ts,
            content=types.Content(role="model", parts=[part]),
        )

    def tool_response(call_id: str, ts: float) -> Event:
        part = types.Part(
            function_response=types.FunctionResponse(id=call_id, name="f", response={"r": 1})
        )
        return Event(
            author="root",
            invocation_id="inv-x",
            timestamp=ts,
            content=types.Content(role="user", parts=[part]),
        )

    # A call and its response, both filtered in.
    ts = events[-1].timestamp
    call_event, response = tool_call("c-1", ts + 1), tool_response("c-1", ts + 2)
    events.extend([call_event, response])
    filtered_list = [*filtered_list, call_event, response]
    check(True, filtered_list)
    # A new source event left out of the filtered list, and a plain one in.
    skipped, kept = tool_call("c-2", ts + 3), Event(author="user", timestamp=ts + 4)
    events.extend([skipped, kept])
    filtered_list = [*filtered_list, kept]
    check(True, filtered_list)
    # A response whose call event the filtered list lacks: re-injected,
    # computed in full; the same lists again are answered from that result.
    late = tool_response("c-2", ts + 5)
    events.append(late)
    filtered_list = [*filtered_list, late]
    check(False, filtered_list)
    check(True, filtered_list)
    # Dropped from the filtered list: computed in full, then remembered.
    filtered_list = filtered_list[:-1]
    check(False, filtered_list)
    check(True, filtered_list)
    # A filtered item the source does not end with (an old event again).
    check(False, [*filtered_list, events[5]])
    check(False, filtered_list)
    check(True, filtered_list)
    # The source's own object appended again (its presence is that of the
    # earlier position too): computed in full.
    absent = next(e for e in events if not any(e is x for x in filtered_list))
    events.append(absent)
    check(False, [*filtered_list, absent])


@_remembered_recovery
def test_a_session_copy_inherits_the_last_recovery_result() -> None:
    from google.adk.sessions.session import Session

    stored = Session(id="s", app_name="a", user_id="u", events=session(seed=9, n=300))
    fc.install()
    try:
        bind(stored.events)
        filtered_list = fc.process_compaction_events(list(stored.events), "root")
        # With the call it re-injects (see the test above): nothing to do.
        filtered_list = fc.recover_compacted_function_calls(filtered_list, stored.events)
        assert fc.recover_compacted_function_calls(filtered_list, stored.events) is filtered_list
        for _ in range(2):
            copied = copy.deepcopy(stored)
            filtered_list = fc.process_compaction_events(list(copied.events), "root")
            filtered_list = ORIG_RECOVER(filtered_list, copied.events)
            before = _native.index_stats()
            ours = fc.recover_compacted_function_calls(filtered_list, copied.events)
            assert delta(before, "recoveries_reused") == 1
            assert ours is filtered_list
            orig = ORIG_RECOVER(filtered_list, copied.events)
            assert_same_events(
                ours, orig, [filtered_list, copied.events], returned_input=filtered_list
            )
    finally:
        fc.uninstall()


def _same_selection(ours: tuple[Any, ...], theirs: tuple[Any, ...]) -> None:
    """Two outputs of one window selection entry point agree: lists item by
    item in identity, pricing contents in identity, numbers and flags equal;
    the handles (last) are compared by what they price."""
    assert len(ours) == len(theirs)
    for mine, other in zip(ours[:-1], theirs[:-1], strict=True):
        if isinstance(mine, list):
            assert [id(x) for x in mine] == [id(x) for x in other]
        elif isinstance(mine, tuple):  # pricing
            _same_selection((*mine, None), (*other, None))
        else:
            assert mine is other or mine == other
    assert (ours[-1] is None) == (theirs[-1] is None)


def test_window_selections_are_answered_from_the_last_call_on_the_same_list() -> None:
    # The same list asked the same again is answered from the last
    # selection on its session; other arguments, one more event, an item
    # replaced or a cleared index are computed again. Every answer is the
    # one computed, and its handle prices alike.
    from adk_fastcompact import _compaction

    events = _sessions.build_due_session(400, 5)
    bind(events)

    def sliding(interval: int = 3, overlap: int = 1) -> tuple[Any, ...]:
        out = _native.sliding_window(events, interval, overlap)
        assert out is not None
        return tuple(out)

    def token(scope: Any = None, retention: int = 4, agent: Any = "assistant") -> tuple[Any, ...]:
        out = _native.token_threshold_selection(events, scope, retention, agent)
        assert out is not None
        return tuple(out)

    def computed(select: Callable[[], tuple[Any, ...]]) -> tuple[Any, ...]:
        # Another selection in between, so this one is computed (and
        # remembered again).
        assert _native.sliding_window(events, 97, 0) is not None
        before = _native.index_stats()
        out = select()
        assert delta(before, "selections_reused") == 0
        return out

    def priced(out: tuple[Any, ...]) -> int | None:
        live, handle = out[1 if len(out) == 7 else 0], out[-1]
        if handle is None:
            return None
        extra = _compaction_event(live, live[0].timestamp, live[len(live) // 2].timestamp)
        token = _compaction._selected.set(handle)
        try:
            return _compaction.prompt_chars_saved(events=live, compaction_event=extra)
        finally:
            _compaction._selected.reset(token)

    def check(select: Callable[[], tuple[Any, ...]], expect_reused: bool) -> None:
        before = _native.index_stats()
        ours = select()
        assert delta(before, "selections_reused") == int(expect_reused)
        theirs = computed(select)
        _same_selection(ours, theirs)
        assert priced(ours) == priced(theirs)

    for select, other in [
        (sliding, lambda: sliding(4, 1)),
        (sliding, lambda: sliding(3, 0)),
        (token, lambda: token(retention=5)),
        (token, lambda: token(agent="someone")),
        (token, lambda: token(scope="")),
    ]:
        assert _native.sliding_window(events, 98, 0) is not None
        check(select, False)
        check(select, True)
        check(select, True)
        # Other arguments: computed (and remembered in place of the last).
        check(other, False)
        check(other, True)
        check(select, False)
    # `None` arguments are remembered as `str` ones are; a declined call
    # (a name of another type) neither answers nor replaces.
    check(lambda: token(agent=None), False)
    check(lambda: token(agent=None), True)
    before = _native.index_stats()
    assert _native.token_threshold_selection(events, None, 4, b"assistant") is None
    assert delta(before, "selections_reused") == 0
    check(lambda: token(agent=None), True)
    # One more event, an item replaced, the index cleared: computed again.
    check(sliding, False)
    events.append(Event(author="user", invocation_id="inv-new", timestamp=events[-1].timestamp + 1))
    check(sliding, False)
    check(sliding, True)
    events[10] = copy.deepcopy(events[10])
    check(sliding, False)
    check(sliding, True)
    _native.index_clear()
    check(sliding, False)


def test_window_selections_read_the_call_data_of_a_bound_event_once() -> None:
    # After resolving its list, a selection reads function-call data (and
    # usage counts) of the events its decision looks at. The index keeps
    # what it read of bound events: the same selection computed again
    # reads none of them, while a new object of a known id is read again.
    # Every answer is the one computed without the index.
    events = _sessions.build_due_session(400, 5)
    bind(events)

    def without_index(select: Callable[[], Any]) -> Any:
        _native.index_configure(enabled=False)
        try:
            return select()
        finally:
            _native.index_configure(enabled=True)

    selections: list[Callable[[], Any]] = [
        lambda: _native.sliding_window(events, 3, 1),
        lambda: _native.token_threshold_selection(events, None, 4, "assistant"),
    ]
    for select in selections:
        expected = without_index(select)  # Turning it off drops the index.
        bind(events)
        before = _native.index_stats()
        first = select()
        assert delta(before, "completed") > 0
        # Another selection in between, so the next one is computed.
        assert _native.sliding_window(events, 97, 0) is not None
        before = _native.index_stats()
        again = select()
        assert delta(before, "selections_reused") == 0
        assert delta(before, "completed") == 0
        _same_selection(first, expected)
        _same_selection(again, expected)
    # An event of the range with calls replaced by a new object whose call
    # id differs: read again (not taken from the index), and the answers
    # agree.
    for k, (select, compacted) in enumerate(zip(selections, (1, 3), strict=True)):
        bind(events)
        to_compact = select()[compacted]
        position = next(
            i
            for i, e in enumerate(events)
            if any(e is c for c in to_compact) and e.get_function_calls()
        )
        changed = copy.deepcopy(events[position])
        call = next(p.function_call for p in changed.content.parts if p.function_call)
        call.id = f"call-changed-{k}"
        events[position] = changed
        bind(events)
        before = _native.index_stats()
        ours = select()
        assert delta(before, "completed") >= 1
        _same_selection(ours, without_index(select))


@needs("get_compaction_ranges")
def test_results_sharing_a_list_record_extend_it_apart() -> None:
    # Rewinds and ranges remembered over one list share its record; one
    # extended by an event pushes it onto the record, the other extended
    # by another event (a list with the same beginning) forks a record of
    # its own, the next extension by the very event the record holds takes
    # it. Every answer is google-adk's, and each is answered again.
    events = session(seed=11, n=300)
    bind(events)
    rewinds = _rewinds_check(events)
    ranges = _ranges_check

    rewinds(True)
    ranges(events)(False)
    ranges(events)(True)
    shared = _native.index_stats()["bytes"]
    last = events[-1].timestamp
    other = [*events, _compaction_event(events, events[0].timestamp, last + 5)]
    events.append(Event(author="user", invocation_id="inv-a", timestamp=last + 1))
    rewinds(True)  # pushed onto the record
    ranges(other)(True)  # forks: the record holds another event next
    forked = _native.index_stats()["bytes"]
    assert forked - shared >= 12 * len(events) // 2
    rewinds(True)
    ranges(other)(True)
    # The forked result extended by the event the other record holds next
    # is answered too.
    again = [*other[:-1], events[-1]]
    ranges(again)(False)
    ranges(again)(True)
    rewinds(True)
