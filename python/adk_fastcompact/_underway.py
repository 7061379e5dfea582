"""The invocations under way in this process, per session (exact mode).

An event is stamped when it is made, not when it is stored: a model reply
carries the time its call began, and is stored when the call ends. So an
event stored after a compaction can be stamped before it when the
invocation that made it was still under way while the compaction was
written. Exact mode writes `EventCompaction` bounds that end strictly below
the earliest timestamp such an event can carry (`ceiling`), so that plain
google-adk, which hides every raw event stamped inside them, hides none of
those (docs/exact-mode.md, "How plain google-adk reads a session written in
exact mode").

`install(mode="exact")` wraps `Runner.run_async` and `Runner.run_live`
(`hook`): each call is an invocation of one session (`app_name`,
`user_id`, `session_id`), entered here at its generator's first step with
the clock reading then (every event it makes is stamped at or after it)
and left when the generator finishes, fails, is cancelled or is closed
(a wrong call raises google-adk's `TypeError` at the call and enters
nothing). While the invocation's own code runs (and in the tasks it
starts), `_current` names its entry, so a compaction it makes does not count itself.

Another clock (another replica's, or a stamp the application sets) may
stamp an event stored after the compaction behind this process's clock:
the bounds end a margin further below (`clock_skew`, set by
`install(mode="exact", clock_skew=...)`; docs/exact-mode.md, "Clocks other
than the writer's").
"""

from __future__ import annotations

import functools
import math
import numbers
import threading
from collections.abc import AsyncGenerator, Callable
from contextvars import ContextVar
from typing import Any


class _Entry:
    """One invocation under way: its session's key and its start."""

    __slots__ = ("key", "start")

    def __init__(self, key: tuple[Any, Any, Any], start: float) -> None:
        self.key = key
        self.start = start


#: Seconds another clock may stamp an event stored after a compaction
#: behind this process's clock, unless `install` says otherwise (chosen from
#: measurement: docs/exact-mode.md, "Clocks other than the writer's").
DEFAULT_CLOCK_SKEW = 1.0

_skew = DEFAULT_CLOCK_SKEW
_lock = threading.Lock()
_running: dict[tuple[Any, Any, Any], list[_Entry]] = {}
_current: ContextVar[_Entry | None] = ContextVar("adk_fastcompact_invocation", default=None)


def _clock() -> float:
    # google-adk's clock (exact mode's family has it; the bench imports
    # this module on every family).
    from google.adk.platform import time as platform_time

    return platform_time.get_time()


def _begin(key: tuple[Any, Any, Any]) -> _Entry:
    entry = _Entry(key, _clock())
    with _lock:
        _running.setdefault(key, []).append(entry)
    return entry


def _end(entry: _Entry) -> None:
    with _lock:
        entries = _running.get(entry.key, [])
        if entry in entries:
            entries.remove(entry)
        if not entries:
            _running.pop(entry.key, None)


def ceiling(session: Any, *, own: bool = False) -> float:
    """The earliest timestamp an event of `session` stored from now on can
    carry: the clock's reading now (google-adk's own clock, which stamps
    events), or the start of another invocation of the session still under
    way, whichever is earlier. The calling invocation (its entry is
    `_current`) counts only with `own`: its code after this call makes its
    events from now on, unless it runs branches side by side (a reply is
    stamped when its call began)."""
    now = _clock()
    mine = None if own else _current.get()
    key = (session.app_name, session.user_id, session.id)
    with _lock:
        starts = [e.start for e in _running.get(key, ()) if e is not mine]
    return min(now, *starts) if starts else now


def clock_skew() -> float:
    """The margin, in seconds, the plain bounds keep below `ceiling` for
    events another clock stamps behind this process's."""
    return _skew


def checked_clock_skew(seconds: object) -> float:
    """`seconds` as a `clock_skew` (None: `DEFAULT_CLOCK_SKEW`).

    Raises:
      TypeError: `seconds` is not a real number (a bool is not).
      ValueError: `seconds` is not finite or is negative.
    """
    if seconds is None:
        return DEFAULT_CLOCK_SKEW
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
        raise TypeError(f"clock_skew must be a number of seconds, not {type(seconds).__name__}")
    value = float(seconds)
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"clock_skew must be finite and not negative, not {seconds!r}")
    return value + 0.0


def set_clock_skew(seconds: float) -> None:
    """Sets `clock_skew` (checked by `checked_clock_skew`)."""
    global _skew
    _skew = seconds


def running() -> int:
    """How many invocations are under way (for tests and diagnostics)."""
    with _lock:
        return sum(len(entries) for entries in _running.values())


