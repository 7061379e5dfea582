"""The cold and warm regimes' timed calls: each operation's call prepared
on a session's events (untimed), timed with the garbage collector off, the
sides interleaved repetition by repetition; and the memory row of a size.

Filtering operations call one side's functions directly, with nothing
installed. Compaction operations (`CompactionCall`) call an entry point as
google-adk calls it, with `install()` switched to the side's mode, on a
session held by an `InMemorySessionService` of its own, the summarizer's
and the service's `append_event` time taken out.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import inspect
import statistics
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.events.event import Event
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session

from .. import _families, _native, _reference
from .bench_options import COMPACTION_OPS, FILTER_OPS
from .bench_report import BenchmarkMismatchError, MemoryRow
from .bench_sides import EXACT, Implementation, named, read_declines, set_installed
from .sessions import AGENT_NAME, COMPACTION_INTERVAL, OVERLAP_SIZE
from .simulate import APP_NAME, USER_ID, InstantSummarizer, no_gc, quiet

TOKEN_THRESHOLD = 500
"""The ``token_threshold`` op's threshold: the generator's prompt token
counts start at 500 (2,000 characters of prompt, 4 characters a token)."""

EVENT_RETENTION_SIZE = 4
"""Raw events the ``token_threshold`` op keeps uncompacted."""

_SESSION_ID = "bench-session"


Call = Callable[[], float]
"""One timed call on prepared arguments; returns its milliseconds."""

Prepare = Callable[[list[Event]], Call]
"""Prepares (untimed) an operation's call on these events."""


# Untimed calls per side before a warm regime's timed ones. One is not enough:
# on a small VM the first few back-to-back passes over a 10k-event session
# still get faster (caches, clocks), 16 ms down to 3 ms for `_apply_rewinds`.
# Calls of half a second and more have nothing left to warm after one.
_WARM_UP_CALLS = 3
_WARM_UP_SECONDS = 0.5


def default_repeat(n_events: int) -> int:
    """Timed calls per implementation, operation and regime for a size."""
    if n_events <= 2_000:
        return 15
    if n_events <= 20_000:
        return 7
    return 3


# -- the filtering operations ---------------------------------------------------------


def present_in(
    impl: Implementation, op: str, function: Callable[..., Any] | None
) -> Callable[..., Any]:
    """`function`, or ValueError where the installed google-adk has no `op`."""
    if function is None:
        raise ValueError(f"{impl.name}: google-adk {_families.adk_version()} has no {op}")
    return function


def _function(op: str, impl: Implementation) -> Callable[..., object]:
    if op == "apply_rewinds":
        return present_in(impl, op, impl.apply_rewinds)
    if op == "get_compaction_ranges":
        return present_in(impl, op, impl.get_compaction_ranges)
    if op == "process_compaction_events":

        def process(events: list[Event]) -> list[Event]:
            return impl.process_compaction_events(events, AGENT_NAME)

        return process
    if op == "recover_compacted_function_calls":
        return present_in(impl, op, impl.recover_compacted_function_calls)
    if op == "process+recover":

        def process_recover(events: list[Event]) -> list[Event]:
            processed = impl.process_compaction_events(events, AGENT_NAME)
            recover = impl.recover_compacted_function_calls
            return processed if recover is None else recover(processed, events)

        return process_recover
    raise ValueError(f"unknown operation {op!r}; expected one of {FILTER_OPS}")


def call_arguments(op: str, events: list[Event]) -> tuple[Any, ...]:
    if op == "recover_compacted_function_calls":
        process = named(_reference.original("process_compaction_events"))
        return (process(events, AGENT_NAME), events)
    return (events,)


def _time_ms(function: Callable[..., object], arguments: tuple[Any, ...]) -> float:
    with no_gc():
        start = time.perf_counter()
        result = function(*arguments)
        stop = time.perf_counter()
    del result  # Freed outside the timed region.
    return (stop - start) * 1e3


def prepare_filter(op: str, impl: Implementation) -> Prepare:
    function = _function(op, impl)

    def prepare(events: list[Event]) -> Call:
        arguments = call_arguments(op, events)

        def call() -> float:
            # google-adk's originals call each other by name: nothing installed.
            set_installed(False)
            return _time_ms(function, arguments)

        return call

    return prepare


# -- the compaction operations --------------------------------------------------------


