"""Three of exact mode's scenarios through a real `Runner`: a `ParallelAgent`
whose slower branch is stamped before the faster one but stored after it
(`run_parallel`), an event another invocation appends to a SQLite
session while the summarizer runs (`run_sqlite_append_during_summary`), and
a question stored after a compaction but stamped by a clock behind the
compacting process's (`run_skewed`). `tests/exact/test_exact_scenarios.py`
and `tests/exact/test_exact_clocks.py` check them; the audit's tests write
their stores with the first two.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import warnings
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import adk_fastcompact
from google.adk.agents.llm_agent import LlmAgent
from google.adk.agents.parallel_agent import ParallelAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.flows.llm_flows.context import _contents
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.platform import time as platform_time
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types
from pydantic import Field, PrivateAttr

from support.exact_llm import SUMMARY, TaggingLlm, event_tags, tags
from support.exact_runs import ManualClock, Run, Turn, chat
from support.runner_harness import EXPECTED_WARNINGS, deterministic, stepped_clock

USER, SESSION = "u", "s"


IGNORED = (*EXPECTED_WARNINGS, (DeprecationWarning, r"ParallelAgent is deprecated"))


class BranchLlm(TaggingLlm):
    """A `TaggingLlm` whose answers carry `suffix` (`<<m3s>>`), so that two
    agents answering one question write different tags.

    Given a shared `gate`, a `waits` model answers only once the other model
    has had its answer consumed (its reply event appended: the flow asks a
    model for more only after the runner took the event), or after a second
    at most."""

    suffix: str = ""
    waits: bool = False
    _gate: asyncio.Event | None = PrivateAttr(default=None)

    def gate(self, gate: asyncio.Event) -> None:
        self._gate = gate

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        gate = self._gate
        if gate is not None and self.waits:
            # google-adk made (stamped) this reply's event before calling.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(gate.wait(), 1.0)
            gate.clear()
        async for response in super().generate_content_async(llm_request, stream):
            yield response
        if gate is not None and not self.waits:
            gate.set()

    def _answer(self, contents: list[types.Content], n: int) -> list[types.Part]:
        return [
            types.Part(text=part.text.replace(">>", f"{self.suffix}>>", 1)) if part.text else part
            for part in super()._answer(contents, n)
        ]


class PausingSummarizer(TaggingLlm):
    """The summarizer, pausing at its `pause_at`-th call: it sets `paused`
    and waits for `resume` before it summarizes; `window` is then the tags
    of that call's input."""

    pause_at: int = 0
    window: set[str] = Field(default_factory=set)
    _paused: asyncio.Event | None = PrivateAttr(default=None)
    _resume: asyncio.Event | None = PrivateAttr(default=None)
    _calls: int = PrivateAttr(default=0)

    def arm(self) -> tuple[asyncio.Event, asyncio.Event]:
        self._paused, self._resume = asyncio.Event(), asyncio.Event()
        return self._paused, self._resume

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self._calls += 1
        if self._calls == self.pause_at and self._paused and self._resume:
            self.window = tags(llm_request.model_dump_json())
            self._paused.set()
            await self._resume.wait()
        async for response in super().generate_content_async(llm_request, stream):
            yield response


def _visible(events: list[Event], branch: str | None) -> set[str]:
    """The tags of the stored events an agent on `branch` is shown."""
    return set().union(
        *(event_tags(e) for e in events if _contents._is_event_belongs_to_branch(branch, e))
    )


