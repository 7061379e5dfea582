"""A chat through a real `Runner` in exact mode (`run`), and what it lost,
duplicated and kept bounded turn by turn (`Run`, `Turn`): the bookkeeping of
`tests/exact/test_exact_mode.py`, `tests/exact/test_exact_scenarios.py` and
the audit's stores (`tests/audit/test_audit.py`).
"""

from __future__ import annotations

import asyncio
import json
import warnings
from dataclasses import dataclass, field
from typing import Any

import adk_fastcompact
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.flows.llm_flows.context import _contents
from google.adk.runners import Runner
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.genai import types

from support.compare import ORIG_PROCESS, ORIG_RECOVER
from support.exact_llm import SUMMARY, TaggingLlm, event_tags, lookup, start_job, tags
from support.runner_harness import EXPECTED_WARNINGS, deterministic, stepped_clock

USER, SESSION = "u", "s"


class ManualClock:
    """A clock for google-adk: a millisecond per reading (fast code), moved
    on by `jump` (a user's pause, a model's latency)."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        self.now += 0.001
        return self.now

    def jump(self, seconds: float) -> None:
        self.now += seconds


@dataclass(frozen=True)
class Pace:
    """Seconds of a `ManualClock`: between two batches of questions, per
    answering model call, per summary."""

    pause: float = 5.0
    answer: float = 1.0
    summary: float = 2.0


@dataclass
class Turn:
    lost: set[str]
    duplicated: set[str]
    chars: int
    summaries: int


@dataclass
class Run:
    turns: list[Turn] = field(default_factory=list)
    #: Lost / duplicated tags when google-adk's own code (no accelerator)
    #: assembles the prompt from the session as stored after each batch
    #: (its compaction reading) and at the end (its whole assembly).
    plain_lost: set[str] = field(default_factory=set)
    plain_duplicated: set[str] = field(default_factory=set)
    #: Repeated tags in google-adk's own assembly of the final session.
    final_duplicated: set[str] = field(default_factory=set)
    compactions: int = 0
    records: int = 0
    #: The final stored session's events.
    final: list[Event] = field(default_factory=list)

    @property
    def lost(self) -> set[str]:
        return set().union(*(t.lost for t in self.turns))

    @property
    def duplicated(self) -> set[str]:
        return set().union(*(t.duplicated for t in self.turns))


def run(
    config: EventsCompactionConfig,
    messages: list[str | tuple[str, ...]],
    *,
    mode: str | None,
    ties: int = 1,
    delay: float = 0.0,
    slow_delay: float = 0.0,
    summary_delay: float = 0.0,
    answer_words: int = 0,
    clock_skew: float | None = None,
    pace: Pace | None = None,
) -> Run:
    """Runs `messages` (a tuple: sent concurrently) through a Runner, with
    `install(mode, clock_skew=clock_skew)` or with google-adk's own code
    (`mode=None`). The clock steps a quarter second a reading (`ties`
    readings a step), or with `pace` runs a `ManualClock` at that pace."""
    adk_fastcompact.uninstall()
    if mode is not None:
        options = {} if clock_skew is None else {"clock_skew": clock_skew}
        assert adk_fastcompact.install(mode=mode, **options) is True
    summarizer_llm = TaggingLlm(model="summarizer", summary_delay=summary_delay)
    llm = TaggingLlm(model="root", delay=delay, slow_delay=slow_delay, answer_words=answer_words)
    llm.share(summarizer_llm)
    manual = ManualClock()
    if pace is not None:
        summarizer_llm.latency, llm.latency = pace.summary, pace.answer
        summarizer_llm.pace(manual.jump)
        llm.pace(manual.jump)
    config = config.model_copy(update={"summarizer": LlmEventSummarizer(llm=summarizer_llm)})
    agent = LlmAgent(
        name="root",
        model=llm,
        instruction="Answer.",
        tools=[lookup, LongRunningFunctionTool(func=start_job)],
    )
    app = App(name="exact", root_agent=agent, events_compaction_config=config)
    out = Run()

    async def one(runner: Runner, text: str) -> None:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id=USER, session_id=SESSION, new_message=message):
            pass

    async def main() -> None:
        with deterministic(stepped_clock(0.25, ties) if pace is None else manual):
            service = InMemorySessionService()
            await service.create_session(app_name=app.name, user_id=USER, session_id=SESSION)
            runner = Runner(app=app, session_service=service)
            stored: set[str] = set()
            for message in messages:
                if pace is not None:
                    manual.jump(pace.pause)
                batch = (message,) if isinstance(message, str) else message
                first = len(llm.requests)
                await asyncio.gather(*(one(runner, text) for text in batch))
                session = _stored(service, app.name)
                # The first request of this batch was made with everything
                # stored before it plus its own question (of concurrent
                # questions, whichever invocation asked first).
                request = llm.requests[first]
                own = [tags(text) for text in batch]
                present = set().union(*(tags(json.dumps(c)) for c in request))
                asked = [q for q in own if q & present] if len(batch) > 1 else own
                expected = stored | set().union(*asked[:1])
                lost, duplicated = llm.ledger.check(request, expected)
                out.turns.append(
                    Turn(
                        lost,
                        duplicated,
                        len(json.dumps(request)),
                        sum(bool(SUMMARY.search(json.dumps(c))) for c in request),
                    )
                )
                stored = set().union(*(event_tags(e) for e in session.events))
                if mode is not None:
                    # As plain google-adk would read the store now.
                    plain_prompt = ORIG_RECOVER(
                        ORIG_PROCESS(session.events, "root"), session.events
                    )
                    dumped = [
                        e.content.model_dump(mode="json", exclude_none=True)
                        for e in plain_prompt
                        if e.content is not None
                    ]
                    lost, duplicated = llm.ledger.check(dumped, stored)
                    out.plain_lost |= lost
                    out.plain_duplicated |= duplicated
            # The final session, read by google-adk's own prompt assembly.
            adk_fastcompact.uninstall()
            final = _stored(service, app.name)
            out.final = list(final.events)
            contents = _contents._get_contents(None, final.events, agent_name="root")
            dumped = [c.model_dump(mode="json", exclude_none=True) for c in contents]
            lost, duplicated = llm.ledger.check(dumped, stored)
            out.plain_lost |= lost
            out.plain_duplicated |= duplicated
            out.final_duplicated = duplicated
            compaction_events = [e for e in final.events if e.actions and e.actions.compaction]
            out.compactions = len(compaction_events)
            out.records = sum(
                "adk_fastcompact" in (e.custom_metadata or {}) for e in compaction_events
            )

    try:
        with warnings.catch_warnings():
            for category, message in EXPECTED_WARNINGS:
                warnings.filterwarnings("ignore", message=message, category=category)
            asyncio.run(main())
    finally:
        adk_fastcompact.uninstall()
    return out


def _stored(service: InMemorySessionService, app_name: str) -> Any:
    """The session as stored: the stored object itself, not the deep copy
    `get_session` makes, which would double the test's time."""
    return service.sessions[app_name][USER][SESSION]


def chat(n: int) -> list[str | tuple[str, ...]]:
    return [f"<<u{k}>> tell me more" for k in range(1, n + 1)]


def assert_exact(result: Run) -> None:
    assert result.lost == set(), f"lost in exact mode: {sorted(result.lost)}"
    assert result.duplicated == set(), f"duplicated in exact mode: {sorted(result.duplicated)}"
    assert result.plain_lost == set(), f"lost when read by plain google-adk: {result.plain_lost}"
    assert result.records == result.compactions > 0
