"""Times google-adk's pure-Python compaction bookkeeping against ours, in one run.

Three regimes. For every session size, ``cold`` and ``warm`` time single
calls, Python and Rust interleaved repetition by repetition:

* ``cold``: each timed call gets its own fresh `copy.deepcopy` of the events
  (same ids, new objects), made before the clock starts and freed after it
  stops; such fresh objects are what `get_session` hands over (the
  in-memory service deep-copies by default, the database services build new
  Events), and they defeat anything either side could cache per object;
* ``warm``: every call gets the very same objects, after a few untimed ones.

The filtering operations are the four google-adk functions, each on the
whole `build_session` session, plus ``process+recover``:
`_process_compaction_events` then `_recover_compacted_function_calls` on its
result, as google-adk's `_get_contents` runs them on every model call (the
headline row). The input of ``recover_compacted_function_calls`` alone is the
reference `_process_compaction_events` of the same (fresh, when cold) events.
Python's side is the originals (`_reference`) and Rust's the functions
`install()` puts in their place, called directly, with nothing installed.

The compaction operations are google-adk's two compaction entry points on a
`build_due_session` session (one whose sliding window is due), each called
as google-adk calls it, with an `InstantSummarizer`:

* ``sliding_window``: a full iteration of `_run_compaction_for_sliding_window`
  (`compaction_interval=3`, `overlap_size=1`), as the Runner makes after an
  invocation; the yielded summary is not appended;
* ``token_threshold``: `_run_compaction_for_token_threshold_config`
  (`token_threshold=500`, `event_retention_size=4`, the agent's name, no
  branch or scope), as the request processor makes before a model call; the
  session's latest model answer reports at least 500 prompt tokens, so it
  triggers, and it appends the summary through an `InMemorySessionService`
  holding the session, which is then taken off again so every call does the
  same work;
* ``token_threshold_rolled``: the same call on `rolled_session` of it (one
  event more): the history before its last tenth rolled into one summary by
  exact mode's tail retention, as a session compacted that way holds it.
  (On the google-adk-written session exact mode's first compaction rolls
  the ~700 summaries google-adk left side by side into one: a one-time
  migration, the ``token_threshold`` row.)

The summarizer's own time (building the summary Event) is measured inside it
and subtracted, and so is the session service's `append_event` (the token
path appends its summary; `InMemorySessionService` first compares the event
with every stored event of its id, a scan over the whole session that is
storage, not compaction bookkeeping, and costs both sides the same, about
2-4 ms at 10k events). Python's side is google-adk's original with nothing
installed, pure Python end to end; Rust's side is ours with `install()`
active, since it calls google-adk's helpers, which then run ours. google-adk
is switched between the two before each call, outside the clock.

``turn`` runs a scripted conversation through a real google-adk Runner, once
with `install()` and once without (see `simulate`), and reports the time per
turn spent inside compaction and prompt filtering, averaged over the
`simulate.WINDOW` turns up to each checkpoint.

Before any timing the two sides are compared once per size (same objects for
rewinds and recovery, equal ranges, the same raw events and equal summaries
for processing; the same summarizer input and the same produced summary for
compaction; the same events and summarizer inputs, turn by turn, for the
conversation): a benchmark never reports a fast path that is wrong.

Nor does it hide one that is not taken. When the Rust core declines an input
(`_native.decline_counts`: a class it does not know, a NaN ordering key, ...)
google-adk's own code does that call's work, and the Rust timing is then
partly Python's. Every row carries `Row.declines`, the number of declines
during its Rust-side calls, with their reasons: the timed calls, and on each
operation's first row of a size (the first regime) the agreement check's
call too; a turn row counts the turns since the previous checkpoint, all of
them checked, the last `simulate.WINDOW` timed. The CLI prints the counts
in a column and warns when any is not zero. The benchmark still runs: a
decline is a slower answer, not a wrong one (the agreement checks say so).

Each timed call runs with the cyclic garbage collector off, as `timeit` does,
and so do the untimed deep copies (three times faster without it).
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple, TypedDict

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.events.event import Event
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session

from .. import _exact_mode, _families, _filtering, _native, _patch, _reference
from .sessions import (
    AGENT_NAME,
    COMPACTION_INTERVAL,
    MIN_DUE_EVENTS,
    OVERLAP_SIZE,
    build_due_session,
    build_session,
)
from .simulate import (
    APP_NAME,
    DEFAULT_CHECKPOINTS,
    USER_ID,
    WINDOW,
    InstantSummarizer,
    ScriptedLlm,
    no_gc,
    quiet,
    simulate,
)

FILTER_OPS: tuple[str, ...] = (
    "apply_rewinds",
    "get_compaction_ranges",
    "process_compaction_events",
    "recover_compacted_function_calls",
    "process+recover",
)
"""The prompt-filtering operations, in report order."""

FILTER_FUNCTIONS = frozenset(FILTER_OPS) - {"process+recover"}
"""The filtering operations that time one google-adk function each."""

COMPACTION_OPS: tuple[str, ...] = ("sliding_window", "token_threshold", "token_threshold_rolled")
"""The compaction entry points, in report order."""

OPS: tuple[str, ...] = FILTER_OPS + COMPACTION_OPS
"""The operations timed per size in the cold and warm regimes, in report order."""

EXACT_OPS: tuple[str, ...] = (
    "process_compaction_events",
    "process+recover",
    "sliding_window",
    "token_threshold",
    "token_threshold_rolled",
)
"""The operations exact mode does its own way (the others run the same code
in both modes), timed a third time in exact mode beside parity's."""

