"""Exact mode's drop-ins for google-adk's compaction entry points.

`install(mode="exact")` binds these in place of google-adk's
`_process_compaction_events`, `_run_compaction_for_sliding_window`,
`_run_compaction_for_token_threshold_config` and `_prompt_chars_saved`.
They keep google-adk's control flow (the same configuration checks, the
same summarizer, google-adk's own telemetry span, the sliding-window event
yielded to the runner, the token-threshold event appended here) and change
what is decided:

- coverage: an event is covered by a compaction when its timestamp is in
  the interval, it was stored before the compaction event, and the
  compaction's record names it as no hole (`docs/exact-mode.md`);
- candidates: the raw events no compaction covers, so a retained tail, a
  stepped-past pending call or a late append is offered again;
- pairing: events linked by a call id are summarized whole or kept raw;
- tail retention rolls every surviving summary into the new one;
- each compaction is written with its record, computed from what the
  summarizer was handed (by position, i.e. identity) and from the session as
  stored right before the append, re-read to find events another invocation
  appended meanwhile.

The Rust core (`_native.exact_*`) makes every decision; this module calls
the summarizer, reads the store and sizes the contents it prices.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncGenerator, Sequence
from contextvars import ContextVar
from typing import Any

from google.adk.apps import compaction as _adk
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.genai.types import Content

from . import _compaction, _exact, _native, _reference, _summaries, _underway
from ._compaction import _is_int

logger = logging.getLogger("adk_fastcompact")

_removable: ContextVar[int | None] = ContextVar("adk_fastcompact_removable", default=None)
"""While the summarizer of an exact-mode compaction runs: the request
characters its window removes (the raw events it covers and the summaries
it supersedes), for the `prompt_chars_saved` google-adk's span reports."""


# google-adk's `_serialized_size` measure of one request content.
_size = _compaction._content_size


def _summary_size(event: Event) -> int:
    return _size(event.actions.compaction.compacted_content)  # type: ignore[union-attr]


def process_compaction_events(events: list[Event], agent_name: str = "") -> list[Event]:
    """`_process_compaction_events` in exact mode: the raw events no surviving
    compaction covers and the surviving summaries (attributed to
    `agent_name`, or `"model"`), in google-adk's order."""
    author = agent_name or "model"

    def summary(event: Event) -> Event:
        return _summaries.summary_event(event, author)

    # As in parity mode: summaries are handed out again only while building
    # one draws no id anyone can observe.
    reuse = _summaries.ids_unobservable()
    out = _native.exact_prompt(events, summary, author if reuse else None)
    if out is None:
        # Declined (counted and logged by the core): google-adk's reading.
        return _reference.original("process_compaction_events")(events, agent_name)
    prompt, problems = out
    _exact.report(problems)
    return prompt


def prompt_chars_saved(*, events: list[Event], compaction_event: Event) -> int:
    """`_prompt_chars_saved` in exact mode: what the window's events and
    superseded summaries weigh, less the new summary. Outside an exact-mode
    compaction, google-adk's own."""
    removable = _removable.get()
    compaction = compaction_event.actions.compaction if compaction_event.actions else None
    if removable is None or compaction is None:
        return _reference.original("prompt_chars_saved")(
            events=events, compaction_event=compaction_event
        )
    return removable - _size(compaction.compacted_content)


# Timestamps SQL stores keep to the microsecond: a re-read asks for events
# from a little before the window, so truncation cannot leave one out.
_SINCE_MARGIN = 1e-5


async def _stored_events(session: Any, session_service: Any, since: float) -> list[Event] | None:
    """The session's events as the store holds them now, at least those
    stamped from `since` on, or None when it cannot be read (the compaction
    is then dropped: it could not be checked against concurrent appends).

    `InMemorySessionService` (its own `get_session`) is read in place: its
    `get_session` deep-copies the events, and its `after_timestamp` filter
    returns a suffix of storage order, which can leave out an event stamped
    inside the window and stored before one stamped earlier. Every other
    service is asked for the events stamped from `since` on (the database
    and Vertex AI services filter by timestamp): only those can fall inside
    the new compaction's interval.
    """
    try:
        if (
            isinstance(session_service, InMemorySessionService)
            and type(session_service).get_session is InMemorySessionService.get_session
        ):
            by_user = session_service.sessions.get(session.app_name, {})
            stored = by_user.get(session.user_id, {}).get(session.id)
        else:
            config = (
                GetSessionConfig(after_timestamp=since - _SINCE_MARGIN)
                if math.isfinite(since)
                else None
            )
            stored = await session_service.get_session(
                app_name=session.app_name,
                user_id=session.user_id,
                session_id=session.id,
                config=config,
            )
    except Exception:  # the store's failure is not the turn's
        logger.warning(
            "exact mode: re-reading session %s before appending a compaction failed;"
            " the compaction is dropped and retried next turn",
            session.id,
            exc_info=True,
        )
        return None
    if stored is None:
        logger.warning(
            "exact mode: session %s is no longer in the store; the compaction is dropped",
            session.id,
        )
        return None
    # Read only: the in-memory store's own list is not copied.
    return stored.events


