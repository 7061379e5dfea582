"""The ground-truth scenarios of `tests/audit/test_audit_truth.py`: an app
factory, a conversation and the compaction settings each (`SCENARIOS`), the
store each writes (`write_scenario`), the audit's report of it (`audit`),
and what a store written in exact mode must show (`assert_loses_nothing`).
`tests/e2e/test_postgres.py` writes the same scenarios on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from adk_fastcompact._tooling import audit as _audit
from google.adk.agents.llm_agent import LlmAgent
from google.adk.agents.parallel_agent import ParallelAgent
from google.adk.apps.app import App, ResumabilityConfig
from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.genai import types

from support.exact_llm import TaggingLlm, lookup, start_job
from support.exact_scenarios import BranchLlm
from support.ground_truth import (
    KINDS,
    SESSION,
    USER,
    Converse,
    Written,
    config_with,
    dump,
    send,
    write,
)
from support.runner_harness import stepped_clock


def audit(written: Written, settings: dict[str, int]) -> dict[str, Any]:
    """The audit's JSON report of the store, with the settings the app ran."""
    given = _audit.given_settings(
        settings.get("compaction_interval"),
        settings.get("overlap_size") if "compaction_interval" in settings else None,
        settings.get("token_threshold"),
        settings.get("event_retention_size"),
    )
    with _audit.opened(written.store, _audit.Filters()) as store:
        report = _audit.run_audit(store, given, parallel=False)
    return report.to_json()


def chat(turns: int) -> Converse:
    """A conversation of `turns` plain questions, one `run_async` each."""

    async def converse(runner: Runner, service: BaseSessionService) -> None:
        del service
        for k in range(1, turns + 1):
            await send(runner, f"<<u{k}>> tell me more")

    return converse


class TaskLlm(BaseLlm):
    """`model="root"` delegates to the task agent `worker` when asked,
    answers otherwise; `model="worker"` asks for more until told to finish,
    then calls `finish_task`. Every answer is numbered and long enough for
    the worker's own tail retention to fire."""

    _count: int = 0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        del stream
        self._count += 1
        n = self._count
        contents = llm_request.contents
        last = contents[-1]
        text = "".join(p.text or "" for p in last.parts or [])
        answered = any(p.function_response for p in last.parts or [])
        if self.model == "root":
            if answered:
                parts = [types.Part(text=f"root {n} read the task's result")]
            elif "delegate" in text:
                call = types.FunctionCall(name="worker", args={"goal": f"task {n}: {text}"})
                parts = [types.Part(function_call=call)]
            else:
                parts = [types.Part(text=f"root {n} answers {text[:12]}")]
        elif "finish" in text:
            call = types.FunctionCall(name="finish_task", args={"result": f"done {n}"})
            parts = [types.Part(function_call=call)]
        else:
            parts = [types.Part(text=f"worker {n} asks about {text[:12]}: " + "detail " * 30)]
        size = sum(len(c.model_dump_json(exclude_none=True)) for c in contents)
        yield LlmResponse(
            content=types.Content(role="model", parts=parts),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=size // 4, candidates_token_count=8, total_token_count=size // 4
            ),
        )


ISOLATION = {
    "compaction_interval": 2,
    "overlap_size": 0,
    "token_threshold": 200,
    "event_retention_size": 1,
}


def isolation_app(name: str = "isolation") -> App:
    """A chat root that delegates a task to `worker` (its events in their
    own isolation scope, compacted by the worker's own tail retention) while
    the root scope is compacted by the sliding window around it."""
    worker = LlmAgent(
        name="worker", model=TaskLlm(model="worker"), instruction="Do it.", mode="task"
    )
    root = LlmAgent(
        name="root", model=TaskLlm(model="root"), instruction="Answer.", sub_agents=[worker]
    )
    config = config_with(ISOLATION, TaggingLlm(model="summarizer"))
    return App(name=name, root_agent=root, events_compaction_config=config)


async def isolation_chat(runner: Runner, service: BaseSessionService) -> None:
    del service
    for text in ("<<u1>> hi", "<<u2>> hello", "<<u3>> delegate the job"):
        await send(runner, text)
    for k in range(4, 8):
        await send(runner, f"<<u{k}>> more detail")
    await send(runner, "<<u8>> finish now")
    for k in range(9, 14):
        await send(runner, f"<<u{k}>> thanks")


RESUMED = {"token_threshold": 150, "event_retention_size": 1}


def resumed_app(name: str = "resumed") -> App:
    llm = TaggingLlm(model="root")
    agent = LlmAgent(
        name="root",
        model=llm,
        instruction="Answer.",
        tools=[lookup, LongRunningFunctionTool(func=start_job)],
    )
    config = config_with(RESUMED, TaggingLlm(model="summarizer"))
    return App(name=name, root_agent=agent, events_compaction_config=config)