HEADLINE = "process+recover"
"""The filtering row every model call pays for."""

TURN_OP = "turn_overhead"
"""The one operation of the turn regime."""

ALL_OPS: tuple[str, ...] = (*OPS, TURN_OP)
"""Every operation name `run_bench` accepts."""

SIZED_REGIMES: tuple[str, ...] = ("cold", "warm")
"""Fresh deep copies for every call, or the same objects again."""

REGIMES: tuple[str, ...] = (*SIZED_REGIMES, "turn")
"""Every regime, in report order."""

DEFAULT_SIZES: tuple[int, ...] = (1_000, 10_000, 50_000)
"""Session sizes (events) timed by default."""

DEFAULT_TURNS: tuple[int, ...] = DEFAULT_CHECKPOINTS
"""Turns at which the turn regime reports, by default."""

TOKEN_THRESHOLD = 500
"""The ``token_threshold`` op's threshold: the generator's prompt token
counts start at 500 (2,000 characters of prompt, 4 characters a token)."""

EVENT_RETENTION_SIZE = 4
"""Raw events the ``token_threshold`` op keeps uncompacted."""

_SESSION_ID = "bench-session"


class Row(TypedDict):
    """One line of the report: milliseconds of one operation."""

    op: str
    regime: str
    events: int
    python_ms: float
    rust_ms: float
    ratio: float  # python_ms / rust_ms: how many times faster Rust is.
    #: The same call in exact mode (`install(mode="exact")`'s function), for
    #: the operations of `EXACT_OPS`; None for the others.
    exact_ms: float | None
    #: exact_ms / rust_ms: exact mode's cost against parity's (1.2: 20% slower).
    exact_vs_parity: float | None
    #: Rust-core declines during the row's Rust-side calls (see the module
    #: docstring): when not 0, google-adk's own code did part of `rust_ms`.
    declines: int
    #: `declines` by reason, reasons sorted; empty when `declines` is 0.
    decline_reasons: dict[str, int]


def _row(
    op: str,
    regime: str,
    events: int,
    python_ms: float,
    rust_ms: float,
    declines: Mapping[str, int],
    exact_ms: float | None = None,
) -> Row:
    """One timed case, with its ratios and the Rust sides' declines."""
    return Row(
        op=op,
        regime=regime,
        events=events,
        python_ms=python_ms,
        rust_ms=rust_ms,
        ratio=_ratio(python_ms, rust_ms),
        exact_ms=exact_ms,
        exact_vs_parity=None if exact_ms is None else _ratio(exact_ms, rust_ms),
        declines=sum(declines.values()),
        decline_reasons=_reasons(declines),
    )


def _reasons(declines: Mapping[str, int]) -> dict[str, int]:
    return {reason: declines[reason] for reason in sorted(declines) if declines[reason]}


class MemoryRow(TypedDict):
    """Memory of one size: the peak Python-heap growth during one cold
    process+recover call of each side (traced with `tracemalloc`; ours
    allocates its Rust working memory outside that heap, so it is added
    from the index's own count), and the index's bytes per stored event
    after every timed call of the size."""

    op: str  # "memory"
    events: int
    python_peak_kib: float
    rust_peak_kib: float
    index_bytes_per_event: float
    summary_bytes_per_event: float


class Report(NamedTuple):
    """What `run_bench` measured."""

    rows: list[Row]
    memory: list[MemoryRow]
    #: The google-adk release and family measured (`measured_family()`).
    family: str = ""


class TurnRow(Row):
    """A turn-regime line: mean per-turn milliseconds around turn `turn`.

    Its `declines` are those of the Rust side's turns after the previous
    checkpoint up to `turn` (each turn is checked; the last `WINDOW` are
    averaged), so the rows together count every turn once.
    """

    turn: int


