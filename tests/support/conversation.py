"""The seeded end-to-end conversation of `tests/e2e/test_runner_e2e.py`: an
`LlmAgent` app with tools, an `AgentTool` and a sub-agent, driven through
`Runner.run_async` by the scripted models of `scripted_llm.py`, run once on
google-adk's own code and once after `install()` (`run_both`, which also
checks that the comparison is not vacuous). `tests/e2e/test_postgres.py` runs
the same conversation on `DatabaseSessionService`.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from adk_fastcompact import _families, _reference
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.tools.agent_tool import AgentTool
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.genai import types

from support.compare import PROFILE, config_fields
from support.runner_harness import (
    Observed,
    Probes,
    assert_same,
    compactions,
    run_conversation,
)
from support.scripted_llm import ACTIONS, ScriptedLlm, big_report, calc, lookup, start_job, words

# google-adk recovers a compacted call whose response survived from 2.5 on.
RECOVERY = "recover_compacted_function_calls" in _reference.locations()


#: google-adk releases whose Runner runs an LlmAgent root as a workflow node
#: and never runs the sliding window after it (read in their runners.py: the
#: node path compacts nothing; 2.2 added it). Not fingerprinted: the Runner
#: is not replaced code.
NO_SLIDING_RUNNER = ("2.0.0", "2.1.0")


RUNNER_SLIDES = _families.adk_version() not in NO_SLIDING_RUNNER


APP = "e2e_app"


USER = "user-1"


SESSION = "session-1"


#: Compaction configs (EventsCompactionConfig fields besides the summarizer).
CONFIGS: dict[str, dict[str, int]] = {
    "window": {"compaction_interval": 3, "overlap_size": 1},
    "token": {"token_threshold": 2500, "event_retention_size": 3},
    "both": {
        "compaction_interval": 2,
        "overlap_size": 1,
        "token_threshold": 2500,
        "event_retention_size": 2,
    },
}


#: Conversation length per session service: user messages sent through
#: `Runner.run_async` (the rewinds the driver makes on the way come on top).
#: PostgreSQL runs SQLite's conversation. The family runs of CI
#: (tests/families/run.py) run it shorter on every release they check
#: (`ADK_FASTCOMPACT_SQLITE_TURNS`); its non-vacuity checks hold there too.
_SQLITE_TURNS = int(os.environ.get("ADK_FASTCOMPACT_SQLITE_TURNS", "100"))
TURNS = {"memory": 140, "sqlite": _SQLITE_TURNS, "postgres": _SQLITE_TURNS}


#: How often the driver asks for each action on a text turn.
WEIGHTS = {
    "chat": 6,
    "tool": 4,
    "chain": 2,
    "parallel": 3,
    "big": 2,
    "long": 2,
    "long2": 1,
    "agent": 2,
    "transfer": 2,
}
assert set(WEIGHTS) == set(ACTIONS)


@dataclass
class Conversation(Observed):
    """Everything observable about one run of the conversation."""

    requests: dict[str, list[dict[str, Any]]]
    responses: dict[str, list[dict[str, Any]]]
    yielded: list[list[dict[str, Any]]]
    stored: list[dict[str, Any]]
    session: dict[str, Any]
    log: list[str]
    # Not compared: what the test checks the run for.
    events: list[Event] = field(repr=False, default_factory=list)


@dataclass
class _Pending:
    due: int
    call_id: str
    job: str
    invocation_id: str


def _build_runner(
    service: BaseSessionService, config: dict[str, int], seed: str
) -> tuple[Runner, dict[str, ScriptedLlm]]:
    models = {
        name: ScriptedLlm(model=name, seed=seed)
        for name in ("root", "helper", "researcher", "summarizer")
    }
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
    root = LlmAgent(
        name="root",
        model=models["root"],
        description="The coordinator.",
        instruction="You are the root agent. Use your tools.",
        tools=[
            calc,
            lookup,
            big_report,
            LongRunningFunctionTool(start_job),
            AgentTool(agent=researcher),
        ],
        sub_agents=[helper],
    )
    compaction = EventsCompactionConfig(
        summarizer=LlmEventSummarizer(llm=models["summarizer"]), **config_fields(config)
    )
    app = App(name=APP, root_agent=root, events_compaction_config=compaction)
    return Runner(app=app, session_service=service), models


def _user_text(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def _resume_message(pending: _Pending, rng: random.Random) -> types.Content:
    response = {"status": "done", "job": pending.job, "result": words(rng, 8 + rng.randrange(30))}
    return types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    id=pending.call_id, name="start_job", response=response
                )
            )
        ],
    )


def _dump(event: Event) -> dict[str, Any]:
    return event.model_dump(mode="json")


async def _converse(
    service: BaseSessionService, config: dict[str, int], turns: int, seed: str
) -> Conversation:
    runner, models = _build_runner(service, config, seed)
    await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    rng = random.Random(f"driver/{seed}")
    actions, weights = zip(*WEIGHTS.items(), strict=True)
    pending: list[_Pending] = []
    yielded: list[list[dict[str, Any]]] = []
    log: list[str] = []
    # The invocation the previous text turn started, while it may be rewound.
    rewindable: str | None = None
    turn = 0
    while turn < turns:
        due = [p for p in pending if p.due <= turn]
        if rewindable is not None and not due and rng.random() < 0.04:
            await runner.rewind_async(
                user_id=USER, session_id=SESSION, rewind_before_invocation_id=rewindable
            )
            pending = [p for p in pending if p.invocation_id != rewindable]
            log.append(f"{turn}: rewind {rewindable}")
            rewindable = None
            continue
        if due:
            job = due[0]
            pending.remove(job)
            message = _resume_message(job, rng)
            log.append(f"{turn}: resume {job.call_id} ({job.job})")
        else:
            action = rng.choices(actions, weights)[0]
            message = _user_text(f"turn {turn}: {action} {words(rng, 3 + rng.randrange(12))}")
            log.append(f"{turn}: {action}")
        events: list[Event] = []
        try:
            async for event in runner.run_async(
                user_id=USER, session_id=SESSION, new_message=message
            ):
                events.append(event)
        except ValueError as error:
            # google-adk before 2.5 cannot build a prompt whose latest
            # function response lost its call to a compaction; the turn
            # fails alike on both sides and the conversation goes on.
            log.append(f"{turn}: raised {type(error).__name__}: {error}")
        yielded.append([_dump(event) for event in events])
        invocation_ids = {event.invocation_id for event in events}
        # Only a fresh invocation is rewound: rewinding a resumed one would
        # annul everything since the call it answered.
        rewindable = None if due or len(invocation_ids) != 1 else invocation_ids.pop()
        for event in events:
            for call in event.get_function_calls():
                if call.id in (event.long_running_tool_ids or ()):
                    pending.append(
                        _Pending(
                            due=turn + 2 + rng.randrange(12),
                            call_id=call.id,
                            job=str((call.args or {}).get("job")),
                            invocation_id=event.invocation_id,
                        )
                    )
        turn += 1
    session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert session is not None
    return Conversation(
        requests={name: model.requests for name, model in models.items()},
        responses={name: model.responses for name, model in models.items()},
        yielded=yielded,
        stored=[_dump(event) for event in session.events],
        session=session.model_dump(mode="json", exclude={"events"}),
        log=log,
        events=list(session.events),
    )


def _run(
    service_kind: str,
    config: dict[str, int],
    turns: int,
    seed: str,
    db: Path | str,
    *,
    install: bool,
    probes: Probes,
    record_loads: bool = False,
) -> Conversation:
    def converse(service: BaseSessionService) -> Any:
        return _converse(service, config, turns, seed)

    return run_conversation(
        converse, service_kind, db, install=install, probes=probes, record_loads=record_loads
    )


def _resumed_after_compaction(conversation: Conversation) -> list[str]:
    """Jobs whose call was covered by a stored compaction before its result came."""
    events = conversation.events
    found = []
    for index, event in enumerate(events):
        for response in event.get_function_responses():
            if event.author != "user" or response.name != "start_job":
                continue
            call_event = next(
                (
                    e
                    for e in events[:index]
                    if any(c.id == response.id for c in e.get_function_calls())
                ),
                None,
            )
            assert call_event is not None, response.id
            covered = any(
                i < index
                and c.actions.compaction.start_timestamp
                <= call_event.timestamp
                <= c.actions.compaction.end_timestamp
                for i, c in compactions(events)
            )
            if covered:
                found.append(str((response.response or {}).get("job")))
    return found


def _parts(request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for content in request["contents"]:
        yield from content.get("parts") or []


def _is_summary(part: dict[str, Any]) -> bool:
    # Before 2.7 a summary is the "model"'s, which an agent's prompt shows as
    # another's words: a part "[model] said: <summary>" after "For context:".
    text = part.get("text") or ""
    return text.startswith(_SUMMARY) or text.startswith(f"[model] said: {_SUMMARY}")


_SUMMARY = "Conversation Language: English. Summary"


def _read_after_recovery(conversation: Conversation, job: str) -> bool:
    """Whether a compacted root prompt carries the job's final result with its call."""
    for request in conversation.requests["root"]:
        parts = list(_parts(request))
        call = any(
            (p.get("function_call") or {}).get("name") == "start_job"
            and (p["function_call"].get("args") or {}).get("job") == job
            for p in parts
        )
        result = any(
            (p.get("function_response") or {}).get("name") == "start_job"
            and (p["function_response"].get("response") or {}).get("job") == job
            and p["function_response"]["response"].get("status") == "done"
            for p in parts
        )
        if call and result and any(map(_is_summary, parts)):
            return True
    return False


