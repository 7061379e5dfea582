"""Lean loading against full loading, through google-adk's real `Runner` on
`InMemorySessionService`: one conversation run several times, each from a
new service with the same deterministic ids and clock, under one of
`LOADINGS`, and everything the runs show recorded for comparison
(`lean_run`).

What a run records, whatever app it drives:

- every model request an agent's flow makes (`BaseLlmFlow._call_llm_async`,
  wrapped at class level): the agent, the model, the contents, the system
  instruction and the tools, as JSON;
- every event appended to the service (`append_event` on the instance: the
  user's messages, the agents' events, the compaction events), as JSON;
- every compaction google-adk asked a summary for
  (`compaction._summarize_events_with_trace`): its trigger and the ids of
  the events handed to the summarizer;
- the final stored session;
- every session `get_session` handed out: how many events it held, how many
  the stored session held at that moment, and whether the call asked for a
  lean load (a `LeanSessionConfig`, as the Runner's own load does under
  lean loading).

So a lean run that loaded the whole session, or a direct `get_session` or
`rewind_async` load that came back lean, shows in `loads`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import adk_fastcompact
import pytest
from adk_fastcompact import LeanSessionConfig
from google.adk.agents.run_config import RunConfig
from google.adk.apps import compaction as adk_compaction
from google.adk.events.event import Event
from google.adk.flows.llm_flows.base_llm_flow import BaseLlmFlow
from google.adk.models.llm_request import LlmRequest
from google.adk.runners import Runner
from google.adk.sessions.in_memory_session_service import InMemorySessionService

from support.runner_harness import (
    EXPECTED_WARNINGS,
    deterministic,
    first_difference,
    stepped_clock,
)

#: How a run loads its sessions:
#: - "full": plain google-adk, nothing installed (the oracle);
#: - "lean": `install(loading="lean")`;
#: - "config": `install()`, and every `run_async` given
#:   `RunConfig(get_session_config=LeanSessionConfig())`;
#: - "installed": `install()` alone (full loading, accelerated: the control
#:   that tells a difference lean loading makes from one `install()` makes).
LOADINGS = ("full", "lean", "config", "installed")

IGNORED = (
    *EXPECTED_WARNINGS,
    (DeprecationWarning, r"(ParallelAgent|LoopAgent) is deprecated"),
    (UserWarning, r"can transfer between agents but has no context_cache_config"),
)


@dataclass(frozen=True)
class Load:
    """One session `get_session` handed out."""

    #: Events in the session handed out.
    handed: int
    #: Events in the stored session at that moment.
    stored: int
    #: The call passed a `LeanSessionConfig` (the Runner's load of a lean run).
    lean: bool


@dataclass
class Recorded:
    """What one run showed (compared between runs), and how it loaded (not
    compared)."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    appended: list[dict[str, Any]] = field(default_factory=list)
    compactions: list[dict[str, Any]] = field(default_factory=list)
    stored: list[dict[str, Any]] = field(default_factory=list)
    #: What the conversation returned (its own log), when it is comparable.
    returned: Any = None
    loads: list[Load] = field(default_factory=list)
    #: `adk_fastcompact.loading_stats()` after the run.
    stats: dict[str, int] = field(default_factory=dict)


def _request(agent: str, request: LlmRequest) -> dict[str, Any]:
    config = request.config
    return {
        "agent": agent,
        "model": request.model,
        "contents": [c.model_dump(mode="json", exclude_none=True) for c in request.contents],
        "system_instruction": str(config.system_instruction) if config else None,
        "tools": sorted(request.tools_dict),
    }


@contextmanager
def _replaced(owner: Any, name: str, value: Any) -> Iterator[None]:
    """`owner.name` is `value` inside (and what it was after)."""
    before = owner.__dict__[name]
    setattr(owner, name, value)
    try:
        yield
    finally:
        assert owner.__dict__[name] is value, f"{owner.__name__}.{name} replaced meanwhile"
        setattr(owner, name, before)