def _config(op: str, summarizer: InstantSummarizer) -> EventsCompactionConfig:
    if op == "sliding_window":
        return EventsCompactionConfig(
            compaction_interval=COMPACTION_INTERVAL,
            overlap_size=OVERLAP_SIZE,
            summarizer=summarizer,
        )
    if op in ("token_threshold", "token_threshold_rolled"):
        # Before 2.6 google-adk requires the sliding-window pair too: one
        # that never fires.
        required = EventsCompactionConfig.model_fields["compaction_interval"].is_required()
        pair = {"compaction_interval": 10**9, "overlap_size": 0} if required else {}
        return EventsCompactionConfig(
            token_threshold=TOKEN_THRESHOLD,
            event_retention_size=EVENT_RETENTION_SIZE,
            summarizer=summarizer,
            **pair,
        )
    raise ValueError(f"unknown operation {op!r}; expected one of {COMPACTION_OPS}")


class TimedSessionService(InMemorySessionService):
    """`InMemorySessionService` that adds the seconds spent in `append_event`
    to `elapsed` (taken out of the compaction calls' time, as the
    summarizer's is)."""

    def __init__(self) -> None:
        super().__init__()
        self.elapsed = 0.0

    async def append_event(self, session: Session, event: Event) -> Event:
        start = time.perf_counter()
        try:
            return await super().append_event(session=session, event=event)
        finally:
            self.elapsed += time.perf_counter() - start


class Outcome(NamedTuple):
    """What one compaction call did."""

    ms: float  # Its time, the summarizer's own taken out.
    returned: object  # The token path's bool; None for the sliding window.
    produced: list[Event]  # Yielded (sliding window) or appended (token) events.
    summarized: list[list[Event]]  # The summarizer's inputs.


