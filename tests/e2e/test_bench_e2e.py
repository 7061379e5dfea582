"""The e2e regime (`python -m adk_fastcompact bench --regimes e2e`) on tiny
sessions: its report, its parity check and its split. No timing assertions:
the numbers are the bench's to show, not the tests' to judge."""

from __future__ import annotations

import asyncio
import json
import math
import os
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from adk_fastcompact import _patch
from adk_fastcompact._tooling import cli as _cli
from adk_fastcompact._tooling import e2e as _e2e
from adk_fastcompact._tooling import e2e_app as _e2e_app
from adk_fastcompact._tooling.bench import BenchmarkMismatchError
from adk_fastcompact._tooling.bench_options import LOCAL_SERVICES, POSTGRES_ENV
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

SIZE = 120
POSTGRES_URL = os.environ.get(POSTGRES_ENV)


def _check_row(row: _e2e.E2ERow, service: str, turns: int) -> None:
    assert row["regime"] == "e2e"
    assert row["service"] == service
    assert row["turns"] == turns
    assert row["events"] >= SIZE
    assert row["compactions"] > 0, "the grown session holds google-adk's compaction events"
    assert row["python_ms"] > 0 and row["rust_ms"] > 0
    assert math.isclose(row["ratio"], row["python_ms"] / row["rust_ms"])
    for side in ("python", "rust"):
        split: dict[str, float] = row[f"{side}_split_ms"]  # type: ignore[literal-required]
        mean: float = row[f"{side}_mean_ms"]  # type: ignore[literal-required]
        assert list(split) == [*_e2e_app.PHASES, _e2e_app.OTHER]
        assert all(split[phase] >= 0 for phase in _e2e_app.PHASES)
        # The timed phases never add up to more than the turn.
        assert sum(split[phase] for phase in _e2e_app.PHASES) <= mean
        assert split[_e2e_app.OTHER] >= 0
        assert math.isclose(sum(split.values()), mean)
    # Every service's turn loads the session, builds prompts, runs the
    # compaction checks and appends events: each phase was seen.
    assert all(row["rust_split_ms"][phase] > 0 for phase in _e2e_app.PHASES)
    assert row["declines"] == sum(row["decline_reasons"].values())


def test_the_regime_reports_every_local_service() -> None:
    services = list(LOCAL_SERVICES)
    was = _patch.installed()
    rows = _e2e.run_e2e([SIZE], services, turns=2, warmup=1)
    assert _patch.installed() == was, "google-adk is left as found"
    assert [row["service"] for row in rows] == services
    for row, service in zip(rows, services, strict=True):
        _check_row(row, service, 2)
    # The same grown session in every store.
    assert len({row["events"] for row in rows}) == 1
    assert len({row["compactions"] for row in rows}) == 1
    json.dumps(rows)  # --json prints them as they are


@pytest.mark.skipif(not POSTGRES_URL, reason=f"{POSTGRES_ENV} is not set")
def test_the_regime_runs_on_postgresql() -> None:
    """DatabaseSessionService on PostgreSQL: the store a database of its
    own, copied per side by CREATE DATABASE ... TEMPLATE, dropped after."""
    (row,) = _e2e.run_e2e([SIZE], ["postgres"], url=POSTGRES_URL, turns=2, warmup=1)
    _check_row(row, "postgres", 2)


def test_a_different_request_aborts_the_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: adk-fastcompact's side sends its model one more content in
    its second turn's first request; the bench must stop."""
    generate = _e2e_app.RecordingLlm.generate_content_async
    calls = {"rust": 0}

    async def sabotaged(
        self: _e2e_app.RecordingLlm, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        # The growth's requests are not recorded nor compared: the timed turns' are.
        if self._record and _patch.installed() == "parity":
            calls["rust"] += 1
            if calls["rust"] == 2:
                llm_request.contents.append(
                    types.Content(role="user", parts=[types.Part(text="sabotage")])
                )
        async for response in generate(self, llm_request, stream):
            yield response

    monkeypatch.setattr(_e2e_app.RecordingLlm, "generate_content_async", sabotaged)
    with pytest.raises(BenchmarkMismatchError, match=r"model request \d+ differs"):
        _e2e.run_e2e([SIZE], ["memory"], turns=3, warmup=0)
    assert _patch.installed() is None


def test_the_split_charges_each_moment_to_the_innermost_call() -> None:
    """An append inside a compaction is append time; the prompt estimate a
    compaction makes through `_get_contents` is compaction time."""
    split = _e2e_app.Split()
    split.enter("compaction")
    split.enter("get_contents")
    split.leave()
    split.enter("append_event")
    split.leave()
    split.leave()
    split.enter("get_contents")
    split.leave()
    totals = split.take()
    assert set(totals) == set(_e2e_app.PHASES)
    assert totals["compaction"] > 0 and totals["append_event"] > 0
    assert totals["get_contents"] > 0
    split.enter("get_session")
    with pytest.raises(RuntimeError, match="still open"):
        split.take()


def test_instrument_times_the_calls_as_google_adk_makes_them() -> None:
    """The wrappers sit where google-adk looks the functions up, and are
    gone after the undo."""
    from google.adk.apps import compaction
    from google.adk.flows.llm_flows.context import _compaction, _contents
    from google.adk.sessions.in_memory_session_service import InMemorySessionService

    originals = (
        _contents._get_contents,
        compaction._run_compaction_for_sliding_window,
        _compaction._run_compaction_for_token_threshold_config,
    )
    service = InMemorySessionService()
    split = _e2e_app.Split()
    undo = _e2e_app.instrument(split, service)
    try:
        assert _contents._get_contents is not originals[0]
        assert compaction._run_compaction_for_sliding_window is not originals[1]
        assert _compaction._run_compaction_for_token_threshold_config is not originals[2]
        assert "get_session" in vars(service) and "append_event" in vars(service)
        session = asyncio.run(service.get_session(app_name="a", user_id="u", session_id="missing"))
        assert session is None
        assert split.take()["get_session"] > 0
    finally:
        undo()
    assert (
        _contents._get_contents,
        compaction._run_compaction_for_sliding_window,
        _compaction._run_compaction_for_token_threshold_config,
    ) == originals
    assert "get_session" not in vars(service)


def test_the_cli_prints_the_e2e_rows(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "--regimes", "e2e", "--sizes", str(SIZE), "--services", "memory"]
    argv += ["--e2e-turns", "1", "--e2e-warmup", "0", "--json"]
    assert _cli.main(argv) == 0
    printed: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert printed["rows"] == [] and printed["memory"] == []
    (row,) = printed["e2e"]
    _check_row(row, "memory", 1)


def test_the_cli_refuses_postgres_without_a_url(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(POSTGRES_ENV, raising=False)
    assert _cli.main(["bench", "--regimes", "e2e", "--services", "postgres"]) == 2
    assert "database-url" in capsys.readouterr().err


def test_several_sizes_after_one_flag() -> None:
    args = _cli._parser().parse_args(["bench", "--sizes", "2000", "10000,50000"])
    assert [size for sizes in args.sizes for size in sizes] == [2000, 10000, 50000]
