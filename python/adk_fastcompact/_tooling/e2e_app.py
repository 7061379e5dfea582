"""The app the e2e regime runs, its script, its timers and its growth.

The app (`build_app`) is what a streaming Gemini app on google-adk looks
like, on google-adk's real `Runner` and `LlmAgent`:

* the model is `RecordingLlm`, the bench's `ScriptedLlm` extended: it answers
  from a script, every response a `types.ModelContent` (what google-adk's SSE
  aggregation stores), many opening with a thought part that carries a
  signature; it reports the request's own size as its prompt token count
  (characters of the request's contents / 4, as google-adk estimates them),
  so the token threshold sees the prompt google-adk actually built; and it
  records every request it receives, for the parity check;
* one tool, `lookup_records`, answering with ~1 KB of JSON records drawn from
  its arguments; a turn makes 0-2 tool steps, a step one call or two
  parallel calls;
* both compaction strategies configured in one `EventsCompactionConfig`:
  sliding window (`compaction_interval=3`, `overlap_size=1`) and token
  threshold (`TOKEN_THRESHOLD`, `EVENT_RETENTION_SIZE`), or the token
  threshold alone (``compaction="token"``), with `SummaryWriter`, an
  instant summarizer writing a 400-character summary.

`Split` times where a turn goes by wrapping the functions as google-adk calls
them (`instrument`): the session service's `get_session` and `append_event`
on the service instance (the Runner calls `self.session_service.<name>`; the
wrapper calls whatever the class holds at call time, so a patched class
method is timed too); google-adk's `_get_contents` and its two compaction
entry points wherever a loaded google-adk module binds them (`_patch.rebind`,
so calls by name, by module attribute and through function-local imports are
all seen); and the cyclic garbage collector's collections (`gc.callbacks`),
wherever they fall. Time goes to the innermost timed call, so nothing
counts twice (an `append_event` inside the token-threshold compaction is
append time, a collection inside a `get_session` is collector time), except
that `_get_contents` inside a compaction entry point (its prompt estimate)
is compaction time.
"""

from __future__ import annotations

import gc
import importlib
import json
import random
import time
import zlib
from collections.abc import AsyncGenerator, Callable
from functools import partial
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.events.event import Event
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.tools.function_tool import FunctionTool
from google.genai import types
from pydantic import PrivateAttr

from .. import _patch, _reference
from .bench_options import E2E_COMPACTIONS
from .sessions import AGENT_NAME, COMPACTION_INTERVAL, OVERLAP_SIZE, _words
from .simulate import InstantSummarizer, ScriptedLlm, quiet, summary_event, timed

APP_NAME = "fastcompact_e2e"
USER_ID = "user"
SESSION_ID = "e2e-session"

TOKEN_THRESHOLD = 20_000
"""Prompt tokens (as the model reports them) at which google-adk compacts
before a model call."""

EVENT_RETENTION_SIZE = 8
"""Raw events the token-threshold compaction keeps."""

SUMMARY_CHARS = 400
"""Characters of every summary `SummaryWriter` writes."""

INSTRUCTION = "You help the operations team with orders, reports and incidents."

PHASES: tuple[str, ...] = (
    "get_session",
    "get_contents",
    "compaction",
    "append_event",
    "collector",
)
"""Where a turn's time is split, beside the rest (`OTHER`)."""

OTHER = "other"

_NOTES = (
    "pending approved shipped refunded delayed escalated archived priority regional "
    "warehouse invoice customer quarterly ticket outage owner forecast budget"
).split()


# -- the tool -------------------------------------------------------------------------


def lookup_records(query: str, limit: int) -> dict[str, Any]:
    """Looks records up in the operations database."""
    rng = random.Random(zlib.crc32(json.dumps([query, limit]).encode()))
    records = [
        {
            "id": f"REC-{rng.randrange(10**6):06d}",
            "status": rng.choice(_NOTES),
            "amount": round(rng.uniform(0, 10_000), 2),
            "note": " ".join(rng.choice(_NOTES) for _ in range(8)),
        }
        for _ in range(8)
    ]
    return {"query": query, "count": len(records), "records": records}


# -- the script -----------------------------------------------------------------------


class Turn:
    """A user message and the parts of the model's responses to it."""

    def __init__(self, message: types.Content, responses: list[list[types.Part]]) -> None:
        self.message = message
        self.responses = responses


