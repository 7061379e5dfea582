"""One side of the e2e regime, in the bench's process or in one of its own.

A `Side` is one side's service (opened on its copy of the store), Runner
and model; `Side.turn` runs one whole timed turn and returns what the
bench keeps of it (`TurnResult`: the wall time, its split, the Rust core's
declines and the model's requests for the parity check). `switch` is the
one place a side puts google-adk in its mode (google-adk's own code, or
``install(mode, strict=True)``).

The two placements (`bench_options.E2E_PLACEMENTS`) drive the same `Side`:

* ``shared``: both sides are `Side` objects in the bench's process, which
  switches google-adk before each side's turn (`unpatch` keeps the index);
* ``own``: each side is a `Side` in a process of its own (`multiprocessing`'s
  spawn start: a fresh interpreter that imports this module), driven by a
  `SideProcess` in the bench's process over a pipe: the bench sends each
  turn (pickled) and gets its `TurnResult` back, in lockstep, so the two
  sides still take turns as in the shared placement. The side's process
  puts google-adk in its mode once and keeps it. An error in it comes back
  as a `RuntimeError` with its traceback.

The collector (`collector`): ``on`` leaves the cyclic garbage collector
enabled during the turn and collects nothing on purpose, before or after:
its collections fall where its thresholds put them, inside a turn or
between two, as in an app; ``off`` runs `gc.collect()` before the turn and
disables the collector during it.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import multiprocessing
import os
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any, NamedTuple

from .. import _native, _patch
from .e2e_app import (
    APP_NAME,
    SESSION_ID,
    USER_ID,
    Split,
    Turn,
    build_runner,
    instrument,
    run_turn,
    snapshot_request,
)
from .e2e_stores import Copy, close_service, open_service
from .simulate import no_gc


class TurnResult(NamedTuple):
    """What the bench keeps of one side's turn."""

    #: Wall seconds of the whole `Runner.run_async` turn.
    wall: float
    #: Seconds per phase (`e2e_app.PHASES`).
    phases: dict[str, float]
    #: The Rust core's declines during the turn, by reason (none counted
    #: on google-adk's side).
    declines: dict[str, int]
    #: The model's requests, as `snapshot_request` makes them.
    requests: list[str]
    #: KiB the process's resident set rose above its size at the turn's
    #: start, at its highest during the turn (`PeakRss`); None where the
    #: kernel gives no resettable peak.
    rss_kib: int | None = None


def switch(mode: str | None) -> None:
    """Puts google-adk in `mode`: its own code (None), or adk-fastcompact's
    ``install(mode, strict=True)``, with lean loading where `mode` ends in
    ``/lean`` (``"parity/lean"``); a side's only setup of the package."""
    installed = _patch.installed()
    if installed is not None:
        from .. import _lean

        if _lean.loading() == "lean":
            installed = f"{installed}/lean"
    if installed != mode:
        _patch.unpatch()
        if mode is not None:
            name, _, loading = mode.partition("/")
            _patch.install(name, strict=True, loading=loading or "full")


@contextmanager
def collector(mode: str) -> Iterator[None]:
    """The cyclic garbage collector during a timed turn (see the module
    docstring): ``on`` enabled, ``off`` disabled after a `gc.collect()`."""
    if mode == "off":
        gc.collect()
        with no_gc():
            yield
        return
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if not was_enabled:
            gc.disable()


class PeakRss:
    """The highest resident set size of this process during a span, above
    its size at the span's start: Linux's peak (`VmHWM` of
    /proc/self/status) reset at the start by writing 5 to
    /proc/self/clear_refs. Where either is missing (not Linux) `kib` is
    None."""

    _STATUS = "/proc/self/status"

    def __init__(self) -> None:
        self.kib: int | None = None
        self._start: int | None = None

    @classmethod
    def _read(cls) -> dict[str, int]:
        found: dict[str, int] = {}
        with open(cls._STATUS) as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "VmHWM"):
                    found[name] = int(value.split()[0])
        return found

    def __enter__(self) -> PeakRss:
        try:
            with open("/proc/self/clear_refs", "w") as clear:
                clear.write("5")
            self._start = self._read()["VmRSS"]
        except (OSError, KeyError, ValueError):
            self._start = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._start is None:
            return
        try:
            self.kib = max(0, self._read()["VmHWM"] - self._start)
        except (OSError, KeyError, ValueError):
            self.kib = None


