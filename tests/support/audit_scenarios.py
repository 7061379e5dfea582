"""Session stores written by real `Runner` runs, for the audit's tests, with
what the script says the audit must find in them.

The conversations are `tests/support/exact_runs.py`'s and
`tests/support/exact_scenarios.py`'s (the `TaggingLlm` of `tests/support/exact_llm.py`
tags every piece of conversation and its ledger knows what every summary
was handed). What the audit must find is worked out from the final stored
session with google-adk's own prompt assembly (nothing installed) and the
ledger, never from the audit: an event is hidden when its tags are absent
from the prompt and from every summary in it, duplicated when they are in
the prompt raw and inside a summary at once.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import adk_fastcompact
from adk_fastcompact._tooling.audit import export_sessions
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.flows.llm_flows.context import _contents
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.genai import types

from support.exact_llm import Ledger, TaggingLlm, event_tags, lookup, start_job
from support.runner_harness import EXPECTED_WARNINGS, deterministic, stepped_clock

USER, SESSION = "u", "s"


@dataclass
class Expected:
    """What the audit must find in one stored session, by event id."""

    events: list[Event]
    hidden: set[str] = field(default_factory=set)
    duplicated: set[str] = field(default_factory=set)

    @property
    def clean(self) -> bool:
        return not self.hidden and not self.duplicated


def by_tags(events: Sequence[Event], lost: set[str], duplicated: set[str]) -> Expected:
    """The events whose tags are all lost (hidden) or any duplicated."""
    out = Expected(list(events))
    for event in events:
        found = event_tags(event)
        if found and found <= lost:
            out.hidden.add(event.id)
        if found & duplicated:
            out.duplicated.add(event.id)
    return out


def expected_of(
    events: Sequence[Event], ledger: Ledger, agents: Sequence[str], mode: str | None = None
) -> Expected:
    """What the prompt assembly of the mode that wrote the session shows each
    agent of the final session, checked with the ledger: google-adk's own
    (nothing installed) for google-adk and parity mode, exact mode's for a
    session exact mode wrote (it reads its records)."""
    try:
        if mode == "exact":
            assert adk_fastcompact.install(mode="exact") is True
        else:
            adk_fastcompact.uninstall()
        return _expected_of(events, ledger, agents)
    finally:
        adk_fastcompact.uninstall()


def _expected_of(events: Sequence[Event], ledger: Ledger, agents: Sequence[str]) -> Expected:
    lost: set[str] = set()
    duplicated: set[str] = set()
    branches = {e.author: e.branch for e in events if e.author in agents}
    for agent in agents:
        branch = branches.get(agent)
        visible = set().union(
            *(event_tags(e) for e in events if _contents._is_event_belongs_to_branch(branch, e))
        )
        contents = _contents._get_contents(branch, list(events), agent_name=agent)
        dumped = [c.model_dump(mode="json", exclude_none=True) for c in contents]
        agent_lost, agent_duplicated = ledger.check(dumped, visible)
        lost |= agent_lost
        duplicated |= agent_duplicated
    return by_tags(events, lost, duplicated)


def chat(n: int, start: int = 1) -> list[str]:
    return [f"<<u{k}>> tell me more" for k in range(start, start + n)]


def run_chat(
    config: EventsCompactionConfig,
    messages: Sequence[str],
    *,
    mode: str | None,
    db: Path | None = None,
    database_url: str | None = None,
    export: Path | None = None,
    ties: int = 1,
    session_id: str = SESSION,
    app_name: str = "audited",
) -> Expected:
    """Sends `messages` one by one through a Runner on `SqliteSessionService(db)`,
    `DatabaseSessionService(database_url)` or (neither given) in memory, with
    `install(mode=mode)` or google-adk's own code (`mode=None`); `export` writes
    the sessions as JSON lines (`export_sessions`). Returns what the audit must
    find in the final session as its service loads it."""
    adk_fastcompact.uninstall()
    if mode is not None:
        assert adk_fastcompact.install(mode=mode) is True
    summarizer_llm = TaggingLlm(model="summarizer")
    llm = TaggingLlm(model="root")
    llm.share(summarizer_llm)
    config = config.model_copy(update={"summarizer": LlmEventSummarizer(llm=summarizer_llm)})
    agent = LlmAgent(
        name="root",
        model=llm,
        instruction="Answer.",
        tools=[lookup, LongRunningFunctionTool(func=start_job)],
    )
    app = App(name=app_name, root_agent=agent, events_compaction_config=config)
    final: list[Event] = []

    async def main() -> None:
        with deterministic(stepped_clock(0.25, ties)):
            service: BaseSessionService
            if db is not None:
                service = SqliteSessionService(str(db))
            elif database_url is not None:
                service = DatabaseSessionService(database_url)
            else:
                service = InMemorySessionService()
            await service.create_session(app_name=app.name, user_id=USER, session_id=session_id)
            runner = Runner(app=app, session_service=service)
            for text in messages:
                message = types.Content(role="user", parts=[types.Part(text=text)])
                async for _ in runner.run_async(
                    user_id=USER, session_id=session_id, new_message=message
                ):
                    pass
            session = await service.get_session(
                app_name=app.name, user_id=USER, session_id=session_id
            )
            assert session is not None
            final.extend(session.events)
            if export is not None:
                with export.open("a") as out:
                    assert await export_sessions(service, out, app_name=app.name) == 1
            if isinstance(service, DatabaseSessionService):
                await service.close()

    try:
        with warnings.catch_warnings():
            for category, message in EXPECTED_WARNINGS:
                warnings.filterwarnings("ignore", message=message, category=category)
            asyncio.run(main())
    finally:
        adk_fastcompact.uninstall()
    return expected_of(final, llm.ledger, ["root"], mode)


def load_sqlite(db: Path, app_name: str, session_id: str = SESSION) -> list[Event]:
    """The session's events as `SqliteSessionService` loads them."""

    async def main() -> list[Event]:
        session = await SqliteSessionService(str(db)).get_session(
            app_name=app_name, user_id=USER, session_id=session_id
        )
        assert session is not None
        return list(session.events)

    return asyncio.run(main())


def export_line(app_name: str, events: Sequence[Event], session_id: str = SESSION) -> str:
    """The export line of a session holding `events` (what `export_sessions`
    writes of it: `Session.model_dump_json()`)."""
    session = Session(app_name=app_name, user_id=USER, id=session_id, events=list(events))
    return session.model_dump_json()