def run_both(
    service_kind: str,
    config_name: str,
    plain_db: Path | str,
    fast_db: Path | str,
    probes: Probes,
    *,
    record_loads: bool = False,
) -> tuple[Conversation, Conversation]:
    """The conversation of `config_name` on a `service_kind` service (see
    `runner_harness.new_service`), with google-adk's own code on `plain_db`
    and after `install()` on `fast_db`: asserts the two runs are identical
    (with `record_loads`, every session `get_session` handed out too), that
    the comparison is not vacuous and that the installed run used the Rust
    core; returns both."""
    config = CONFIGS[config_name]
    if not RUNNER_SLIDES and "token_threshold" not in config:
        pytest.skip("google-adk 2.0-2.1's Runner compacts nothing for an LlmAgent root")
    turns = TURNS[service_kind]
    # PostgreSQL runs SQLite's conversation (the same number of turns).
    seed = f"{config_name}-{'sqlite' if service_kind == 'postgres' else service_kind}"
    plain = _run(
        service_kind,
        config,
        turns,
        seed,
        plain_db,
        install=False,
        probes=probes,
        record_loads=record_loads,
    )
    fast = _run(
        service_kind,
        config,
        turns,
        seed,
        fast_db,
        install=True,
        probes=probes,
        record_loads=record_loads,
    )

    # google-adk's own run never reached the Rust core.
    assert sum(plain.native_calls.values()) == 0, plain.native_calls

    # The two runs are the same, observed from every side.
    for name in plain.requests:
        assert_same(f"{name} requests", plain.requests[name], fast.requests[name])
        assert_same(f"{name} responses", plain.responses[name], fast.responses[name])
    assert_same("yielded events", plain.yielded, fast.yielded)
    assert_same("stored events", plain.stored, fast.stored)
    assert_same("session", plain.session, fast.session)
    assert_same("compaction triggers", plain.triggers, fast.triggers)
    assert_same("driver log", plain.log, fast.log)
    assert_same("sessions get_session handed out", plain.loads, fast.loads)
    if record_loads:
        # At least one load a turn (the Runner's), each of a whole session.
        assert len(plain.loads) >= turns, len(plain.loads)

    # ... and the comparison is not vacuous.
    log = plain.log
    assert sum(": rewind " not in entry and ": raised " not in entry for entry in log) == turns
    assert sum(": rewind " in entry for entry in log) >= 1, log
    stored = compactions(plain.events)
    assert len(stored) >= 8, len(stored)
    assert len(plain.requests["summarizer"]) >= len(stored)
    triggers = Counter(plain.triggers)
    slides = "compaction_interval" in config and RUNNER_SLIDES
    expected = {"sliding_window"} if slides else set()
    if "token_threshold" in config:
        expected.add("token_threshold")
    assert set(triggers) == expected, triggers
    assert min(triggers.values()) >= 3, triggers
    for name in ("helper", "researcher"):
        assert plain.requests[name], name
    compacted_prompts = sum(any(map(_is_summary, _parts(r))) for r in plain.requests["root"])
    assert compacted_prompts >= len(plain.requests["root"]) // 2
    resumed = _resumed_after_compaction(plain)
    assert resumed, "no long-running call was resumed after being compacted away"
    raised = [entry for entry in log if ": raised " in entry]
    if RECOVERY:
        # The compacted call came back into the prompt that read the job's result.
        assert any(_read_after_recovery(plain, job) for job in resumed), resumed
        assert raised == [], raised
    else:
        # Before 2.5 google-adk fails the turn that reads such a result.
        assert raised, log

    # The installed run used the Rust core, which never declined.
    # (`get_compaction_ranges` is not among them: on this path google-adk only
    # calls it from helpers that Rust's selection and pricing replace.)
    used = {
        "apply_rewinds",
        "process_compaction_events",
        "recover_compacted_function_calls",
        "sliding_window",
    } & set(_reference.locations())
    if RUNNER_SLIDES:
        used.add("sliding_window")
    if PROFILE.priced:  # google-adk prices a compaction from 2.12 on
        used.add("prompt_chars_delta")
    if "token_threshold" in config:
        used.add("token_threshold_selection")
    assert {name for name in used if fast.native_calls[name] == 0} == set(), fast.native_calls
    assert sum(fast.native_declined.values()) == 0, fast.native_declined
    assert fast.declines == {}, fast.declines
    return plain, fast
