"""The per-session index reuses the summary Events it built while their
compaction events are unchanged, and builds them anew when they change, on
session copies, under a custom id provider and without dict version tags.

Results are always compared with google-adk's own functions on the same
input; the counters of `index_stats()` show which path answered.
"""

from __future__ import annotations

import copy
import gc
import os
import subprocess
import sys
import weakref

import adk_fastcompact as fc
from adk_fastcompact import _native
from adk_fastcompact._tooling import sessions as _sessions
from google.adk.events.event import Event
from google.adk.platform import uuid as platform_uuid
from google.genai import types

from support.compare import (
    ORIG_PROCESS,
    ORIG_RECOVER,
    assert_equal_but_id,
    assert_same_error,
    call,
)
from support.index_checks import bind, compaction_event, delta, session


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


def test_a_cached_summary_goes_with_its_compaction_event() -> None:
    events = session()
    events.append(compaction_event(events, events[0].timestamp, events[30].timestamp))
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