async def _converse(
    runner: Runner,
    service: BaseSessionService,
    messages: list[str | tuple[str, ...]],
    agents: dict[str, TaggingLlm],
    out: Run,
) -> list[Event]:
    """Sends `messages` one at a time and checks, of every agent, the first
    request it made in that turn against the session as stored before it
    (the events its branch is shown, plus the question); then reads the
    final session with google-adk's own prompt assembly, uninstalled."""
    app_name = runner.app_name
    branches: dict[str, str | None] = {}
    stored: list[Event] = []
    for message in messages:
        assert isinstance(message, str)
        firsts = {name: len(llm.requests) for name, llm in agents.items()}
        content = types.Content(role="user", parts=[types.Part(text=message)])
        async for _ in runner.run_async(user_id=USER, session_id=SESSION, new_message=content):
            pass
        session = await service.get_session(app_name=app_name, user_id=USER, session_id=SESSION)
        assert session is not None
        for event in session.events:
            if event.author in agents:
                branches.setdefault(event.author, event.branch)
        for name, llm in agents.items():
            if len(llm.requests) == firsts[name]:
                continue
            request = llm.requests[firsts[name]]
            expected = _visible(stored, branches.get(name)) | tags(message)
            lost, duplicated = llm.ledger.check(request, expected)
            out.turns.append(
                Turn(
                    lost,
                    duplicated,
                    len(json.dumps(request)),
                    sum(bool(SUMMARY.search(json.dumps(c))) for c in request),
                )
            )
        stored = list(session.events)
    adk_fastcompact.uninstall()
    ledger = next(iter(agents.values())).ledger
    for name in agents:
        branch = branches.get(name)
        contents = _contents._get_contents(branch, stored, agent_name=name)
        dumped = [c.model_dump(mode="json", exclude_none=True) for c in contents]
        lost, duplicated = ledger.check(dumped, _visible(stored, branch))
        out.plain_lost |= lost
        out.plain_duplicated |= duplicated
    compaction_events = [e for e in stored if e.actions and e.actions.compaction]
    out.compactions = len(compaction_events)
    out.records = sum("adk_fastcompact" in (e.custom_metadata or {}) for e in compaction_events)
    return stored


def _run(main: Any, mode: str | None) -> None:
    adk_fastcompact.uninstall()
    if mode is not None:
        assert adk_fastcompact.install(mode=mode) is True
    try:
        with warnings.catch_warnings():
            for category, message in IGNORED:
                warnings.filterwarnings("ignore", message=message, category=category)
            asyncio.run(main())
    finally:
        adk_fastcompact.uninstall()


def run_parallel(
    config: EventsCompactionConfig, turns: int, *, mode: str | None
) -> tuple[Run, list[Event]]:
    """`turns` questions to a ParallelAgent of two branches, and the final
    session's events. `slow` is listed first, so its model call starts first
    and its reply event is made (stamped) first; it answers once `fast`'s
    reply is appended, so its reply is stored after one stamped later."""
    summarizer_llm = TaggingLlm(model="summarizer")
    slow = BranchLlm(model="root", suffix="s", waits=True)
    fast = BranchLlm(model="root", suffix="f")
    for llm in (slow, fast):
        llm.share(summarizer_llm)
    config = config.model_copy(update={"summarizer": LlmEventSummarizer(llm=summarizer_llm)})
    root = ParallelAgent(
        name="par",
        sub_agents=[
            LlmAgent(name="slow", model=slow, instruction="Answer."),
            LlmAgent(name="fast", model=fast, instruction="Answer."),
        ],
    )
    app = App(name="parallel", root_agent=root, events_compaction_config=config)
    out = Run()
    final: list[Event] = []

    async def main() -> None:
        with deterministic(stepped_clock(0.25)):
            service = InMemorySessionService()
            await service.create_session(app_name=app.name, user_id=USER, session_id=SESSION)
            runner = Runner(app=app, session_service=service)
            gate = asyncio.Event()
            slow.gate(gate)
            fast.gate(gate)
            final.extend(
                await _converse(runner, service, chat(turns), {"slow": slow, "fast": fast}, out)
            )

    _run(main, mode)
    return out, final


FOREIGN = "u900"


@dataclass
class Foreign:
    """What became of the event another invocation appended."""

    stamp: float = 0.0
    #: The google-adk interval of the compaction whose summarizer paused.
    interval: tuple[float, float] = (0.0, 0.0)
    #: The exact-mode record of that compaction (None in google-adk's mode).
    record: dict[str, Any] | None = None
    #: Of every later request: "raw", "summarized" or "absent".
    later: list[str] = field(default_factory=list)


