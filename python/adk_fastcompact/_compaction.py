"""Rust-backed drop-ins for google-adk's compaction entry points.

`run_compaction_for_sliding_window` and
`run_compaction_for_token_threshold_config` keep google-adk 2.13.0's control
flow step for step: the same early returns, the same summarizer input in the
same order, the same telemetry span (google-adk's own
`_summarize_events_with_trace`), the same appended or yielded event. What
moves to Rust is the selection over the whole session: rewinds, isolation
scope, the window or the token-threshold candidates, the function-call
pairing trim and the observed prompt token count, computed in one pass.

The Rust selection is a pure function of `session.events` and the config, so
it is computed before anything with side effects runs; when Rust declines the
input (see `_native`), the whole call is handed to google-adk's own function.
google-adk helpers that still run in Python (the "worth compacting" check,
the token estimate, the summarizer) are looked up on their module at call
time, so they pick up any patch.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import logging
from collections.abc import AsyncGenerator, Callable
from contextvars import ContextVar
from typing import Any

from google.adk.apps import compaction as _adk
from google.adk.events.event import Event
from google.adk.platform import time as _platform_time
from google.genai import types

from . import _families, _native, _reference, _summaries

# The installed google-adk's family profile (see `_families.Profile`).
_PROFILE = _families.active()

_selected: ContextVar[Any] = ContextVar("adk_fastcompact_selected", default=None)
"""The handle (`_native.Selected`) of the window selection whose live list
google-adk is about to price with `_prompt_chars_saved`, while it does: the
list's events need not be read again."""

# The serialized size of google-adk's weightless summary content.
_EMPTY_SUMMARY_SIZE = len(
    types.Content(role="model", parts=[]).model_dump_json(exclude_none=True, fallback=str)
)

# google-adk's own logger for these messages, so log filters keep working.
logger = logging.getLogger("google_adk." + _adk.__name__)


def _is_int(value: object) -> bool:
    return type(value) is int


def _draw_ids(count: int) -> None:
    """Draws `count` ids from google-adk's id provider, as its code would.

    google-adk builds throw-away Events while pricing a compaction, and each
    draws an id. With a custom provider (a counter, say) skipping those draws
    would shift every later id, so they are drawn; with the default provider
    (random UUIDs, no state anyone can observe) they are skipped.
    """
    if _summaries.ids_unobservable():
        return
    for _ in range(count):
        Event.new_id()


def _read_clock() -> None:
    """Reads google-adk's clock once, as building a timestamp-less Event does.

    Skipped under the default provider (`time.time`), where a read is
    unobservable; a custom provider (a fake clock, say) sees the same reads.
    """
    if _platform_time._time_provider_context_var.get() is not _platform_time._default_time_provider:
        _platform_time.get_time()


def _worth_compacting(pricing: Any) -> bool:
    """google-adk's `_is_range_worth_compacting`, from Rust's presence diff.

    google-adk prices the range with a weightless summary Event (drawing two
    ids from the id provider), filters and serializes the whole history with
    and without it, and compares the saving with the size of the latest
    summary. Rust found which items the weightless summary removes and adds;
    only those are measured here, and the ids google-adk draws and the clock
    reads it makes on the way are made too (see `_draw_ids`, `_read_clock`).
    """
    removed, added, weightless_added, previous, materialized = pricing
    # google-adk's weightless summary draws its invocation_id, reads the
    # clock for its default timestamp, draws its own id; then one id per
    # summary it materializes while filtering the history twice.
    _draw_ids(1)
    _read_clock()
    _draw_ids(1 + materialized)
    removable = sum(map(_content_size, removed)) - sum(map(_content_size, added))
    if weightless_added:
        removable -= _EMPTY_SUMMARY_SIZE
    return removable > _content_size(previous)


async def _summarize(
    session: Any,
    config: Any,
    events: list[Event],
    events_to_compact: list[Event],
    trigger: str,
    handle: Any,
) -> Event | None:
    """google-adk's `_summarize_events_with_trace`, with the selection's
    handle in scope for the `_prompt_chars_saved` it computes on `events`."""
    return await summarize_with(
        _selected, handle, session, config, events, events_to_compact, trigger
    )


async def summarize_with(
    var: ContextVar[Any],
    value: Any,
    session: Any,
    config: Any,
    events: list[Event],
    events_to_compact: list[Event],
    trigger: str,
) -> Event | None:
    """google-adk's `_summarize_events_with_trace` with `var` set to `value`
    while it runs (what our `_prompt_chars_saved` reads)."""
    # Before 2.12 google-adk's takes no history (it prices nothing).
    history: dict[str, Any] = {"events": events} if _PROFILE.priced else {}
    token = var.set(value)
    try:
        return await _adk._summarize_events_with_trace(
            session=session,
            config=config,
            **history,
            events_to_compact=events_to_compact,
            trigger=trigger,
        )
    finally:
        var.reset(token)


