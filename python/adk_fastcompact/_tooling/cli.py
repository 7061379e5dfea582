"""The `python -m adk_fastcompact` command line.

Subcommands:
  audit   find the events google-adk's compaction has hidden from every
          prompt, or put in one twice, in a real session store (a SQLite
          file, a database URL, a JSON-lines export; see `cli_audit`),
          whole, one shard, or every shard on a Dask cluster; `audit
          merge` merges the reports of a store's shards. Exit status 0
          when nothing is hidden or duplicated, 1 when something is, 2 on
          a usage or store error.
  bench   time google-adk's pure-Python compaction bookkeeping (prompt
          filtering, the two compaction entry points, a Runner conversation)
          against the Rust core, in one run (see `bench`), and whole Runner
          turns on each session service (the e2e regime, `e2e`). Each row shows how
          often the Rust core declined during its Rust-side calls, and a
          warning follows the table when any did: those rows' Rust timings
          are then partly google-adk's own code.

A reader of stdout that goes away (`audit --json | head`) ends either
command quietly, with exit status 141 (`CLOSED_PIPE`: 128 + SIGPIPE, what a
shell reports for `yes | head`; 1 would read as the audit's "found
something").
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .bench_options import (
    ALL_OPS,
    DEFAULT_SIZES,
    DEFAULT_TURNS,
    E2E_COLLECTOR_MODES,
    E2E_COMPACTIONS,
    E2E_DEFAULT_COLLECTOR,
    E2E_DEFAULT_COMPACTION,
    E2E_DEFAULT_SIZES,
    E2E_DEFAULT_TURNS,
    E2E_DEFAULT_WARMUP,
    E2E_LOADINGS,
    E2E_PLACEMENTS,
    E2E_REGIME,
    HEADLINE,
    POSTGRES_ENV,
    REGIMES,
    SERVICES,
    WINDOW,
)
from .bench_report import total_declines
from .cli_args import count, error_line, positive_int
from .cli_audit import audit_merge_main, audit_parser, run_audit_command
from .cli_store import run_prepare_store, store_parser

if TYPE_CHECKING:
    from rich.table import Table

    from .bench_report import MemoryRow, Row

# Parsing the arguments (and --help) reads only the light modules above:
# google-adk, google-genai and pydantic load when a command runs.

# rich is the `cli` extra's: the runtime never imports it, so this module
# imports it where it draws (`main` checks for it first).
MISSING_RICH = "adk-fastcompact's command line needs rich: pip install 'adk-fastcompact[cli]'"

PROG = "python -m adk_fastcompact"
CONSOLE_SCRIPT = "adk-fastcompact"


def _sizes(text: str) -> list[int]:
    items = [item.strip().replace("_", "") for item in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated event counts, e.g. 1000,10000; got {text!r}"
        )
    return [positive_int(item) for item in items]


def _names(known: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [item.strip() for item in text.split(",")]
        unknown = [name for name in names if name not in known]
        if unknown or not all(names):
            raise argparse.ArgumentTypeError(
                f"expected comma-separated names among {','.join(known)}; got {text!r}"
            )
        return names

    return parse


def _parser(prog: str = PROG) -> argparse.ArgumentParser:
    all_regimes = (*REGIMES, E2E_REGIME)

    parser = argparse.ArgumentParser(
        prog=prog,
        description="Rust-accelerated context compaction bookkeeping for google-adk.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    audit_parser(commands)
    store_parser(commands)
    bench = commands.add_parser(
        "bench",
        help="time pure-Python google-adk against the Rust core",
        description=(
            "Time the installed google-adk's pure-Python compaction bookkeeping and "
            "adk-fastcompact's Rust core in one run: the prompt-filtering helpers "
            "and the two compaction entry points on generated sessions, median "
            "milliseconds per call on fresh deep copies (cold) and on the same "
            "objects again (warm); and a scripted conversation through a real "
            "google-adk Runner, mean milliseconds per turn spent in compaction and "
            "prompt filtering (turn); and whole Runner.run_async turns, plain google-adk "
            "against install(), on a long session in each session service (e2e)."
        ),
    )
    bench.add_argument(
        "--sizes",
        type=_sizes,
        nargs="+",
        default=None,
        metavar="N[,N...]",
        help=(
            "session sizes in events (default: "
            f"{','.join(map(str, DEFAULT_SIZES))} for cold and warm, "
            f"{','.join(map(str, E2E_DEFAULT_SIZES))} for e2e)"
        ),
    )
    bench.add_argument(
        "--repeat",
        type=positive_int,
        default=None,
        metavar="N",
        help="cold and warm: timed calls per case and side (default: 15, 7, 3 for 1k, 10k, 50k)",
    )
    bench.add_argument(
        "--regimes",
        type=_names(all_regimes),
        default=list(all_regimes),
        metavar="R[,R...]",
        help=f"regimes to run (default: {','.join(all_regimes)})",
    )
    bench.add_argument(
        "--ops",
        type=_names(ALL_OPS),
        default=list(ALL_OPS),
        metavar="OP[,OP...]",
        help=f"operations to time (default: all of {','.join(ALL_OPS)})",
    )
    bench.add_argument(
        "--turns",
        type=_sizes,
        default=list(DEFAULT_TURNS),
        metavar="N[,N...]",
        help=(
            f"turn-regime checkpoints; each reports the mean of the {WINDOW} turns up "
            f"to it (default: {','.join(map(str, DEFAULT_TURNS))})"
        ),
    )
    e2e_group = bench.add_argument_group(
        "e2e",
        "whole Runner.run_async turns of a streaming-shaped app with both compaction "
        "strategies, on a session grown once per size and copied per side",
    )
    e2e_group.add_argument(
        "--services",
        type=_names(SERVICES),
        default=None,
        metavar="S[,S...]",
        help=(
            f"session services among {','.join(SERVICES)} (default: the first three, "
            "and postgres when there is a database URL)"
        ),
    )
    e2e_group.add_argument(
        "--database-url",
        default=None,
        metavar="URL",
        help=f"PostgreSQL for postgres: postgresql+asyncpg://... (default: ${POSTGRES_ENV})",
    )
    e2e_group.add_argument(
        "--e2e-turns",
        type=positive_int,
        default=E2E_DEFAULT_TURNS,
        metavar="N",
        help=f"timed turns per side, service and size (default: {E2E_DEFAULT_TURNS})",
    )
    e2e_group.add_argument(
        "--e2e-warmup",
        type=count,
        default=E2E_DEFAULT_WARMUP,
        metavar="N",
        help=f"untimed turns per side first (default: {E2E_DEFAULT_WARMUP})",
    )
    e2e_group.add_argument(
        "--e2e-placement",
        type=_names(E2E_PLACEMENTS),
        default=list(E2E_PLACEMENTS),
        metavar="P[,P...]",
        help=(
            "where the sides run: own (each side in a process of its own), shared "
            f"(both in the bench's process) (default: {','.join(E2E_PLACEMENTS)})"
        ),
    )
    e2e_group.add_argument(
        "--loading",
        type=_names(E2E_LOADINGS),
        default=list(E2E_LOADINGS),
        metavar="L[,L...]",
        help=(
            "what adk-fastcompact's side loads per turn: full (install()), lean "
            f"(install(loading='lean')) (default: {','.join(E2E_LOADINGS)})"
        ),
    )
    e2e_group.add_argument(
        "--e2e-gc",
        choices=E2E_COLLECTOR_MODES,
        default=E2E_DEFAULT_COLLECTOR,
        help=(
            "the cyclic garbage collector during the timed turns: on, as apps run, or "
            f"off after a gc.collect() before each turn (default: {E2E_DEFAULT_COLLECTOR})"
        ),
    )
    e2e_group.add_argument(
        "--e2e-compaction",
        choices=E2E_COMPACTIONS,
        default=E2E_DEFAULT_COMPACTION,
        help=(
            "the app's compaction: both strategies (sliding window and token threshold; "
            "the prompt keeps every summary, so it grows with the session) or the token "
            f"threshold alone (a bounded prompt) (default: {E2E_DEFAULT_COMPACTION})"
        ),
    )
    bench.add_argument(
        "--seed", type=int, default=0, metavar="S", help="session and script seed (default: 0)"
    )
    bench.add_argument(
        "--json",
        action="store_true",
        help=(
            'print {"rows": [...], "memory": [...], "e2e": [...]} to stdout instead of '
            'tables; each row has its Rust-core "declines" and "decline_reasons"'
        ),
    )
    bench.add_argument(
        "--plot",
        type=Path,
        default=None,
        metavar="FILE.png",
        help=(
            "also draw time per call against session size (log-log, both "
            "implementations) and per-turn overhead against turn number "
            "(needs matplotlib: pip install 'adk-fastcompact[plot]')"
        ),
    )
    return parser


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_line() -> str:
    """Platform, CPU, Python and package versions, for a report's footer."""
    from .. import __version__

    return (
        f"{platform.platform()}, {_cpu_model()}, {os.cpu_count()} CPUs, "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"google-adk {importlib.metadata.version('google-adk')}, "
        f"adk-fastcompact {__version__}"
    )


