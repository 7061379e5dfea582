"""The e2e regime: whole `Runner.run_async` turns, plain google-adk against
adk-fastcompact, on a long session in each of google-adk's session services.

What a user waits for is the whole turn: the service loading (or copying)
the session, prompt assembly, the model call, the appends and compaction
after the invocation. This regime times exactly that, wall to wall, on the
app of `e2e_app` (google-adk's real `Runner` and `LlmAgent`, a scripted
streaming-shaped model, a tool answering ~1 KB of records, sliding-window
and token-threshold compaction both configured, an instant summarizer).

Growing the session. Every real turn pays for google-adk's prompt assembly
over the whole session, and through a session service for the session's
load or copy too: reaching 10,000 events takes some 2,400 turns, each of
them a second or more at the end on every service. So the session is grown
once, by real turns of the same app through
google-adk's `Runner` with `install()` active (parity mode: the same
decisions as google-adk's own code, which the rest of the bench and the
tests check) on an `InMemorySessionService` that hands the Runner its
stored session instead of a deep copy (`GrowthService`; its `append_event`
then stores each event once, as google-adk's does for a caller holding the
stored session). Every event in it is one the app's turns wrote: user
messages, the model's `ModelContent` responses with thought parts and
signed calls, the tool responses google-adk builds, and the compaction
events google-adk's sliding window and token threshold wrote along the way.
Each size is a snapshot of that one growth at the first turn boundary at or
past it (so a size is reached within a turn's few events). Each service's
store then receives the snapshot's events through the service's own
`append_event` (`e2e_stores.Store.grow_to`: copies, in order, on a session
the service handed out), grown incrementally from one size to the next.

Timing. For each service, size and placement the grown store is copied
twice (`e2e_stores`: a pickle of the in-memory service's dicts, an SQLite
backup of the file, or ``CREATE DATABASE ... TEMPLATE`` on PostgreSQL), one
copy per side, each side with a service and a Runner of its own
(`e2e_side.Side`), placed as servers run (`--e2e-placement`):

* ``own``: each side in a process of its own (a fresh interpreter, spawned;
  the in-memory copy unpickled there), as a server holding this one
  session: plain google-adk in one, adk-fastcompact (``install()``, set once)
  in the other;
* ``shared``: both sides in the bench's process, which also holds the grown
  session's objects (a server holding other sessions besides this one),
  google-adk switched before each side's turn (`install()`, or
  `_patch.unpatch()` back to google-adk's code, keeping the index).

The turns after the snapshot (the same ones the growth went on with) are
then run on both sides in alternation, who goes first alternating too, in
lockstep across the two processes of ``own``: `--e2e-warmup` untimed turns,
then `--e2e-turns` timed ones. Before each turn the timers are put in
(`e2e_app.instrument`). The cyclic garbage collector (`--e2e-gc`) is on
during the turns by default, as in an app, which never calls
`gc.collect()` before a turn: nothing is collected on purpose between
turns, so the collections its thresholds trigger fall inside the turns or
between them as the turns' own allocations have them, and a full
collection walks whatever the process holds (the grown session in
``shared``, what the accelerator keeps). Only once, when a side is set up,
before its warm-up turns, its setup's garbage is collected. With
``--e2e-gc off`` each turn runs with the collector off after a
`gc.collect()`, as in the other regimes. The row reports the median
wall milliseconds per turn of each side and their ratio, and where each
side's turns go (mean milliseconds per turn): the service's `get_session`
(the session load or copy), google-adk's `_get_contents` (prompt assembly),
the two compaction entry points (including the summarizer, instant here,
and the prompt estimate they make through `_get_contents`), the service's
`append_event` (wherever it is called from, the token-threshold
compaction's own append included), and the rest (the Runner, the agent's
flow and request processors, the model and tool calls, telemetry).

Parity. Every request the scripted model receives is kept (in ``own``, each
side's process sends its requests back with the turn's timings), and after
each turn (warm-ups too) the two sides' requests (contents, system
instruction, tools) must be equal, or the bench stops with
`BenchmarkMismatchError`.
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from google.adk.events.event import Event
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session

from .. import _lean, _native, _patch
from .bench_options import E2E_COLLECTOR_MODES as COLLECTOR_MODES
from .bench_options import E2E_COMPACTIONS as COMPACTIONS
from .bench_options import E2E_DEFAULT_COLLECTOR as DEFAULT_COLLECTOR
from .bench_options import E2E_DEFAULT_COMPACTION as DEFAULT_COMPACTION
from .bench_options import E2E_DEFAULT_SIZES as DEFAULT_SIZES
from .bench_options import E2E_DEFAULT_TURNS as DEFAULT_TURNS
from .bench_options import E2E_DEFAULT_WARMUP as DEFAULT_WARMUP
from .bench_options import E2E_LOADINGS as LOADINGS
from .bench_options import E2E_PLACEMENTS as PLACEMENTS
from .bench_options import E2E_REGIME as REGIME
from .bench_options import LOCAL_SERVICES, POSTGRES_ENV, SERVICES
from .bench_report import BenchmarkMismatchError
from .e2e_app import APP_NAME, OTHER, PHASES, SESSION_ID, USER_ID, Script, build_runner, run_turn
from .e2e_side import Side, SideProcess, TurnResult, switch
from .e2e_stores import LABELS, Copy, Store, unavailable
from .simulate import no_gc

if TYPE_CHECKING:
    # The `cli` extra's: only `e2e_table` draws.
    from rich.table import Table

SIDES = ("python", "rust")


class E2ERow(TypedDict):
    """One service and size: milliseconds per whole turn, both sides."""

    op: str  # "turn"
    regime: str  # "e2e"
    service: str
    #: Where the sides ran (`PLACEMENTS`): "own" process each, or "shared".
    placement: str
    #: The cyclic garbage collector during the turns (`COLLECTOR_MODES`).
    gc: str
    #: What adk-fastcompact's side loaded per turn (`LOADINGS`).
    loading: str
    #: The app's compaction (`COMPACTIONS`).
    compaction: str
    #: Events in the session when the timed turns began (after the warm-ups).
    events: int
    #: Compaction events among them.
    compactions: int
    turns: int
    #: Median wall milliseconds per turn: plain google-adk, adk-fastcompact.
    python_ms: float
    rust_ms: float
    ratio: float
    #: Mean milliseconds per turn by phase (`PHASES` and "other"); they sum
    #: to the mean turn, `python_mean_ms` / `rust_mean_ms`.
    python_split_ms: dict[str, float]
    rust_split_ms: dict[str, float]
    python_mean_ms: float
    rust_mean_ms: float
    #: Wall milliseconds of each side's first turn on its copy of the store
    #: (the first warm-up turn; in ``own`` the first turn of a fresh
    #: process, before any row memo, index or lean decision exists).
    python_first_ms: float
    rust_first_ms: float
    #: MiB the side's process's resident set rose above its size at a timed
    #: turn's start, at its highest, over the timed turns (None where the
    #: kernel keeps no resettable peak; see `e2e_side.PeakRss`). In
    #: ``shared`` both sides are one process: each turn's own rise.
    python_rss_mib: float | None
    rust_rss_mib: float | None
    declines: int
    decline_reasons: dict[str, int]


class GrowthService(InMemorySessionService):
    """`InMemorySessionService` handing out its stored session itself (the
    growth's shortcut: no deep copy per turn; see the module docstring)."""

    async def get_session(  # type: ignore[override]
        self, *, app_name: str, user_id: str, session_id: str, config: Any = None
    ) -> Session | None:
        stored = self.sessions.get(app_name, {}).get(user_id, {}).get(session_id)
        if stored is None or not isinstance(config, _lean.LeanSessionConfig):
            return stored
        # A lean run (the growth runs lean): the events it reads, the stored
        # objects themselves, which append_event appends to the stored
        # session as well.
        needed = _lean.needed_events(stored.events, config)
        return stored if needed is None else stored.model_copy(update={"events": needed})


class Snapshot(NamedTuple):
    """The grown session at one size: its first `events` events, and the
    script's state when the growth went on from there."""

    events: int
    script_state: object


async def grow(
    sizes: Sequence[int],
    seed: int,
    on_turn: Callable[[int], None] | None = None,
    compaction: str = DEFAULT_COMPACTION,
) -> tuple[list[Event], dict[int, Snapshot]]:
    """Grows the session by real turns to every size (see the module docstring)."""
    was = _patch.installed()
    # Lean: the growth's turns read only what a turn reads (the same
    # events as a whole load would grow, docs/lean-loading.md), so sizes
    # of 100,000 events grow in minutes.
    _patch.install("parity", strict=True, loading="lean")
    try:
        service = GrowthService()
        runner, llm = build_runner(service, seed, compaction)
        await service.create_session(app_name=APP_NAME, user_id=USER_ID, session_id=SESSION_ID)
        events = service.sessions[APP_NAME][USER_ID][SESSION_ID].events
        script = Script(seed)
        snapshots: dict[int, Snapshot] = {}
        with no_gc():
            for size in sorted(set(sizes)):
                while len(events) < size:
                    turn = script.turn()
                    llm.play(turn, record=False)
                    await run_turn(runner, turn.message)
                    if on_turn is not None:
                        on_turn(len(events))
                snapshots[size] = Snapshot(len(events), script.rng.getstate())
        return list(events), snapshots
    finally:
        _patch.uninstall()
        if was is not None:
            _patch.install(was)
        gc.collect()


@dataclass
class _Timings:
    """One side's timed turns."""

    turn_s: list[float] = field(default_factory=list)
    phases: list[dict[str, float]] = field(default_factory=list)
    declines: Counter[str] = field(default_factory=Counter)
    rss_kib: list[int | None] = field(default_factory=list)
    #: The side's first turn, warm-up or timed.
    first_s: float | None = None

    def saw(self, result: TurnResult) -> None:
        if self.first_s is None:
            self.first_s = result.wall

    def add(self, result: TurnResult) -> None:
        self.turn_s.append(result.wall)
        self.phases.append(result.phases)
        self.declines.update(result.declines)
        self.rss_kib.append(result.rss_kib)

    def rss_mib(self) -> float | None:
        known = [kib for kib in self.rss_kib if kib is not None]
        return max(known) / 1024 if known and len(known) == len(self.rss_kib) else None

    def split_ms(self) -> tuple[dict[str, float], float]:
        mean = statistics.mean(self.turn_s) * 1e3
        split = {phase: statistics.mean(p[phase] for p in self.phases) * 1e3 for phase in PHASES}
        split[OTHER] = mean - sum(split.values())
        return split, mean


async def measure(
    store: Store,
    snapshot: Snapshot,
    *,
    turns: int,
    warmup: int,
    seed: int,
    placement: str = "shared",
    gc_mode: str = DEFAULT_COLLECTOR,
    loading: str = "full",
    compaction: str = DEFAULT_COMPACTION,
    on_turn: Callable[[], None] | None = None,
) -> E2ERow:
    """Times `turns` whole turns per side on copies of `store` (grown to
    `snapshot`), after `warmup` untimed ones, the sides placed as
    `placement` says, the collector as `gc_mode` says; checks the requests
    agree."""
    copies: list[Copy] = []
    sides: list[Side | SideProcess] = []
    script = Script(seed)
    script.rng.setstate(snapshot.script_state)  # type: ignore[arg-type]
    events = compactions = 0
    fast = "parity" if loading == "full" else f"parity/{loading}"
    timings = {None: _Timings(), fast: _Timings()}
    try:
        for mode in (None, fast):
            copies.append(await store.copy())
            if placement == "own":
                sides.append(SideProcess(mode, copies[-1], seed, gc_mode, compaction))
            else:
                sides.append(Side(mode, copies[-1], seed, gc_mode, compaction))
        if placement == "shared":
            gc.collect()  # the setup's garbage (the side processes collect theirs)
        for index in range(warmup + turns):
            if index == warmup:
                events, compactions = await sides[0].stored()
            turn = script.turn()
            requests: dict[str | None, list[str]] = {}
            for side in sides if index % 2 == 0 else reversed(sides):
                result = await side.turn(turn)
                requests[side.mode] = result.requests
                timings[side.mode].saw(result)
                if index >= warmup:
                    timings[side.mode].add(result)
                if on_turn is not None:
                    on_turn()
            _same_requests(
                f"e2e {store.kind} ({placement} process{'es' if placement == 'own' else ''})",
                snapshot.events,
                index + 1,
                requests[None],
                requests[fast],
            )
    finally:
        switch(None)
        for side in sides:
            await side.close()
        for copied in copies:
            await store.release(copied)
    python, rust = timings[None], timings[fast]
    python_split, python_mean = python.split_ms()
    rust_split, rust_mean = rust.split_ms()
    python_ms = statistics.median(python.turn_s) * 1e3
    rust_ms = statistics.median(rust.turn_s) * 1e3
    return E2ERow(
        op="turn",
        regime=REGIME,
        service=store.kind,
        placement=placement,
        gc=gc_mode,
        loading=loading,
        compaction=compaction,
        events=events,
        compactions=compactions,
        turns=turns,
        python_ms=python_ms,
        rust_ms=rust_ms,
        ratio=python_ms / rust_ms if rust_ms > 0 else float("inf"),
        python_split_ms=python_split,
        rust_split_ms=rust_split,
        python_mean_ms=python_mean,
        rust_mean_ms=rust_mean,
        python_first_ms=(python.first_s or 0.0) * 1e3,
        rust_first_ms=(rust.first_s or 0.0) * 1e3,
        python_rss_mib=python.rss_mib(),
        rust_rss_mib=rust.rss_mib(),
        declines=sum(rust.declines.values()),
        decline_reasons={reason: rust.declines[reason] for reason in sorted(rust.declines)},
    )


def _same_requests(case: str, size: int, turn: int, expected: list[str], actual: list[str]) -> None:
    where = f"{case}, {size:,} events, turn {turn}"
    if len(expected) != len(actual):
        raise BenchmarkMismatchError(
            f"{where}: adk-fastcompact's side made {len(actual)} model calls, "
            f"google-adk's {len(expected)}"
        )
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        if want != got:
            raise BenchmarkMismatchError(
                f"{where}: model request {index + 1} differs from google-adk's"
            )


def database_url(given: str | None) -> str | None:
    """The PostgreSQL URL: `given`, else the environment's `POSTGRES_ENV`."""
    return given or os.environ.get(POSTGRES_ENV) or None


def default_services(url: str | None) -> tuple[list[str], list[str]]:
    """The local services, and PostgreSQL when there is a URL for it: those
    that can run here, and why each of the others cannot
    (`e2e_stores.unavailable`: google-adk alone installs no SQLAlchemy)."""
    wanted = [*LOCAL_SERVICES, "postgres"] if url else list(LOCAL_SERVICES)
    reasons = {name: unavailable(name) for name in wanted}
    return [name for name in wanted if reasons[name] is None], [
        reason for reason in reasons.values() if reason is not None
    ]


def check_selection(
    sizes: Iterable[int],
    services: Iterable[str],
    url: str | None,
    turns: int,
    warmup: int,
    placements: Iterable[str] = PLACEMENTS,
    gc_mode: str = DEFAULT_COLLECTOR,
    loadings: Iterable[str] = LOADINGS,
    compaction: str = DEFAULT_COMPACTION,
) -> None:
    """Raises ValueError on arguments `run_e2e` would refuse."""
    sizes, services, placements = list(sizes), list(services), list(placements)
    if not sizes or any(size < 1 for size in sizes):
        raise ValueError(f"sizes must be a non-empty list of sizes >= 1: {sizes}")
    unknown = [name for name in services if name not in SERVICES]
    if unknown or not services:
        raise ValueError(f"services must be some of {', '.join(SERVICES)}; got {services}")
    if "postgres" in services and not url:
        raise ValueError(f"the postgres service needs --database-url or {POSTGRES_ENV}")
    for name in services:
        missing = unavailable(name)
        if missing is not None:
            raise ValueError(missing)
    if turns < 1 or warmup < 0:
        raise ValueError(f"need at least one timed turn and no negative warm-up: {turns}, {warmup}")
    if not placements or any(placement not in PLACEMENTS for placement in placements):
        raise ValueError(f"placements must be some of {', '.join(PLACEMENTS)}; got {placements}")
    if gc_mode not in COLLECTOR_MODES:
        raise ValueError(f"the collector must be one of {', '.join(COLLECTOR_MODES)}: {gc_mode!r}")
    loadings = list(loadings)
    if not loadings or any(loading not in LOADINGS for loading in loadings):
        raise ValueError(f"loadings must be some of {', '.join(LOADINGS)}; got {loadings}")
    if compaction not in COMPACTIONS:
        raise ValueError(f"compaction must be one of {', '.join(COMPACTIONS)}: {compaction!r}")


def run_e2e(
    sizes: Iterable[int] = DEFAULT_SIZES,
    services: Iterable[str] | None = None,
    *,
    url: str | None = None,
    turns: int = DEFAULT_TURNS,
    warmup: int = DEFAULT_WARMUP,
    seed: int = 0,
    placements: Iterable[str] = PLACEMENTS,
    gc_mode: str = DEFAULT_COLLECTOR,
    loadings: Iterable[str] = LOADINGS,
    compaction: str = DEFAULT_COMPACTION,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[E2ERow]:
    """Runs the e2e regime; one row per size, service and placement, in
    that nesting order.

    Args:
        sizes: Session sizes in events (each reached at a turn boundary).
        services: Some of `SERVICES`; by default those of
            `default_services(url)` that can run here.
        url: The PostgreSQL URL (``postgresql+asyncpg://...``) for
            ``postgres``; by default the environment's `POSTGRES_ENV`.
        turns: Timed turns per side.
        warmup: Untimed turns per side first.
        seed: The script's seed.
        placements: Some of `PLACEMENTS`: each side in a process of its
            own, both in this one.
        gc_mode: One of `COLLECTOR_MODES`: the cyclic garbage collector
            during the turns.
        loadings: Some of `LOADINGS`: what adk-fastcompact's side loads
            per turn, one row each.
        compaction: One of `COMPACTIONS`: the app's compaction.
        progress: Called as ``progress(completed, total, description)``.

    Raises:
        ValueError: On bad arguments.
        BenchmarkMismatchError: When the two sides' model requests differ.
    """
    url = database_url(url)
    sizes = sorted(set(sizes))
    chosen = list(dict.fromkeys(services)) if services is not None else default_services(url)[0]
    placements = list(dict.fromkeys(placements))
    loadings = [loading for loading in LOADINGS if loading in set(loadings)] or list(loadings)
    check_selection(sizes, chosen, url, turns, warmup, placements, gc_mode, loadings, compaction)
    chosen = [name for name in SERVICES if name in chosen]
    placed = [placement for placement in PLACEMENTS if placement in placements]
    was = _patch.installed()
    try:
        return asyncio.run(
            _run(
                sizes,
                chosen,
                url,
                turns,
                warmup,
                seed,
                placed,
                gc_mode,
                loadings,
                compaction,
                progress,
            )
        )
    finally:
        _patch.uninstall()
        if was is not None:
            _patch.install(was)


async def _run(
    sizes: list[int],
    services: list[str],
    url: str | None,
    turns: int,
    warmup: int,
    seed: int,
    placements: list[str],
    gc_mode: str,
    loadings: list[str],
    compaction: str,
    progress: Callable[[int, int, str], None] | None,
) -> list[E2ERow]:
    cases = [(placement, loading) for loading in loadings for placement in placements]
    per_case = 1 + len(cases) * (1 + 2 * (warmup + turns))
    total = max(sizes) + len(sizes) * len(services) * per_case
    completed = 0
    description = ""

    def step(advance: int = 1, new_description: str | None = None) -> None:
        nonlocal completed, description
        completed += advance
        if new_description is not None:
            description = new_description
        if progress is not None:
            progress(completed, total, description)

    grown = 0
    # One description for the whole growth (the bar counts its events): a
    # new description is a new line where stderr is no terminal.
    growing = f"e2e: growing the session by real turns to {max(sizes):,} events"

    def grew(events: int) -> None:
        nonlocal grown
        step(min(events, max(sizes)) - grown)
        grown = min(events, max(sizes))

    step(0, growing)
    events, snapshots = await grow(sizes, seed, grew, compaction)
    _native.index_clear()
    stores = [Store(kind, url) for kind in services]
    rows: list[E2ERow] = []
    try:
        for size in sizes:
            snapshot = snapshots[size]
            for store in stores:
                step(0, f"e2e {size:,} events: {LABELS[store.kind]}: storing the session")
                await store.grow_to(events[: snapshot.events])
                step()
                for placement, loading in cases:
                    step(
                        0,
                        f"e2e {size:,} events: {LABELS[store.kind]}: whole turns, "
                        f"{_PLACED[placement]}, {loading} loading",
                    )
                    rows.append(
                        await measure(
                            store,
                            snapshot,
                            turns=turns,
                            warmup=warmup,
                            seed=seed,
                            placement=placement,
                            gc_mode=gc_mode,
                            loading=loading,
                            compaction=compaction,
                            on_turn=step,
                        )
                    )
                    step()
                    _native.index_clear()
                    gc.collect()
    finally:
        for store in stores:
            await store.close()
    return rows


_COMPACTED = {
    "both": "sliding window and token threshold",
    "token": "token threshold alone",
}

_PLACED = {"own": "each side in its own process", "shared": "both sides in this process"}


def declines_warning(rows: Sequence[E2ERow]) -> str | None:
    """The warning line about e2e rows whose accelerated turns declined."""
    total: Counter[str] = Counter()
    for row in rows:
        total.update(row["decline_reasons"])
    if not total:
        return None
    reasons = ", ".join(f"{reason}: {count:,}" for reason, count in sorted(total.items()))
    return (
        f"warning: in the e2e regime the Rust core declined {sum(total.values()):,} calls "
        f"({reasons}); google-adk's own code ran in its place"
    )


def _ms(value: float) -> str:
    return f"{value:,.1f}" if value >= 10 else f"{value:,.2f}"


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def e2e_table(rows: Sequence[E2ERow]) -> Table:
    """The rows as a rich table: a line per side, the split beside."""
    from rich.table import Table

    collectors = sorted({row["gc"] for row in rows})
    compactions = sorted({_COMPACTED[row.get("compaction", DEFAULT_COMPACTION)] for row in rows})
    table = Table(
        title=(
            "whole Runner.run_async turns: plain google-adk vs adk-fastcompact, "
            f"garbage collector {'/'.join(collectors)} during the turns, "
            f"{' / '.join(compactions)}"
        ),
        caption=(
            "median ms per turn over the timed turns; process: each side in its own "
            "process, or both in one (shared); the split is the mean ms per turn "
            "in the service's get_session (load/copy), google-adk's _get_contents (prompt), "
            "the compaction entry points, the service's append_event, the garbage "
            "collector's collections, and the rest; 1st turn: the side's first turn on "
            "its copy of the store (in a fresh process where each side has its own); "
            "peak MiB: the most the resident set rose during a timed turn"
        ),
    )
    for name, justify in (
        ("service", "left"),
        ("events", "right"),
        ("process", "left"),
        ("loading", "left"),
        ("side", "left"),
        ("ms/turn", "right"),
        ("speed-up", "right"),
        ("get_session", "right"),
        ("_get_contents", "right"),
        ("compaction", "right"),
        ("append_event", "right"),
        ("gc", "right"),
        ("other", "right"),
        ("1st turn", "right"),
        ("peak MiB", "right"),
        ("declines", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        table.add_section()
        for side in SIDES:
            rust = side == "rust"
            split = row[f"{side}_split_ms"]  # type: ignore[literal-required]
            table.add_row(
                LABELS[row["service"]] if not rust else "",
                f"{row['events']:,}" if not rust else "",
                row["placement"] if not rust else "",
                row["loading"] if rust else "full",
                "adk-fastcompact" if rust else "google-adk",
                _ms(row[f"{side}_ms"]),  # type: ignore[literal-required]
                f"{row['ratio']:.2f}x" if rust else "",
                *(_ms(split[phase]) for phase in (*PHASES, OTHER)),
                _ms(row[f"{side}_first_ms"]),  # type: ignore[literal-required]
                _mib(row[f"{side}_rss_mib"]),  # type: ignore[literal-required]
                (f"[bold yellow]{row['declines']:,}[/]" if row["declines"] else "0")
                if rust
                else "",
                style="bold" if rust else None,
            )
    return table
