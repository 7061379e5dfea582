"""The summary Events `_summaries.summary_event` builds equal google-adk's.

google-adk materializes each surviving compaction with a validated
`Event(...)`; ours fills a validated template. On every compaction event of
generated sessions, both are built under the same counter id provider and
compared: `==`, `model_dump`, the instance dict's key order, the fields set,
identity of the shared `actions` / `content`, a fresh `node_info`, the id
drawn, and the same exception where validation rejects an argument.
"""

from __future__ import annotations

from typing import Any

import pytest
from adk_fastcompact._summaries import summary_event
from compare import assert_same_error, call
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.genai import types
from strategies import random_session


def reference(event: Event, author: str) -> Event:
    compaction = event.actions.compaction
    return Event(
        timestamp=compaction.end_timestamp,
        author=author,
        content=compaction.compacted_content,
        branch=event.branch,
        isolation_scope=event.isolation_scope,
        invocation_id=event.invocation_id,
        actions=event.actions,
    )


def both(event: Event, author: str) -> tuple[Any, Any]:
    # `call` installs a fresh counter id provider around each build.
    return call(summary_event, event, author), call(reference, event, author)


def assert_equal_summaries(ours: Event, orig: Event) -> None:
    assert type(ours) is type(orig) is Event
    assert ours == orig
    assert ours.model_dump() == orig.model_dump()
    assert list(ours.__dict__) == list(orig.__dict__)
    assert ours.model_fields_set == orig.model_fields_set
    assert ours.__pydantic_extra__ == orig.__pydantic_extra__
    assert ours.__pydantic_private__ == orig.__pydantic_private__
    assert ours.actions is orig.actions
    assert ours.content is orig.content
    assert ours.node_info is not orig.node_info
    assert ours.id == orig.id == "generated-0"


@pytest.mark.parametrize("block", range(4))
def test_equal_on_generated_sessions(block: int) -> None:
    seen = 0
    for seed in range(block * 100, (block + 1) * 100):
        for event in random_session(seed, max_events=120).events:
            compaction = event.actions.compaction if event.actions else None
            if compaction is None or compaction.compacted_content is None:
                continue
            for author in ("model", "root"):
                ours, orig = both(event, author)
                if assert_same_error(ours, orig):
                    assert_equal_summaries(ours.value, orig.value)
                    seen += 1
    assert seen > 100


def test_fresh_node_info_per_summary() -> None:
    content = types.Content(role="model", parts=[types.Part(text="s")])
    event = Event(
        actions=EventActions(
            compaction=EventCompaction(
                start_timestamp=1.0, end_timestamp=2.0, compacted_content=content
            )
        )
    )
    first, second = summary_event(event, "model"), summary_event(event, "model")
    assert first.node_info is not second.node_info
    assert first.model_fields_set is not second.model_fields_set
    first.node_info.path = "changed"
    assert second.node_info.path == ""


def test_rejected_arguments_raise_as_google_adk() -> None:
    content = types.Content(role="model", parts=[types.Part(text="s")])
    actions = EventActions(
        compaction=EventCompaction(
            start_timestamp=1.0, end_timestamp=2.0, compacted_content=content
        )
    )
    for bad in ({"branch": 3}, {"invocation_id": None}, {"isolation_scope": ["x"]}):
        event = Event(actions=actions)
        for key, value in bad.items():
            event.__dict__[key] = value
        ours, orig = both(event, "model")
        assert orig.error is not None
        assert_same_error(ours, orig)
