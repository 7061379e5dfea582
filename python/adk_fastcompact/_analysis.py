"""`analyze_sessions`: google-adk's compaction decisions on many sessions at once."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from google.adk.apps.app import EventsCompactionConfig
from google.adk.events.event import Event
from google.adk.sessions.session import Session

from . import _native

PARALLELISM_ENV = "ADK_FASTCOMPACT_PARALLELISM"
"""Set to `false` (or `0`, `off`, `no`) to make `analyze_sessions` serial by
default, as `TOKENIZERS_PARALLELISM` does for tokenizers."""


def _parallel_default() -> bool:
    value = os.environ.get(PARALLELISM_ENV, "").strip().lower()
    return value not in ("false", "0", "off", "no")


def analyze_sessions(
    sessions: Iterable[Session | list[Event]],
    config: EventsCompactionConfig | None = None,
    *,
    parallel: bool | None = None,
) -> list[dict[str, Any]]:
    """What google-adk 2.13.0 decides on each session, for audits and offline use.

    Reading the events needs the interpreter and runs one session after the
    other; the decisions then run on all cores (rayon), the interpreter
    released.

    Args:
        sessions: Sessions, or their event lists.
        config: The app's compaction config; its `compaction_interval` and
            `overlap_size` give the sliding window (none without it).
        parallel: Analyse on all cores; default: yes, unless the environment
            variable `ADK_FASTCOMPACT_PARALLELISM` says `false`.

    Returns:
        Per session, in order, a dict: `live` (indices of the events that
        survive rewinds), `ranges` (`_get_compaction_ranges`: `(index,
        start, end)`), `prompt` (`_process_compaction_events` on the live
        events: an index per raw event, `("summary", index)` per summary of
        the compaction event at `index`; `prompt_declined` with the reason
        where google-adk's own order is undefined, a NaN sort key), `window`
        (indices of the events the sliding window would summarize now, or
        None). A session that cannot be read exactly gets `{"declined":
        reason}`: one that is neither a Session nor a plain `list` (the
        reason names it: "sessions[2] is None, not a Session or a plain
        list of Events"), or whose events are not plain google-adk Events,
        or hold a non-float timestamp, ...

    Raises:
        TypeError: `sessions` is not iterable, or `config` is not an
            `EventsCompactionConfig` (or None).
    """
    try:
        items = iter(sessions)
    except TypeError:
        raise TypeError(
            "analyze_sessions() takes an iterable of Sessions or lists of Events,"
            f" not {_described(sessions)}"
        ) from None
    if config is not None and not isinstance(config, EventsCompactionConfig):
        raise TypeError(
            f"config must be an EventsCompactionConfig or None, not {_described(config)}"
        )
    read = [_events(index, session) for index, session in enumerate(items)]
    interval = config.compaction_interval if config is not None else None
    overlap = config.overlap_size if config is not None and config.overlap_size else 0
    if parallel is None:
        parallel = _parallel_default()
    lists = [events for events in read if not isinstance(events, str)]
    done = iter(_native.analyze_sessions(lists, interval, overlap, parallel))
    return [{"declined": events} if isinstance(events, str) else next(done) for events in read]


def _described(value: object) -> str:
    """`None`, or `a <type name>` (`an int`)."""
    if value is None:
        return "None"
    name = type(value).__qualname__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _events(index: int, session: object) -> list[Event] | str:
    """The event list of `sessions[index]`, or why it has none (the native
    reading takes exactly a `list`)."""
    if isinstance(session, Session):
        events: object = session.events
        if type(events) is list:
            return events
        return f"sessions[{index}].events is {_described(events)}, not a plain list of Events"
    if type(session) is list:
        return session
    return f"sessions[{index}] is {_described(session)}, not a Session or a plain list of Events"
