"""What `run_bench` reports: its rows, their declines, and the error it
stops with when the two sides disagree.

Light (no google-adk): the command line's tables and the plot read these.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import NamedTuple, TypedDict


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
    #: Rust-core declines during the row's Rust-side calls (see the `bench`
    #: module docstring): when not 0, google-adk's own code did part of `rust_ms`.
    declines: int
    #: `declines` by reason, reasons sorted; empty when `declines` is 0.
    decline_reasons: dict[str, int]


class TurnRow(Row):
    """A turn-regime line: mean per-turn milliseconds around turn `turn`.

    Its `declines` are those of the Rust side's turns after the previous
    checkpoint up to `turn` (each turn is checked; the last `WINDOW` are
    averaged), so the rows together count every turn once.
    """

    turn: int


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


class BenchmarkMismatchError(AssertionError):
    """The two implementations disagree (a Rust decline is no mismatch: it is
    counted in `Row.declines`)."""


def timed_row(
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
        ratio=ratio(python_ms, rust_ms),
        exact_ms=exact_ms,
        exact_vs_parity=None if exact_ms is None else ratio(exact_ms, rust_ms),
        declines=sum(declines.values()),
        decline_reasons=reasons(declines),
    )


def reasons(declines: Mapping[str, int]) -> dict[str, int]:
    """`declines` without its zero counts, reasons sorted (`Row.decline_reasons`)."""
    return {reason: declines[reason] for reason in sorted(declines) if declines[reason]}


def ratio(python_ms: float, rust_ms: float) -> float:
    """How many times `python_ms` is `rust_ms` (infinite when `rust_ms` is 0)."""
    return python_ms / rust_ms if rust_ms > 0 else float("inf")


def total_declines(rows: Iterable[Row]) -> Counter[str]:
    """The declines of all `rows`, by reason (what the CLI warns about)."""
    total: Counter[str] = Counter()
    for row in rows:
        total.update(row["decline_reasons"])
    return total