class Implementation(NamedTuple):
    """The functions under test as one implementation provides them."""

    name: str
    #: None where the installed google-adk has none (before 2.5).
    apply_rewinds: Callable[[list[Event]], list[Event]] | None
    #: None where the installed google-adk has none (before 2.13).
    get_compaction_ranges: Callable[[list[Event]], list[tuple[int, float, float]]] | None
    #: Called `(events, agent_name)`; before 2.7 google-adk's takes the
    #: events alone, and the name is dropped on both sides.
    process_compaction_events: Callable[[list[Event], str], list[Event]]
    #: None where the installed google-adk has none (before 2.5).
    recover_compacted_function_calls: Callable[[list[Event], Sequence[Event]], list[Event]] | None
    run_compaction_for_sliding_window: Callable[..., Any]
    run_compaction_for_token_threshold_config: Callable[..., Any]
    #: Whether the compaction entry points run with `install()` active.
    patched: bool
    #: The mode `install()` is called with when `patched`.
    mode: str = "parity"


def python_implementation() -> Implementation:
    """google-adk's pure-Python originals, the baseline, called directly.

    Resolved through `_reference` on first use, so this works after
    `install()` as long as the originals were resolved before it.
    """
    return Implementation(
        "python",
        _present("apply_rewinds"),
        _present("get_compaction_ranges"),
        _named(_reference.original("process_compaction_events")),
        _present("recover_compacted_function_calls"),
        _reference.original("run_compaction_for_sliding_window"),
        _reference.original("run_compaction_for_token_threshold_config"),
        patched=False,
    )


def _present(name: str) -> Any:
    """google-adk's `name` where the installed release has it, else None."""
    return _reference.original(name) if name in _reference.locations() else None


def _named(process: Callable[..., list[Event]]) -> Callable[[list[Event], str], list[Event]]:
    """`process` called `(events, agent_name)`: before 2.7 google-adk's
    `_process_compaction_events` takes the events alone (summaries by "model")."""
    if _families.active().attributed:
        return process

    def unattributed(events: list[Event], agent_name: str) -> list[Event]:
        return process(events)

    return unattributed


def _ours(name: str) -> Any:
    """What `install()` binds for `name` on the installed family."""
    return _patch.replacements("parity").get(name)


RUST = Implementation(
    "rust",
    _ours("apply_rewinds"),
    _ours("get_compaction_ranges"),
    _named(_ours("process_compaction_events")),
    _ours("recover_compacted_function_calls"),
    _ours("run_compaction_for_sliding_window"),
    _ours("run_compaction_for_token_threshold_config"),
    patched=True,
)
"""The Rust-backed functions `install()` puts in their place."""

EXACT = Implementation(
    "exact",
    _filtering.apply_rewinds,
    _filtering.get_compaction_ranges,
    _exact_mode.process_compaction_events,
    _filtering.recover_compacted_function_calls,
    _exact_mode.run_compaction_for_sliding_window,
    _exact_mode.run_compaction_for_token_threshold_config,
    patched=True,
    mode="exact",
)
"""The functions `install(mode="exact")` puts in their place."""

Progress = Callable[[int, int, str], None]
"""Called as ``progress(completed, total, description)`` as work advances."""

_Call = Callable[[], float]
"""One timed call on prepared arguments; returns its milliseconds."""

_Prepare = Callable[[list[Event]], _Call]
"""Prepares (untimed) an operation's call on these events."""


def has_ranges() -> bool:
    """Whether the installed google-adk has `_get_compaction_ranges` (2.13)."""
    return "get_compaction_ranges" in _reference.locations()


def measured_family() -> str:
    """The google-adk family the bench measures, for its report."""
    info = _patch.family()
    label = info["family"] or "no recorded family"
    profile = f"profile {info['profile']}" if info["profile"] else "not accelerated"
    return f"google-adk {info['version']} ({label}; {profile})"


class BenchmarkMismatchError(AssertionError):
    """The two implementations disagree (a Rust decline is no mismatch: it is
    counted in `Row.declines`)."""


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


def _set_installed(patched: bool, mode: str = "parity") -> None:
    wanted = mode if patched else None
    if _patch.installed() not in (None, wanted):
        _patch.unpatch()
    if wanted is not None and _patch.installed() is None:
        _patch.install(wanted, strict=True)
    elif wanted is None and _patch.installed() is not None:
        _patch.unpatch()


def _ratio(python_ms: float, rust_ms: float) -> float:
    return python_ms / rust_ms if rust_ms > 0 else float("inf")


# -- the filtering operations ---------------------------------------------------------


def _present_in(
    impl: Implementation, op: str, function: Callable[..., Any] | None
) -> Callable[..., Any]:
    """`function`, or ValueError where the installed google-adk has no `op`."""
    if function is None:
        raise ValueError(f"{impl.name}: google-adk {_families.adk_version()} has no {op}")
    return function


