"""A throwaway PostgreSQL server for the tests: Debian's server binaries, a
temporary data folder, 127.0.0.1 on a free port, trust authentication for
local connections only, one database; stopped and deleted on exit.

    with postgres.server() as found:      # the tests' fixture (conftest.py)
        found.url                         # postgresql+asyncpg://postgres@127.0.0.1:PORT/adk_fastcompact

    python tests/support/postgres.py -- COMMAND...             # COMMAND with the server up
    python tests/support/postgres.py --optional -- COMMAND...  # without it where none starts
                                                               # (not in CI)

The CLI runs COMMAND with `ADK_FASTCOMPACT_POSTGRES_URL` set to the URL, then
stops the server and deletes its data, and exits with COMMAND's status (128
+ N when a signal N ended it). When the server cannot start it exits 1;
with `--optional`, outside CI (`CI=true` in the environment), it runs
COMMAND all the same, with `ADK_FASTCOMPACT_POSTGRES_UNAVAILABLE` set to the
reason instead (the tests that need the server then skip, naming it,
without trying again).

The binaries are `/usr/lib/postgresql/<major>/bin/{initdb,pg_ctl,postgres}`
(the newest major found; PATH is not searched: it may hold other copies).
None there and running as root: Debian's `postgresql` package is installed
with `apt-get install -y` (after `apt-get update` if the package lists do
not know it). The server refuses to run as root: as root, the data folder
is given to the `postgres` system user, who runs `initdb` and the server
(`runuser`); otherwise the current user runs them. Data, socket and log go
to a folder made by `tempfile.mkdtemp`, removed at the end. Durability is
off (`fsync`, `synchronous_commit`, `full_page_writes`): nothing outlives
the run.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

#: The variable the CLI sets (and `conftest.postgres_url` reads): a SQLAlchemy URL.
ENV = "ADK_FASTCOMPACT_POSTGRES_URL"
#: Set by `--optional` when the server could not start: why.
UNAVAILABLE_ENV = "ADK_FASTCOMPACT_POSTGRES_UNAVAILABLE"

DEBIAN_ROOT = Path("/usr/lib/postgresql")
SYSTEM_USER = "postgres"
DATABASE = "adk_fastcompact"
#: Attempts at a free port (another process may take the one picked first).
PORT_TRIES = 5


class Unavailable(RuntimeError):
    """The server cannot be had here; the message says why."""


def in_ci() -> bool:
    """Whether this is a CI run (`CI=true`), where a missing server is a failure."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


@dataclass(frozen=True)
class Binaries:
    bin: Path

    @property
    def initdb(self) -> Path:
        return self.bin / "initdb"

    @property
    def pg_ctl(self) -> Path:
        return self.bin / "pg_ctl"


def _major(path: Path) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", path.name)) or (0,)


def find_binaries(root: Path | None = None) -> Binaries | None:
    """The newest major under `root` (`DEBIAN_ROOT`) with initdb, pg_ctl and
    postgres, or None."""
    root = DEBIAN_ROOT if root is None else root
    if not root.is_dir():
        return None
    for major in sorted(root.iterdir(), key=_major, reverse=True):
        found = Binaries(major / "bin")
        if all(os.access(found.bin / name, os.X_OK) for name in ("initdb", "pg_ctl", "postgres")):
            return found
    return None


