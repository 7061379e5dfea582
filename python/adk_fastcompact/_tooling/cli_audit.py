"""`adk-fastcompact audit`: the command line of the store audit (see
docs/audit.md), and `audit merge`, which merges the reports of a store's
shards."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cli_args import count, error_line, positive_int

if TYPE_CHECKING:
    from rich.console import Console

    from .audit_stores import Shard


def audit_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = commands.add_parser(
        "audit",
        help="find events compaction hid or duplicated in a session store",
        description=(
            "Find the events google-adk's compaction has hidden from every prompt "
            "(inside a stored compaction's interval but never handed to its summary) "
            "or put in a prompt twice (raw and inside a summary), session by session, "
            "by replaying window selection with the parity engine at every stored "
            "compaction. The store is only read. Exit status: 0 when nothing is "
            "hidden or duplicated, 1 when something is, 2 on a usage error or when "
            "the store, or a session in it, cannot be read (see --allow-unreadable). "
            f"`{MERGE_USAGE}` merges the --json reports of a store's shards."
        ),
    )
    audit.add_argument(
        "store",
        metavar="STORE",
        nargs="?",
        help=(
            "a SqliteSessionService file, a DatabaseSessionService URL (sqlite://, "
            "postgresql+asyncpg://; another database through google-adk's loader) or "
            "SQLite file, a JSON-lines export (one Session.model_dump_json() per line), "
            "or env:NAME, the URL in the environment variable NAME; omitted with --service"
        ),
    )
    export = audit.add_argument_group(
        "export",
        "audit a store the audit cannot open itself (Vertex AI, a custom "
        "service) through its own session service: its sessions are written to a "
        "JSON-lines file, which is then audited",
    )
    export.add_argument(
        "--service",
        metavar="PKG.MODULE:ATTR",
        help="a BaseSessionService instance, or a callable returning one (needs --app)",
    )
    export.add_argument(
        "--export", type=Path, metavar="OUT.jsonl", help="where to write the export"
    )
    found = audit.add_argument_group("sessions")
    found.add_argument("--app", metavar="NAME", help="only this app's sessions")
    found.add_argument("--user", metavar="ID", help="only this user's sessions")
    found.add_argument("--session", metavar="ID", help="only this session")
    config = audit.add_argument_group(
        "compaction settings",
        "given here, read from the app (--app-module), or, when neither, inferred "
        "from the stored compactions; the report says which",
    )
    config.add_argument(
        "--interval", type=positive_int, metavar="N", help="compaction_interval (with --overlap)"
    )
    config.add_argument("--overlap", type=count, metavar="N", help="overlap_size")
    config.add_argument(
        "--token-threshold",
        type=positive_int,
        metavar="N",
        help="token_threshold (with --retention)",
    )
    config.add_argument("--retention", type=count, metavar="N", help="event_retention_size")
    config.add_argument(
        "--app-module",
        metavar="PKG.MODULE:ATTR",
        help="import the App (or EventsCompactionConfig) and use its events_compaction_config",
    )
    shards = audit.add_argument_group(
        "shards and Dask",
        "cut the store into N disjoint parts by a stable hash of (app, user, session); "
        "without settings, every part replays those inferred from the whole store's "
        "first batch, so the parts' reports merge into the whole store's",
    )
    shards.add_argument(
        "--shard",
        type=_shard,
        metavar="I/N",
        help="audit only the I-th (from 1) of N parts",
    )
    shards.add_argument(
        "--dask",
        metavar="SCHEDULER",
        help=(
            "audit the parts as tasks on a Dask cluster (a scheduler address, or "
            "local:N for N worker processes here) and print the merged report "
            "(needs the dask extra)"
        ),
    )
    shards.add_argument(
        "--shards",
        type=positive_int,
        metavar="N",
        help="parts with --dask (default: twice the workers)",
    )
    shards.add_argument(
        "--shard-reports",
        type=Path,
        metavar="DIR",
        help="with --dask, also write each part's report to DIR/shard-I-of-N.json",
    )
    audit.add_argument(
        "--allow-unreadable",
        action="store_true",
        help=(
            "report the sessions that cannot be read (declined) without failing on "
            "them: the exit status is then 0 or 1 (default: 2 when any session is declined)"
        ),
    )
    run = audit.add_argument_group("output and resources")
    run.add_argument(
        "--json",
        action="store_true",
        help="print the report (summary, per session and per event) as JSON on stdout",
    )
    run.add_argument(
        "--limit",
        type=count,
        default=50,
        metavar="N",
        help="events listed in the text report (default: 50; --json lists all)",
    )
    run.add_argument(
        "--jobs",
        type=positive_int,
        default=None,
        metavar="N",
        help="analysis threads (default: all cores; sets RAYON_NUM_THREADS)",
    )
    run.add_argument(
        "--batch",
        type=positive_int,
        default=None,
        metavar="N",
        help="sessions analysed at once (default: 256, and at most 64 MiB of stored JSON)",
    )


MERGE_USAGE = "adk-fastcompact audit merge REPORT.json..."


def _shard(text: str) -> Shard:
    from .audit_stores import Shard

    try:
        return Shard.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def audit_merge_main(argv: list[str], prog: str) -> int:
    """`audit merge REPORT...`: the report one process would have written,
    from the --json reports of every shard of a store, printed as JSON."""
    from rich.console import Console

    from .audit_report import AuditReport, ReportError, merge_reports

    parser = argparse.ArgumentParser(
        prog=f"{prog} audit merge",
        description=(
            "Merge the --json reports of every shard of one audit (--shard I/N, each I "
            "of one N once) into the report one process would have written: the same "
            "sessions (sorted by app, user and session) and summary, read and analysis "
            "times summed, the wall time the longest shard's. Exit status as the audit's."
        ),
    )
    parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT.json")
    parser.add_argument(
        "--allow-unreadable",
        action="store_true",
        help="declined sessions do not make the exit status 2 (as the audit's option)",
    )
    args = parser.parse_args(argv)
    stderr = Console(stderr=True)
    loaded = []
    try:
        for path in args.reports:
            try:
                data = json.loads(path.read_text())
            except OSError as error:
                raise ReportError(f"{path}: {error.strerror}") from error
            except ValueError as error:
                raise ReportError(f"{path}: not JSON ({error})") from error
            try:
                loaded.append(AuditReport.from_json(data))
            except ReportError as error:
                raise ReportError(f"{path}: {error}") from error
        merged = merge_reports(loaded)
    except ReportError as error:
        error_line(stderr, str(error))
        return 2
    sys.stdout.write(json.dumps(merged.to_json()))
    sys.stdout.write("\n")
    _said(merged, stderr, args.allow_unreadable)
    return merged.exit_status(args.allow_unreadable)


def _said(report: Any, stderr: Console, allow_unreadable: bool, warnings: bool = True) -> None:
    """The report's warnings (unless the text report showed them), and its
    unreadable sessions, on stderr."""
    for line in report.warnings() if warnings else []:
        stderr.print(f"warning: {line}", style="yellow", highlight=False, markup=False)
    declined = len(report.declined)
    if declined:
        then = (
            "reported, not failed on (--allow-unreadable)"
            if allow_unreadable
            else "exit status 2; --allow-unreadable reports them without failing"
        )
        stderr.print(
            f"{declined:,} session{'s' if declined != 1 else ''} could not be read ({then})",
            style="yellow",
            highlight=False,
            markup=False,
        )


def _on_dask(args: argparse.Namespace, filters: Any, settings: Any, stderr: Console) -> Any:
    """The --dask run's merged report; None (said on stderr) when a shard failed."""
    from .audit import BATCH_SESSIONS
    from .audit_dask import run_on_dask

    run = run_on_dask(
        args.store,
        filters,
        settings,
        scheduler=args.dask,
        shards=args.shards,
        max_sessions=args.batch or BATCH_SESSIONS,
        reports=args.shard_reports,
    )
    stderr.print(
        f"{run.shards} shards on {run.workers} Dask workers ({args.dask})", highlight=False
    )
    if not run.failed:
        return run.merged
    for shard, reason in run.failed:
        error_line(stderr, f"shard {shard} failed: {reason}")
    settings_args = ""
    if settings is None and run.settings is not None and run.settings.flags():
        settings_args = " " + run.settings.flags()
    for shard, _ in run.failed:
        stderr.print(
            f"rerun it alone: adk-fastcompact audit STORE --shard {shard}{settings_args} "
            f"--json > shard-{shard.index}-of-{shard.count}.json",
            highlight=False,
            markup=False,
        )
    if args.shard_reports is not None:
        stderr.print(
            f"then merge: {MERGE_USAGE.replace('REPORT.json...', str(args.shard_reports))}"
            "/shard-*.json",
            highlight=False,
            markup=False,
        )
    return None