def _ms(value: float) -> str:
    return f"{value:,.3f}" if value < 10 else f"{value:,.1f}"


def declines_warning(rows: Sequence[Row]) -> str | None:
    """The warning line about the rows whose Rust side declined, or None.

    A decline runs google-adk's own code in Rust's place: the answer is the
    same, but the row's Rust time is then partly Python's, and its speed-up
    understates the Rust core's (or hides that it was not used at all).
    """
    total = total_declines(rows)
    if not total:
        return None
    declined = sum(1 for row in rows if row["declines"])
    reasons = ", ".join(f"{reason}: {count:,}" for reason, count in sorted(total.items()))
    return (
        f"warning: the Rust core declined {sum(total.values()):,} calls in {declined} of "
        f"{len(rows)} rows ({reasons}); google-adk's own code ran in its place, so those "
        "rows' Rust timings are partly google-adk's own code"
    )


def _table(rows: Sequence[Row]) -> Table:
    from rich.table import Table

    turns = any("turn" in row for row in rows)
    regimes = {row["regime"] for row in rows}
    captions = {
        "cold": "cold: median ms per call, on fresh deep copies",
        "warm": "warm: median ms per call, on the same objects again",
        "turn": (
            f"turn: mean ms per turn inside compaction and prompt filtering, "
            f"over the {WINDOW} turns up to the turn shown"
        ),
    }
    table = Table(
        title="google-adk compaction bookkeeping: pure Python vs Rust",
        caption="; ".join(text for regime, text in captions.items() if regime in regimes),
    )
    table.add_column("events", justify="right")
    table.add_column("regime")
    if turns:
        table.add_column("turn", justify="right")
    table.add_column("operation")
    table.add_column("python ms", justify="right")
    table.add_column("rust ms", justify="right")
    table.add_column("speed-up", justify="right")
    exact = any(row.get("exact_ms") is not None for row in rows)
    if exact:
        table.add_column("exact ms", justify="right")
        table.add_column("exact/parity", justify="right")
    table.add_column("declines", justify="right")
    previous: tuple[int, str] | None = None
    for row in rows:
        turn = row.get("turn")
        # Turn rows share one section; sized rows have one per size and regime.
        group = (-1, row["regime"]) if turn is not None else (row["events"], row["regime"])
        if previous is not None and group != previous:
            # A rule between sizes, and between regimes within a size.
            table.add_section()
        first = group != previous
        previous = group
        cells = [
            f"{row['events']:,}" if first or turn is not None else "",
            row["regime"] if first else "",
        ]
        if turns:
            cells.append(f"{turn:,}" if turn is not None else "")
        timed = [_ms(row["python_ms"]), _ms(row["rust_ms"]), f"{row['ratio']:.1f}x"]
        if exact:
            exact_ms, vs = row.get("exact_ms"), row.get("exact_vs_parity")
            timed += [
                "" if exact_ms is None else _ms(exact_ms),
                "" if vs is None else f"{vs:.2f}",
            ]
        table.add_row(
            *cells,
            row["op"],
            *timed,
            f"[bold yellow]{row['declines']:,}[/]" if row["declines"] else "0",
            style="bold" if row["op"] == HEADLINE else None,
        )
    return table