def _function(op: str, impl: Implementation) -> Callable[..., object]:
    if op == "apply_rewinds":
        return _present_in(impl, op, impl.apply_rewinds)
    if op == "get_compaction_ranges":
        return _present_in(impl, op, impl.get_compaction_ranges)
    if op == "process_compaction_events":

        def process(events: list[Event]) -> list[Event]:
            return impl.process_compaction_events(events, AGENT_NAME)

        return process
    if op == "recover_compacted_function_calls":
        return _present_in(impl, op, impl.recover_compacted_function_calls)
    if op == "process+recover":

        def process_recover(events: list[Event]) -> list[Event]:
            processed = impl.process_compaction_events(events, AGENT_NAME)
            recover = impl.recover_compacted_function_calls
            return processed if recover is None else recover(processed, events)

        return process_recover
    raise ValueError(f"unknown operation {op!r}; expected one of {FILTER_OPS}")


def _arguments(op: str, events: list[Event]) -> tuple[Any, ...]:
    if op == "recover_compacted_function_calls":
        process = _named(_reference.original("process_compaction_events"))
        return (process(events, AGENT_NAME), events)
    return (events,)


def _time_ms(function: Callable[..., object], arguments: tuple[Any, ...]) -> float:
    with no_gc():
        start = time.perf_counter()
        result = function(*arguments)
        stop = time.perf_counter()
    del result  # Freed outside the timed region.
    return (stop - start) * 1e3


def _prepare_filter(op: str, impl: Implementation) -> _Prepare:
    function = _function(op, impl)

    def prepare(events: list[Event]) -> _Call:
        arguments = _arguments(op, events)

        def call() -> float:
            # google-adk's originals call each other by name: nothing installed.
            _set_installed(False)
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


class _Outcome(NamedTuple):
    """What one compaction call did."""

    ms: float  # Its time, the summarizer's own taken out.
    returned: object  # The token path's bool; None for the sliding window.
    produced: list[Event]  # Yielded (sliding window) or appended (token) events.
    summarized: list[list[Event]]  # The summarizer's inputs.


class _CompactionCall:
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

    def run(self) -> _Outcome:
        _set_installed(self.impl.patched, self.impl.mode)
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
            return _Outcome(seconds * 1e3, None, result + appended, list(self.summarizer.calls))
        return _Outcome(seconds * 1e3, result, appended, list(self.summarizer.calls))

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
    got = _CompactionCall("token_threshold", EXACT, head, agent, loop).run()
    if not got.produced:
        raise BenchmarkMismatchError(
            f"exact mode does not compact the first {cut:,} events of the due session"
        )
    return [*head, *got.produced, *events[cut:]]


def _prepare_compaction(
    op: str, impl: Implementation, agent: LlmAgent, loop: asyncio.AbstractEventLoop
) -> _Prepare:
    def prepare(events: list[Event]) -> _Call:
        return _CompactionCall(op, impl, events, agent, loop)

    return prepare


# -- agreement ------------------------------------------------------------------


def _same_objects(label: str, expected: list[Event], actual: list[Event]) -> None:
    if len(expected) != len(actual):
        raise BenchmarkMismatchError(f"{label}: {len(actual)} events, expected {len(expected)}")
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        if want is not got:
            raise BenchmarkMismatchError(
                f"{label}: event {index} is {got.id!r}, expected {want.id!r}"
            )


def _same_prompt(
    label: str, source: list[Event], expected: list[Event], actual: list[Event]
) -> None:
    """Raw events must be the caller's objects; summaries equal, id aside."""
    if len(expected) != len(actual):
        raise BenchmarkMismatchError(f"{label}: {len(actual)} events, expected {len(expected)}")
    raw = {id(event) for event in source}
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        if id(want) in raw or id(got) in raw:
            if want is not got:
                raise BenchmarkMismatchError(
                    f"{label}: event {index} is {got.id!r}, expected {want.id!r}"
                )
        elif want.model_dump(exclude={"id"}) != got.model_dump(exclude={"id"}):
            raise BenchmarkMismatchError(f"{label}: summary {index} differs from google-adk's")