def _foreign(session: Any, stored: list[Event], seen: int) -> list[Event]:
    """The events the selection (made when this invocation's copy of the
    session held `seen` events) did not see: those appended to the copy
    since (by a branch running beside this one in the same invocation, a
    `ParallelAgent`'s, which shares the copy), and those of `stored` the
    copy lacks (appended by another invocation), compared by id."""
    late = list(session.events[seen:])
    if stored is session.events:
        return late
    positions = _native.exact_foreign(session.events, stored)
    if positions is not None:
        return [*late, *(stored[i] for i in positions)]
    known = {event.id for event in session.events}
    return [*late, *(event for event in stored if event.id not in known)]


async def _recorded(
    compaction_event: Event,
    *,
    session: Any,
    session_service: Any,
    events: list[Event],
    handed: Sequence[int],
    seeds: Sequence[int],
    since: float,
    scope: str | None,
    selection: Any,
    seen: int,
    branched: bool = False,
) -> Event | None:
    """`compaction_event` with its coverage record and plain-safe bounds, or
    None when it must not be appended.

    The session is re-read first: events the selection did not see (the
    store holds them and this invocation's copy lacks them, appended by
    another invocation while the summarizer ran; or a sibling branch
    appended them to the copy after the selection, `seen` being its length
    then) are named as holes, and a compaction another invocation or branch
    wrote meanwhile in the same scope makes this one redundant or
    conflicting, so it is dropped (the next turn selects again). The plain
    bounds end below the earliest stamp an event stored later can carry
    (`_underway.ceiling`; the calling invocation counts when it compacts
    from a branch, whose siblings may run side by side), less the margin
    for other clocks (`_underway.clock_skew`).
    """
    compaction = compaction_event.actions.compaction if compaction_event.actions else None
    if compaction is None or compaction.compacted_content is None:
        # Not a summary: nothing is covered by it; google-adk appends it as is.
        return compaction_event
    stored = await _stored_events(session, session_service, since)
    if stored is None:
        return None
    foreign: list[tuple[str, float]] = []
    for event in _foreign(session, stored, seen):
        if event.isolation_scope != scope:
            continue
        if event.actions and event.actions.compaction:
            logger.info(
                "exact mode: another invocation compacted session %s meanwhile;"
                " this compaction is dropped and selection runs again next turn",
                session.id,
            )
            return None
        foreign.append((event.invocation_id or "", event.timestamp))
    # Read after the store: an event stored from here on is made now or
    # later, or by an invocation under way (its start bounds its stamps).
    ceiling = _underway.ceiling(session, own=branched)
    written = _native.exact_record(
        events,
        list(handed),
        list(seeds),
        foreign,
        ceiling,
        selection,
        clock_skew=_underway.clock_skew(),
    )
    if written is None:
        return None
    record, plain_start, plain_end = written
    compaction.start_timestamp = plain_start
    compaction.end_timestamp = plain_end
    return _exact.with_record(compaction_event, record)


async def run_compaction_for_sliding_window(
    app: Any, session: Any, session_service: Any
) -> AsyncGenerator[Event, None]:
    """`_run_compaction_for_sliding_window` in exact mode."""
    config = app.events_compaction_config
    if config is None:
        return
    sliding = (
        _adk._has_sliding_window_config(config)
        and config.compaction_interval is not None
        and config.overlap_size is not None
    )
    # As parity mode does: the selection is made first (only the live
    # events read when no sliding window is configured) and used if the
    # token-threshold path leaves the session as it was.
    selected = None
    seen = len(session.events)
    if not sliding:
        selected = _native.exact_sliding_window(session.events, 0, 0, select=False)
    elif _is_int(config.compaction_interval) and _is_int(config.overlap_size):
        selected = _native.exact_sliding_window(
            session.events, config.compaction_interval, config.overlap_size
        )
    if selected is None:
        original = _reference.original("run_compaction_for_sliding_window")
        async for event in original(app, session, session_service):
            yield event
        return
    events, handed, covered, since, problems, handle = selected
    if not events:
        return
    if _adk._has_token_threshold_config(config):
        if await _adk._run_compaction_for_token_threshold(app, session, session_service):
            return
    if not sliding:
        return
    _exact.report(problems)
    if not handed:
        return
    to_compact = [events[i] for i in handed]
    removable = sum(
        _size(_adk._request_content(event))
        for event, was_covered in zip(to_compact, covered, strict=True)
        if not was_covered
    )
    # google-adk's rule: worth a summarizer call when the window outweighs
    # the summary the last call wrote.
    latest = _latest_summary(events)
    if removable <= (0 if latest is None else _summary_size(latest)):
        return
    if app.root_agent is None:
        return
    _adk._ensure_compaction_summarizer(config=config, agent=app.root_agent)
    if config.summarizer is None:
        return
    compaction_event = await _compaction.summarize_with(
        _removable, removable, session, config, events, to_compact, "sliding_window"
    )
    logger.debug("Exact-mode event compactor finished.")
    if compaction_event is None:
        return
    compaction_event = await _recorded(
        compaction_event,
        session=session,
        session_service=session_service,
        events=events,
        handed=handed,
        seeds=(),
        since=since,
        seen=seen,
        scope=None,
        selection=handle,
    )
    if compaction_event is not None:
        yield compaction_event


