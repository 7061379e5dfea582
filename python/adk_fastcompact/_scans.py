"""Native drop-ins for the scans google-adk's prompt assembly makes over
every event of a session on every model call.

`_get_contents` tests every event with `_should_include_event_in_context`
and gathers every function call id with `_collect_function_call_ids`; on a
long session these per-event Python loops cost more than the compaction
they surround. Each drop-in here decides the same thing natively
(`_native.ContextFilter`, `_native.function_call_ids`; the decisions are in
`core::scans`) and hands anything it does not read like google-adk's own
models to google-adk's function (counted in `decline_counts()`, logged once).
The same holds for the two scans every turn makes for task agents:
`runners._find_active_task_scope` and
`_llm_agent_wrapper._find_unresolved_task_delegations`
(`_native.TaskScope`, `_native.TaskDelegations`; decisions in
`core::tasks`), which call `_apply_rewinds` as google-adk's functions do.

A drop-in reproduces one version of google-adk's code, so it is bound only
where the installed source has exactly that code: the function and every
module-level helper it reaches (`_fingerprint`), and the definitions it
relies on elsewhere (`_BranchPath`, `LlmResponse`, `_is_abort_event`).
Constants a drop-in compares with are read from google-adk's modules when
it is made. Anywhere else google-adk's function stays, and `active()` says
so. Bound in both modes (no compaction decision is involved); see
docs/prompt-scans.md.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

from . import _fingerprint, _native

_CONTENTS = "google.adk.flows.llm_flows.context._contents"
_FUNCTIONS = "google.adk.flows.llm_flows.tools._functions"
_RUNNERS = "google.adk.runners"
_ABORTS = "google.adk.events._abort_events"
_WRAPPER = "google.adk.workflow._llm_agent_wrapper"
#: Where `_find_unresolved_task_delegations` imports `_apply_rewinds` and
#: `_TaskAgentTool` from, at every call.
_REWINDS = "google.adk.events._rewind_events"
_AGENT_TOOL = "google.adk.tools.agent_tool"

#: `LlmResponse` (its `get_function_calls` / `get_function_responses`), as
#: the drop-ins read it.
_LLM_RESPONSE = {"google.adk.models.llm_response": {"LlmResponse": "84235c6979f33e3c"}}


@dataclasses.dataclass(frozen=True)
class DropIn:
    """One google-adk function and the native drop-in that answers for it."""

    #: google-adk's module-level function.
    name: str
    #: The module defining it.
    module: str
    #: module -> {definition: digest}: the code the drop-in reproduces
    #: (`_fingerprint.fingerprints` of the named roots must equal it).
    prints: dict[str, dict[str, str]]
    #: Builds the drop-in from google-adk's function and its module.
    make: Callable[[Callable[..., Any], Any], Callable[..., Any]]


def _context_filter(original: Callable[..., Any], module: Any) -> Callable[..., Any]:
    from google.adk.events.event import NodeInfo

    return _native.ContextFilter(  # type: ignore[no-any-return]
        original,
        "adk_framework",
        module.REQUEST_EUC_FUNCTION_CALL_NAME,
        module.REQUEST_CONFIRMATION_FUNCTION_CALL_NAME,
        NodeInfo,
    )


def _call_ids(original: Callable[..., Any], module: Any) -> Callable[..., Any]:
    del module
    from google.adk.models.llm_response import LlmResponse

    method = LlmResponse.get_function_calls

    def _collect_function_call_ids(events: Any) -> Any:
        ids = _native.function_call_ids(events, method)
        return original(events) if ids is None else ids

    _collect_function_call_ids.__qualname__ = original.__qualname__
    _collect_function_call_ids.__doc__ = original.__doc__
    return _collect_function_call_ids


def _task_scope(original: Callable[..., Any], module: Any) -> Callable[..., Any]:
    aborts = importlib.import_module(_ABORTS)
    return _native.TaskScope(  # type: ignore[no-any-return]
        original,
        module,
        module.FINISH_TASK_TOOL_NAME,
        module.FINISH_TASK_SUCCESS_RESULT,
        module.FINISH_TASK_ERROR_RESULT,
        aborts._INVOCATION_ABORTED,
    )


def _task_delegations(original: Callable[..., Any], module: Any) -> Callable[..., Any]:
    del module
    return _native.TaskDelegations(original, _REWINDS, _AGENT_TOOL)  # type: ignore[no-any-return]


DROP_INS: tuple[DropIn, ...] = (
    DropIn(
        name="_should_include_event_in_context",
        module=_CONTENTS,
        prints={
            _CONTENTS: {
                "_contains_empty_content": "d4b8226ad39dc84c",
                "_is_adk_framework_event": "fccdb822945fe0cf",
                "_is_auth_event": "40bc8543d53b7874",
                "_is_event_belongs_to_branch": "ef20cd77ecf80fc1",
                "_is_function_call_event": "36b4fdf38883a59e",
                "_is_part_invisible": "0eb82994d624fe8b",
                "_is_request_confirmation_event": "b579348ac81e548f",
                "_should_include_event_in_context": "e029531b490044cf",
            },
            "google.adk.events._branch_path": {"_BranchPath": "2e9603cd34fba17a"},
            **_LLM_RESPONSE,
        },
        make=_context_filter,
    ),
    DropIn(
        name="_collect_function_call_ids",
        module=_FUNCTIONS,
        prints={
            _FUNCTIONS: {"_collect_function_call_ids": "f5aa0f83ee9faaff"},
            **_LLM_RESPONSE,
        },
        make=_call_ids,
    ),
    DropIn(
        name="_find_active_task_scope",
        module=_RUNNERS,
        prints={
            _RUNNERS: {"_find_active_task_scope": "9856eaf58a356eb0"},
            _ABORTS: {
                "_INVOCATION_ABORTED": "d8a0e8c686c911f9",
                "_is_abort_event": "27173ee1191c229c",
            },
        },
        make=_task_scope,
    ),
    DropIn(
        name="_find_unresolved_task_delegations",
        module=_WRAPPER,
        prints={_WRAPPER: {"_find_unresolved_task_delegations": "0829c8b94d570d60"}},
        make=_task_delegations,
    ),
)


def matches(drop_in: DropIn) -> bool:
    """Whether the installed google-adk has exactly the code `drop_in`
    reproduces (read from the sources, nothing imported)."""
    for module, expected in drop_in.prints.items():
        roots = [name for name in expected if name == drop_in.name] or list(expected)
        if _fingerprint.fingerprints(module, roots) != expected:
            return False
    return True


# google-adk's function id -> (function, drop-in), made once per function so
# every install binds the same object.
_made: dict[int, tuple[Callable[..., Any], Callable[..., Any]]] = {}


def pairs() -> dict[str, tuple[Callable[..., Any], Callable[..., Any]]]:
    """google-adk's function name -> (its function, the drop-in) for every
    drop-in whose code the installed google-adk has; google-adk's function
    even while the drop-in is bound."""
    ours = {id(new): original for original, new in _made.values()}
    found: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {}
    for drop_in in DROP_INS:
        if not matches(drop_in):
            continue
        module = importlib.import_module(drop_in.module)
        bound = getattr(module, drop_in.name)
        original = ours.get(id(bound), bound)
        if id(original) not in _made:
            _made[id(original)] = (original, drop_in.make(original, module))
        found[drop_in.name] = _made[id(original)]
    return found


def replacements() -> dict[int, tuple[Callable[..., Any], Callable[..., Any]]]:
    """`id(original) -> (original, drop-in)` for every drop-in whose code
    the installed google-adk has (as `_patch.rebind` takes them)."""
    return {id(original): (original, new) for original, new in pairs().values()}


def active() -> dict[str, bool]:
    """Each drop-in's google-adk function name -> whether the installed
    google-adk has the code it reproduces (whether `install()` binds it)."""
    return {drop_in.name: matches(drop_in) for drop_in in DROP_INS}
