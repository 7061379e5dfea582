"""Times google-adk's pure-Python prompt filtering against ours, in one run.

For every session size and operation the same `build_session` session goes
through the pure-Python originals (`_reference`, never the patched names)
and the Rust-backed functions, interleaved repetition by repetition, in two
regimes:

* ``cold``: each timed call gets its own fresh `copy.deepcopy` of the events
  (same ids, new objects), made before the clock starts and freed after it
  stops; such fresh objects are what `get_session` hands over (the
  in-memory service deep-copies by default, the database services build new
  Events), and they defeat anything either side could cache per object;
* ``warm``: every call gets the very same objects, after a few untimed ones.

The operations are the four google-adk functions, each on the whole session,
plus ``process+recover``: `_process_compaction_events` then
`_recover_compacted_function_calls` on its result, as google-adk's
`_get_contents` runs them on every model call (the headline row). The input
of ``recover_compacted_function_calls`` alone is the reference
`_process_compaction_events` of the same (fresh, when cold) events.

Before any timing, each size's results are compared once (same objects for
rewinds and recovery, equal ranges, the same raw events and equal summaries
for processing), and the Rust side must not have declined the session: a
benchmark never reports a fast path that is wrong or that is not taken.
Each timed call runs with the cyclic garbage collector off, as `timeit` does.
"""

from __future__ import annotations

import copy
import gc
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypedDict

from google.adk.events.event import Event

from . import _filtering, _native, _reference
from ._sessions import AGENT_NAME, build_session

OPS: tuple[str, ...] = (
    "apply_rewinds",
    "get_compaction_ranges",
    "process_compaction_events",
    "recover_compacted_function_calls",
    "process+recover",
)
"""The timed operations, in report order; the last one is the headline."""

REGIMES: tuple[str, ...] = ("cold", "warm")
"""Fresh deep copies for every call, or the same objects again."""

DEFAULT_SIZES: tuple[int, ...] = (1_000, 10_000, 50_000)
"""Session sizes (events) timed by default."""


class Row(TypedDict):
    """One line of the report: median milliseconds of one operation."""

    op: str
    regime: str
    events: int
    python_ms: float
    rust_ms: float
    ratio: float  # python_ms / rust_ms: how many times faster Rust is.


class Implementation(NamedTuple):
    """The four google-adk functions as one implementation provides them."""

    name: str
    apply_rewinds: Callable[[list[Event]], list[Event]]
    get_compaction_ranges: Callable[[list[Event]], list[tuple[int, float, float]]]
    process_compaction_events: Callable[[list[Event], str], list[Event]]
    recover_compacted_function_calls: Callable[[list[Event], Sequence[Event]], list[Event]]


def python_implementation() -> Implementation:
    """google-adk's pure-Python originals, the baseline, called directly.

    Resolved through `_reference` on first use, so this works after
    `install()` as long as the originals were resolved before it.
    """
    return Implementation(
        "python",
        _reference.original("apply_rewinds"),
        _reference.original("get_compaction_ranges"),
        _reference.original("process_compaction_events"),
        _reference.original("recover_compacted_function_calls"),
    )


RUST = Implementation(
    "rust",
    _filtering.apply_rewinds,
    _filtering.get_compaction_ranges,
    _filtering.process_compaction_events,
    _filtering.recover_compacted_function_calls,
)
"""The Rust-backed functions `install()` puts in their place."""

Progress = Callable[[int, int, str], None]
"""Called as ``progress(completed, total, description)`` as work advances."""


class BenchmarkMismatchError(AssertionError):
    """The two implementations disagree, or Rust declined the session."""


# Untimed calls per side before a warm regime's timed ones. One is not enough:
# on a small VM the first few back-to-back passes over a 10k-event session
# still get faster (caches, clocks), 16 ms down to 3 ms for `_apply_rewinds`.
_WARM_UP_CALLS = 3


def default_repeat(n_events: int) -> int:
    """Timed calls per implementation, operation and regime for a size."""
    if n_events <= 2_000:
        return 15
    if n_events <= 20_000:
        return 7
    return 3


def _function(op: str, impl: Implementation) -> Callable[..., object]:
    if op == "apply_rewinds":
        return impl.apply_rewinds
    if op == "get_compaction_ranges":
        return impl.get_compaction_ranges
    if op == "process_compaction_events":

        def process(events: list[Event]) -> list[Event]:
            return impl.process_compaction_events(events, AGENT_NAME)

        return process
    if op == "recover_compacted_function_calls":
        return impl.recover_compacted_function_calls
    if op == "process+recover":

        def process_recover(events: list[Event]) -> list[Event]:
            processed = impl.process_compaction_events(events, AGENT_NAME)
            return impl.recover_compacted_function_calls(processed, events)

        return process_recover
    raise ValueError(f"unknown operation {op!r}; expected one of {OPS}")


def _arguments(op: str, events: list[Event]) -> tuple[Any, ...]:
    if op == "recover_compacted_function_calls":
        process = _reference.original("process_compaction_events")
        return (process(events, AGENT_NAME), events)
    return (events,)


def _time_ms(function: Callable[..., object], arguments: tuple[Any, ...]) -> float:
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        result = function(*arguments)
        stop = time.perf_counter()
    finally:
        if gc_was_enabled:
            gc.enable()
    del result  # Freed outside the timed region.
    return (stop - start) * 1e3


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


