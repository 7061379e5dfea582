"""`prompt_chars_saved` against google-adk's `_prompt_chars_saved`.

google-adk filters the history with and without the compaction and
serializes both; ours measures only what changes. On generated sessions and
compaction events (contained, containing, overlapping, identical, inverted,
NaN-bounded, without content) the numbers, or the exceptions, must match.
"""

from __future__ import annotations

import functools
import random

import adk_fastcompact as fc
import pytest
from adk_fastcompact import _native
from google.adk.apps import compaction as adk_compaction
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.genai import types

from support.compare import assert_same_error, call, needs
from support.strategies import random_session

pytestmark = [pytest.mark.usefixtures("index_mode"), needs("prompt_chars_saved")]

# google-adk's own (2.12 on).
ORIGINAL = getattr(adk_compaction, "_prompt_chars_saved", None)
BLOCKS = 10
PER_BLOCK = 100


def compaction_event(rng: random.Random, events: list[Event]) -> Event:
    stamps = [e.timestamp for e in events if isinstance(e.timestamp, float)] or [1.0]
    lo, hi = min(stamps), max(stamps)
    start = rng.choice([lo, rng.uniform(lo, hi), rng.choice(stamps), hi + 1.0])
    end = rng.choice([hi, rng.uniform(start, hi + 1.0), rng.choice(stamps), start - 1.0])
    if rng.random() < 0.05:
        start = float("nan")
    parts = [types.Part(text="x" * rng.randint(0, 300))] if rng.random() < 0.9 else []
    content = types.Content(role="model", parts=parts)
    return Event(
        author="user",
        timestamp=hi + 1.0,
        actions=EventActions(
            compaction=EventCompaction(
                start_timestamp=start, end_timestamp=end, compacted_content=content
            )
        ),
    )


@pytest.mark.parametrize("block", range(BLOCKS))
def test_matches_google_adk(block: int) -> None:
    nonzero = 0
    _native.decline_counts(reset=True)
    for k in range(PER_BLOCK):
        seed = 7_000 + block * PER_BLOCK + k
        rng = random.Random(seed)
        events = random_session(seed, max_events=150).events
        extra = compaction_event(rng, events)
        orig = call(functools.partial(ORIGINAL, events=events, compaction_event=extra))
        ours = call(
            functools.partial(
                fc._compaction.prompt_chars_saved, events=events, compaction_event=extra
            )
        )
        if assert_same_error(ours, orig):
            assert ours.value == orig.value, f"seed {seed}: {ours.value} != {orig.value}"
            nonzero += ours.value != 0
    assert nonzero > PER_BLOCK // 4
    # The adversarial generator declines sometimes, but most cases run in Rust.
    assert sum(_native.decline_counts().values()) < PER_BLOCK // 2