@contextmanager
def _recording(found: Recorded) -> Iterator[None]:
    """Records the model requests and the summaries asked for meanwhile."""
    call_llm = BaseLlmFlow.__dict__["_call_llm_async"]

    async def recorded_call(
        self: Any, invocation_context: Any, llm_request: LlmRequest, model_response_event: Event
    ) -> AsyncGenerator[Any, None]:
        found.requests.append(_request(invocation_context.agent.name, llm_request))
        async for response in call_llm(self, invocation_context, llm_request, model_response_event):
            yield response

    summarize = adk_compaction._summarize_events_with_trace

    async def recorded_summary(**kwargs: Any) -> Event | None:
        out = await summarize(**kwargs)
        found.compactions.append(
            {
                "trigger": kwargs["trigger"],
                "compacted": [e.id for e in kwargs["events_to_compact"]],
                "summary": None if out is None else out.model_dump(mode="json"),
            }
        )
        return out

    with (
        _replaced(BaseLlmFlow, "_call_llm_async", recorded_call),
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setattr(adk_compaction, "_summarize_events_with_trace", recorded_summary)
        yield


def watch(service: InMemorySessionService, found: Recorded) -> None:
    """Records on `found` every event `service` appends and every session
    its `get_session` hands out (wrapped on the instance, as the Runner
    calls it: `self.session_service.<name>`; the wrappers call the class's
    methods as they are at the call)."""
    # Looked up on the class at call time: install() may patch it meanwhile.
    kind = type(service)

    async def recorded_get(**kwargs: Any) -> Any:
        session = await kind.get_session(service, **kwargs)
        if session is not None:
            stored = service.sessions[kwargs["app_name"]][kwargs["user_id"]][kwargs["session_id"]]
            lean = isinstance(kwargs.get("config"), LeanSessionConfig)
            found.loads.append(Load(len(session.events), len(stored.events), lean))
        return session

    async def recorded_append(session: Any, event: Event) -> Event:
        out = await kind.append_event(service, session, event)
        if not event.partial:
            found.appended.append(event.model_dump(mode="json"))
        return out

    service.get_session = recorded_get  # type: ignore[method-assign]
    service.append_event = recorded_append  # type: ignore[method-assign]


def _with_lean_config(run_async: Any) -> Any:
    """`Runner.run_async` given `RunConfig(get_session_config=LeanSessionConfig())`
    (the caller's run config otherwise kept)."""

    async def run(self: Any, **kwargs: Any) -> AsyncGenerator[Event, None]:
        given = kwargs.get("run_config") or RunConfig()
        kwargs["run_config"] = given.model_copy(update={"get_session_config": LeanSessionConfig()})
        async for event in run_async(self, **kwargs):
            yield event

    return run


def _installing_at(run_async: Any, turn: int, mode: str) -> Any:
    """`Runner.run_async` that calls `install(loading="lean")` before the
    run `turn` (counted from 0): the runs before it are plain google-adk's."""
    runs = iter(range(1 << 30))

    async def run(self: Any, **kwargs: Any) -> AsyncGenerator[Event, None]:
        if next(runs) == turn:
            assert adk_fastcompact.install(mode, loading="lean") is True
        async for event in run_async(self, **kwargs):
            yield event

    # install() hooks a `run_async` only where it takes google-adk's
    # parameters (else it leaves lean loading off, logged).
    run.__signature__ = inspect.signature(run_async, follow_wrapped=False)  # type: ignore[attr-defined]
    return run


Converse = Callable[[InMemorySessionService], Awaitable[Any]]


def lean_run(
    converse: Converse,
    loading: str,
    *,
    clock: Callable[[], float],
    install_at: int = 0,
    mode: str = "parity",
) -> Recorded:
    """Runs `converse` on a new `InMemorySessionService`, deterministically
    (ids from a counter, time from `clock`), loading as `loading` says (see
    `LOADINGS`), and returns what it recorded. `install_at`: a "lean" run
    installs before the Runner's run of that number (a store written by
    plain google-adk until then). `mode`: what `install` is given. `converse`
    must leave one session in the service."""
    assert loading in LOADINGS, loading
    found = Recorded()
    adk_fastcompact.uninstall()
    adk_fastcompact.loading_stats(reset=True)

    async def main() -> None:
        service = InMemorySessionService()
        watch(service, found)
        with deterministic(clock):
            found.returned = await converse(service)
        ((app, users),) = service.sessions.items()
        ((user, sessions),) = users.items()
        ((_, stored),) = sessions.items()
        found.stored = [e.model_dump(mode="json") for e in stored.events]
        del app, user

    run_async = Runner.__dict__["run_async"]
    with warnings.catch_warnings(), _recording(found), contextlib.ExitStack() as stack:
        for category, message in IGNORED:
            warnings.filterwarnings("ignore", message=message, category=category)
        # Undone in reverse: install() wraps whatever `Runner.run_async` is
        # and restores it only while its wrapper is on top, so a wrapper
        # put on before it comes off after `uninstall`, one put on after it
        # before.
        if loading == "lean" and install_at:
            wrapper = _installing_at(run_async, install_at, mode)
            stack.enter_context(_replaced(Runner, "run_async", wrapper))
            stack.callback(adk_fastcompact.uninstall)
        else:
            stack.callback(adk_fastcompact.uninstall)
            if loading == "lean":
                assert adk_fastcompact.install(mode, loading="lean") is True
            elif loading in ("installed", "config"):
                assert adk_fastcompact.install(mode) is True
            if loading == "config":
                wrapper = _with_lean_config(Runner.__dict__["run_async"])
                stack.enter_context(_replaced(Runner, "run_async", wrapper))
        asyncio.run(main())
    assert Runner.__dict__["run_async"] is run_async, "Runner.run_async left replaced"
    found.stats = adk_fastcompact.loading_stats(reset=True)
    return found


def assert_identical(full: Recorded, other: Recorded, name: str) -> None:
    """Every request, appended event, compaction and the stored session of
    `other` are `full`'s."""
    for what in ("requests", "compactions", "appended", "stored", "returned"):
        a, b = getattr(full, what), getattr(other, what)
        if a != b:
            pytest.fail(f"{name}: {what} differ at {first_difference(a, b, what)}")


#: The whole load a lean run of an app with an `AgentTool` falls back to: the
#: tool's inner Runner runs an app without compaction.
INNER_RUNNER = "full: no compaction configured"


def assert_loaded_lean(
    run: Recorded, *, fewer: bool = True, fallbacks: tuple[str, ...] = ()
) -> None:
    """`run` made lean loads (counted by `loading_stats`), and with `fewer`
    at least one held fewer events than the stored session (it did not pass
    by loading everything); every load that did not ask for a lean one (a
    direct `get_session`, `rewind_async`) held the whole session. A whole
    load a lean run fell back to is one of `fallbacks` (`loading_stats` keys)."""
    lean = [load for load in run.loads if load.lean]
    assert run.stats.get("lean", 0) > 0, run.stats
    assert run.stats.get("lean") == len(lean), (run.stats, len(lean))
    assert {key for key in run.stats if key != "lean"} <= set(fallbacks), run.stats
    if fewer:
        assert any(load.handed < load.stored for load in lean), lean
    whole = [load for load in run.loads if not load.lean]
    assert all(load.handed == load.stored for load in whole), whole


def comparable(found: Any) -> dict[str, Any]:
    """What a conversation returned that two runs must agree on."""
    return {
        "requests": found.requests,
        "responses": found.responses,
        "yielded": found.yielded,
        "log": found.log,
    }


def compare(converse: Callable[[InMemorySessionService], Any], name: str) -> Recorded:
    """Runs `converse` with full loading, then lean and with
    `LeanSessionConfig`; asserts the runs identical and lean; returns the
    full run."""
    full = lean_run(converse, "full", clock=stepped_clock(0.25))
    for loading in ("lean", "config"):
        run = lean_run(converse, loading, clock=stepped_clock(0.25))
        assert_identical(full, run, f"{name} ({loading})")
        assert_loaded_lean(run, fallbacks=(INNER_RUNNER,))
    return full


def events_of(run: Recorded) -> list[Event]:
    return [Event.model_validate(dump) for dump in run.stored]
