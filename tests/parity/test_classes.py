"""Which classes the Rust core reads like google-adk's models, and what a
decline looks like to the user.

google-genai's `UserContent` and `ModelContent` (what streaming apps and
`Runner` helpers store) must be read like `Content`: every decision equal
to google-adk's and no decline. A class that changes how an instance reads
(a property over a field, `__getattribute__`, truthiness, an extra field, a
mixin, revalidation) must send the call to google-adk's own code, whose
answer is then the result; a user subclass that changes nothing is proven
once, when first met, and read from then on. A decline is counted per
process and warned about once per reason on the `adk_fastcompact` logger.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import adk_fastcompact
import pydantic
import pytest
from adk_fastcompact import _classes, _native
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.genai import types

from support.compare import ORIG_PROCESS, ORIG_RECOVER, call


class PlainContent(types.Content):
    """A user subclass that changes nothing about reading."""


class HiddenParts(types.Content):
    """Hides its parts from attribute reads (as a lazy-loading proxy might)."""

    def __getattribute__(self, name: str) -> Any:
        if name == "parts":
            return None
        return super().__getattribute__(name)


class Falsy(types.Content):
    """Makes `if event.content:` false, which google-adk's helpers test."""

    def __bool__(self) -> bool:
        return False


class Extra(types.Content):
    """Declares a field `Content` does not have."""

    note: str = ""


class _Mixin:
    def __len__(self) -> int:
        return 0


class Mixed(_Mixin, types.Content):
    """A mixin ahead of `Content` in the MRO."""


class Revalidated(types.Content):
    """Asks pydantic to copy instances passed to a model field."""

    model_config = pydantic.ConfigDict(revalidate_instances="always")


class Validated(types.Content):
    """A validator (a class attribute of its own)."""

    @pydantic.field_validator("parts")
    @classmethod
    def _keep(cls, value: Any) -> Any:
        return value


def test_library_subclasses_are_read_like_their_model() -> None:
    models = _classes.read_models()
    assert set(models) == set(_classes.MODELS)
    base, like = models["content"]
    assert base is types.Content
    assert set(like) == {types.UserContent, types.ModelContent}
    for name, (base, like) in models.items():
        assert _classes.reads_like(base, base), name
        for cls in like:
            assert cls.__module__.startswith(_classes.LIBRARY_MODULES), cls


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        (types.UserContent, True),
        (types.ModelContent, True),
        (PlainContent, True),
        (HiddenParts, False),
        (Falsy, False),
        (Extra, False),
        (Mixed, False),
        (Revalidated, False),
        (Validated, False),
        (types.Part, False),
        (dict, False),
    ],
)
def test_reads_like(cls: type, expected: bool) -> None:
    assert _classes.reads_like(types.Content, cls) is expected


def test_google_adk_event_subclass_is_not_read_like_event() -> None:
    # google-adk's live-flow sentinel adds a field; it is never stored, and
    # if it were, the core would leave it to google-adk.
    from google.adk.live._flow_utils import _ReconnectSentinel

    assert not _classes.reads_like(Event, _ReconnectSentinel)


def _session(content_cls: type[types.Content]) -> list[Event]:
    """A call, a compaction covering it, and its response: recovery must
    re-inject the call, so the content of both is read."""

    def content(role: str, part: types.Part) -> types.Content:
        if content_cls in (types.UserContent, types.ModelContent):
            return content_cls(parts=[part])
        return content_cls(role=role, parts=[part])

    call_part = types.Part(function_call=types.FunctionCall(id="c1", name="tool", args={}))
    response_part = types.Part(
        function_response=types.FunctionResponse(id="c1", name="tool", response={"ok": 1})
    )
    model_cls = types.ModelContent if content_cls is types.UserContent else content_cls
    user_cls = types.UserContent if content_cls is types.ModelContent else content_cls
    events = [
        Event(id="u", invocation_id="i1", author="user", timestamp=1.0,
              content=content("user", types.Part(text="hi")) if user_cls is content_cls
              else user_cls(parts=[types.Part(text="hi")])),
        Event(id="m", invocation_id="i1", author="agent", timestamp=2.0,
              content=content("model", call_part) if model_cls is content_cls
              else model_cls(parts=[call_part])),
        Event(
            id="s", invocation_id="i2", author="user", timestamp=2.5,
            actions=EventActions(
                compaction=EventCompaction(
                    start_timestamp=1.0, end_timestamp=2.0,
                    compacted_content=types.ModelContent(parts=[types.Part(text="summary")]),
                )
            ),
        ),
        Event(id="r", invocation_id="i1", author="user", timestamp=3.0,
              content=content("user", response_part)),
    ]  # fmt: skip
    return events


def _prompt(process: Any, recover: Any, events: list[Event]) -> list[Event]:
    return recover(process(events, "agent"), events)


