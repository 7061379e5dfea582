"""The agreement checks the bench makes before it times anything: both
sides must filter a session alike (the same objects for rewinds and
recovery, equal ranges, the same raw events and equal summaries for
processing) and compact it alike (the same summarizer input, an equal
summary); exact mode must give parity's prompt on the generated sessions
and must compact. A benchmark never reports a fast path that is wrong.

Each check returns the Rust core's declines during the side's calls, which
the operation's first row reports.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.events.event import Event

from .bench_options import FILTER_OPS
from .bench_report import BenchmarkMismatchError
from .bench_sides import Implementation, read_declines
from .bench_timing import CompactionCall, call_arguments, present_in
from .sessions import AGENT_NAME


def _same_objects(label: str, expected: list[Event], actual: list[Event]) -> None:
    if len(expected) != len(actual):
        raise BenchmarkMismatchError(f"{label}: {len(actual)} events, expected {len(expected)}")
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        if want is not got:
            raise BenchmarkMismatchError(
                f"{label}: event {index} is {got.id!r}, expected {want.id!r}"
            )


def _same_prompt(
    label: str, source: list[Event], expected: list[Event], actual: list[Event]
) -> None:
    """Raw events must be the caller's objects; summaries equal, id aside."""
    if len(expected) != len(actual):
        raise BenchmarkMismatchError(f"{label}: {len(actual)} events, expected {len(expected)}")
    raw = {id(event) for event in source}
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        if id(want) in raw or id(got) in raw:
            if want is not got:
                raise BenchmarkMismatchError(
                    f"{label}: event {index} is {got.id!r}, expected {want.id!r}"
                )
        elif want.model_dump(exclude={"id"}) != got.model_dump(exclude={"id"}):
            raise BenchmarkMismatchError(f"{label}: summary {index} differs from google-adk's")


def check_agreement(
    events: list[Event], python: Implementation, rust: Implementation
) -> dict[str, Counter[str]]:
    """Raises `BenchmarkMismatchError` unless both filter alike.

    Returns the Rust core's declines during `rust`'s calls, per operation of
    `FILTER_OPS`, by reason (empty when it declined none): the rows of those
    operations report them.
    """
    declines: dict[str, Counter[str]] = {op: Counter() for op in FILTER_OPS}

    def counted(op: str, call: Callable[[], Any]) -> Any:
        read_declines(reset=True)
        try:
            return call()
        finally:
            declines[op].update(read_declines(reset=True))

    if python.apply_rewinds is not None and rust.apply_rewinds is not None:
        rewinds = rust.apply_rewinds
        _same_objects(
            "apply_rewinds",
            python.apply_rewinds(events),
            counted("apply_rewinds", lambda: rewinds(events)),
        )
    if python.get_compaction_ranges is not None and rust.get_compaction_ranges is not None:
        expected_ranges = python.get_compaction_ranges(events)
        ranges = rust.get_compaction_ranges
        actual_ranges = counted("get_compaction_ranges", lambda: ranges(events))
        if actual_ranges != expected_ranges:
            raise BenchmarkMismatchError("get_compaction_ranges: different ranges")
    _same_prompt(
        "process_compaction_events",
        events,
        python.process_compaction_events(events, AGENT_NAME),
        counted(
            "process_compaction_events",
            lambda: rust.process_compaction_events(events, AGENT_NAME),
        ),
    )
    py_recover, rust_recover = (
        python.recover_compacted_function_calls,
        rust.recover_compacted_function_calls,
    )
    if py_recover is not None and rust_recover is not None:
        processed, source = call_arguments("recover_compacted_function_calls", events)
        _same_objects(
            "recover_compacted_function_calls",
            py_recover(processed, source),
            counted(
                "recover_compacted_function_calls",
                lambda: rust_recover(processed, source),
            ),
        )

    def prompt(impl: Implementation) -> list[Event]:
        processed = impl.process_compaction_events(events, AGENT_NAME)
        recover = impl.recover_compacted_function_calls
        return processed if recover is None else recover(processed, events)

    _same_prompt(
        "process+recover", events, prompt(python), counted("process+recover", lambda: prompt(rust))
    )
    return declines


