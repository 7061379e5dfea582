"""The audit against ground truth (`tests/ground_truth.py`): stores written
by real google-adk `Runner` runs (nothing of ours installed) through the
in-memory (exported), SQLite and database services, and what google-adk's
own contents assembly and the summarizer's ledger say is hidden or
duplicated in them, scope by scope. The audit must find exactly that: no
event missed, none reported falsely, nothing left undecided.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from adk_fastcompact._tooling import audit as _audit
from exact_llm import TaggingLlm, lookup, start_job
from google.adk.agents.llm_agent import LlmAgent
from google.adk.agents.parallel_agent import ParallelAgent
from google.adk.apps.app import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.genai import types
from ground_truth import (
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
from runner_harness import stepped_clock
from test_exact_scenarios import BranchLlm

pytestmark = [
    pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning"),
    pytest.mark.filterwarnings("ignore:The `plugins` argument is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:ParallelAgent is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:App .* can transfer between agents:UserWarning"),
]


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


def assert_truth(written: Written, settings: dict[str, int]) -> dict[str, Any]:
    """The audit finds exactly what google-adk's truth says; returns the report."""
    report = audit(written, settings)
    (session,) = report["sessions"]
    hidden = {e["id"]: e["cause"] for e in session["hidden"]}
    duplicated = {e["id"] for e in session["duplicated"]}
    undecidable = {e["id"] for e in session.get("undecidable", [])}
    expected = written.truth
    where = f"{written.kind} store:\n{dump(expected.events)}"
    assert set(hidden) == expected.hidden, (
        f"missed {sorted(expected.hidden - set(hidden))}, "
        f"false {sorted(set(hidden) - expected.hidden)} ({hidden}) in the {where}"
    )
    assert duplicated == expected.duplicated, (
        f"missed {sorted(expected.duplicated - duplicated)}, "
        f"false {sorted(duplicated - expected.duplicated)} duplicates in the {where}"
    )
    assert undecidable == set(), f"undecided {sorted(undecidable)} in the {where}"
    assert report["summary"]["compactions"] > 0
    return report


def chat(turns: int) -> Converse:
    """A conversation of `turns` plain questions, one `run_async` each."""

    async def converse(runner: Runner, service: BaseSessionService) -> None:
        del service
        for k in range(1, turns + 1):
            await send(runner, f"<<u{k}>> tell me more")

    return converse


# -- an isolation scope beside the root scope -------------------------------------------


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


@pytest.mark.parametrize("kind", KINDS)
def test_an_isolation_scope_beside_the_root_scope(tmp_path: Path, kind: str) -> None:
    written = write(kind, tmp_path, isolation_app(), isolation_chat)
    events = written.truth.events
    scoped = [e for e in events if e.isolation_scope]
    compactions = [e for e in events if e.actions and e.actions.compaction]
    # The scenario: the task's own compaction, and a root compaction whose
    # interval spans some of the task's events.
    assert any(c.isolation_scope for c in compactions), dump(events)
    root_spans = [
        c.actions.compaction
        for c in compactions
        if not c.isolation_scope and c.actions.compaction is not None
    ]
    assert any(
        c.start_timestamp <= e.timestamp <= c.end_timestamp  # type: ignore[operator]
        for c in root_spans
        for e in scoped
    ), dump(events)
    assert_truth(written, ISOLATION)


# -- a long-running call resumed late, under tail retention ----------------------------

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


@pytest.mark.parametrize("kind", KINDS)
def test_a_long_running_call_resumed_late_under_tail_retention(tmp_path: Path, kind: str) -> None:
    written = write(kind, tmp_path, resumed_app(), resumed_chat)
    events = written.truth.events
    # The scenario: the call's response is stored after later invocations'
    # events, under the call's own invocation id, and summaries roll up.
    (call,) = [e for e in events if any(c.name == "start_job" for c in e.get_function_calls())]
    (answer,) = [e for e in events if e.get_function_responses() and e.author == "user"]
    assert answer.invocation_id == call.invocation_id
    between = events[events.index(call) : events.index(answer)]
    assert {e.invocation_id for e in between} - {call.invocation_id}, dump(events)
    assert any(c.seeds for c in written.ledger.calls), dump(events)
    assert_truth(written, RESUMED)


