"""`_native.deep_copy_model` against google-adk's own `deep_copy_model`.

google-adk's `utils._model_copy.deep_copy_model` (2.12+: `Session` and
`Event`'s `__deepcopy__`) is the oracle: every copy is compared with its
copy of the same original in value (`==`, `model_dump_json()`, field sets,
extra and private values, classes), in shape (which objects are shared
within the copy, cycles), in what the memo ends holding (the same keys, the
keep-alive list holding the same originals in the same order), and in that
nothing mutable is shared with the original. Where google-adk has no
`_model_copy` (before 2.12), the comparison is with pydantic's
`BaseModel.__deepcopy__`, which gives the same values and shape.
"""

from __future__ import annotations

import asyncio
import copy
import math
import sys
import threading
from typing import Any

import adk_fastcompact
import pytest
from adk_fastcompact import _copy, _native
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session
from google.genai import types
from hypothesis import given, settings
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from support.strategies import sessions

try:
    from google.adk.utils._model_copy import deep_copy_model as adk_copy
except ImportError:  # google-adk before 2.12: pydantic's copier is the oracle
    adk_copy = None

native_copy = _native.deep_copy_model


def oracle(model: Any, memo: dict[int, Any] | None = None) -> Any:
    """google-adk's copier, or pydantic's where google-adk has none."""
    if adk_copy is not None:
        return adk_copy(model, memo)
    return BaseModel.__deepcopy__(model, memo)


_ATOMIC = (type(None), bool, int, float, str, bytes)


def _is_model(obj: Any) -> bool:
    return isinstance(obj, BaseModel)


def _children(obj: Any) -> list[Any]:
    if type(obj) is list:
        return list(obj)
    if type(obj) is dict:
        return [x for kv in obj.items() for x in kv]
    if type(obj) in (set, frozenset, tuple):
        return sorted(obj, key=repr) if type(obj) is not tuple else list(obj)
    if _is_model(obj):
        private = getattr(obj, "__pydantic_private__", None)
        return [
            obj.__dict__,
            obj.__pydantic_extra__,
            obj.__pydantic_fields_set__,
            private,
        ]
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return [vars(obj)]
    return []


def same_shape(x: Any, y: Any, pairs: dict[int, Any] | None = None) -> dict[int, Any]:
    """Asserts that `x` and `y` are the same tree of the same classes and
    values, sharing objects (and closing cycles) at the same places: a
    bijection between their objects. Returns it (`id(x_obj) -> y_obj`)."""
    pairs = {} if pairs is None else pairs
    stack = [(x, y)]
    while stack:
        a, b = stack.pop()
        assert type(a) is type(b), (a, b)
        if type(a) in _ATOMIC:
            if type(a) is float and math.isnan(a):
                assert math.isnan(b)
            else:
                assert a == b, (a, b)
            continue
        if id(a) in pairs:
            assert pairs[id(a)] is b, ("shared differently", a, b)
            continue
        pairs[id(a)] = b
        ca, cb = _children(a), _children(b)
        assert len(ca) == len(cb), (a, b)
        stack.extend(zip(ca, cb, strict=True))
    # A bijection: no two objects of `x` map to one of `y`.
    assert len({id(v) for v in pairs.values()}) == len(pairs)
    return pairs


def nothing_mutable_shared(original: Any, copied: Any) -> None:
    """Walks both trees in parallel: no list, dict, set, model, model
    `__dict__` / fields set / extra / private, or foreign object with a
    `__dict__` is the same object in both."""
    seen: set[int] = set()
    stack = [(original, copied)]
    while stack:
        a, b = stack.pop()
        if type(a) in _ATOMIC or id(a) in seen:
            continue
        seen.add(id(a))
        if type(a) in (list, dict, set) or isinstance(a, (BaseModel, Custom, Plain)):
            assert a is not b, ("shared with the original", type(a), a)
        elif a is b:
            continue  # immutable, kept as is (an enum member, a tuple of atoms)
        stack.extend(zip(_children(a), _children(b), strict=True))


def _dump(model: Any) -> str:
    try:
        return model.model_dump_json()
    except Exception as error:  # the same failure on both sides
        return f"{type(error).__name__}: {error}"


