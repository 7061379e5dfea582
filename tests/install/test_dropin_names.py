"""Every binding `install()` makes answers to google-adk's names: the
replacements of `_patch`, the native drop-ins of `_scans` and the hooks
(`Session.__deepcopy__`, `Event.__deepcopy__`, the session services'
loads, exact mode's `Runner.run_async` / `run_live`) carry the replaced
function's `__name__`, `__qualname__`, `__module__` and `__doc__`, are the
same kind of function, and a wrong call raises google-adk's own
`TypeError`, word for word, at the call.

The bindings are read from what `install()` records (`_patch._patched`,
`_scans.bound`, `_patch.hooked`), never from a list kept here, so a
drop-in or hook added later is checked too."""

from __future__ import annotations

import importlib
import inspect
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import adk_fastcompact as fc
import pytest
from adk_fastcompact import _patch, _scans

MODES = ["parity", pytest.param("exact", marks=pytest.mark.adk_2_13("exact mode"))]

#: What a drop-in carries of the function it replaces.
NAMES = ("__name__", "__qualname__", "__module__", "__doc__")

#: Wrong calls: (positional arguments, keyword arguments).
WRONG_CALLS: tuple[tuple[tuple[Any, ...], dict[str, Any]], ...] = (
    ((), {}),  # missing arguments
    ((), {"no_such_argument": 1}),  # unexpected keyword
    ((None,), {"no_such_argument": 1}),
    (tuple(range(9)), {}),  # too many positional arguments
)


def _bound(holder: Any, attr: str) -> Any:
    """What `holder` binds at `attr` now (a class's own attribute, as it
    stores it: a method is its plain function)."""
    return vars(holder)[attr] if isinstance(holder, type) else getattr(holder, attr)


def _where(holder: Any, attr: str) -> str:
    owner = (
        f"{holder.__module__}.{holder.__name__}" if isinstance(holder, type) else holder.__name__
    )
    return f"{owner}.{attr}"


def _hooks() -> list[tuple[str, Any, Any]]:
    """`(where, what install() set, what it replaced)` of every hook
    `install()` recorded in `_patch.hooked` (methods it set on google-adk's
    and pydantic's classes, a class it set in a module), each checked to
    be still in place."""
    found = []
    for owner, attr, original, replacement in _patch.hooked:
        held = getattr(owner, attr)
        # A method reads as its function, a classmethod as its binding; a
        # hook may wrap another of install()'s (exact mode's run_async:
        # lean loading's around the invocations under way), which it names
        # as `__wrapped__`.
        chain = [held]
        while hasattr(chain[-1], "__wrapped__") and len(chain) < 8:
            chain.append(chain[-1].__wrapped__)
        assert any(h is replacement or h == replacement for h in chain), _where(owner, attr)
        found.append((_where(owner, attr), replacement, original))
    return found


def _callables(found: list[tuple[str, Any, Any]]) -> list[tuple[str, Any, Any]]:
    """The bindings and hooks that are functions (a class stands in for
    google-adk's class, whose calls are its constructor's)."""
    return [
        (where, bound, original)
        for where, bound, original in found
        if callable(bound) and not isinstance(bound, type)
    ]


@pytest.fixture(params=MODES)
def bindings(request: pytest.FixtureRequest) -> Iterator[list[tuple[str, Any, Any]]]:
    """`(where, bound object, google-adk's function)` of every binding and
    hook `install(mode)` made."""
    assert fc.install(request.param) is True
    records = [*_patch._patched, *_scans.bound]
    found = [(_where(holder, attr), _bound(holder, attr), orig) for holder, attr, orig in records]
    found += _hooks()
    assert found, "install() recorded no binding"
    assert any(where.endswith("._should_include_event_in_context") for where, _, _ in found)
    assert any(where.endswith("._find_active_task_scope") for where, _, _ in found)
    assert any(where.endswith("._find_unresolved_task_delegations") for where, _, _ in found)
    assert any(where.endswith("Session.__deepcopy__") for where, _, _ in found)
    assert any(where.endswith("DatabaseSessionService.get_session") for where, _, _ in found)
    if request.param == "exact":
        assert any(where.endswith("Runner.run_async") for where, _, _ in found)
    yield found
    fc.uninstall()
    assert _patch.hooked == []


