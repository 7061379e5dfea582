"""Ours against google-adk's compaction entry points, on generated sessions.

`run_compaction_for_sliding_window` and
`run_compaction_for_token_threshold_config` run on deep copies of the same
session (same event ids), once as google-adk's originals and once as ours,
each with a fresh counter-based id provider and a fixed clock, so every Event
either side builds gets the same id and timestamp (ids are compared on
purpose: how many ids a call draws, and in which order, is observable through
`google.adk.platform.uuid.set_id_provider`). Everything observable must
match: what the summarizer was handed (input events by position and id, new
ones such as the rolling-summary seed field by field), what was yielded,
returned or appended, the final `session.events`, the `compact_events` spans
(name, attributes with `gen_ai.compaction.prompt_chars_saved`, status,
exception events), google-adk's log records, and the type and message of
anything raised.

Cases per run: 20 x 100 seeded well-formed sessions (a single call each, half
of them with `install()` active on our side, so google-adk's own
`_run_compaction_for_token_threshold` and helpers run ours), 120 seeded
sessions replayed invocation by invocation the way the Runner compacts after
each invocation, 200 chaotic sessions from `strategies.py` (NaN and int
timestamps, duplicated objects, odd compactions: the fallback path), and
3 x 120 hypothesis cases.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import itertools
import logging
import math
import random
import warnings
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import adk_fastcompact as fc
import pytest
from adk_fastcompact import _native, _patch, _reference
from google.adk.agents.base_agent import BaseAgent
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import compaction as adk_compaction
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.base_events_summarizer import BaseEventsSummarizer
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.platform import time as platform_time
from google.adk.platform import uuid as platform_uuid
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session
from google.genai import types
from hypothesis import given, note, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from support.compare import PROFILE, adk_module, config_fields, deep_equal, examples, scope_kwargs
from support.strategies import DrawChooser, RandomChooser, describe, random_session
from support.window_sessions import Case, Plan, build_case, draw_plan

# The request processor that runs the token threshold (moved in 2.10).
adk_context_compaction = adk_module(
    "google.adk.flows.llm_flows.context._compaction", "google.adk.flows.llm_flows.compaction"
)

# One worker runs the whole file (conftest.WHOLE_FILES): the totals tests
# read what the blocks before them counted in this process.
pytestmark = pytest.mark.usefixtures("index_mode")

# The oracle, taken before any test can install() (and refusing if it has).
ORIG_WINDOW = _reference.original("run_compaction_for_sliding_window")
ORIG_TOKEN = _reference.original("run_compaction_for_token_threshold_config")
assert ORIG_WINDOW.__module__ == ORIG_TOKEN.__module__ == "google.adk.apps.compaction"
# Ours, as install() binds them for the installed family (before 2.5 the
# sliding window is a coroutine that appends the summary itself).
OURS = _patch.replacements("parity")
OURS_WINDOW = OURS["run_compaction_for_sliding_window"]
OURS_TOKEN = OURS["run_compaction_for_token_threshold_config"]

SEEDED_BLOCKS = 20
CASES_PER_BLOCK = 100
REPLAY_BLOCKS = 4
REPLAYS_PER_BLOCK = 30
CHAOTIC_BLOCKS = 4
CHAOTIC_PER_BLOCK = 50
HYPOTHESIS_EXAMPLES = examples(120)

#: Stats of every test_seeded_cases block, for test_seeded_cases_reach_rare_paths.
TOTALS: dict[str, Counter[str]] = defaultdict(Counter)  # by index mode
CHAOTIC_DECLINES: Counter[str] = Counter()

APP = "app"
USER = "user"
SESSION_ID = "sess-1"


def _quiet(build: Callable[[], Any]) -> Any:
    """Builds an `@experimental` google-adk object without its warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return build()


class PlainAgent(BaseAgent):
    """A root agent that is not an LlmAgent: google-adk cannot make it a
    summarizer, so with no summarizer configured it raises ValueError."""

    async def _run_async_impl(self, ctx: Any) -> AsyncIterator[Event]:
        raise NotImplementedError
        yield


LLM_AGENT = LlmAgent(name="root", model="gemini-2.0-flash")
PLAIN_AGENT = PlainAgent(name="root")


# -- the recording summarizer ---------------------------------------------------