class Side:
    """One side's service, Runner and model, in this process."""

    def __init__(
        self, mode: str | None, store: Copy, seed: int, gc_mode: str, compaction: str = "both"
    ) -> None:
        self.mode = mode
        self.gc_mode = gc_mode
        self.service = open_service(store)
        self.runner, self.llm = build_runner(self.service, seed, compaction)
        self.split = Split()

    async def turn(self, turn: Turn) -> TurnResult:
        """Runs `turn`, timed, in the side's mode."""
        switch(self.mode)
        message = copy.deepcopy(turn.message)
        self.llm.play(turn)
        self.llm.take_requests()
        _native.decline_counts(reset=True)
        with collector(self.gc_mode), PeakRss() as rss:
            undo = instrument(self.split, self.service)
            try:
                self.split.take()  # a collection since `instrument` is not the turn's
                start = time.perf_counter()
                await run_turn(self.runner, message)
                wall = time.perf_counter() - start
            finally:
                undo()
        phases = self.split.take()
        declined = _native.decline_counts(reset=True)
        if sum(phases.values()) > wall:
            raise RuntimeError(f"the phases ({phases}) add up to more than the turn ({wall} s)")
        declines = {} if self.mode is None else {r: n for r, n in declined.items() if n}
        requests = [snapshot_request(request) for request in self.llm.take_requests()]
        return TurnResult(wall, phases, declines, requests, rss.kib)

    async def stored(self) -> tuple[int, int]:
        """Events in the stored session, and compaction events among them."""
        switch(self.mode)
        session = await self.service.get_session(
            app_name=APP_NAME, user_id=USER_ID, session_id=SESSION_ID
        )
        assert session is not None
        return len(session.events), sum(1 for e in session.events if e.actions.compaction)

    async def close(self) -> None:
        """Closes the side's service."""
        await close_service(self.service)


# -- a side in a process of its own ---------------------------------------------------


def serve(
    connection: Connection,
    store: Copy,
    mode: str | None,
    seed: int,
    gc_mode: str,
    compaction: str = "both",
) -> None:
    """A side's process: answers the bench's requests on `connection`
    (``("turn", Turn)``, ``("stored",)``, ``("stop",)``) until it stops."""
    try:
        asyncio.run(_serve(connection, store, mode, seed, gc_mode, compaction))
    except BaseException:  # every failure goes back to the bench, with its traceback
        connection.send(("error", traceback.format_exc()))
    finally:
        connection.close()


async def _serve(
    connection: Connection,
    store: Copy,
    mode: str | None,
    seed: int,
    gc_mode: str,
    compaction: str,
) -> None:
    switch(mode)
    side = Side(mode, store, seed, gc_mode, compaction)
    try:
        # The setup's garbage, as the bench's process collects its own.
        gc.collect()
        connection.send(("ready", os.getpid()))
        while True:
            request = connection.recv()
            if request[0] == "turn":
                connection.send(("turn", await side.turn(request[1])))
            elif request[0] == "stored":
                connection.send(("stored", await side.stored()))
            else:
                break
    finally:
        await side.close()
    connection.send(("stopped", None))


class SideProcess:
    """A `Side` in a process of its own, driven from the bench's process
    (the same methods as `Side`)."""

    def __init__(
        self, mode: str | None, store: Copy, seed: int, gc_mode: str, compaction: str = "both"
    ) -> None:
        self.mode = mode
        context = multiprocessing.get_context("spawn")
        self._connection, theirs = context.Pipe()
        self._process = context.Process(
            target=serve,
            args=(theirs, store, mode, seed, gc_mode, compaction),
            name=f"adk-fastcompact e2e side ({mode or 'google-adk'})",
            daemon=True,
        )
        self._process.start()
        theirs.close()
        self._failed = False
        self.pid: int = self._answer("ready")

    def _answer(self, kind: str) -> Any:
        try:
            answer, value = self._connection.recv()
        except EOFError:
            self._failed = True
            self._process.join(10)
            raise RuntimeError(
                f"the e2e side's process ({self._process.name}) ended "
                f"with exit code {self._process.exitcode}"
            ) from None
        if answer == "error":
            self._failed = True
            raise RuntimeError(f"the e2e side's process ({self._process.name}) failed:\n{value}")
        if answer != kind:
            raise RuntimeError(f"the e2e side's process answered {answer!r}, not {kind!r}")
        return value

    async def turn(self, turn: Turn) -> TurnResult:
        """Runs `turn` in the side's process."""
        self._connection.send(("turn", turn))
        result: TurnResult = self._answer("turn")
        return result

    async def stored(self) -> tuple[int, int]:
        """`Side.stored`, in the side's process."""
        self._connection.send(("stored",))
        events, compactions = self._answer("stored")
        return events, compactions

    async def close(self) -> None:
        """Stops the process (its service closed first) and waits for it."""
        try:
            if not self._failed and self._process.is_alive():
                self._connection.send(("stop",))
                self._answer("stopped")
        finally:
            self._connection.close()
            self._process.join(30)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()
