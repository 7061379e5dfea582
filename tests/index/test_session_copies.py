"""Session copies and the per-session index: a copy inherits what the index
knows of its original, an edited copy is trusted like any object, and the
index holds copies only while their session copy lives.

Results are always compared with google-adk's own functions on the same
input; the counters of `index_stats()` show which path answered.
"""

from __future__ import annotations

import copy
import gc
import sys
import weakref
from typing import Any

import adk_fastcompact as fc
import pytest
from adk_fastcompact import _native

from support.index_checks import assert_same_filtering, bind, compaction_event, delta, session


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
    events.append(compaction_event(events, events[0].timestamp, events[10].timestamp))
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
    compaction = compaction_event(events, events[0].timestamp, events[30].timestamp)
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
