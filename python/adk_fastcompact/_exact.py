"""Exact-mode coverage records: read, write, validate.

A compaction written in exact mode keeps google-adk's `EventCompaction`
unchanged (a model with `extra='forbid'`) and records beside it, in the
compaction event's `custom_metadata["adk_fastcompact"]`, the interval the
summary was made over and the events inside it the summary does not stand
in for (the holes), each named by invocation id and timestamp in
microseconds. The Rust core (`core::exact`) owns the format, the
validation, the coverage check and the hole computation; this module moves
records between events and the core; `_exact_mode` is exact mode itself.

A record that cannot be used (malformed, a later version, more than 4,096
holes, bounds that do not fit its compaction) is reported once per kind of
problem with `CoverageRecordWarning`, and its compaction is then read as
the interval google-adk reads: never a crash, and never an event hidden on
the strength of a record nobody could check.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterable
from typing import Any

from google.adk.events.event import Event

from . import _native

#: The `custom_metadata` key of the record.
METADATA_KEY = "adk_fastcompact"


class CoverageRecordWarning(RuntimeWarning):
    """A compaction's coverage record was not used; its interval was."""


_warned: set[str] = set()
_lock = threading.Lock()


def _warn_once(message: str) -> None:
    # The kind is the message's first three words ("malformed coverage
    # record", "coverage record version", "coverage record names",
    # "coverage record bounds"): numbers that follow do not make a new kind.
    kind = " ".join(message.split()[:3])
    with _lock:
        if kind in _warned:
            return
        _warned.add(kind)
    warnings.warn(
        f"{message}; the compaction is read as its interval (reported once per kind)",
        CoverageRecordWarning,
        stacklevel=3,
    )


def report(problems: Iterable[tuple[int, str]]) -> None:
    """Warns (once per kind) about the records the core did not use:
    `(index of the compaction event, why)` pairs."""
    for _, why in problems:
        _warn_once(why)


def reset_warnings() -> None:
    """Warn again about every kind of problem (for tests)."""
    with _lock:
        _warned.clear()


def read_record(event: Event) -> dict[str, Any] | None:
    """The validated record of a compaction event, or None.

    None when the event is not a compaction with both bounds, carries no
    record (written by plain google-adk, or by a store that dropped it), or
    carries one that cannot be used (warned about once per kind).
    """
    compaction = event.actions.compaction if event.actions else None
    if compaction is None:
        return None
    start, end = compaction.start_timestamp, compaction.end_timestamp
    if type(start) is not float or type(end) is not float:
        return None
    metadata = event.custom_metadata
    if not isinstance(metadata, dict) or METADATA_KEY not in metadata:
        return None
    try:
        record: dict[str, Any] = _native.coverage_record(metadata[METADATA_KEY], start, end)
    except ValueError as error:
        _warn_once(str(error))
        return None
    return record


def new_record(start: float, end: float, holes: Iterable[Event]) -> dict[str, Any]:
    """The record of a compaction over `[start, end]` whose summary does not
    stand in for `holes` (events chosen by identity by the caller)."""
    keys = [(event.invocation_id or "", event.timestamp) for event in holes]
    record: dict[str, Any] = _native.new_coverage_record(start, end, keys)
    return record


def with_record(event: Event, record: dict[str, Any]) -> Event:
    """Stores `record` in `event.custom_metadata` (other keys kept)."""
    metadata = dict(event.custom_metadata or {})
    metadata[METADATA_KEY] = record
    event.custom_metadata = metadata
    return event
