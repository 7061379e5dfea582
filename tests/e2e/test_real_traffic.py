"""End-to-end on real-shaped traffic: a streaming Runner, with and without `install()`.

`test_runner_e2e.py` drives a Runner with plain `types.Content` everywhere.
Real apps store more: google-adk's SSE streaming path builds every
aggregated model response as a `types.ModelContent`
(`google/adk/utils/streaming_utils.py`), clients send `types.UserContent`,
and the parts carry thoughts with signatures, inline and file data, code
and its results. This test runs conversations shaped like that through
`Runner.run_async(run_config=RunConfig(streaming_mode=StreamingMode.SSE))`,
with the streaming scripted models of `traffic_llm.py` (partial chunks fed
through google-adk's own `StreamingResponseAggregator`, then the aggregated
`ModelContent`), and compaction configured on the `App`.

The corpus app's root agent has a calculator, a catalogue lookup, a tool
that writes state and saves an artifact (an `InMemoryArtifactService` on the
Runner), a `LongRunningFunctionTool` (resumed turns later by a user message
carrying its `FunctionResponse`), a tool with `require_confirmation=True`
(its `adk_request_confirmation` answered, yes or no, by a user message
carrying a `ToolConfirmation`), an `AgentTool`, and three sub-agents reached
by `transfer_to_agent`: an `LlmAgent`, a `ParallelAgent` of two `LlmAgent`
branches and a `LoopAgent` whose agent escalates with `exit_loop`. (The
second branch starts when the first is done, see `traffic_llm.Turnstile`:
with two branches running, the order of their events on SQLite depends on
aiosqlite's thread timing, even on google-adk's own code.) Its
callbacks rewrite the request, answer a "cached" turn without the model,
and rewrite every text response (and write state); the model answers now
and then with a `MAX_TOKENS` finish or an error response, and with grounding
and usage metadata. Summaries come from google-adk's `LlmEventSummarizer`,
whose model answers with a plain `types.Content`: the summarizer calls it
with `stream=False`, where Gemini returns plain Content anyway, and does
`summary_content.role = 'model'`, which raises on a (frozen) ModelContent, a
google-adk 2.13.0 defect this test does not trigger.

Each conversation runs on `InMemorySessionService` and on
`SqliteSessionService` (a `tmp_path` file), under a sliding window, a token
threshold and both, once on google-adk's own code and once after plain
`adk_fastcompact.install()` (parity mode), with ids from a counter and a
fixed-step clock. Every request every model saw (`model_dump(mode="json")`),
every response, every yielded event (partial chunks included), the stored
session, the saved artifacts and the compaction triggers must be equal; the
installed run must go through the Rust entry points, hand them
ModelContent and UserContent events, and decline nothing
(`_native.decline_counts()` is `{}`); and the comparison must not be
vacuous: several summaries from every configured trigger, and every kind of
traffic listed above actually stored (counted on the stored events,
ModelContent and UserContent by class on the in-memory session).

`test_streaming_two_tool_agent` is the plain case on its own: an `LlmAgent`
with two function tools, both compaction triggers on, streaming-shaped
traffic, 60 turns in memory and 40 on SQLite.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import BaseSessionService
from google.genai import types

from support.compare import PROFILE
from support.runner_harness import (
    Probes,
    assert_same,
    compactions,
    install_probes,
    run_conversation,
)
from support.traffic_conversation import (
    _WARNINGS,
    CONFIGS,
    CONFIRMATION,
    CORPUS_MODELS,
    CORPUS_TURNS,
    PLAIN_CONFIG,
    PLAIN_TURNS,
    Conversation,
    _converse,
)
from support.traffic_llm import (
    CHECKED,
    SUMMARY,
)


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> Probes:
    """Counts the calls into the Rust core (and how many declined), the
    classes of the event contents they read, and the compaction triggers."""
    return install_probes(monkeypatch)


def _run(
    service_kind: str,
    config: dict[str, int],
    turns: int,
    seed: str,
    db: Path,
    *,
    corpus: bool,
    install: bool,
    probes: Probes,
) -> Conversation:
    def converse(service: BaseSessionService) -> Any:
        return _converse(service, config, turns, seed, corpus=corpus)

    return run_conversation(
        converse, service_kind, db, install=install, probes=probes, ignore=_WARNINGS
    )


def _both(
    service_kind: str,
    config: dict[str, int],
    turns: int,
    seed: str,
    tmp_path: Path,
    probes: Probes,
    *,
    corpus: bool,
) -> tuple[Conversation, Conversation]:
    """Runs the conversation plain and installed and asserts they are the same."""
    runs = [
        _run(
            service_kind,
            config,
            turns,
            seed,
            tmp_path / f"{name}.db",
            corpus=corpus,
            install=install,
            probes=probes,
        )
        for name, install in (("plain", False), ("fast", True))
    ]
    plain, fast = runs
    # google-adk's own run never reached the Rust core.
    assert sum(plain.native_calls.values()) == 0, plain.native_calls
    for name in plain.requests:
        assert_same(f"{name} requests", plain.requests[name], fast.requests[name])
        assert_same(f"{name} responses", plain.responses[name], fast.responses[name])
    assert_same("yielded events", plain.yielded, fast.yielded)
    assert_same("stored events", plain.stored, fast.stored)
    assert_same("session", plain.session, fast.session)
    assert_same("artifacts", plain.artifacts, fast.artifacts)
    assert_same("compaction triggers", plain.triggers, fast.triggers)
    assert_same("driver log", plain.log, fast.log)
    return plain, fast


def _assert_compacted(conversation: Conversation, config: dict[str, int], least: int) -> None:
    """Several summaries were stored, from every configured trigger."""
    stored = compactions(conversation.events)
    triggers = Counter(conversation.triggers)
    expected = {"sliding_window"} if "compaction_interval" in config else set()
    if "token_threshold" in config:
        expected.add("token_threshold")
    assert set(triggers) == expected, triggers
    assert min(triggers.values()) >= least, triggers
    assert len(stored) >= len(expected) * least, len(stored)
    assert len(conversation.requests["summarizer"]) >= len(stored)
    for _, event in stored:
        summary = event.actions.compaction.compacted_content
        assert type(summary) is types.Content, type(summary)
        assert (summary.parts[0].text or "").startswith(SUMMARY)
    compacted = sum(
        any(
            (p.get("text") or "").startswith(SUMMARY)
            for c in r["contents"]
            for p in c.get("parts") or []
        )
        for r in conversation.requests["root"]
    )
    assert compacted >= len(conversation.requests["root"]) // 3, compacted


def _assert_native_clean(fast: Conversation, config: dict[str, int]) -> None:
    """The installed run used the Rust core, which read the classes real
    traffic stores and never declined."""
    used = {"apply_rewinds", "process_compaction_events", "recover_compacted_function_calls"}
    if PROFILE.priced:  # (the "worth compacting" price, google-adk 2.12 on)
        used.add("prompt_chars_delta")
    if "compaction_interval" in config:
        used.add("sliding_window")
    if "token_threshold" in config:
        used.add("token_threshold_selection")
    assert {name for name in used if fast.native_calls[name] == 0} == set(), fast.native_calls
    classes = fast.native_contents
    assert min(classes[c] for c in ("Content", "ModelContent", "UserContent")) > 0, classes
    assert fast.declines == {}, (fast.declines, dict(fast.native_declined))
    assert sum(fast.native_declined.values()) == 0, fast.native_declined


def _parts(event: Event) -> Iterator[types.Part]:
    if event.content is not None:
        yield from event.content.parts or []


def features(events: list[Event]) -> Counter[str]:
    """What real-app traffic the stored events carry, by kind."""
    found: Counter[str] = Counter()
    calls: dict[str, Event] = {}
    for event in events:
        content = event.content
        found[f"content {type(content).__name__}"] += content is not None
        calls.update({fc.id or "": event for fc in event.get_function_calls()})
        parts = list(_parts(event))
        fcs = [p for p in parts if p.function_call]
        found["thought"] += sum(bool(p.thought and p.thought_signature) for p in parts)
        found["signed parallel call"] += len(fcs) > 1 and bool(fcs[0].thought_signature)
        found["user inline data"] += event.author == "user" and any(p.inline_data for p in parts)
        found["model inline data"] += event.author != "user" and any(p.inline_data for p in parts)
        found["file data"] += any(p.file_data for p in parts)
        found["executable code"] += any(p.executable_code for p in parts)
        found["code result"] += any(p.code_execution_result for p in parts)
        found["checked"] += any((p.text or "").endswith(CHECKED) for p in parts)
        found["cached"] += any((p.text or "").startswith("cached t") for p in parts)
        found["grounding"] += event.grounding_metadata is not None
        found["usage"] += event.usage_metadata is not None
        found["error"] += event.error_code is not None and event.content is None
        found["finish error"] += event.error_code is not None and event.content is not None
        found["long running"] += any(
            fc.id in (event.long_running_tool_ids or ()) and fc.name == "start_job"
            for fc in event.get_function_calls()
        )
        found["confirmation request"] += any(
            fc.name == CONFIRMATION for fc in event.get_function_calls()
        )
        found["requested confirmation"] += bool(event.actions.requested_tool_confirmations)
        found["transfer"] += event.actions.transfer_to_agent is not None
        found[f"transfer to {event.actions.transfer_to_agent}"] += bool(
            event.actions.transfer_to_agent
        )
        found["escalate"] += bool(event.actions.escalate)
        found["state delta"] += bool(event.actions.state_delta)
        found["artifact delta"] += bool(event.actions.artifact_delta)
        found["branch"] += bool(event.branch)
        found[f"author {event.author}"] += 1
        for response in event.get_function_responses():
            if event.author != "user":
                found[f"tool {response.name}"] += 1
                continue
            call = calls.get(response.id or "")
            assert call is not None, response.id
            if response.name == "start_job":
                found["resume"] += 1
            elif response.name == CONFIRMATION:
                confirmed = (response.response or {}).get("confirmed")
                found["confirmed" if confirmed else "rejected"] += 1
    return +found


#: Kinds of traffic every corpus run must store, and how often at least.
CORPUS_FEATURES = {
    "thought": 4,
    "signed parallel call": 1,
    "user inline data": 1,
    "model inline data": 1,
    "file data": 1,
    "executable code": 1,
    "code result": 1,
    "checked": 4,
    "cached": 1,
    "grounding": 1,
    "usage": 8,
    "error": 1,
    "finish error": 1,
    "long running": 1,
    "resume": 1,
    "confirmation request": 1,
    "requested confirmation": 1,
    "confirmed": 1,
    "transfer to helper": 1,
    "transfer to fanout": 1,
    "transfer to refine": 1,
    "transfer to root": 1,
    "escalate": 1,
    "state delta": 2,
    "artifact delta": 1,
    "branch": 2,
    "author helper": 1,
    "author critic_a": 1,
    "author critic_b": 1,
    "author refiner": 2,
    "tool researcher": 1,
    "tool transfer_funds": 2,
    "tool remember": 1,
    "tool calc": 1,
    "tool lookup": 1,
}


@pytest.mark.parametrize("service_kind", ["memory", "sqlite"])
@pytest.mark.parametrize("config_name", list(CONFIGS))
def test_real_traffic_is_identical_with_install(
    service_kind: str, config_name: str, tmp_path: Path, probes: Probes
) -> None:
    config = CONFIGS[config_name]
    plain, fast = _both(
        service_kind,
        config,
        CORPUS_TURNS[service_kind],
        f"traffic-{config_name}-{service_kind}",
        tmp_path,
        probes,
        corpus=True,
    )

    # ... and the comparison is not vacuous. (Before 2.12 google-adk's
    # pairing trim has no dead-call pass: a call never answered stops it for
    # good, and on the shorter SQLite corpus google-adk 2.11's token
    # threshold summarizes once, then selects nothing.)
    _assert_compacted(plain, config, least=2 if PROFILE.dead_calls else 1)
    assert plain.partials >= 20, plain.partials
    for name in CORPUS_MODELS:
        assert plain.requests[name], name
    found = features(plain.events)
    missing = {k: found[k] for k, least in CORPUS_FEATURES.items() if found[k] < least}
    assert missing == {}, (missing, found)
    if service_kind == "memory":
        # The in-memory session keeps the classes apps and google-adk build.
        assert found["content ModelContent"] >= 20, found
        assert found["content UserContent"] >= CORPUS_TURNS["memory"], found
    _assert_native_clean(fast, config)


@pytest.mark.parametrize("service_kind", ["memory", "sqlite"])
def test_streaming_two_tool_agent(service_kind: str, tmp_path: Path, probes: Probes) -> None:
    """An LlmAgent with two function tools, both triggers, streaming-shaped
    traffic (ModelContent responses, UserContent messages)."""
    turns = PLAIN_TURNS[service_kind]
    plain, fast = _both(
        service_kind,
        PLAIN_CONFIG,
        turns,
        f"plain-{service_kind}",
        tmp_path,
        probes,
        corpus=False,
    )
    _assert_compacted(plain, PLAIN_CONFIG, least=3)
    assert len(plain.log) == turns
    found = features(plain.events)
    for kind in ("thought", "signed parallel call", "tool calc", "tool lookup", "usage"):
        assert found[kind] >= 1, (kind, found)
    if service_kind == "memory":
        assert found["content ModelContent"] >= turns, found
        assert found["content UserContent"] == turns, found
    _assert_native_clean(fast, PLAIN_CONFIG)
