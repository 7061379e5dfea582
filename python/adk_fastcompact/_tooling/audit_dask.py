"""The audit spread over a Dask cluster (`dask.distributed`, the `dask`
extra): the store cut into shards (`--shard I/N`), one task per shard, each
worker reading its shard from the store itself, the reports merged
(`merge_reports`). Scheduling, placement and retries are Dask's; a shard
that fails is named, with the command that reruns it alone.

`scheduler` is a Dask scheduler's address (`tcp://host:8786`), or
`local:N` for a `LocalCluster` of N worker processes on this machine.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .audit_report import AuditReport, Settings, merge_reports
from .audit_stores import Filters, Shard, StoreError

LOCAL = "local:"
MISSING_DASK = "--dask needs Dask's distributed: pip install 'adk-fastcompact[dask]'"


@dataclass
class DaskAudit:
    """What a Dask run found: the merged report when every shard was
    audited, else the shards that failed and why."""

    shards: int
    workers: int
    reports: list[AuditReport] = field(default_factory=list)
    failed: list[tuple[Shard, str]] = field(default_factory=list)
    settings: Settings | None = None

    @property
    def merged(self) -> AuditReport | None:
        return merge_reports(self.reports) if not self.failed else None


def _audit_shard(
    spec: str, filters: Filters, settings: Settings, max_sessions: int, threads: int | None
) -> dict[str, Any]:
    """One shard's audit, on a worker: its report's JSON."""
    from .audit import audit_store

    if threads is not None:
        # rayon reads it when its pool starts, on the first parallel call
        # (a worker process's first task).
        os.environ.setdefault("RAYON_NUM_THREADS", str(threads))
    report = audit_store(
        spec,
        filters,
        settings,
        parallel=threads is None or threads > 1,
        max_sessions=max_sessions,
    )
    return report.to_json()


def _infer(spec: str, filters: Filters, max_sessions: int) -> Settings:
    from .audit import infer_whole

    return infer_whole(spec, filters, max_sessions=max_sessions)


@contextlib.contextmanager
def _client(scheduler: str) -> Iterator[tuple[Any, int | None]]:
    """A client of the scheduler (a `LocalCluster`'s for `local:N`), and
    each worker's analysis threads when this machine's cores are shared."""
    try:
        from distributed import Client, LocalCluster
    except ImportError as error:
        raise StoreError(MISSING_DASK) from error
    if scheduler.startswith(LOCAL):
        text = scheduler[len(LOCAL) :]
        if not text.isdigit() or int(text) < 1:
            raise StoreError(f"--dask {scheduler}: expected local:N, N workers (N >= 1)")
        workers = int(text)
        threads = max(1, (os.cpu_count() or 1) // workers)
        with (
            LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client, threads
        return
    try:
        client = Client(scheduler)
    except (OSError, ValueError) as error:
        raise StoreError(f"--dask {scheduler}: cannot reach the scheduler ({error})") from error
    with client:
        yield client, None


def run_on_dask(
    spec: str,
    filters: Filters,
    settings: Settings | None,
    *,
    scheduler: str,
    shards: int | None = None,
    max_sessions: int,
    reports: Path | None = None,
) -> DaskAudit:
    """Audits the store `spec` names on the Dask cluster `scheduler`, in
    `shards` parts (default: twice the workers).

    Settings not given are inferred once, by a task reading the whole
    store's first batch (`infer_whole`), and every shard is replayed with
    them. Each shard's report is written to `reports/shard-I-of-N.json`
    when `reports` is given, so that a failed shard, rerun alone
    (`--shard I/N`), merges with the others (`audit merge`).

    Raises:
      StoreError: Dask is missing, or the scheduler cannot be reached.
    """
    with _client(scheduler) as (client, threads):
        from distributed import as_completed

        workers = len(client.scheduler_info().get("workers", {})) or 1
        count = shards or 2 * workers
        if settings is None:
            settings = client.submit(_infer, spec, filters, max_sessions, pure=False).result()
        run = DaskAudit(shards=count, workers=workers, settings=settings)
        futures = {}
        for index in range(1, count + 1):
            shard = Shard(index, count)
            future = client.submit(
                _audit_shard,
                spec,
                replace(filters, shard=shard),
                settings,
                max_sessions,
                threads,
                key=f"adk-fastcompact-audit-shard-{index}-of-{count}",
                pure=False,
            )
            futures[future] = shard
        for future in as_completed(futures):
            shard = futures[future]
            if future.status != "finished":
                error = future.exception()
                run.failed.append((shard, f"{type(error).__name__}: {error}"))
                continue
            data = future.result()
            if reports is not None:
                import json

                reports.mkdir(parents=True, exist_ok=True)
                path = reports / f"shard-{shard.index}-of-{shard.count}.json"
                path.write_text(json.dumps(data) + "\n")
            run.reports.append(AuditReport.from_json(data))
    run.failed.sort()
    return run
