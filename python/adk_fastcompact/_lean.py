"""Lean loading: a Runner turn loads only the events it reads.

`install(loading="lean")` makes the Runner's own loads (`run_async`,
`run_live`) lean; `install()` alone keeps full loading, and a run asks for
a lean load by passing `LeanSessionConfig()` as
`RunConfig(get_session_config=...)`, google-adk's own knob. Which events a
turn reads is `_native.lean_positions` (`core::lean::needed`); see
docs/lean-loading.md.

The Runner's hook (`hook`, on `Runner.run_async` and `Runner.run_live`)
hands the run a `LeanSessionConfig` filled with what the decision needs of
the run: the app's sliding window, the family's rules, the function-call
ids the new message answers and the invocation a resumed run continues. A
session service recognises the filled config: the in-memory service copies
only the needed events of its stored session (`_pending` names the config
while google-adk's `get_session` runs, and the session copy hook of
`_patch` picks the events, `picked`). Anything else (application code
calling `get_session`, `rewind_async`) passes no such config and loads the
whole session.

What cannot be loaded lean is loaded whole and counted by reason
(`loading_stats()`), each reason logged once per process.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncGenerator, Callable
from contextvars import ContextVar
from typing import Any

from google.adk.sessions.base_session_service import GetSessionConfig
from pydantic import PrivateAttr, model_validator

from . import _native

logger = logging.getLogger(__name__)

_loading = "full"
_stats: Counter[str] = Counter()
_logged: set[str] = set()


class LeanSessionConfig(GetSessionConfig):
    """A `GetSessionConfig` that loads only the events a Runner turn reads.

    Pass it as `RunConfig(get_session_config=LeanSessionConfig())` with
    `adk_fastcompact.install()` active: the run's session holds the
    compaction summaries that stand, every raw event the prompt shows, and
    what the Runner's other passes and the compaction after the turn read,
    in stored order (docs/lean-loading.md). Tools and callbacks that read
    `session.events` see that list; `session_service.get_session()` called
    without it returns the whole session. Without `install()` it is a plain
    `GetSessionConfig` and the whole session loads.
    """

    _window: tuple[int, int] | None = PrivateAttr(default=None)
    _rules: Any = PrivateAttr(default=None)
    _answering: tuple[str, ...] = PrivateAttr(default=())
    _underway: tuple[str, ...] = PrivateAttr(default=())
    _filled: bool = PrivateAttr(default=False)

    @model_validator(mode="after")
    def _no_cut(self) -> LeanSessionConfig:
        if self.num_recent_events is not None or self.after_timestamp is not None:
            raise ValueError(
                "LeanSessionConfig loads by what compaction leaves standing; "
                "num_recent_events and after_timestamp do not apply to it"
            )
        return self


def set_loading(loading: str, mode: str = "parity") -> None:
    """Sets what the Runner's loads are when a run passes no config (one of
    `_patch.LOADINGS`, which `install` checks). Exact mode loads whole
    sessions (said once in the log)."""
    global _loading
    _loading = loading
    if loading == "lean" and mode != "parity":
        _fell_back("exact mode loads whole sessions", count=False)


def loading() -> str:
    """The loading `install()` set ("full" when not installed)."""
    return _loading


def loading_stats(reset: bool = False) -> dict[str, int]:
    """Lean loads made (`"lean"`) and whole loads a lean run fell back to
    (`"full: <reason>"`), since the process started or the last reset."""
    stats = dict(_stats)
    if reset:
        _stats.clear()
    return stats


def _fell_back(reason: str, *, count: bool = True) -> None:
    if count:
        _stats[f"full: {reason}"] += 1
    if reason not in _logged:
        _logged.add(reason)
        logger.info("adk_fastcompact: a lean load fell back to the whole session: %s", reason)


def _answered_ids(message: Any) -> tuple[str, ...]:
    parts = getattr(message, "parts", None) or ()
    ids = []
    for part in parts:
        response = getattr(part, "function_response", None)
        if response is not None and isinstance(response.id, str) and response.id:
            ids.append(response.id)
    return tuple(ids)


def for_run(runner: Any, run_config: Any, new_message: Any, invocation_id: Any) -> Any:
    """The run config a run goes on with: `run_config` itself unless the run
    loads lean (lean loading installed and no config given, or a
    `LeanSessionConfig` given), then a copy carrying a filled one."""
    from . import _patch

    given = getattr(run_config, "get_session_config", None)
    if given is None:
        if _loading != "lean":
            return run_config
        given = LeanSessionConfig()
    elif not isinstance(given, LeanSessionConfig):
        return run_config
    config: LeanSessionConfig = given.model_copy()
    if _patch.installed() != "parity":
        _fell_back("exact mode")
        config = None  # type: ignore[assignment]
    else:
        compaction = getattr(getattr(runner, "app", None), "events_compaction_config", None)
        interval = getattr(compaction, "compaction_interval", None)
        overlap = getattr(compaction, "overlap_size", None) or 0
        if compaction is None:
            _fell_back("no compaction configured")
            config = None  # type: ignore[assignment]
        else:
            from . import _families

            config._window = (interval, overlap) if interval else None
            config._rules = _families.active().rules
            config._answering = _answered_ids(new_message)
            config._underway = (invocation_id,) if isinstance(invocation_id, str) else ()
            config._filled = True
    if run_config is None:
        from google.adk.agents.run_config import RunConfig

        run_config = RunConfig()
    return run_config.model_copy(update={"get_session_config": config})


#: The filled config of the in-memory load under way (set while google-adk's
#: `get_session` runs; taken by the first session copy it makes).
_pending: ContextVar[LeanSessionConfig | None] = ContextVar(
    "adk_fastcompact_lean_load", default=None
)


def picked(session: Any) -> Any:
    """The session to copy for the in-memory load under way: `session`
    itself, or a shallow copy holding only the events the turn reads."""
    config = _pending.get()
    if config is None:
        return session
    _pending.set(None)
    events = session.__dict__.get("events")
    kept = needed_events(events, config) if isinstance(events, list) else None
    if kept is None:
        return session
    if len(kept) == len(events):
        return session
    return session.model_copy(update={"events": kept})


def needed_events(events: list[Any], config: LeanSessionConfig) -> list[Any] | None:
    """The events of `events` (a stored session's, in the store's order) a
    run with the filled `config` reads, counted as a lean load; None (a
    whole load, counted as a fallback) when they cannot be read exactly."""
    window = config._window
    keep = _native.lean_positions(
        events,
        window[0] if window else None,
        window[1] if window else 0,
        config._rules,
        list(config._underway),
        list(config._answering),
    )
    if keep is None:
        _fell_back("events not read exactly")
        return None
    _stats["lean"] += 1
    return [events[i] for i in keep]


def _in_memory_get_session(original: Callable[..., Any]) -> Callable[..., Any]:
    """`InMemorySessionService.get_session`, whose copy is lean under a
    filled `LeanSessionConfig`."""

    async def get_session(
        self: Any,
        *,
        app_name: Any,
        user_id: Any,
        session_id: Any,
        config: Any = None,
    ) -> Any:
        if isinstance(config, LeanSessionConfig) and not config._filled:
            _fell_back("not filled by a Runner run (exact mode, or a direct call)")
        if isinstance(config, LeanSessionConfig) and config._filled:
            token = _pending.set(config)
            try:
                session = await original(
                    self,
                    app_name=app_name,
                    user_id=user_id,
                    session_id=session_id,
                    config=config,
                )
                if session is not None and _pending.get() is config:
                    # google-adk copied the session without a deep copy
                    # (its light-copy feature): the whole list.
                    _fell_back("the service made no deep copy")
                return session
            finally:
                _pending.reset(token)
        return await original(
            self, app_name=app_name, user_id=user_id, session_id=session_id, config=config
        )

    return get_session


def _run_async(original: Callable[..., Any]) -> Callable[..., Any]:
    """`Runner.run_async`, its run config made by `for_run`."""

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
            run_config=for_run(self, run_config, new_message, invocation_id),
            yield_user_message=yield_user_message,
            abort_signal=abort_signal,
        )
        try:
            async for event in inner:
                yield event
        finally:
            await inner.aclose()

    return run_async


def _run_live(original: Callable[..., Any]) -> Callable[..., Any]:
    """`Runner.run_live`, its run config made by `for_run`."""

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
            run_config=for_run(self, run_config, None, None),
            session=session,
        )
        try:
            async for event in inner:
                yield event
        finally:
            await inner.aclose()

    return run_live


def hook(mode: str) -> Callable[[], None]:
    """Wraps `Runner.run_async`, `Runner.run_live` (in exact mode around
    `_underway`'s wrappers), `InMemorySessionService.get_session` and
    `SqliteSessionService.get_session` where they take google-adk 2.13's
    parameters, under the replaced methods' names; returns what undoes it.
    (`DatabaseSessionService` is `_patch._hook_database`'s.)"""
    from google.adk.runners import Runner
    from google.adk.sessions.in_memory_session_service import InMemorySessionService

    from ._lean_sql import sqlite_targets

    del mode  # exact mode's runs are counted as whole loads by `for_run`
    return hook_methods(
        [
            (InMemorySessionService, "get_session", _in_memory_get_session),
            (Runner, "run_async", _run_async),
            (Runner, "run_live", _run_live),
            *sqlite_targets(),
        ]
    )


def hook_methods(
    targets: list[tuple[Any, str, Callable[[Callable[..., Any]], Callable[..., Any]]]],
) -> Callable[[], None]:
    """Sets `wrap(original)` as each `(owner, name, wrap)`'s method where it
    takes the original's parameters (else leaves it, logged: a lean run of
    it loads whole), under its names; returns what undoes it."""
    from ._patch import carry_names, hooked_as, same_parameters

    done: list[tuple[Any, str, Any, Any]] = []
    for owner, name, wrap in targets:
        original = owner.__dict__.get(name)
        if original is None:
            continue
        wrapper = wrap(original)
        if not same_parameters(wrapper, original):
            logger.info(
                "adk_fastcompact: %s.%s takes other parameters; lean loading leaves it alone",
                owner.__name__,
                name,
            )
            continue
        carry_names(wrapper, original)
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        setattr(owner, name, wrapper)
        hooked_as(owner, name, original, wrapper)
        done.append((owner, name, original, wrapper))

    def undo() -> None:
        for owner, name, original, wrapper in done:
            if owner.__dict__.get(name) is wrapper:
                setattr(owner, name, original)

    return undo
