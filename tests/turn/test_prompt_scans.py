"""The native drop-ins for prompt assembly's per-event scans (`_scans`)
against google-adk's own functions.

Every event of the generated sessions, the realistic bench session, the
real-traffic corpus and a set of edge cases is tested with both
`_should_include_event_in_context`s under every combination of the
arguments `_get_contents` passes; `_collect_function_call_ids` on whole
lists and subsets. The native side must answer alone (no decline) for
google-adk's own models, so a wrong native answer cannot hide behind the
fallback; foreign values must decline and then give google-adk's answer or
its exception.
"""

from __future__ import annotations

import itertools
from typing import Any

import adk_fastcompact
import pytest
from adk_fastcompact import _native, _scans
from google.adk.events.event import Event, NodeInfo
from google.adk.events.event_actions import EventActions, EventCompaction
from google.genai import types
from hypothesis import given, settings
from hypothesis import strategies as st

from support.strategies import sessions

CONTENTS = "google.adk.flows.llm_flows.context._contents"

pytestmark = pytest.mark.skipif(
    not all(_scans.active().values()),
    reason="the installed google-adk's scans are not the code the drop-ins reproduce",
)


@pytest.fixture(scope="module")
def include() -> tuple[Any, Any]:
    """(google-adk's `_should_include_event_in_context`, the drop-in)."""
    return _scans.pairs()["_should_include_event_in_context"]


@pytest.fixture(scope="module")
def call_ids() -> tuple[Any, Any]:
    """(google-adk's `_collect_function_call_ids`, the drop-in)."""
    return _scans.pairs()["_collect_function_call_ids"]


BRANCHES = (None, "", "a", "a.b", "a.b.c", "a.bc", "q")
SCOPES = (None, "", "s")
NODE_PATHS = (None, "", "wf@1")
THOUGHTS = (False, True)


