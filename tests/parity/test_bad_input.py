"""Inputs the Rust core may decline: ours must still behave as google-adk.

Each case is a small session (with a compaction, a subsumed compaction,
parallel and long-running calls, a rewind and a response whose call gets
compacted away) with one defect: a foreign object in the list, an odd
timestamp, a missing attribute, an Event subclass... For every function
ours returns what the original returns, or raises the same exception.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from typing import Any

import adk_fastcompact as fc
import pytest
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.genai import types

from support.compare import (
    ORIG_APPLY_REWINDS,
    ORIG_GET_COMPACTION_RANGES,
    ORIG_PROCESS,
    ORIG_RECOVER,
    Outcome,
    assert_same_error,
    assert_same_events,
    assert_same_ranges,
    call,
    needs,
)

pytestmark = pytest.mark.usefixtures("index_mode")

NAN = float("nan")


class SubEvent(Event):
    """A user's Event subclass that adds a field."""

    note: str = ""


class HidingEvent(Event):
    """A subclass whose accessors disagree with its content; google-adk only
    ever asks the accessors."""

    def get_function_responses(self) -> list[types.FunctionResponse]:
        return []

    def get_function_calls(self) -> list[types.FunctionCall]:
        return []


class EventList(list):
    """A user's list subclass."""


class ReversedList(list):
    """A list subclass whose sequence protocol presents the items reversed.

    google-adk reads events only through `len`, indexing and iteration, so it
    sees them reversed; whatever reads the list's storage directly does not.
    """

    def __iter__(self) -> Iterator[Any]:
        return iter(list(list.__iter__(self))[::-1])

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int):
            return list.__getitem__(self, len(self) - 1 - index)
        return list(self)[index]


class HidingList(list):
    """A list subclass whose sequence protocol shows none of its items."""

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Iterator[Any]:
        return iter(())


class DuckEvent:
    """Not an Event, but has everything google-adk reads from one."""

    def __init__(self, event: Event) -> None:
        for name in Event.model_fields:
            setattr(self, name, getattr(event, name))

    def get_function_calls(self) -> list[types.FunctionCall]:
        return Event.get_function_calls(self)  # type: ignore[arg-type]

    def get_function_responses(self) -> list[types.FunctionResponse]:
        return Event.get_function_responses(self)  # type: ignore[arg-type]


class SubPart(types.Part):
    """A google-genai model subclass."""


class SubContent(types.Content):
    pass


class SubFunctionResponse(types.FunctionResponse):
    pass


class SubActions(EventActions):
    pass


class SubCompaction(EventCompaction):
    pass


class Stamp(float):
    """A float subclass, like numpy.float64."""


def _call(*ids: str) -> types.Content:
    return types.Content(
        role="model",
        parts=[types.Part(function_call=types.FunctionCall(id=i, name="t", args={})) for i in ids],
    )


def _response(*ids: str, status: str = "ok") -> types.Content:
    return types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    id=i, name="t", response={"status": status}
                )
            )
            for i in ids
        ],
    )


def _summary(start: Any, end: Any, text: str = "summary") -> EventActions:
    content = types.Content(role="model", parts=[types.Part(text=text)])
    return EventActions(
        compaction=EventCompaction(
            start_timestamp=start, end_timestamp=end, compacted_content=content
        )
    )


def base() -> list[Event]:
    """A small session that runs every path of the four functions."""
    text = types.Content(role="user", parts=[types.Part(text="hi")])
    reply = types.Content(role="model", parts=[types.Part(text="hello")])
    return [
        Event(id="u1", invocation_id="inv-1", author="user", timestamp=1.0, content=text),
        Event(
            id="call",
            invocation_id="inv-1",
            author="root",
            timestamp=2.0,
            content=_call("a", "b"),
            long_running_tool_ids={"a"},
        ),
        Event(
            id="placeholder",
            invocation_id="inv-1",
            author="root",
            timestamp=3.0,
            content=_response("a", "b", status="pending"),
        ),
        Event(id="m1", invocation_id="inv-1", author="root", timestamp=4.0, content=reply),
        Event(
            id="sum1", invocation_id="s-1", author="user", timestamp=5.0, actions=_summary(1.0, 4.0)
        ),
        Event(id="u2", invocation_id="inv-2", author="user", timestamp=6.0, content=text),
        Event(
            id="rewind",
            invocation_id="inv-3",
            author="user",
            timestamp=7.0,
            actions=EventActions(rewind_before_invocation_id="inv-2"),
        ),
        Event(
            id="resume", invocation_id="inv-4", author="user", timestamp=8.0, content=_response("a")
        ),
        Event(
            id="sum2", invocation_id="s-2", author="user", timestamp=9.0, actions=_summary(2.0, 3.0)
        ),
        Event(id="m2", invocation_id="inv-4", author="root", timestamp=10.0, content=reply),
    ]