async def resumed_chat(runner: Runner, service: BaseSessionService) -> None:
    # A summary first (the later ones roll it up), then a long-running
    # call; one more invocation while it is pending (the pending call
    # stops tail retention); then its response, posted back, resumes the
    # call's invocation, whose events are stored after the other's.
    for k in range(1, 5):
        await send(runner, f"<<u{k}>> tell me more")
    await send(runner, "<<u5>> please call the job")
    await send(runner, "<<u6>> tell me more")
    session = await service.get_session(app_name=runner.app_name, user_id=USER, session_id=SESSION)
    assert session is not None
    (call,) = [c for e in session.events for c in e.get_function_calls() if c.name == "start_job"]
    response = types.FunctionResponse(
        id=call.id, name="start_job", response={"result": "<<r5>> the job is done"}
    )
    await send(runner, types.Content(role="user", parts=[types.Part(function_response=response)]))
    for k in range(7, 14):
        await send(runner, f"<<u{k}>> tell me more")


PARALLEL = {
    "compaction_interval": 2,
    "overlap_size": 0,
    "token_threshold": 300,
    "event_retention_size": 1,
}


def parallel_app(name: str = "parallel") -> App:
    slow = BranchLlm(model="root", suffix="s", waits=True)
    fast = BranchLlm(model="root", suffix="f")
    gate = asyncio.Event()
    slow.gate(gate)
    fast.gate(gate)
    root = ParallelAgent(
        name="par",
        sub_agents=[
            LlmAgent(name="slow", model=slow, instruction="Answer."),
            LlmAgent(name="fast", model=fast, instruction="Answer."),
        ],
    )
    config = config_with(PARALLEL, TaggingLlm(model="summarizer"))
    return App(name=name, root_agent=root, events_compaction_config=config)


OVERLAP = {"compaction_interval": 2, "overlap_size": 0}


def overlap_app(name: str = "overlap") -> App:
    llm = TaggingLlm(model="root", delay=0.002)
    agent = LlmAgent(name="root", model=llm, instruction="Answer.")
    config = config_with(OVERLAP, TaggingLlm(model="summarizer", summary_delay=0.003))
    return App(name=name, root_agent=agent, events_compaction_config=config)


async def overlap_chat(runner: Runner, service: BaseSessionService) -> None:
    del service
    for k in range(1, 24, 2):
        await asyncio.gather(send(runner, f"<<u{k}>> first"), send(runner, f"<<u{k + 1}>> second"))


#: Settings, and how many clock readings share a tick: both strategies
#: configured (the sliding window and tail retention take turns), and tail
#: retention alone.
TIED: dict[str, tuple[dict[str, int], int]] = {
    "both": (
        {
            "compaction_interval": 2,
            "overlap_size": 1,
            "token_threshold": 300,
            "event_retention_size": 1,
        },
        2,
    ),
    "token_threshold": ({"token_threshold": 200, "event_retention_size": 2}, 3),
}


def tied_app(settings: dict[str, int], name: str) -> App:
    agent = LlmAgent(name="root", model=TaggingLlm(model="root"), instruction="Answer.")
    config = config_with(settings, TaggingLlm(model="summarizer"))
    return App(name=name, root_agent=agent, events_compaction_config=config)


REWIND = {"compaction_interval": 2, "overlap_size": 1}


async def rewind_chat(runner: Runner, service: BaseSessionService) -> None:
    for k in range(1, 7):
        await send(runner, f"<<u{k}>> tell me more")
    session = await service.get_session(app_name=runner.app_name, user_id=USER, session_id=SESSION)
    assert session is not None
    invocations = list(dict.fromkeys(e.invocation_id for e in session.events if e.author == "user"))
    await runner.rewind_async(
        user_id=USER, session_id=SESSION, rewind_before_invocation_id=invocations[4]
    )
    for k in range(7, 14):
        await send(runner, f"<<u{k}>> tell me more")


TICK = {"compaction_interval": 2, "overlap_size": 0}


def under_way_app(name: str = "under-way") -> App:
    llm = TaggingLlm(model="root", slow_delay=0.05)
    agent = LlmAgent(name="root", model=llm, instruction="Answer.")
    config = config_with(OVERLAP, TaggingLlm(model="summarizer"))
    return App(name=name, root_agent=agent, events_compaction_config=config)


async def under_way_chat(runner: Runner, service: BaseSessionService) -> None:
    # A's model call is slow; B runs, ends and compacts meanwhile (its window
    # holds A's question); A's reply, stamped when A's call began, is stored
    # after B's compaction.
    del service
    for k in range(1, 13, 2):
        await asyncio.gather(
            send(runner, f"<<u{k}>> answer slowly"), send(runner, f"<<u{k + 1}>> second")
        )


