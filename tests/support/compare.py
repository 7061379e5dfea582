"""The oracle and the comparisons the differential tests share.

The originals are taken from their google-adk modules when this module is
first imported (at collection, before any test can `install()`), so the
oracle never comes from the code under test.
"""

from __future__ import annotations

import importlib
import itertools
import math
import types
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from adk_fastcompact import _families, _reference
from google.adk.events.event import Event
from google.adk.platform import uuid as platform_uuid

PROFILE = _families.active()
"""The installed google-adk's family profile: what the tests expect of
google-adk where they do not ask google-adk itself."""

NATIVE_OPS = (
    "apply_rewinds",
    "get_compaction_ranges",
    "process_compaction_events",
    "recover_compacted_function_calls",
    "prompt_chars_delta",
    "sliding_window",
    "token_threshold_selection",
)
"""The Rust entry points of `adk_fastcompact._native` that take events."""


def _original(name: str) -> Callable[..., Any] | None:
    """google-adk's own `name` (our name), or None where its family has none."""
    if name not in _reference.locations():
        return None
    fn = _reference.original(name)
    assert not _reference.ours(fn), f"{name} is already patched"
    return fn


def adk_module(*names: str) -> types.ModuleType:
    """The first of google-adk's modules `names` the installed release has
    (modules moved between families: `flows.llm_flows.context._contents`
    was `flows.llm_flows.contents` before 2.10)."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError(f"google-adk {_families.adk_version()} has none of {names}")


def _sliding_pair_required() -> bool:
    from google.adk.apps.app import EventsCompactionConfig

    return EventsCompactionConfig.model_fields["compaction_interval"].is_required()


#: Before 2.6 `EventsCompactionConfig` requires the sliding-window pair.
SLIDING_PAIR_REQUIRED = _sliding_pair_required()


def config_fields(config: dict[str, int]) -> dict[str, int]:
    """`EventsCompactionConfig` fields for `config`: where google-adk requires
    the sliding-window pair (before 2.6), a token-threshold-only config gets
    one that never fires (an interval no session reaches)."""
    if SLIDING_PAIR_REQUIRED and "compaction_interval" not in config:
        return {**config, "compaction_interval": NEVER, "overlap_size": 0}
    return config


#: A compaction interval no session reaches.
NEVER = 10**9


def needs(name: str) -> pytest.MarkDecorator:
    """Skips a test where the installed google-adk has no function `name`."""
    return pytest.mark.skipif(
        name not in _reference.locations(),
        reason=f"google-adk {_families.adk_version()} has no {name}",
    )


def scope_kwargs(isolation_scope: str | None) -> dict[str, Any]:
    """`isolation_scope=` for google-adk's compaction functions, where its
    family takes one (2.13)."""
    return {"isolation_scope": isolation_scope} if PROFILE.scoped else {}


ORIG_APPLY_REWINDS = _original("apply_rewinds")
ORIG_GET_COMPACTION_RANGES = _original("get_compaction_ranges")
ORIG_RECOVER = _original("recover_compacted_function_calls")


def _process_pair() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """google-adk's `_process_compaction_events` and the replacement
    `install()` binds, both called `(events, agent_name)`: google-adk before
    2.7 takes the events alone (every summary by "model"), so there the
    tests' agent name is dropped on both sides."""
    import adk_fastcompact as fc
    from adk_fastcompact import _patch

    orig = _original("process_compaction_events")
    assert orig is not None
    if PROFILE.attributed:
        return orig, fc.process_compaction_events
    ours = _patch.replacement("process_compaction_events")

    def orig_unattributed(events: list[Event], agent_name: str = "") -> list[Event]:
        return orig(events)

    def ours_unattributed(events: list[Event], agent_name: str = "") -> list[Event]:
        return ours(events)

    return orig_unattributed, ours_unattributed


ORIG_PROCESS, OURS_PROCESS = _process_pair()


@dataclass
class Outcome:
    """What a call did: returned `value` or raised `error`."""

    value: Any = None
    error: BaseException | None = None


def call(fn: Callable[..., Any], *args: Any) -> Outcome:
    """Calls `fn` with deterministic, counter-based new Event ids."""
    counter = itertools.count()
    platform_uuid.set_id_provider(lambda: f"generated-{next(counter)}")
    try:
        return Outcome(value=fn(*args))
    except Exception as error:
        return Outcome(error=error)
    finally:
        platform_uuid.reset_id_provider()


