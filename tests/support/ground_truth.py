"""Ground truth for the audit: stores written by real `Runner` runs of
google-adk (nothing of ours installed, or exact mode), and what google-adk
itself (uninstalled) says their prompts lose or repeat.

Every run hands its compaction a `RecordingSummarizer`: google-adk's own
`LlmEventSummarizer` (over a scripted model) behind a wrapper that writes a
ledger of every call: the stored ids of the events it was handed, the
earlier summaries it was handed (the rolling seed google-adk rebuilds from
the latest compaction, recognised by its content; exact mode's seed of
several summaries, by their parts) and the id of the compaction event it
returned.

What the audit must find in the final stored session comes from that
ledger and google-adk's own contents assembly, never from the audit: for
every isolation scope, and every agent (author and branch) of that scope,
`_contents._get_contents` builds the prompt of the session as stored, and
the same call over the session without its compaction events says which
events the prompt would show were nothing compacted. A probe on
`_contents._copy_content_for_request` (which copies every content that
goes into a prompt, the summary's included, from the stored object) tells
by object identity which stored event each prompt content came from. Then
an event is

- **hidden** when it would be shown without compaction, is not in the
  prompt raw, and is in the input of no summary in that prompt (directly or
  through the seeds it rolled up);
- **duplicated** when it is in the prompt raw and in the input of a summary
  in it.

The stores are written through the three kinds of service the audit reads:
`InMemorySessionService` (exported as JSON lines with `export_sessions`),
`SqliteSessionService` and `DatabaseSessionService` on SQLite (aiosqlite);
and, given a database URL, `DatabaseSessionService` on PostgreSQL (asyncpg,
`tests/e2e/test_postgres.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import adk_fastcompact
from adk_fastcompact import _underway
from adk_fastcompact._tooling.audit import export_sessions
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.base_events_summarizer import BaseEventsSummarizer
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.flows.llm_flows.context import _contents
from google.adk.models.base_llm import BaseLlm
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types

from support.runner_harness import EXPECTED_WARNINGS, deterministic, stepped_clock

USER, SESSION = "u", "s"

#: The session services a store is written through (besides "postgres",
#: which needs a server: `write(..., url=)`).
KINDS = ("memory", "sqlite", "database")

IGNORED = (
    *EXPECTED_WARNINGS,
    (DeprecationWarning, r"ParallelAgent is deprecated"),
    (UserWarning, r"can transfer between agents but has no context_cache_config"),
)


# -- the ledger -------------------------------------------------------------------------


@dataclass
class Call:
    """One summarizer call."""

    #: Stored ids of the events handed (the seed left out).
    inputs: list[str]
    #: Ids of the compaction events whose summaries were handed as the seed.
    seeds: list[str]
    #: Id of the compaction event returned (None: no summary).
    output: str | None


@dataclass
class Ledger:
    calls: list[Call] = field(default_factory=list)
    #: Summary content (JSON) -> id of the compaction event carrying it.
    by_content: dict[str, str] = field(default_factory=dict)
    #: Summary part (JSON) -> id of the compaction event carrying it (exact
    #: mode seeds several summaries as one event holding their parts).
    by_part: dict[str, str] = field(default_factory=dict)

    def seeds_in(self, event: Event) -> list[str] | None:
        """The compaction events whose summaries `event` is the seed of,
        or None when it is no seed."""
        if event.actions and event.actions.compaction:
            return None
        whole = self.by_content.get(_content_key(event.content))
        if whole is not None:
            return [whole]
        parts = event.content.parts if event.content is not None else None
        if not parts:
            return None
        owners = [self.by_part.get(part.model_dump_json(exclude_none=True)) for part in parts]
        if any(owner is None for owner in owners):
            return None
        return list(dict.fromkeys(owner for owner in owners if owner is not None))

    def record(self, compaction_id: str, content: types.Content | None) -> None:
        """Remembers the summary a compaction event carries."""
        self.by_content[_content_key(content)] = compaction_id
        for part in content.parts or [] if content is not None else []:
            self.by_part[part.model_dump_json(exclude_none=True)] = compaction_id

    def inputs_of(self, compaction_id: str) -> set[str]:
        """Every stored event a summary stands for, through its seeds."""
        out: set[str] = set()
        for call in self.calls:
            if call.output == compaction_id:
                out.update(call.inputs)
                for seed in call.seeds:
                    out |= self.inputs_of(seed)
        return out


def _content_key(content: types.Content | None) -> str:
    return "" if content is None else content.model_dump_json(exclude_none=True)


class RecordingSummarizer(BaseEventsSummarizer):
    """google-adk's `LlmEventSummarizer` over `llm`, each call recorded."""

    def __init__(self, llm: BaseLlm, ledger: Ledger) -> None:
        self._inner = LlmEventSummarizer(llm=llm)
        self.ledger = ledger

    async def maybe_summarize_events(self, *, events: list[Event]) -> Event | None:
        inputs: list[str] = []
        seeds: list[str] = []
        for event in events:
            found = self.ledger.seeds_in(event)
            if found is not None:
                seeds.extend(found)
            else:
                inputs.append(event.id)
        out = await self._inner.maybe_summarize_events(events=events)
        if out is not None and out.actions.compaction is not None:
            self.ledger.record(out.id, out.actions.compaction.compacted_content)
        self.ledger.calls.append(Call(inputs, seeds, None if out is None else out.id))
        return out


