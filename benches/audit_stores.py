"""The audit on a SQLite file and on PostgreSQL, side by side, and on Dask.

    python tests/support/postgres.py -- python benches/audit_stores.py
    python tests/support/postgres.py -- python benches/audit_stores.py --sessions 200

Under `tests/support/postgres.py` (which starts a throwaway PostgreSQL
server and sets `ADK_FASTCOMPACT_POSTGRES_URL`), builds the bench store
(`_bench_store`: `--sessions` sessions of `--events` google-adk-written
events, tool responses padded to about 3 KB) twice, as a
`SqliteSessionService` file and as `DatabaseSessionService`'s tables on the
server, then times, each in a process of its own (wall clock, and the
process's peak RSS as it reports it):

- the audit of the SQLite file, and of the PostgreSQL URL read natively
  (`--interval 3 --overlap 1 --json`), `--repeat` times each, interleaved;
- google-adk's own loader (`DatabaseSessionService.get_session`) on the
  first `--loader-sample` sessions of the same database (measured, not
  extrapolated: that many sessions are loaded);
- the PostgreSQL audit on a Dask `LocalCluster` of 1 and of 2 workers
  (`--dask local:N --shards 8`);
- one session of each `--long` size (thousands of compactions) audited
  alone, beside one of the store's 500 events (`--long-only`: these alone,
  no store or server needed).

Prints a table (and `--json`, the raw numbers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from adk_fastcompact._tooling import bench_store
from adk_fastcompact._tooling.bench_options import POSTGRES_ENV

SETTINGS = ["--interval", "3", "--overlap", "1"]


def timed(command: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Runs `command`; its wall seconds and stdout."""
    started = time.perf_counter()
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    out, err = child.communicate()
    wall = time.perf_counter() - started
    if child.returncode not in (0, 1):
        raise RuntimeError(f"{command}: exit {child.returncode}\n{err[-2000:]}")
    return {"wall": wall, "out": out}


def audited(store: str, extra: list[str], env: dict[str, str]) -> dict[str, Any]:
    """One audit of `store` in a process of its own: wall, peak RSS, report timings."""
    code = (
        "import resource, sys, json\n"
        "from adk_fastcompact._tooling import cli\n"
        "import io, contextlib\n"
        "buffer = io.StringIO()\n"
        "with contextlib.redirect_stdout(buffer):\n"
        "    status = cli.main(sys.argv[1:])\n"
        "report = json.loads(buffer.getvalue())\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
        "children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
        "print(json.dumps({'status': status, 'peak_mb': peak, 'children_peak_mb': children,"
        " 'timing': report['timing'], 'summary': report['summary']}))\n"
    )
    run = timed([sys.executable, "-c", code, "audit", store, *extra, "--json"], env)
    found = json.loads(run["out"])
    found["wall"] = run["wall"]
    return found


def loader_sample(url: str, count: int) -> dict[str, Any]:
    """google-adk's `get_session` on the first `count` sessions, timed."""
    from google.adk.sessions.database_session_service import DatabaseSessionService

    async def run() -> dict[str, Any]:
        service = DatabaseSessionService(url)
        try:
            keys = [f"s{k:05d}" for k in range(count)]
            events = 0
            started = time.perf_counter()
            for key in keys:
                session = await service.get_session(
                    app_name=bench_store.APP_NAME, user_id=bench_store.USER_ID, session_id=key
                )
                assert session is not None
                events += len(session.events)
            return {"sessions": count, "events": events, "seconds": time.perf_counter() - started}
        finally:
            await service.close()

    return asyncio.run(run())