def _memory_table(rows: Sequence[MemoryRow]) -> Table:
    from rich.table import Table

    table = Table(
        title="memory",
        caption=(
            "peak heap growth during one cold process+recover call (Rust: "
            "Python objects it allocates plus index growth); the index's "
            "bytes per stored event after the size's timed calls, and of the "
            "summary Events it keeps for reuse"
        ),
    )
    for name in (
        "events",
        "python peak KiB",
        "rust peak KiB",
        "index B/event",
        "summaries B/event",
    ):
        table.add_column(name, justify="right")
    for row in rows:
        table.add_row(
            f"{row['events']:,}",
            f"{row['python_peak_kib']:,.0f}",
            f"{row['rust_peak_kib']:,.0f}",
            f"{row['index_bytes_per_event']:,.0f}",
            f"{row['summary_bytes_per_event']:,.0f}",
        )
    return table


def _bench(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from . import e2e
    from .bench import BenchmarkMismatchError, Report, measured_family, run_bench
    from .bench_options import TURN_OP, select

    stderr = Console(stderr=True)
    given = None if args.sizes is None else [size for sizes in args.sizes for size in sizes]
    regimes = [regime for regime in args.regimes if regime != E2E_REGIME]
    run_e2e = E2E_REGIME in args.regimes
    e2e_sizes = given or list(E2E_DEFAULT_SIZES)
    url = e2e.database_url(args.database_url)
    skipped: list[str] = []
    if args.services is not None:
        # Asked for by name: one that cannot run is check_selection's error.
        services = args.services
    else:
        services, skipped = e2e.default_services(url)
    try:
        if regimes:
            chosen = select(
                given or DEFAULT_SIZES, args.repeat, regimes=regimes, ops=args.ops, turns=args.turns
            )
        if run_e2e:
            e2e.check_selection(
                e2e_sizes,
                services,
                url,
                args.e2e_turns,
                args.e2e_warmup,
                args.e2e_placement,
                args.e2e_gc,
                args.loading,
                args.e2e_compaction,
            )
    except ValueError as error:
        error_line(stderr, str(error))
        return 2
    if args.plot is not None:
        from .plot import WHAT_IT_DRAWS, panels

        try:
            import matplotlib  # noqa: F401
        except ImportError:
            error_line(stderr, "--plot needs matplotlib: pip install 'adk-fastcompact[plot]'")
            return 2
        selected = (
            [
                (regime, op, size)
                for regime in chosen.sized_regimes
                for op in chosen.filter_ops + chosen.compaction_ops
                for size in chosen.sizes
            ]
            + [("turn", TURN_OP, turn) for turn in chosen.turns]
            if regimes
            else []
        )
        if not panels(selected):
            error_line(stderr, f"{WHAT_IT_DRAWS}; this selection has nothing of that")
            return 2
    if run_e2e:
        for reason in skipped:
            stderr.print(
                f"bench: e2e skipped: {reason}", markup=False, highlight=False, soft_wrap=True
            )
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    # rich draws no bar where stderr is not a terminal (a pipe, a CI log):
    # there each new phase is a plain line, so a long run shows where it is.
    phase_lines = not stderr.is_terminal
    started = time.perf_counter()
    try:
        with Progress(*columns, console=stderr, transient=True) as bar:
            task = bar.add_task("starting", total=None)
            shown = ""

            def progress(completed: int, total: int, description: str) -> None:
                nonlocal shown
                bar.update(task, completed=completed, total=total, description=description)
                if phase_lines and description and description != shown:
                    shown = description
                    elapsed = time.perf_counter() - started
                    bar.console.print(
                        f"bench: {description} (at {elapsed:.0f} s)",
                        markup=False,
                        highlight=False,
                        soft_wrap=True,
                    )

            report = Report([], [], measured_family())
            if regimes:
                report = run_bench(
                    given or DEFAULT_SIZES,
                    repeat=args.repeat,
                    progress=progress,
                    seed=args.seed,
                    regimes=regimes,
                    ops=args.ops,
                    turns=args.turns,
                )
            e2e_rows = (
                e2e.run_e2e(
                    e2e_sizes,
                    services,
                    url=url,
                    turns=args.e2e_turns,
                    warmup=args.e2e_warmup,
                    seed=args.seed,
                    placements=args.e2e_placement,
                    gc_mode=args.e2e_gc,
                    loadings=args.loading,
                    compaction=args.e2e_compaction,
                    progress=progress,
                )
                if run_e2e
                else []
            )
    except BenchmarkMismatchError as error:
        stderr.print(f"[bold red]benchmark aborted:[/] {escape(str(error))}")
        return 1
    if args.plot is not None:
        from .plot import WHAT_IT_DRAWS, describe, plot

        drawn = plot(report, args.plot)
        said = (
            f"plot written to {args.plot}: {describe(drawn)}"
            if drawn
            # The installed google-adk lacked the selected operations.
            else f"no plot: {WHAT_IT_DRAWS}; this run measured none"
        )
        stderr.print(said, markup=False, highlight=False, soft_wrap=True)
    warnings = [
        text
        for text in (declines_warning(report.rows), e2e.declines_warning(e2e_rows))
        if text is not None
    ]
    if args.json:
        json.dump(
            {
                "family": report.family,
                "rows": report.rows,
                "memory": report.memory,
                "e2e": e2e_rows,
            },
            sys.stdout,
        )
        sys.stdout.write("\n")
        for warning in warnings:
            # stdout is the JSON's: the warning goes where the progress went.
            stderr.print(warning, style="bold yellow", markup=False)
        return 0
    stdout = Console()
    if not stdout.is_terminal:
        # A file or a pipe has no width; rich's 80 columns would cut the names.
        stdout = Console(width=max(stdout.width, 215 if e2e_rows else 120))
    stdout.print(f"measured: {report.family}")
    if report.rows:
        stdout.print(_table(report.rows))
    if report.memory:
        stdout.print(_memory_table(report.memory))
    if e2e_rows:
        stdout.print(e2e.e2e_table(e2e_rows))
    for warning in warnings:
        stdout.print(warning, style="bold yellow", markup=False)
    # One line however long (scripts and CI read it last), taken as written.
    stdout.print(machine_line(), style="dim", markup=False, highlight=False, soft_wrap=True)
    return 0


CLOSED_PIPE = 128 + 13
"""The exit status when the reader of stdout went away (`audit --json | head`):
128 + SIGPIPE, what a shell reports for a command a closed pipe ended
(`yes | head`). Not 1, which the audit's status means "found something"."""


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the process exit code."""
    try:
        import rich  # noqa: F401
    except ImportError:
        print(f"error: {MISSING_RICH}", file=sys.stderr)
        return 2
    try:
        status = _main(argv)
        # Output still buffered would meet a closed pipe at exit, outside this
        # function: meet it here.
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        return _closed_pipe()
    except SystemExit as exit:
        # rich's Console.on_broken_pipe ends the process with SystemExit(1)
        # from its `except BrokenPipeError` (stdout already sent to devnull).
        if isinstance(exit.__context__, BrokenPipeError):
            return _closed_pipe()
        try:
            sys.stdout.flush()  # argparse's --help and usage errors
        except BrokenPipeError:
            return _closed_pipe()
        raise


def _closed_pipe() -> int:
    """Ends quietly after a write to a closed stdout (the recipe of Python's
    `signal` documentation, "Note on SIGPIPE"): what is left for stdout goes
    to devnull, so the flush at exit raises nothing either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        # stdout is no file (a test's redirection): nothing will flush to a pipe.
        pass
    finally:
        os.close(devnull)
    return CLOSED_PIPE


def _main(argv: Sequence[str] | None) -> int:
    console_script = argv is None and Path(sys.argv[0]).name == CONSOLE_SCRIPT
    prog = CONSOLE_SCRIPT if console_script else PROG
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:2] == ["audit", "merge"]:
        # A store named merge is ./merge.
        return audit_merge_main(given[2:], prog)
    args = _parser(prog).parse_args(given)
    try:
        if args.command == "audit":
            return run_audit_command(args)
        if args.command == "bench":
            return _bench(args)
        if args.command == "prepare-store":
            return run_prepare_store(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    raise AssertionError(f"unhandled command {args.command!r}")