def _both_prompts(events: list[Event]) -> tuple[Any, Any]:
    """The prompt google-adk's functions and ours build from `events`."""
    want = call(_prompt, ORIG_PROCESS, ORIG_RECOVER, events)
    got = call(
        _prompt,
        adk_fastcompact.process_compaction_events,
        adk_fastcompact.recover_compacted_function_calls,
        events,
    )
    return want, got


def _dumps(events: list[Event]) -> list[dict[str, Any]]:
    return [e.model_dump(mode="json", exclude={"id"}) for e in events]


@pytest.fixture
def counted() -> Any:
    _native.decline_counts(reset=True)
    yield
    _native.decline_counts(reset=True)


@pytest.mark.parametrize("cls", [types.Content, types.UserContent, types.ModelContent])
def test_streamed_contents_are_read_without_declining(cls: type, counted: None) -> None:
    events = _session(cls)
    want, got = _both_prompts(events)
    assert want.error is None and got.error is None
    assert _dumps(got.value) == _dumps(want.value)
    # Raw events are the caller's objects, the re-injected call included.
    by_id = {e.id: e for e in events}
    raw = [e for e in got.value if e.id in by_id]
    assert [e.id for e in raw] == ["m", "r"]
    assert all(e is by_id[e.id] for e in raw)
    assert _native.decline_counts() == {}
    # The summary carries the compacted ModelContent itself, as google-adk's does.
    summary = next(e for e in got.value if e.id not in {"u", "m", "r"})
    assert summary.content is events[2].actions.compaction.compacted_content


@pytest.mark.parametrize("cls", [HiddenParts, Falsy, Extra, Mixed])
def test_classes_that_read_otherwise_fall_back_to_google_adk(cls: type, counted: None) -> None:
    events = _session(cls)
    want, got = _both_prompts(events)
    assert (want.error is None) == (got.error is None)
    if want.error is None:
        assert _dumps(got.value) == _dumps(want.value)
    assert _native.decline_counts().get("content", 0) >= 1
    # And it stays refused on the next call.
    _native.decline_counts(reset=True)
    call(_prompt, adk_fastcompact.process_compaction_events,
         adk_fastcompact.recover_compacted_function_calls, events)  # fmt: skip
    assert _native.decline_counts().get("content", 0) >= 1


def test_hidden_parts_change_google_adks_answer() -> None:
    # Not vacuous: reading HiddenParts from its instance dict would see the
    # call that google-adk's attribute read does not, and recover it.
    events = _session(HiddenParts)
    want = call(_prompt, ORIG_PROCESS, ORIG_RECOVER, events).value
    plain = call(_prompt, ORIG_PROCESS, ORIG_RECOVER, _session(types.Content)).value
    assert [e.id for e in want] != [e.id for e in plain]


def test_a_user_subclass_that_reads_alike_is_learned_once(counted: None) -> None:
    class Learned(types.Content):
        pass

    events = _session(Learned)
    process, recover = (
        adk_fastcompact.process_compaction_events,
        adk_fastcompact.recover_compacted_function_calls,
    )
    want = call(_prompt, ORIG_PROCESS, ORIG_RECOVER, events).value
    first = call(_prompt, process, recover, events).value
    assert _native.decline_counts(reset=True).get("content", 0) >= 1
    second = call(_prompt, process, recover, events).value
    assert _native.decline_counts() == {}
    assert _dumps(first) == _dumps(second) == _dumps(want)
    learned = adk_fastcompact.index_stats()["classes_learned"]
    assert ("Content", f"{__name__}.{Learned.__qualname__}", True) in learned


def test_declines_are_warned_once_per_reason_and_counted_per_process(
    caplog: pytest.LogCaptureFixture, counted: None
) -> None:
    _native.decline_totals(reset=True)
    events = _session(HiddenParts)
    with caplog.at_level(logging.WARNING, logger="adk_fastcompact"):
        # (Prompt filtering reads no content; call recovery does.)
        for _ in range(3):
            adk_fastcompact.recover_compacted_function_calls(events, events)
        # Another thread's declines count for the process, not this thread.
        worker = threading.Thread(
            target=adk_fastcompact.recover_compacted_function_calls, args=(events, events)
        )
        worker.start()
        worker.join()
    records = [r for r in caplog.records if r.name == "adk_fastcompact"]
    assert len(records) == 1, [r.getMessage() for r in records]
    message = records[0].getMessage()
    assert "_recover_compacted_function_calls" in message and "content" in message
    assert "index_stats()['declines']" in message
    assert _native.decline_counts() == {"content": 3}
    stats = adk_fastcompact.index_stats()
    assert stats["declines"] == {"content": 4}
    assert stats["declines_by_function"] == {"_recover_compacted_function_calls": 4}
    by_reason, _ = _native.decline_totals(reset=True)
    assert by_reason == {"content": 4}
    # After a reset the reason is warned about again.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="adk_fastcompact"):
        adk_fastcompact.recover_compacted_function_calls(events, events)
    assert len([r for r in caplog.records if r.name == "adk_fastcompact"]) == 1
    _native.decline_totals(reset=True)