class RecordingSummarizer(BaseEventsSummarizer):
    """Records what it is handed; answers as its behaviours say, in turn."""

    def __init__(self, behaviours: tuple[str, ...], summary_chars: int) -> None:
        self.behaviours = behaviours
        self.summary_chars = summary_chars
        self.calls: list[list[Event]] = []
        #: One record per call, taken at call time (see `Side.record_call`).
        self.records: list[Any] = []
        self.on_call: Callable[[list[Event]], Any] = lambda events: None

    async def maybe_summarize_events(self, *, events: list[Event]) -> Event | None:
        self.calls.append(list(events))
        self.records.append(self.on_call(events))
        behaviour = self.behaviours[min(len(self.calls), len(self.behaviours)) - 1]
        text = f"summary of {len(events)} events" + "x" * self.summary_chars
        if behaviour == "none":
            return None
        if behaviour == "raise":
            raise RuntimeError(f"summarizer failed on {len(events)} events")
        if behaviour == "not_an_event":
            return text  # type: ignore[return-value]
        if behaviour == "plain":
            return Event(
                author="user",
                invocation_id=Event.new_id(),
                content=types.Content(role="model", parts=[types.Part(text=text)]),
            )
        stamps = [e.timestamp for e in events]
        start, end = stamps[0], stamps[-1]
        if behaviour == "summary_minmax":
            start, end = min(stamps), max(stamps)
        # LlmEventSummarizer's shape.
        return Event(
            author="user",
            invocation_id=Event.new_id(),
            actions=EventActions(
                compaction=EventCompaction(
                    start_timestamp=start,
                    end_timestamp=end,
                    compacted_content=types.Content(role="model", parts=[types.Part(text=text)]),
                )
            ),
        )


# -- telemetry and logs -----------------------------------------------------------


class _Gate(SpanProcessor):
    """Forwards spans to the exporter only while this module runs."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner
        self.active = True

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.active:
            self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.active:
            self.inner.on_end(span)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class Capture:
    spans: InMemorySpanExporter
    logs: _Records


@pytest.fixture(scope="module")
def capture() -> Iterator[Capture]:
    """Spans of google-adk's tracer (a proxy of the global provider) and the
    records of its `google_adk` loggers."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    assert isinstance(trace.get_tracer_provider(), TracerProvider)
    exporter = InMemorySpanExporter()
    gate = _Gate(SimpleSpanProcessor(exporter))
    provider.add_span_processor(gate)
    with adk_compaction.tracer.start_as_current_span("probe"):
        pass
    assert [s.name for s in exporter.get_finished_spans()] == ["probe"]
    exporter.clear()

    logger = logging.getLogger("google_adk")
    handler = _Records()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield Capture(exporter, handler)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        gate.active = False
        exporter.clear()


# -- running one side ---------------------------------------------------------------


def _dump(event: Any) -> Any:
    if isinstance(event, Event):
        return event.model_dump(warnings=False)
    return ("not an Event", repr(event))


def _span_record(span: ReadableSpan) -> Any:
    return (
        span.name,
        dict(sorted((span.attributes or {}).items())),
        span.status.status_code.name,
        span.status.description,
        [
            (
                e.name,
                {
                    k: v
                    for k, v in sorted((e.attributes or {}).items())
                    if k != "exception.stacktrace"
                },
            )
            for e in span.events
        ],
    )


def _log_record(record: logging.LogRecord) -> Any:
    exc = record.exc_info[1] if record.exc_info else None
    return (
        record.name,
        record.levelname,
        record.getMessage(),
        None if exc is None else (type(exc).__name__, str(exc)),
    )


@dataclass
class Side:
    """Everything one implementation did on one case."""

    rounds: list[Any] = field(default_factory=list)
    calls: list[Any] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    spans: list[Any] = field(default_factory=list)
    logs: list[Any] = field(default_factory=list)
    last_update_time: Any = None
    declines: dict[str, int] = field(default_factory=dict)
    #: google-adk internals seen (see `_probe`).
    probe: Counter[str] = field(default_factory=Counter)

    def comparable(self) -> dict[str, Any]:
        return {
            "summarizer calls": self.calls,
            "rounds": self.rounds,
            "session events": self.events,
            "spans": self.spans,
            "logs": self.logs,
            "last_update_time": self.last_update_time,
        }


def _make_config(plan: Plan, summarizer: RecordingSummarizer | None) -> Any:
    if plan.config is None:
        return None
    return _quiet(
        lambda: EventsCompactionConfig(summarizer=summarizer, **config_fields(plan.config))
    )


