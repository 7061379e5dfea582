"""The rows a SQL lean load decodes are the events `lean_positions` picks
from the whole decoded session.

A SQL lean load never decodes the rows it leaves out: it reads each stored
row natively into its view and facts (`_native.LeanRows`) and picks with
`core::lean::needed`. On generated sessions, with branches (some naming a
call, `<tool>@<id>`), node paths, error codes (the abort seal among them),
transfers, agent states, cache metadata and interaction ids drawn on top,
its positions equal `_native.lean_positions` over the Events google-adk
decodes from the same rows: `SqliteSessionService`'s (the stored JSON) and
`DatabaseSessionService`'s (`StorageEvent.to_event`: the id and invocation
id columns over the JSON, the timestamp column where the JSON has none),
and again when rows are listed a second time (answered from what the first
listing read) with new rows among them. Rows are written with field names
(google-adk's way) or camelCase aliases (which its models read too).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest
from adk_fastcompact import _native
from google.adk.events.event import Event
from google.adk.sessions.schemas import v1
from google.adk.sessions.schemas.shared import timestamp_to_utc_datetime, utc_datetime_to_timestamp
from hypothesis import given
from hypothesis import strategies as st

from support.strategies import sessions

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

WINDOWS = (None, (1, 0), (3, 1), (2, 2))


def _with_facts(events: list[Event], draw: Any) -> list[Event]:
    """`events` with the facts lean loading reads drawn on top."""
    calls = [
        part.function_call.id
        for e in events
        for part in (e.content.parts if e.content and e.content.parts else ())
        if part.function_call is not None and part.function_call.id
    ]
    out = []
    for event in events:
        update: dict[str, Any] = {}
        actions: dict[str, Any] = {}
        pick = draw(st.integers(0, 15))
        if pick == 1 and calls:
            update["branch"] = f"root.search@{draw(st.sampled_from(calls))}.helper"
        elif pick == 2:
            update["node_info"] = {"path": draw(st.sampled_from(["", "wf/a", "wf"]))}
        elif pick == 3:
            update["error_code"] = draw(st.sampled_from(["", "E", "INVOCATION_ABORTED"]))
        elif pick == 4:
            actions["transfer_to_agent"] = draw(st.sampled_from(["", "helper"]))
        elif pick == 5:
            actions["agent_state"] = draw(st.sampled_from([{}, {"k": 1}]))
        elif pick == 6:
            actions["end_of_agent"] = draw(st.booleans())
        elif pick == 7:
            update["cache_metadata"] = {"fingerprint": "f", "contents_count": 1}
        elif pick == 8:
            update["interaction_id"] = draw(st.sampled_from(["", "i-1"]))
        data = event.model_dump(mode="json", exclude_none=True)
        data.update(update)
        data.setdefault("actions", {}).update(actions)
        out.append(Event.model_validate(data))
    return out


def _reference(decoded: list[Event], window: Any, underway: list[str], answering: list[str]) -> Any:
    return _native.lean_positions(
        decoded,
        window[0] if window else None,
        window[1] if window else 0,
        None,
        underway,
        answering,
    )


def _ours(
    rows: _native.LeanRows,
    listed: list[tuple[Any, ...]],
    texts: list[str],
    window: Any,
    underway: list[str],
    answering: list[str],
    *,
    columns: bool = False,
    stamps: list[float | None] | None = None,
) -> Any:
    listing = rows.listing("s", listed, columns=columns)
    assert listing is not None
    missing = listing.missing
    error = listing.parse(
        missing,
        [texts[i] for i in missing],
        None if stamps is None else [stamps[i] for i in missing],
    )
    assert error is None, error
    return listing.needed(
        window[0] if window else None, window[1] if window else 0, None, underway, answering
    )


@given(session=sessions(max_events=40, realistic=True), data=st.data())
def test_sqlite_rows_pick_what_the_decoded_session_picks(session: Any, data: st.DataObject) -> None:
    events = _with_facts(session.events, data.draw)
    # google-adk writes field names; its models read camelCase aliases too.
    texts = [
        e.model_dump_json(exclude_none=True, by_alias=data.draw(st.booleans())) for e in events
    ]
    decoded = [Event.model_validate_json(t) for t in texts]
    # SqliteSessionService's order: timestamp, then rowid.
    order = sorted(range(len(decoded)), key=lambda i: (decoded[i].timestamp, i))
    decoded = [decoded[i] for i in order]
    texts = [texts[i] for i in order]
    listed = [(e.id, e.invocation_id, e.timestamp, order[k]) for k, e in enumerate(decoded)]
    window = data.draw(st.sampled_from(WINDOWS))
    invocations = sorted({e.invocation_id for e in decoded})
    underway = data.draw(st.lists(st.sampled_from(invocations or ["x"]), max_size=1))
    answering = data.draw(st.lists(st.sampled_from(["c1", "c2", "c3", "nothing"]), max_size=2))
    expected = _reference(decoded, window, underway, answering)
    assert expected is not None
    rows = _native.LeanRows()
    cut = data.draw(st.integers(0, len(decoded)))
    # A first load of a prefix (rows stored later come in the second), then
    # the whole list again, answered from what the first read.
    first = _ours(rows, listed[:cut], texts[:cut], window, [], [])
    assert first == _reference(decoded[:cut], window, [], [])
    assert _ours(rows, listed, texts, window, underway, answering) == expected


@given(session=sessions(max_events=40, realistic=True), data=st.data())
def test_database_rows_pick_what_the_decoded_session_picks(
    session: Any, data: st.DataObject
) -> None:
    events = _with_facts(session.events, data.draw)
    stored = []
    for event in events:
        payload = event.model_dump(
            exclude_none=True, mode="json", by_alias=data.draw(st.booleans())
        )
        if data.draw(st.integers(0, 9)) == 0:
            del payload["timestamp"]  # to_event takes the column's then
        if data.draw(st.integers(0, 9)) == 0:
            payload["id"] = "not-the-column"
            payload["invocation_id"] = "not-the-column-either"
        stored.append(
            v1.StorageEvent(
                id=event.id,
                invocation_id=event.invocation_id,
                timestamp=timestamp_to_utc_datetime(event.timestamp),
                event_data=payload,
            )
        )
    # DatabaseSessionService's order: timestamp column, then id.
    stored.sort(key=lambda s: (s.timestamp, s.id))
    decoded = [s.to_event() for s in stored]
    listed = [(s.id, s.invocation_id, s.timestamp) for s in stored]
    texts = [json.dumps(s.event_data) for s in stored]
    stamps = [utc_datetime_to_timestamp(s.timestamp) for s in stored]
    window = data.draw(st.sampled_from(WINDOWS))
    expected = _reference(decoded, window, [], [])
    assert expected is not None
    rows = _native.LeanRows()
    found = _ours(rows, listed, texts, window, [], [], columns=True, stamps=stamps)
    assert found == expected


def test_a_row_whose_stamp_changed_is_read_again() -> None:
    """A session deleted and made again under its id, a row of the same
    event id with another timestamp: read again, not answered from before."""
    rows = _native.LeanRows()
    one = Event(id="e1", invocation_id="i1", author="user", timestamp=1.0)
    listed = [("e1", "i1", 1.0, 1)]
    listing = rows.listing("s", listed)
    assert listing is not None and listing.missing == [0]
    assert listing.parse([0], [one.model_dump_json()]) is None
    again = rows.listing("s", listed)
    assert again is not None and again.missing == []
    for changed in [("e1", "i1", 2.0, 1), ("e1", "i2", 1.0, 1), ("e1", "i1", 1.0, 2)]:
        listing = rows.listing("s", [changed])
        assert listing is not None and listing.missing == [0], changed
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    listing = rows.listing("d", [("e1", "i1", when)], columns=True)
    assert listing is not None and listing.missing == [0]
    assert listing.parse([0], ['{"author": "user"}'], [when.timestamp()]) is None
    assert rows.listing("d", [("e1", "i1", when)], columns=True).missing == []  # type: ignore[union-attr]
    later = datetime(2026, 1, 2, tzinfo=timezone.utc)
    assert rows.listing("d", [("e1", "i1", later)], columns=True).missing == [0]  # type: ignore[union-attr]


def test_rows_not_read_yet_or_unreadable_are_no_answer() -> None:
    rows = _native.LeanRows()
    listing = rows.listing("s", [("e1", "i1", 1.0, 1), ("e2", "i1", 2.0, 2)])
    assert listing is not None
    assert listing.needed() is None  # nothing read yet
    error = listing.parse([0, 1], ['{"author": "user", "timestamp": 1.0}', "not json"])
    assert error is not None and error.startswith("row 1: not a stored Event")
    assert listing.needed() is None
    assert rows.listing("s", [(1, "i1", 1.0)]) is None  # an id that is no str
    assert rows.listing("s", [("e1", None, 1.0)]) is None
    with pytest.raises(ValueError, match="differ in length"):
        listing.parse([0], [])