# -- the defects -------------------------------------------------------------

Mutation = Callable[[list[Any]], None]
CASES: dict[str, Mutation] = {}


def case(name: str) -> Callable[[Mutation], Mutation]:
    def register(fn: Mutation) -> Mutation:
        CASES[name] = fn
        return fn

    return register


def _set(index: int, attr: str, value: Any) -> Mutation:
    def mutate(events: list[Any]) -> None:
        # No validation on assignment: the value is stored as is.
        events[index].__dict__[attr] = value

    return mutate


def _insert(index: int, make: Callable[[], Any]) -> Mutation:
    def mutate(events: list[Any]) -> None:
        events.insert(index if index >= 0 else len(events), make())

    return mutate


def _bound(index: int, which: str, value: Any) -> Mutation:
    def mutate(events: list[Any]) -> None:
        events[index].actions.compaction.__dict__[which] = value

    return mutate


for _at in (0, 4, 7, -1):
    CASES[f"None at {_at}"] = _insert(_at, lambda: None)
CASES["object() at 3"] = _insert(3, object)
CASES["dict at 3"] = _insert(3, lambda: {"id": "x", "timestamp": 3.5, "actions": None})
CASES["dict at end"] = _insert(-1, lambda: {"id": "x", "timestamp": 3.5})
for _k in (0, 2, 4, 7):
    CASES[f"timestamp None on {_k}"] = _set(_k, "timestamp", None)
    CASES[f"timestamp NaN on {_k}"] = _set(_k, "timestamp", NAN)
CASES["timestamp str"] = _set(3, "timestamp", "4.0")
CASES["timestamp bool"] = _set(3, "timestamp", True)
CASES["timestamp huge int"] = _set(3, "timestamp", 10**400)
CASES["timestamp -0.0 and 0.0"] = lambda ev: (
    _set(0, "timestamp", -0.0)(ev),
    _set(3, "timestamp", 0.0)(ev),
)
CASES["timestamp float subclass"] = _set(3, "timestamp", Stamp(4.0))
CASES["timestamp int"] = _set(3, "timestamp", 4)
CASES["timestamp inf"] = _set(9, "timestamp", float("inf"))
CASES["id empty"] = _set(1, "id", "")
CASES["invocation_id None"] = _set(5, "invocation_id", None)
CASES["invocation_id int"] = _set(5, "invocation_id", 2)
CASES["rewind target int"] = lambda ev: ev[6].actions.__dict__.update(rewind_before_invocation_id=2)
for _k in (0, 4, 6):
    CASES[f"actions None on {_k}"] = _set(_k, "actions", None)
CASES["actions dict"] = _set(4, "actions", {"compaction": None})
CASES["compaction dict"] = lambda ev: ev[4].actions.__dict__.update(
    compaction={"start_timestamp": 1.0, "end_timestamp": 4.0}
)
CASES["no timestamp attribute"] = lambda ev: ev[3].__dict__.pop("timestamp")
CASES["no actions attribute"] = lambda ev: ev[3].__dict__.pop("actions")
CASES["parts hold None"] = lambda ev: ev[2].content.__dict__.update(parts=[None])
CASES["content is a str"] = _set(2, "content", "text")
CASES["call id int"] = lambda ev: ev[1].content.parts[0].function_call.__dict__.update(id=5)
CASES["response id int"] = lambda ev: ev[7].content.parts[0].function_response.__dict__.update(id=5)
CASES["bound None"] = _bound(4, "start_timestamp", None)
CASES["bound NaN"] = _bound(4, "end_timestamp", NAN)
CASES["bound str"] = _bound(4, "start_timestamp", "1.0")
CASES["bound bool"] = _bound(4, "start_timestamp", True)
CASES["bound int"] = _bound(4, "start_timestamp", 1)
CASES["bound huge int"] = _bound(4, "end_timestamp", 10**400)
CASES["bound float subclass"] = _bound(4, "end_timestamp", Stamp(4.0))
CASES["bound -0.0"] = lambda ev: (
    _bound(4, "start_timestamp", -0.0)(ev),
    _set(0, "timestamp", 0.0)(ev),
)
CASES["bound inf"] = _bound(8, "end_timestamp", float("inf"))
CASES["compacted_content str"] = _bound(4, "compacted_content", "summary")


@case("subclass events")
def _subclass(events: list[Any]) -> None:
    for k in (1, 4, 7):
        events[k] = SubEvent(**dict(events[k]), note="mine")