def _error(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The message of the `TypeError` `fn(*args, **kwargs)` raises (before
    any coroutine or generator starts), or what it did instead."""
    try:
        result = fn(*args, **kwargs)
    except TypeError as error:
        return str(error)
    if inspect.iscoroutine(result):
        result.close()
    return f"no TypeError: {type(result).__name__}"


def test_every_binding_carries_the_replaced_names(bindings: list[tuple[str, Any, Any]]) -> None:
    wrong = [
        (where, name, getattr(bound, name, "<missing>"), getattr(original, name))
        for where, bound, original in bindings
        for name in NAMES
        if getattr(bound, name, "<missing>") != getattr(original, name)
    ]
    assert wrong == []


def test_every_binding_reads_as_the_replaced_signature(
    bindings: list[tuple[str, Any, Any]],
) -> None:
    def shape(fn: Any) -> list[tuple[str, Any, Any]]:
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    wrong = [(where,) for where, bound, original in bindings if shape(bound) != shape(original)]
    assert wrong == []


def test_every_binding_is_the_replaced_kind_of_function(
    bindings: list[tuple[str, Any, Any]],
) -> None:
    """A coroutine function stays one, an async generator function too
    (code that picks how to call a callable asks `inspect`)."""
    kinds = (inspect.iscoroutinefunction, inspect.isasyncgenfunction, inspect.isclass)
    wrong = [
        (where, kind.__name__)
        for where, bound, original in bindings
        for kind in kinds
        if kind(bound) != kind(original)
    ]
    assert wrong == []


def test_a_wrong_call_raises_google_adks_type_error(
    bindings: list[tuple[str, Any, Any]],
) -> None:
    wrong = []
    for where, bound, original in _callables(bindings):
        params = inspect.signature(original).parameters
        # A value for the first parameter given twice.
        repeated = ((None,), {next(iter(params)): None}) if params else ((), {})
        for args, kwargs in (*WRONG_CALLS, repeated):
            ours, theirs = _error(bound, args, kwargs), _error(original, args, kwargs)
            if ours != theirs:
                wrong.append((where, args, kwargs, ours, theirs))
    assert wrong == []


def _function(fn: Any) -> Any:
    """A bound method's function (a classmethod's binding is made anew at
    every attribute read), anything else itself."""
    return getattr(fn, "__func__", fn)


def test_every_binding_pickles_by_its_name(
    bindings: list[tuple[str, Any, Any]],
) -> None:
    # `__module__` and `__qualname__` together say where the object is
    # found, as they do for google-adk's function. A hook that replaced a
    # function held under another name (a class's `__deepcopy__` is
    # google-adk's `deep_copy_model`, a classmethod pydantic's, the
    # session service's `Event` google-adk's) names the function it
    # replaced, as `functools.wraps` would: pickle finds that one there, and
    # refuses to pickle the hook by it.
    for where, bound, original in bindings:
        found: Any = importlib.import_module(bound.__module__)
        for part in bound.__qualname__.split("."):
            found = getattr(found, part)
        if _function(found) is _function(original) is not _function(bound):
            continue
        # A hook another of install()'s wraps (exact mode's run_async under
        # lean loading's) is not the object its name finds; the outer one is.
        wrapped = getattr(found, "__wrapped__", None)
        if wrapped is not None and found is not bound and wrapped is bound:
            continue
        assert pickle.loads(pickle.dumps(bound)) is bound, where


def _event(text: str, *, author: str = "model", branch: str | None = None) -> Any:
    from google.adk.events.event import Event
    from google.genai import types

    content = types.Content(role="model", parts=[types.Part(text=text)])
    return Event(author=author, invocation_id="i", branch=branch, content=content)


def _session() -> Any:
    from google.adk.sessions.session import Session

    events = [_event("hi"), _event("there", author="user", branch="root")]
    return Session(id="s", app_name="a", user_id="u", events=events)


def test_the_native_drop_ins_answer_every_form_of_a_correct_call() -> None:
    """A correct call binds as Python binds it to google-adk's function,
    whether its arguments come by position or by keyword, and is answered
    natively (no decline)."""
    from adk_fastcompact import _native

    made = _scans.pairs()
    event = _event("hi", branch="root.a")
    calls: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {
        "_should_include_event_in_context": [
            (("root", event), {}),
            (("root", event, None), {"node_path": None, "include_thoughts": True}),
            ((), {"event": event, "current_branch": "root"}),
            (("other",), {"event": event, "isolation_scope": None}),
            ((None, event), {"include_thoughts": None}),
        ],
        "_find_active_task_scope": [((_session(),), {}), ((), {"session": _session()})],
        "_find_unresolved_task_delegations": [
            ((_session(), "model", {}), {}),
            ((_session(), "model", {}, None), {}),
            ((_session(),), {"tools_dict": {}, "owner": "model"}),
            ((), {"isolation_scope": "s", "owner": "x", "tools_dict": {}, "session": _session()}),
        ],
    }
    for name, forms in calls.items():
        original, drop_in = made[name]
        assert isinstance(
            drop_in, (_native.ContextFilter, _native.TaskScope, _native.TaskDelegations)
        )
        for args, kwargs in forms:
            _native.decline_counts(reset=True)
            assert drop_in(*args, **kwargs) == original(*args, **kwargs), (name, args, kwargs)
            assert _native.decline_counts() == {}, (name, args, kwargs)


def test_a_native_drop_in_refuses_a_function_of_other_parameters() -> None:
    """A drop-in binds calls by google-adk's parameters: made for a function
    that takes others, it raises instead of binding calls its own way."""
    from adk_fastcompact import _native

    def _find_unresolved_task_delegations(session: Any, owner: Any, tools: Any) -> Any:
        raise AssertionError("never called")

    with pytest.raises(
        TypeError, match=r"not the parameters \(session, owner, tools_dict, isolation_scope\)"
    ):
        _native.TaskDelegations(_find_unresolved_task_delegations, "x", "y")