async def _sliding_window(
    app: Any, session: Any, session_service: Any, skip_token_compaction: bool = False
) -> AsyncGenerator[Event, None]:
    done = await _sliding_event(app, session, session_service, skip_token_compaction)
    if done is None:
        original = _reference.original("run_compaction_for_sliding_window")
        skip = {"skip_token_compaction": True} if skip_token_compaction else {}
        async for event in original(app, session, session_service, **skip):
            yield event
        return
    summarized, compaction_event = done
    if summarized:
        logger.debug("Event compactor finished.")
    if compaction_event:
        yield compaction_event


async def _sliding_appending(
    app: Any, session: Any, session_service: Any, skip_token_compaction: bool = False
) -> None:
    """google-adk 1.34-2.4's sliding window, a coroutine that appends the
    summary itself."""
    done = await _sliding_event(app, session, session_service, skip_token_compaction)
    if done is None:
        original = _reference.original("run_compaction_for_sliding_window")
        skip = {"skip_token_compaction": True} if skip_token_compaction else {}
        return await original(app, session, session_service, **skip)
    summarized, compaction_event = done
    if compaction_event:
        await session_service.append_event(session=session, event=compaction_event)
    if summarized:
        logger.debug("Event compactor finished.")
    return None


async def _sliding_event(
    app: Any, session: Any, session_service: Any, skip_token_compaction: bool
) -> tuple[bool, Event | None] | None:
    """google-adk's sliding window up to its summary: `(summarized, event)`,
    where `summarized` says the summarizer ran; None when Rust declined the
    session (the caller runs google-adk's own)."""
    config = app.events_compaction_config
    sliding = config is not None and _adk._has_sliding_window_config(config)
    interval = config.compaction_interval if sliding else 1
    overlap = config.overlap_size if sliding else 0
    selected = None
    if _is_int(interval) and _is_int(overlap):
        selected = _native.sliding_window(
            session.events,
            interval,
            overlap,
            rules=_PROFILE.rules,
        )
    if selected is None:
        return None
    events, events_to_compact, pricing, handle = selected
    nothing = (False, None)
    if not events:
        return nothing
    if config is None:
        return nothing

    if not skip_token_compaction and _adk._has_token_threshold_config(config):
        token_compacted = await _adk._run_compaction_for_token_threshold(
            app, session, session_service
        )
        if token_compacted:
            return nothing

    if not sliding:
        return nothing
    if not events_to_compact:
        return nothing
    if _PROFILE.priced and not _worth_compacting(pricing):
        return nothing
    if app.root_agent is None:
        return nothing
    _adk._ensure_compaction_summarizer(config=config, agent=app.root_agent)
    if config.summarizer is None:
        return nothing

    compaction_event = await _summarize(
        session, config, events, events_to_compact, "sliding_window", handle
    )
    return True, compaction_event


async def _token_threshold(
    *,
    config: Any,
    session: Any,
    session_service: Any,
    agent: Any,
    agent_name: str,
    current_branch: str | None,
    isolation_scope: str | None = None,
) -> bool:
    scoped = _PROFILE.scoped
    # Where google-adk reads no scope, none is passed on.
    scope: dict[str, Any] = {"isolation_scope": isolation_scope} if scoped else {}
    if not _adk._has_token_threshold_config(config):
        return False
    if config is None:
        return False
    if config.token_threshold is None or config.event_retention_size is None:
        return False

    selected = None
    if _is_int(config.event_retention_size):
        selected = _native.token_threshold_selection(
            session.events,
            isolation_scope,
            config.event_retention_size,
            agent_name,
            rules=_PROFILE.rules,
        )
    if selected is None:
        original = _reference.original("run_compaction_for_token_threshold_config")
        return await original(
            config=config,
            session=session,
            session_service=session_service,
            agent=agent,
            agent_name=agent_name,
            current_branch=current_branch,
            **scope,
        )
    rewound_events, events, prompt_token_count, events_to_compact, seed_from, pricing, handle = (
        selected
    )

    if prompt_token_count is None:
        prompt_token_count = _adk._estimate_prompt_token_count(
            events=rewound_events,
            current_branch=current_branch,
            agent_name=agent_name,
            **scope,
        )
    if prompt_token_count is None or prompt_token_count < config.token_threshold:
        return False

    if not events_to_compact:
        return False
    if seed_from is not None:
        events_to_compact = [seed_event(seed_from), *events_to_compact]

    if _PROFILE.priced and not _worth_compacting(pricing):
        return False

    _adk._ensure_compaction_summarizer(config=config, agent=agent)
    if config.summarizer is None:
        return False

    compaction_event = await _summarize(
        session, config, events, events_to_compact, "token_threshold", handle
    )
    if compaction_event:
        if scoped:
            compaction_event.isolation_scope = isolation_scope
        await session_service.append_event(session=session, event=compaction_event)
        logger.debug("Token-threshold event compactor finished.")
        return True
    return False