def run_sqlite_append_during_summary(
    db: Path, config: EventsCompactionConfig, turns: int, *, mode: str | None
) -> tuple[Run, Foreign]:
    """`turns` questions on a SQLite session. While the second summary is
    being written (the summarizer pauses), another invocation appends an
    event through a session object it fetched itself, stamped inside the
    window being summarized: between the last two stored events the
    summarizer was handed."""
    summarizer_llm = PausingSummarizer(model="summarizer", pause_at=2)
    llm = TaggingLlm(model="root")
    llm.share(summarizer_llm)
    config = config.model_copy(update={"summarizer": LlmEventSummarizer(llm=summarizer_llm)})
    agent = LlmAgent(name="root", model=llm, instruction="Answer.")
    app = App(name="sqlite", root_agent=agent, events_compaction_config=config)
    out, foreign = Run(), Foreign()
    requests_before = 0

    async def main() -> None:
        nonlocal requests_before
        with deterministic(stepped_clock(0.25)):
            service = SqliteSessionService(str(db))
            await service.create_session(app_name=app.name, user_id=USER, session_id=SESSION)
            runner = Runner(app=app, session_service=service)
            paused, resume = summarizer_llm.arm()

            async def other_invocation() -> None:
                nonlocal requests_before
                await paused.wait()
                requests_before = len(llm.requests)
                session = await service.get_session(
                    app_name=app.name, user_id=USER, session_id=SESSION
                )
                assert session is not None
                handed = [e for e in session.events if event_tags(e) & summarizer_llm.window]
                before, last = handed[-2:]
                foreign.stamp = (before.timestamp + last.timestamp) / 2
                event = Event(
                    invocation_id="e-other",
                    author="user",
                    content=types.Content(
                        role="user", parts=[types.Part(text=f"<<{FOREIGN}>> from elsewhere")]
                    ),
                    timestamp=foreign.stamp,
                )
                await service.append_event(session, event)
                resume.set()

            other = asyncio.ensure_future(other_invocation())
            try:
                stored = await _converse(runner, service, chat(turns), {"root": llm}, out)
            finally:
                resume.set()
                if not paused.is_set():  # the second summary never came
                    other.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await other
            for event in stored:
                compaction = event.actions.compaction if event.actions else None
                text = compaction.compacted_content.model_dump_json() if compaction else ""
                if compaction and "<<s2>>" in text:
                    foreign.interval = (compaction.start_timestamp, compaction.end_timestamp)
                    foreign.record = (event.custom_metadata or {}).get("adk_fastcompact")

    _run(main, mode)
    for request in llm.requests[requests_before:]:
        raw, summarized = set(), set()
        for content in request:
            text = json.dumps(content)
            names = SUMMARY.findall(text)
            for name in names:
                summarized |= llm.ledger.stands_for[name]
            raw |= set() if names else tags(text)
        found = "raw" if FOREIGN in raw else "summarized" if FOREIGN in summarized else "absent"
        foreign.later.append(found)
    return out, foreign


SQLITE_CONFIGS: dict[str, dict[str, int]] = {
    # Both strategies; the paused (second) summary is a sliding window's,
    # which exact mode yields and the runner appends.
    "sliding_window": {
        "compaction_interval": 2,
        "overlap_size": 0,
        "token_threshold": 300,
        "event_retention_size": 1,
    },
    # Tail retention: exact mode appends the compaction itself, through the
    # session object the runner holds.
    "token_threshold": {"token_threshold": 250, "event_retention_size": 1},
}


# -- a clock other than the compacting process's ---------------------------------------


@dataclass
class Skewed:
    """What plain google-adk made of the turn stamped by the other clock."""

    #: The question's stamp and the compaction's bounds and record.
    stamp: float = 0.0
    bounds: tuple[float, float] = (0.0, 0.0)
    record: dict[str, Any] = field(default_factory=dict)
    #: Tags missing from, and repeated in, the other clock's own model
    #: request (the Runner's, accelerator uninstalled) and the final
    #: session's prompt (`_contents._get_contents`, uninstalled).
    request_lost: set[str] = field(default_factory=set)
    request_duplicated: set[str] = field(default_factory=set)
    plain_lost: set[str] = field(default_factory=set)
    plain_duplicated: set[str] = field(default_factory=set)
    #: The final session's prompt as exact mode reads it (re-installed).
    exact_lost: set[str] = field(default_factory=set)


