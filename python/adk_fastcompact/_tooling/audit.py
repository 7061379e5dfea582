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

import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .. import _native
from .audit_open import open_store, opened
from .audit_report import (
    CAUSES,
    AuditReport,
    SessionReport,
    Settings,
    declined_lines,
    events_table,
    stalled_lines,
    summary_table,
    timing_line,
)
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
    "audit_store",
    "declined_lines",
    "events_table",
    "export_sessions",
    "given_settings",
    "infer_settings",
    "infer_whole",
    "load_service",
    "open_store",
    "opened",
    "run_audit",
    "stalled_lines",
    "summary_table",
    "timing_line",
]


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
        ambiguity = str(undecided.get("reason", "maker"))
        report.undecidable.append(
            {
                **_event(session, int(undecided["position"])),
                "could_be": could_be,
                "ambiguity": ambiguity,
                "reason": _undecided_reason(
                    ambiguity, compaction_id(where), int(undecided["readings"]), could_be
                ),
                "compaction": where,
                "compaction_id": compaction_id(where),
            }
        )
    return report


def _undecided_reason(ambiguity: str, compaction: Any, readings: int, could_be: str) -> str:
    """Why an event is undecidable, in words (`ambiguity`: the core's reason)."""
    which = {
        "maker": (
            f"the maker of compaction {compaction} is unknown: {readings} invocations' "
            "copies of the session reproduce it"
        ),
        "resumed": (
            f"the maker of compaction {compaction} ran again without a user-authored "
            f"event (a resumed invocation), so where it fetched its copy of the session "
            f"is unknown: {readings} of its runs' copies reproduce it"
        ),
        "prefix": (
            f"no maker's copy reproduces compaction {compaction}; {readings} prefixes "
            "of the store do"
        ),
        "seed": f"compaction {compaction} rolls up an earlier summary whose readings",
    }.get(ambiguity, f"compaction {compaction} has {readings} readings")
    verb = "disagree" if ambiguity == "seed" else "and they disagree"
    handed = "not handed" if could_be == "hidden" else "handed"
    return f"{which} {verb} on whether it was handed this event ({could_be} where it was {handed})"


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
        # An exact-mode record says what its compaction stands for: it is
        # read, not replayed, under any settings.
        compactions = [
            c
            for r in results
            if "declined" not in r
            for c in r["compactions"]
            if c["record"] != "exact"
        ]
        totals.append(len(compactions))
        return sum(bool(c["replayed"]) for c in compactions)

    best, best_score = Settings(), score(Settings())
    total = totals[0]
    if not total:
        return Settings(
            source=(
                "inferred: none needed, the stored compactions sampled all carry "
                "exact-mode records, which say what they stand for"
            )
        )
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
        shard=store.filters.shard,
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


def infer_whole(
    spec: str,
    filters: Filters,
    *,
    parallel: bool = True,
    max_sessions: int = BATCH_SESSIONS,
    max_bytes: int = BATCH_BYTES,
) -> Settings:
    """The settings an audit of the whole store would infer (from its first
    batch, whatever shard `filters` names): what every shard of one audit
    is replayed with, so that their reports merge into the whole store's.

    Raises:
      StoreError: The store cannot be read.
    """
    with opened(spec, filters.whole()) as store:
        for batch, _ in _batches(store, max_sessions, max_bytes, [0.0]):
            return infer_settings(batch, store.order, parallel)
    return Settings(source="inferred: no session to sample")


def audit_store(
    spec: str,
    filters: Filters,
    settings: Settings | None,
    *,
    parallel: bool = True,
    progress: Callable[[Store], Progress | None] | None = None,
    max_sessions: int = BATCH_SESSIONS,
    max_bytes: int = BATCH_BYTES,
) -> AuditReport:
    """Opens the store `spec` names and audits it (`run_audit`); a shard
    without settings is replayed with those of the whole store (`infer_whole`).

    Args:
      progress: Given the opened store, returns what `run_audit` tells of
        each batch done.

    Raises:
      StoreError: The store cannot be read.
    """
    infer_seconds = 0.0
    if settings is None and filters.shard is not None:
        started = time.perf_counter()
        settings = infer_whole(
            spec, filters, parallel=parallel, max_sessions=max_sessions, max_bytes=max_bytes
        )
        infer_seconds = time.perf_counter() - started
    with opened(spec, filters) as store:
        report = run_audit(
            store,
            settings,
            parallel=parallel,
            progress=None if progress is None else progress(store),
            max_sessions=max_sessions,
            max_bytes=max_bytes,
        )
    report.infer_seconds += infer_seconds
    return report


def _threads() -> int | None:
    value = os.environ.get("RAYON_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    return os.cpu_count()