def assert_same_copy(original: Any, *, cyclic: bool = False) -> tuple[Any, Any]:
    """Copies `original` with the oracle and natively (fresh memos) and
    asserts the copies and memos correspond (`==` and the JSON dump only
    for trees without cycles)."""
    memo_a: dict[int, Any] = {}
    memo_b: dict[int, Any] = {}
    a = oracle(original, memo_a)
    b = native_copy(original, memo_b)
    pairs = same_shape(a, b)
    if not cyclic:
        assert a == b
        if _is_model(a):
            assert _dump(a) == _dump(b)
    if _is_model(a):
        assert a.model_fields_set == b.model_fields_set
    nothing_mutable_shared(original, b)
    # The memo: the same originals recorded, their copies corresponding.
    # (Temporaries `copy.deepcopy` makes, such as a frozenset's item list,
    # are recorded too, at addresses of their own: compared by count and
    # class.)
    reachable = _reachable(original)
    keys_a = set(memo_a) - {id(memo_a)}
    keys_b = set(memo_b) - {id(memo_b)}
    if adk_copy is not None:
        assert keys_a & reachable == keys_b & reachable
        assert len(keys_a) == len(keys_b)
        # The same originals kept alive, in google-adk's order.
        ka, kb = memo_a[id(memo_a)], memo_b[id(memo_b)]
        assert len(ka) == len(kb)
        for p, q in zip(ka, kb, strict=True):
            assert p is q if id(p) in reachable else type(p) is type(q)
        for key in keys_a & reachable:
            va, vb = memo_a[key], memo_b[key]
            if type(va) not in _ATOMIC and id(va) in pairs:
                assert pairs[id(va)] is vb
    else:
        assert keys_b <= keys_a
    return a, b


def _reachable(root: Any) -> set[int]:
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if type(obj) in _ATOMIC or id(obj) in seen:
            continue
        seen.add(id(obj))
        stack.extend(_children(obj))
    return seen


def _session(events: list[Event], state: dict[str, Any] | None = None) -> Session:
    return Session(id="s", app_name="app", user_id="u", events=events, state=state or {})


def _text_event(text: str, **kw: Any) -> Event:
    return Event(
        author="model",
        invocation_id="inv",
        content=types.Content(role="model", parts=[types.Part(text=text)]),
        **kw,
    )


# -- generated and realistic sessions -------------------------------------------------


@settings(max_examples=60)
@given(sessions(max_events=30))
def test_generated_sessions_copy_like_google_adk(generated: Any) -> None:
    session = _session(list(generated.events), {"k": [1, {"x": 2.5}], "t": (1, [2])})
    assert_same_copy(session)
    for event in generated.events[:5]:
        assert_same_copy(event)


def test_a_realistic_bench_session_copies_like_google_adk() -> None:
    from adk_fastcompact._tooling.sessions import build_due_session

    assert_same_copy(_session(build_due_session(400, 3)))


@pytest.fixture(scope="module")
def traffic_session() -> Session:
    """The stored session of a real-traffic conversation (test_real_traffic's
    corpus), as google-adk's InMemorySessionService holds it."""
    from support.traffic_conversation import corpus_session

    return corpus_session("copy")  # type: ignore[no-any-return]


def test_the_real_traffic_corpus_copies_like_google_adk(traffic_session: Session) -> None:
    assert_same_copy(traffic_session)
    for event in traffic_session.events:
        assert_same_copy(event)


# -- user classes, foreign objects, sharing, memos, cycles -----------------------------


class MyEvent(Event):
    """A user subclass of Event, with an extra field and a private value."""

    note: list[str] = Field(default_factory=list)
    _cache: dict[str, Any] = PrivateAttr(default_factory=dict)


class Loose(BaseModel):
    """A model with extra values allowed."""

    model_config = ConfigDict(extra="allow")
    items: list[Any] = []
    _secret: Any = PrivateAttr()


class Custom:
    """A foreign object with its own `__deepcopy__`."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __deepcopy__(self, memo: dict[int, Any]) -> Custom:
        return Custom(copy.deepcopy(self.value, memo))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Custom) and other.value == self.value


class Plain:
    """A foreign object without `__deepcopy__` (copied by reduction)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Plain) and other.value == self.value