@case("subclass hiding its calls and responses")
def _hiding(events: list[Any]) -> None:
    for k in (1, 2, 7):
        events[k] = HidingEvent(**dict(events[k]))


@case("ints beyond 2**53")
def _beyond_floats(events: list[Any]) -> None:
    # 2**53 + 1 has no float: Python compares it exactly with 2.0**53, a
    # conversion to f64 would make the two equal.
    big = 2**53
    for k, e in enumerate(events):
        e.__dict__["timestamp"] = float(big + 2 * k)
    events[3].__dict__["timestamp"] = big + 1
    events[4].actions.compaction.__dict__.update(
        start_timestamp=float(big), end_timestamp=float(big)
    )
    events[8].actions.compaction.__dict__.update(start_timestamp=big + 1, end_timestamp=big + 3)


CASES["parts tuple"] = lambda ev: ev[2].content.__dict__.update(parts=tuple(ev[2].content.parts))
CASES["part is a dict"] = lambda ev: ev[7].content.__dict__.update(
    parts=[{"function_response": ev[7].content.parts[0].function_response}]
)
CASES["Part subclass"] = lambda ev: ev[7].content.__dict__.update(
    parts=[SubPart(**dict(p)) for p in ev[7].content.parts]
)
CASES["Content subclass"] = lambda ev: ev[1].__dict__.update(
    content=SubContent(**dict(ev[1].content))
)
CASES["FunctionResponse subclass"] = lambda ev: (
    ev[7]
    .content.parts[0]
    .__dict__.update(
        function_response=SubFunctionResponse(**dict(ev[7].content.parts[0].function_response))
    )
)
CASES["EventActions subclass"] = lambda ev: [
    ev[k].__dict__.update(actions=SubActions(**dict(ev[k].actions))) for k in (4, 6)
]
CASES["EventCompaction subclass"] = lambda ev: ev[4].actions.__dict__.update(
    compaction=SubCompaction(**dict(ev[4].actions.compaction))
)


@case("duck-typed events")
def _duck(events: list[Any]) -> None:
    for k in (1, 3, 4, 7):
        events[k] = DuckEvent(events[k])


@case("same Event object twice")
def _twice(events: list[Any]) -> None:
    events.insert(8, events[1])
    events.append(events[7])


def session(name: str) -> list[Any]:
    events = base()
    CASES[name](events)
    return events


# -- the comparisons ---------------------------------------------------------


def compare_events(ours: Outcome, orig: Outcome, inputs: list[Any], **kw: Any) -> None:
    if assert_same_error(ours, orig):
        assert_same_events(ours.value, orig.value, [inputs], **kw)


@pytest.mark.parametrize("name", CASES)
def test_apply_rewinds(name: str) -> None:
    events = session(name)
    ours, orig = call(fc.apply_rewinds, events), call(ORIG_APPLY_REWINDS, events)
    compare_events(ours, orig, events)


@needs("get_compaction_ranges")
@pytest.mark.parametrize("name", CASES)
def test_get_compaction_ranges(name: str) -> None:
    events = session(name)
    ours = call(fc.get_compaction_ranges, events)
    orig = call(ORIG_GET_COMPACTION_RANGES, events)
    if assert_same_error(ours, orig):
        assert_same_ranges(ours.value, orig.value)


@pytest.mark.parametrize("agent_name", ["", "root", None])
@pytest.mark.parametrize("name", CASES)
def test_process_compaction_events(name: str, agent_name: Any) -> None:
    events = session(name)
    ours = call(fc.process_compaction_events, events, agent_name)
    orig = call(ORIG_PROCESS, events, agent_name)
    compare_events(ours, orig, events)


@pytest.mark.parametrize("name", CASES)
def test_recover_compacted_function_calls(name: str) -> None:
    events = session(name)
    for view in (events, events[5:], events[:2] + events[5:], events[::-1]):
        ours = call(fc.recover_compacted_function_calls, view, events)
        orig = call(ORIG_RECOVER, view, events)
        compare_events(ours, orig, view + events, returned_input=view)
    # A clean view over a defective source, and the reverse.
    clean = base()
    for view, source in ((clean[5:], events), (events[5:], clean)):
        ours = call(fc.recover_compacted_function_calls, view, source)
        orig = call(ORIG_RECOVER, view, source)
        compare_events(ours, orig, view + source, returned_input=view)


@pytest.mark.parametrize("name", CASES)
def test_process_then_recover(name: str) -> None:
    events = session(name)

    def chain(process: Callable[..., Any], recover: Callable[..., Any]) -> Any:
        return lambda: recover(process(events, "root"), events)

    ours = call(chain(fc.process_compaction_events, fc.recover_compacted_function_calls))
    orig = call(chain(ORIG_PROCESS, ORIG_RECOVER))
    compare_events(ours, orig, events)