def _now(events: list[Event]) -> float:
    stamps = [
        e.timestamp for e in events if isinstance(e.timestamp, float) and math.isfinite(e.timestamp)
    ]
    return (max(stamps) if stamps else 0.0) + 0.5


def run_side(
    case: Case,
    *,
    ours: bool,
    installed: bool,
    capture: Capture,
    replay: bool,
) -> Side:
    plan = case.plan
    side = Side()
    chunks = copy.deepcopy(case.chunks)
    if not replay:
        chunks = [[e for chunk in chunks for e in chunk]]
    origin: dict[int, int] = {}
    for k, event in enumerate(e for chunk in chunks for e in chunk):
        origin.setdefault(id(event), k)

    session = Session(id=SESSION_ID, app_name=APP, user_id=USER, events=[])
    service = InMemorySessionService()
    if plan.registered:
        service.sessions[APP] = {USER: {SESSION_ID: session}}
    summarizer = (
        _quiet(lambda: RecordingSummarizer(plan.behaviours, plan.summary_chars))
        if plan.summarizer
        else None
    )
    config = _make_config(plan, summarizer)
    agent = LLM_AGENT if plan.summarizer else PLAIN_AGENT
    app = App(name=APP, root_agent=agent, events_compaction_config=config)

    def position(event: Event) -> int | None:
        return next((k for k, e in enumerate(session.events) if e is event), None)

    def record_call(events: list[Event]) -> Any:
        return [
            ("input", origin[id(e)], e.id) if id(e) in origin else ("new", position(e), _dump(e))
            for e in events
        ]

    if summarizer is not None:
        summarizer.on_call = record_call

    if ours:
        window_fn, token_fn = OURS_WINDOW, OURS_TOKEN
        if installed:
            fc.install()
            # Through google-adk's own bindings: the Runner's sliding window
            # and the request processor's token threshold.
            window_fn = adk_compaction._run_compaction_for_sliding_window
            token_fn = adk_context_compaction._run_compaction_for_token_threshold_config
            assert window_fn is _patch.replacement("run_compaction_for_sliding_window")
            token = _patch.replacement("run_compaction_for_token_threshold_config")
            assert token_fn is token
            assert adk_compaction._run_compaction_for_token_threshold_config is token
    else:
        assert fc.installed() is None
        window_fn, token_fn = ORIG_WINDOW, ORIG_TOKEN

    async def window_round() -> Any:
        yielded = []
        run = window_fn(app, session, service)
        if inspect.iscoroutine(run):
            # It appends its summary itself: what it appended stands for
            # what the generator form yields.
            before = len(session.events)
            await run
            return [_dump(e) for e in session.events[before:]]
        async for event in run:
            yielded.append(_dump(event))
            # As the Runner does with each yielded compaction.
            await service.append_event(session=session, event=event)
        return yielded

    async def token_round() -> Any:
        return await token_fn(
            config=config,
            session=session,
            session_service=service,
            agent=agent,
            agent_name=plan.agent_name,
            current_branch=plan.current_branch,
            **scope_kwargs(plan.isolation_scope),
        )

    counter = itertools.count()
    clock = [0.0]
    platform_uuid.set_id_provider(lambda: f"gen-{next(counter)}")
    platform_time.set_time_provider(lambda: clock[0])
    capture.spans.clear()
    capture.logs.records.clear()
    _native.decline_counts(reset=True)
    restore = _probe(side.probe)
    try:
        for chunk in chunks:
            session.events.extend(chunk)
            clock[0] = _now(session.events)
            try:
                value = asyncio.run(window_round() if plan.kind == "window" else token_round())
            except Exception as error:
                side.rounds.append(("raised", type(error).__name__, str(error)))
                break
            side.rounds.append(("ok", value))
    finally:
        platform_uuid.reset_id_provider()
        platform_time.reset_time_provider()
        restore()
        if installed:
            fc.uninstall()
    side.declines = _native.decline_counts(reset=True)
    side.calls = list(summarizer.records) if summarizer is not None else []
    side.events = [(origin.get(id(e)), _dump(e)) for e in session.events]
    side.last_update_time = session.last_update_time
    side.spans = [_span_record(s) for s in capture.spans.get_finished_spans()]
    side.logs = [_log_record(r) for r in capture.logs.records]
    return side