# -- google-adk's prompts ---------------------------------------------------------------


@contextlib.contextmanager
def _shown(events: Sequence[Event], found: set[str]) -> Iterator[None]:
    """Records in `found` the ids of the stored events whose content (or
    summary) `_contents._get_contents` copies into a prompt meanwhile."""
    owner: dict[int, str] = {}
    for event in events:
        compaction = event.actions.compaction if event.actions else None
        if compaction is not None and compaction.compacted_content is not None:
            owner[id(compaction.compacted_content)] = event.id
        elif event.content is not None:
            owner[id(event.content)] = event.id
    copy = _contents._copy_content_for_request
    present = _contents._present_other_agent_message

    def copied(content: types.Content, **kwargs: Any) -> types.Content:
        if id(content) in owner:
            found.add(owner[id(content)])
        return copy(content, **kwargs)

    def presented(event: Event, **kwargs: Any) -> Event | None:
        out = present(event, **kwargs)
        if out is not None and out.content is not None and event.id:
            owner[id(out.content)] = owner.get(id(event.content), event.id)
        return out

    _contents._copy_content_for_request = copied  # type: ignore[assignment]
    _contents._present_other_agent_message = presented  # type: ignore[assignment]
    try:
        yield
    finally:
        _contents._copy_content_for_request = copy  # type: ignore[assignment]
        _contents._present_other_agent_message = present  # type: ignore[assignment]


def _prompt(events: list[Event], scope: str | None, branch: str | None, agent: str) -> set[str]:
    found: set[str] = set()
    with _shown(events, found):
        _contents._get_contents(branch, events, agent, isolation_scope=scope)
    return found


@dataclass
class Truth:
    """What google-adk's prompts of the final session lose and repeat."""

    events: list[Event]
    hidden: set[str] = field(default_factory=set)
    duplicated: set[str] = field(default_factory=set)
    #: Per isolation scope: the ids of the stored events its prompts show raw.
    shown: dict[str | None, set[str]] = field(default_factory=dict)


def truth(events: list[Event], ledger: Ledger) -> Truth:
    """Hidden and duplicated events of `events` (the final stored session,
    as its service loads it), by google-adk's own prompt assembly (nothing
    installed) and the ledger."""
    adk_fastcompact.uninstall()
    out = Truth(list(events))
    compaction_ids = {e.id for e in events if e.actions and e.actions.compaction}
    plain = [e for e in events if e.id not in compaction_ids]
    scopes = list(dict.fromkeys(e.isolation_scope for e in events))
    for scope in scopes:
        agents = list(
            dict.fromkeys(
                (e.author, e.branch)
                for e in events
                if e.isolation_scope == scope and e.author != "user" and e.id not in compaction_ids
            )
        ) or [("", None)]
        for author, branch in agents:
            now = _prompt(list(events), scope, branch, author)
            without = _prompt(plain, scope, branch, author)
            summaries = now & compaction_ids
            raw = now - compaction_ids
            stands_for = set().union(*(ledger.inputs_of(c) for c in summaries))
            out.hidden |= without - raw - stands_for
            out.duplicated |= raw & stands_for
            out.shown.setdefault(scope, set()).update(raw)
    return out


# -- writing stores ---------------------------------------------------------------------


@dataclass
class Written:
    """A store written by a run, and its truth."""

    kind: str
    #: What to audit: the SQLite file, the JSON-lines export, or the
    #: PostgreSQL database's URL.
    store: str
    truth: Truth
    ledger: Ledger
    #: Written in exact mode: what google-adk's own assembly (accelerator
    #: uninstalled) hid in the session as stored after each `run_async`
    #: that left no invocation under way, and at the end.
    plain_hidden: set[str] = field(default_factory=set)


