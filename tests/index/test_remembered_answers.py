"""The per-session index remembers each operation's last answer: the same
list again, extended, or a session copy of it is answered from it (rewinds,
compaction ranges, filtering, recovery, the window selections, pricing), and
every answer is still google-adk's.

Results are always compared with google-adk's own functions on the same
input; the counters of `index_stats()` show which path answered.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import adk_fastcompact as fc
from adk_fastcompact import _native
from adk_fastcompact._tooling import sessions as _sessions
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.genai import types

from support.compare import (
    ORIG_APPLY_REWINDS,
    ORIG_GET_COMPACTION_RANGES,
    ORIG_PROCESS,
    ORIG_RECOVER,
    assert_equal_but_id,
    assert_same_error,
    assert_same_events,
    assert_same_ranges,
    call,
    needs,
)
from support.index_checks import bind, compaction_event, delta, remembered_recovery, session


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
        extra = compaction_event(live, live[0].timestamp, live[len(live) // 2].timestamp)
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


@remembered_recovery
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


@remembered_recovery
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


@remembered_recovery
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
        extra = compaction_event(live, live[0].timestamp, live[len(live) // 2].timestamp)
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
    other = [*events, compaction_event(events, events[0].timestamp, last + 5)]
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