def _apt_get(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(
        ["apt-get", *args], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )


def install_binaries() -> Binaries:
    """Debian's server binaries, installed with apt-get (as root) when missing."""
    found = find_binaries()
    if found is not None:
        return found
    if os.geteuid() != 0:
        raise Unavailable(
            f"no PostgreSQL server under {DEBIAN_ROOT} and not root to install it"
            " (apt-get install postgresql)"
        )
    if shutil.which("apt-get") is None:
        raise Unavailable(f"no PostgreSQL server under {DEBIAN_ROOT} and no apt-get to install it")
    print("postgres.py: installing Debian's postgresql package (apt-get)", file=sys.stderr)
    # Waiting for dpkg's lock: two pytest workers may both get here.
    install = ("-o", "DPkg::Lock::Timeout=300", "install", "-y", "-q", "postgresql")
    done = _apt_get(*install)
    if done.returncode != 0:
        # Package lists missing or stale (a fresh machine): read them, try again.
        _apt_get("-o", "DPkg::Lock::Timeout=300", "update", "-q")
        done = _apt_get(*install)
    found = find_binaries()
    if found is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise Unavailable(
            f"apt-get install postgresql (exit {done.returncode}) left no server under"
            f" {DEBIAN_ROOT}: {' / '.join(tail)}"
        )
    return found


def free_port() -> int:
    """A TCP port of 127.0.0.1 nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    """A running server."""

    binaries: Binaries
    folder: Path
    port: int
    #: The user running it, or None: the current user.
    user: str | None

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def log(self) -> Path:
        return self.folder / "server.log"

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the database `DATABASE`, for asyncpg."""
        return f"postgresql+asyncpg://{SYSTEM_USER}@127.0.0.1:{self.port}/{DATABASE}"

    def run(self, *args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Runs a server binary as the server's user."""
        argv = [str(a) for a in args]
        if self.user is not None:
            argv = ["runuser", "-u", self.user, "--", *argv]
        done = subprocess.run(
            argv, cwd=self.folder, stdin=subprocess.DEVNULL, capture_output=True, text=True
        )
        if check and done.returncode != 0:
            raise Unavailable(
                f"{Path(argv[-len(args)]).name} exited {done.returncode}: "
                + " / ".join((done.stderr or done.stdout).strip().splitlines()[-4:])
                + self._log_tail()
            )
        return done

    def _log_tail(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()[-4:]
        except OSError:
            return ""
        return f" (server log: {' / '.join(lines)})" if lines else ""

    def start(self) -> None:
        self.run(
            self.binaries.pg_ctl,
            "start",
            "-w",
            "-t",
            "60",
            "-D",
            self.data,
            "-l",
            self.log,
            "-o",
            # 127.0.0.1 only, the socket in the temporary folder (not the
            # system's /var/run/postgresql), durability off: test data.
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder}"
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
        )

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.run(self.binaries.pg_ctl, "stop", "-w", "-m", "fast", "-D", self.data, check=False)

    def create_database(self, name: str = DATABASE) -> None:
        self.run(
            self.binaries.bin / "createdb",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            SYSTEM_USER,
            name,
        )


def _server_user() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        raise Unavailable(
            f"running as root and no {SYSTEM_USER!r} user to run the server as"
            " (Debian's postgresql package creates it)"
        ) from None
    return SYSTEM_USER


@contextlib.contextmanager
def server() -> Iterator[Server]:
    """A server with the database `DATABASE`, stopped and deleted on exit.

    Raises:
      Unavailable: It cannot be installed, initialized or started.
    """
    binaries = install_binaries()
    user = _server_user()
    folder = Path(tempfile.mkdtemp(prefix="adk-fastcompact-pg-"))
    found = Server(binaries, folder, 0, user)
    try:
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(folder, entry.pw_uid, entry.pw_gid)
            if found.run("test", "-w", folder, check=False).returncode != 0:
                raise Unavailable(f"the {user!r} user cannot write to {folder}")
        found.run(
            binaries.initdb,
            "-D",
            found.data,
            "-U",
            SYSTEM_USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        for attempt in range(PORT_TRIES):
            found.port = free_port()
            try:
                found.start()
                break
            except Unavailable:
                # Another process took the port between the probe and the start.
                found.stop()
                if attempt == PORT_TRIES - 1:
                    raise
        found.create_database()
        yield found
    finally:
        found.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _execute(url: str, statement: str) -> None:
    """Runs `statement` on the server of the SQLAlchemy URL `url` (asyncpg,
    outside any transaction, as CREATE / DROP DATABASE need)."""
    import asyncio

    import asyncpg
    from sqlalchemy.engine import make_url

    parsed = make_url(url)

    async def run() -> None:
        connection = await asyncpg.connect(
            host=parsed.host,
            port=parsed.port,
            user=parsed.username,
            password=parsed.password,
            database=parsed.database,
        )
        try:
            await connection.execute(statement)
        finally:
            await connection.close()

    asyncio.run(run())


@contextlib.contextmanager
def database(url: str) -> Iterator[str]:
    """A new empty database on the server of `url`, dropped on exit (with
    any connection a test left open): its URL."""
    from sqlalchemy.engine import make_url

    name = f"t_{os.getpid()}_{next(_DATABASES)}_{os.urandom(3).hex()}"
    _execute(url, f'CREATE DATABASE "{name}"')
    try:
        yield make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        _execute(url, f'DROP DATABASE "{name}" WITH (FORCE)')


_DATABASES = itertools.count()


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    del frame
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Runs COMMAND with a throwaway PostgreSQL server up and "
        f"{ENV} set to its SQLAlchemy URL."
    )
    parser.add_argument(
        "--optional",
        action="store_true",
        help=f"run COMMAND without the server (and with {UNAVAILABLE_ENV} set) if it cannot"
        " start, except in CI (CI=true)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (python tests/support/postgres.py -- COMMAND...)")
    # SIGTERM and SIGHUP unwind like Ctrl-C does: the server is stopped and
    # its data deleted.
    signal.signal(signal.SIGTERM, _raise_exit)
    signal.signal(signal.SIGHUP, _raise_exit)
    with contextlib.ExitStack() as stack:
        env = dict(os.environ)
        env.pop(UNAVAILABLE_ENV, None)
        started = time.perf_counter()
        try:
            found = stack.enter_context(server())
        except Unavailable as why:
            if not args.optional or in_ci():
                print(f"postgres.py: the PostgreSQL server cannot start: {why}", file=sys.stderr)
                return 1
            print(f"postgres.py: running without PostgreSQL: {why}", file=sys.stderr)
            env[UNAVAILABLE_ENV] = str(why)
        else:
            env[ENV] = found.url
            print(
                f"postgres.py: PostgreSQL up at {found.url} (data in {found.data},"
                f" {time.perf_counter() - started:.1f} s)",
                file=sys.stderr,
            )
        child = subprocess.Popen(command, env=env)
        try:
            status = child.wait()
        except KeyboardInterrupt:
            status = -signal.SIGINT
        finally:
            if child.poll() is None:
                child.terminate()
                try:
                    child.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())
