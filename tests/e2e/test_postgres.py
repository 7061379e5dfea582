"""google-adk's `DatabaseSessionService` on a real PostgreSQL server
(asyncpg), the store production apps run on, through a real `Runner`.

The server is the one `tests/support/postgres.py` starts (conftest's `postgres_url`;
skipped outside CI where none can be had, failed in CI); every test gets
databases of its own (`postgres_database`, dropped after it).

- Parity: the end-to-end conversation of `test_runner_e2e.py` (its config
  with both triggers, its checks that the comparison is not vacuous) runs
  on PostgreSQL with google-adk's own code and after `install()`: every
  model request and response, every yielded event, every session
  `get_session` handed out and the stored session are the same. Then each
  store is read back by the other side: the one `install()` wrote by plain
  google-adk, google-adk's own after `install()`, both the same again.
- Exact mode: the ground-truth scenarios of `test_audit_truth.py` that run
  on the SQL services, written in exact mode to PostgreSQL: every compaction
  carries its record, google-adk's own assembly (accelerator uninstalled)
  hides nothing after any turn or at the end, and the audit, reading the
  database URL, finds nothing hidden, repeated or undecided.
- `tests/support/postgres.py` itself: which binaries it takes, and its CLI (the
  command's exit status, the server stopped and its data deleted).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import adk_fastcompact
import pytest
from google.adk.sessions.database_session_service import DatabaseSessionService

from support import postgres
from support.conversation import APP, CONFIGS, SESSION, USER, run_both
from support.runner_harness import Probes, assert_same, install_probes
from support.truth_scenarios import SCENARIOS, assert_loses_nothing, write_scenario

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning"),
    pytest.mark.filterwarnings("ignore:The `plugins` argument is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:ParallelAgent is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:App .* can transfer between agents:UserWarning"),
]


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> Probes:
    """Counts the calls into the Rust core and records the compaction triggers."""
    return install_probes(monkeypatch)


@pytest.fixture
def second_database(postgres_url: str) -> Iterator[str]:
    """Another new database for this test alone."""
    with postgres.database(postgres_url) as url:
        yield url


def _read_back(url: str, *, install: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The e2e session stored in `url`, loaded by a new service with
    google-adk's own code or after `install()`: its events and the rest."""

    async def load() -> Any:
        service = DatabaseSessionService(url)
        try:
            return await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        finally:
            await service.close()

    if install:
        assert adk_fastcompact.install() is True
    try:
        session = asyncio.run(load())
    finally:
        adk_fastcompact.uninstall()
    assert session is not None
    events = [event.model_dump(mode="json") for event in session.events]
    return events, session.model_dump(mode="json", exclude={"events"})


def test_runner_conversation_on_postgres_is_identical_with_install(
    postgres_database: str, second_database: str, probes: Probes
) -> None:
    # Both triggers configured (the window and the token threshold alone run
    # on the in-process services): 100 turns on each side take 15-35 s here.
    assert {"compaction_interval", "token_threshold"} <= set(CONFIGS["both"])
    plain, _ = run_both(
        "postgres", "both", postgres_database, second_database, probes, record_loads=True
    )
    # Each store read by the other side: what install() wrote, by google-adk's
    # own code; what google-adk wrote, after install().
    for url, install in ((second_database, False), (postgres_database, True)):
        events, session = _read_back(url, install=install)
        side = "plain google-adk" if not install else "install()"
        assert_same(f"stored events read by {side}", plain.stored, events)
        assert_same(f"session read by {side}", plain.session, session)


#: The ground-truth scenarios that run on the SQL services (the others
#: overlap invocations, which those services refuse).
SQL_SCENARIOS = [name for name, (*_, kinds) in SCENARIOS.items() if "database" in kinds]


@pytest.mark.adk_2_13("exact mode")
@pytest.mark.parametrize("name", SQL_SCENARIOS)
def test_exact_mode_stores_on_postgres_lose_nothing(
    tmp_path: Path, name: str, postgres_database: str
) -> None:
    written = write_scenario(tmp_path, name, "postgres", "exact", url=postgres_database)
    assert written.store == postgres_database
    assert_loses_nothing(written, name)


# -- tests/support/postgres.py itself ----------------------------------------------------


def test_the_newest_complete_major_is_taken(tmp_path: Path) -> None:
    for major, names in (
        ("9.6", ("initdb", "pg_ctl", "postgres")),
        ("15", ("initdb", "pg_ctl", "postgres")),
        ("16", ("initdb", "pg_ctl")),  # no server binary: not taken
    ):
        folder = tmp_path / major / "bin"
        folder.mkdir(parents=True)
        for name in names:
            (folder / name).write_text("#!/bin/sh\n")
            (folder / name).chmod(0o755)
    found = postgres.find_binaries(tmp_path)
    assert found is not None and found.bin == tmp_path / "15" / "bin"
    assert postgres.find_binaries(tmp_path / "none") is None


_CHILD = """
import asyncio, os, sys
import asyncpg
from sqlalchemy.engine import make_url

url = make_url(os.environ["ADK_FASTCOMPACT_POSTGRES_URL"])

async def main():
    connection = await asyncpg.connect(
        host=url.host, port=url.port, user=url.username, database=url.database
    )
    try:
        print(await connection.fetchval("SELECT current_database()"))
        print(await connection.fetchval("SHOW data_directory"))
        print(await connection.fetchval("SHOW listen_addresses"))
    finally:
        await connection.close()

asyncio.run(main())
sys.exit(3)
"""


def test_the_cli_runs_the_command_with_a_server_up_and_deletes_it(postgres_url: str) -> None:
    # (postgres_url: a server can start here, else this skips or fails like the others.)
    del postgres_url
    script = Path(__file__).parents[1] / "support" / "postgres.py"
    done = subprocess.run(
        [sys.executable, str(script), "--", sys.executable, "-c", _CHILD],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr  # the command's status
    database, data, listening = done.stdout.split()
    assert (database, listening) == (postgres.DATABASE, "127.0.0.1")
    assert "PostgreSQL up at postgresql+asyncpg://postgres@127.0.0.1:" in done.stderr
    # Stopped, its data deleted.
    assert not Path(data).exists(), data
    assert not Path(data).parent.exists(), data
