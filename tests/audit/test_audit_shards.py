"""The audit cut into shards: `--shard I/N` covers every session of a store
exactly once, `audit merge` turns the shards' `--json` reports into the
report one process writes for the whole store (byte for byte once the
sessions are sorted and the timings dropped), with the settings given or
inferred from the whole store, and `--dask local:2` runs the shards on a
Dask `LocalCluster` to the same report. On PostgreSQL:
tests/audit/test_audit_postgres.py.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from adk_fastcompact._tooling import audit as _audit
from adk_fastcompact._tooling import bench_store as _bench_store
from adk_fastcompact._tooling.audit_report import AuditReport, ReportError, merge_reports
from adk_fastcompact._tooling.audit_stores import Shard, shard_of
from hypothesis import given, settings
from hypothesis import strategies as st

from support.audit_cli import comparable, merged, report_of, run_cli

SETTINGS = ["--interval", "3", "--overlap", "1"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SqliteSessionService store of 24 sessions (6 conversations), each
    with stored compactions."""
    path = tmp_path_factory.mktemp("shards") / "store.db"
    _bench_store.build_store(path, n_sessions=24, n_events=120, payload_bytes=200, templates=6)
    return path


# -- the cut ---------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(
        st.tuples(st.text(max_size=6), st.text(max_size=6), st.text(max_size=8)),
        max_size=40,
        unique=True,
    ),
    count=st.integers(min_value=1, max_value=9),
)
def test_every_session_falls_in_exactly_one_shard(
    keys: list[tuple[str, str, str]], count: int
) -> None:
    for key in keys:
        holders = [i for i in range(1, count + 1) if Shard(i, count).holds(*key)]
        assert holders == [shard_of(*key, count)]


def test_the_cut_is_the_same_everywhere() -> None:
    # BLAKE2b of the keys, not Python's salted hash(): pinned, so a change
    # that would send a session to another shard on another machine fails.
    assert [shard_of("app", "user", f"s{k}", 4) for k in range(8)] == [1, 2, 4, 4, 2, 3, 4, 1]
    rng = random.Random(7)
    keys = [("a", "u", str(rng.random())) for _ in range(4000)]
    sizes = [sum(shard_of(*k, 4) == i for k in keys) for i in range(1, 5)]
    assert all(900 < size < 1100 for size in sizes), sizes


@pytest.mark.parametrize("text", ["0/4", "5/4", "1", "a/b", "1/0", "-1/3"])
def test_a_bad_shard_is_a_usage_error(text: str) -> None:
    with pytest.raises(SystemExit) as exited:
        run_cli(["audit", "store.db", "--shard", text])
    assert exited.value.code == 2


# -- shards merged ---------------------------------------------------------------------


@pytest.mark.parametrize("given_settings", [True, False], ids=["given", "inferred"])
def test_the_shards_merge_into_the_whole_store_report(
    tmp_path: Path, store: Path, given_settings: bool
) -> None:
    extra = SETTINGS if given_settings else []
    whole = report_of([str(store), *extra])
    assert whole["summary"]["sessions"] == 24
    assert whole["summary"]["compactions"] > 0
    paths = []
    counts = []
    for index in range(1, 5):
        report = report_of([str(store), *extra, "--shard", f"{index}/4"])
        assert report["shard"] == f"{index}/4"
        assert report["settings"] == whole["settings"]
        counts.append(report["summary"]["sessions"])
        path = tmp_path / f"shard-{index}.json"
        path.write_text(json.dumps(report))
        paths.append(path)
    assert sum(counts) == 24 and all(counts), counts
    assert comparable(merged(paths)) == comparable(whole)
    # In any order.
    assert comparable(merged(paths[::-1])) == comparable(whole)


def test_the_shards_of_an_export_merge_too(tmp_path: Path, store: Path) -> None:
    export = tmp_path / "store.jsonl"
    sessions = []
    for session_report in report_of([str(store), *SETTINGS])["sessions"]:
        sessions.append(session_report["session_id"])
    # An unreadable line is reported by exactly one shard.
    lines = _export_lines(store)
    lines.insert(3, b"not json\n")
    export.write_bytes(b"".join(lines))
    whole = report_of([str(export), *SETTINGS])
    assert whole["summary"]["sessions"] == 25
    paths = []
    for index in range(1, 4):
        path = tmp_path / f"part-{index}.json"
        path.write_text(json.dumps(report_of([str(export), *SETTINGS, "--shard", f"{index}/3"])))
        paths.append(path)
    assert comparable(merged(paths)) == comparable(whole)