def _entry_point(
    name: str, parameters: str, returns: str, run: Callable[..., Any], doc: str
) -> Callable[..., Any]:
    """google-adk's entry point `name` in one family's form: a function with
    google-adk's parameter list (`parameters`, as its `def` writes them) and
    return annotation, handing every argument by keyword to `run`; an async
    generator that yields what `run` yields when `run` is one, else a
    coroutine function returning what `run` returns.

    CPython checks a call's arguments against the function's code object, so
    each form is compiled from its parameter list (as `dataclasses` compiles
    `__init__`): a wrong call raises the very `TypeError` google-adk's
    function raises, and `inspect.signature` reads google-adk's parameters.
    """
    assert globals()[run.__name__] is run, run
    declared = ast.parse(f"def _({parameters}): pass").body[0]
    assert isinstance(declared, ast.FunctionDef)
    arguments = declared.args
    names = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
    call = f"{run.__name__}({', '.join(f'{n}={n}' for n in names)})"
    if inspect.isasyncgenfunction(run):
        body = f"    async for event in {call}:\n        yield event\n"
    else:
        body = f"    return await {call}\n"
    source = f"async def {name}({parameters}) -> {returns}:\n{body}"
    filename = f"<adk_fastcompact entry point {name}>"
    # compile() inherits this module's `from __future__ import annotations`:
    # the annotations stay strings, as in the module's own functions.
    code = compile(source, filename, "exec")
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {}
    exec(code, globals(), namespace)
    fn: Callable[..., Any] = namespace[name]
    fn.__doc__ = doc
    return fn


# google-adk's parameter lists of its entry points, by the releases that
# have them (`_patch` binds the form of the installed family's profile).
_SLIDING = "app: Any, session: Any, session_service: Any"
_SKIPPABLE = f"{_SLIDING}, *, skip_token_compaction: bool = False"
_TOKEN = (
    "*, config: Any, session: Any, session_service: Any, agent: Any, "
    "agent_name: str = '', current_branch: str | None = None"
)
_SCOPED_TOKEN = f"{_TOKEN}, isolation_scope: str | None = None"

run_compaction_for_sliding_window = _entry_point(
    "run_compaction_for_sliding_window",
    _SLIDING,
    "AsyncGenerator[Event, None]",
    _sliding_window,
    "Same as `google.adk.apps.compaction._run_compaction_for_sliding_window`.",
)
run_compaction_for_sliding_window_skippable = _entry_point(
    "run_compaction_for_sliding_window_skippable",
    _SKIPPABLE,
    "AsyncGenerator[Event, None]",
    _sliding_window,
    """Same as google-adk 2.10-2.11's `_run_compaction_for_sliding_window`,
    whose caller may skip the token-threshold pass.""",
)
run_compaction_for_sliding_window_appending = _entry_point(
    "run_compaction_for_sliding_window_appending",
    _SKIPPABLE,
    "None",
    _sliding_appending,
    """Same as google-adk 1.34-2.4's `_run_compaction_for_sliding_window`, a
    coroutine that appends the summary itself.""",
)
run_compaction_for_token_threshold_config = _entry_point(
    "run_compaction_for_token_threshold_config",
    _SCOPED_TOKEN,
    "bool",
    _token_threshold,
    "Same as `google.adk.apps.compaction._run_compaction_for_token_threshold_config`.",
)
run_compaction_for_token_threshold_config_unscoped = _entry_point(
    "run_compaction_for_token_threshold_config_unscoped",
    _TOKEN,
    "bool",
    _token_threshold,
    """Same as google-adk 2.12's `_run_compaction_for_token_threshold_config`
    (no isolation scope: every event counts and is compacted).""",
)


def seed_event(compaction_event: Event) -> Event:
    """The rolling-summary seed of a compaction event, built as google-adk
    builds it (two ids drawn from the id provider, in this order)."""
    compaction = compaction_event.actions.compaction
    scope: dict[str, Any] = (
        {"isolation_scope": compaction_event.isolation_scope} if _PROFILE.scoped else {}
    )
    return Event(
        timestamp=compaction.start_timestamp,  # type: ignore[union-attr]
        author="model",
        content=compaction.compacted_content,  # type: ignore[union-attr]
        branch=compaction_event.branch,
        **scope,
        invocation_id=Event.new_id(),
    )


def _content_size(content: Any) -> int:
    # google-adk's `_serialized_size` measure of one request content: worked
    # out natively for a content of text parts, else serialized.
    size = _native.content_size(content)
    if size is not None:
        return size
    return len(content.model_dump_json(exclude_none=True, fallback=str))


def prompt_chars_saved(*, events: list[Event], compaction_event: Event) -> int:
    """Same as `google.adk.apps.compaction._prompt_chars_saved`.

    google-adk filters the history with and without the compaction and
    serializes both in full; the items the two share have equal sizes, so
    Rust finds the items whose presence changes and only those are measured.
    """
    delta = _native.prompt_chars_delta(events, compaction_event, _selected.get())
    if delta is None:
        return _reference.original("prompt_chars_saved")(
            events=events, compaction_event=compaction_event
        )
    removed, added, materialized = delta
    _draw_ids(materialized)
    return sum(map(_content_size, removed)) - sum(map(_content_size, added))
