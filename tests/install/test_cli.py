"""The command line as a user meets it first: the bench's footer, a closed
pipe, the lines it prints where its output is no terminal, and what `--plot`
says and draws. (The console script on google-adk alone: test_wheel.py.)"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from adk_fastcompact._tooling import cli
from google.adk.apps.app import EventsCompactionConfig

from support.audit_cli import run_cli
from support.audit_scenarios import chat, run_chat

pytestmark = pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning")

#: The cold regime on one size: a second or two of work.
QUICK = ["bench", "--regimes", "cold", "--sizes", "120", "--repeat", "1"]


def test_the_footer_names_the_machine() -> None:
    line = cli.machine_line()
    assert f", {os.cpu_count()} CPUs, " in line
    assert line.endswith(
        f"google-adk {importlib.metadata.version('google-adk')}, "
        f"adk-fastcompact {importlib.metadata.version('adk-fastcompact')}"
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store google-adk's SqliteSessionService wrote through a Runner."""
    db = tmp_path_factory.mktemp("store") / "sessions.db"
    config = EventsCompactionConfig.model_validate({"compaction_interval": 2, "overlap_size": 0})
    assert run_chat(config, chat(8), mode=None, db=db).clean
    return db


def _closed_stdout(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m adk_fastcompact ARGS` writing to a pipe whose reader is
    gone before it starts (`... | head` once head has exited), so its first
    write to stdout fails, every run."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "adk_fastcompact", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=240,
            check=False,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize("form", ["json", "text"])
def test_a_closed_pipe_ends_quietly_with_141(store: Path, form: str) -> None:
    """`audit --json | head` and `audit | head -1`: no traceback, and the
    status a shell gives a command a closed pipe ended (128 + SIGPIPE), not
    the audit's 1 ("found something")."""
    done = _closed_stdout("audit", str(store), *(["--json"] if form == "json" else []))
    assert (done.returncode, done.stderr) == (cli.CLOSED_PIPE, "")
    assert cli.CLOSED_PIPE == 141


def test_each_phase_is_a_line_where_stderr_is_no_terminal() -> None:
    """rich draws no progress bar into a pipe or a CI log: each phase is a
    plain line there instead, and stdout keeps only the report."""
    ops = ["--ops", "apply_rewinds,process+recover"]
    done = subprocess.run(
        [sys.executable, "-m", "adk_fastcompact", *QUICK, *ops, "--json"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    phases = [line for line in done.stderr.splitlines() if line.startswith("bench: ")]
    assert [line.rsplit(" (at ", 1)[0] for line in phases] == [
        "bench: 120 events: building the session",
        "bench: 120 events: checking that Python and Rust filter alike",
        "bench: 120 events: apply_rewinds (cold)",
        "bench: 120 events: process+recover (cold)",
    ]
    assert all(line.endswith(" s)") for line in phases), phases
    assert {row["op"] for row in json.loads(done.stdout)["rows"]} == {
        "apply_rewinds",
        "process+recover",
    }


def test_the_plot_hint_is_printed_as_it_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rich markup would take `[plot]` for a tag and print `'adk-fastcompact'`."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # not installed
    argv = [*QUICK, "--sizes", "120,240", "--plot", str(tmp_path / "bench.png")]
    status, out, err = run_cli(argv)
    assert (status, out) == (2, "")
    assert err == "error: --plot needs matplotlib: pip install 'adk-fastcompact[plot]'\n"


@pytest.mark.parametrize(
    "selection",
    [
        ["--ops", "process+recover"],  # one size: a point per line, an empty frame
        ["--ops", "apply_rewinds", "--sizes", "120,240"],  # an operation it does not draw
        ["--regimes", "e2e", "--e2e-turns", "1"],  # a regime it does not draw
    ],
    ids=["one-size", "other-op", "e2e"],
)
def test_the_plot_says_when_it_has_nothing_to_draw(tmp_path: Path, selection: list[str]) -> None:
    figure = tmp_path / "bench.png"
    status, out, err = run_cli([*QUICK, *selection, "--plot", str(figure)])
    assert (status, out) == (2, ""), err
    assert err.startswith("error: --plot draws process+recover, sliding_window, token_threshold")
    assert "two sizes or more" in err and "nothing of that" in err
    assert not figure.exists()


def test_the_plot_draws_what_there_is(tmp_path: Path) -> None:
    figure = tmp_path / "bench.png"
    argv = [*QUICK, "--ops", "process+recover,apply_rewinds", "--sizes", "60,120"]
    status, _, err = run_cli([*argv, "--plot", str(figure), "--json"])
    assert status == 0, err
    assert f"plot written to {figure}: cold time per call" in err
    assert figure.read_bytes().startswith(b"\x89PNG")


def test_the_panels_need_two_points_on_a_line() -> None:
    from adk_fastcompact._tooling.plot import panels

    assert panels([("cold", "process+recover", 1000)]) == []
    assert panels([("cold", "apply_rewinds", n) for n in (1000, 2000)]) == []
    two = [("warm", "sliding_window", n) for n in (1000, 2000)]
    assert panels([*two, ("turn", "turn_overhead", 50)]) == ["warm"]
    assert panels([*two, *(("turn", "turn_overhead", t) for t in (50, 100))]) == ["warm", "turn"]


#: What the arguments and every --help page must not load: google-adk (and
#: google-genai and pydantic under it), a second or two on import, and rich.
HEAVY = ("google.adk", "google.genai", "pydantic", "rich")


def test_parsing_the_arguments_imports_nothing_heavy() -> None:
    """`adk-fastcompact --help`, `bench --help` and `audit --help` answer at
    once: the parser's choices and defaults come from light modules
    (`bench_options`), and google-adk loads only when a command runs. (The
    parser imported the bench and e2e modules for them: 2 s per --help.)"""
    script = (
        "import contextlib, io, json, sys\n"
        "from adk_fastcompact._tooling import cli\n"
        "parser = cli._parser()\n"
        "parser.parse_args(['bench', '--sizes', '120', '--regimes', 'cold,e2e'])\n"
        "for argv in (['--help'], ['bench', '--help'], ['audit', '--help']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "        parser.parse_args(argv)\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stdout) == []
