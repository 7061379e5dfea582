"""What the bench can be asked to run, and `select`, which validates it.

The names and defaults of every regime, operation, size, turn count and
session service the `bench` command offers, in one light module: the
command line's parser reads them here for its choices and its help, and
imports nothing heavy (google-adk, google-genai, pydantic, rich) to do it.
`bench`, `simulate`, `sessions`, `e2e` and `e2e_stores` take their constants
from here too, so each has one home.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

# -- cold, warm and turn (`bench`) ----------------------------------------------------

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
"""Every regime of `run_bench`, in report order."""

DEFAULT_SIZES: tuple[int, ...] = (1_000, 10_000, 50_000)
"""Session sizes (events) timed by default."""

DEFAULT_TURNS: tuple[int, ...] = (50, 100, 250, 500)
"""Turns at which the turn regime reports, by default."""

WINDOW = 12
"""Turns averaged per turn-regime checkpoint: the checkpoint and the 11
before it.

A multiple of the compaction interval, so each average holds the same share
of turns that end in a summary."""

MIN_DUE_EVENTS = 20
"""The smallest size `sessions.build_due_session` accepts, and so the
smallest the compaction operations time."""

# -- whole Runner turns (`e2e`) -------------------------------------------------------

E2E_REGIME = "e2e"
"""The regime of whole `Runner.run_async` turns (`e2e.run_e2e`)."""

E2E_DEFAULT_SIZES: tuple[int, ...] = (2_000,)
"""Session sizes (events) of the default e2e run; 10,000 and more a flag away."""

E2E_DEFAULT_TURNS = 5
"""Timed e2e turns per side, service and size."""

E2E_DEFAULT_WARMUP = 2
"""Untimed e2e turns per side before the timed ones: two, as the SQL
services' row memo decodes a stored row twice before it answers it from
memory (docs/session-load.md), so the timed turns are the steady state a
long session's turns are in."""

E2E_COLLECTOR_MODES: tuple[str, ...] = ("on", "off")
"""The cyclic garbage collector during the timed e2e turns: on, as apps run
it (nothing collected on purpose between turns), or off during each turn
after a `gc.collect()` before it (the other regimes' way)."""

E2E_DEFAULT_COLLECTOR = "on"
"""The collector during the e2e turns by default: as apps run."""

E2E_PLACEMENTS: tuple[str, ...] = ("own", "shared")
"""Where the two sides of an e2e row run: each in a process of its own, or
both in the bench's process, alternating (a server holding other sessions'
objects besides the one it serves)."""

E2E_LOADINGS: tuple[str, ...] = ("full", "lean")
"""What adk-fastcompact's side of an e2e row loads per turn: the whole
session (`install()`), or only the events the turn reads
(`install(loading="lean")`, docs/lean-loading.md)."""

E2E_COMPACTIONS: tuple[str, ...] = ("both", "token")
"""The e2e app's compaction: both strategies in one `EventsCompactionConfig`
(sliding window and token threshold, the default), or the token threshold
alone. With both, google-adk keeps every summary no later one subsumes in
the prompt, so the prompt (and a lean load) grows with the session; with
the token threshold alone each compaction seeds from the last, so the
prompt stays bounded at any length (docs/performance.md)."""

E2E_DEFAULT_COMPACTION = "both"
"""The e2e app's compaction by default."""

SERVICES: tuple[str, ...] = ("memory", "sqlite", "database", "postgres")
"""Every session service the e2e regime knows, in report order."""

LOCAL_SERVICES: tuple[str, ...] = ("memory", "sqlite", "database")
"""The services that need nothing but this process and a temporary folder."""

POSTGRES_ENV = "ADK_FASTCOMPACT_POSTGRES_URL"
"""Where the PostgreSQL URL is read from when none is given."""


# -- validation -----------------------------------------------------------------------


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
