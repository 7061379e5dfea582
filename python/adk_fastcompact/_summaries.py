"""Summary Events equal to the ones google-adk materializes, built faster.

`_process_compaction_events` builds, for every surviving compaction, an
`Event(timestamp=end, author=..., content=compacted_content, branch=...,
isolation_scope=..., invocation_id=..., actions=...)` through full pydantic
validation (a Python before-validator that walks all ~35 fields, then
`model_post_init` drawing an id): about 6-10 us each, hundreds per call.

Validation of these arguments is an identity on them (models are not
revalidated, the strings and the float are kept) and every other field takes
its default, of which only `node_info` is a fresh mutable object. So the
result is fully determined by a template Event validated once: its instance
dict with the seven arguments, a fresh `NodeInfo()` and a newly drawn id
put in place (same key order), and the same `model_fields_set`. When an
argument is not of the exact type validation would keep as is, the Event is
built through validation, exactly as google-adk does, so validation errors
stay google-adk's. `tests/parity/test_summaries.py` proves equality field by field,
key order, fields set and the id-provider draws.
"""

from __future__ import annotations

from typing import Any

from google.adk.events import event as _event_module
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.platform import uuid as _platform_uuid
from google.genai.types import Content

from . import _families

# Whether summaries carry their compaction event's isolation scope (2.13);
# before, google-adk does not pass it and the Event keeps its default.
_SCOPED = _families.active().scoped

# The Event's one fresh mutable default (2.0 on); 1.x Events have none.
NodeInfo: Any = getattr(_event_module, "NodeInfo", None)

_new = object.__new__
_setattr = object.__setattr__

_template: tuple[dict[str, Any], frozenset[str]] | None = None


def _template_parts() -> tuple[dict[str, Any], frozenset[str]]:
    """The instance dict and fields set of a validated summary-shaped Event."""
    global _template
    if _template is None:
        # Built under a throw-away id provider: the caller's provider must not
        # see a draw google-adk would not make.
        token = _platform_uuid._id_provider_context_var.set(lambda: "template")
        try:
            scope: dict[str, Any] = {"isolation_scope": None} if _SCOPED else {}
            event = Event(
                timestamp=0.0,
                author="model",
                content=Content(role="model", parts=[]),
                branch=None,
                **scope,
                invocation_id="",
                actions=EventActions(),
            )
        finally:
            _platform_uuid._id_provider_context_var.reset(token)
        _template = (dict(event.__dict__), frozenset(event.model_fields_set))
    return _template


_Template = tuple[
    type[Event], dict[str, Any], frozenset[str], type[Any], dict[str, Any], frozenset[str]
]


def native_template() -> _Template | None:
    """What the Rust builder (`src/py/summary.rs`) copies per summary: the
    Event template's dict and fields set, and those of a validated
    `NodeInfo()`; `None` (the Rust builder then defers to `summary_event`)
    if either model carries extra or private values, which the builder does
    not reproduce, or where Events have no `node_info` (1.x)."""
    if NodeInfo is None:
        return None
    values, fields_set = _template_parts()
    node = NodeInfo()
    if node.__pydantic_extra__ is not None or node.__pydantic_private__ is not None:
        return None
    node_parts = (dict(node.__dict__), frozenset(node.model_fields_set))
    return Event, values, fields_set, NodeInfo, *node_parts


def ids_unobservable() -> bool:
    """Whether drawing an event id is unobservable: the default provider,
    `uuid4` from the OS's entropy, whose draws nobody can tell apart or
    count. A custom provider sees every draw, so then every summary is
    built (drawing its id) as google-adk builds it."""
    return _platform_uuid._id_provider_context_var.get() is _platform_uuid._default_id_provider


def _is_optional_str(value: object) -> bool:
    return value is None or type(value) is str


def summary_event(event: Event, author: str) -> Event:
    """google-adk's materialized summary of the compaction event `event`."""
    fields = event.__dict__
    actions = fields["actions"]
    compaction = actions.compaction
    timestamp = compaction.end_timestamp
    content = compaction.compacted_content
    branch = fields["branch"]
    isolation_scope = fields["isolation_scope"] if _SCOPED else None
    invocation_id = fields["invocation_id"]
    if not (
        type(timestamp) is float
        and type(author) is str
        and type(content) is Content
        and type(actions) is EventActions
        and type(invocation_id) is str
        and _is_optional_str(branch)
        and _is_optional_str(isolation_scope)
    ):
        scope: dict[str, Any] = {"isolation_scope": isolation_scope} if _SCOPED else {}
        return Event(
            timestamp=timestamp,
            author=author,
            content=content,
            branch=branch,
            **scope,
            invocation_id=invocation_id,
            actions=actions,
        )
    template, fields_set = _template_parts()
    values = template.copy()
    values["timestamp"] = timestamp
    values["author"] = author
    values["content"] = content
    values["branch"] = branch
    if _SCOPED:
        values["isolation_scope"] = isolation_scope
    values["invocation_id"] = invocation_id
    values["actions"] = actions
    if NodeInfo is not None:
        values["node_info"] = NodeInfo()
    summary = _new(Event)
    _setattr(summary, "__dict__", values)
    _setattr(summary, "__pydantic_fields_set__", set(fields_set))
    _setattr(summary, "__pydantic_extra__", None)
    _setattr(summary, "__pydantic_private__", None)
    # model_post_init: the id is drawn last, as validation draws it.
    values["id"] = Event.new_id()
    return summary