def test_user_subclasses_extra_private_and_fields_set_at_every_level() -> None:
    event = MyEvent(author="u", invocation_id="i", note=["a"])
    event._cache["k"] = [1, 2]
    loose = Loose(items=[1], extra_field={"deep": [1]})
    loose._secret = {"s": [3]}
    untouched = Loose()  # `_secret` left undefined: dropped from the copy
    event.custom_metadata = {"loose": loose, "untouched": untouched}
    a, b = assert_same_copy(event)
    assert b._cache == {"k": [1, 2]} and b._cache is not event._cache
    copied = b.custom_metadata["loose"]
    assert copied.__pydantic_extra__ == {"extra_field": {"deep": [1]}}
    assert copied._secret == {"s": [3]} and copied._secret is not loose._secret
    assert b.custom_metadata["untouched"].__pydantic_private__ == {}
    assert a.custom_metadata["untouched"].__pydantic_private__ == {}
    assert b.model_fields_set == event.model_fields_set
    assert b.model_fields_set is not event.model_fields_set
    assert_same_copy(_session([event, _text_event("x")]))


def test_foreign_objects_go_to_copy_deepcopy_with_the_same_memo() -> None:
    shared = [1, 2]
    custom = Custom(shared)
    plain = Plain({"p": shared})
    event = _text_event("x", custom_metadata={"c": custom, "p": plain, "s": shared})
    session = _session([event], {"custom": custom, "plain": plain, "tuple": (shared, 1)})
    _, b = assert_same_copy(session)
    got = b.events[0].custom_metadata
    assert got["c"] is b.state["custom"] and got["c"] is not custom
    # The list is copied once: through the foreign objects too.
    assert got["c"].value is got["s"] and got["p"].value["p"] is got["s"]
    assert b.state["tuple"][0] is got["s"]


def test_an_uncopyable_object_raises_what_google_adk_raises() -> None:
    session = _session([_text_event("x", custom_metadata={"lock": threading.Lock()})])
    with pytest.raises(TypeError) as theirs:
        oracle(session)
    with pytest.raises(TypeError) as ours:
        native_copy(session)
    assert str(ours.value) == str(theirs.value)
    in_state = _session([], {"lock": threading.RLock()})
    with pytest.raises(TypeError) as theirs:
        oracle(in_state)
    with pytest.raises(TypeError) as ours:
        native_copy(in_state)
    assert str(ours.value) == str(theirs.value)


def test_shared_sub_objects_stay_shared() -> None:
    shared = {"a": [1, 2]}
    events = [
        _text_event("x", custom_metadata={"one": shared, "two": shared}),
        _text_event("y", custom_metadata={"three": shared}),
    ]
    same_content = types.Content(role="user", parts=[types.Part(text="hi")])
    events.append(Event(author="user", invocation_id="i", content=same_content))
    events.append(Event(author="user", invocation_id="j", content=same_content))
    events.append(events[0])  # the same event twice
    _, b = assert_same_copy(_session(events, {"shared": shared}))
    one = b.events[0].custom_metadata["one"]
    assert one is b.events[0].custom_metadata["two"] is b.events[1].custom_metadata["three"]
    assert one is b.state["shared"] and one is not shared
    assert b.events[2].content is b.events[3].content
    assert b.events[4] is b.events[0]


def test_a_pre_filled_memo_is_honoured() -> None:
    shared = {"a": [1]}
    replacement = {"replaced": True}
    session = _session([_text_event("x", custom_metadata={"m": shared})], {"s": shared})

    def memo() -> dict[int, Any]:
        keep: list[Any] = ["already there"]
        m: dict[int, Any] = {id(shared): replacement}
        m[id(m)] = keep
        return m

    memo_a, memo_b = memo(), memo()
    a = oracle(session, memo_a)
    b = native_copy(session, memo_b)
    same_shape(a, b)
    assert b.state["s"] is replacement and b.events[0].custom_metadata["m"] is replacement
    assert memo_b[id(memo_b)][0] == "already there"
    if adk_copy is not None:
        assert [id(x) for x in memo_a[id(memo_a)]][1:] == [id(x) for x in memo_b[id(memo_b)]][1:]
    # As google-adk, the model handed in is copied again (not looked up in
    # the memo), and its new copy recorded.
    again_a, again_b = oracle(session, memo_a), native_copy(session, memo_b)
    assert again_a is not a and again_b is not b
    assert memo_a[id(session)] is again_a and memo_b[id(session)] is again_b
    assert again_b.state["s"] is replacement