def _rolled_seed(
    seeds: list[Event], parts: list[Any], role: Any, start: float | None
) -> list[Event]:
    """The rolling summary's seed: of one compaction event, google-adk's
    seed; of several, one event holding their summaries' `parts` in order
    (as `_native.exact_seeds` read them), stamped at the earliest interval
    `start`. google-adk's summarizer formats an event's parts one line each
    (`author: text`), so it reads the same text as from a seed per summary,
    without an Event built per summary (a session written by google-adk can
    have hundreds surviving side by side). The parts are the stored
    summaries' own, validated when they were: the content is assembled
    without validating them again."""
    if len(seeds) < 2:
        return [_compaction.seed_event(seed) for seed in seeds]
    latest = seeds[-1]
    return [
        Event(
            timestamp=latest.timestamp if start is None else start,
            author="model",
            content=Content.model_construct(role=role, parts=parts),
            branch=latest.branch,
            isolation_scope=latest.isolation_scope,
            invocation_id=Event.new_id(),
        )
    ]


def _latest_summary(events: list[Event]) -> Event | None:
    for event in reversed(events):
        compaction = event.actions.compaction if event.actions else None
        if compaction is not None and compaction.compacted_content is not None:
            return event
    return None


async def run_compaction_for_token_threshold_config(
    *,
    config: Any,
    session: Any,
    session_service: Any,
    agent: Any,
    agent_name: str = "",
    current_branch: str | None = None,
    isolation_scope: str | None = None,
) -> bool:
    """`_run_compaction_for_token_threshold_config` in exact mode.

    Trigger rule: the observed (or estimated) prompt token count reaches
    `token_threshold`, and the new material, the raw events to summarize plus
    the summaries superseded besides the latest (each its serialized
    content, as it weighs in the prompt), weighs at least as much as the
    latest summary, which the call rewrites. So when
    the rolling summary alone is near the threshold, a call waits until it
    has as much new to say as it has to repeat, instead of firing every turn.
    """
    if not _adk._has_token_threshold_config(config):
        return False
    if config is None:
        return False
    if config.token_threshold is None or config.event_retention_size is None:
        return False
    selected = None
    seen = len(session.events)
    # From a branch, a sibling's event not yet stored (a reply is stamped
    # when its call began) may carry any stamp from this invocation's start
    # on, and a store that loads by timestamp puts it before the compaction:
    # the summary stops below that (`_underway.ceiling`).
    branched = current_branch is not None
    floor = _underway.ceiling(session, own=True) if branched else math.inf
    if _is_int(config.event_retention_size) and _is_int(config.token_threshold):
        selected = _native.exact_token_threshold(
            session.events,
            isolation_scope,
            config.event_retention_size,
            agent_name,
            config.token_threshold,
            floor,
        )
    if selected is None:
        return bool(
            await _reference.original("run_compaction_for_token_threshold_config")(
                config=config,
                session=session,
                session_service=session_service,
                agent=agent,
                agent_name=agent_name,
                current_branch=current_branch,
                isolation_scope=isolation_scope,
            )
        )
    rewound, events, count, window, seeds, since, problems, handle = selected
    if count is None:
        count = _adk._estimate_prompt_token_count(
            events=rewound,
            current_branch=current_branch,
            agent_name=agent_name,
            isolation_scope=isolation_scope,
        )
    if count is None or count < config.token_threshold:
        return False
    _exact.report(problems)
    if not window and len(seeds) < 2:
        return False
    raw = [events[i] for i in window]
    # Each surviving summary's size (what it weighs in the prompt, its own
    # content) and the seed's parts, read once per selection.
    parts, role, sizes, start = _native.exact_seeds(events, list(seeds), _size, handle)
    latest = sizes[-1] if sizes else 0
    material = sum(_size(_adk._request_content(event)) for event in raw) + sum(sizes[:-1])
    if material <= 0 or material < latest:
        return False
    _adk._ensure_compaction_summarizer(config=config, agent=agent)
    if config.summarizer is None:
        return False
    rolled = _rolled_seed([events[i] for i in seeds], parts, role, start)
    to_compact = [*rolled, *raw]
    compaction_event = await _compaction.summarize_with(
        _removable, material + latest, session, config, events, to_compact, "token_threshold"
    )
    if not compaction_event:
        return False
    compaction_event.isolation_scope = isolation_scope
    recorded = await _recorded(
        compaction_event,
        session=session,
        session_service=session_service,
        events=events,
        handed=window,
        seeds=seeds,
        since=since,
        seen=seen,
        scope=isolation_scope,
        selection=handle,
        # Mid-invocation: a branch's siblings may be under way beside it.
        branched=branched,
    )
    if recorded is None:
        return False
    await session_service.append_event(session=session, event=recorded)
    logger.debug("Exact-mode token-threshold event compactor finished.")
    return True