Converse = Callable[[Runner, BaseSessionService], Awaitable[None]]


def write(
    kind: str,
    root: Path,
    app: App,
    converse: Converse,
    *,
    clock: Callable[[], float] | None = None,
    mode: str | None = None,
    url: str | None = None,
) -> Written:
    """Runs `converse` on a new session of `app` held by a `kind` service
    (see `KINDS`; `"postgres"`: `DatabaseSessionService` on the database
    `url`) with google-adk's own code, or after `install(mode)`, and
    returns the store (under `root`, or `url`) with its truth. The app's
    compaction config must carry a `RecordingSummarizer`."""
    adk_fastcompact.uninstall()
    config = app.events_compaction_config
    assert config is not None and isinstance(config.summarizer, RecordingSummarizer)
    ledger = config.summarizer.ledger
    path = root / (f"{app.name}-{kind}.jsonl" if kind == "memory" else f"{app.name}-{kind}.db")
    assert (url is not None) == (kind == "postgres"), (kind, url)
    final: list[Event] = []
    plain_hidden: set[str] = set()

    async def checkpoint(service: BaseSessionService) -> None:
        """In exact mode, with no invocation under way: what plain google-adk
        hides in the session as stored now."""
        if mode is None or _underway.running():
            return
        session = await service.get_session(app_name=app.name, user_id=USER, session_id=SESSION)
        assert session is not None
        plain_hidden.update(truth(session.events, ledger).hidden)
        assert adk_fastcompact.install(mode=mode) is True

    class Checked(Runner):
        async def run_async(self, **kwargs: Any) -> AsyncGenerator[Event, None]:
            async for event in super().run_async(**kwargs):
                yield event
            await checkpoint(self.session_service)

    async def main() -> None:
        with deterministic(clock or stepped_clock(0.25)):
            service: BaseSessionService
            if kind == "memory":
                service = InMemorySessionService()
            elif kind == "sqlite":
                service = SqliteSessionService(str(path))
            elif kind == "postgres" and url is not None:
                service = DatabaseSessionService(url)
            else:
                service = DatabaseSessionService(f"sqlite+aiosqlite:///{path}")
            await service.create_session(app_name=app.name, user_id=USER, session_id=SESSION)
            runner = Checked(app=app, session_service=service)
            await converse(runner, service)
            session = await service.get_session(app_name=app.name, user_id=USER, session_id=SESSION)
            assert session is not None
            final.extend(session.events)
            if kind == "memory":
                with path.open("w") as out:
                    assert await export_sessions(service, out, app_name=app.name) == 1
            if isinstance(service, DatabaseSessionService):
                await service.close()

    with warnings.catch_warnings():
        for category, message in IGNORED:
            warnings.filterwarnings("ignore", message=message, category=category)
        if mode is not None:
            assert adk_fastcompact.install(mode=mode) is True
        try:
            asyncio.run(main())
        finally:
            adk_fastcompact.uninstall()
    found = truth(final, ledger)
    return Written(kind, url or str(path), found, ledger, plain_hidden | found.hidden)


def config_with(settings: dict[str, int], summarizer_llm: BaseLlm) -> EventsCompactionConfig:
    """An `EventsCompactionConfig` of `settings` whose summarizer records."""
    return EventsCompactionConfig(
        **settings, summarizer=RecordingSummarizer(summarizer_llm, Ledger())
    )


async def send(runner: Runner, text: str | types.Content) -> None:
    """One `run_async` turn with `text` (or a whole message) from the user."""
    message = (
        types.Content(role="user", parts=[types.Part(text=text)]) if isinstance(text, str) else text
    )
    async for _ in runner.run_async(user_id=USER, session_id=SESSION, new_message=message):
        pass


def dump(events: Sequence[Event]) -> str:
    """The session, one line an event (for failure messages)."""
    lines = []
    for i, e in enumerate(events):
        c = e.actions.compaction if e.actions else None
        what = (
            f"COMPACTION {c.start_timestamp}-{c.end_timestamp}"
            if c
            else json.dumps(e.content.model_dump(mode="json", exclude_none=True))[:70]
            if e.content
            else "-"
        )
        lines.append(
            f"{i:3} {e.id} {e.invocation_id} {e.timestamp} {e.author} "
            f"{e.branch or ''} {e.isolation_scope or ''} {what}"
        )
    return "\n".join(lines)