# -- a ParallelAgent --------------------------------------------------------------------

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


@pytest.mark.parametrize("kind", KINDS)
def test_a_parallel_agent(tmp_path: Path, kind: str) -> None:
    # On SQLite the branches' events reach the store in aiosqlite's thread
    # order: on a loaded machine a run now and then hides nothing (about 1
    # in 6). Each run's audit must equal its truth; one of three must hide.
    for attempt in range(3):
        root = tmp_path / str(attempt)
        root.mkdir()
        written = write(kind, root, parallel_app(), chat(12))
        assert_truth(written, PARALLEL)
        if written.truth.hidden:
            break
    assert written.truth.hidden, "the scenario no longer hides anything"


# -- overlapping invocations (in memory: the SQL services refuse them) -------------------

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


def test_overlapping_invocations(tmp_path: Path) -> None:
    written = write("memory", tmp_path, overlap_app(), overlap_chat)
    assert written.truth.hidden, "the scenario no longer hides anything"
    assert_truth(written, OVERLAP)


# -- tied timestamps, both strategies ---------------------------------------------------

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


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("trigger", list(TIED))
def test_tied_timestamps(tmp_path: Path, kind: str, trigger: str) -> None:
    settings, ties = TIED[trigger]
    app = tied_app(settings, f"tied-{trigger}")
    written = write(kind, tmp_path, app, chat(20), clock=stepped_clock(0.25, ties))
    assert written.truth.hidden, "the scenario no longer hides anything"
    report = assert_truth(written, settings)
    causes = {e["cause"] for e in report["sessions"][0]["hidden"]}
    assert causes == {"tied_timestamp"}, causes


# -- rewinds ----------------------------------------------------------------------------

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


@pytest.mark.parametrize("kind", KINDS)
def test_a_rewind(tmp_path: Path, kind: str) -> None:
    app = tied_app(REWIND, "rewind")
    written = write(kind, tmp_path, app, rewind_chat)
    assert any(e.actions and e.actions.rewind_before_invocation_id for e in written.truth.events)
    assert_truth(written, REWIND)


# -- a coarse clock, and an invocation still under way (issue scenarios) ----------------

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


# -- a compacted call put back by google-adk's call recovery ----------------------------

RECOVERED = {"compaction_interval": 2, "overlap_size": 0}


def start_ticket(job: str) -> dict[str, Any]:
    """Starts a job and answers with a ticket; its result is posted later."""
    return {"status": "pending", "ticket": job}


# The tool the scripted model calls when asked to call the job.
start_ticket.__name__ = "start_job"


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


@pytest.mark.parametrize("kind", KINDS)
def test_a_call_put_back_by_call_recovery(tmp_path: Path, kind: str) -> None:
    written = write(kind, tmp_path, recovered_app(), recovered_chat)
    (call,) = [
        e
        for e in written.truth.events
        if any(c.name == "start_job" for c in e.get_function_calls())
    ]
    assert written.truth.duplicated == {call.id}, dump(written.truth.events)
    assert_truth(written, RECOVERED)


# -- a ParallelAgent's tool rounds under tail retention ---------------------------------

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


# -- written in exact mode: nothing lost for plain google-adk, nothing for the audit ----

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
}

EXACT_CASES = [
    pytest.param(name, kind, id=f"{name}-{kind}")
    for name, (*_, kinds) in SCENARIOS.items()
    for kind in kinds
]


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


@pytest.mark.adk_2_13("exact mode")
@pytest.mark.parametrize(("name", "kind"), EXACT_CASES)
def test_exact_mode_stores_lose_nothing(tmp_path: Path, name: str, kind: str) -> None:
    assert_loses_nothing(write_scenario(tmp_path, name, kind, "exact"), name)


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


@pytest.mark.parametrize("kind", KINDS)
def test_a_coarse_clock(tmp_path: Path, kind: str) -> None:
    written = write_scenario(tmp_path, "coarse-clock", kind, None)
    assert written.truth.hidden, "the scenario no longer hides anything"
    assert_truth(written, TICK)


def test_an_invocation_under_way(tmp_path: Path) -> None:
    written = write_scenario(tmp_path, "under-way", "memory", None)
    assert written.truth.hidden, "the scenario no longer hides anything"
    assert_truth(written, OVERLAP)
