"""The audit's report: the compaction settings replayed, what was found in
each session, merging the reports of a store's shards, and the text
rendering of the command line.

A report's JSON (`AuditReport.to_json`) is what `audit --json` prints and
what `audit merge` reads back (`AuditReport.from_json`); see docs/audit.md.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .audit_stores import SettingsError, Shard

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
        return "; ".join(parts) or "none"

    def flags(self) -> str:
        """These settings as the audit's command-line options ("" for none)."""
        flags = []
        if self.compaction_interval is not None:
            flags.append(f"--interval {self.compaction_interval} --overlap {self.overlap_size}")
        if self.event_retention_size is not None:
            flags.append(
                f"--token-threshold {self.token_threshold} --retention {self.event_retention_size}"
            )
        return " ".join(flags)

    def named(self) -> str:
        """These settings as a warning names them: the options given, or
        where they come from."""
        if self.source == "given":
            return self.flags()
        if self.source.startswith("app module"):
            return f"the settings of {self.source} ({self.describe()})"
        if self.source.startswith("inferred"):
            return f"the inferred settings ({self.describe()})"
        return f"the settings ({self.describe()})"

    def to_json(self) -> dict[str, Any]:
        return {**self.native_kwargs(), "source": self.source}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Settings:
        return cls(
            compaction_interval=data["compaction_interval"],
            overlap_size=data["overlap_size"],
            token_threshold=data["token_threshold"],
            event_retention_size=data["event_retention_size"],
            source=data["source"],
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

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionReport:
        """The session `to_json` wrote."""
        return cls(
            app_name=data["app_name"],
            user_id=data["user_id"],
            session_id=data["session_id"],
            events=data["events"],
            declined=data.get("declined"),
            prompt_size=data.get("prompt_size"),
            compactions=data.get("compactions", []),
            hidden=data.get("hidden", []),
            duplicated=data.get("duplicated", []),
            undecidable=data.get("undecidable", []),
            stalled=data.get("stalled"),
            prompt_error=data.get("prompt_error"),
        )

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.app_name, self.user_id, self.session_id)


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
    #: Start to end of the scan (of the longest shard, in a merged report).
    wall_seconds: float = 0.0
    threads: int | None = None
    #: The part of the store audited (`--shard`); None for the whole store.
    shard: Shard | None = None

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

    def replayable(self) -> tuple[int, int]:
        """`(reproduced, stored)` of the compactions the settings must
        reproduce: those without an exact-mode record (a record says what
        its compaction stands for; it needs no replay)."""
        found = [c for s in self.sessions for c in s.compactions if c["record"] != "exact"]
        return sum(bool(c["replayed"]) for c in found), len(found)

    def warnings(self) -> list[str]:
        """What the reader of the report should know before its findings:
        settings that reproduce fewer than half of the stored compactions
        (the events those hide are reported with cause `unknown`)."""
        out = []
        reproduced, stored = self.replayable()
        if stored and 2 * reproduced < stored:
            out.append(
                f"{reproduced:,} of {stored:,} stored compactions reproduced by "
                f"{self.settings.named()}; the store may have been written with other "
                "settings (the events the others hide are reported with cause unknown)"
            )
        return out

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

    def exit_status(self, allow_unreadable: bool = False) -> int:
        """2 when a session could not be read (declined) unless
        `allow_unreadable`, else 1 when something is hidden or duplicated,
        else 0 (see docs/audit.md, "Exit status")."""
        if self.declined and not allow_unreadable:
            return 2
        return 1 if self.affected else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "kind": self.kind,
            "order": self.order,
            "shard": None if self.shard is None else str(self.shard),
            "settings": self.settings.to_json(),
            "summary": self.summary(),
            "warnings": self.warnings(),
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

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AuditReport:
        """The report `to_json` wrote (its summary is recomputed from its sessions).

        Raises:
          ReportError: It is not an audit report.
        """
        try:
            timing = data["timing"]
            shard = data.get("shard")
            return cls(
                store=data["store"],
                kind=data["kind"],
                order=data["order"],
                settings=Settings.from_json(data["settings"]),
                sessions=[SessionReport.from_json(s) for s in data["sessions"]],
                read_seconds=timing["read_seconds"],
                infer_seconds=timing["infer_seconds"],
                analysis_seconds=timing["analysis_seconds"],
                analysis_wait_seconds=timing["analysis_wait_seconds"],
                wall_seconds=timing["wall_seconds"],
                threads=timing["threads"],
                shard=None if shard is None else Shard.parse(shard),
            )
        except (KeyError, TypeError, ValueError, SettingsError) as error:
            raise ReportError(f"not an audit report ({type(error).__name__}: {error})") from error


