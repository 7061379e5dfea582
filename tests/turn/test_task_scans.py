"""The native drop-ins for the per-turn task scans (`_scans`) against
google-adk's own functions.

`runners._find_active_task_scope` and
`_llm_agent_wrapper._find_unresolved_task_delegations` run over every live
event of a session on every turn. Both drop-ins are compared with google-adk's
functions on crafted sessions (every pair of edge events, and seeded longer
mixes), on generated sessions with finish_task responses, aborts and
delegations added, with and without `install()` (which changes the
`_apply_rewinds` both call). The native side must answer alone (no decline)
for google-adk's own models, so a wrong native answer cannot hide behind the
fallback; foreign values must decline and then give google-adk's answer or
its exception.
"""

from __future__ import annotations

import importlib
import itertools
import random
from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any

import adk_fastcompact
import pytest
from adk_fastcompact import _native, _scans
from google.adk.agents.llm_agent import LlmAgent
from google.adk.events._abort_events import _build_abort_events
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.sessions.session import Session
from google.adk.tools.agent_tool import _TaskAgentTool
from google.adk.tools.function_tool import FunctionTool
from google.genai import types
from hypothesis import given, settings
from hypothesis import strategies as st

from support.strategies import AGENTS, SCOPES, TOOLS, sessions

RUNNERS = "google.adk.runners"
WRAPPER = "google.adk.workflow._llm_agent_wrapper"
REWINDS = "google.adk.events._rewind_events"

runners = importlib.import_module(RUNNERS)
FINISH = runners.FINISH_TASK_TOOL_NAME
SUCCESS = runners.FINISH_TASK_SUCCESS_RESULT
FAILURE = runners.FINISH_TASK_ERROR_RESULT

pytestmark = pytest.mark.skipif(
    not (
        _scans.active()["_find_active_task_scope"]
        and _scans.active()["_find_unresolved_task_delegations"]
    ),
    reason="the installed google-adk's task scans are not the code the drop-ins reproduce",
)


@pytest.fixture(scope="module")
def scope() -> tuple[Any, Any]:
    """(google-adk's `_find_active_task_scope`, the drop-in)."""
    return _scans.pairs()["_find_active_task_scope"]


@pytest.fixture(scope="module")
def delegations() -> tuple[Any, Any]:
    """(google-adk's `_find_unresolved_task_delegations`, the drop-in)."""
    return _scans.pairs()["_find_unresolved_task_delegations"]