def test_cycles_copy_as_cycles() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    looped: dict[str, Any] = {}
    looped["self"] = looped
    session = _session([_text_event("x", custom_metadata={"loop": loop})], {"d": looped})
    _, b = assert_same_copy(session, cyclic=True)
    copied = b.events[0].custom_metadata["loop"]
    assert copied[1] is copied and copied is not loop
    assert b.state["d"]["self"] is b.state["d"]


def test_a_model_containing_itself_copies_as_a_cycle() -> None:
    loose = Loose()
    loose.items.append(loose)
    loose.me = loose  # an extra value
    a, b = assert_same_copy(loose, cyclic=True)
    assert b.items[0] is b and b.me is b
    assert a.items[0] is a
    event = _text_event("x")
    event.custom_metadata = {"me": event}
    _, b = assert_same_copy(event, cyclic=True)
    assert b.custom_metadata["me"] is b


def test_atomic_types_are_kept_and_their_subclasses_copied() -> None:
    class Text(str):
        pass

    text = "a" * 100
    sub = Text("b")
    event = _text_event(text, custom_metadata={"s": sub, "b": b"x", "f": 1.5, "n": None})
    a, b = assert_same_copy(event)
    assert b.content.parts[0].text is text
    assert b.custom_metadata["s"] is not sub and b.custom_metadata["s"] == sub
    assert type(b.custom_metadata["s"]) is Text
    assert (a.custom_metadata["s"] is sub) == (b.custom_metadata["s"] is sub)


def test_sets_and_non_atomic_keys() -> None:
    event = _text_event("x", long_running_tool_ids={"a", "b", "c"})
    event.custom_metadata = {(1, 2): [1], frozenset({3}): {"k"}, "s": {(1, (2,))}}
    a, b = assert_same_copy(event)
    assert list(b.long_running_tool_ids) == list(a.long_running_tool_ids)
    assert b.long_running_tool_ids is not event.long_running_tool_ids