def _export(args: argparse.Namespace, stderr: Console) -> str | None:
    """Writes `--service`'s sessions to `--export`; the problem, if any."""
    import asyncio

    from . import audit

    if args.service is None or args.export is None:
        return "--service and --export go together"
    if args.store is not None:
        return "give a STORE or --service, not both"
    if args.app is None:
        return "--service needs --app (session services list one app's sessions)"
    if args.session is not None and args.user is None:
        return "--session needs --user with --service"
    try:
        service = audit.load_service(args.service)
    except audit.SettingsError as error:
        return str(error)
    try:
        with args.export.open("w") as out:
            written = asyncio.run(
                audit.export_sessions(
                    service, out, app_name=args.app, user_id=args.user, session_id=args.session
                )
            )
    except OSError as error:
        return f"{args.export}: {error.strerror}"
    if not written:
        return f"{args.service} gave no session of app {args.app!r} to export"
    stderr.print(f"exported {written:,} sessions to {args.export}", highlight=False)
    return None


def run_audit_command(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    from .. import _analysis
    from . import audit

    stderr = Console(stderr=True)
    if args.jobs is not None:
        # rayon reads it when its pool starts, on the first parallel call.
        os.environ["RAYON_NUM_THREADS"] = str(args.jobs)
    try:
        settings = audit.given_settings(
            args.interval, args.overlap, args.token_threshold, args.retention
        )
        if args.app_module is not None:
            if settings is not None:
                raise audit.SettingsError("give the settings or --app-module, not both")
            settings = audit.app_settings(args.app_module)
    except audit.SettingsError as error:
        error_line(stderr, str(error))
        return 2
    filters = audit.Filters(app=args.app, user=args.user, session=args.session, shard=args.shard)
    if args.dask is None and (args.shards is not None or args.shard_reports is not None):
        error_line(stderr, "--shards and --shard-reports go with --dask")
        return 2
    if args.dask is not None and args.shard is not None:
        error_line(stderr, "give --shard or --dask, not both (--dask runs every shard)")
        return 2
    if args.service is not None or args.export is not None:
        problem = _export(args, stderr)
        if problem is not None:
            error_line(stderr, problem)
            return 2
        args.store = str(args.export)
    elif args.store is None:
        error_line(stderr, "give a STORE (or --service and --export)")
        return 2
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
    )
    # A bar only on a terminal: elsewhere rich draws nothing, yet its
    # refresh thread would run.
    bar = Progress(*columns, console=stderr, transient=True, disable=not stderr.is_terminal)

    def progress(store: audit.Store) -> audit.Progress:
        task = bar.add_task("reading", total=store.total())

        def advance(done: int, sessions: int) -> None:
            bar.update(task, advance=done, description=f"{sessions:,} sessions")

        return advance

    try:
        if args.dask is not None:
            report = _on_dask(args, filters, settings, stderr)
            if report is None:
                return 2
        else:
            with bar:
                report = audit.audit_store(
                    args.store,
                    filters,
                    settings,
                    parallel=_analysis._parallel_default(),
                    progress=progress,
                    max_sessions=args.batch or audit.BATCH_SESSIONS,
                )
    except audit.StoreError as error:
        error_line(stderr, str(error))
        return 2
    status = report.exit_status(args.allow_unreadable)
    if args.json:
        # json.dumps runs the C encoder; json.dump would stream in Python.
        sys.stdout.write(json.dumps(report.to_json()))
        sys.stdout.write("\n")
        _said(report, stderr, args.allow_unreadable)
        return status
    stdout = Console()
    if not stdout.is_terminal:
        stdout = Console(width=max(stdout.width, 160))
    stdout.print(report.store, highlight=False, markup=False)
    stdout.print(
        f"settings: {report.settings.describe()} ({report.settings.source})",
        highlight=False,
        markup=False,
    )
    for line in report.warnings():
        stdout.print(f"warning: {line}", style="yellow", highlight=False, markup=False)
    stdout.print(audit.summary_table(report))
    table, more = audit.events_table(report, args.limit)
    if table is not None:
        stdout.print(table)
    if more:
        stdout.print(f"... and {more:,} more events (see --json)")
    for line in audit.stalled_lines(report, 10):
        stdout.print(line, style="yellow", highlight=False, markup=False)
    for line in audit.declined_lines(report, 10):
        stdout.print(line, style="yellow", highlight=False, markup=False)
    stdout.print(audit.timing_line(report), style="dim")
    _said(report, stderr, args.allow_unreadable, warnings=False)
    return status