def same_number(a: object, b: object) -> bool:
    """Bit-level equality of timestamps: same type, both NaN or equal with the
    same sign (so -0.0 and 0.0 differ)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        assert isinstance(b, float)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


def deep_equal(a: object, b: object) -> bool:
    """`==` on model dumps, except that floats compare with `same_number`."""
    if isinstance(a, float) or isinstance(b, float):
        return same_number(a, b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return list(a) == list(b) and all(deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple))
        return len(a) == len(b) and all(map(deep_equal, a, b))
    return a == b


def assert_same_error(ours: Outcome, orig: Outcome) -> bool:
    """Checks raised exceptions; returns True when both returned normally."""
    if orig.error is not None or ours.error is not None:
        assert type(ours.error) is type(orig.error), (
            f"ours: {ours.error!r}, original: {orig.error!r}"
        )
        assert str(ours.error) == str(orig.error)
        return False
    return True


def assert_same_events(
    ours: Any,
    orig: Any,
    inputs: Sequence[Sequence[object]],
    *,
    returned_input: Sequence[object] | None = None,
) -> None:
    """Element by element: input events by identity, new events (materialized
    summaries) field by field and sharing `.actions` / `.content`.

    `returned_input` is the list argument the function may return as is;
    ours must return it exactly when the original does.
    """
    assert type(ours) is type(orig) is list
    if returned_input is not None:
        assert (ours is returned_input) == (orig is returned_input)
    else:
        assert all(ours is not seq for seq in inputs)
    known = {id(e) for seq in inputs for e in seq}
    assert len(ours) == len(orig), f"length {len(ours)} != {len(orig)}"
    # New objects must correspond one to one.
    pairing: dict[int, int] = {}
    for k, (a, b) in enumerate(zip(ours, orig, strict=True)):
        if id(b) in known:
            assert a is b, f"position {k}: {_show(a)} is not {_show(b)}"
            continue
        assert id(a) not in known, f"position {k}: input event {_show(a)} for a new one"
        assert a is not b, f"position {k}: {_show(b)} is neither an input nor new"
        assert pairing.setdefault(id(b), id(a)) == id(a), f"position {k}"
        assert_same_summary(a, b)
    assert len(set(pairing.values())) == len(pairing)


def assert_same_summary(ours: Event, orig: Event) -> None:
    assert type(ours) is type(orig)
    assert ours.model_fields_set == orig.model_fields_set
    assert deep_equal(ours.model_dump(), orig.model_dump()), (
        f"{ours.model_dump()!r}\n!=\n{orig.model_dump()!r}"
    )
    assert ours.actions is orig.actions
    assert ours.content is orig.content
    assert same_number(ours.timestamp, orig.timestamp)


def assert_same_ranges(ours: Any, orig: Any) -> None:
    assert type(ours) is type(orig) is list
    assert len(ours) == len(orig), f"{ours!r} != {orig!r}"
    for a, b in zip(ours, orig, strict=True):
        assert type(a) is type(b) is tuple and len(a) == len(b) == 3
        assert type(a[0]) is type(b[0]) is int and a[0] == b[0], f"{a!r} != {b!r}"
        assert same_number(a[1], b[1]) and same_number(a[2], b[2]), f"{a!r} != {b!r}"


def _show(event: object) -> str:
    if isinstance(event, Event):
        return f"<{type(event).__name__} id={event.id!r} ts={event.timestamp!r}>"
    return repr(event)


def assert_equal_but_id(ours: Event, orig: Event, *, shared: bool = True) -> None:
    """Equal but for the drawn id; with `shared`, holding the same `actions`
    and `content` objects (else equal ones)."""
    assert type(ours) is type(orig) is Event
    assert ours.model_dump(exclude={"id"}) == orig.model_dump(exclude={"id"})
    assert list(ours.__dict__) == list(orig.__dict__)
    assert ours.model_fields_set == orig.model_fields_set
    assert ours.__pydantic_extra__ is orig.__pydantic_extra__ is None
    assert ours.__pydantic_private__ is orig.__pydantic_private__ is None
    if shared:
        assert ours.actions is orig.actions
        assert ours.content is orig.content
    else:
        assert ours.actions == orig.actions and ours.content == orig.content
    assert type(ours.node_info) is type(orig.node_info)
    assert ours.node_info == orig.node_info
    assert ours.node_info.model_fields_set == orig.node_info.model_fields_set
    # A version-4 UUID written as uuid.uuid4() writes it.
    assert type(ours.id) is str and str(uuid.UUID(ours.id)) == ours.id
    assert uuid.UUID(ours.id).version == 4 and uuid.UUID(ours.id).variant == uuid.RFC_4122


def examples(wanted: int) -> int:
    """Examples for a hypothesis test that sets its own count: `wanted`, or
    the `quick` profile's where HYPOTHESIS_PROFILE loads it (the family
    runs, tests/families/run.py), which an explicit `max_examples` would
    otherwise override."""
    import os

    from hypothesis import settings

    if os.environ.get("HYPOTHESIS_PROFILE") == "quick":
        return int(settings.get_profile("quick").max_examples)
    return wanted