def _probe(stats: Counter[str]) -> Callable[[], None]:
    """Wraps google-adk helpers the original looks up at call time, to count
    which hard cases a case reached (and, on our side, whether google-adk's
    own selection ran). Returns the undo."""
    saved = {}

    def wrap(name: str, observe: Callable[..., None]) -> None:
        if name in ABSENT:
            return
        fn = getattr(adk_compaction, name)
        saved[name] = fn

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            observe(result, *args, **kwargs)
            return result

        setattr(adk_compaction, name, wrapper)

    def prefix(result: list[Event], events: list[Event], *args: Any, **kwargs: Any) -> None:
        stats["pairing calls"] += 1
        stats["pairing trimmed"] += len(result) < len(events)
        stats["pairing empty"] += not result and bool(events)

    def dead(result: set[str], *args: Any, **kwargs: Any) -> None:
        stats["dead calls"] += bool(result)

    def token(result: list[Event], **kwargs: Any) -> None:
        stats["token triggered"] += 1
        stats["token selected"] += bool(result)

    def worth(result: bool, **kwargs: Any) -> None:
        stats["worth compacting"] += result
        stats["not worth compacting"] += not result

    def estimate(result: int | None, **kwargs: Any) -> None:
        stats["estimated"] += 1

    wrap("_longest_self_contained_prefix", prefix)
    # Before 2.3: the window truncated before pending calls (then requests).
    wrap("_truncate_events_before_pending_function_call", prefix)
    wrap("_provably_dead_call_ids", dead)
    wrap("_events_to_compact_for_token_threshold", token)
    wrap("_is_range_worth_compacting", worth)
    wrap("_estimate_prompt_token_count", estimate)

    def restore() -> None:
        for name, fn in saved.items():
            setattr(adk_compaction, name, fn)

    return restore


# -- one comparison ---------------------------------------------------------------------


def check_case(
    case: Case,
    capture: Capture,
    stats: Counter[str],
    *,
    installed: bool,
    replay: bool = False,
    well_formed: bool = True,
) -> None:
    orig = run_side(case, ours=False, installed=False, capture=capture, replay=replay)
    ours = run_side(case, ours=True, installed=installed, capture=capture, replay=replay)
    a, b = ours.comparable(), orig.comparable()
    for key in a:
        if not deep_equal(a[key], b[key]):
            raise AssertionError(_mismatch(case, key, a[key], b[key], installed, replay))
    if well_formed:
        # The Rust path decided: nothing declined, except that a NaN
        # compaction end is a NaN sort key for the filtering that prices a
        # summary, which google-adk's own code then does.
        declines = dict(ours.declines)
        if case.has_nan_bound:
            declines.pop("NaN ordering key", None)
        assert declines == {}, _mismatch(case, "declines", ours.declines, {}, installed, replay)
        stats["nan declined"] += bool(ours.declines)
        if (installed or case.plan.kind == "token") and not ours.declines:
            # Nor did the Python wrappers hand the call to google-adk's own
            # selection. (Not installed, google-adk's sliding window runs
            # its own token threshold, so a direct window call may.)
            ran = {k: ours.probe[k] for k in ("pairing calls", "token triggered")}
            assert not any(ran.values()), _mismatch(case, "fallback", ran, {}, installed, replay)
    assert orig.declines == {}

    stats["cases"] += 1
    stats.update(orig.probe)
    stats["summarizer called"] += bool(orig.calls)
    stats["seed prepended"] += any(call and call[0][0] == "new" for call in orig.calls)
    stats["raised"] += any(r[0] == "raised" for r in orig.rounds)
    stats["spans"] += bool(orig.spans)
    stats["span error"] += any(s[2] == "ERROR" for s in orig.spans)
    stats["chars saved"] += any("gen_ai.compaction.prompt_chars_saved" in s[1] for s in orig.spans)
    stats["compacted"] += any(
        r[0] == "ok" and (r[1] is True or (isinstance(r[1], list) and r[1])) for r in orig.rounds
    )
    stats["declined"] += bool(ours.declines)