class ReportError(ValueError):
    """A report `audit merge` cannot use: not a report, or not one of a set of shards."""


# -- merging shards ---------------------------------------------------------------------


def merge_reports(reports: Sequence[AuditReport]) -> AuditReport:
    """The report one process would have written for the whole store, from
    the reports of its shards (`--shard I/N`, every I of one N, once each):
    the same sessions (sorted by app, user and session), the summary
    recomputed from them; the read and analysis times summed, the wall time
    the longest shard's.

    Raises:
      ReportError: The reports are not every shard of one audit: a shard
        missing or given twice, or another store, order or settings.
    """
    if not reports:
        raise ReportError("no report to merge")
    first = reports[0]
    for report in reports[1:]:
        for what, mine, theirs in (
            ("store", first.store, report.store),
            ("kind", first.kind, report.kind),
            ("order", first.order, report.order),
            ("settings", first.settings, report.settings),
        ):
            if mine != theirs:
                raise ReportError(f"the reports differ in {what}: {mine!r} and {theirs!r}")
    shards = [r.shard for r in reports]
    if any(s is None for s in shards):
        if len(reports) > 1:
            raise ReportError("a report of the whole store merges with nothing")
    else:
        counts = {s.count for s in shards if s is not None}
        if len(counts) != 1:
            raise ReportError(f"the reports are shards of {sorted(counts)} parts, not of one N")
        (count,) = counts
        seen = sorted(s.index for s in shards if s is not None)
        missing = sorted(set(range(1, count + 1)) - set(seen))
        twice = sorted({i for i in seen if seen.count(i) > 1})
        if missing or twice:
            problems = []
            if missing:
                problems.append(f"missing {', '.join(f'{i}/{count}' for i in missing)}")
            if twice:
                problems.append(f"given twice {', '.join(f'{i}/{count}' for i in twice)}")
            raise ReportError(f"not every shard once: {'; '.join(problems)}")
    sessions = sorted((s for r in reports for s in r.sessions), key=lambda s: s.key)
    keys = [s.key for s in sessions]
    if len(set(keys)) != len(keys):
        raise ReportError("a session is in two shards: were they cut with the same N?")
    return AuditReport(
        store=first.store,
        kind=first.kind,
        order=first.order,
        settings=first.settings,
        sessions=sessions,
        read_seconds=sum(r.read_seconds for r in reports),
        infer_seconds=sum(r.infer_seconds for r in reports),
        analysis_seconds=sum(r.analysis_seconds for r in reports),
        analysis_wait_seconds=sum(r.analysis_wait_seconds for r in reports),
        wall_seconds=max(r.wall_seconds for r in reports),
        threads=first.threads,
    )


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
            (session, event, _undecided(event))
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


#: The table's word for why an undecidable event's summary has several readings.
_AMBIGUITY = {
    "maker": "maker unknown",
    "resumed": "fetch point unknown",
    "prefix": "no maker's copy",
    "seed": "a rolled-up summary's readings",
}


def _undecided(event: dict[str, Any]) -> str:
    why = _AMBIGUITY.get(str(event.get("ambiguity")))
    return f"undecidable: {event['could_be']}?" + (f" ({why})" if why else "")


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
