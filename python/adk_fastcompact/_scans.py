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
from ._patch import as_replaced

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
#: `_BranchPath` (segments, equality, descent), as the branch tests read it.
_BRANCH_PATH = {"google.adk.events._branch_path": {"_BranchPath": "2e9603cd34fba17a"}}


@dataclasses.dataclass(frozen=True)
class DropIn:
    """One google-adk function and the native drop-in that answers for it."""

    #: google-adk's function: a module-level name, or `Class.method`.
    name: str
    #: The module defining it.
    module: str
    #: module -> {definition: digest}: the code the drop-in reproduces
    #: (`_fingerprint.fingerprints` of the named roots must equal it; a
    #: `Class.method` key is that method alone).
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

    return as_replaced(_collect_function_call_ids, original)


def _context_events(original: Callable[..., Any], module: Any) -> Callable[..., Any]:
    from google.adk.models.llm_response import LlmResponse

    methods = (LlmResponse.get_function_calls, LlmResponse.get_function_responses)
    single_turn = module.AgentMode.SINGLE_TURN

    def _get_events(
        self: Any, *, current_invocation: bool = False, current_branch: bool = False
    ) -> Any:
        events = self.session.events
        if not (current_invocation or current_branch):
            return events
        kept = None
        # A single-turn node's path test stays google-adk's.
        if not (
            current_branch and getattr(self.agent, "mode", None) == single_turn and self.node_path
        ):
            kept = _native.context_events(
                events,
                self.invocation_id,
                self.branch,
                bool(current_invocation),
                bool(current_branch),
                methods,
            )
        if kept is None:
            return original(
                self, current_invocation=current_invocation, current_branch=current_branch
            )
        return kept

    return as_replaced(_get_events, original)


def _append_event(original: Callable[..., Any], module: Any) -> Callable[..., Any]:
    """`InMemorySessionService.append_event` with its re-delivery test (an
    equal event with the same id already stored) read natively; every other
    step is google-adk's, in google-adk's order."""
    service_class = module.InMemorySessionService

    async def append_event(self: Any, session: Any, event: Any) -> Any:
        if event.partial:
            return event
        app_name = session.app_name
        user_id = session.user_id
        session_id = session.id
        if session_id not in self.sessions.get(app_name, {}).get(user_id, {}):
            raise module.SessionNotFoundError(f"Session {session_id} not found.")
        stored = self.sessions[app_name][user_id][session_id]
        again = _native.stored_again(stored.events, event)
        if again is None:
            again = any(e == event for e in stored.events if e.id == event.id)
        if again:
            return event
        await super(service_class, self).append_event(session=session, event=event)
        session.last_update_time = event.timestamp
        if stored is not session:
            stored.events.append(event)
            stored.last_update_time = event.timestamp
        if event.actions and event.actions.state_delta:
            deltas = module._session_util.extract_state_delta(event.actions.state_delta)
            app, user, own = deltas["app"], deltas["user"], deltas["session"]
            if app:
                self.app_state.setdefault(app_name, {}).update(app)
            if user:
                self.user_state.setdefault(app_name, {}).setdefault(user_id, {}).update(user)
            if own:
                stored.state.update(own)
        return event

    return as_replaced(append_event, original)


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
            **_BRANCH_PATH,
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
        name="InvocationContext._get_events",
        module="google.adk.agents.invocation_context",
        prints={
            "google.adk.agents.invocation_context": {
                "InvocationContext._get_events": "ba110e5d1723fdea"
            },
            **_BRANCH_PATH,
            **_LLM_RESPONSE,
        },
        make=_context_events,
    ),
    DropIn(
        name="InMemorySessionService.append_event",
        module="google.adk.sessions.in_memory_session_service",
        prints={
            "google.adk.sessions.in_memory_session_service": {
                "InMemorySessionService.append_event": "54f2540cefc7b665"
            },
        },
        make=_append_event,
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
        members = {key: value for key, value in expected.items() if "." in key}
        for key, value in members.items():
            owner, member = key.split(".", 1)
            if _fingerprint.member_fingerprint(module, owner, member) != value:
                return False
        rest = {key: value for key, value in expected.items() if key not in members}
        if not rest:
            continue
        roots = [name for name in rest if name == drop_in.name] or list(rest)
        if _fingerprint.fingerprints(module, roots) != rest:
            return False
    return True


# Drop-in name -> `matches()`, decided once per process (`install()` may run
# before every turn, as the bench does; the sources do not change meanwhile).
_verdicts: dict[str, bool] = {}


def _matches_here(drop_in: DropIn) -> bool:
    if drop_in.name not in _verdicts:
        _verdicts[drop_in.name] = matches(drop_in)
    return _verdicts[drop_in.name]


def _holder(drop_in: DropIn) -> tuple[Any, str]:
    """The object holding google-adk's function (its module, or the class
    of a method) and the attribute's name."""
    holder: Any = importlib.import_module(drop_in.module)
    *owners, name = drop_in.name.split(".")
    for owner in owners:
        holder = getattr(holder, owner)
    return holder, name


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
        if not _matches_here(drop_in):
            continue
        holder, attr = _holder(drop_in)
        bound = vars(holder)[attr] if isinstance(holder, type) else getattr(holder, attr)
        original = ours.get(id(bound), bound)
        if id(original) not in _made:
            module = importlib.import_module(drop_in.module)
            _made[id(original)] = (original, drop_in.make(original, module))
        found[drop_in.name] = _made[id(original)]
    return found


#: `(holder, attribute, google-adk's function)` of every binding `bind`
#: made and its undo has not restored yet.
bound: list[tuple[Any, str, Any]] = []


def bind(rebind: Callable[[dict[int, Any]], list[tuple[Any, str, Any]]]) -> Callable[[], None]:
    """Binds every drop-in whose code the installed google-adk has: module
    functions wherever google-adk's modules hold them (`rebind`, as
    `_patch.rebind`), methods on their class (recorded in `bound`). Returns
    what undoes it (restoring only bindings that are still ours)."""
    found = pairs()
    done: list[tuple[Any, str, Any]] = []
    functions: dict[int, Any] = {}
    for name, (original, new) in found.items():
        if "." in name:
            holder, attr = _holder(next(d for d in DROP_INS if d.name == name))
            setattr(holder, attr, new)
            done.append((holder, attr, original))
        else:
            functions[id(original)] = (original, new)
    done += rebind(functions)
    bound.extend(done)
    ours = {id(new) for _, new in found.values()}

    def undo() -> None:
        while done:
            holder, attr, original = done.pop()
            bound.remove((holder, attr, original))
            if isinstance(holder, type):
                current = vars(holder).get(attr)
            else:
                current = getattr(holder, attr, None)
            if id(current) in ours:
                setattr(holder, attr, original)

    return undo


def active() -> dict[str, bool]:
    """Each drop-in's google-adk function name -> whether the installed
    google-adk has the code it reproduces (whether `install()` binds it)."""
    return {drop_in.name: _matches_here(drop_in) for drop_in in DROP_INS}