def test_deep_nesting_raises_recursion_error_like_google_adk() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(100_000):
        node["d"] = {}
        node = node["d"]
    session = _session([], {"deep": deep})
    with pytest.raises(RecursionError):
        oracle(session)
    with pytest.raises(RecursionError):
        native_copy(session)
    # A tree within the limit copies natively, whatever its depth.
    assert_same_copy(_session([], {"l": _nested(sys.getrecursionlimit() // 4)}))


def _nested(levels: int) -> list[Any]:
    """A list `levels` lists deep."""
    deep: list[Any] = []
    node = deep
    for _ in range(levels):
        node.append([])
        node = node[0]
    return deep


def _copied_on_a_thread(session: Session, stack_bytes: int, limit: int) -> dict[str, Any]:
    """Our copy (`ours`) and google-adk's (`theirs`) of `session`, made on a
    thread of `stack_bytes` stack with the recursion limit at `limit`; an
    exception goes to `error`."""
    result: dict[str, Any] = {}

    def run() -> None:
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(limit)
        try:
            result["ours"] = native_copy(session)
            result["theirs"] = oracle(session)
        except BaseException as error:  # reported by the callers' assertions
            result["error"] = error
        finally:
            sys.setrecursionlimit(old)

    threading.stack_size(stack_bytes)
    try:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(0)
    return result


def test_past_the_native_depth_the_rest_goes_to_copy_deepcopy() -> None:
    """With the recursion limit raised, a tree deeper than the native
    depth bound is copied (its deep part by `copy.deepcopy`), never
    overflowing the Rust stack."""
    session = _session([], {"deep": _nested(5_000)})
    result = _copied_on_a_thread(session, 256 * 1024 * 1024, 60_000)
    assert "error" not in result, result.get("error")
    same_shape(result["ours"], result["theirs"])
    nothing_mutable_shared(session, result["ours"])


@pytest.mark.skipif(
    sys.version_info < (3, 11), reason="Python calls Python on the C stack before 3.11"
)
def test_the_native_depth_bound_holds_on_a_small_stack() -> None:
    """A 50,000-level list copied on a 4 MB thread stack with the recursion
    limit raised: copied natively only down to the depth bound (unbounded,
    the native recursion would overflow that stack), the rest by
    `copy.deepcopy`, whose Python frames take no C stack on 3.11+."""
    session = _session([], {"deep": _nested(50_000)})
    result = _copied_on_a_thread(session, 4 * 1024 * 1024, 300_000)
    assert "error" not in result, result.get("error")
    same_shape(result["ours"], result["theirs"])
    nothing_mutable_shared(session, result["ours"])


# -- install() ----------------------------------------------------------------------


def _stored(service: InMemorySessionService) -> Session:
    return service.sessions["app"]["u"]["s"]


async def _service_with(events: list[Event]) -> InMemorySessionService:
    service = InMemorySessionService()
    session = await service.create_session(
        app_name="app", user_id="u", session_id="s", state={"k": [1]}
    )
    for event in events:
        await service.append_event(session, event)
    return service


def test_get_session_with_install_equals_google_adk_and_uninstall_restores() -> None:
    from adk_fastcompact._tooling.sessions import build_due_session

    service = asyncio.run(_service_with(build_due_session(200, 1)))
    before = {cls: cls.__dict__.get("__deepcopy__") for cls in (Session, Event)}
    plain = asyncio.run(service.get_session(app_name="app", user_id="u", session_id="s"))
    assert adk_fastcompact.install() is True
    try:
        if adk_copy is not None:
            assert Event.__dict__["__deepcopy__"] is _copy.deep_copy_model
        fast = asyncio.run(service.get_session(app_name="app", user_id="u", session_id="s"))
        same_shape(plain, fast)
        assert plain.model_dump_json() == fast.model_dump_json()
        nothing_mutable_shared(_stored(service), fast)
        # An Event copied on its own goes through the native copier too.
        event = _stored(service).events[3]
        copied = copy.deepcopy(event)
        same_shape(oracle(event), copied)
        assert event.model_copy(deep=True) == event
    finally:
        adk_fastcompact.uninstall()
    assert {cls: cls.__dict__.get("__deepcopy__") for cls in (Session, Event)} == before


def test_install_uses_the_native_copier_only_for_google_adk_s_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if adk_copy is None:
        # Before 2.12 the classes keep pydantic's copier (inherited).
        assert adk_fastcompact.install() is True
        assert "__deepcopy__" not in Event.__dict__
        return
    seen: list[Any] = []
    native = _native.deep_copy_model

    def counting(model: Any, memo: Any = None) -> Any:
        seen.append(type(model))
        return native(model, memo)

    monkeypatch.setattr(_native, "deep_copy_model", counting)
    service = asyncio.run(_service_with([_text_event("x")]))
    assert adk_fastcompact.install() is True
    try:
        asyncio.run(service.get_session(app_name="app", user_id="u", session_id="s"))
    finally:
        adk_fastcompact.uninstall()
    assert seen == [Session]

    # A user's own Event copier is kept, and still restored on uninstall.
    def mine(self: Event, memo: Any = None) -> Event:
        seen.append("mine")
        return adk_copy(self, memo)

    monkeypatch.setattr(Event, "__deepcopy__", mine)
    seen.clear()
    assert adk_fastcompact.install() is True
    try:
        assert Event.__dict__["__deepcopy__"] is mine
        fast = asyncio.run(service.get_session(app_name="app", user_id="u", session_id="s"))
        assert fast.events[0] == _stored(service).events[0]
    finally:
        adk_fastcompact.uninstall()
    assert seen == [Session, "mine"]
    assert Event.__dict__["__deepcopy__"] is mine


def test_event_actions_and_nested_models_copy_natively() -> None:
    actions = EventActions(state_delta={"a": [1]}, artifact_delta={"f": 1})
    event = _text_event("x", actions=actions)
    assert_same_copy(event)
    assert_same_copy(actions)