RECOVERED = {"compaction_interval": 2, "overlap_size": 0}


def start_ticket(job: str) -> dict[str, Any]:
    """Starts a job and answers with a ticket; its result is posted later."""
    return {"status": "pending", "ticket": job}


def recovered_app(name: str = "recovered") -> App:
    agent = LlmAgent(
        name="root",
        model=TaggingLlm(model="root"),
        instruction="Answer.",
        tools=[lookup, LongRunningFunctionTool(func=start_ticket)],
    )
    config = config_with(RECOVERED, TaggingLlm(model="summarizer"))
    return App(name=name, root_agent=agent, events_compaction_config=config)


async def recovered_chat(runner: Runner, service: BaseSessionService) -> None:
    # A long-running call answered at once with a placeholder (its ticket):
    # the sliding window summarizes the call with it. The real result,
    # posted back later, is stored after the summary, so google-adk's
    # `_recover_compacted_function_calls` puts the summarized call back into
    # the prompt raw (in the summary and raw: duplicated).
    await send(runner, "<<u1>> tell me more")
    await send(runner, "<<u2>> tell me more")
    await send(runner, "<<u3>> please call the job")
    for k in range(4, 8):
        await send(runner, f"<<u{k}>> tell me more")
    session = await service.get_session(app_name=runner.app_name, user_id=USER, session_id=SESSION)
    assert session is not None
    (call,) = [c for e in session.events for c in e.get_function_calls() if c.name == "start_job"]
    response = types.FunctionResponse(
        id=call.id, name="start_job", response={"result": "<<r3>> the job is done"}
    )
    await send(runner, types.Content(role="user", parts=[types.Part(function_response=response)]))


#: A resumable app's invocation resumed by its id after another invocation
#: ran, without a user-authored event at the resume point: trigger ->
#: (settings, whether the job's tool answers a ticket at once, the words of
#: an answer and the characters of a summary). Under tail retention the
#: call pauses the invocation (its tool answers nothing). Under the sliding
#: window the tool answers a ticket, so that the other invocation compacts
#: its own run and the resumed run is the window's newest invocation;
#: longer answers and short summaries keep one invocation's range worth
#: compacting.
RESUMED_BY_ID: dict[str, tuple[dict[str, int], bool, int, int]] = {
    "token_threshold": ({"token_threshold": 150, "event_retention_size": 1}, False, 0, 400),
    "sliding_window": ({"compaction_interval": 1, "overlap_size": 0}, True, 20, 60),
}


def resumed_by_id_app(name: str, trigger: str) -> App:
    settings, ticket, words, chars = RESUMED_BY_ID[trigger]

    def start_job(job: str) -> dict[str, Any] | None:
        """Starts a job whose result is stored later; answers its ticket, or nothing."""
        return {"status": "pending", "ticket": job} if ticket else None

    agent = LlmAgent(
        name="root",
        model=TaggingLlm(model="root", answer_words=words),
        instruction="Answer.",
        tools=[lookup, LongRunningFunctionTool(func=start_job)],
    )
    config = config_with(settings, TaggingLlm(model="summarizer", summary_chars=chars))
    return App(
        name=name,
        root_agent=agent,
        events_compaction_config=config,
        resumability_config=ResumabilityConfig(is_resumable=True),
    )


async def resume_by_id(runner: Runner, service: BaseSessionService, result: str) -> None:
    """Stores the job's result as its tool's own response (authored by the
    agent that called it, as the tool would have answered) and resumes the
    call's invocation by its id (`run_async(invocation_id=...)`, no new
    message): nothing the user authored marks where it resumed."""
    session = await service.get_session(app_name=runner.app_name, user_id=USER, session_id=SESSION)
    assert session is not None
    calls = [(e, c) for e in session.events for c in e.get_function_calls()]
    ((asked, call),) = [(e, c) for e, c in calls if c.name == "start_job"]
    response = types.FunctionResponse(id=call.id, name=call.name, response={"result": result})
    answer = Event(
        author=asked.author,
        invocation_id=asked.invocation_id,
        branch=asked.branch,
        content=types.Content(role="user", parts=[types.Part(function_response=response)]),
    )
    await service.append_event(session, answer)
    async for _ in runner.run_async(
        user_id=USER, session_id=SESSION, invocation_id=asked.invocation_id
    ):
        pass