@pytest.fixture(params=["google-adk", "installed"])
def rewinds(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs a test with google-adk's `_apply_rewinds` and with the native one
    `install()` binds (both functions call whichever is bound)."""
    if request.param == "installed":
        adk_fastcompact.install()
    yield request.param
    adk_fastcompact.uninstall()


def _echo(text: str) -> str:
    return text


# Built as google-adk's own tests build them.
TASK = _TaskAgentTool(LlmAgent(name="specialist", mode="task", model="unused"))
REVIEWER = _TaskAgentTool(LlmAgent(name="reviewer", mode="task", model="unused"))
ECHO = FunctionTool(_echo)
TOOLS_DICT: dict[str, Any] = {"specialist": TASK, "reviewer": REVIEWER, "echo": ECHO}


def _answer(function: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        return ("value", function(*args, **kwargs))
    except Exception as error:
        return ("raised", (type(error), str(error)))


def _same(got: tuple[str, Any], want: tuple[str, Any]) -> bool:
    """Equal answers made of the very same objects (the tuple's strings, the
    list's FunctionCalls, in order)."""
    if got[0] != want[0] or got[0] == "raised":
        return got == want
    if want[1] is None or got[1] is None:
        return got[1] is want[1]
    return type(got[1]) is type(want[1]) and [id(x) for x in got[1]] == [id(x) for x in want[1]]


def _session(events: list[Any]) -> Session:
    return Session.model_construct(id="s", app_name="app", user_id="u", events=events)


def _event(
    *parts: types.Part,
    author: str = "root",
    inv: str = "i1",
    scope: str | None = None,
    role: str = "model",
    **fields: Any,
) -> Event:
    content = types.Content(role=role, parts=list(parts)) if parts else None
    return Event(author=author, invocation_id=inv, isolation_scope=scope, content=content, **fields)


def _finish(response: dict[str, Any] | None, name: str = FINISH) -> types.Part:
    return types.Part(
        function_response=types.FunctionResponse(id="fin", name=name, response=response)
    )


def _fc(name: str | None, call_id: str | None) -> types.Part:
    return types.Part(function_call=types.FunctionCall(id=call_id, name=name, args={}))


def _fr(name: str, call_id: str | None) -> types.Part:
    return types.Part(
        function_response=types.FunctionResponse(id=call_id, name=name, response={"r": 1})
    )


def _compaction(scope: str) -> Event:
    return _event(
        scope=scope,
        inv="i3",
        actions=EventActions(
            compaction=EventCompaction(
                start_timestamp=1.0,
                end_timestamp=2.0,
                compacted_content=types.Content(role="model", parts=[types.Part(text="sum")]),
            )
        ),
    )


def _scope_pool() -> list[Event]:
    """Edge events of every kind `_find_active_task_scope` tells apart."""
    text = types.Part(text="hi")
    dangling = _event(_fc("specialist", "d1"), scope="s1", inv="i2")
    pool = [
        _event(text, scope="s1"),
        _event(text, scope="s2", inv="i2"),
        _event(text),
        _event(text, scope="", inv="i3"),
        _event(scope="s3", inv="i3"),
        Event(author="root", invocation_id="i3", isolation_scope="s3", content=types.Content()),
        _event(_finish({"result": SUCCESS}), scope="s1", role="user"),
        _event(_finish({"result": FAILURE}), scope="s2", inv="i2", role="user"),
        _event(_finish({"error": "bad arguments"}), scope="s1", role="user"),
        _event(_finish({"result": SUCCESS + " "}), scope="s2", inv="i2"),
        _event(_finish(None), scope="s1"),
        _event(_finish({}), scope="s2"),
        _event(_finish({"result": 1}), scope="s1"),
        _event(_finish({"result": None, "error": "x"}), scope="s2"),
        _event(_finish({"result": [SUCCESS]}), scope="s1"),
        _event(_finish({"result": SUCCESS}, name="other"), scope="s2"),
        # The first finish_task response decides, whatever follows.
        _event(_finish({"error": "x"}), _finish({"result": SUCCESS}), scope="s1"),
        _event(_fr("echo", "e1"), text, _finish({"result": SUCCESS}), scope="s2", inv="i2"),
        _event(_finish({"result": SUCCESS}), inv="i2"),
        *_build_abort_events([dangling], invocation_id="i2", root_agent_name="root", branch=None),
        *_build_abort_events([], invocation_id="i1", root_agent_name="root", branch=None),
        _compaction("s3"),
        Event(
            author="user",
            invocation_id="i4",
            actions=EventActions(rewind_before_invocation_id="i2"),
        ),
        _event(text, scope="s3", inv="i4"),
        Event.model_construct(**{**_event(text, scope="s4").__dict__, "invocation_id": None}),
        Event.model_construct(**{**_event(text, scope="s2").__dict__, "actions": None}),
    ]
    assert all(e.error_code is None for e in pool[:19])
    assert any(e.error_code for e in pool)
    return pool


def _sequences(pool: list[Any], *, pairs: bool = True, mixes: int = 400) -> Iterator[list[Any]]:
    """Every sequence of up to two pool events, then seeded longer mixes
    (a few of them longer than the readers' chunks)."""
    yield []
    if pairs:
        for n in (1, 2):
            for seq in itertools.product(pool, repeat=n):
                yield list(seq)
    rng = random.Random(7)
    for _ in range(mixes):
        yield [rng.choice(pool) for _ in range(rng.randint(3, 9))]
    # Sessions of several of the readers' chunks.
    for _ in range(mixes // 40):
        yield [rng.choice(pool) for _ in range(rng.randint(30, 150))]


def assert_same_scopes(scope: tuple[Any, Any], lists: Any, *, declines: bool = False) -> int:
    """Compares both functions on a session per list; asserts the native
    side declined nothing (or, with `declines`, every call). Returns how
    many sessions had an active scope."""
    original, native = scope
    _native.decline_counts(reset=True)
    calls = found = 0
    for events in lists:
        session = _session(events)
        want = _answer(original, session)
        got = _answer(native, session)
        assert _same(got, want), (events, got, want)
        if want[0] == "value" and want[1] is not None:
            assert all(a is b for a, b in zip(got[1], want[1], strict=True))
            found += 1
        calls += 1
    declined = sum(_native.decline_counts(reset=True).values())
    assert declined == (calls if declines else 0)
    return found


def test_the_drop_ins_reproduce_the_pinned_code() -> None:
    active = _scans.active()
    assert active["_find_active_task_scope"] is True
    assert active["_find_unresolved_task_delegations"] is True


def test_edge_sessions_get_google_adks_task_scope(scope: tuple[Any, Any], rewinds: str) -> None:
    sequences = list(_sequences(_scope_pool()))
    found = assert_same_scopes(scope, sequences)
    # Both answers come up plenty (a check on the check).
    assert 0.1 * len(sequences) < found < 0.9 * len(sequences)


def test_task_scope_branches(scope: tuple[Any, Any]) -> None:
    """A few sessions whose answer is known, each a branch of the passes."""
    original, native = scope
    text = types.Part(text="hi")
    s1 = _event(text, scope="s1", inv="i1")
    s2 = _event(text, scope="s2", inv="i2")
    closed_s2 = _event(_finish({"result": SUCCESS}), scope="s2", inv="i2")
    retry_s2 = _event(_finish({"error": "bad"}), scope="s2", inv="i2")
    abort_i2 = _build_abort_events([], invocation_id="i2", root_agent_name="root", branch=None)
    cases: list[tuple[list[Event], tuple[str, str] | None]] = [
        ([], None),
        ([_event(text)], None),
        ([s1, s2], ("s2", "i2")),
        ([s1, s2, closed_s2], ("s1", "i1")),
        ([s1, closed_s2, s2], ("s1", "i1")),
        ([s1, s2, retry_s2], ("s2", "i2")),
        ([s1, s2, *abort_i2], ("s1", "i1")),
        ([s1, _compaction("s3")], ("s1", "i1")),
        # The rewind removes the rewound invocation's events.
        (
            [s1, s2, Event(author="u", actions=EventActions(rewind_before_invocation_id="i2"))],
            ("s1", "i1"),
        ),
    ]
    for events, expected in cases:
        assert original(_session(events)) == expected
        assert native(_session(events)) == expected


# -- delegations ------------------------------------------------------------

OWNERS = ("root", "helper", "user", "nobody")
WANTED = (None, "s1", "s2", "")


def _delegation_pool() -> list[Event]:
    """Edge events of every kind `_find_unresolved_task_delegations` tells apart."""
    text = types.Part(text="hi")
    both = types.Part(
        function_call=types.FunctionCall(id="c9", name="specialist"),
        function_response=types.FunctionResponse(id="c1", name="specialist", response={}),
    )
    return [
        _event(_fc("specialist", "c1")),
        _event(_fc("specialist", "c1"), scope="s1"),
        _event(_fc("reviewer", "c2"), author="helper", scope="s2"),
        _event(_fc("echo", "c3")),
        _event(_fc("missing", "c4"), scope="s1"),
        _event(_fc("specialist", "")),
        _event(_fc("specialist", None)),
        _event(_fc(None, "c5")),
        _event(text, _fc("specialist", "c6"), _fc("reviewer", "c7"), scope="s1"),
        _event(_fc("specialist", "c8"), author="user", role="user", inv="i2"),
        _event(_fc("reviewer", "c2"), author="root", inv="i2"),
        _event(_fr("specialist", "c1"), author="user", role="user"),
        _event(_fr("specialist", "c6"), role="user", scope="s2"),
        _event(_fr("reviewer", "c2"), author="helper", role="user"),
        _event(_fr("echo", ""), _fr("echo", None), author="user", role="user"),
        _event(both, scope="s1"),
        _event(text),
        _event(),
        Event(author="root", invocation_id="i1", content=types.Content(role="model", parts=[])),
        Event(author="root", invocation_id="i1", content=types.Content(role="model")),
        Event(
            author="user",
            invocation_id="i3",
            actions=EventActions(rewind_before_invocation_id="i2"),
        ),
    ]


def assert_same_delegations(
    delegations: tuple[Any, Any],
    lists: Any,
    *,
    owners: tuple[Any, ...] = OWNERS,
    wanted: tuple[Any, ...] = WANTED,
    tools: Any = None,
    declines: bool = False,
) -> int:
    """Compares both functions on every session, owner and wanted scope;
    asserts the native side declined nothing (or, with `declines`, every
    call). Returns how many answers were non-empty."""
    original, native = delegations
    tools = TOOLS_DICT if tools is None else tools
    _native.decline_counts(reset=True)
    calls = found = 0
    for events in lists:
        session = _session(events)
        for owner, isolation_scope in itertools.product(owners, wanted):
            kwargs = {"owner": owner, "tools_dict": tools, "isolation_scope": isolation_scope}
            want = _answer(original, session, **kwargs)
            got = _answer(native, session, **kwargs)
            assert _same(got, want), (events, owner, isolation_scope, got, want)
            found += want[0] == "value" and bool(want[1])
            calls += 1
    declined = sum(_native.decline_counts(reset=True).values())
    assert declined == (calls if declines else 0)
    return found


def test_edge_sessions_get_google_adks_delegations(
    delegations: tuple[Any, Any], rewinds: str
) -> None:
    sequences = list(_sequences(_delegation_pool(), mixes=300))
    found = assert_same_delegations(delegations, sequences)
    assert 0.05 * len(sequences) * 16 < found < 0.9 * len(sequences) * 16


def test_delegation_branches(delegations: tuple[Any, Any]) -> None:
    """A few sessions whose answer is known, each a branch of the scan."""
    original, native = delegations
    first = _event(_fc("specialist", "c1"))
    again = _event(_fc("specialist", "c1"), scope="s1")
    other = _event(_fc("reviewer", "c2"))
    answer = _event(_fr("reviewer", "c2"), author="user", role="user")
    session = _session([first, other, again])
    calls = [e.get_function_calls()[0] for e in (first, other, again)]
    for function in (original, native):
        # A reused id keeps its first place and takes the later call.
        assert function(session, "root", TOOLS_DICT) == [calls[2], calls[1]]
        assert function(session, "root", TOOLS_DICT)[0] is calls[2]
        assert function(session, "root", TOOLS_DICT, "s1") == [calls[2]]
        assert function(session, "helper", TOOLS_DICT) == []
        assert function(_session([first, other, answer]), "root", TOOLS_DICT) == [calls[0]]
        assert function(session, "root", {"specialist": ECHO, "reviewer": REVIEWER}) == [calls[1]]


class _Recording(Mapping[str, Any]):
    """A tools mapping that records every `get` (google-adk asks it per
    call name, and the drop-in must ask the same names in the same order)."""

    def __init__(self, tools: dict[str, Any], fail_on: str | None = None) -> None:
        self._tools = tools
        self._fail_on = fail_on
        self.asked: list[Any] = []

    def __getitem__(self, key: str) -> Any:
        return self._tools[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, key: Any, default: Any = None) -> Any:
        self.asked.append(key)
        if key == self._fail_on:
            raise LookupError(f"no tool {key}")
        return self._tools.get(key, default)


class _TaskDict(dict):  # type: ignore[type-arg]
    """A dict whose `get` answers every name with the task tool."""

    def get(self, key: Any, default: Any = None) -> Any:
        return TASK


def test_tools_dict_is_asked_what_google_adk_asks(delegations: tuple[Any, Any]) -> None:
    original, native = delegations
    pool = _delegation_pool()
    _native.decline_counts(reset=True)
    for events in _sequences(pool, pairs=False, mixes=200):
        session = _session(events)
        for owner, isolation_scope in itertools.product(OWNERS[:3], WANTED[:3]):
            theirs, ours = _Recording(TOOLS_DICT), _Recording(TOOLS_DICT)
            want = original(session, owner, theirs, isolation_scope)
            got = native(session, owner, ours, isolation_scope)
            assert _same(("value", got), ("value", want))
            assert ours.asked == theirs.asked
        for tools in (_TaskDict(), _TaskDict(TOOLS_DICT)):
            want = original(session, "root", tools)
            assert _same(("value", native(session, "root", tools)), ("value", want))
    assert sum(_native.decline_counts(reset=True).values()) == 0


def test_an_error_from_tools_dict_is_google_adks(delegations: tuple[Any, Any]) -> None:
    original, native = delegations
    session = _session(_delegation_pool())
    theirs, ours = _Recording(TOOLS_DICT, "echo"), _Recording(TOOLS_DICT, "echo")
    _native.decline_counts(reset=True)
    assert _answer(native, session, "root", ours) == _answer(original, session, "root", theirs)
    assert ours.asked == theirs.asked and ours.asked[-1] == "echo"
    assert sum(_native.decline_counts(reset=True).values()) == 0
    for tools in ({"specialist": 5}, object(), None):
        assert _answer(native, session, "root", tools) == _answer(original, session, "root", tools)


# -- generated sessions -----------------------------------------------------

KINDS = ("success", "failure", "error-key", "abort", "delegate", "resolve", "scoped")


@st.composite
def task_sessions(draw: Any) -> list[Event]:
    """A generated session with finish_task responses, aborts, delegations
    and their responses added at drawn places."""
    events = list(draw(sessions(max_events=40)).events)
    invocations = sorted({e.invocation_id for e in events}) or ["inv-1"]
    adds = draw(
        st.lists(
            st.tuples(
                st.integers(0, len(events)),
                st.sampled_from(KINDS),
                st.sampled_from((*SCOPES, None)),
                st.sampled_from(invocations),
                st.sampled_from((*AGENTS, "user")),
                st.sampled_from(TOOLS),
            ),
            max_size=8,
        )
    )
    for at, kind, scope, inv, author, tool in sorted(adds, key=lambda a: -a[0]):
        made: list[Event]
        if kind == "abort":
            made = _build_abort_events(
                events, invocation_id=inv, root_agent_name="root", branch=None
            )
        elif kind == "delegate":
            made = [_event(_fc(tool, f"t{at}"), author=author, inv=inv, scope=scope)]
        elif kind == "resolve":
            made = [_event(_fr(tool, f"t{at // 2 * 2}"), author=author, inv=inv, role="user")]
        elif kind == "scoped":
            made = [_event(types.Part(text="x"), author=author, inv=inv, scope=scope)]
        else:
            response = {
                "success": {"result": SUCCESS},
                "failure": {"result": FAILURE},
                "error-key": {"error": "bad"},
            }[kind]
            made = [_event(_finish(response), author=author, inv=inv, scope=scope, role="user")]
        events[at:at] = made
    return events


@settings(max_examples=60, deadline=None)
@given(task_sessions())
def test_generated_sessions_get_google_adks_answers(
    scope: tuple[Any, Any], delegations: tuple[Any, Any], events: list[Event]
) -> None:
    assert_same_scopes(scope, [events, events[::2], events[len(events) // 2 :]])
    tools = {"search": TASK, "lookup": ECHO}
    assert_same_delegations(
        delegations,
        [events],
        owners=(*AGENTS, "user"),
        wanted=(None, SCOPES[0]),
        tools=tools,
    )


def test_a_realistic_bench_session_gets_google_adks_answers(
    scope: tuple[Any, Any], delegations: tuple[Any, Any]
) -> None:
    from adk_fastcompact._tooling.sessions import build_due_session

    events = build_due_session(300, 3)
    assert_same_scopes(scope, [events])
    owners = tuple(sorted({e.author for e in events}))
    assert_same_delegations(delegations, [events], owners=owners, wanted=(None,))


# -- foreign values ---------------------------------------------------------


class _Foreign:
    """A part google-adk's code reads only by attribute."""

    function_call = types.FunctionCall(id="c1", name="specialist")
    function_response = types.FunctionResponse(name=FINISH, response={"result": SUCCESS})


class _Result(str):
    """A result `str` subclass (its `==` is google-adk's business)."""


class _Equal:
    """A result equal to everything."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


class _Sub(Event):
    """An Event subclass the core does not read like an Event."""

    def get_function_calls(self) -> list[types.FunctionCall]:
        return []


def _constructed(event: Event, **fields: Any) -> Event:
    return Event.model_construct(**{**event.__dict__, **fields})


def _with_parts(event: Event, parts: Any) -> Event:
    return _constructed(event, content=types.Content.model_construct(role="model", parts=parts))


def _with_response(response: Any) -> Event:
    part = types.Part.model_construct(
        function_response=types.FunctionResponse.model_construct(
            id="fin", name=FINISH, response=response
        )
    )
    return _with_parts(_event(scope="s1"), [part])


def test_foreign_values_decline_to_google_adks_task_scope(scope: tuple[Any, Any]) -> None:
    text = types.Part(text="hi")
    base = _event(text, scope="s1")
    odd = [
        _constructed(base, error_code=5),
        _constructed(base, isolation_scope=7),
        _constructed(base, invocation_id=["i"]),
        _with_parts(base, [_Foreign()]),
        _with_parts(base, [{"text": "d"}]),
        _with_parts(base, ("not", "a list")),
        _with_response([("result", SUCCESS)]),
        _with_response(_Result(SUCCESS)),
        _with_response({"result": _Result(SUCCESS)}),
        _with_response({"result": _Equal()}),
        _with_response({"result": b"Task completed."}),
        _constructed(
            base, actions=SimpleNamespace(compaction=True, rewind_before_invocation_id=None)
        ),
        _Sub(author="root", invocation_id="i1", isolation_scope="s1"),
    ]
    assert_same_scopes(scope, [[e] for e in odd], declines=True)
    assert_same_scopes(scope, [[base, e] for e in odd], declines=True)


def test_foreign_values_decline_to_google_adks_delegations(
    delegations: tuple[Any, Any],
) -> None:
    call = _event(_fc("specialist", "c1"), scope="s1")
    odd = [
        [_constructed(call, author=5)],
        [_with_parts(call, [_Foreign()])],
        [_with_parts(call, [{"function_call": None}])],
        [_with_parts(call, [types.Part.model_construct(function_call="specialist")])],
        [_with_parts(call, [_fc(None, "c2").model_copy(update={"function_call": None}), 5])],
        [
            _with_parts(
                call, [types.Part(function_call=types.FunctionCall.model_construct(id=7, name="x"))]
            )
        ],
        [
            _with_parts(
                call, [types.Part(function_call=types.FunctionCall.model_construct(id="c", name=3))]
            )
        ],
        [_Sub(author="root", content=types.Content(role="model", parts=[_fc("specialist", "c")]))],
    ]
    assert_same_delegations(delegations, odd, owners=("root",), wanted=(None, "s1"), declines=True)
    # An event's scope is read only when a scope is wanted.
    scoped = [[_constructed(call, isolation_scope=3)]]
    assert_same_delegations(delegations, scoped, owners=("root",), wanted=("s1",), declines=True)
    assert_same_delegations(delegations, scoped, owners=("root",), wanted=(None,))
    # Arguments of other kinds.
    assert_same_delegations(
        delegations, [[call]], owners=(5, b"root"), wanted=(None,), declines=True
    )
    assert_same_delegations(
        delegations, [[call]], owners=("root",), wanted=(3, b"s1"), declines=True
    )


def test_a_decline_does_not_ask_tools_dict_twice(delegations: tuple[Any, Any]) -> None:
    """Every event is read before tools_dict is asked: a decline late in the
    session leaves google-adk's function the only one asking."""
    original, native = delegations
    events = [*_delegation_pool(), _constructed(_event(_fc("specialist", "z")), author=5)]
    theirs, ours = _Recording(TOOLS_DICT), _Recording(TOOLS_DICT)
    _native.decline_counts(reset=True)
    assert _same(
        ("value", native(_session(events), "root", ours)),
        ("value", original(_session(events), "root", theirs)),
    )
    assert sum(_native.decline_counts(reset=True).values()) == 1
    assert ours.asked == theirs.asked and ours.asked


def test_a_session_without_events_raises_google_adks_error(
    scope: tuple[Any, Any], delegations: tuple[Any, Any]
) -> None:
    for bad in (object(), None):
        assert _answer(scope[1], bad) == _answer(scope[0], bad)
        assert _answer(delegations[1], bad, "root", {}) == _answer(delegations[0], bad, "root", {})


# -- binding ----------------------------------------------------------------


def test_install_binds_the_drop_ins_where_google_adk_calls_them(
    scope: tuple[Any, Any], delegations: tuple[Any, Any]
) -> None:
    wrapper = importlib.import_module(WRAPPER)
    adk_fastcompact.uninstall()
    assert runners._find_active_task_scope is scope[0]
    assert wrapper._find_unresolved_task_delegations is delegations[0]
    adk_fastcompact.install()
    try:
        assert runners._find_active_task_scope is scope[1]
        assert wrapper._find_unresolved_task_delegations is delegations[1]
        assert scope[1].original is scope[0] and delegations[1].original is delegations[0]
    finally:
        adk_fastcompact.uninstall()
    assert runners._find_active_task_scope is scope[0]
    assert wrapper._find_unresolved_task_delegations is delegations[0]


def test_apply_rewinds_is_the_one_bound_at_call_time(
    scope: tuple[Any, Any], delegations: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each drop-in calls `_apply_rewinds` where google-adk's function looks
    it up: the runners module's global, and the rewind module's attribute
    (imported inside the function)."""
    rewind_module = importlib.import_module(REWINDS)
    seen: list[str] = []
    hidden = _event(_fc("specialist", "h1"), scope="s9")

    def ours(where: str, real: Any) -> Any:
        def _apply_rewinds(events: list[Event]) -> list[Event]:
            seen.append(where)
            return [*real(events), hidden]

        return _apply_rewinds

    monkeypatch.setattr(runners, "_apply_rewinds", ours("runners", runners._apply_rewinds))
    monkeypatch.setattr(
        rewind_module, "_apply_rewinds", ours("rewinds", rewind_module._apply_rewinds)
    )
    session = _session([_event(types.Part(text="hi"))])
    assert scope[1](session) == scope[0](session) == ("s9", "i1")
    assert seen == ["runners", "runners"]
    seen.clear()
    call = hidden.get_function_calls()[0]
    assert delegations[1](session, "root", TOOLS_DICT) == [call]
    assert delegations[0](session, "root", TOOLS_DICT)[0] is call
    assert seen == ["rewinds", "rewinds"]


@pytest.mark.parametrize(
    ("module", "name", "drop_in"),
    [
        ("google.adk.events._abort_events", "_is_abort_event", "_find_active_task_scope"),
        (RUNNERS, "_find_active_task_scope", "_find_active_task_scope"),
        (WRAPPER, "_find_unresolved_task_delegations", "_find_unresolved_task_delegations"),
    ],
)
def test_a_changed_fingerprint_is_not_bound(
    monkeypatch: pytest.MonkeyPatch, module: str, name: str, drop_in: str
) -> None:
    from adk_fastcompact import _fingerprint

    real = _fingerprint.fingerprints

    def changed(where: str, roots: Any) -> Any:
        prints = real(where, roots)
        if where == module and prints is not None and name in prints:
            prints = {**prints, name: "0" * 16}
        return prints

    monkeypatch.setattr(_fingerprint, "fingerprints", changed)
    monkeypatch.setattr(_scans, "_verdicts", {})
    assert _scans.active()[drop_in] is False
    assert drop_in not in _scans.pairs()
    others = {n for n in _scans.active() if n != drop_in}
    assert others <= set(_scans.pairs())
    assert adk_fastcompact.install()
    try:
        bound = getattr(importlib.import_module(_scans_module(drop_in)), drop_in)
        assert not isinstance(bound, (_native.TaskScope, _native.TaskDelegations))
    finally:
        adk_fastcompact.uninstall()


def _scans_module(name: str) -> str:
    return next(d.module for d in _scans.DROP_INS if d.name == name)
