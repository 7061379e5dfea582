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
`WINDOW` turns up to each checkpoint.

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
them checked, the last `WINDOW` timed. The CLI prints the counts
in a column and warns when any is not zero. The benchmark still runs: a
decline is a slower answer, not a wrong one (the agreement checks say so).

Each timed call runs with the cyclic garbage collector off, as `timeit` does,
and so do the untimed deep copies (three times faster without it).

Where it lives: `bench_options` names what can be selected and validates a
selection (`select`), importing nothing heavy, for the command line's
parser; `bench_report` the rows; `bench_sides` the implementations timed
and the switch between them; `bench_timing` the cold and warm regimes'
timed calls and the memory row; `bench_agreement` the checks; this module
runs them all (`run_bench`) and the turn regime. Each imports only the ones
before it in that list.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from google.adk.agents.llm_agent import LlmAgent

from .. import _families, _native, _patch, _reference
from .bench_agreement import (
    check_agreement,
    check_compaction,
    check_exact_compaction,
    check_exact_prompt,
)
from .bench_options import (
    ALL_OPS,
    COMPACTION_OPS,
    DEFAULT_SIZES,
    DEFAULT_TURNS,
    EXACT_OPS,
    FILTER_FUNCTIONS,
    FILTER_OPS,
    HEADLINE,
    OPS,
    REGIMES,
    SIZED_REGIMES,
    TURN_OP,
    WINDOW,
    Selection,
    select,
)
from .bench_report import (
    BenchmarkMismatchError,
    MemoryRow,
    Report,
    Row,
    TurnRow,
    timed_row,
    total_declines,
)
from .bench_sides import (
    EXACT,
    RUST,
    Implementation,
    has_ranges,
    measured_family,
    python_implementation,
    set_installed,
)
from .bench_timing import (
    ROLLED_TAIL,
    TimedSessionService,
    default_repeat,
    median_ms,
    memory_row,
    prepare_compaction,
    prepare_filter,
    rolled_session,
)
from .sessions import AGENT_NAME, build_due_session, build_session
from .simulate import ScriptedLlm, no_gc, simulate

__all__ = [
    "ALL_OPS",
    "COMPACTION_OPS",
    "DEFAULT_SIZES",
    "DEFAULT_TURNS",
    "EXACT",
    "EXACT_OPS",
    "FILTER_OPS",
    "HEADLINE",
    "OPS",
    "REGIMES",
    "ROLLED_TAIL",
    "RUST",
    "SIZED_REGIMES",
    "TURN_OP",
    "WINDOW",
    "BenchmarkMismatchError",
    "Implementation",
    "MemoryRow",
    "Progress",
    "Report",
    "Row",
    "Selection",
    "TimedSessionService",
    "TurnRow",
    "check_agreement",
    "check_compaction",
    "check_exact_compaction",
    "check_exact_prompt",
    "default_repeat",
    "has_ranges",
    "measured_family",
    "python_implementation",
    "rolled_session",
    "run_bench",
    "select",
    "total_declines",
]

Progress = Callable[[int, int, str], None]
"""Called as ``progress(completed, total, description)`` as work advances."""


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
        row = timed_row(
            TURN_OP,
            "turn",
            python.events[checkpoint - 1],
            python_ms,
            rust_ms,
            declines,
            exact_ms,
        )
        rows.append(TurnRow(**row, turn=checkpoint))
    return rows


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
    set_installed(False)
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
                set_installed(False)
                checked = check_agreement(events, python, rust)
                if exact is not None:
                    for op, declined in check_exact_prompt(events, rust, exact).items():
                        checked[op].update(declined)
                step()
                for regime in sized_regimes:
                    for op in filter_ops:
                        step(f"{size:,} events: {op} ({regime})")
                        sides = [prepare_filter(op, python), prepare_filter(op, rust)]
                        if exact is not None and op in EXACT_OPS:
                            sides.append(prepare_filter(op, exact))
                        medians, declines = median_ms(regime, events, sides, size_repeat, step)
                        # The check's declines go to the operation's first row.
                        declines.update(checked.pop(op, Counter()))
                        exact_ms = medians[2] if len(medians) > 2 else None
                        row = timed_row(
                            op, regime, size, medians[0], medians[1], declines, exact_ms
                        )
                        rows.append(row)
                memory.append(memory_row(events, python, rust))
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
                            prepare_compaction(op, python, agent, loop),
                            prepare_compaction(op, rust, agent, loop),
                        ]
                        if exact is not None:
                            sides.append(prepare_compaction(op, exact, agent, loop))
                        medians, declines = median_ms(
                            regime, sessions[op], sides, size_repeat, step
                        )
                        declines.update(checked.pop(op, Counter()))
                        exact_ms = medians[2] if len(medians) > 2 else None
                        row = timed_row(
                            op, regime, size, medians[0], medians[1], declines, exact_ms
                        )
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
        set_installed(was_installed is not None, was_installed or "parity")
    return Report(rows, memory, measured_family())