def test_agent_name_that_cannot_be_an_author() -> None:
    events = base()
    ours = call(fc.process_compaction_events, events, 5)
    orig = call(ORIG_PROCESS, events, 5)
    assert orig.error is not None
    assert_same_error(ours, orig)


def test_the_base_session_runs_every_path() -> None:
    """Without a defect the cases above would not reach the code they aim at."""
    events = base()
    assert len(ORIG_APPLY_REWINDS(events)) == len(events) - 2
    if ORIG_GET_COMPACTION_RANGES is not None:  # (2.13 on)
        assert [i for i, _, _ in ORIG_GET_COMPACTION_RANGES(events)] == [4]
    processed = ORIG_PROCESS(events, "root")
    assert [e.id for e in processed[1:]] == ["u2", "rewind", "resume", "m2"]
    recovered = ORIG_RECOVER(processed, events)
    assert recovered is not processed
    assert [e.id for e in recovered[1:4]] == ["u2", "rewind", "call"]


# -- not a list --------------------------------------------------------------


def _views(events: list[Event]) -> dict[str, Callable[[], Any]]:
    return {
        "tuple": lambda: tuple(events),
        "generator": lambda: (e for e in events),
        "iterator": lambda: iter(events),
        "dict values": lambda: dict(enumerate(events)).values(),
        "list subclass": lambda: EventList(events),
        "reversed list subclass": lambda: ReversedList(events),
        "hiding list subclass": lambda: HidingList(events),
        "deque": lambda: collections.deque(events),
        "None": lambda: None,
        "Event": lambda: events[0],
        "str": lambda: "events",
    }


VIEWS = list(_views([]))


def compare_view_outcomes(
    ours: Outcome, orig: Outcome, ours_arg: Any, orig_arg: Any, events: list[Event]
) -> None:
    if not assert_same_error(ours, orig):
        return
    if orig.value is orig_arg:
        assert ours.value is ours_arg
    elif (
        isinstance(orig.value, list)
        and all(isinstance(item, tuple) for item in orig.value)
        and orig.value
    ):
        assert_same_ranges(ours.value, orig.value)
    else:
        assert_same_events(ours.value, orig.value, [events])


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize(
    "function",
    [
        "apply_rewinds",
        pytest.param("get_compaction_ranges", marks=needs("get_compaction_ranges")),
        "process_compaction_events",
    ],
)
def test_non_list_events(function: str, view: str) -> None:
    originals = {
        "apply_rewinds": ORIG_APPLY_REWINDS,
        "get_compaction_ranges": ORIG_GET_COMPACTION_RANGES,
        "process_compaction_events": ORIG_PROCESS,
    }
    events = base()
    make = _views(events)[view]
    ours_arg, orig_arg = make(), make()
    ours = call(getattr(fc, function), ours_arg)
    orig = call(originals[function], orig_arg)
    compare_view_outcomes(ours, orig, ours_arg, orig_arg, events)


@pytest.mark.parametrize("source_view", VIEWS)
@pytest.mark.parametrize("events_view", VIEWS)
def test_non_list_recover(events_view: str, source_view: str) -> None:
    events = base()
    processed = ORIG_PROCESS(events, "root")
    make_events = _views(processed)[events_view]
    make_source = _views(events)[source_view]
    ours_args = make_events(), make_source()
    orig_args = make_events(), make_source()
    ours = call(fc.recover_compacted_function_calls, *ours_args)
    orig = call(ORIG_RECOVER, *orig_args)
    compare_view_outcomes(ours, orig, ours_args[0], orig_args[0], processed + events)


@needs("get_compaction_ranges")
def test_compaction_ranges_hand_back_a_nan_bound_as_the_callers_object() -> None:
    content = types.Content(role="model", parts=[types.Part(text="s")])
    events = [Event(author="a", timestamp=float(k), invocation_id=f"i{k}") for k in range(1, 6)]
    for start, end in ((1.0, 2.0), (NAN, 4.0), (3.0, NAN)):
        events.append(
            Event(
                author="a",
                timestamp=10.0 + len(events),
                actions=EventActions(
                    compaction=EventCompaction(
                        start_timestamp=start, end_timestamp=end, compacted_content=content
                    )
                ),
            )
        )
    ours, orig = call(fc.get_compaction_ranges, events), call(ORIG_GET_COMPACTION_RANGES, events)
    assert assert_same_error(ours, orig)
    assert_same_ranges(ours.value, orig.value)
    # Tuples compare equal to google-adk's: a NaN is the very same object.
    assert ours.value == orig.value
    assert any(b != b for r in ours.value for b in r[1:])
