"""The compiled core of adk-fastcompact (`adk_fastcompact._native`).

Every function reads only the fields it needs from each google-adk Event and
returns the caller's own objects. A function returns `None` when it declines
an input that only google-adk's own implementation reproduces exactly (a NaN
timestamp that takes part in ordering, an object that is not exactly a
google-adk / google-genai model, a non-float timestamp, a sequence that is not
a list); the wrappers in `adk_fastcompact` then call google-adk's function.
"""

from collections.abc import Callable

from google.adk.events.event import Event

__all__ = [
    "__version__",
    "apply_rewinds",
    "decline_counts",
    "get_compaction_ranges",
    "process_compaction_events",
    "recover_compacted_function_calls",
]

__version__: str

def decline_counts(reset: bool = False) -> dict[str, int]:
    """How often the functions below declined on this thread, by reason.

    Args:
      reset: Start the counters again from zero (the returned counts are the
        ones before the reset).

    Returns:
      A mapping from reason to count.
    """

def apply_rewinds(events: object) -> list[Event] | None:
    """The events that survive every rewind, in order.

    Args:
      events: The session's events, in chronological order.

    Returns:
      The surviving events, or None to decline.
    """

def get_compaction_ranges(events: object) -> list[tuple[int, float, float]] | None:
    """The non-subsumed compaction ranges, in event order.

    Args:
      events: The session's events.

    Returns:
      `(event index, start, end)` per surviving compaction, with the events'
      own float objects, or None to decline.
    """

def process_compaction_events(
    events: object, make_summary: Callable[[Event], Event]
) -> list[Event] | None:
    """The history with compacted events replaced by summaries.

    Args:
      events: The events to filter.
      make_summary: Builds the summary Event of a compaction event; called
        once per surviving compaction, in event order.

    Returns:
      The filtered events in prompt order, or None to decline.
    """

def recover_compacted_function_calls(events: object, source_events: object) -> list[Event] | None:
    """Re-injects function-call events whose responses survived compaction.

    Args:
      events: The filtered events.
      source_events: The events before filtering.

    Returns:
      `events` itself when nothing is re-injected, a new list otherwise, or
      None to decline.
    """