def check_agreement(
    events: list[Event], python: Implementation, rust: Implementation
) -> dict[str, Counter[str]]:
    """Raises `BenchmarkMismatchError` unless both filter alike.

    Returns the Rust core's declines during `rust`'s calls, per operation of
    `FILTER_OPS`, by reason (empty when it declined none): the rows of those
    operations report them.
    """
    declines: dict[str, Counter[str]] = {op: Counter() for op in FILTER_OPS}

    def counted(op: str, call: Callable[[], Any]) -> Any:
        _declines(reset=True)
        try:
            return call()
        finally:
            declines[op].update(_declines(reset=True))

    if python.apply_rewinds is not None and rust.apply_rewinds is not None:
        rewinds = rust.apply_rewinds
        _same_objects(
            "apply_rewinds",
            python.apply_rewinds(events),
            counted("apply_rewinds", lambda: rewinds(events)),
        )
    if python.get_compaction_ranges is not None and rust.get_compaction_ranges is not None:
        expected_ranges = python.get_compaction_ranges(events)
        ranges = rust.get_compaction_ranges
        actual_ranges = counted("get_compaction_ranges", lambda: ranges(events))
        if actual_ranges != expected_ranges:
            raise BenchmarkMismatchError("get_compaction_ranges: different ranges")
    _same_prompt(
        "process_compaction_events",
        events,
        python.process_compaction_events(events, AGENT_NAME),
        counted(
            "process_compaction_events",
            lambda: rust.process_compaction_events(events, AGENT_NAME),
        ),
    )
    py_recover, rust_recover = (
        python.recover_compacted_function_calls,
        rust.recover_compacted_function_calls,
    )
    if py_recover is not None and rust_recover is not None:
        processed, source = _arguments("recover_compacted_function_calls", events)
        _same_objects(
            "recover_compacted_function_calls",
            py_recover(processed, source),
            counted(
                "recover_compacted_function_calls",
                lambda: rust_recover(processed, source),
            ),
        )

    def prompt(impl: Implementation) -> list[Event]:
        processed = impl.process_compaction_events(events, AGENT_NAME)
        recover = impl.recover_compacted_function_calls
        return processed if recover is None else recover(processed, events)

    _same_prompt(
        "process+recover", events, prompt(python), counted("process+recover", lambda: prompt(rust))
    )
    return declines


def _fresh_fields(event: Event) -> dict[str, Any]:
    # Events made during the call: ids are drawn anew, timestamps read anew.
    dump: dict[str, Any] = event.model_dump(exclude={"id", "invocation_id", "timestamp"})
    return dump


def _summarized(events: list[Event], source: list[Event]) -> list[object]:
    """A summarizer input: ids of session events, fields of events made anew."""
    raw = {id(event) for event in source}
    return [
        event.id if id(event) in raw else ("new", event.model_dump(exclude={"id", "invocation_id"}))
        for event in events
    ]


def check_compaction(
    op: str,
    events: list[Event],
    python: Implementation,
    rust: Implementation,
    agent: LlmAgent,
    loop: asyncio.AbstractEventLoop,
) -> Counter[str]:
    """Raises `BenchmarkMismatchError` unless both compact `events` alike.

    Both must hand the summarizer the same events (the same session events,
    equal new ones such as a rolling-summary seed) and yield or append an
    equal summary (new ids and timestamps aside); google-adk must compact.

    Returns the Rust core's declines during `rust`'s call, by reason.
    """
    want = _CompactionCall(op, python, events, agent, loop).run()
    rust_call = _CompactionCall(op, rust, events, agent, loop)
    _declines(reset=True)
    got = rust_call.run()
    declines = Counter(_declines(reset=True))
    if not want.summarized or not want.produced:
        raise BenchmarkMismatchError(
            f"{op}: google-adk does not compact the {len(events):,}-event session;"
            " there is nothing to time"
        )
    if want.returned != got.returned:
        raise BenchmarkMismatchError(f"{op}: returned {got.returned!r}, expected {want.returned!r}")
    if [_summarized(call, events) for call in want.summarized] != [
        _summarized(call, events) for call in got.summarized
    ]:
        raise BenchmarkMismatchError(f"{op}: the summarizer got different events")
    if [_fresh_fields(event) for event in want.produced] != [
        _fresh_fields(event) for event in got.produced
    ]:
        raise BenchmarkMismatchError(f"{op}: the compaction event differs from google-adk's")
    return declines


def check_exact_prompt(
    events: list[Event], parity: Implementation, exact: Implementation
) -> dict[str, Counter[str]]:
    """Raises `BenchmarkMismatchError` unless exact mode's prompt equals
    parity's on `events`. The generated sessions are ones interval coverage
    reads right (timestamps in storage order, no concurrent appends, every
    compaction written over what it summarized), so the two coverage models
    agree there: exact mode's rows time the same answer.

    Returns the Rust core's declines during `exact`'s calls, per operation.
    """
    declines: dict[str, Counter[str]] = {}

    def prompt(impl: Implementation, recover: bool) -> list[Event]:
        processed = impl.process_compaction_events(events, AGENT_NAME)
        if recover:
            return _present_in(impl, "process+recover", impl.recover_compacted_function_calls)(
                processed, events
            )
        return processed

    for op, recover in (("process_compaction_events", False), ("process+recover", True)):
        want = prompt(parity, recover)
        _declines(reset=True)
        got = prompt(exact, recover)
        declines[op] = Counter(_declines(reset=True))
        _same_prompt(f"{op} (exact mode)", events, want, got)
    return declines


