"""A scripted conversation through a real google-adk Runner, for benchmarks.

`simulate(turns)` drives `google.adk.runners.Runner` over an
`App` whose `events_compaction_config` runs sliding-window compaction
(`compaction_interval=3`, `overlap_size=1`) with an `InstantSummarizer`, and
whose root agent is an `LlmAgent` on `ScriptedLlm`: an in-process model that
answers from a script drawn from ``random.Random(seed)`` before each turn.
A turn is one user message: the model makes 0-3 tool steps (one call, or 2-3
parallel calls in one response, to `FunctionTool`s answering with the
multi-KB JSON of `sessions`), then a text answer. Everything goes through
google-adk as a deployed app would: the Runner's `InMemorySessionService`
hands each turn a deep copy of the session, `_get_contents` assembles every
model request, and after each turn the Runner runs
`_run_compaction_for_sliding_window` and appends what it yields.

During the turn a `Stopwatch` accumulates the time spent inside the
compaction entry points and the prompt-filtering helpers, whatever google-adk
binds under their names (its originals, or ours after `install()`):
`_run_compaction_for_sliding_window`,
`_run_compaction_for_token_threshold_config`, `_prompt_chars_saved`,
`_apply_rewinds`, `_get_compaction_ranges`, `_process_compaction_events` and
`_recover_compacted_function_calls` (`_reference.locations()`). Every binding
of them in a loaded google-adk module is wrapped, so the calls google-adk
makes by name, by module attribute or through a function-local import are all
timed; nested calls count once (the outermost call is timed). The
summarizer's own time is taken out. The cyclic garbage collector is off
during the turns, as `timeit` has it, and runs between turns.

`simulate` runs the same script (same seed) twice side by side, one
conversation with `install()` and one without, a turn each in alternation;
`Simulation` records what lets the caller check that they did the same work
(events per turn, the summarizer's inputs), and how often the Rust core
declined in each turn (its share of the turn then ran google-adk's code).

The script's contents are as varied as a deployed app's: `ModelContent` and
`UserContent` beside plain `Content`, thought parts, inline images (see
`Script`).
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import inspect
import json
import random
import time
import warnings
import zlib
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.base_events_summarizer import BaseEventsSummarizer
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.tools.function_tool import FunctionTool
from google.genai import types
from pydantic import PrivateAttr

from .. import _native, _patch, _reference
from .sessions import (
    AGENT_NAME,
    COMPACTION_INTERVAL,
    OVERLAP_SIZE,
    _Builder,
    _words,
    style_rng,
)

APP_NAME = "fastcompact_bench"
USER_ID = "user"

_GC_EVERY = 10  # Turns between the garbage collections the turns skip.


@contextmanager
def no_gc() -> Iterator[None]:
    """The cyclic garbage collector off inside, as it was afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def quiet(build: Callable[[], Any]) -> Any:
    """Builds an `@experimental` google-adk object without its warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return build()


# -- timing ------------------------------------------------------------------------


class Stopwatch:
    """Accumulates the time spent inside the outermost timed call."""

    def __init__(self) -> None:
        self.total = 0.0
        self._depth = 0
        self._start = 0.0

    def enter(self) -> None:
        if self._depth == 0:
            self._start = time.perf_counter()
        self._depth += 1

    def leave(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.total += time.perf_counter() - self._start

    def exclude(self, seconds: float) -> None:
        """Takes `seconds` spent inside a timed call (a summarizer) out."""
        if self._depth:
            self.total -= seconds

    def take(self) -> float:
        """The seconds accumulated since the last `take`."""
        total, self.total = self.total, 0.0
        return total


def timed(
    function: Callable[..., Any], enter: Callable[[], None], leave: Callable[[], None]
) -> Callable[..., Any]:
    """`function` with `enter()` called as each stretch of its running time
    starts and `leave()` as it ends (an async generator's between items,
    a coroutine's around its awaits included)."""
    if inspect.isasyncgenfunction(function):

        async def timed_generator(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
            generator = function(*args, **kwargs)
            try:
                while True:
                    enter()
                    try:
                        item = await generator.__anext__()
                    except StopAsyncIteration:
                        return
                    finally:
                        leave()
                    yield item
            finally:
                await generator.aclose()

        return timed_generator
    if inspect.iscoroutinefunction(function):

        async def timed_coroutine(*args: Any, **kwargs: Any) -> Any:
            enter()
            try:
                return await function(*args, **kwargs)
            finally:
                leave()

        return timed_coroutine

    def timed_function(*args: Any, **kwargs: Any) -> Any:
        enter()
        try:
            return function(*args, **kwargs)
        finally:
            leave()

    return timed_function


def _copy_seconds() -> float:
    """Seconds the index has spent binding session copies, so far."""
    seconds = _native.index_stats()["copy_seconds"]
    assert isinstance(seconds, float | int), seconds
    return float(seconds)


def time_bindings(watch: Stopwatch) -> Callable[[], None]:
    """Wraps every google-adk binding of the timed functions; returns the undo.

    The functions are whatever their defining modules hold now, so call this
    after `install()` to time ours, and undo it before `uninstall()` (which
    only restores bindings that are still ours).
    """
    targets: dict[int, tuple[Callable[..., Any], Callable[..., Any]]] = {}
    for module_name, attr in _reference.locations().values():
        function = getattr(importlib.import_module(module_name), attr)
        targets[id(function)] = (function, timed(function, watch.enter, watch.leave))
    patched = _patch.rebind(targets)

    def undo() -> None:
        while patched:
            module, attr, value = patched.pop()
            setattr(module, attr, value)

    return undo


# -- the summarizer ------------------------------------------------------------------


def summary_event(events: list[Event], text: str, candidates_tokens: int) -> Event:
    """The compaction event `LlmEventSummarizer` would write for `events`
    with summary `text`: author ``"user"``, a fresh invocation id, the first
    to the last input timestamp, and usage metadata."""
    return Event(
        author="user",
        invocation_id=Event.new_id(),
        actions=EventActions(
            compaction=EventCompaction(
                start_timestamp=events[0].timestamp,
                end_timestamp=events[-1].timestamp,
                compacted_content=types.Content(role="model", parts=[types.Part(text=text)]),
            )
        ),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=100 * len(events), candidates_token_count=candidates_tokens
        ),
    )


class InstantSummarizer(BaseEventsSummarizer):
    """Answers at once with the event `LlmEventSummarizer` would write.

    Author ``"user"``, a fresh invocation id, ``EventCompaction`` from the
    first to the last input timestamp around a fixed ~150-word summary (a new
    `Content` each call), plus usage metadata. Records each input and the
    seconds spent in the call (`elapsed`), and takes them out of `stopwatch`.
    """

    def __init__(self, seed: int = 0) -> None:
        rng = random.Random(seed)
        self.text = "Conversation Language: English. " + _words(rng, 150, 150)
        self.calls: list[list[Event]] = []
        self.elapsed = 0.0
        self.stopwatch: Stopwatch | None = None

    async def maybe_summarize_events(self, *, events: list[Event]) -> Event | None:
        start = time.perf_counter()
        self.calls.append(list(events))
        event = summary_event(
            events, f"Summary of {len(events)} events. {self.text}", len(self.text) // 4
        )
        seconds = time.perf_counter() - start
        self.elapsed += seconds
        if self.stopwatch is not None:
            self.stopwatch.exclude(seconds)
        return event


# -- the model and its tools ---------------------------------------------------------


class ScriptedLlm(BaseLlm):
    """Answers each request with the next response of the loaded script."""

    model: str = "scripted"
    _script: list[LlmResponse] = PrivateAttr(default_factory=list)

    def load(self, responses: list[LlmResponse]) -> None:
        self._script = list(reversed(responses))

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        del llm_request, stream
        if not self._script:
            raise RuntimeError("the scripted model ran out of responses")
        yield self._script.pop()


def _tool_result(name: str, args: dict[str, Any]) -> dict[str, Any]:
    # The generator's tool results, drawn from the arguments.
    seed = zlib.crc32(json.dumps([name, args], sort_keys=True).encode())
    return _Builder(random.Random(seed))._tool_result(name, args)


def search_docs(query: str, top_k: int) -> dict[str, Any]:
    """Searches the knowledge base."""
    return _tool_result("search_docs", {"query": query, "top_k": top_k})


def query_database(sql: str) -> dict[str, Any]:
    """Runs a read-only SQL query."""
    return _tool_result("query_database", {"sql": sql})


def get_weather(city: str) -> dict[str, Any]:
    """The current weather in a city."""
    return _tool_result("get_weather", {"city": city})


def lookup_order(order_id: str) -> dict[str, Any]:
    """An order's status and items."""
    return _tool_result("lookup_order", {"order_id": order_id})


def calculator(expression: str) -> dict[str, Any]:
    """Evaluates an arithmetic expression."""
    return _tool_result("calculator", {"expression": expression})


TOOLS = (search_docs, query_database, get_weather, lookup_order, calculator)


class Script:
    """The user messages and model responses, turn by turn, from a seed.

    Their contents come in the classes `sessions` gives a session's (the
    builder's `model_content` and `user_content`, drawn from `style_rng`):
    `ModelContent` for most responses, as google-adk's streaming aggregator
    builds them, some opening with a thought part; `UserContent` for about
    half the messages, as google-adk's own helpers send them, some with an
    inline PNG. The Runner stores both as they come, and builds the tool
    responses itself (`Content(role="user")`).
    """

    def __init__(self, seed: int) -> None:
        self._builder = _Builder(random.Random(seed), style_rng(seed))
        self.rng = self._builder.rng
        self.prompt_tokens = 500

    def _response(self, parts: list[types.Part], chars: int) -> LlmResponse:
        self.prompt_tokens += chars // 4
        return LlmResponse(
            content=self._builder.model_content(parts),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=self.prompt_tokens,
                candidates_token_count=max(1, chars // 4),
                total_token_count=self.prompt_tokens + max(1, chars // 4),
            ),
        )

    def turn(self) -> tuple[types.Content, list[LlmResponse]]:
        """The next user message and the model's responses to the turn."""
        rng = self.rng
        message = self._builder.user_content([types.Part(text=_words(rng, 6, 50))], media=True)
        responses = []
        steps = rng.choices((0, 1, 2, 3), weights=(30, 40, 20, 10))[0]
        for _ in range(steps):
            parallel = rng.randint(2, 3) if rng.random() < 0.25 else 1
            parts = []
            if rng.random() < 0.3:
                parts.append(types.Part(text=_words(rng, 5, 25)))
            for index in range(parallel):
                name, args = self._builder._tool_call()
                parts.append(
                    types.Part(
                        function_call=types.FunctionCall(name=name, args=args),
                        # Gemini signs only the first call of a parallel batch.
                        thought_signature=rng.randbytes(32) if index == 0 else None,
                    )
                )
            responses.append(self._response(parts, 200 + 1_500 * parallel))
        text = _words(rng, 30, 250)
        responses.append(self._response([types.Part(text=text)], len(text)))
        return message, responses


# -- the simulation ------------------------------------------------------------------


@dataclass
class Simulation:
    """What one side of `simulate` measured and did, per turn (index 0: turn 1)."""

    patched: bool
    #: The mode installed (`None`: nothing installed).
    mode: str | None = None
    #: Seconds inside the timed functions, the summarizer's time taken out.
    overhead_s: list[float] = field(default_factory=list)
    #: Wall seconds of the whole turn (`Runner.run_async` to its end).
    turn_s: list[float] = field(default_factory=list)
    #: Session events after the turn.
    events: list[int] = field(default_factory=list)
    #: Per summarizer call: the turn, and the session positions of its input.
    summaries: list[tuple[int, list[int]]] = field(default_factory=list)
    #: Rust-core declines during the turn, by reason (`_native.decline_counts`):
    #: calls whose work google-adk's own code did. Always empty without
    #: `install()`, where nothing calls the Rust core.
    declines: list[dict[str, int]] = field(default_factory=list)


def build_runner(seed: int = 0) -> tuple[Runner, ScriptedLlm, InstantSummarizer]:
    """The Runner of the simulated app, its model and its summarizer."""
    llm = ScriptedLlm()
    summarizer: InstantSummarizer = quiet(lambda: InstantSummarizer(seed))
    agent = LlmAgent(
        name=AGENT_NAME,
        model=llm,
        instruction="You help the operations team with orders, reports and incidents.",
        tools=[FunctionTool(tool) for tool in TOOLS],
    )
    config = quiet(
        lambda: EventsCompactionConfig(
            compaction_interval=COMPACTION_INTERVAL,
            overlap_size=OVERLAP_SIZE,
            summarizer=summarizer,
        )
    )
    app = quiet(lambda: App(name=APP_NAME, root_agent=agent, events_compaction_config=config))
    runner = Runner(app=app, session_service=InMemorySessionService())
    return runner, llm, summarizer


class _Conversation:
    """One side's Runner, session and script, turn by turn."""

    def __init__(self, mode: str | None, seed: int, watch: Stopwatch) -> None:
        self.runner, self.llm, self.summarizer = build_runner(seed)
        self.summarizer.stopwatch = watch
        self.watch = watch
        self.script = Script(seed)
        self.result = Simulation(mode is not None, mode)
        service = self.runner.session_service
        assert isinstance(service, InMemorySessionService)
        self.service = service
        self.session_id = ""

    async def start(self) -> None:
        session = await self.service.create_session(app_name=APP_NAME, user_id=USER_ID)
        self.session_id = session.id

    async def turn(self, turn: int) -> None:
        """Runs the next turn with google-adk as `_switch` left it."""
        message, responses = self.script.turn()
        self.llm.load(responses)
        _native.decline_counts(reset=True)
        self.watch.take()
        copying = _copy_seconds()
        start = time.perf_counter()
        async for _ in self.runner.run_async(
            user_id=USER_ID, session_id=self.session_id, new_message=message
        ):
            pass
        result = self.result
        result.turn_s.append(time.perf_counter() - start)
        # Binding the session copies get_session hands out happens inside
        # get_session (`_patch._hook_session_copies`): ours, so counted.
        result.overhead_s.append(self.watch.take() + _copy_seconds() - copying)
        declined = _native.decline_counts(reset=True)
        result.declines.append({reason: count for reason, count in declined.items() if count})
        stored = self.service.sessions[APP_NAME][USER_ID][self.session_id].events
        result.events.append(len(stored))
        if self.summarizer.calls:
            position = {event.id: index for index, event in enumerate(stored)}
            for call in self.summarizer.calls:
                result.summaries.append((turn, [position[event.id] for event in call]))
            self.summarizer.calls.clear()


def simulate(
    turns: int,
    *,
    seed: int = 0,
    on_turn: Callable[[], None] | None = None,
    modes: Sequence[str | None] = (None, "parity"),
) -> tuple[Simulation, ...]:
    """Runs the same `turns` scripted turns without and with `install()`.

    Two conversations, one on google-adk's pure Python (nothing installed),
    one with adk-fastcompact installed, advance a turn each in alternation
    (who goes first alternates too), so both meet the machine in the same
    state; google-adk is switched and the timing wrappers are put around
    what it then binds between turns, outside the clock. google-adk is left
    as found: installed or not, no timing wrappers.

    Args:
        turns: Turns to run per conversation (>= 1).
        seed: Seed of the script.
        on_turn: Called after each turn of either conversation.

        modes: One conversation per mode: `None` (nothing installed) or a
            mode of `install()` (exact mode's conversation compacts on its
            own terms, so its session differs from the others').

    Returns:
        The measurements of each mode's conversation, in `modes` order
        (by default without, then with, adk-fastcompact).
    """
    if turns < 1:
        raise ValueError(f"turns must be >= 1, got {turns}")
    was_installed = _patch.installed()
    try:
        return asyncio.run(_run(turns, seed, on_turn, modes))
    finally:
        _patch.uninstall()
        if was_installed is not None:
            _patch.install(was_installed)


async def _run(
    turns: int,
    seed: int,
    on_turn: Callable[[], None] | None,
    modes: Sequence[str | None],
) -> tuple[Simulation, ...]:
    watch = Stopwatch()
    sides = tuple(_Conversation(mode, seed, watch) for mode in modes)
    for side in sides:
        await side.start()
    gc.collect()
    with no_gc():
        for turn in range(1, turns + 1):
            for side in sides if turn % 2 else reversed(sides):
                mode = side.result.mode
                if _patch.installed() != mode:
                    _patch.unpatch()
                if mode is not None:
                    _patch.install(mode, strict=True)
                undo = time_bindings(watch)
                try:
                    await side.turn(turn)
                finally:
                    undo()
                if on_turn is not None:
                    on_turn()
            if turn % _GC_EVERY == 0:
                gc.collect()
    return tuple(side.result for side in sides)