def _answer(function: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        return ("value", function(*args, **kwargs))
    except Exception as error:
        return ("raised", (type(error), str(error)))


def assert_same_verdicts(
    include: tuple[Any, Any],
    events: list[Any],
    *,
    declines: bool = False,
    grid: tuple[tuple[Any, ...], ...] = (BRANCHES, SCOPES, NODE_PATHS, THOUGHTS),
) -> int:
    """Compares both functions on every event and argument combination;
    asserts the native side declined nothing (or, with `declines`, that it
    declined every call). Returns how many verdicts were True."""
    original, native = include
    _native.decline_counts(reset=True)
    calls = included = 0
    for event in events:
        for branch, scope, node_path, thoughts in itertools.product(*grid):
            kwargs = {"node_path": node_path, "include_thoughts": thoughts}
            want = _answer(original, branch, event, scope, **kwargs)
            got = _answer(native, branch, event, scope, **kwargs)
            assert got == want, (event, branch, scope, node_path, thoughts)
            calls += 1
            included += want == ("value", True)
    declined = sum(_native.decline_counts(reset=True).values())
    assert declined == (calls if declines else 0)
    return included


def _event(
    parts: list[types.Part] | None = None,
    *,
    role: str | None = "model",
    author: str = "assistant",
    **fields: Any,
) -> Event:
    content = types.Content(role=role, parts=parts) if parts is not None else None
    return Event(**{"author": author, "invocation_id": "i", "content": content, **fields})


def _edge_events() -> list[Event]:
    text = types.Part(text="hello")
    thought = types.Part(text="thinking", thought=True)
    signed = types.Part(thought=True, thought_signature=b"sig")
    call = types.Part(function_call=types.FunctionCall(id="c1", name="tool", args={}))
    response = types.Part(
        function_response=types.FunctionResponse(id="c1", name="tool", response={"r": 1})
    )
    module = __import__(CONTENTS, fromlist=["_"])
    framework = [
        "adk_framework",
        module.REQUEST_EUC_FUNCTION_CALL_NAME,
        module.REQUEST_CONFIRMATION_FUNCTION_CALL_NAME,
    ]
    events = [
        _event([text]),
        _event([thought]),
        _event([thought, text]),
        _event([signed]),
        _event([types.Part(text="")]),
        _event([types.Part()]),
        _event([]),
        _event(None),
        _event([text], role=None),
        _event([text], role=""),
        _event([call]),
        _event([response], author="user", role="user"),
        _event([types.Part(inline_data=types.Blob(data=b"x", mime_type="image/png"))]),
        _event([types.Part(file_data=types.FileData(file_uri="gs://x", mime_type="a/b"))]),
        _event([types.Part(executable_code=types.ExecutableCode(code="1", language="PYTHON"))]),
        _event([types.Part(code_execution_result=types.CodeExecutionResult(outcome="OUTCOME_OK"))]),
        _event([types.Part(thought=True, text="t", function_call=call.function_call)]),
        _event(None, input_transcription=types.Transcription(text="hi")),
        _event(None, output_transcription=types.Transcription(text="")),
        _event([types.Part()], output_transcription=types.Transcription(text="yo")),
        _event(
            None,
            author="user",
            actions=EventActions(
                compaction=EventCompaction(
                    start_timestamp=1.0,
                    end_timestamp=2.0,
                    compacted_content=types.Content(role="model", parts=[text]),
                )
            ),
        ),
        Event.model_construct(**{**_event([text]).__dict__, "actions": None}),
    ]
    for name in framework:
        events.append(_event([types.Part(function_call=types.FunctionCall(id="f", name=name))]))
        events.append(
            _event(
                [text, types.Part(function_response=types.FunctionResponse(name=name))],
                author="user",
                role="user",
            )
        )
    for tool in ("tool_call", "tool_response"):
        field = types.Part.model_fields.get(tool)
        if field is not None:
            kind = field.annotation.__args__[0]  # type: ignore[union-attr]
            events.append(_event([types.Part(**{tool: kind()})]))
    more = []
    for event in events:
        for branch in ("a", "a.b", "a.b.c", "a.bc", ""):
            more.append(event.model_copy(update={"branch": branch}))
        for scope in ("s", ""):
            more.append(event.model_copy(update={"isolation_scope": scope}))
    events += more
    for author in ("user", "assistant"):
        for path in ("", "wf@1", "wf@2"):
            for parts in ([text], [response, text]):
                events.append(
                    _event(
                        parts,
                        author=author,
                        role="user",
                        node_info=NodeInfo(path=path),
                    )
                )
    return events


def test_the_pinned_google_adk_has_the_code_the_drop_ins_reproduce() -> None:
    assert _scans.active() == {
        "_should_include_event_in_context": True,
        "_collect_function_call_ids": True,
        "InvocationContext._get_events": True,
        "InMemorySessionService.append_event": True,
        "_find_active_task_scope": True,
        "_find_unresolved_task_delegations": True,
    }


def test_edge_events_get_google_adks_verdicts(include: tuple[Any, Any]) -> None:
    events = _edge_events()
    included = assert_same_verdicts(include, events)
    # The grid shows both answers plenty (a check on the check).
    assert 0 < included < len(events) * 126


@settings(max_examples=40, deadline=None)
@given(sessions(max_events=40))
def test_generated_sessions_get_google_adks_verdicts(
    include: tuple[Any, Any], generated: Any
) -> None:
    assert_same_verdicts(
        include, list(generated.events), grid=(BRANCHES[:4], SCOPES, NODE_PATHS[:2], THOUGHTS)
    )


def test_a_realistic_bench_session_gets_google_adks_verdicts(include: tuple[Any, Any]) -> None:
    from adk_fastcompact._tooling.sessions import build_due_session

    events = build_due_session(300, 3)
    assert_same_verdicts(include, events, grid=((None, "a"), (None, "s"), (None, "wf@1"), THOUGHTS))


@pytest.fixture(scope="module")
def traffic_events() -> list[Event]:
    """The stored events of test_real_traffic's corpus conversation."""
    from support.traffic_conversation import corpus_session

    return list(corpus_session("scans").events)


def test_the_real_traffic_corpus_gets_google_adks_verdicts(
    include: tuple[Any, Any], call_ids: tuple[Any, Any], traffic_events: list[Event]
) -> None:
    branches = [*sorted({e.branch for e in traffic_events if e.branch}), None]
    scopes = [*sorted({e.isolation_scope for e in traffic_events if e.isolation_scope}), None]
    paths = [*sorted({e.node_info.path for e in traffic_events if e.node_info.path}), None]
    assert_same_verdicts(
        include, traffic_events, grid=(tuple(branches), tuple(scopes), tuple(paths[:3]), THOUGHTS)
    )
    original, native = call_ids
    assert native(traffic_events) == original(traffic_events)
    assert original(traffic_events)


def test_truthiness_of_include_thoughts_is_pythons(include: tuple[Any, Any]) -> None:
    original, native = include
    event = _event([types.Part(text="t", thought=True)])
    for value in (0, 1, "", "x", [], [0], None):
        assert native(None, event, include_thoughts=value) == original(
            None, event, include_thoughts=value
        )


class _Foreign:
    """A part google-adk's code reads only by attribute."""

    function_call = None
    function_response = None
    thought_signature = None
    tool_call = None
    tool_response = None
    thought = None
    text = "foreign"


def test_foreign_values_decline_to_google_adks_answer_or_error(include: tuple[Any, Any]) -> None:
    text = types.Part(text="x")
    odd = [
        Event.model_construct(**{**_event([text]).__dict__, "author": 5}),
        Event.model_construct(**{**_event([text]).__dict__, "branch": 7}),
        Event.model_construct(
            **{
                **_event(None).__dict__,
                "content": types.Content.model_construct(role="model", parts=[_Foreign()]),
            }
        ),
        Event.model_construct(
            **{
                **_event(None).__dict__,
                "content": types.Content.model_construct(role="model", parts=[{"text": "d"}]),
            }
        ),
        Event.model_construct(**{**_event([text]).__dict__, "node_info": "wf@1"}),
    ]
    assert_same_verdicts(
        include, odd, declines=True, grid=((None, "a"), (None,), (None, "wf@1"), (False,))
    )


def test_arguments_of_other_kinds_decline(include: tuple[Any, Any]) -> None:
    original, native = include
    event = _event([types.Part(text="x")], branch="a.b")
    _native.decline_counts(reset=True)
    for branch in (b"a", 3):
        assert _answer(native, branch, event) == _answer(original, branch, event)
    assert sum(_native.decline_counts(reset=True).values()) == 2


class _Responding(Event):
    """An Event subclass answering function responses its own way."""

    def get_function_responses(self) -> list[types.FunctionResponse]:
        return [types.FunctionResponse(name="made-up")]

    def get_function_calls(self) -> list[types.FunctionCall]:
        return [types.FunctionCall(id="made-up", name="x")]


def test_an_event_subclass_is_asked_its_own_methods(
    include: tuple[Any, Any], call_ids: tuple[Any, Any]
) -> None:
    event = _Responding(
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="hi")]),
        node_info=NodeInfo(path="wf@2"),
    )
    original, native = include
    for node_path in (None, "wf@1", "wf@2"):
        assert native(None, event, node_path=node_path) == original(
            None, event, node_path=node_path
        )
    original, native = call_ids
    _native.decline_counts(reset=True)
    assert native([event]) == original([event]) == {"made-up"}
    assert sum(_native.decline_counts(reset=True).values()) == 1