def _fresh_fields(event: Event) -> dict[str, Any]:
    # Events made during the call: ids are drawn anew, timestamps read anew.
    dump: dict[str, Any] = event.model_dump(exclude={"id", "invocation_id", "timestamp"})
    return dump


def _summarized(events: list[Event], source: list[Event]) -> list[object]:
    """A summarizer input: ids of session events, fields of events made anew."""
    raw = {id(event) for event in source}
    return [
        event.id if id(event) in raw else ("new", event.model_dump(exclude={"id", "invocation_id"}))
        for event in events
    ]


def check_compaction(
    op: str,
    events: list[Event],
    python: Implementation,
    rust: Implementation,
    agent: LlmAgent,
    loop: asyncio.AbstractEventLoop,
) -> Counter[str]:
    """Raises `BenchmarkMismatchError` unless both compact `events` alike.

    Both must hand the summarizer the same events (the same session events,
    equal new ones such as a rolling-summary seed) and yield or append an
    equal summary (new ids and timestamps aside); google-adk must compact.

    Returns the Rust core's declines during `rust`'s call, by reason.
    """
    want = CompactionCall(op, python, events, agent, loop).run()
    rust_call = CompactionCall(op, rust, events, agent, loop)
    read_declines(reset=True)
    got = rust_call.run()
    declines = Counter(read_declines(reset=True))
    if not want.summarized or not want.produced:
        raise BenchmarkMismatchError(
            f"{op}: google-adk does not compact the {len(events):,}-event session;"
            " there is nothing to time"
        )
    if want.returned != got.returned:
        raise BenchmarkMismatchError(f"{op}: returned {got.returned!r}, expected {want.returned!r}")
    if [_summarized(call, events) for call in want.summarized] != [
        _summarized(call, events) for call in got.summarized
    ]:
        raise BenchmarkMismatchError(f"{op}: the summarizer got different events")
    if [_fresh_fields(event) for event in want.produced] != [
        _fresh_fields(event) for event in got.produced
    ]:
        raise BenchmarkMismatchError(f"{op}: the compaction event differs from google-adk's")
    return declines


def check_exact_prompt(
    events: list[Event], parity: Implementation, exact: Implementation
) -> dict[str, Counter[str]]:
    """Raises `BenchmarkMismatchError` unless exact mode's prompt equals
    parity's on `events`. The generated sessions are ones interval coverage
    reads right (timestamps in storage order, no concurrent appends, every
    compaction written over what it summarized), so the two coverage models
    agree there: exact mode's rows time the same answer.

    Returns the Rust core's declines during `exact`'s calls, per operation.
    """
    declines: dict[str, Counter[str]] = {}

    def prompt(impl: Implementation, recover: bool) -> list[Event]:
        processed = impl.process_compaction_events(events, AGENT_NAME)
        if recover:
            return present_in(impl, "process+recover", impl.recover_compacted_function_calls)(
                processed, events
            )
        return processed

    for op, recover in (("process_compaction_events", False), ("process+recover", True)):
        want = prompt(parity, recover)
        read_declines(reset=True)
        got = prompt(exact, recover)
        declines[op] = Counter(read_declines(reset=True))
        _same_prompt(f"{op} (exact mode)", events, want, got)
    return declines


def check_exact_compaction(
    op: str,
    events: list[Event],
    exact: Implementation,
    agent: LlmAgent,
    loop: asyncio.AbstractEventLoop,
) -> Counter[str]:
    """Raises `BenchmarkMismatchError` unless exact mode compacts the due
    session `events` (its timing would otherwise be of a call that stops
    early). Its choice of events is its own (coverage, not position), so
    only that it summarizes and writes a compaction is checked.

    Returns the Rust core's declines during the call, by reason.
    """
    read_declines(reset=True)
    got = CompactionCall(op, exact, events, agent, loop).run()
    declines = Counter(read_declines(reset=True))
    if not got.summarized or not got.produced:
        raise BenchmarkMismatchError(
            f"{op}: exact mode does not compact the {len(events):,}-event session;"
            " there is nothing to time"
        )
    return declines
