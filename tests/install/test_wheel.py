"""The wheel users install, smoke-tested in a fresh venv (`test_wheel_*`).

`maturin build --release` builds the wheel into a temporary directory (or
`ADK_FASTCOMPACT_WHEEL=/path/to/adk_fastcompact-*.whl` names one already
built: tests/pythons.sh passes the wheel it tests); a venv made with the
running interpreter gets that wheel and the google-adk (and rich) installed
in the running environment, at the same versions (tests/requirements.txt's
pins; tests/requirements-py310.txt's on CPython 3.10, google-adk 2.11.0),
nothing else from this checkout, and runs `_SMOKE` there: the import comes
from the venv, the extension's version is the wheel's, `install()` accepts
that google-adk, the prompt helpers its family has (the four of 2.13,
`_get_compaction_ranges` arrives in 2.13) give google-adk's results on a
generated session of real Events without a decline, and `index_stats()`
reports the index and the CPython internals.
`test_the_command_line_runs_on_google_adk_alone` installs the wheel with its
`cli` extra beside exactly google-adk (what `pip install
'adk-fastcompact[cli]'` gives a project with nothing else: no SQLAlchemy,
which google-adk installs only with its `db` extra) and runs the console
script there: every help, an audit of a SQLite file a real Runner wrote
through `SqliteSessionService` and of its JSON-lines export, and a small
bench, whose e2e regime skips `DatabaseSessionService` saying what to install.
`-k wheel` runs only these, `--deselect tests/install/test_wheel.py` skips them.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from adk_fastcompact._tooling.bench_options import POSTGRES_ENV
from google.adk.apps.app import EventsCompactionConfig

from support.audit_scenarios import chat, run_chat

ROOT = Path(__file__).resolve().parents[2]
WHEEL_VARIABLE = "ADK_FASTCOMPACT_WHEEL"
SWITCHES = (
    "ADK_FASTCOMPACT_PREFETCH",
    "ADK_FASTCOMPACT_DIRECT_FIELDS",
    "ADK_FASTCOMPACT_DICT_TAGS",
)

pytestmark = pytest.mark.timeout(900)


def _pins(*names: str) -> list[str]:
    """`name==version` of the distributions `names` installed here."""
    return [f"{name}=={importlib.metadata.version(name)}" for name in names]


def _run(*args: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        list(map(str, args)), capture_output=True, text=True, check=False, **kwargs
    )
    assert done.returncode == 0, (
        f"{' '.join(map(str, args))}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done


def _wheel(tmp_path: Path) -> Path:
    """The wheel under test: $ADK_FASTCOMPACT_WHEEL, else one built now."""
    given = os.environ.get(WHEEL_VARIABLE)
    if given:
        return Path(given).resolve()
    out = tmp_path / "wheels"
    _run(sys.executable, "-m", "maturin", "build", "--release", "--out", out, cwd=ROOT)
    (wheel,) = out.glob("*.whl")
    return wheel


# Run in the fresh venv with the wheel's version as argv[1] and google-adk's
# as argv[2]; prints a JSON report on its last line.
_SMOKE = """
import importlib.metadata, itertools, json, sys, sysconfig

import adk_fastcompact as fc
from adk_fastcompact import _native
from adk_fastcompact._tooling import sessions as _sessions
from google.adk.apps import compaction
from google.adk.events import _rewind_events
from google.adk.flows.llm_flows.context import _compaction
from google.adk.platform import uuid as platform_uuid

site = sysconfig.get_paths()["platlib"]
assert fc.__file__.startswith(site) and _native.__file__.startswith(site), _native.__file__
assert _native.__version__ == importlib.metadata.version("adk-fastcompact") == sys.argv[1]
assert importlib.metadata.version("google-adk") == sys.argv[2]

# google-adk's own functions, the oracle, before install() rebinds them
# (`_get_compaction_ranges` from 2.13 on).
apply_rewinds = _rewind_events._apply_rewinds
ranges = getattr(compaction, "_get_compaction_ranges", None)
process = _compaction._process_compaction_events
recover = _compaction._recover_compacted_function_calls
assert fc.install() is True and fc.installed() == "parity"
assert _rewind_events._apply_rewinds is not apply_rewinds
fc.uninstall()
assert fc.installed() is None and _rewind_events._apply_rewinds is apply_rewinds


def deterministic(fn, *args):
    counter = itertools.count()
    platform_uuid.set_id_provider(lambda: f"generated-{next(counter)}")
    try:
        return fn(*args)
    finally:
        platform_uuid.reset_id_provider()


def dumped(events):
    return [e.model_dump() for e in events]


events = _sessions.build_session(300, 3)
for _ in range(2):  # read, then answered from the index
    assert [id(e) for e in fc.apply_rewinds(events)] == [id(e) for e in apply_rewinds(events)]
    assert ranges is None or fc.get_compaction_ranges(events) == ranges(events)
    ours = deterministic(fc.process_compaction_events, events, "root")
    theirs = deterministic(process, events, "root")
    assert dumped(ours) == dumped(theirs) and len(ours) < len(events)
    assert dumped(deterministic(fc.recover_compacted_function_calls, ours, events)) == dumped(
        deterministic(recover, theirs, events)
    )