class Script:
    """The app's turns, one after another, from a seed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"adk-fastcompact e2e {seed}")

    def _thought(self) -> types.Part:
        rng = self.rng
        return types.Part(
            text=_words(rng, 10, 40), thought=True, thought_signature=rng.randbytes(32)
        )

    def turn(self) -> Turn:
        """The next turn."""
        rng = self.rng
        message = types.UserContent(parts=[types.Part(text=_words(rng, 6, 40))])
        responses: list[list[types.Part]] = []
        for _ in range(rng.choices((0, 1, 2), weights=(35, 45, 20))[0]):
            parts = [self._thought()] if rng.random() < 0.4 else []
            for index in range(2 if rng.random() < 0.25 else 1):
                args = {"query": _words(rng, 2, 5), "limit": rng.randint(5, 20)}
                parts.append(
                    types.Part(
                        function_call=types.FunctionCall(name="lookup_records", args=args),
                        # Gemini signs only the first call of a parallel batch.
                        thought_signature=rng.randbytes(32) if index == 0 else None,
                    )
                )
            responses.append(parts)
        final = [self._thought()] if rng.random() < 0.6 else []
        final.append(types.Part(text=_words(rng, 30, 150)))
        responses.append(final)
        return Turn(message, responses)


# -- the model ------------------------------------------------------------------------


def request_chars(request: LlmRequest) -> int:
    """Characters of a request's contents, as google-adk counts a prompt's."""
    total = 0
    for content in request.contents:
        for part in content.parts or ():
            if part.text:
                total += len(part.text)
            if part.function_call is not None:
                total += len(json.dumps(part.function_call.args or {}, default=str))
            if part.function_response is not None:
                total += len(json.dumps(part.function_response.response or {}, default=str))
    return total


def snapshot_request(request: LlmRequest) -> str:
    """What the parity check compares of a request: its contents, system
    instruction and tool declarations, as JSON."""
    config = request.config
    return json.dumps(
        {
            "model": request.model,
            "contents": [c.model_dump(mode="json", exclude_none=True) for c in request.contents],
            "system_instruction": str(config.system_instruction) if config else None,
            "tools": sorted(request.tools_dict),
        },
        sort_keys=True,
    )


class RecordingLlm(ScriptedLlm):
    """`ScriptedLlm` answering a turn's parts as `ModelContent`, with the
    request's size as its prompt token count, and keeping the requests."""

    _parts: list[list[types.Part]] = PrivateAttr(default_factory=list)
    _requests: list[LlmRequest] = PrivateAttr(default_factory=list)
    _record: bool = PrivateAttr(default=True)

    def play(self, turn: Turn, *, record: bool = True) -> None:
        """Answers the next model calls with `turn`'s responses."""
        self._parts = list(reversed(turn.responses))
        self._record = record

    def take_requests(self) -> list[LlmRequest]:
        """The requests received since the last call."""
        requests, self._requests = self._requests, []
        return requests

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        del stream
        if not self._parts:
            raise RuntimeError("the scripted model ran out of responses")
        if self._record:
            self._requests.append(llm_request)
        parts = self._parts.pop()
        prompt = request_chars(llm_request) // 4 + len(INSTRUCTION) // 4
        answer = sum(len(part.text or "") for part in parts) // 4 + 1
        yield LlmResponse(
            content=types.ModelContent(parts=[part.model_copy(deep=True) for part in parts]),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=prompt,
                candidates_token_count=answer,
                total_token_count=prompt + answer,
            ),
        )


