"""What the audit's exit status and warnings say (docs/audit.md, "Exit
status"): 0 nothing found, 1 hidden or duplicated events, 2 a store or a
session in it that cannot be read (`--allow-unreadable` reports unreadable
sessions without failing on them); settings that reproduce few of the
stored compactions are warned about, and the report never contradicts
itself. Stores are written by real `Runner` runs
(`tests/support/audit_scenarios.py`), then damaged where a test needs it.
"""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from adk_fastcompact._tooling import audit as _audit
from google.adk.apps.app import EventsCompactionConfig
from google.adk.events.event import Event, EventActions
from google.adk.events.event_actions import EventCompaction
from google.genai import types

from support.audit_cli import run_cli
from support.audit_scenarios import chat, export_line, run_chat

pytestmark = [
    pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning"),
]

#: The settings the stores are written with (three compactions in ten turns).
WRITTEN = {"compaction_interval": 2, "overlap_size": 0}
GIVEN = ["--interval", "2", "--overlap", "0"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `SqliteSessionService` file of one session, written with `WRITTEN`."""
    db = tmp_path_factory.mktemp("exit") / "store.db"
    run_chat(EventsCompactionConfig.model_validate(WRITTEN), chat(10), mode=None, db=db)
    return db


def copy_of(path: Path, tmp_path: Path) -> Path:
    target = tmp_path / path.name
    target.write_bytes(path.read_bytes())
    return target


def corrupt(db: Path, table: str) -> Path:
    """`db` with the root page of `table` overwritten (a corrupt table:
    SQLite reads the schema, not the table's rows)."""
    with closing(sqlite3.connect(db)) as conn:
        query = "SELECT rootpage FROM sqlite_master WHERE name = ?"
        (root,) = conn.execute(query, (table,)).fetchone()
    data = bytearray(db.read_bytes())
    size = int.from_bytes(data[16:18], "big")
    size = 65536 if size == 1 else size
    data[(root - 1) * size : root * size] = b"\xa5" * size
    db.write_bytes(bytes(data))
    return db


def json_run(*argv: str | Path) -> tuple[int, dict[str, Any], str]:
    status, out, err = run_cli(["audit", *map(str, argv), "--json"])
    return status, json.loads(out), err


# -- stores that cannot be read ------------------------------------------------------------


def test_a_corrupt_sessions_table_is_one_line_and_exit_2(store: Path, tmp_path: Path) -> None:
    db = corrupt(copy_of(store, tmp_path), "sessions")
    with pytest.raises(_audit.StoreError, match="cannot read its `sessions` table"):
        with _audit.opened(str(db), _audit.Filters()) as opened:
            list(opened.sessions())
    for extra in ([], ["--json"], ["--allow-unreadable"]):
        status, out, err = run_cli(["audit", str(db), *GIVEN, *extra])
        assert status == 2, err
        assert out == ""
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "`sessions` table" in lines[0], err
        assert "Traceback" not in err


def test_a_corrupt_events_table_declines_its_session_and_exits_2(
    store: Path, tmp_path: Path
) -> None:
    db = corrupt(copy_of(store, tmp_path), "events")
    status, report, err = json_run(db, *GIVEN)
    assert status == 2
    (session,) = report["sessions"]
    assert session["declined"].startswith("unreadable: ")
    assert "1 session could not be read (exit status 2" in err
    # Allowed, it is reported and not failed on.
    status, report, err = json_run(db, *GIVEN, "--allow-unreadable")
    assert status == 0 and report["summary"]["sessions_declined"] == 1
    assert "--allow-unreadable" in err
    # The text report says so too.
    status, out, err = run_cli(["audit", str(db), *GIVEN])
    assert status == 2 and "declined s/u/s" not in out
    assert "declined " in out and "could not be read" in err


def test_an_empty_file_is_not_a_store(tmp_path: Path) -> None:
    for name, data in (("empty.jsonl", b""), ("blank.jsonl", b"\n  \n")):
        path = tmp_path / name
        path.write_bytes(data)
        status, out, err = run_cli(["audit", str(path)])
        assert (status, out) == (2, ""), err
        assert ("an empty file, not a store" if not data else "not a google-adk store") in err


def test_the_exit_statuses_mean_one_thing_each(store: Path, tmp_path: Path) -> None:
    # Nothing found: 0.
    assert json_run(store, *GIVEN)[0] == 0
    # Hidden events (settings other than the store's): 1.
    status, report, _ = json_run(store, "--interval", "3", "--overlap", "1")
    assert status == 1 and report["summary"]["hidden"] > 0
    # An unreadable session beside them (an export line that is no session): 2.
    export = tmp_path / "store.jsonl"
    with _audit.opened(str(store), _audit.Filters()) as opened:
        ((stored, _),) = list(opened.sessions())
    assert stored is not None
    events = [Event.model_validate_json(row) for row in stored.rows]
    export.write_text(export_line("a", events) + "\nnot json\n")
    status, report, _ = json_run(export, "--interval", "3", "--overlap", "1")
    assert status == 2 and report["summary"]["hidden"] > 0
    status, _, _ = json_run(export, "--interval", "3", "--overlap", "1", "--allow-unreadable")
    assert status == 1
    # `audit merge` says the same of the same report.
    part = tmp_path / "whole.json"
    part.write_text(json.dumps(report))
    assert run_cli(["audit", "merge", str(part)])[0] == 2
    assert run_cli(["audit", "merge", str(part), "--allow-unreadable"])[0] == 1


# -- settings that do not fit the store ---------------------------------------------------


def test_settings_reproducing_few_compactions_are_warned_about(store: Path) -> None:
    status, report, err = json_run(store, "--interval", "3", "--overlap", "1")
    assert status == 1
    stored = report["summary"]["compactions"]
    assert report["summary"]["compactions_not_replayed"] == stored >= 2
    warning = (
        f"0 of {stored} stored compactions reproduced by --interval 3 --overlap 1; the store "
        "may have been written with other settings"
    )
    (said,) = report["warnings"]
    assert said.startswith(warning)
    assert f"warning: {warning}" in " ".join(err.split())
    # The text report shows it above the summary.
    status, out, _ = run_cli(["audit", str(store), "--interval", "3", "--overlap", "1"])
    flat = " ".join(out.split())
    assert f"warning: {warning}" in flat
    assert flat.index("warning:") < flat.index("compactions stored")
    # The store's own settings: no warning.
    status, report, err = json_run(store, *GIVEN)
    assert report["warnings"] == [] and "warning" not in err


def test_a_report_from_before_warnings_still_merges(store: Path, tmp_path: Path) -> None:
    # A report written before `warnings` existed merges; the merged report
    # says its warnings again, worked out from its sessions.
    status, report, _ = json_run(store, "--interval", "3", "--overlap", "1")
    (warning,) = report.pop("warnings")
    part = tmp_path / "before.json"
    part.write_text(json.dumps(report))
    status, out, err = run_cli(["audit", "merge", str(part)])
    assert status == 1, err
    assert json.loads(out)["warnings"] == [warning]
    assert f"warning: {warning}" in " ".join(err.split())


@pytest.mark.adk_2_13("exact mode")
def test_an_exact_mode_store_s_summary_says_what_is_true(tmp_path: Path) -> None:
    db = tmp_path / "exact.db"
    run_chat(EventsCompactionConfig.model_validate(WRITTEN), chat(10), mode="exact", db=db)
    status, out, err = run_cli(["audit", str(db)])
    assert status == 0, err
    flat = " ".join(out.split())
    assert "no compaction configured" not in flat
    assert "settings: none (inferred: none needed" in flat and "exact-mode records" in flat
    assert re.search(r"compactions stored\W+3\b", flat) and re.search(r"exact records\W+3\b", flat)
    assert "warning" not in flat + err


# -- undecidable events: their reason --------------------------------------------------------


def _event(t: float, invocation: str, author: str, **fields: Any) -> Event:
    return Event(id=f"e{t}", invocation_id=invocation, author=author, timestamp=t, **fields)


def test_an_undecidable_event_says_why(tmp_path: Path) -> None:
    # The core's resumed case (src/core/audit_tests.rs): invocation A pauses
    # on a long-running call; B asks and answers; A is resumed by its id
    # (the call's result, its reply); C asks; a tail-retention summary of
    # A's events and B's. Fetched where A resumed, A's copy holds B's
    # events; fetched where it started, not: both reproduce the summary.
    def said(text: str, role: str = "model") -> types.Content:
        return types.Content(role=role, parts=[types.Part(text=text)])

    call = types.FunctionCall(id="c1", name="start_job", args={})
    result = types.FunctionResponse(id="c1", name="start_job", response={"result": "done"})
    events = [
        _event(1.0, "A", "user", content=said("start the job", "user")),
        _event(
            1.1,
            "A",
            "root",
            content=types.Content(role="model", parts=[types.Part(function_call=call)]),
            long_running_tool_ids={"c1"},
        ),
        _event(2.0, "B", "user", content=said("meanwhile", "user")),
        _event(2.1, "B", "root", content=said("an answer")),
        _event(
            3.0,
            "A",
            "root",
            content=types.Content(role="user", parts=[types.Part(function_response=result)]),
        ),
        _event(3.1, "A", "root", content=said("the job is done")),
        _event(3.05, "C", "user", content=said("and now", "user")),
        _event(
            3.2,
            "X",
            "user",
            actions=EventActions(
                compaction=EventCompaction(
                    start_timestamp=1.0, end_timestamp=3.0, compacted_content=said("summary")
                )
            ),
        ),
    ]
    export = tmp_path / "resumed.jsonl"
    export.write_text(export_line("a", events) + "\n")
    given = ["--token-threshold", "1", "--retention", "1"]
    status, report, _ = json_run(export, *given)
    assert status == 0
    (session,) = report["sessions"]
    assert session["hidden"] == []
    undecided = {e["id"]: e for e in session["undecidable"]}
    assert set(undecided) == {"e2.0", "e2.1"}
    for event in undecided.values():
        assert event["could_be"] == "hidden" and event["ambiguity"] == "resumed"
        assert event["compaction_id"] == "e3.2"
        assert "resumed invocation" in event["reason"] and "2 of its runs" in event["reason"]
    status, out, _ = run_cli(["audit", str(export), *given])
    assert "undecidable: hidden? (fetch point unknown)" in " ".join(out.split())
    # `audit merge` keeps them as they are.
    part = tmp_path / "whole.json"
    part.write_text(json.dumps(report))
    status, merged, _ = run_cli(["audit", "merge", str(part)])
    assert json.loads(merged)["sessions"][0]["undecidable"] == session["undecidable"]