async def resumed_by_id_chat(runner: Runner, service: BaseSessionService) -> None:
    # Invocation A calls the job; invocation B runs; A is resumed by its id
    # with the job's result, and its run fetches the session holding B's
    # events, which its summary (after the run, or before its model call)
    # is handed.
    for k in range(1, 5):
        await send(runner, f"<<u{k}>> tell me more")
    await send(runner, "<<u5>> please call the job")
    await send(runner, "<<u6>> tell me more")
    await resume_by_id(runner, service, "<<r5>> the job is done")
    for k in range(7, 10):
        await send(runner, f"<<u{k}>> tell me more")


PARALLEL_TOOLS = {"token_threshold": 60, "event_retention_size": 0}


def parallel_tools_app(name: str = "parallel-tools") -> App:
    # Each branch compacts before each of its model calls while the other's
    # call (its reply stamped when the call began) is under way.
    app = parallel_app(name)
    config = config_with(PARALLEL_TOOLS, TaggingLlm(model="summarizer"))
    return app.model_copy(update={"events_compaction_config": config})


async def parallel_tools_chat(runner: Runner, service: BaseSessionService) -> None:
    del service
    for k in range(1, 10):
        await send(runner, f"<<u{k}>> please call the tool")


#: name -> (app factory, conversation, settings, clock, store kinds).
SCENARIOS: dict[str, tuple[Any, Any, dict[str, int], Any, tuple[str, ...]]] = {
    "isolation": (isolation_app, isolation_chat, ISOLATION, None, KINDS),
    "resumed": (resumed_app, resumed_chat, RESUMED, None, KINDS),
    "parallel": (parallel_app, chat(12), PARALLEL, None, KINDS),
    "overlap": (overlap_app, overlap_chat, OVERLAP, None, ("memory",)),
    "tied-both": (
        lambda name: tied_app(TIED["both"][0], name),
        chat(20),
        TIED["both"][0],
        lambda: stepped_clock(0.25, TIED["both"][1]),
        KINDS,
    ),
    "tied-token": (
        lambda name: tied_app(TIED["token_threshold"][0], name),
        chat(20),
        TIED["token_threshold"][0],
        lambda: stepped_clock(0.25, TIED["token_threshold"][1]),
        KINDS,
    ),
    "rewind": (lambda name: tied_app(REWIND, name), rewind_chat, REWIND, None, KINDS),
    # A tick every 12 readings: questions stamped in the tick of the last
    # event a sliding-window summary was made over, stored after it.
    "coarse-clock": (
        lambda name: tied_app(TICK, name),
        chat(24),
        TICK,
        lambda: stepped_clock(0.25, 12),
        KINDS,
    ),
    "under-way": (under_way_app, under_way_chat, OVERLAP, None, ("memory",)),
    "recovered": (recovered_app, recovered_chat, RECOVERED, None, KINDS),
    # A sibling's call stored after a branch's summary, stamped before it
    # (SQL stores load by timestamp, so it loads before the summary).
    "parallel-tools": (parallel_tools_app, parallel_tools_chat, PARALLEL_TOOLS, None, KINDS),
    # Resumed by id, without a user-authored event (see `RESUMED_BY_ID`).
    **{
        f"resumed-by-id-{trigger}": (
            lambda name, trigger=trigger: resumed_by_id_app(name, trigger),
            resumed_by_id_chat,
            settings,
            None,
            KINDS,
        )
        for trigger, (settings, *_) in RESUMED_BY_ID.items()
    },
}


def write_scenario(
    tmp_path: Path, name: str, kind: str, mode: str | None, url: str | None = None
) -> Written:
    make, converse, _, clock, _ = SCENARIOS[name]
    return write(
        kind,
        tmp_path,
        make(f"{name}-{mode or 'plain'}"),
        converse,
        clock=None if clock is None else clock(),
        mode=mode,
        url=url,
    )


def assert_loses_nothing(written: Written, name: str) -> None:
    """The store of scenario `name`, written in exact mode: every compaction
    carries its record, google-adk's own assembly hid nothing after any
    turn or at the end, and the audit finds nothing hidden, repeated or
    undecided."""
    where = f"{written.kind} store:\n{dump(written.truth.events)}"
    compactions = [e for e in written.truth.events if e.actions and e.actions.compaction]
    assert compactions and all(
        "adk_fastcompact" in (e.custom_metadata or {}) for e in compactions
    ), where
    # google-adk's own assembly, accelerator uninstalled, after every turn
    # and at the end: nothing hidden (repeats are allowed).
    assert written.plain_hidden == set(), f"plain google-adk hides {written.plain_hidden}: {where}"
    # The audit reads the records: nothing hidden, repeated or undecided.
    report = audit(written, SCENARIOS[name][2])
    (session,) = report["sessions"]
    found = {key: session.get(key, []) for key in ("hidden", "duplicated", "undecidable")}
    assert found == {"hidden": [], "duplicated": [], "undecidable": []}, where