stats = fc.index_stats()
assert stats["declines"] == {}, stats["declines"]
internals = {k: stats[k] for k in ("prefetch", "direct_fields", "dict_tags")}
assert all(type(v) is bool for v in internals.values())
report = {"events": stats["events"], "sessions": stats["sessions"], **internals}
print(json.dumps({**report, "native": _native.__file__.rsplit("/", 1)[-1]}))
"""


def test_wheel_installs_into_a_fresh_venv_and_runs(tmp_path: Path) -> None:
    started = time.perf_counter()
    wheel = _wheel(tmp_path)
    # name-version-cp310-abi3-platform.whl: one wheel for CPython 3.10 and newer.
    tag = re.fullmatch(r"adk_fastcompact-([^-]+)-cp310-abi3-([^-]+)\.whl", wheel.name)
    assert tag, wheel.name
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    # This environment's uv (pinned in the test requirements) installs into
    # the venv: no pip of its own to bootstrap, seconds where pip takes 20.
    uv = Path(sys.executable).parent / "uv"
    _run(uv, "pip", "install", "-q", "--python", python, wheel, *_pins("google-adk", "rich"))
    # Nothing of this checkout on the path; the internals at their defaults.
    dropped = {"PYTHONPATH", "VIRTUAL_ENV", *SWITCHES}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    smoke = tmp_path / "smoke.py"  # a file: a failed check's traceback shows its line
    smoke.write_text(_SMOKE)
    adk = importlib.metadata.version("google-adk")
    done = _run(python, smoke, tag.group(1), adk, cwd=tmp_path, env=env)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["native"].endswith(".abi3.so") and report["events"] >= 300
    # CPython 3.10-3.13 GIL builds pass the dict-tag self-test.
    assert report["dict_tags"] is (sys.version_info[:2] <= (3, 13))
    print(f"{wheel.name}: {report} in {time.perf_counter() - started:.1f} s")


#: The bench on sizes of seconds, every regime (tests/run.sh runs the same).
SMALL_BENCH = ("--sizes", "120", "--repeat", "1", "--turns", "12")
SMALL_E2E = ("--e2e-turns", "1", "--e2e-warmup", "0")


@pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning")
def test_the_command_line_runs_on_google_adk_alone(tmp_path: Path) -> None:
    started = time.perf_counter()
    wheel = _wheel(tmp_path)
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python, script = venv / "bin" / "python", venv / "bin" / "adk-fastcompact"
    uv = Path(sys.executable).parent / "uv"
    # The wheel with its `cli` extra and google-adk, nothing else (rich at
    # this environment's version, for a reproducible run).
    _run(
        uv,
        "pip",
        "install",
        "-q",
        "--python",
        python,
        f"{wheel}[cli]",
        *_pins("google-adk", "rich"),
    )
    dropped = {"PYTHONPATH", "VIRTUAL_ENV", *SWITCHES}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    missing = subprocess.run(
        [python, "-c", "import sqlalchemy"], capture_output=True, text=True, check=False
    )
    assert "No module named 'sqlalchemy'" in missing.stderr, "google-adk alone has no SQLAlchemy"

    # A store google-adk's SqliteSessionService wrote through a real Runner,
    # and its JSON-lines export; compaction that hid and duplicated nothing.
    db, export = tmp_path / "sessions.db", tmp_path / "sessions.jsonl"
    config = EventsCompactionConfig.model_validate({"compaction_interval": 2, "overlap_size": 0})
    assert run_chat(config, chat(8), mode=None, db=db, export=export).clean

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [script, *args], capture_output=True, text=True, check=False, cwd=tmp_path, env=env
        )

    for args in (["--help"], ["audit", "--help"], ["bench", "--help"]):
        done = cli(*args)
        assert done.returncode == 0, (args, done.stderr[-3000:])
        assert done.stdout.startswith("usage: adk-fastcompact"), done.stdout[:200]
    for store in (db, export):
        done = cli("audit", str(store))
        assert done.returncode == 0, (store, done.stdout[-2000:], done.stderr[-3000:])
        assert "hidden" in done.stdout.lower(), done.stdout[-2000:]
    done = cli("bench", *SMALL_BENCH, *SMALL_E2E)
    assert done.returncode == 0, done.stderr[-3000:]
    # The services google-adk alone runs, and one line for the one it cannot.
    for label in ("InMemorySessionService", "SqliteSessionService"):
        assert label in done.stdout, done.stdout[-3000:]
    assert "DatabaseSessionService (SQLite)" not in done.stdout
    # One line per service it cannot run: DatabaseSessionService, and
    # PostgreSQL too where a database URL is set (as in the test command).
    skipped = [line for line in done.stderr.splitlines() if "skipped" in line]
    postgres = bool(os.environ.get(POSTGRES_ENV))
    assert len(skipped) == 1 + postgres, skipped
    assert all("pip install" in line for line in skipped), skipped
    assert "DatabaseSessionService (SQLite)" in skipped[0] and "sqlalchemy" in skipped[0], skipped
    assert done.stdout.rstrip().endswith(
        f"adk-fastcompact {importlib.metadata.version('adk-fastcompact')}"
    )
    # Asked for by name, a service that cannot run is a usage error.
    done = cli("bench", "--regimes", "e2e", "--services", "database", *SMALL_E2E)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.startswith("error: DatabaseSessionService (SQLite) needs sqlalchemy")
    print(f"the console script on google-adk alone in {time.perf_counter() - started:.1f} s")