def _export_lines(store: Path) -> list[bytes]:
    import asyncio

    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    out = io.StringIO()
    service = SqliteSessionService(str(store))
    asyncio.run(_audit.export_sessions(service, out, app_name=_bench_store.APP_NAME))
    return [line.encode() + b"\n" for line in out.getvalue().splitlines()]


def _shard_reports(store: Path, count: int) -> list[AuditReport]:
    return [
        AuditReport.from_json(report_of([str(store), *SETTINGS, "--shard", f"{i}/{count}"]))
        for i in range(1, count + 1)
    ]


def test_merge_refuses_what_is_not_every_shard_once(tmp_path: Path, store: Path) -> None:
    parts = _shard_reports(store, 3)
    with pytest.raises(ReportError, match="missing 2/3"):
        merge_reports([parts[0], parts[2]])
    with pytest.raises(ReportError, match="given twice 1/3"):
        merge_reports([parts[0], parts[0], parts[1], parts[2]])
    other = AuditReport.from_json(report_of([str(store), "--interval", "4", "--overlap", "1"]))
    with pytest.raises(ReportError, match="differ in settings"):
        merge_reports([parts[0], other])
    whole = AuditReport.from_json(report_of([str(store), *SETTINGS]))
    with pytest.raises(ReportError, match="whole store"):
        merge_reports([parts[0], whole])
    two = _shard_reports(store, 2)
    with pytest.raises(ReportError, match="not of one N"):
        merge_reports([*parts, *two])
    # On the command line: exit status 2, the problem on stderr.
    (tmp_path / "a.json").write_text(json.dumps(parts[0].to_json()))
    (tmp_path / "b.json").write_text("{}")
    status, out, err = run_cli(["audit", "merge", str(tmp_path / "a.json")])
    assert status == 2 and out == "" and "missing 2/3, 3/3" in err
    status, out, err = run_cli(["audit", "merge", str(tmp_path / "b.json")])
    assert status == 2 and out == "" and "not an audit report" in err


# -- Dask ------------------------------------------------------------------------------


def test_dask_local_cluster_gives_the_whole_store_report(tmp_path: Path, store: Path) -> None:
    pytest.importorskip("distributed", reason="the dask extra (tests/requirements.txt pins it)")
    whole = report_of([str(store)])
    kept = tmp_path / "parts"
    status, out, err = run_cli(
        [
            "audit",
            str(store),
            "--dask",
            "local:2",
            "--shards",
            "4",
            "--shard-reports",
            str(kept),
            "--json",
        ]
    )
    assert status in (0, 1), err
    assert "4 shards on 2 Dask workers" in err
    assert comparable(json.loads(out)) == comparable(whole)
    parts = sorted(kept.glob("shard-*-of-4.json"))
    assert len(parts) == 4
    assert comparable(merged(parts)) == comparable(whole)


def test_a_failed_shard_is_named_with_its_rerun(tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason="the dask extra (tests/requirements.txt pins it)")
    # A store no worker can open (the settings given, so no inference task
    # fails first): every shard's task fails, each is named with its rerun.
    status, out, err = run_cli(
        ["audit", str(tmp_path / "missing.db"), *SETTINGS, "--dask", "local:1", "--shards", "2"]
    )
    assert status == 2 and out == ""
    assert "shard 1/2 failed" in err and "shard 2/2 failed" in err
    assert "--shard 2/2" in err


def test_an_unreachable_scheduler_is_a_store_error(tmp_path: Path, store: Path) -> None:
    pytest.importorskip("distributed", reason="the dask extra (tests/requirements.txt pins it)")
    import dask

    # Dask's own connect timeout (30 s by default), shortened.
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        status, out, err = run_cli(
            ["audit", str(store), *SETTINGS, "--dask", "tcp://127.0.0.1:1", "--json"]
        )
    assert status == 2 and out == ""
    assert "cannot reach the scheduler" in err