class SummaryWriter(InstantSummarizer):
    """`InstantSummarizer` writing `SUMMARY_CHARS` characters."""

    async def maybe_summarize_events(self, *, events: list[Event]) -> Event | None:
        head = f"Summary of {len(events)} events. "
        text = (head + self.text)[:SUMMARY_CHARS].ljust(SUMMARY_CHARS, ".")
        return summary_event(events, text, SUMMARY_CHARS // 4)


def build_app(seed: int = 0, compaction: str = "both") -> tuple[App, RecordingLlm]:
    """The app and its model (a new one per call: each side has its own);
    `compaction` is one of `bench_options.E2E_COMPACTIONS`."""
    if compaction not in E2E_COMPACTIONS:
        raise ValueError(f"compaction must be one of {', '.join(E2E_COMPACTIONS)}: {compaction!r}")
    window = compaction == "both"
    llm = RecordingLlm()
    summarizer: SummaryWriter = quiet(lambda: SummaryWriter(seed))
    agent = LlmAgent(
        name=AGENT_NAME,
        model=llm,
        instruction=INSTRUCTION,
        tools=[FunctionTool(lookup_records)],
    )
    config = quiet(
        lambda: EventsCompactionConfig(
            compaction_interval=COMPACTION_INTERVAL if window else None,
            overlap_size=OVERLAP_SIZE if window else None,
            token_threshold=TOKEN_THRESHOLD,
            event_retention_size=EVENT_RETENTION_SIZE,
            summarizer=summarizer,
        )
    )
    app = quiet(lambda: App(name=APP_NAME, root_agent=agent, events_compaction_config=config))
    return app, llm


def build_runner(
    service: BaseSessionService, seed: int = 0, compaction: str = "both"
) -> tuple[Runner, RecordingLlm]:
    """A Runner of the app on `service`, and its model."""
    app, llm = build_app(seed, compaction)
    return Runner(app=app, session_service=service), llm


async def run_turn(runner: Runner, message: types.Content) -> None:
    """One whole `Runner.run_async` turn on the bench's session."""
    async for _ in runner.run_async(user_id=USER_ID, session_id=SESSION_ID, new_message=message):
        pass


# -- the split ------------------------------------------------------------------------


class Split:
    """Wall time per phase: each moment goes to the innermost timed call."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self._stack: list[str] = []
        self._mark = 0.0

    def _charge(self) -> None:
        now = time.perf_counter()
        if self._stack:
            self.totals[self._stack[-1]] += now - self._mark
        self._mark = now

    def enter(self, phase: str) -> None:
        self._charge()
        if phase == "get_contents" and "compaction" in self._stack:
            # A compaction entry point's prompt estimate is its own work.
            phase = self._stack[-1]
        self._stack.append(phase)

    def leave(self) -> None:
        self._charge()
        self._stack.pop()

    def take(self) -> dict[str, float]:
        """The seconds per phase since the last `take`; raises when a timed
        call is still open (a turn must leave them all)."""
        if self._stack:
            raise RuntimeError(f"timed calls still open: {self._stack}")
        totals, self.totals = self.totals, dict.fromkeys(PHASES, 0.0)
        return totals


CONTENTS_MODULES = (
    "google.adk.flows.llm_flows.context._contents",
    "google.adk.flows.llm_flows.contents",
)
"""Where google-adk defines `_get_contents`: 2.13's module, then older ones'."""


def _contents_module() -> str:
    for name in CONTENTS_MODULES:
        try:
            if hasattr(importlib.import_module(name), "_get_contents"):
                return name
        except ModuleNotFoundError:
            continue
    raise ImportError("the installed google-adk has no _get_contents to time")


_COMPACTION = ("run_compaction_for_sliding_window", "run_compaction_for_token_threshold_config")


def instrument(split: Split, service: BaseSessionService) -> Callable[[], None]:
    """Times google-adk's functions as it binds them now, `service`'s
    `get_session` and `append_event`, and the collector's collections;
    returns the undo.

    Call it after switching google-adk (install or not), and undo it before
    switching again (`unpatch` only restores bindings that are still ours).
    """
    targets: dict[int, tuple[Callable[..., Any], Callable[..., Any]]] = {}
    where = [(_contents_module(), "_get_contents", "get_contents")]
    where += [(*_reference.locations()[name], "compaction") for name in _COMPACTION]
    for module_name, attr, phase in where:
        function = getattr(importlib.import_module(module_name), attr)
        targets[id(function)] = (
            function,
            timed(function, partial(split.enter, phase), split.leave),
        )
    patched = _patch.rebind(targets)
    kind = type(service)

    async def get_session(*args: Any, **kwargs: Any) -> Any:
        split.enter("get_session")
        try:
            return await kind.get_session(service, *args, **kwargs)  # type: ignore[misc]
        finally:
            split.leave()

    async def append_event(*args: Any, **kwargs: Any) -> Any:
        split.enter("append_event")
        try:
            return await kind.append_event(service, *args, **kwargs)
        finally:
            split.leave()

    def collection(phase: str, info: dict[str, int]) -> None:
        del info
        if phase == "start":
            split.enter("collector")
        else:
            split.leave()

    # Instance attributes: what `self.session_service.<name>` finds first.
    vars(service)["get_session"] = get_session
    vars(service)["append_event"] = append_event
    gc.callbacks.append(collection)

    def undo() -> None:
        gc.callbacks.remove(collection)
        vars(service).pop("get_session", None)
        vars(service).pop("append_event", None)
        while patched:
            module, attr, value = patched.pop()
            setattr(module, attr, value)

    return undo