def long_session(events: int) -> dict[str, Any]:
    """One google-adk-written session of `events` events audited alone."""
    from adk_fastcompact import _native
    from adk_fastcompact._tooling.sessions import build_due_session

    built = build_due_session(events, 0)
    rows = [e.model_dump_json(exclude_none=True) for e in built]
    compactions = sum(1 for e in built if e.actions and e.actions.compaction)
    started = time.perf_counter()
    [result] = _native.audit_stored(
        [rows],
        "timestamp",
        parallel=False,
        compaction_interval=3,
        overlap_size=1,
        token_threshold=None,
        event_retention_size=None,
    )
    seconds = time.perf_counter() - started
    replayed = sum(bool(c["replayed"]) for c in result["compactions"])
    return {
        "events": events,
        "compactions": compactions,
        "replayed": replayed,
        "seconds": seconds,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--loader-sample", type=int, default=100)
    parser.add_argument(
        "--long", type=int, action="append", default=[], help="a long session's events (repeatable)"
    )
    parser.add_argument(
        "--long-only", action="store_true", help="measure the --long sessions alone (no store)"
    )
    parser.add_argument("--workdir", type=Path, help="the SQLite store's folder (default: a temp)")
    parser.add_argument(
        "--postgres-built",
        action="store_true",
        help="the database holds the store already (built by an earlier run with these sizes)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.long_only:
        report_long([long_session(n) for n in [args.events, *args.long]])
        return 0
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        print(f"run under tests/support/postgres.py ({POSTGRES_ENV} is not set)", file=sys.stderr)
        return 2
    work = args.workdir or Path(tempfile.mkdtemp(prefix="adk-fastcompact-audit-bench-"))
    sqlite_path = work / f"store-{args.sessions}x{args.events}.db"
    results: dict[str, Any] = {"sessions": args.sessions, "events": args.events}
    started = time.perf_counter()
    if not sqlite_path.exists():
        bench_store.build_store(sqlite_path, n_sessions=args.sessions, n_events=args.events)
    results["sqlite_build_s"] = time.perf_counter() - started
    results["sqlite_bytes"] = sqlite_path.stat().st_size
    started = time.perf_counter()
    if args.postgres_built:
        results["postgres_events_bytes"] = None
    else:
        results["postgres_events_bytes"] = bench_store.build_postgres_store(
            url, n_sessions=args.sessions, n_events=args.events
        )
    results["postgres_build_s"] = time.perf_counter() - started
    env = {**os.environ, "STORE_URL": url}
    runs: dict[str, list[dict[str, Any]]] = {"sqlite": [], "postgresql": []}
    for _ in range(args.repeat):
        runs["sqlite"].append(audited(str(sqlite_path), SETTINGS, env))
        runs["postgresql"].append(audited("env:STORE_URL", SETTINGS, env))
    results["runs"] = runs
    results["loader"] = loader_sample(url, min(args.loader_sample, args.sessions))
    results["dask"] = {
        workers: audited(
            "env:STORE_URL", [*SETTINGS, "--dask", f"local:{workers}", "--shards", "8"], env
        )
        for workers in (1, 2)
    }
    if args.long:
        results["long"] = [long_session(n) for n in [args.events, *args.long]]
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        report(results)
    return 0


def report(results: dict[str, Any]) -> None:
    events = results["sessions"] * results["events"]
    table = results["postgres_events_bytes"]
    table_size = "built earlier" if table is None else f"{table / 1e9:.2f} GB"
    print(
        f"store: {results['sessions']:,} sessions x {results['events']} events "
        f"(SQLite {results['sqlite_bytes'] / 1e9:.2f} GB; PostgreSQL events table {table_size})"
    )
    print("| path | wall s (median, min-max) | read s | analysis s | peak RSS MB | events/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, runs in results["runs"].items():
        walls = [r["wall"] for r in runs]
        median = statistics.median(walls)
        reads = statistics.median(r["timing"]["read_seconds"] for r in runs)
        analysis = statistics.median(r["timing"]["analysis_seconds"] for r in runs)
        peak = max(r["peak_mb"] for r in runs)
        print(
            f"| {name} | {median:.1f} ({min(walls):.1f}-{max(walls):.1f}) | {reads:.1f} | "
            f"{analysis:.1f} | {peak:.0f} | {events / median:,.0f} |"
        )
    loader = results["loader"]
    rate = loader["events"] / loader["seconds"]
    print(
        f"| google-adk get_session, {loader['sessions']} sessions ({loader['events']:,} events) "
        f"| {loader['seconds']:.1f} | | | | {rate:,.0f} |"
    )
    for workers, run in results["dask"].items():
        print(
            f"| Dask local:{workers}, 8 shards | {run['wall']:.1f} | | | "
            f"{run['peak_mb']:.0f} (client) | {events / run['wall']:,.0f} |"
        )
    report_long(results.get("long", []))


def report_long(sessions: list[dict[str, Any]]) -> None:
    """One line per long session: its size, compactions and analysis time."""
    for long in sessions:
        per_event = long["seconds"] / long["events"] * 1e6
        print(
            f"long session: {long['events']:,} events, {long['compactions']:,} compactions "
            f"({long['replayed']:,} replayed): {long['seconds']:.3f} s ({per_event:.1f} us/event)"
        )


if __name__ == "__main__":
    sys.exit(main())
