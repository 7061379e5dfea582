"""The real-shaped streaming conversations of `tests/e2e/test_real_traffic.py`
(the corpus app and the plain two-tool agent, driven by `traffic_llm.py`'s
models), and `corpus_session`: the corpus conversation's stored session, for
the tests that compare something else with google-adk on real-traffic events.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.agents.loop_agent import LoopAgent
from google.adk.agents.parallel_agent import ParallelAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.artifacts.in_memory_artifact_service import InMemoryArtifactService
from google.adk.events.event import Event
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.tools.agent_tool import AgentTool
from google.adk.tools.exit_loop_tool import exit_loop
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.genai import types

from support.runner_harness import (
    EXPECTED_WARNINGS,
    Observed,
)
from support.scripted_llm import calc, lookup, start_job, words
from support.traffic_llm import (
    ACTIONS,
    TrafficLlm,
    Turnstile,
    after_model,
    before_model,
    remember,
    transfer_funds,
)

APP = "traffic_app"


USER = "user-1"


SESSION = "session-1"


CONFIRMATION = "adk_request_confirmation"


#: Compaction configs (EventsCompactionConfig fields besides the summarizer).
CONFIGS: dict[str, dict[str, int]] = {
    "window": {"compaction_interval": 2, "overlap_size": 1},
    "token": {"token_threshold": 1200, "event_retention_size": 3},
    "both": {
        "compaction_interval": 3,
        "overlap_size": 1,
        "token_threshold": 1200,
        "event_retention_size": 2,
    },
}


#: Driver text messages per corpus conversation (every action comes up in
#: each run of `len(ACTIONS)` of them); resumes and confirmation answers
#: come on top.
CORPUS_TURNS = {"memory": 3 * len(ACTIONS), "sqlite": 2 * len(ACTIONS)}


#: The "Done when" scenario: user messages per session service, and its config.
PLAIN_TURNS = {"memory": 60, "sqlite": 40}


PLAIN_CONFIG = {
    "compaction_interval": 4,
    "overlap_size": 1,
    "token_threshold": 800,
    "event_retention_size": 2,
}


PLAIN_WEIGHTS = {"chat": 5, "tool": 3, "parallel": 2}


RUN_CONFIG = RunConfig(streaming_mode=StreamingMode.SSE)


_WARNINGS = (
    *EXPECTED_WARNINGS,
    # ParallelAgent and LoopAgent are deprecated in favour of Workflow, which
    # cannot be an LlmAgent's sub-agent yet: apps still build them.
    (DeprecationWarning, r"(ParallelAgent|LoopAgent) is deprecated"),
)


@dataclass
class Conversation(Observed):
    """Everything observable about one run of a conversation."""

    requests: dict[str, list[dict[str, Any]]]
    responses: dict[str, list[dict[str, Any]]]
    yielded: list[list[dict[str, Any]]]
    stored: list[dict[str, Any]]
    session: dict[str, Any]
    artifacts: dict[str, list[int]]
    log: list[str]
    # Not compared: what the test checks the run for.
    events: list[Event] = field(repr=False, default_factory=list)
    partials: int = 0


@dataclass
class _Pending:
    """A call the user answers later: a long-running job or a confirmation."""

    due: int
    call_id: str
    kind: str
    job: str = ""
    confirmed: bool = False


def _models(seed: str, names: tuple[str, ...]) -> dict[str, TrafficLlm]:
    return {name: TrafficLlm(model=name, seed=seed) for name in names}


def _corpus_root(models: dict[str, TrafficLlm]) -> LlmAgent:
    def leaf(name: str, description: str, **kwargs: Any) -> LlmAgent:
        return LlmAgent(
            name=name,
            model=models[name],
            description=description,
            instruction=f"You are {name}. {description}",
            disallow_transfer_to_parent=True,
            disallow_transfer_to_peers=True,
            **kwargs,
        )

    researcher = LlmAgent(
        name="researcher",
        model=models["researcher"],
        description="Researches a request.",
        instruction="Research the request and answer briefly.",
    )
    helper = LlmAgent(
        name="helper",
        model=models["helper"],
        description="Answers questions the root agent hands over.",
        instruction="You are the helper. Transfer back to root when you are done.",
        tools=[lookup],
    )
    turnstile = Turnstile()
    fanout = ParallelAgent(
        name="fanout",
        description="Asks two critics at once.",
        sub_agents=[
            leaf(
                "critic_a",
                "Criticises with facts.",
                tools=[lookup],
                after_agent_callback=turnstile.open,
            ),
            leaf("critic_b", "Criticises the style.", before_agent_callback=turnstile.wait),
        ],
    )
    refine = LoopAgent(
        name="refine",
        description="Refines a draft until it is good.",
        sub_agents=[leaf("refiner", "Drafts, then exits the loop.", tools=[exit_loop])],
        max_iterations=3,
    )
    return LlmAgent(
        name="root",
        model=models["root"],
        description="The coordinator.",
        instruction="You are the root agent. Use your tools and agents.",
        tools=[
            calc,
            lookup,
            remember,
            LongRunningFunctionTool(start_job),
            FunctionTool(transfer_funds, require_confirmation=True),
            AgentTool(agent=researcher),
        ],
        sub_agents=[helper, fanout, refine],
        before_model_callback=before_model,
        after_model_callback=after_model,
    )


def _plain_root(models: dict[str, TrafficLlm]) -> LlmAgent:
    return LlmAgent(
        name="root",
        model=models["root"],
        description="The coordinator.",
        instruction="You are the root agent. Use your tools.",
        tools=[calc, lookup],
    )


CORPUS_MODELS = ("root", "helper", "critic_a", "critic_b", "refiner", "researcher", "summarizer")


PLAIN_MODELS = ("root", "summarizer")


def _user(*parts: types.Part) -> types.UserContent:
    return types.UserContent(parts=list(parts))


def _driver_message(turn: int, action: str, rng: random.Random) -> types.UserContent:
    parts = [types.Part(text=f"turn {turn}: {action} {words(rng, 3 + rng.randrange(10))}")]
    if action == "image":
        # An uploaded picture and a document stored elsewhere.
        data = bytes(rng.randrange(256) for _ in range(48 + rng.randrange(64)))
        parts.append(types.Part(inline_data=types.Blob(mime_type="image/jpeg", data=data)))
        parts.append(
            types.Part(
                file_data=types.FileData(
                    file_uri=f"gs://traffic-bucket/doc-{turn}.pdf", mime_type="application/pdf"
                )
            )
        )
    return _user(*parts)


def _answer(pending: _Pending, rng: random.Random) -> types.UserContent:
    if pending.kind == "job":
        response: dict[str, Any] = {
            "status": "done",
            "job": pending.job,
            "result": words(rng, 8 + rng.randrange(24)),
        }
        name = "start_job"
    else:
        response = {"confirmed": pending.confirmed, "payload": {"note": words(rng, 2)}}
        name = CONFIRMATION
    return _user(
        types.Part(
            function_response=types.FunctionResponse(
                id=pending.call_id, name=name, response=response
            )
        )
    )


def _dump(event: Event) -> dict[str, Any]:
    return event.model_dump(mode="json")


def _schedule(rng: random.Random, turns: int, corpus: bool) -> list[str]:
    """The driver's actions: every action once per `len(ACTIONS)` messages
    (in a seeded order) for the corpus, weighted draws for the plain agent."""
    if not corpus:
        actions, weights = zip(*PLAIN_WEIGHTS.items(), strict=True)
        return rng.choices(actions, weights, k=turns)
    schedule: list[str] = []
    while len(schedule) < turns:
        block = list(ACTIONS)
        rng.shuffle(block)
        schedule.extend(block)
    return schedule[:turns]


async def _converse(
    service: BaseSessionService,
    config: dict[str, int],
    turns: int,
    seed: str,
    *,
    corpus: bool,
) -> Conversation:
    models = _models(seed, CORPUS_MODELS if corpus else PLAIN_MODELS)
    root = _corpus_root(models) if corpus else _plain_root(models)
    compaction = EventsCompactionConfig(
        summarizer=LlmEventSummarizer(llm=models["summarizer"]), **config
    )
    app = App(name=APP, root_agent=root, events_compaction_config=compaction)
    artifacts = InMemoryArtifactService()
    runner = Runner(app=app, session_service=service, artifact_service=artifacts)
    await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    rng = random.Random(f"driver/{seed}")
    schedule = _schedule(rng, turns, corpus)
    pending: list[_Pending] = []
    yielded: list[list[dict[str, Any]]] = []
    log: list[str] = []
    partials = 0
    turn = 0
    while schedule or pending:
        due = [p for p in pending if p.due <= turn or not schedule]
        if due:
            answer = due[0]
            pending.remove(answer)
            message = _answer(answer, rng)
            log.append(f"{turn}: {answer.kind} {answer.call_id} {answer.job or answer.confirmed}")
        else:
            action = schedule.pop(0)
            message = _driver_message(turn, action, rng)
            log.append(f"{turn}: {action}")
        events = [
            event
            async for event in runner.run_async(
                user_id=USER, session_id=SESSION, new_message=message, run_config=RUN_CONFIG
            )
        ]
        yielded.append([_dump(event) for event in events])
        for event in events:
            if event.partial:
                partials += 1
                continue
            for fc in event.get_function_calls():
                if fc.id not in (event.long_running_tool_ids or ()):
                    continue
                if fc.name == CONFIRMATION:
                    pending.append(
                        _Pending(
                            due=turn + 1 + rng.randrange(3),
                            call_id=fc.id,
                            kind="confirm",
                            confirmed=rng.random() < 0.7,
                        )
                    )
                else:
                    pending.append(
                        _Pending(
                            due=turn + 2 + rng.randrange(6),
                            call_id=fc.id,
                            kind="job",
                            job=str((fc.args or {}).get("job")),
                        )
                    )
        turn += 1
    session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert session is not None
    keys = await artifacts.list_artifact_keys(app_name=APP, user_id=USER, session_id=SESSION)
    versions = {
        key: await artifacts.list_versions(
            app_name=APP, user_id=USER, session_id=SESSION, filename=key
        )
        for key in keys
    }
    return Conversation(
        requests={name: model.requests for name, model in models.items()},
        responses={name: model.responses for name, model in models.items()},
        yielded=yielded,
        stored=[_dump(event) for event in session.events],
        session=session.model_dump(mode="json", exclude={"events"}),
        artifacts=versions,
        log=log,
        events=list(session.events),
        partials=partials,
    )


def corpus_session(seed: str) -> Any:
    """The stored session of the corpus conversation (streaming partials,
    parallel tools, confirmations, long-running calls, compactions) as
    plain google-adk's InMemorySessionService holds it, for tests that
    compare something with google-adk on real-traffic events."""
    import asyncio
    import warnings

    import adk_fastcompact
    from google.adk.sessions.in_memory_session_service import InMemorySessionService

    from support.runner_harness import deterministic, stepped_clock

    adk_fastcompact.uninstall()
    service = InMemorySessionService()

    async def main() -> None:
        with warnings.catch_warnings(), deterministic(stepped_clock(0.25)):
            for category, message in _WARNINGS:
                warnings.filterwarnings("ignore", message, category)
            await _converse(service, CONFIGS["both"], CORPUS_TURNS["memory"], seed, corpus=True)

    asyncio.run(main())
    stored = service.sessions[APP][USER][SESSION]
    assert len(stored.events) > 50
    return stored
