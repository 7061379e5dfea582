"""The summary Events `_summaries.summary_event` builds equal google-adk's.

google-adk materializes each surviving compaction with a validated
`Event(...)`; ours fills a validated template. On every compaction event of
generated sessions, both are built under the same counter id provider and
compared: `==`, `model_dump`, the instance dict's key order, the fields set,
identity of the shared `actions` / `content`, a fresh `node_info`, the id
drawn, and the same exception where validation rejects an argument.

Under google-adk's default id provider, `_native.process_compaction_events`
builds summaries in Rust (`src/py/summary.rs`); they are compared with
google-adk's on the same sessions, all but the (random) id, which must be a
version-4 UUID as `uuid.uuid4()` writes it.
"""

from __future__ import annotations

from typing import Any

import pytest
from adk_fastcompact import _native
from adk_fastcompact._summaries import summary_event
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.platform import uuid as platform_uuid
from google.genai import types

from support.compare import (
    ORIG_PROCESS,
    PROFILE,
    assert_equal_but_id,
    assert_same_error,
    call,
    scope_kwargs,
)
from support.strategies import random_session, scope_of


def reference(event: Event, author: str) -> Event:
    compaction = event.actions.compaction
    return Event(
        timestamp=compaction.end_timestamp,
        author=author,
        content=compaction.compacted_content,
        branch=event.branch,
        **scope_kwargs(scope_of(event)),
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
        if "isolation_scope" in bad and not PROFILE.scoped:
            # Before 2.13 a summary carries no scope: the field is not read.
            assert assert_same_error(ours, orig)
            assert_equal_summaries(ours.value, orig.value)
            continue
        assert orig.error is not None
        assert_same_error(ours, orig)


# -- the Rust builder (default id provider) ------------------------------------------


def native_summaries(events: list[Event], author: str) -> tuple[list[Event], int] | None:
    """The new Events `_native.process_compaction_events` hands out for
    `events` (with `author`, summaries reusable: the default id provider),
    and how often it fell back to the Python builder; `None` where it
    declines the input."""
    fallbacks = 0

    def python_builder(event: Event) -> Event:
        nonlocal fallbacks
        fallbacks += 1
        return summary_event(event, author)

    out = _native.process_compaction_events(events, python_builder, author)
    if out is None:
        return None
    known = {id(e) for e in events}
    return [e for e in out if id(e) not in known], fallbacks


@pytest.mark.parametrize("block", range(2))
def test_rust_built_summaries_equal_google_adks(block: int) -> None:
    assert platform_uuid._id_provider_context_var.get() is platform_uuid._default_id_provider
    seen = 0
    for seed in range(block * 100, (block + 1) * 100):
        events = random_session(seed, max_events=120).events
        for author in ("model", "root"):
            try:
                orig_out = ORIG_PROCESS(events, author)
            except Exception:
                continue
            known = {id(e) for e in events}
            orig = [e for e in orig_out if id(e) not in known]
            native = native_summaries(events, author)
            if native is None:
                continue
            ours, _ = native
            assert len(ours) == len(orig)
            # The Python builder's (fallback) summaries are equal too.
            for a, b in zip(ours, orig, strict=True):
                assert_equal_but_id(a, b)
                seen += 1
            ids = [e.id for e in ours]
            assert len(set(ids)) == len(ids)
            assert len({id(e.node_info) for e in ours}) == len(ours)
    assert seen > 100


def test_rust_builder_leaves_other_types_to_the_python_builder() -> None:
    content = types.Content(role="model", parts=[types.Part(text="s")])

    class Branch(str):
        pass

    events = [
        Event(
            author="a",
            timestamp=float(k),
            actions=EventActions(
                compaction=EventCompaction(
                    start_timestamp=k - 0.5, end_timestamp=k + 0.5, compacted_content=content
                )
            ),
        )
        for k in range(3)
    ]
    events[1].__dict__["branch"] = Branch("b")  # validation would make it a str
    native = native_summaries(events, "model")
    assert native is not None
    ours, fallbacks = native
    assert fallbacks == 1 and len(ours) == 3
    assert type(ours[1].branch) is type(reference(events[1], "model").branch) is str
    assert ours[1].model_dump(exclude={"id"}) == reference(events[1], "model").model_dump(
        exclude={"id"}
    )