class CompactionCall:
    """One implementation's compaction entry point on a session of `events`.

    The session holds `events` (the objects, in a list of its own) and is
    registered with its own `InMemorySessionService`; after each call what
    the call appended is taken off again.
    """

    def __init__(
        self,
        op: str,
        impl: Implementation,
        events: list[Event],
        agent: LlmAgent,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.op = op
        self.impl = impl
        self.agent = agent
        self.loop = loop
        self.summarizer: InstantSummarizer = quiet(InstantSummarizer)
        self.config: EventsCompactionConfig = quiet(lambda: _config(op, self.summarizer))
        self.app: App = quiet(
            lambda: App(name=APP_NAME, root_agent=agent, events_compaction_config=self.config)
        )
        self.session = Session(id=_SESSION_ID, app_name=APP_NAME, user_id=USER_ID, events=events)
        self.service = TimedSessionService()
        self.service.sessions[APP_NAME] = {USER_ID: {_SESSION_ID: self.session}}
        self.length = len(self.session.events)
        self.last_update_time = self.session.last_update_time

    async def _call(self) -> tuple[float, object]:
        if self.op == "sliding_window":
            window = self.impl.run_compaction_for_sliding_window
            start = time.perf_counter()
            if inspect.isasyncgenfunction(window):
                yielded = [event async for event in window(self.app, self.session, self.service)]
            else:
                # Before 2.5 a coroutine that appends the summary itself.
                await window(self.app, self.session, self.service)
                yielded = []
            stop = time.perf_counter()
            return stop - start, yielded
        token = self.impl.run_compaction_for_token_threshold_config
        start = time.perf_counter()
        compacted = await token(
            config=self.config,
            session=self.session,
            session_service=self.service,
            agent=self.agent,
            agent_name=AGENT_NAME,
        )
        stop = time.perf_counter()
        return stop - start, compacted

    def run(self) -> Outcome:
        set_installed(self.impl.patched, self.impl.mode)
        self.summarizer.elapsed = 0.0
        self.summarizer.calls.clear()
        self.service.elapsed = 0.0
        with no_gc():
            seconds, result = self.loop.run_until_complete(self._call())
        seconds -= self.summarizer.elapsed + self.service.elapsed
        appended = self.session.events[self.length :]
        del self.session.events[self.length :]
        self.session.last_update_time = self.last_update_time
        if self.op == "sliding_window":
            # Yielded (2.5 on) or appended by the call itself (before).
            assert isinstance(result, list)
            return Outcome(seconds * 1e3, None, result + appended, list(self.summarizer.calls))
        return Outcome(seconds * 1e3, result, appended, list(self.summarizer.calls))

    def __call__(self) -> float:
        return self.run().ms


ROLLED_TAIL = 0.1
"""The share of the ``token_threshold_rolled`` op's session left after its
rolling summary."""


def rolled_session(
    events: list[Event], agent: LlmAgent, loop: asyncio.AbstractEventLoop
) -> list[Event]:
    """The due session `events` as tail retention in exact mode would have
    kept it: the history before its last `ROLLED_TAIL` (cut where an
    invocation begins) rolled into one summary by exact mode's own
    token-threshold compaction, stored there, and the rest after it. Its
    compaction is due again; exact mode's steady state, where the bench's
    google-adk-written session makes its first compaction roll every
    summary google-adk left side by side.

    Raises:
        BenchmarkMismatchError: If exact mode does not compact the history.
    """
    cut = int(len(events) * (1 - ROLLED_TAIL))
    while 0 < cut < len(events) and (
        events[cut].author != "user" or events[cut].invocation_id == events[cut - 1].invocation_id
    ):
        cut += 1
    head = events[:cut]
    got = CompactionCall("token_threshold", EXACT, head, agent, loop).run()
    if not got.produced:
        raise BenchmarkMismatchError(
            f"exact mode does not compact the first {cut:,} events of the due session"
        )
    return [*head, *got.produced, *events[cut:]]


def prepare_compaction(
    op: str, impl: Implementation, agent: LlmAgent, loop: asyncio.AbstractEventLoop
) -> Prepare:
    def prepare(events: list[Event]) -> Call:
        return CompactionCall(op, impl, events, agent, loop)

    return prepare


# -- timing ---------------------------------------------------------------------


def _warm_up(calls: Sequence[Call]) -> None:
    start = time.perf_counter()
    for index in range(_WARM_UP_CALLS):
        if index and time.perf_counter() - start >= _WARM_UP_SECONDS:
            break
        for call in calls:
            call()


def _fresh(events: list[Event]) -> list[Event]:
    with no_gc():
        fresh: list[Event] = copy.deepcopy(events)
    return fresh


def median_ms(
    regime: str,
    events: list[Event],
    sides: Sequence[Prepare],
    repeat: int,
    step: Callable[[], None],
) -> tuple[list[float], Counter[str]]:
    """Median ms of every side's calls, interleaved per repetition, and the
    Rust core's declines during the Rust sides' (all but the first) timed
    calls."""
    samples: list[list[float]] = [[] for _ in sides]
    declines: Counter[str] = Counter()
    warm: list[Call] = []
    if regime == "warm":
        warm = [prepare(events) for prepare in sides]
        _warm_up(warm)
    for repetition in range(repeat):
        # Rotate who goes first, so no side always runs after another.
        shift = repetition % len(sides)
        order = [*range(shift, len(sides)), *range(shift)]
        for side in order:
            call = sides[side](_fresh(events)) if regime == "cold" else warm[side]
            # Only this call's declines: not the deep copy's, not the warm-up's.
            read_declines(reset=True)
            samples[side].append(call())
            if side:
                declines.update(read_declines(reset=True))
            del call
            step()
    return [statistics.median(times) for times in samples], declines


def _peak_kib(call: Callable[[], object]) -> float:
    """KiB the traced heap grew to at most during `call` (its result freed)."""
    gc.collect()
    tracemalloc.start()
    try:
        with no_gc():
            result = call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    return peak / 1024


def memory_row(events: list[Event], python: Implementation, rust: Implementation) -> MemoryRow:
    """`MemoryRow` of `events` (the index holds what the timed calls left)."""
    before = _native.index_stats()
    python_call = _function("process+recover", python)
    rust_call = _function("process+recover", rust)
    set_installed(False)
    python_kib = _peak_kib(lambda: python_call(_fresh(events)))
    fresh = _fresh(events)
    index_growth = _stat(before, "bytes")
    rust_kib = _peak_kib(lambda: rust_call(fresh))
    stats = _native.index_stats()
    # Index growth during the call is Rust memory tracemalloc cannot see.
    rust_kib += max(0, _stat(stats, "bytes") - index_growth) / 1024
    stored = max(1, _stat(stats, "events"))
    return MemoryRow(
        op="memory",
        events=len(events),
        python_peak_kib=python_kib,
        rust_peak_kib=rust_kib,
        index_bytes_per_event=_stat(stats, "bytes") / stored,
        summary_bytes_per_event=_stat(stats, "summary_bytes") / stored,
    )


def _stat(stats: Mapping[str, object], name: str) -> int:
    """A counter of `_native.index_stats()`."""
    value = stats[name]
    assert isinstance(value, int), (name, value)
    return value
