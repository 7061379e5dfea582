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
        None). A session that cannot be read exactly (not a list of plain
        google-adk Events, a non-float timestamp, ...) gets
        `{"declined": reason}`.
    """
    lists = [s.events if isinstance(s, Session) else s for s in sessions]
    interval = config.compaction_interval if config is not None else None
    overlap = config.overlap_size if config is not None and config.overlap_size else 0
    if parallel is None:
        parallel = _parallel_default()
    return _native.analyze_sessions(lists, interval, overlap, parallel)