def check_exact_compaction(
    op: str,
    events: list[Event],
    exact: Implementation,
    agent: LlmAgent,
    loop: asyncio.AbstractEventLoop,
) -> Counter[str]:
    """Raises `BenchmarkMismatchError` unless exact mode compacts the due
    session `events` (its timing would otherwise be of a call that stops
    early). Its choice of events is its own (coverage, not position), so
    only that it summarizes and writes a compaction is checked.

    Returns the Rust core's declines during the call, by reason.
    """
    _declines(reset=True)
    got = _CompactionCall(op, exact, events, agent, loop).run()
    declines = Counter(_declines(reset=True))
    if not got.summarized or not got.produced:
        raise BenchmarkMismatchError(
            f"{op}: exact mode does not compact the {len(events):,}-event session;"
            " there is nothing to time"
        )
    return declines


def _declines(reset: bool) -> dict[str, int]:
    """The Rust core's declines on this thread since the last reset, by reason."""
    counts: dict[str, int] = _native.decline_counts(reset)
    return {reason: count for reason, count in counts.items() if count}


def total_declines(rows: Iterable[Row]) -> Counter[str]:
    """The declines of all `rows`, by reason (what the CLI warns about)."""
    total: Counter[str] = Counter()
    for row in rows:
        total.update(row["decline_reasons"])
    return total


# -- timing ---------------------------------------------------------------------


def _warm_up(calls: Sequence[_Call]) -> None:
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


def _median_ms(
    regime: str,
    events: list[Event],
    sides: Sequence[_Prepare],
    repeat: int,
    step: Callable[[], None],
) -> tuple[list[float], Counter[str]]:
    """Median ms of every side's calls, interleaved per repetition, and the
    Rust core's declines during the Rust sides' (all but the first) timed
    calls."""
    samples: list[list[float]] = [[] for _ in sides]
    declines: Counter[str] = Counter()
    warm: list[_Call] = []
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
            _declines(reset=True)
            samples[side].append(call())
            if side:
                declines.update(_declines(reset=True))
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


def _memory_row(events: list[Event], python: Implementation, rust: Implementation) -> MemoryRow:
    """`MemoryRow` of `events` (the index holds what the timed calls left)."""
    before = _native.index_stats()
    python_call = _function("process+recover", python)
    rust_call = _function("process+recover", rust)
    _set_installed(False)
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


def _turn_rows(
    checkpoints: Sequence[int],
    seed: int,
    step: Callable[[str | None], None],
    with_exact: bool = True,
) -> list[Row]:
    """The turn regime: the same conversation without and with `install()`,
    and with `install(mode="exact")` (whose session differs: it compacts by
    coverage; it must compact too)."""
    turns = max(checkpoints)
    step(f"turn regime: {turns} turns, pure-Python google-adk and adk-fastcompact in turn")
    modes: tuple[str | None, ...] = (None, "parity", "exact") if with_exact else (None, "parity")
    python, rust, *more = simulate(turns, seed=seed, on_turn=lambda: step(None), modes=modes)
    exact = more[0] if more else None
    if exact is not None and not exact.summaries:
        raise BenchmarkMismatchError("turn: exact mode never compacted the conversation")
    for turn in range(turns):
        if python.events[turn] != rust.events[turn]:
            raise BenchmarkMismatchError(
                f"turn {turn + 1}: {rust.events[turn]} events, expected {python.events[turn]}"
            )
    if python.summaries != rust.summaries:
        raise BenchmarkMismatchError("turn: the summarizer got different events")
    rows: list[Row] = []
    previous = 0
    for checkpoint in sorted(set(checkpoints)):
        window = slice(max(0, checkpoint - WINDOW), checkpoint)
        python_ms = statistics.mean(python.overhead_s[window]) * 1e3
        rust_ms = statistics.mean(rust.overhead_s[window]) * 1e3
        exact_ms = None if exact is None else statistics.mean(exact.overhead_s[window]) * 1e3
        declines: Counter[str] = Counter()
        for side in (rust, exact):
            for turn_declines in side.declines[previous:checkpoint] if side else ():
                declines.update(turn_declines)
        previous = checkpoint
        rows.append(
            TurnRow(
                op=TURN_OP,
                regime="turn",
                events=python.events[checkpoint - 1],
                turn=checkpoint,
                python_ms=python_ms,
                rust_ms=rust_ms,
                ratio=_ratio(python_ms, rust_ms),
                exact_ms=exact_ms,
                exact_vs_parity=None if exact_ms is None else _ratio(exact_ms, rust_ms),
                declines=sum(declines.values()),
                decline_reasons=_reasons(declines),
            )
        )
    return rows


def _names(kind: str, given: Iterable[str], known: tuple[str, ...]) -> list[str]:
    names = list(dict.fromkeys(given))
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise ValueError(f"{kind} must be some of {', '.join(known)}; got {names}")
    return names


class Selection(NamedTuple):
    """What `run_bench` runs, validated (see `select`)."""

    sizes: list[int]  # Empty when no cold or warm operation is selected.
    sized_regimes: list[str]
    filter_ops: list[str]
    compaction_ops: list[str]
    turns: list[int]  # The turn regime's checkpoints; empty when it does not run.


