"""What the model is asked on the e2e bench's app when a turn loads the
whole session, a lean one (`install(loading="lean")`), or google-adk's own
cut (`RunConfig(get_session_config=GetSessionConfig(num_recent_events=N))`,
which google-adk's docstring recommends beside compaction).

`compare_loads` grows the app's session by real turns to a size
(`_tooling.e2e.grow`, as the bench does), copies it once per loading into
an `InMemorySessionService`, runs the same next turns on each copy through
google-adk's `Runner` (ids from a counter, time from a clock stepping on
from the session's last event) and returns, per loading, every request the
model received and the size of the first one. `tests/lean/test_inmemory_recent.py`
checks it; `benches/lean_vs_recent.py` prints it as a table.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import adk_fastcompact
from adk_fastcompact._tooling.e2e import grow
from adk_fastcompact._tooling.e2e_app import (
    SESSION_ID,
    USER_ID,
    Script,
    build_runner,
    request_chars,
    snapshot_request,
)
from adk_fastcompact._tooling.e2e_stores import Store, close_service, open_service
from google.adk.agents.run_config import RunConfig
from google.adk.events.event import Event
from google.adk.models.llm_request import LlmRequest
from google.adk.sessions.base_session_service import GetSessionConfig

from support.runner_harness import EXPECTED_WARNINGS, deterministic

#: The loadings compared: the whole session (plain google-adk), lean, and
#: google-adk's `num_recent_events` cut (its count appended: "recent-50").
FULL, LEAN = "full", "lean"


def recent(count: int) -> str:
    return f"recent-{count}"


@dataclass
class Loaded:
    """One loading's turns."""

    #: Every request the model received, in order (`snapshot_request`).
    requests: list[str] = field(default_factory=list)
    #: The first request's contents, the summaries among them and its
    #: characters (`request_chars`).
    contents: int = 0
    summaries: int = 0
    chars: int = 0
    #: Events the Runner's first load held, and the stored session then.
    loaded: int = 0
    stored: int = 0


def _is_summary(text: str) -> bool:
    # `e2e_app.SummaryWriter`'s summaries, however the prompt presents them.
    return "Summary of " in text and " events. " in text


def _measure(first: LlmRequest, out: Loaded) -> None:
    out.contents = len(first.contents)
    out.summaries = sum(
        any(_is_summary(part.text or "") for part in content.parts or ())
        for content in first.contents
    )
    out.chars = request_chars(first)


@contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        for category, message in EXPECTED_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=category)
        yield


async def _side(
    store: Store, loading: str, seed: int, state: object, turns: int, after: float
) -> Loaded:
    out = Loaded()
    copied = await store.copy()
    service = open_service(copied)
    runner, llm = build_runner(service, seed)
    kind = type(service)

    async def recorded(**kwargs: Any) -> Any:
        # The class's method as it is at the call (install() patches it).
        session = await kind.get_session(service, **kwargs)
        if session is not None and not out.loaded:
            out.loaded = len(session.events)
            stored = await kind.get_session(
                service, app_name=runner.app_name, user_id=USER_ID, session_id=SESSION_ID
            )
            assert stored is not None
            out.stored = len(stored.events)
        return session

    service.get_session = recorded  # type: ignore[method-assign]
    run_config = None
    if loading.startswith("recent-"):
        count = int(loading.removeprefix("recent-"))
        run_config = RunConfig(get_session_config=GetSessionConfig(num_recent_events=count))
    script = Script(seed)
    script.rng.setstate(state)  # type: ignore[arg-type]
    ticks = itertools.count(1)
    adk_fastcompact.uninstall()
    if loading == LEAN:
        assert adk_fastcompact.install(loading="lean") is True
    try:
        with deterministic(lambda: after + 0.25 * next(ticks)):
            for _ in range(turns):
                turn = script.turn()
                llm.play(turn)
                async for _event in runner.run_async(
                    user_id=USER_ID,
                    session_id=SESSION_ID,
                    new_message=turn.message,
                    run_config=run_config,
                ):
                    pass
                requests = llm.take_requests()
                if not out.requests:
                    _measure(requests[0], out)
                out.requests.extend(snapshot_request(r) for r in requests)
    finally:
        adk_fastcompact.uninstall()
        await close_service(service)
        await store.release(copied)
    return out


def compare_loads(
    size: int, loadings: tuple[str, ...], *, turns: int = 3, seed: int = 0
) -> dict[str, Loaded]:
    """The session of the e2e app grown to `size` events, and `turns` more
    turns on a copy of it per loading (see the module docstring)."""

    async def main() -> dict[str, Loaded]:
        events, snapshots = await grow([size], seed)
        snapshot = snapshots[size]
        grown: list[Event] = events[: snapshot.events]
        store = Store("memory")
        try:
            await store.grow_to(grown)
            after = max(event.timestamp for event in grown)
            return {
                loading: await _side(store, loading, seed, snapshot.script_state, turns, after)
                for loading in loadings
            }
        finally:
            await store.close()

    with _quiet():
        return asyncio.run(main())


def table(size: int, found: dict[str, Loaded]) -> str:
    """The comparison as a plain-text table."""
    rows = [("loading", "loaded", "stored", "contents", "summaries", "chars", "same requests")]
    full = found.get(FULL)
    for name, loaded in found.items():
        same = "-" if full is None or name == FULL else str(loaded.requests == full.requests)
        rows.append(
            (
                name,
                f"{loaded.loaded:,}",
                f"{loaded.stored:,}",
                f"{loaded.contents:,}",
                f"{loaded.summaries:,}",
                f"{loaded.chars:,}",
                same,
            )
        )
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    lines = [f"e2e app, InMemorySessionService, {size:,} events: the next turn's first request"]
    for row in rows:
        lines.append("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
    return "\n".join(lines)


def as_json(size: int, found: dict[str, Loaded]) -> str:
    return json.dumps(
        {
            "events": size,
            "loadings": {
                name: {k: v for k, v in vars(loaded).items() if k != "requests"}
                for name, loaded in found.items()
            },
        },
        indent=2,
    )