async def _invocation(key: tuple[Any, Any, Any], inner: Any) -> AsyncGenerator[Any, None]:
    """The events of `inner` (an invocation's async generator, not started),
    the invocation entered as under way from its first step until it
    finishes, fails, is cancelled or is closed. Closing this generator
    before its first step enters nothing."""
    entry = _begin(key)
    try:
        while True:
            token = _current.set(entry)
            try:
                event = await inner.__anext__()
            except StopAsyncIteration:
                return
            finally:
                _current.reset(token)
            yield event
    finally:
        # Closing it early runs its remaining code (google-adk's
        # post-invocation compaction among it) as this invocation's.
        token = _current.set(entry)
        try:
            await inner.aclose()
        finally:
            _current.reset(token)
            _end(entry)


def _key(runner: Any, user_id: Any, session_id: Any, session: Any = None) -> tuple[Any, Any, Any]:
    """The session an invocation of `runner` runs on: `(app_name, user_id,
    session_id)`, the ids taken from `session` where they are not given."""
    app_name = getattr(runner, "app_name", None)
    if session is None:
        return (app_name, user_id, session_id)
    return (
        app_name,
        user_id or getattr(session, "user_id", None),
        session_id or getattr(session, "id", None),
    )


def _run_async(original: Callable[..., Any]) -> Callable[..., Any]:
    """`Runner.run_async` tracked. An async generator function with
    google-adk's parameters: a wrong call raises google-adk's `TypeError` at
    the call (where an async generator function binds its arguments), before
    anything is entered."""

    async def run_async(
        self: Any,
        *,
        user_id: Any,
        session_id: Any,
        invocation_id: Any = None,
        new_message: Any = None,
        state_delta: Any = None,
        run_config: Any = None,
        yield_user_message: Any = False,
        abort_signal: Any = None,
    ) -> AsyncGenerator[Any, None]:
        inner = original(
            self,
            user_id=user_id,
            session_id=session_id,
            invocation_id=invocation_id,
            new_message=new_message,
            state_delta=state_delta,
            run_config=run_config,
            yield_user_message=yield_user_message,
            abort_signal=abort_signal,
        )
        events = _invocation(_key(self, user_id, session_id), inner)
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()

    return run_async


def _run_live(original: Callable[..., Any]) -> Callable[..., Any]:
    """`Runner.run_live` tracked, as `_run_async` tracks `run_async`."""

    async def run_live(
        self: Any,
        *,
        user_id: Any = None,
        session_id: Any = None,
        live_request_queue: Any,
        run_config: Any = None,
        session: Any = None,
    ) -> AsyncGenerator[Any, None]:
        inner = original(
            self,
            user_id=user_id,
            session_id=session_id,
            live_request_queue=live_request_queue,
            run_config=run_config,
            session=session,
        )
        events = _invocation(_key(self, user_id, session_id, session), inner)
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()

    return run_live


def _tracked(original: Callable[..., Any]) -> Callable[..., Any]:
    """`original` (a Runner method returning an async generator of one
    invocation's events, keyed by `user_id` and `session_id` or a
    `session`) tracked, for parameters `_run_async` and `_run_live` do not
    take: a plain function, which calls `original` at the call (so that a
    wrong call raises its `TypeError` there) and returns its events through
    `_invocation` (`inspect.isasyncgenfunction` no longer says True)."""

    @functools.wraps(original)
    def tracked(self: Any, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        inner = original(self, *args, **kwargs)
        key = _key(self, kwargs.get("user_id"), kwargs.get("session_id"), kwargs.get("session"))
        return _invocation(key, inner)

    return tracked


#: The Runner methods that run one invocation of a session, and what
#: tracks each with google-adk's parameters.
_ENTRY_POINTS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "run_async": _run_async,
    "run_live": _run_live,
}


def hook() -> Callable[[], None]:
    """Wraps `Runner.run_async` and `Runner.run_live` so that each call is
    entered as an invocation under way for as long as its generator runs,
    under the replaced method's names (`_patch.carry_names`); returns what
    undoes it."""
    from google.adk.runners import Runner

    from ._patch import carry_names, hooked_as, same_parameters

    done: list[tuple[str, Any, Any]] = []
    for name, track in _ENTRY_POINTS.items():
        original = Runner.__dict__.get(name)
        if original is None:
            continue
        wrapper = track(original)
        if same_parameters(wrapper, original):
            carry_names(wrapper, original)
            wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        else:
            wrapper = _tracked(original)
        setattr(Runner, name, wrapper)
        hooked_as(Runner, name, original, wrapper)
        done.append((name, original, wrapper))

    def undo() -> None:
        for name, original, wrapper in done:
            if Runner.__dict__.get(name) is wrapper:
                setattr(Runner, name, original)

    return undo