def _first_difference(a: Any, b: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """Where two comparables first differ (`deep_equal` semantics)."""
    if deep_equal(a, b):
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(dict.fromkeys([*a, *b])):
            if key not in a or key not in b:
                return f"{path}[{key!r}]", a.get(key, "<missing>"), b.get(key, "<missing>")
            found = _first_difference(a[key], b[key], f"{path}[{key!r}]")
            if found:
                return found
        return f"{path} (key order)", list(a), list(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and type(a) is type(b):
        for k, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _first_difference(x, y, f"{path}[{k}]")
            if found:
                return found
        return (
            f"{path} (length {len(a)} vs {len(b)})",
            a[min(len(a), len(b)) :],
            b[min(len(a), len(b)) :],
        )
    return path, a, b


def _mismatch(
    case: Case, key: str, ours: Any, orig: Any, installed: bool, replay: bool = False
) -> str:
    found = _first_difference(ours, orig) or ("", ours, orig)
    return (
        f"{key} differ ({'installed' if installed else 'direct'},"
        f" {'replayed' if replay else 'one call'}); plan={case.plan}\n"
        f"at {key}{found[0]}:\n ours: {found[1]!r}\n orig: {found[2]!r}\n"
        f"session:\n{describe(case.events)}"
    )


# google-adk helpers a family may lack (both arrive in 2.12), and the counts
# only they can reach.
ABSENT = {
    name
    for name in (
        "_provably_dead_call_ids",
        "_is_range_worth_compacting",
        "_longest_self_contained_prefix",
        "_truncate_events_before_pending_function_call",
    )
    if not hasattr(adk_compaction, name)
}
_REACHED_ONLY_BY = {
    "dead calls": "_provably_dead_call_ids",
    "not worth compacting": "_is_range_worth_compacting",
    "chars saved": "_is_range_worth_compacting",
}


def _require(stats: Counter[str], minimum: dict[str, int]) -> None:
    minimum = {k: v for k, v in minimum.items() if _REACHED_ONLY_BY.get(k) not in ABSENT}
    low = {k: stats[k] for k, v in minimum.items() if stats[k] < v}
    assert not low, f"too few cases reached {low}: {dict(stats)}"


# -- seeded well-formed sessions ----------------------------------------------------------


@pytest.mark.parametrize("block", range(SEEDED_BLOCKS))
def test_seeded_cases(block: int, capture: Capture, index_mode: str) -> None:
    stats: Counter[str] = Counter()
    for seed in range(block * CASES_PER_BLOCK, (block + 1) * CASES_PER_BLOCK):
        c = RandomChooser(random.Random(seed))
        case = build_case(c)
        try:
            check_case(case, capture, stats, installed=seed % 2 == 1)
        except AssertionError as error:
            raise AssertionError(f"seed {seed}") from error
    n = CASES_PER_BLOCK
    _require(
        stats,
        {
            "summarizer called": n // 4,
            "compacted": n // 12,
            "pairing trimmed": n // 20,
            "dead calls": 1,
            "token triggered": n // 10,
            "seed prepended": 1,
            "span error": 1,
            "chars saved": n // 8,
            "estimated": n // 10,
        },
    )
    assert stats["nan declined"] <= n // 10, stats
    TOTALS[index_mode].update(stats)
    TOTALS[index_mode]["blocks"] += 1


# The blocks' totals are this process's: one worker runs the whole file.
@pytest.mark.parametrize("index_mode", ["off", "cold"], indirect=True)
def test_seeded_cases_reach_rare_paths(index_mode: str) -> None:
    """Over all seeded blocks (which run in full with the index off and
    cold): paths too rare to require of every block."""
    if TOTALS[index_mode]["blocks"] != SEEDED_BLOCKS:
        pytest.skip("needs every test_seeded_cases block in this run")
    _require(
        TOTALS[index_mode],
        {
            "not worth compacting": 10,
            "raised": 20,
            "pairing empty": 2,
            "nan declined": 5,
        },
    )


@pytest.mark.parametrize("block", range(REPLAY_BLOCKS))
def test_replayed_sessions(block: int, capture: Capture) -> None:
    """The Runner's rhythm: after each invocation, compact, and append what
    the sliding window yields; summaries then meet later windows."""
    stats: Counter[str] = Counter()
    for seed in range(block * REPLAYS_PER_BLOCK, (block + 1) * REPLAYS_PER_BLOCK):
        c = RandomChooser(random.Random(10**6 + seed))
        case = build_case(c, max_invocations=10)
        try:
            check_case(case, capture, stats, installed=seed % 2 == 0, replay=True)
        except AssertionError as error:
            raise AssertionError(f"replay seed {seed}") from error
    _require(stats, {"summarizer called": REPLAYS_PER_BLOCK // 3, "seed prepended": 1})


@pytest.mark.parametrize("block", range(CHAOTIC_BLOCKS))
def test_chaotic_sessions(block: int, capture: Capture) -> None:
    """`strategies.py` sessions: NaN and int timestamps, duplicated Event
    objects, None / NaN / inverted bounds, reused and empty call ids. Ours
    may decline these (and then runs google-adk's own code); the results
    must match all the same."""
    stats: Counter[str] = Counter()
    for seed in range(block * CHAOTIC_PER_BLOCK, (block + 1) * CHAOTIC_PER_BLOCK):
        events = random_session(seed, max_events=80).events
        c = RandomChooser(random.Random(~seed))
        case = Case(chunks=[events], plan=draw_plan(c, events), now=0.0)
        try:
            check_case(case, capture, stats, installed=seed % 2 == 0, well_formed=False)
        except AssertionError as error:
            raise AssertionError(f"chaotic seed {seed}") from error
    # Before 2.12 nothing is priced, and a block's declines can all come
    # from pricing its chaotic timestamps: there, the blocks together must
    # decline (see test_chaotic_sessions_decline).
    declined = 0 if "_is_range_worth_compacting" in ABSENT else 1
    _require(stats, {"summarizer called": CHAOTIC_PER_BLOCK // 5, "declined": declined})
    CHAOTIC_DECLINES["blocks"] += 1
    CHAOTIC_DECLINES["declined"] += stats["declined"]


def test_chaotic_sessions_decline() -> None:
    """The chaotic blocks together reach the Rust core's declines (run after
    them: one worker runs the whole file)."""
    if CHAOTIC_DECLINES["blocks"] < CHAOTIC_BLOCKS:
        pytest.skip("the chaotic blocks did not all run in this process")
    assert CHAOTIC_DECLINES["declined"] >= 1, CHAOTIC_DECLINES


# -- hypothesis ------------------------------------------------------------------------


def _hypothesis_case(data: st.DataObject, **kwargs: Any) -> Case:
    case = build_case(DrawChooser(data.draw), **kwargs)
    note(f"plan={case.plan}\n{describe(case.events)}")
    return case


@settings(max_examples=HYPOTHESIS_EXAMPLES)
@given(st.data())
def test_hypothesis_direct(capture: Capture, data: st.DataObject) -> None:
    check_case(_hypothesis_case(data, max_invocations=6), capture, Counter(), installed=False)


@settings(max_examples=HYPOTHESIS_EXAMPLES)
@given(st.data())
def test_hypothesis_installed(capture: Capture, data: st.DataObject) -> None:
    check_case(_hypothesis_case(data, max_invocations=6), capture, Counter(), installed=True)


@settings(max_examples=HYPOTHESIS_EXAMPLES)
@given(st.data())
def test_hypothesis_replayed(capture: Capture, data: st.DataObject) -> None:
    case = _hypothesis_case(data, max_invocations=5)
    check_case(case, capture, Counter(), installed=False, replay=True)


@pytest.mark.parametrize("stop", [None, 5, 150])
@pytest.mark.parametrize("at", [0, 40, 190])
def test_the_latest_token_count_is_found_however_far_back(at: int, stop: int | None) -> None:
    # The count is read only where google-adk's backward scan reaches, in
    # blocks that double in size; a compaction between it and the end
    # stops the scan (google-adk then estimates). Every other event carries
    # another agent's count or none.
    events: list[Event] = []
    for i in range(200):
        usage = None
        if i == at:
            usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=1234)
        elif i % 3 == 0:
            usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=i)
        actions = EventActions()
        if i == stop:
            actions = EventActions(
                compaction=EventCompaction(
                    start_timestamp=0.0,
                    end_timestamp=1.0,
                    compacted_content=types.Content(role="model", parts=[types.Part(text="s")]),
                )
            )
        events.append(
            Event(
                id=f"e{i}",
                invocation_id=f"inv{i // 4}",
                author="root" if i == at else "other",
                timestamp=10.0 + i,
                usage_metadata=usage,
                actions=actions,
            )
        )
    out = _native.token_threshold_selection(events, None, 4, "root", rules=PROFILE.rules)
    assert out is not None
    count = out[2]
    if PROFILE.own_counts:
        expected = 1234 if stop is None or stop < at else None
    else:
        # Before 2.10: the newest count of any event, past compactions.
        newest = max(i for i in range(200) if i == at or i % 3 == 0)
        expected = 1234 if newest == at else newest
    assert count == expected
    if expected is not None:
        assert adk_compaction._latest_prompt_token_count(events, agent_name="root") == expected
