"""The audit against ground truth (`tests/support/ground_truth.py`): stores written
by real google-adk `Runner` runs (nothing of ours installed) through the
in-memory (exported), SQLite and database services, and what google-adk's
own contents assembly and the summarizer's ledger say is hidden or
duplicated in them, scope by scope. The audit must find exactly that: no
event missed, none reported falsely, nothing left undecided.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from support.ground_truth import (
    KINDS,
    Written,
    dump,
    write,
)
from support.runner_harness import stepped_clock
from support.truth_scenarios import (
    ISOLATION,
    OVERLAP,
    PARALLEL,
    RECOVERED,
    RESUMED,
    RESUMED_BY_ID,
    REWIND,
    SCENARIOS,
    TICK,
    TIED,
    assert_loses_nothing,
    audit,
    chat,
    isolation_app,
    isolation_chat,
    overlap_app,
    overlap_chat,
    parallel_app,
    recovered_app,
    recovered_chat,
    resumed_app,
    resumed_chat,
    rewind_chat,
    start_ticket,
    tied_app,
    write_scenario,
)

pytestmark = [
    pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning"),
    pytest.mark.filterwarnings("ignore:The `plugins` argument is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:ParallelAgent is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:App .* can transfer between agents:UserWarning"),
]


def assert_truth(written: Written, settings: dict[str, int]) -> dict[str, Any]:
    """The audit finds exactly what google-adk's truth says; returns the report."""
    report = audit(written, settings)
    (session,) = report["sessions"]
    hidden = {e["id"]: e["cause"] for e in session["hidden"]}
    duplicated = {e["id"] for e in session["duplicated"]}
    undecidable = {e["id"] for e in session.get("undecidable", [])}
    expected = written.truth
    where = f"{written.kind} store:\n{dump(expected.events)}"
    assert set(hidden) == expected.hidden, (
        f"missed {sorted(expected.hidden - set(hidden))}, "
        f"false {sorted(set(hidden) - expected.hidden)} ({hidden}) in the {where}"
    )
    assert duplicated == expected.duplicated, (
        f"missed {sorted(expected.duplicated - duplicated)}, "
        f"false {sorted(duplicated - expected.duplicated)} duplicates in the {where}"
    )
    assert undecidable == set(), f"undecided {sorted(undecidable)} in the {where}"
    assert report["summary"]["compactions"] > 0
    return report


# -- an isolation scope beside the root scope -------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_an_isolation_scope_beside_the_root_scope(tmp_path: Path, kind: str) -> None:
    written = write(kind, tmp_path, isolation_app(), isolation_chat)
    events = written.truth.events
    scoped = [e for e in events if e.isolation_scope]
    compactions = [e for e in events if e.actions and e.actions.compaction]
    # The scenario: the task's own compaction, and a root compaction whose
    # interval spans some of the task's events.
    assert any(c.isolation_scope for c in compactions), dump(events)
    root_spans = [
        c.actions.compaction
        for c in compactions
        if not c.isolation_scope and c.actions.compaction is not None
    ]
    assert any(
        c.start_timestamp <= e.timestamp <= c.end_timestamp  # type: ignore[operator]
        for c in root_spans
        for e in scoped
    ), dump(events)
    assert_truth(written, ISOLATION)


# -- a long-running call resumed late, under tail retention ----------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_long_running_call_resumed_late_under_tail_retention(tmp_path: Path, kind: str) -> None:
    written = write(kind, tmp_path, resumed_app(), resumed_chat)
    events = written.truth.events
    # The scenario: the call's response is stored after later invocations'
    # events, under the call's own invocation id, and summaries roll up.
    (call,) = [e for e in events if any(c.name == "start_job" for c in e.get_function_calls())]
    (answer,) = [e for e in events if e.get_function_responses() and e.author == "user"]
    assert answer.invocation_id == call.invocation_id
    between = events[events.index(call) : events.index(answer)]
    assert {e.invocation_id for e in between} - {call.invocation_id}, dump(events)
    assert any(c.seeds for c in written.ledger.calls), dump(events)
    assert_truth(written, RESUMED)


