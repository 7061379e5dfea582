"""The audit's command line run in-process (`cli.main`), and its reports
compared without their timings."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adk_fastcompact._tooling import cli


def run_cli(argv: Sequence[str]) -> tuple[int, str, str]:
    """`cli.main(argv)`: its exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(list(argv))
    return status, out.getvalue(), err.getvalue()


def report_of(argv: Sequence[str]) -> dict[str, Any]:
    status, out, err = run_cli(["audit", *argv, "--json"])
    assert out, err
    report: dict[str, Any] = json.loads(out)
    assert status == status_of(report), err
    return report


def status_of(report: dict[str, Any]) -> int:
    """The exit status a JSON report goes with: 2 when a session could not
    be read, 1 when an event is hidden or duplicated, else 0."""
    summary = report["summary"]
    if summary["sessions_declined"]:
        return 2
    return 1 if summary["sessions_affected"] else 0


def comparable(report: dict[str, Any]) -> str:
    """The report's JSON without its timings, its sessions sorted."""
    report = {key: value for key, value in report.items() if key != "timing"}
    report["sessions"] = sorted(
        report["sessions"], key=lambda s: (s["app_name"], s["user_id"], s["session_id"])
    )
    return json.dumps(report, sort_keys=True)


def merged(paths: Sequence[Path]) -> dict[str, Any]:
    status, out, err = run_cli(["audit", "merge", *map(str, paths)])
    assert out, err
    report: dict[str, Any] = json.loads(out)
    assert status == status_of(report), err
    return report