def select(
    sizes: Iterable[int] = DEFAULT_SIZES,
    repeat: int | None = None,
    *,
    regimes: Iterable[str] = REGIMES,
    ops: Iterable[str] = ALL_OPS,
    turns: Iterable[int] = DEFAULT_TURNS,
) -> Selection:
    """Validates `run_bench`'s arguments; raises ValueError on bad ones."""
    regimes = _names("regimes", regimes, REGIMES)
    ops = _names("ops", ops, ALL_OPS)
    sizes, checkpoints = list(sizes), list(turns)
    sized_regimes = [regime for regime in SIZED_REGIMES if regime in regimes]
    sized_ops = [op for op in OPS if op in ops] if sized_regimes else []
    run_turns = "turn" in regimes and TURN_OP in ops
    if not sized_ops and not run_turns:
        raise ValueError(
            f"nothing to time: no operation of {', '.join(ops)} runs in {', '.join(regimes)}"
        )
    if sized_ops:
        if not sizes or any(size < 1 for size in sizes):
            raise ValueError(f"sizes must be a non-empty list of sizes >= 1: {sizes}")
        compaction = [op for op in sized_ops if op in COMPACTION_OPS]
        if compaction and min(sizes) < MIN_DUE_EVENTS:
            raise ValueError(
                f"the compaction operations ({', '.join(compaction)}) need sessions of "
                f"at least {MIN_DUE_EVENTS} events; got sizes {sizes}"
            )
    if run_turns and (not checkpoints or any(turn < 1 for turn in checkpoints)):
        raise ValueError(f"turns must be a non-empty list of turns >= 1: {checkpoints}")
    if repeat is not None and repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    return Selection(
        sizes=sizes if sized_ops else [],
        sized_regimes=sized_regimes if sized_ops else [],
        filter_ops=[op for op in sized_ops if op in FILTER_OPS],
        compaction_ops=[op for op in sized_ops if op in COMPACTION_OPS],
        turns=checkpoints if run_turns else [],
    )