# -- an invocation resumed by its id, no user-authored event where it resumed ----------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("trigger", list(RESUMED_BY_ID))
def test_an_invocation_resumed_by_id_without_a_user_event(
    tmp_path: Path, kind: str, trigger: str
) -> None:
    written = write_scenario(tmp_path, f"resumed-by-id-{trigger}", kind, None)
    events = written.truth.events
    # The scenario: the call's invocation resumes after another invocation's
    # events, with an event the user did not author, and a summary made
    # after it resumed was handed the other invocation's events stored
    # before it resumed.
    (asked,) = [e for e in events if any(c.name == "start_job" for c in e.get_function_calls())]
    mine = [k for k, e in enumerate(events) if e.invocation_id == asked.invocation_id]

    def others(j: int, k: int) -> set[str]:
        """Another invocation's events between positions j and k."""
        return {
            e.id
            for e in events[j + 1 : k]
            if e.invocation_id != asked.invocation_id and not e.actions.compaction
        }

    (gap,) = [k for j, k in itertools.pairwise(mine) if others(j, k)]
    assert events[gap].author != "user", dump(events)
    between = others(mine[0], gap)
    resumed = {e.id for e in events[gap:] if e.invocation_id == asked.invocation_id}
    assert any(between & set(c.inputs) and resumed & set(c.inputs) for c in written.ledger.calls), (
        dump(events)
    )
    assert_truth(written, RESUMED_BY_ID[trigger][0])


# -- a ParallelAgent --------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_parallel_agent(tmp_path: Path, kind: str) -> None:
    # On SQLite the branches' events reach the store in aiosqlite's thread
    # order: on a loaded machine a run now and then hides nothing (about 1
    # in 6). Each run's audit must equal its truth; one of three must hide.
    for attempt in range(3):
        root = tmp_path / str(attempt)
        root.mkdir()
        written = write(kind, root, parallel_app(), chat(12))
        assert_truth(written, PARALLEL)
        if written.truth.hidden:
            break
    assert written.truth.hidden, "the scenario no longer hides anything"


# -- overlapping invocations (in memory: the SQL services refuse them) -------------------


def test_overlapping_invocations(tmp_path: Path) -> None:
    written = write("memory", tmp_path, overlap_app(), overlap_chat)
    assert written.truth.hidden, "the scenario no longer hides anything"
    assert_truth(written, OVERLAP)


# -- tied timestamps, both strategies ---------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("trigger", list(TIED))
def test_tied_timestamps(tmp_path: Path, kind: str, trigger: str) -> None:
    settings, ties = TIED[trigger]
    app = tied_app(settings, f"tied-{trigger}")
    written = write(kind, tmp_path, app, chat(20), clock=stepped_clock(0.25, ties))
    assert written.truth.hidden, "the scenario no longer hides anything"
    report = assert_truth(written, settings)
    causes = {e["cause"] for e in report["sessions"][0]["hidden"]}
    assert causes == {"tied_timestamp"}, causes


# -- rewinds ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_rewind(tmp_path: Path, kind: str) -> None:
    app = tied_app(REWIND, "rewind")
    written = write(kind, tmp_path, app, rewind_chat)
    assert any(e.actions and e.actions.rewind_before_invocation_id for e in written.truth.events)
    assert_truth(written, REWIND)


# -- a coarse clock, and an invocation still under way (issue scenarios) ----------------


# -- a compacted call put back by google-adk's call recovery ----------------------------


# The tool the scripted model calls when asked to call the job.
start_ticket.__name__ = "start_job"


@pytest.mark.parametrize("kind", KINDS)
def test_a_call_put_back_by_call_recovery(tmp_path: Path, kind: str) -> None:
    written = write(kind, tmp_path, recovered_app(), recovered_chat)
    (call,) = [
        e
        for e in written.truth.events
        if any(c.name == "start_job" for c in e.get_function_calls())
    ]
    assert written.truth.duplicated == {call.id}, dump(written.truth.events)
    assert_truth(written, RECOVERED)


# -- a ParallelAgent's tool rounds under tail retention ---------------------------------


# -- written in exact mode: nothing lost for plain google-adk, nothing for the audit ----


EXACT_CASES = [
    pytest.param(name, kind, id=f"{name}-{kind}")
    for name, (*_, kinds) in SCENARIOS.items()
    for kind in kinds
]


@pytest.mark.adk_2_13("exact mode")
@pytest.mark.parametrize(("name", "kind"), EXACT_CASES)
def test_exact_mode_stores_lose_nothing(tmp_path: Path, name: str, kind: str) -> None:
    assert_loses_nothing(write_scenario(tmp_path, name, kind, "exact"), name)


@pytest.mark.parametrize("kind", KINDS)
def test_a_coarse_clock(tmp_path: Path, kind: str) -> None:
    written = write_scenario(tmp_path, "coarse-clock", kind, None)
    assert written.truth.hidden, "the scenario no longer hides anything"
    assert_truth(written, TICK)


def test_an_invocation_under_way(tmp_path: Path) -> None:
    written = write_scenario(tmp_path, "under-way", "memory", None)
    assert written.truth.hidden, "the scenario no longer hides anything"
    assert_truth(written, OVERLAP)
