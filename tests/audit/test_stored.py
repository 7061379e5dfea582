"""Stored events read from their JSON in Rust against google-adk's own loader.

`SqliteSessionService` keeps each Event as `model_dump_json(exclude_none=True)`
and loads it with `Event.model_validate_json`. `_native.analyze_stored` reads
the same documents without building Events; on every generated session its
decisions must equal `analyze_sessions` on the Events google-adk's loader
builds from those documents (the views are the same), and a document the
loader refuses must be declined with its position, never dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest
from adk_fastcompact import _native
from adk_fastcompact._tooling import sessions as _sessions
from google.adk.events.event import Event

from support.strategies import random_session


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


def test_the_audit_agrees_with_google_adks_prompt_on_what_it_hides() -> None:
    # Whatever the audit calls hidden is absent from the prompt google-adk
    # builds for the event's isolation scope (`_get_contents` keeps the
    # scope's live events, filters compaction over them, then puts back a
    # compacted call whose response survives); whatever it calls duplicated
    # is in it, raw; its prompt size is the root scope's.
    from google.adk.events._rewind_events import _apply_rewinds
    from google.adk.flows.llm_flows.context._compaction import (
        _process_compaction_events,
        _recover_compacted_function_calls,
    )

    stored = [_stored(events) for events in SESSIONS]
    audits = _native.audit_stored(stored, "stored", 3, 1, None, 4)
    checked = 0
    for rows, audit in zip(stored, audits, strict=True):
        loaded = _loaded(rows)
        if loaded is None or "declined" in audit or "prompt_error" in audit:
            continue
        position = {id(e): i for i, e in enumerate(loaded)}
        live = _apply_rewinds(loaded)
        raw: set[int] = set()
        sizes: dict[str | None, int] = {}
        for scope in dict.fromkeys(e.isolation_scope for e in live):
            scoped = [e for e in live if e.isolation_scope == scope]
            prompt = _recover_compacted_function_calls(_process_compaction_events(scoped), scoped)
            sizes[scope] = len(prompt)
            raw |= {position[id(e)] for e in prompt if id(e) in position}
        assert audit["events"] == len(rows)
        assert all(h["position"] not in raw for h in audit["hidden"])
        assert all(d["position"] in raw for d in audit["duplicated"])
        assert audit["prompt_size"] == sizes.get(None, 0)
        checked += 1
    assert checked > len(SESSIONS) // 2


def test_a_google_adk_written_session_replays_and_hides_nothing() -> None:
    events = _sessions.build_due_session(2000, 0)
    rows = _stored(events)
    (audit,) = _native.audit_stored([rows], "stored", 3, 1)
    assert audit["compactions"] and all(c["replayed"] for c in audit["compactions"])
    assert {c["trigger"] for c in audit["compactions"]} == {"sliding_window"}
    assert audit["hidden"] == [] and audit["duplicated"] == []
    # A reply re-stamped into a summarized stretch and stored after its
    # summary: google-adk hides it, nobody summarized it.
    late = events[-1].model_copy(deep=True)
    first = audit["compactions"][0]
    late.id = "late"
    late.timestamp = events[first["handed"][0]].timestamp
    (again,) = _native.audit_stored([[*rows, _stored([late])[0]]], "stored", 3, 1)
    assert [h["position"] for h in again["hidden"]] == [len(rows)]
    assert again["hidden"][0]["cause"] == "tied_timestamp"


def test_audit_arguments_are_checked() -> None:
    rows = _stored(SESSIONS[-1])
    with pytest.raises(ValueError, match="order"):
        _native.audit_stored([rows], "random")
    with pytest.raises(ValueError, match="compaction_interval"):
        _native.audit_stored([rows], "stored", 0)
    with pytest.raises(ValueError, match="event_retention_size"):
        _native.audit_stored([rows], "stored", None, 0, None, -1)
    (bad,) = _native.audit_stored([[*rows[:3], "{"]])
    assert bad["declined"].startswith("event 3:")


def test_the_audit_bench_store_is_what_google_adks_service_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import sqlite3
    from contextlib import closing

    from adk_fastcompact._tooling import bench_store as _bench_store
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    # Every sqlite3 connection opened while the store is written (its own,
    # and aiosqlite's for google-adk's service) is closed when it returns: a
    # `with sqlite3.connect(...)` alone commits and leaves it open, which
    # CPython 3.13 reports as a ResourceWarning only when it is collected.
    opened: list[sqlite3.Connection] = []
    connect = sqlite3.connect

    def recording_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(connect(*args, **kwargs))
        return opened[-1]

    path = tmp_path / "store.db"
    with monkeypatch.context() as patch:
        patch.setattr(sqlite3, "connect", recording_connect)
        _bench_store.build_store(path, n_sessions=3, n_events=200, templates=2)
    assert opened
    for conn in opened:  # (`total_changes` answers from any thread)
        with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
            _ = conn.total_changes
    service = SqliteSessionService(str(path))
    session = asyncio.run(
        service.get_session(
            app_name=_bench_store.APP_NAME, user_id=_bench_store.USER_ID, session_id="s00001"
        )
    )
    assert session is not None and len(session.events) == 200
    responses = [e for e in session.events if e.get_function_responses()]
    assert responses and all(
        len(r.response["rows"]) > 10 for e in responses for r in e.get_function_responses()
    )
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute(
            "SELECT event_data FROM events WHERE session_id = 's00001' ORDER BY rowid"
        ).fetchall()
    (audit,) = _native.audit_stored([[r[0] for r in rows]], "timestamp", 3, 1)
    assert audit["compactions"] and all(c["replayed"] for c in audit["compactions"])
    assert audit["hidden"] == [] and audit["duplicated"] == []
    with pytest.raises(FileExistsError):
        _bench_store.build_store(path, n_sessions=1)