@settings(max_examples=40, deadline=None)
@given(sessions(max_events=60))
def test_call_ids_are_google_adks(call_ids: tuple[Any, Any], generated: Any) -> None:
    original, native = call_ids
    events = list(generated.events)
    _native.decline_counts(reset=True)
    for part in (events, events[::2], events[len(events) // 2 :], []):
        assert native(part) == original(part)
    assert sum(_native.decline_counts(reset=True).values()) == 0


def test_call_ids_skip_empty_ids_and_take_other_iterables(call_ids: tuple[Any, Any]) -> None:
    original, native = call_ids
    events = [
        _event([types.Part(function_call=types.FunctionCall(id="", name="a"))]),
        _event([types.Part(function_call=types.FunctionCall(id=None, name="a"))]),
        _event([types.Part(function_call=types.FunctionCall(id="k", name="a"))]),
        _event(None),
        _event([]),
    ]
    assert native(events) == original(events) == {"k"}
    assert native(tuple(events)) == original(tuple(events)) == {"k"}
    assert native(iter(events)) == {"k"}


def test_install_binds_the_drop_ins_where_google_adk_calls_them(include: tuple[Any, Any]) -> None:
    import importlib

    module = importlib.import_module(CONTENTS)
    adk_fastcompact.uninstall()
    assert module._should_include_event_in_context is include[0]
    adk_fastcompact.install()
    try:
        assert module._should_include_event_in_context is include[1]
        assert module._collect_function_call_ids is _scans.pairs()["_collect_function_call_ids"][1]
        assert _scans.pairs()["_should_include_event_in_context"] == include
    finally:
        adk_fastcompact.uninstall()
    assert module._should_include_event_in_context is include[0]


def test_a_changed_helper_is_not_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from adk_fastcompact import _fingerprint

    real = _fingerprint.fingerprints

    def changed(module: str, roots: Any) -> Any:
        prints = real(module, roots)
        if module == CONTENTS and prints is not None and "_is_part_invisible" in prints:
            prints = {**prints, "_is_part_invisible": "0" * 16}
        return prints

    monkeypatch.setattr(_fingerprint, "fingerprints", changed)
    monkeypatch.setattr(_scans, "_verdicts", {})
    assert _scans.active()["_should_include_event_in_context"] is False
    assert "_should_include_event_in_context" not in _scans.pairs()


# -- InvocationContext._get_events ---------------------------------------------------


@pytest.fixture(scope="module")
def get_events() -> tuple[Any, Any]:
    """(google-adk's `InvocationContext._get_events`, the drop-in)."""
    return _scans.pairs()["InvocationContext._get_events"]


def _context(events: list[Event], branch: str | None, invocation: str = "i1", **kw: Any) -> Any:
    from google.adk.agents.invocation_context import InvocationContext
    from google.adk.sessions.session import Session

    session = Session(id="s", app_name="a", user_id="u", events=events)
    return InvocationContext.model_construct(
        session=session, invocation_id=invocation, branch=branch, **kw
    )


def _branch_events() -> list[Event]:
    """User and agent events on branches around `a.b`, calls issued on some,
    user responses answering calls on the branch, below it and elsewhere."""

    def calls(branch: str | None, *ids: str | None, inv: str = "i1") -> Event:
        parts = [types.Part(function_call=types.FunctionCall(id=i, name="t")) for i in ids] or [
            types.Part(text="x")
        ]
        return _event(parts, branch=branch, invocation_id=inv)

    def answer(branch: str | None, *ids: str | None, inv: str = "i1") -> Event:
        parts = [
            types.Part(function_response=types.FunctionResponse(id=i, name="t", response={}))
            for i in ids
        ] or [types.Part(text="u")]
        return _event(parts, author="user", role="user", branch=branch, invocation_id=inv)

    events = [
        calls("a.b", "on"),
        calls("a.b.c", "below"),
        calls("a.bc", "beside"),
        calls("a", "above"),
        calls(None, "nobranch"),
        calls("a.b", "", None),
        calls("", "empty"),
    ]
    for branch in (None, "", "a", "a.b", "a.b.c", "a.bc", "q"):
        events.append(answer(branch))
        for ids in (
            ("on",),
            ("below",),
            ("beside",),
            ("above",),
            ("nobranch",),
            ("",),
            (None,),
            ("beside", "on"),
            ("elsewhere",),
        ):
            events.append(answer(branch, *ids))
            events.append(answer(branch, *ids, inv="i2"))
        events.append(calls(branch, inv="i2"))
        events.append(calls(branch))
    return events


def assert_same_events(get_events: tuple[Any, Any], context: Any, *, declines: int = 0) -> None:
    original, native = get_events
    _native.decline_counts(reset=True)
    for invocation, branch in itertools.product((False, True), repeat=2):
        kwargs = {"current_invocation": invocation, "current_branch": branch}
        want = _answer(original, context, **kwargs)
        got = _answer(native, context, **kwargs)
        if want[0] == "value":
            assert got[0] == "value"
            assert [id(e) for e in got[1]] == [id(e) for e in want[1]], kwargs
            # The same list object when nothing filters, a new one otherwise.
            assert (got[1] is context.session.events) == (want[1] is context.session.events)
        else:
            assert got == want
    assert sum(_native.decline_counts(reset=True).values()) == declines


def test_get_events_keeps_what_google_adk_keeps(get_events: tuple[Any, Any]) -> None:
    events = _branch_events()
    seen = set()
    for branch in (None, "", "a", "a.b", "a.b.c", "q"):
        for invocation in ("i1", "i2", "none"):
            context = _context(events, branch, invocation)
            assert_same_events(get_events, context)
            seen.add(len(get_events[0](context, current_branch=True)))
    assert len(seen) > 4  # the branches keep different events


@settings(max_examples=40, deadline=None)
@given(sessions(max_events=60))
def test_get_events_on_generated_sessions(get_events: tuple[Any, Any], generated: Any) -> None:
    events = list(generated.events)
    invocations = sorted({e.invocation_id for e in events})[:2] or ["i1"]
    branches = sorted({e.branch for e in events if e.branch})[:2]
    for invocation in invocations:
        for branch in (None, "", *branches):
            assert_same_events(get_events, _context(events, branch, invocation))


def test_get_events_of_a_single_turn_node_stay_google_adks(get_events: tuple[Any, Any]) -> None:
    from google.adk.agents.llm_agent import LlmAgent

    agent = LlmAgent(name="solo", mode="single_turn")
    events = _branch_events()
    for path in ("", "wf@1/solo@1"):
        context = _context(events, "a.b", agent=agent, node_path=path)
        original, native = get_events
        for invocation in (False, True):
            kwargs = {"current_invocation": invocation, "current_branch": True}
            assert [id(e) for e in native(context, **kwargs)] == [
                id(e) for e in original(context, **kwargs)
            ]


def test_get_events_decline_foreign_values(get_events: tuple[Any, Any]) -> None:
    text = types.Part(text="x")
    odd = Event.model_construct(**{**_event([text]).__dict__, "branch": 3, "invocation_id": "i1"})
    assert_same_events(get_events, _context([*_branch_events(), odd], "a.b"), declines=2)
    responding = _Responding(author="user", invocation_id="i1", branch="a.b")
    assert_same_events(get_events, _context([responding], "a.b"), declines=3)


# -- InMemorySessionService.append_event ----------------------------------------------


def _appends(service: Any, append: Any) -> list[Any]:
    """A sequence of appends through `append` (google-adk's method or the
    drop-in) on a new session of `service`; what each returned or raised,
    and the service's state after."""
    import asyncio

    from google.adk.sessions.session import Session

    async def run() -> list[Any]:
        session = await service.create_session(app_name="a", user_id="u", session_id="s")
        stale = await service.get_session(app_name="a", user_id="u", session_id="s")
        text = [types.Part(text="x")]
        first = _event(text, id="e1", timestamp=1.0)
        delta = EventActions(state_delta={"k": 1, "app:g": 2, "user:h": 3, "temp:t": 4})
        events = [
            first,
            first,  # the same object again
            first.model_copy(deep=True),  # an equal copy
            _event([types.Part(text="y")], id="e1", timestamp=2.0),  # same id, not equal
            _event(text, id="e2", timestamp=3.0, actions=delta),
            _event(text, id="e3", timestamp=4.0, partial=True),
            _event(text, id="e4", timestamp=5.0, actions=EventActions(state_delta={})),
        ]
        out: list[Any] = []
        for target in (session, stale):
            for event in events:
                out.append(_answer_async(await _try(append(service, target, event))))
        missing = Session(id="nope", app_name="a", user_id="u")
        out.append(_answer_async(await _try(append(service, missing, events[0]))))
        stored = service.sessions["a"]["u"]["s"]
        out.append([e.model_dump_json() for e in stored.events])
        out.append([e.model_dump_json() for e in session.events])
        out.append([e.model_dump_json() for e in stale.events])
        out.append((dict(stored.state), service.app_state, service.user_state))
        out.append((session.state, stale.state, stored.last_update_time))
        return out

    return asyncio.run(run())


async def _try(awaitable: Any) -> tuple[str, Any]:
    try:
        return ("value", await awaitable)
    except Exception as error:
        return ("raised", (type(error), str(error)))


def _answer_async(answer: tuple[str, Any]) -> tuple[str, Any]:
    kind, value = answer
    return (kind, value.model_dump_json() if isinstance(value, Event) else value)


def test_append_event_does_what_google_adks_does() -> None:
    from google.adk.sessions.in_memory_session_service import InMemorySessionService

    original, native = _scans.pairs()["InMemorySessionService.append_event"]
    _native.decline_counts(reset=True)
    assert _appends(InMemorySessionService(), native) == _appends(
        InMemorySessionService(), original
    )
    assert sum(_native.decline_counts(reset=True).values()) == 0


def test_append_event_declines_foreign_ids() -> None:
    from google.adk.sessions.in_memory_session_service import InMemorySessionService

    events = [_event([types.Part(text="x")], id="e1"), _event(None, id="e2")]
    odd = Event.model_construct(**{**events[0].__dict__, "id": 5})
    _native.decline_counts(reset=True)
    assert _native.stored_again(events, odd) is None
    assert _native.stored_again([odd], events[0]) is None
    assert _native.stored_again(tuple(events), events[0]) is None
    assert sum(_native.decline_counts(reset=True).values()) == 3
    assert _native.stored_again(events, events[0].model_copy(deep=True)) is True
    assert _native.stored_again(events, _event(None, id="e1")) is False
    assert _native.stored_again(events, _event(None, id="e9")) is False
    assert InMemorySessionService  # the service the drop-in belongs to


def _stored_again_plain(events: list[Event], event: Event) -> bool:
    return any(e == event for e in events if e.id == event.id)


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from("aacdrx"), st.integers(0, 30)), max_size=40))
def test_re_delivery_as_a_list_grows_and_is_edited(ops: list[tuple[str, int]]) -> None:
    """The re-delivery test on a stored list that grows (appends, ids used
    twice, re-deliveries) or is edited (an event removed, one replaced):
    the same answer as google-adk's scan every time."""
    adk_fastcompact.index_clear()
    text = [types.Part(text="x")]
    events = [_event(text, id=f"e{i}", timestamp=float(i)) for i in range(3)]
    made = 3
    for op, n in ops:
        if op == "a":  # a new event (its id possibly one already stored)
            probe = _event(text, id=f"e{n % (made + 1)}", timestamp=float(made))
            made += 1
        elif op == "c":  # an equal copy of a stored one (a re-delivery)
            probe = events[n % len(events)].model_copy(deep=True)
        elif op == "d" and len(events) > 1:  # an event removed in place
            del events[n % len(events)]
            continue
        elif op == "r":  # one replaced by another object, same id, other text
            at = n % len(events)
            events[at] = _event([types.Part(text="y")], id=events[at].id, timestamp=-1.0)
            continue
        else:
            probe = events[n % len(events)]
        expected = _stored_again_plain(events, probe)
        assert _native.stored_again(events, probe) is expected
        if not expected:
            events.append(probe)


def test_re_delivery_reads_only_the_new_events_of_a_grown_list() -> None:
    """Once a stored list is indexed, each test on it grown since the last
    is answered from the remembered ids (`index_stats()["redelivery_reused"]`);
    an edited list is read whole again."""
    adk_fastcompact.index_clear()
    text = [types.Part(text="x")]
    events = [_event(text, id=f"e{i}", timestamp=float(i)) for i in range(3)]
    before = adk_fastcompact.index_stats()["redelivery_reused"]
    for i in range(10):
        probe = _event(text, id=f"n{i}", timestamp=10.0 + i)
        assert _native.stored_again(events, probe) is False
        events.append(probe)
    assert _native.stored_again(events, events[-1].model_copy(deep=True)) is True
    assert adk_fastcompact.index_stats()["redelivery_reused"] - before == 9
    del events[4]
    assert _native.stored_again(events, events[4].model_copy(deep=True)) is True
    assert adk_fastcompact.index_stats()["redelivery_reused"] - before == 9