def run_skewed(
    kind: str, db: Path, *, behind: float | None, clock_skew: float | None, pause: float = 0.2
) -> Skewed:
    """Two turns ten seconds apart in exact mode (`install(mode="exact",
    clock_skew=clock_skew)`), the sliding window compacting both after the
    second; `pause` seconds later a third question is asked through a
    Runner with the accelerator uninstalled (another replica running plain
    google-adk), on a clock `behind` seconds behind this one, or (`behind`
    None) every event of it stamped by the application with the stamp of
    the last summarized event. `kind`: "memory" or "sqlite" (on `db`)."""
    summarizer_llm = TaggingLlm(model="summarizer")
    llm = TaggingLlm(model="root")
    llm.share(summarizer_llm)
    config = EventsCompactionConfig(
        compaction_interval=2,
        overlap_size=0,
        summarizer=LlmEventSummarizer(llm=summarizer_llm),
    )
    agent = LlmAgent(name="root", model=llm, instruction="Answer.")
    app = App(name="skewed", root_agent=agent, events_compaction_config=config)
    out = Skewed()
    clock = ManualClock()

    def message(text: str) -> types.Content:
        return types.Content(role="user", parts=[types.Part(text=text)])

    async def ask(runner: Runner, text: str) -> None:
        events = runner.run_async(user_id=USER, session_id=SESSION, new_message=message(text))
        async for _ in events:
            pass

    async def main() -> None:
        with deterministic(clock):
            service: BaseSessionService = (
                SqliteSessionService(str(db)) if kind == "sqlite" else InMemorySessionService()
            )
            await service.create_session(app_name=app.name, user_id=USER, session_id=SESSION)
            runner = Runner(app=app, session_service=service)
            await ask(runner, "<<u1>> tell me more")
            clock.jump(10.0)
            await ask(runner, "<<u2>> tell me more")
            session = await service.get_session(app_name=app.name, user_id=USER, session_id=SESSION)
            assert session is not None
            (compaction_event,) = [e for e in session.events if e.actions.compaction]
            compaction = compaction_event.actions.compaction
            assert compaction is not None
            out.bounds = (compaction.start_timestamp or 0.0, compaction.end_timestamp or 0.0)
            out.record = dict((compaction_event.custom_metadata or {})["adk_fastcompact"])
            clock.jump(pause)
            adk_fastcompact.uninstall()
            last = float(out.record["end"])
            platform_time.set_time_provider(
                (lambda: last) if behind is None else (lambda: clock() - behind)
            )
            first = len(llm.requests)
            await ask(Runner(app=app, session_service=service), "<<u3>> tell me more")
            platform_time.set_time_provider(clock)
            session = await service.get_session(app_name=app.name, user_id=USER, session_id=SESSION)
            assert session is not None
            (question,) = [e for e in session.events if "u3" in event_tags(e)]
            out.stamp = question.timestamp
            stored = set().union(*(event_tags(e) for e in session.events))
            before = stored - {"m3"}
            out.request_lost, out.request_duplicated = llm.ledger.check(llm.requests[first], before)
            contents = _contents._get_contents(None, session.events, agent_name="root")
            dumped = [c.model_dump(mode="json", exclude_none=True) for c in contents]
            out.plain_lost, out.plain_duplicated = llm.ledger.check(dumped, stored)
            assert adk_fastcompact.install(mode="exact") is True
            contents = _contents._get_contents(None, session.events, agent_name="root")
            dumped = [c.model_dump(mode="json", exclude_none=True) for c in contents]
            out.exact_lost, _ = llm.ledger.check(dumped, stored)

    adk_fastcompact.uninstall()
    assert adk_fastcompact.install(mode="exact", clock_skew=clock_skew) is True
    try:
        with warnings.catch_warnings():
            for category, text in IGNORED:
                warnings.filterwarnings("ignore", message=text, category=category)
            asyncio.run(main())
    finally:
        adk_fastcompact.uninstall()
    return out