def run_bench(
    sizes: Iterable[int] = DEFAULT_SIZES,
    repeat: int | None = None,
    progress: Progress | None = None,
    *,
    seed: int = 0,
    python: Implementation | None = None,
    rust: Implementation = RUST,
    exact: Implementation | Literal["auto"] | None = "auto",
    regimes: Iterable[str] = REGIMES,
    ops: Iterable[str] = ALL_OPS,
    turns: Iterable[int] = DEFAULT_TURNS,
) -> Report:
    """Times the selected operations and regimes, Python against Rust.

    Args:
        sizes: Session sizes in events for the cold and warm regimes, each
            >= 1, and >= `MIN_DUE_EVENTS` for the compaction operations.
        repeat: Timed calls per implementation, operation and regime; by
            default `default_repeat(size)` (15, 7, 3 for 1k, 10k, 50k).
        progress: Called as ``progress(completed, total, description)``
            before the first step and after every step.
        seed: Seed of `build_session`, `build_due_session` and the
            conversation script.
        python: The baseline; by default `python_implementation()`.
        rust: The implementation under test.
        exact: Exact mode's implementation, timed beside `rust` on
            `EXACT_OPS` and in the turn regime (`Row.exact_ms`); None to
            leave it out; by default `EXACT` where the installed google-adk's
            family is exact mode's (2.13), else None.
        regimes: Some of `REGIMES`.
        ops: Some of `ALL_OPS`; `TURN_OP` is the turn regime's.
        turns: The turn regime's checkpoints, each >= 1; it runs
            ``max(turns)`` turns per side.

    Returns:
        `Report.rows`: one row per size, regime and operation (cold and
        warm, in that nesting order), then one `TurnRow` per checkpoint,
        each with the Rust core's declines during its Rust-side calls
        (`Row.declines`; `total_declines` sums them);
        `Report.memory`: one `MemoryRow` per size that ran the filtering
        operations.

    Raises:
        ValueError: On a bad size, repeat, regime, operation or checkpoint,
            or a selection with nothing to time.
        BenchmarkMismatchError: If the implementations disagree. (The Rust
            core declining is no error: the rows count it.)
    """
    chosen = select(sizes, repeat, regimes=regimes, ops=ops, turns=turns)
    sizes, checkpoints = chosen.sizes, chosen.turns
    sized_regimes, filter_ops, compaction_ops = (
        chosen.sized_regimes,
        chosen.filter_ops,
        chosen.compaction_ops,
    )
    exact_family = _families.active().name == _families.EXACT_PROFILE
    if exact == "auto":
        exact = EXACT if exact_family else None
    # google-adk before 2.13 has no `_get_compaction_ranges` to time, before
    # 2.5 no `_apply_rewinds` and no `_recover_compacted_function_calls`.
    present = _reference.locations()
    filter_ops = [op for op in filter_ops if op not in FILTER_FUNCTIONS or op in present]
    # The rolled session is exact mode's steady state, which only its family has.
    if not exact_family:
        compaction_ops = [op for op in compaction_ops if op != "token_threshold_rolled"]
    if not filter_ops and not compaction_ops and not checkpoints:
        raise ValueError(
            f"nothing to time: google-adk {_families.adk_version()} has none of"
            f" {', '.join(chosen.filter_ops + chosen.compaction_ops)}"
        )
    sized_ops = filter_ops + compaction_ops
    run_turns = bool(checkpoints)
    repeats = [repeat or default_repeat(size) for size in sizes]
    total = sum(
        2 * bool(filter_ops)
        + 2 * bool(compaction_ops)
        + len(sized_ops) * len(sized_regimes) * 2 * r
        + (exact is not None)
        * len([op for op in sized_ops if op in EXACT_OPS])
        * len(sized_regimes)
        * r
        for r in repeats
    )
    if run_turns:
        total += (2 + (exact is not None)) * max(checkpoints)
    completed = 0
    description = ""

    def step(new_description: str | None = None) -> None:
        nonlocal completed, description
        if new_description is None:
            completed += 1
        else:
            description = new_description
        if progress is not None:
            progress(completed, total, description)

    was_installed = _patch.installed()
    # The originals must be resolved while google-adk still holds them.
    _set_installed(False)
    if python is None:
        python = python_implementation()
    rows: list[Row] = []
    memory: list[MemoryRow] = []
    _native.index_clear()
    loop = asyncio.new_event_loop()
    try:
        agent = LlmAgent(name=AGENT_NAME, model=ScriptedLlm())
        for size, size_repeat in zip(sizes, repeats, strict=True):
            if filter_ops:
                step(f"{size:,} events: building the session")
                with no_gc():
                    events = build_session(size, seed)
                step()
                step(f"{size:,} events: checking that Python and Rust filter alike")
                _set_installed(False)
                checked = check_agreement(events, python, rust)
                if exact is not None:
                    for op, declined in check_exact_prompt(events, rust, exact).items():
                        checked[op].update(declined)
                step()
                for regime in sized_regimes:
                    for op in filter_ops:
                        step(f"{size:,} events: {op} ({regime})")
                        sides = [_prepare_filter(op, python), _prepare_filter(op, rust)]
                        if exact is not None and op in EXACT_OPS:
                            sides.append(_prepare_filter(op, exact))
                        medians, declines = _median_ms(regime, events, sides, size_repeat, step)
                        # The check's declines go to the operation's first row.
                        declines.update(checked.pop(op, Counter()))
                        exact_ms = medians[2] if len(medians) > 2 else None
                        row = _row(op, regime, size, medians[0], medians[1], declines, exact_ms)
                        rows.append(row)
                memory.append(_memory_row(events, python, rust))
                del events
            if compaction_ops:
                step(f"{size:,} events: building the session with a due compaction")
                with no_gc():
                    events = build_due_session(size, seed)
                    sessions = {op: events for op in compaction_ops}
                    if "token_threshold_rolled" in compaction_ops:
                        sessions["token_threshold_rolled"] = rolled_session(events, agent, loop)
                step()
                step(f"{size:,} events: checking that Python and Rust compact alike")
                checked = {
                    op: check_compaction(op, sessions[op], python, rust, agent, loop)
                    for op in compaction_ops
                }
                if exact is not None:
                    for op in compaction_ops:
                        checked[op].update(
                            check_exact_compaction(op, sessions[op], exact, agent, loop)
                        )
                step()
                for regime in sized_regimes:
                    for op in compaction_ops:
                        step(f"{size:,} events: {op} ({regime})")
                        sides = [
                            _prepare_compaction(op, python, agent, loop),
                            _prepare_compaction(op, rust, agent, loop),
                        ]
                        if exact is not None:
                            sides.append(_prepare_compaction(op, exact, agent, loop))
                        medians, declines = _median_ms(
                            regime, sessions[op], sides, size_repeat, step
                        )
                        declines.update(checked.pop(op, Counter()))
                        exact_ms = medians[2] if len(medians) > 2 else None
                        row = _row(op, regime, size, medians[0], medians[1], declines, exact_ms)
                        rows.append(row)
                del events, sessions
            gc.collect()
        # Sizes, then regimes, then operations in report order.
        order = {
            (size, regime, op): index
            for index, (size, regime, op) in enumerate(
                (size, regime, op) for size in sizes for regime in sized_regimes for op in OPS
            )
        }
        rows.sort(key=lambda row: order[row["events"], row["regime"], row["op"]])
        if run_turns:
            rows.extend(_turn_rows(checkpoints, seed, step, exact is not None))
    finally:
        loop.close()
        _set_installed(was_installed is not None, was_installed or "parity")
    return Report(rows, memory, measured_family())