def check_agreement(events: list[Event], python: Implementation, rust: Implementation) -> None:
    """Raises `BenchmarkMismatchError` unless both give the same results."""
    _same_objects("apply_rewinds", python.apply_rewinds(events), rust.apply_rewinds(events))
    expected_ranges = python.get_compaction_ranges(events)
    actual_ranges = rust.get_compaction_ranges(events)
    if actual_ranges != expected_ranges:
        raise BenchmarkMismatchError("get_compaction_ranges: different ranges")
    _same_prompt(
        "process_compaction_events",
        events,
        python.process_compaction_events(events, AGENT_NAME),
        rust.process_compaction_events(events, AGENT_NAME),
    )
    processed, source = _arguments("recover_compacted_function_calls", events)
    _same_objects(
        "recover_compacted_function_calls",
        python.recover_compacted_function_calls(processed, source),
        rust.recover_compacted_function_calls(processed, source),
    )

    def prompt(impl: Implementation) -> list[Event]:
        processed = impl.process_compaction_events(events, AGENT_NAME)
        return impl.recover_compacted_function_calls(processed, events)

    _same_prompt("process+recover", events, prompt(python), prompt(rust))


def _declines(reset: bool) -> dict[str, int]:
    counts: dict[str, int] = _native.decline_counts(reset)
    return {reason: count for reason, count in counts.items() if count}


# -- timing ---------------------------------------------------------------------


def _median_ms(
    op: str,
    regime: str,
    events: list[Event],
    impls: tuple[Implementation, Implementation],
    repeat: int,
    step: Callable[[], None],
) -> tuple[float, float]:
    """Median ms of `op` for both implementations, interleaved per repetition."""
    functions = [_function(op, impl) for impl in impls]
    samples: list[list[float]] = [[], []]
    warm_arguments = _arguments(op, events) if regime == "warm" else ()
    if regime == "warm":
        for _ in range(_WARM_UP_CALLS):
            for function in functions:
                function(*warm_arguments)
    for repetition in range(repeat):
        # Alternate who goes first, so neither side always runs second.
        order = (0, 1) if repetition % 2 == 0 else (1, 0)
        for side in order:
            if regime == "cold":
                fresh = copy.deepcopy(events)
                arguments = _arguments(op, fresh)
                samples[side].append(_time_ms(functions[side], arguments))
                del fresh, arguments
            else:
                samples[side].append(_time_ms(functions[side], warm_arguments))
            step()
    return statistics.median(samples[0]), statistics.median(samples[1])


def run_bench(
    sizes: Iterable[int] = DEFAULT_SIZES,
    repeat: int | None = None,
    progress: Progress | None = None,
    *,
    seed: int = 0,
    python: Implementation | None = None,
    rust: Implementation = RUST,
) -> list[Row]:
    """Times every operation on sessions of each size, Python against Rust.

    Args:
        sizes: Session sizes in events, each >= 1.
        repeat: Timed calls per implementation, operation and regime; by
            default `default_repeat(size)` (15, 7, 3 for 1k, 10k, 50k).
        progress: Called as ``progress(completed, total, description)``
            before the first step and after every step.
        seed: Seed of `build_session`.
        python: The baseline; by default `python_implementation()`.
        rust: The implementation under test.

    Returns:
        One row per size, regime and operation, in that nesting order.

    Raises:
        ValueError: On a size < 1 or a repeat < 1.
        BenchmarkMismatchError: If the implementations disagree on a session,
            or the Rust core declines it (its timings would be Python's).
    """
    sizes = list(sizes)
    if not sizes or any(size < 1 for size in sizes):
        raise ValueError(f"sizes must be a non-empty list of sizes >= 1: {sizes}")
    if repeat is not None and repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    repeats = [repeat or default_repeat(size) for size in sizes]
    if python is None:
        python = python_implementation()
    # Per size: build, check, then two timed calls per repetition.
    total = sum(2 + len(OPS) * len(REGIMES) * 2 * r for r in repeats)
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

    rows: list[Row] = []
    impls = (python, rust)
    for size, size_repeat in zip(sizes, repeats, strict=True):
        step(f"{size:,} events: building the session")
        events = build_session(size, seed)
        step()
        step(f"{size:,} events: checking that Python and Rust agree")
        check_rust_declines = rust is RUST
        if check_rust_declines:
            _declines(reset=True)
        check_agreement(events, python, rust)
        declined = _declines(reset=True) if check_rust_declines else {}
        if declined:
            raise BenchmarkMismatchError(
                f"the Rust core declined the {size:,}-event session "
                f"{declined}; its timings would be google-adk's own"
            )
        step()
        for regime in REGIMES:
            for op in OPS:
                step(f"{size:,} events: {op} ({regime})")
                python_ms, rust_ms = _median_ms(op, regime, events, impls, size_repeat, step)
                rows.append(
                    Row(
                        op=op,
                        regime=regime,
                        events=size,
                        python_ms=python_ms,
                        rust_ms=rust_ms,
                        ratio=python_ms / rust_ms if rust_ms > 0 else float("inf"),
                    )
                )
        del events
    return rows
