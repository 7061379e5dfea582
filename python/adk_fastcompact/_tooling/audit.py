"""`python -m adk_fastcompact audit STORE`: the events compaction has hidden in a real store.

google-adk's compaction records the interval `[start, end]` its summary
stands for, and every later prompt leaves out every raw event stamped inside
it. An event inside the interval that the summarizer was never handed (a
timestamp tied with the window's edge, stored out of stamp order, appended
while the summary was being written) is then in no prompt at all; an
event handed to a summary whose interval does not cover it is in the
prompt twice, raw and summarized. The raw events are
still in the store, so the audit can tell.

This module reads stores (read-only) and hands each session's stored JSON
to `_native.audit_stored`, which replays google-adk's window selection with
the parity engine at every stored compaction to learn what that summary was
handed, and compares it with the prompt the session yields now for each
isolation scope (an event where the store cannot decide is reported
undecidable, not hidden). Nothing
here builds a pydantic `Event` on the hot path: the JSON documents are
passed as the store holds them and parsed in Rust.

Stores:

- a SQLite file of google-adk's `SqliteSessionService` (table `events`,
  column `event_data`), loaded in timestamp order (ties in rowid order);
- a SQLite file (or `sqlite://` URL) of `DatabaseSessionService`'s current
  JSON schema, read the same way;
- a JSON-lines export, one `Session.model_dump_json()` per line (see
  `export_sessions`, which writes one from any `BaseSessionService`), whose
  events are taken in the order given.

See docs/audit.md.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .. import _native
from .audit_stores import (
    ORDER_STORED,
    ORDER_TIMESTAMP,
    ORDER_TIMESTAMP_ID,
    Filters,
    SettingsError,
    Store,
    StoredSession,
    StoreError,
    _load_attr,
    export_sessions,
    load_service,
    open_store,
    opened,
)

__all__ = [
    "CAUSES",
    "ORDER_STORED",
    "ORDER_TIMESTAMP",
    "ORDER_TIMESTAMP_ID",
    "AuditReport",
    "Filters",
    "SessionReport",
    "Settings",
    "SettingsError",
    "Store",
    "StoreError",
    "StoredSession",
    "app_settings",
    "export_sessions",
    "given_settings",
    "infer_settings",
    "load_service",
    "open_store",
    "opened",
    "run_audit",
]

if TYPE_CHECKING:
    from rich.console import RenderableType

CAUSES = (
    "tied_timestamp",
    "out_of_order_timestamp",
    "appended_while_summarizing",
    "malformed_record",
    "unknown",
)
"""Why an event is hidden, as `_native.audit_stored` names it."""

BATCH_SESSIONS = 256
"""Sessions handed to the native audit at once (at most)."""
BATCH_BYTES = 64 << 20
"""Stored JSON handed to the native audit at once (at most, but one session)."""

SAMPLE_SESSIONS = 16
SAMPLE_BYTES = 8 << 20
"""Inference replays a few sessions holding compactions (at most these
many, and this much JSON) under each candidate setting."""

MAX_OVERLAP = 8
MAX_INTERVAL = 64
MAX_RETENTION = 32
"""The largest settings inference tries."""
INFERRED_THRESHOLD = 1
"""The token threshold inference arms tail retention with: the threshold
decides when a compaction fires, not what a stored one was handed, and the
stored token counts do not tell it."""

_COMPACTION = re.compile(rb'"compaction"\s*:\s*\{')
_DECLINED_EVENT = re.compile(r"^event (\d+):")


# -- settings --------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """The compaction settings the stored compactions are replayed with."""

    compaction_interval: int | None = None
    overlap_size: int = 0
    token_threshold: int | None = None
    event_retention_size: int | None = None
    #: Where they come from: "given", "app module M:A", "inferred ...", "none".
    source: str = "none"

    def __post_init__(self) -> None:
        if self.compaction_interval is not None and self.compaction_interval < 1:
            raise SettingsError(f"the interval must be >= 1, got {self.compaction_interval}")
        if self.overlap_size < 0:
            raise SettingsError(f"the overlap must be >= 0, got {self.overlap_size}")
        if self.token_threshold is not None and self.token_threshold < 1:
            raise SettingsError(f"the token threshold must be >= 1, got {self.token_threshold}")
        if (self.token_threshold is None) != (self.event_retention_size is None):
            raise SettingsError("the token threshold and the retention go together")
        if self.event_retention_size is not None and self.event_retention_size < 0:
            raise SettingsError(f"the retention must be >= 0, got {self.event_retention_size}")

    def native_kwargs(self) -> dict[str, Any]:
        return {
            "compaction_interval": self.compaction_interval,
            "overlap_size": self.overlap_size,
            "token_threshold": self.token_threshold,
            "event_retention_size": self.event_retention_size,
        }

    def describe(self) -> str:
        parts = []
        if self.compaction_interval is not None:
            parts.append(f"interval {self.compaction_interval}, overlap {self.overlap_size}")
        if self.event_retention_size is not None:
            threshold = "any" if self.source.startswith("inferred") else f"{self.token_threshold:,}"
            parts.append(f"token threshold {threshold}, retention {self.event_retention_size}")
        return "; ".join(parts) or "no compaction configured"

    def to_json(self) -> dict[str, Any]:
        return {**self.native_kwargs(), "source": self.source}


def given_settings(
    interval: int | None,
    overlap: int | None,
    token_threshold: int | None,
    retention: int | None,
) -> Settings | None:
    """The settings given on the command line, or None when none is.

    Raises:
      SettingsError: Half of a pair is given (google-adk's
        `EventsCompactionConfig` takes the interval and the overlap
        together, and the token threshold and the retention together).
    """
    if (interval is None) != (overlap is None):
        raise SettingsError("--interval and --overlap go together (as in EventsCompactionConfig)")
    if (token_threshold is None) != (retention is None):
        raise SettingsError(
            "--token-threshold and --retention go together (as in EventsCompactionConfig)"
        )
    if interval is None and token_threshold is None:
        return None
    return Settings(
        compaction_interval=interval,
        overlap_size=overlap or 0,
        token_threshold=token_threshold,
        event_retention_size=retention,
        source="given",
    )


def app_settings(spec: str) -> Settings:
    """The settings of the app `spec` names (`pkg.module:attr`).

    `attr` may be a google-adk `App` (its `events_compaction_config`), an
    `EventsCompactionConfig`, or a callable returning either. The current
    directory is importable, as for `python -m`.

    Raises:
      SettingsError: The module or attribute cannot be loaded, or is none of those.
    """
    target = _load_attr(spec, "--app-module")
    from google.adk.apps.app import EventsCompactionConfig

    if callable(target) and not isinstance(target, type):
        target = target()
    config = getattr(target, "events_compaction_config", target)
    source = f"app module {spec}"
    if config is None:
        return Settings(source=f"{source} (no events_compaction_config)")
    if not isinstance(config, EventsCompactionConfig):
        raise SettingsError(
            f"{spec} is a {type(target).__name__}: expected an App or an EventsCompactionConfig"
        )
    return Settings(
        compaction_interval=config.compaction_interval,
        overlap_size=config.overlap_size or 0,
        token_threshold=config.token_threshold,
        event_retention_size=config.event_retention_size,
        source=source,
    )


# -- the audit -------------------------------------------------------------------------


@dataclass
class SessionReport:
    """What the audit found in one session."""

    app_name: str
    user_id: str
    session_id: str
    events: int = 0
    declined: str | None = None
    prompt_size: int | None = None
    compactions: list[dict[str, Any]] = field(default_factory=list)
    hidden: list[dict[str, Any]] = field(default_factory=list)
    duplicated: list[dict[str, Any]] = field(default_factory=list)
    #: Events the store cannot decide about (a surviving summary's maker
    #: unknown, its plausible readings disagree on them): what each could
    #: be (`could_be`: hidden or duplicated) and why (`reason`).
    undecidable: list[dict[str, Any]] = field(default_factory=list)
    #: Compaction due yet selecting nothing (a pending call blocks it):
    #: `trigger`, `backlog`, `backlog_invocations`, `prompt_then`.
    stalled: dict[str, Any] | None = None
    #: Why the prompt the session yields now could not be built.
    prompt_error: str | None = None

    @property
    def affected(self) -> bool:
        return bool(self.hidden or self.duplicated)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "app_name": self.app_name,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "events": self.events,
        }
        if self.declined is not None:
            out["declined"] = self.declined
            return out
        out["prompt_size"] = self.prompt_size
        out["compactions"] = self.compactions
        out["hidden"] = self.hidden
        out["duplicated"] = self.duplicated
        out["undecidable"] = self.undecidable
        out["stalled"] = self.stalled
        if self.prompt_error is not None:
            out["prompt_error"] = self.prompt_error
        return out


@dataclass
class AuditReport:
    """The audit of one store."""

    store: str
    kind: str
    order: str
    settings: Settings
    sessions: list[SessionReport] = field(default_factory=list)
    read_seconds: float = 0.0
    infer_seconds: float = 0.0
    #: Time the native analysis took, on the worker thread (it overlaps
    #: reading the next batch).
    analysis_seconds: float = 0.0
    #: Time the reader waited for an analysis after reading its batch: the
    #: analysis time reading did not hide (and the wake-up after it).
    analysis_wait_seconds: float = 0.0
    #: Start to end of the scan.
    wall_seconds: float = 0.0
    threads: int | None = None

    @property
    def affected(self) -> list[SessionReport]:
        return [s for s in self.sessions if s.affected]

    @property
    def declined(self) -> list[SessionReport]:
        return [s for s in self.sessions if s.declined is not None]

    @property
    def stalled(self) -> list[SessionReport]:
        return [s for s in self.sessions if s.stalled is not None]

    def hidden_by_cause(self) -> Counter[str]:
        return Counter(h["cause"] for s in self.sessions for h in s.hidden)

    def duplicated_count(self) -> int:
        return sum(len(s.duplicated) for s in self.sessions)

    def undecidable_count(self) -> int:
        return sum(len(s.undecidable) for s in self.sessions)

    def records(self) -> Counter[str]:
        return Counter(str(c["record"]) for s in self.sessions for c in s.compactions)

    def not_replayed(self) -> int:
        return sum(not c["replayed"] for s in self.sessions for c in s.compactions)

    def summary(self) -> dict[str, Any]:
        hidden = self.hidden_by_cause()
        return {
            "sessions": len(self.sessions),
            "sessions_affected": len(self.affected),
            "sessions_declined": len(self.declined),
            "sessions_stalled": len(self.stalled),
            "sessions_without_prompt": sum(s.prompt_error is not None for s in self.sessions),
            "events": sum(s.events for s in self.sessions),
            "hidden": sum(hidden.values()),
            "hidden_by_cause": {cause: hidden[cause] for cause in sorted(hidden)},
            "duplicated": self.duplicated_count(),
            "undecidable": self.undecidable_count(),
            "compactions": sum(len(s.compactions) for s in self.sessions),
            "compactions_not_replayed": self.not_replayed(),
            "records": dict(sorted(self.records().items())),
        }

    @property
    def exit_code(self) -> int:
        """0 when nothing is hidden or duplicated, 1 when something is."""
        return 1 if self.affected else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "kind": self.kind,
            "order": self.order,
            "settings": self.settings.to_json(),
            "summary": self.summary(),
            "timing": {
                "read_seconds": self.read_seconds,
                "infer_seconds": self.infer_seconds,
                "analysis_seconds": self.analysis_seconds,
                "analysis_wait_seconds": self.analysis_wait_seconds,
                "wall_seconds": self.wall_seconds,
                "threads": self.threads,
            },
            "sessions": [s.to_json() for s in self.sessions],
        }


Progress = Callable[[int, int], None]
"""Called with (progress units done since the last call, sessions scanned so far)."""


def _audit_batch(
    batch: Sequence[StoredSession], order: str, settings: Settings, parallel: bool
) -> list[dict[str, Any]]:
    readable = [s for s in batch if s.unreadable is None]
    results: list[dict[str, Any]] = _native.audit_stored(
        [s.rows for s in readable], order, parallel=parallel, **settings.native_kwargs()
    )
    if len(results) != len(readable):
        raise RuntimeError(
            f"audit_stored returned {len(results)} results for {len(readable)} sessions"
        )
    found = iter(results)
    return [next(found) if s.unreadable is None else {"declined": s.unreadable} for s in batch]


def _event(session: StoredSession, position: int) -> dict[str, Any]:
    return {"position": position, **session.describe(position)}


def _session_report(session: StoredSession, result: dict[str, Any]) -> SessionReport:
    report = SessionReport(
        session.app_name, session.user_id, session.session_id, events=len(session.rows)
    )
    declined = result.get("declined")
    if declined is not None:
        match = _DECLINED_EVENT.match(str(declined))
        if match is not None and session.meta is not None:
            position = int(match.group(1))
            if 0 <= position < len(session.meta) and session.meta[position][0] is not None:
                declined = f"{declined} (event id {session.meta[position][0]})"
        report.declined = str(declined)
        return report
    report.events = int(result.get("events", len(session.rows)))
    size = result.get("prompt_size")
    report.prompt_size = None if size is None else int(size)
    stalled = result.get("stalled")
    report.stalled = None if stalled is None else dict(stalled)
    error = result.get("prompt_error")
    report.prompt_error = None if error is None else str(error)
    ids: dict[int, Any] = {}

    def compaction_id(position: int | None) -> Any:
        if position is None:
            return None
        if position not in ids:
            ids[position] = session.brief(position)[0]
        return ids[position]

    for compaction in result["compactions"]:
        position = int(compaction["position"])
        event_id, stamp = session.brief(position)
        entry = {
            "position": position,
            "id": event_id,
            "timestamp": stamp,
            "trigger": compaction["trigger"],
            "replayed": bool(compaction["replayed"]),
            "record": compaction["record"],
            "handed": len(compaction["handed"]),
            "seeds": list(compaction.get("seeds", [])),
            "selected_over": compaction.get("selected_over"),
        }
        if compaction.get("record_error") is not None:
            entry["record_error"] = str(compaction["record_error"])
        report.compactions.append(entry)
        ids[position] = event_id
    for hidden in result["hidden"]:
        where = hidden.get("compaction")
        report.hidden.append(
            {
                **_event(session, int(hidden["position"])),
                "cause": hidden["cause"],
                "compaction": where,
                "compaction_id": compaction_id(where),
            }
        )
    for duplicated in result["duplicated"]:
        where = duplicated["compaction"]
        report.duplicated.append(
            {
                **_event(session, int(duplicated["position"])),
                "compaction": where,
                "compaction_id": compaction_id(where),
            }
        )
    for undecided in result.get("undecidable", []):
        where = undecided["compaction"]
        could_be = str(undecided["could_be"])
        report.undecidable.append(
            {
                **_event(session, int(undecided["position"])),
                "could_be": could_be,
                "reason": (
                    f"the maker of compaction {compaction_id(where)} is unknown and its"
                    f" {undecided['readings']} plausible readings disagree on whether it"
                    f" was handed this event ({could_be} where it was "
                    f"{'not ' if could_be == 'hidden' else ''}handed)"
                ),
                "compaction": where,
                "compaction_id": compaction_id(where),
            }
        )
    return report


def _batches(
    store: Store, max_sessions: int, max_bytes: int, timer: list[float]
) -> Iterator[tuple[list[StoredSession], int]]:
    """The store's sessions in batches, with the progress each completes;
    the time spent reading is added to `timer[0]`."""
    batch: list[StoredSession] = []
    size = units = 0
    sessions = store.sessions()
    while True:
        started = time.perf_counter()
        try:
            session, done = next(sessions)
        except StopIteration:
            timer[0] += time.perf_counter() - started
            break
        timer[0] += time.perf_counter() - started
        units += done
        if session is None:
            continue
        batch.append(session)
        size += session.size
        if len(batch) >= max_sessions or size >= max_bytes:
            yield batch, units
            batch, size, units = [], 0, 0
    if batch or units:
        yield batch, units


def infer_settings(sample: Sequence[StoredSession], order: str, parallel: bool) -> Settings:
    """The settings whose replay reproduces the most stored compactions of
    `sample` (those of its sessions holding any).

    What a sliding window hands does not depend on its interval (it takes
    every invocation since the last summary, and `overlap` before them), only
    when it fires does: the overlap is found with an interval of 1 (due
    whenever an invocation is new), then the interval is the largest that
    still reproduces as many (a smaller one would have fired earlier). Tail
    retention is then tried beside it; where two retentions reproduce as
    many (the events between them tie on the interval's end), the larger is
    kept, since a smaller one would have handed those events too.
    """
    chosen: list[StoredSession] = []
    size = 0
    for session in sample:
        if session.unreadable is None and any(_COMPACTION.search(row) for row in _bytes(session)):
            chosen.append(session)
            size += session.size
            if len(chosen) >= SAMPLE_SESSIONS or size >= SAMPLE_BYTES:
                break
    if not chosen:
        return Settings(source="inferred: no stored compaction in the sessions sampled")
    totals: list[int] = []

    def score(settings: Settings) -> int:
        results = _audit_batch(chosen, order, settings, parallel)
        compactions = [c for r in results if "declined" not in r for c in r["compactions"]]
        totals.append(len(compactions))
        return sum(bool(c["replayed"]) for c in compactions)

    best, best_score = Settings(), score(Settings())
    total = totals[0]
    overlap, found = 0, -1
    for candidate in range(MAX_OVERLAP + 1):
        if found == total:
            break
        replayed = score(Settings(1, candidate))
        if replayed > found:
            overlap, found = candidate, replayed
    if found > best_score:
        best, best_score = Settings(1, overlap), found
        for interval in range(2, MAX_INTERVAL + 1):
            if score(Settings(interval, overlap)) < best_score:
                break
            best = Settings(interval, overlap)
    retained = best_score
    retention: int | None = None
    for candidate in range(MAX_RETENTION + 1):
        if best_score == total:
            break
        settings = Settings(
            best.compaction_interval, best.overlap_size, INFERRED_THRESHOLD, candidate
        )
        found = score(settings)
        if found >= retained and found > best_score:
            retained, retention = found, candidate
        elif retained == total:
            break  # past the retentions that reproduce every compaction
    if retention is not None:
        best = Settings(best.compaction_interval, best.overlap_size, INFERRED_THRESHOLD, retention)
        best_score = retained
    source = (
        f"inferred: {best_score} of {total} stored compactions replayed in "
        f"{len(chosen)} sampled sessions"
    )
    return Settings(
        compaction_interval=best.compaction_interval,
        overlap_size=best.overlap_size,
        token_threshold=best.token_threshold,
        event_retention_size=best.event_retention_size,
        source=source,
    )


def _bytes(session: StoredSession) -> Iterable[bytes]:
    return (row if isinstance(row, bytes) else row.encode() for row in session.rows)


def run_audit(
    store: Store,
    settings: Settings | None,
    *,
    parallel: bool = True,
    progress: Progress | None = None,
    max_sessions: int = BATCH_SESSIONS,
    max_bytes: int = BATCH_BYTES,
) -> AuditReport:
    """Audits every admitted session of `store`, batch by batch.

    Args:
      store: What `open_store` opened.
      settings: The compaction settings; None to infer them from the first
        batch's stored compactions.
      parallel: Analyse each batch on rayon's pool (its size is
        `RAYON_NUM_THREADS`, read when the pool starts).
      progress: Told of each batch done.
      max_sessions: Sessions per batch.
      max_bytes: Stored JSON per batch (a larger session goes alone).
    """
    timer = [0.0]
    began = time.perf_counter()
    report = AuditReport(
        store=store.description,
        kind=store.kind,
        order=store.order,
        settings=settings or Settings(),
        threads=_threads() if parallel else 1,
    )
    # A batch is analysed on a worker thread (the native call releases the
    # interpreter) while the next one is read; at most one waits, so memory
    # stays bounded by two batches.
    pending: tuple[Future[list[dict[str, Any]]], list[StoredSession], int] | None = None

    def collect(done: tuple[Future[list[dict[str, Any]]], list[StoredSession], int]) -> None:
        future, batch, units = done
        started = time.perf_counter()
        results = future.result()
        report.analysis_wait_seconds += time.perf_counter() - started
        for session, result in zip(batch, results, strict=True):
            report.sessions.append(_session_report(session, result))
        if progress is not None:
            progress(units, len(report.sessions))

    def analyse(batch: list[StoredSession], settings: Settings) -> list[dict[str, Any]]:
        started = time.perf_counter()
        results = _audit_batch(batch, store.order, settings, parallel) if batch else []
        report.analysis_seconds += time.perf_counter() - started
        return results

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="adk-fastcompact-audit") as pool:
        for batch, units in _batches(store, max_sessions, max_bytes, timer):
            if settings is None:
                started = time.perf_counter()
                settings = infer_settings(batch, store.order, parallel)
                report.infer_seconds = time.perf_counter() - started
                report.settings = settings
            submitted = (pool.submit(analyse, batch, settings), batch, units)
            if pending is not None:
                collect(pending)
            pending = submitted
        if pending is not None:
            collect(pending)
    if settings is None:
        report.settings = Settings(source="inferred: no session to sample")
    report.read_seconds = timer[0]
    report.wall_seconds = time.perf_counter() - began
    return report


def _threads() -> int | None:
    value = os.environ.get("RAYON_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    return os.cpu_count()


# -- rendering -------------------------------------------------------------------------


def _when(stamp: float | None) -> str:
    if stamp is None or not math.isfinite(stamp):
        return "" if stamp is None else str(stamp)
    try:
        moment = datetime.fromtimestamp(stamp, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return repr(stamp)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def summary_table(report: AuditReport) -> RenderableType:
    from rich.table import Table

    summary = report.summary()
    table = Table(title="compaction audit", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("sessions scanned", f"{summary['sessions']:,}")
    table.add_row("events scanned", f"{summary['events']:,}")
    affected = summary["sessions_affected"]
    table.add_row(
        "sessions affected", f"[bold red]{affected:,}[/]" if affected else "0", end_section=True
    )
    table.add_row("events hidden", f"{summary['hidden']:,}")
    for cause, count in summary["hidden_by_cause"].items():
        table.add_row(f"  {cause.replace('_', ' ')}", f"{count:,}")
    table.add_row("events duplicated", f"{summary['duplicated']:,}")
    table.add_row("events undecidable", f"{summary['undecidable']:,}", end_section=True)
    table.add_row("compactions stored", f"{summary['compactions']:,}")
    for record, count in summary["records"].items():
        table.add_row(f"  {record} records", f"{count:,}")
    table.add_row("compactions not replayed", f"{summary['compactions_not_replayed']:,}")
    table.add_row("sessions stalled", f"{summary['sessions_stalled']:,}")
    table.add_row("sessions declined", f"{summary['sessions_declined']:,}")
    if summary["sessions_without_prompt"]:
        table.add_row("sessions without a prompt", f"{summary['sessions_without_prompt']:,}")
    return table


def events_table(report: AuditReport, limit: int) -> tuple[RenderableType | None, int]:
    """The hidden and duplicated events (the first `limit`), and how many more there are."""
    from rich.table import Table

    rows = (
        [
            (session, event, f"hidden: {event['cause'].replace('_', ' ')}")
            for session in report.affected
            for event in session.hidden
        ]
        + [
            (session, event, "duplicated")
            for session in report.affected
            for event in session.duplicated
        ]
        + [
            (session, event, f"undecidable: {event['could_be']}?")
            for session in report.sessions
            for event in session.undecidable
        ]
    )
    if not rows:
        return None, 0
    rows.sort(key=lambda row: (row[0].app_name, row[0].user_id, row[0].session_id))
    table = Table(title="events hidden or duplicated")
    for name in ("app", "user", "session", "event id", "invocation", "timestamp", "author"):
        table.add_column(name, overflow="fold")
    table.add_column("finding")
    table.add_column("compaction", overflow="fold")
    for session, event, finding in rows[:limit]:
        table.add_row(
            session.app_name,
            session.user_id,
            session.session_id,
            str(event["id"]),
            str(event["invocation_id"]),
            _when(event["timestamp"]),
            str(event["author"] or ""),
            finding,
            str(event["compaction_id"] or ""),
        )
    return table, max(0, len(rows) - limit)


def declined_lines(report: AuditReport, limit: int) -> list[str]:
    declined = report.declined
    lines = [
        f"declined {s.app_name}/{s.user_id}/{s.session_id}: {s.declined}" for s in declined[:limit]
    ]
    if len(declined) > limit:
        lines.append(f"... and {len(declined) - limit} more declined sessions (see --json)")
    return lines


def stalled_lines(report: AuditReport, limit: int) -> list[str]:
    """A line per stalled session (the first `limit`)."""
    stalled = report.stalled
    lines = []
    for s in stalled[:limit]:
        x = s.stalled or {}
        then = x.get("prompt_then")
        trend = (
            f"; prompt {then:,} items after the last summary, {s.prompt_size:,} now"
            if then is not None and s.prompt_size is not None
            else ""
        )
        lines.append(
            f"stalled {s.app_name}/{s.user_id}/{s.session_id}: {x.get('trigger')} due, "
            f"selects nothing; {x.get('backlog', 0):,} events of "
            f"{x.get('backlog_invocations', 0):,} invocations waiting{trend}"
        )
    if len(stalled) > limit:
        lines.append(f"... and {len(stalled) - limit} more stalled sessions (see --json)")
    return lines


def timing_line(report: AuditReport) -> str:
    threads = f", {report.threads} threads" if report.threads else ""
    infer = f", inference {report.infer_seconds:.2f} s" if report.infer_seconds else ""
    return (
        f"read {report.read_seconds:.2f} s, analysis {report.analysis_seconds:.2f} s"
        f"{threads} (overlapping the reading; {report.analysis_wait_seconds:.2f} s not"
        f" hidden by it){infer}, {report.wall_seconds:.2f} s in all"
    )
