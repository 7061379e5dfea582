"""The e2e regime (`python -m adk_fastcompact bench --regimes e2e`) on tiny
sessions: its report, its parity check and its split. No timing assertions:
the numbers are the bench's to show, not the tests' to judge."""

from __future__ import annotations

import asyncio
import gc
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
from adk_fastcompact._tooling import e2e_side as _e2e_side
from adk_fastcompact._tooling import e2e_stores as _e2e_stores
from adk_fastcompact._tooling.bench import BenchmarkMismatchError
from adk_fastcompact._tooling.bench_options import E2E_PLACEMENTS, LOCAL_SERVICES, POSTGRES_ENV
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

SIZE = 120
POSTGRES_URL = os.environ.get(POSTGRES_ENV)


def _check_row(
    row: _e2e.E2ERow,
    service: str,
    turns: int,
    placement: str = "shared",
    gc_mode: str = "on",
    loading: str = "full",
) -> None:
    assert row["regime"] == "e2e"
    assert row["loading"] == loading
    assert row["compaction"] == "both"
    assert row["service"] == service
    assert row["placement"] == placement
    assert row["gc"] == gc_mode
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
        assert row[f"{side}_first_ms"] > 0  # type: ignore[literal-required]
        rss = row[f"{side}_rss_mib"]  # type: ignore[literal-required]
        # Linux keeps a resettable peak: every side's turns report theirs.
        assert rss is not None and rss >= 0
    # Every service's turn loads the session, builds prompts, runs the
    # compaction checks and appends events: each phase was seen (the
    # collector's collections fall where they fall).
    assert all(row["rust_split_ms"][phase] > 0 for phase in _e2e_app.PHASES[:-1])
    if gc_mode == "off":
        assert row["python_split_ms"]["collector"] == row["rust_split_ms"]["collector"] == 0
    assert row["declines"] == sum(row["decline_reasons"].values())


def test_the_regime_reports_every_local_service_in_both_placements() -> None:
    """By default each service runs with the sides in processes of their
    own and in this one, the collector on; the requests agree in both.
    (Full loading here; the lean rows are the CLI tests'.)"""
    services = list(LOCAL_SERVICES)
    was = _patch.installed()
    enabled = gc.isenabled()
    rows = _e2e.run_e2e([SIZE], services, turns=2, warmup=1, loadings=["full"])
    assert _patch.installed() == was, "google-adk is left as found"
    assert gc.isenabled() == enabled, "the collector is left as found"
    cases = [(service, placement) for service in services for placement in E2E_PLACEMENTS]
    assert [(row["service"], row["placement"]) for row in rows] == cases
    for row, (service, placement) in zip(rows, cases, strict=True):
        _check_row(row, service, 2, placement)
    # The same grown session in every store and placement.
    assert len({row["events"] for row in rows}) == 1
    assert len({row["compactions"] for row in rows}) == 1
    json.dumps(rows)  # --json prints them as they are


@pytest.mark.skipif(not POSTGRES_URL, reason=f"{POSTGRES_ENV} is not set")
def test_the_regime_runs_on_postgresql() -> None:
    """DatabaseSessionService on PostgreSQL: the store a database of its
    own, copied per side by CREATE DATABASE ... TEMPLATE, dropped after."""
    rows = _e2e.run_e2e(
        [SIZE], ["postgres"], url=POSTGRES_URL, turns=2, warmup=1, loadings=["lean"]
    )
    assert [row["placement"] for row in rows] == list(E2E_PLACEMENTS)
    for row in rows:
        _check_row(row, "postgres", 2, row["placement"], loading="lean")


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
        _e2e.run_e2e([SIZE], ["memory"], turns=3, warmup=0, placements=["shared"])
    assert _patch.installed() is None


