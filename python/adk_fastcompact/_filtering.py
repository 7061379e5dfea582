"""Rust-backed drop-in replacements of google-adk's prompt-filtering helpers.

Each function has the signature and the result of the google-adk 2.13.0
function it replaces. Rust reads the needed fields of every event once,
decides, and hands back the caller's own Event objects (identity kept).
When the Rust core declines an input (see `_native`), the function runs the
pure-Python original instead, which by definition gives the same result or
raises the same exception.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.adk.events.event import Event

from . import _families, _native, _reference, _summaries

_BY_ID = _families.active().recover_by_id


def apply_rewinds(events: list[Event]) -> list[Event]:
    """Returns `events` without the events annulled by rewinds.

    Same as `google.adk.events._rewind_events._apply_rewinds`.
    """
    out = _native.apply_rewinds(events)
    return _reference.original("apply_rewinds")(events) if out is None else out


def get_compaction_ranges(events: list[Event]) -> list[tuple[int, float, float]]:
    """Returns the surviving `(index, start, end)` compaction ranges in event order.

    Same as `google.adk.apps.compaction._get_compaction_ranges`.
    """
    out = _native.get_compaction_ranges(events)
    return _reference.original("get_compaction_ranges")(events) if out is None else out


def process_compaction_events(events: list[Event], agent_name: str = "") -> list[Event]:
    """Replaces compacted raw events by their summaries.

    Same as `google.adk.flows.llm_flows.context._compaction._process_compaction_events`:
    summaries are equal to the Events google-adk materializes (see
    `_summaries`), attributed to `agent_name` (or `"model"`).
    """
    author = agent_name or "model"

    def summary(event: Event) -> Event:
        return _summaries.summary_event(event, author)

    # Summaries are handed out again (same object) only while building one
    # draws no id anyone can observe; see `_native.process_compaction_events`.
    reuse = _summaries.ids_unobservable()
    out = _native.process_compaction_events(events, summary, author if reuse else None)
    if out is None:
        original = _reference.original("process_compaction_events")
        return original(events, agent_name) if agent_name else original(events)
    return out


def process_compaction_events_unattributed(events: list[Event]) -> list[Event]:
    """`_process_compaction_events(events)` of google-adk 2.5 to 2.6, which
    takes no agent name: every summary's author is "model"."""
    return process_compaction_events(events)


def recover_compacted_function_calls(
    events: list[Event], source_events: Sequence[Event]
) -> list[Event]:
    """Re-injects function-call events whose responses survived compaction.

    Same as `google.adk.flows.llm_flows.context._compaction._recover_compacted_function_calls`;
    returns `events` itself when nothing needs recovery.
    """
    out = _native.recover_compacted_function_calls(events, source_events, _BY_ID)
    if out is None:
        return _reference.original("recover_compacted_function_calls")(events, source_events)
    return out