def test_a_different_request_in_a_side_s_process_aborts_the_bench(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each side in a process of its own: the requests each process sends
    back are compared (here adk-fastcompact's side's second turn comes back
    with one more request), and the sides ran in two other processes."""
    turn = _e2e_side.SideProcess.turn
    pids: dict[str | None, int] = {}
    turns = {"parity": 0}

    async def sabotaged(self: _e2e_side.SideProcess, played: _e2e_app.Turn) -> _e2e_side.TurnResult:
        result = await turn(self, played)
        pids[self.mode] = self.pid
        if self.mode == "parity":
            turns["parity"] += 1
            if turns["parity"] == 2:
                return result._replace(requests=[*result.requests, result.requests[0]])
        return result

    monkeypatch.setattr(_e2e_side.SideProcess, "turn", sabotaged)
    with pytest.raises(BenchmarkMismatchError, match=r"adk-fastcompact's side made \d+ model"):
        _e2e.run_e2e([SIZE], ["sqlite"], turns=3, warmup=0, placements=["own"])
    assert _patch.installed() is None
    assert len({pids[None], pids["parity"], os.getpid()}) == 3


def test_a_failing_side_process_reports_its_traceback() -> None:
    """A side whose process cannot open its store: the error comes back with
    the process's traceback."""
    broken = _e2e_stores.Copy("memory", memory=b"not a pickle")
    with pytest.raises(RuntimeError, match=r"process \(.*\) failed") as raised:
        _e2e_side.SideProcess(None, broken, 0, "on")
    assert "Traceback" in str(raised.value)
    assert "UnpicklingError" in str(raised.value)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_during_a_turn(enabled: bool) -> None:
    """``on``: enabled during the turn, whatever it was; ``off``: disabled;
    either way as it was afterwards."""
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with _e2e_side.collector("on"):
            assert gc.isenabled()
        assert gc.isenabled() == enabled
        with _e2e_side.collector("off"):
            assert not gc.isenabled()
        assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_the_split_charges_each_moment_to_the_innermost_call() -> None:
    """An append inside a compaction is append time; the prompt estimate a
    compaction makes through `_get_contents` is compaction time; a
    collection inside anything is collector time."""
    split = _e2e_app.Split()
    split.enter("compaction")
    split.enter("get_contents")
    split.leave()
    split.enter("append_event")
    split.leave()
    split.leave()
    split.enter("get_contents")
    split.enter("collector")
    split.leave()
    split.leave()
    totals = split.take()
    assert set(totals) == set(_e2e_app.PHASES)
    assert totals["compaction"] > 0 and totals["append_event"] > 0
    assert totals["get_contents"] > 0 and totals["collector"] > 0
    split.enter("get_session")
    with pytest.raises(RuntimeError, match="still open"):
        split.take()


def test_instrument_times_the_calls_as_google_adk_makes_them() -> None:
    """The wrappers sit where google-adk looks the functions up, a
    collection is timed, and all are gone after the undo."""
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
        gc.collect()
        assert split.take()["collector"] > 0
        callbacks = len(gc.callbacks)
    finally:
        undo()
    assert len(gc.callbacks) == callbacks - 1
    assert (
        _contents._get_contents,
        compaction._run_compaction_for_sliding_window,
        _compaction._run_compaction_for_token_threshold_config,
    ) == originals
    assert "get_session" not in vars(service)


def test_the_cli_prints_the_e2e_rows(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "--regimes", "e2e", "--sizes", str(SIZE), "--services", "memory"]
    argv += ["--e2e-turns", "1", "--e2e-warmup", "0", "--e2e-placement", "shared"]
    argv += ["--e2e-gc", "off", "--json"]
    assert _cli.main(argv) == 0
    printed: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert printed["rows"] == [] and printed["memory"] == []
    full, lean = printed["e2e"]  # both loadings by default, full first
    _check_row(full, "memory", 1, "shared", "off")
    _check_row(lean, "memory", 1, "shared", "off", "lean")


def test_the_table_says_where_the_sides_ran_and_the_collector(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["bench", "--regimes", "e2e", "--sizes", str(SIZE), "--services", "sqlite"]
    argv += ["--e2e-turns", "1", "--e2e-warmup", "0", "--loading", "lean"]
    assert _cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "garbage collector on during the turns" in printed
    rows = [line.split("│") for line in printed.splitlines() if line.count("│") > 5]
    cells = [cell for cell in rows if cell[5].strip() == "adk-fastcompact"]
    # The placement of each row is on google-adk's line, the loading on ours.
    placements = [
        line.split("│")[3].strip() for line in printed.splitlines() if "google-adk  " in line
    ]
    assert placements == ["own", "shared"]
    assert [cell[4].strip() for cell in cells] == ["lean", "lean"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--e2e-placement", "elsewhere"], "own,shared"),
        (["--e2e-gc", "sometimes"], "invalid choice"),
        (["--loading", "half"], "full,lean"),
        (["--e2e-compaction", "window"], "invalid choice"),
    ],
)
def test_the_cli_refuses_unknown_placements_and_collectors(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        _cli.main(["bench", "--regimes", "e2e", *flags])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_run_e2e_refuses_unknown_placements_and_collectors() -> None:
    with pytest.raises(ValueError, match="placements"):
        _e2e.run_e2e([SIZE], ["memory"], placements=["elsewhere"])
    with pytest.raises(ValueError, match="collector"):
        _e2e.run_e2e([SIZE], ["memory"], gc_mode="sometimes")
    with pytest.raises(ValueError, match="compaction"):
        _e2e.run_e2e([SIZE], ["memory"], compaction="window")


def test_the_token_threshold_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """``--e2e-compaction token``: the app compacts by the token threshold
    alone (no sliding window), both sides, and the rows and the table say so."""
    app, _ = _e2e_app.build_app(0, "token")
    config = app.events_compaction_config
    assert config is not None and config.token_threshold == _e2e_app.TOKEN_THRESHOLD
    assert config.compaction_interval is None and config.overlap_size is None
    size = 400  # the first token-threshold compactions fall before it
    argv = ["bench", "--regimes", "e2e", "--sizes", str(size), "--services", "memory"]
    argv += ["--e2e-turns", "1", "--e2e-warmup", "0", "--e2e-placement", "shared"]
    argv += ["--loading", "lean", "--e2e-compaction", "token", "--json"]
    assert _cli.main(argv) == 0
    (row,) = json.loads(capsys.readouterr().out)["e2e"]
    assert row["compaction"] == "token" and row["loading"] == "lean"
    assert row["events"] >= size and row["compactions"] > 0
    argv.remove("--json")
    assert _cli.main(argv) == 0
    assert "token threshold alone" in capsys.readouterr().out


def test_the_cli_refuses_postgres_without_a_url(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(POSTGRES_ENV, raising=False)
    assert _cli.main(["bench", "--regimes", "e2e", "--services", "postgres"]) == 2
    assert "database-url" in capsys.readouterr().err


def test_several_sizes_after_one_flag() -> None:
    args = _cli._parser().parse_args(["bench", "--sizes", "2000", "10000,50000"])
    assert [size for sizes in args.sizes for size in sizes] == [2000, 10000, 50000]


def test_the_peak_rss_is_a_span_s_own_rise() -> None:
    """`PeakRss` reports the rise of the resident set during its span, not
    the process's peak before it: 64 MiB touched inside reads at least
    that, a span after it frees them reads far less."""
    blob = b"x" * (128 * 1024 * 1024)  # a peak before any span (every page written)
    del blob
    with _e2e_side.PeakRss() as before:
        pass
    with _e2e_side.PeakRss() as inside:
        held = b"x" * (64 * 1024 * 1024)
    del held
    assert before.kib is not None and inside.kib is not None
    assert inside.kib >= 60 * 1024
    assert before.kib < 16 * 1024
