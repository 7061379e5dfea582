"""Exact mode's tracked `Runner.run_async` / `run_live` (`_underway`) through
a real Runner: a wrong call raises google-adk's `TypeError` at the call,
as google-adk's async generator functions do, and enters nothing; an
invocation counted under way is released however its generator ends
(closed before its first step, failed, cancelled, finished)."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import adk_fastcompact
import pytest
from adk_fastcompact import _underway
from google.adk.agents.live_request_queue import LiveRequestQueue
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App
from google.adk.runners import Runner
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.genai import types

from support.exact_llm import TaggingLlm
from support.exact_runs import SESSION, USER
from support.runner_harness import EXPECTED_WARNINGS

pytestmark = [
    pytest.mark.adk_2_13("exact mode"),
    pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning"),
    pytest.mark.filterwarnings("ignore:The `plugins` argument is deprecated:DeprecationWarning"),
]

#: Wrong calls of `run_async` / `run_live` (keyword arguments).
WRONG: dict[str, list[dict[str, Any]]] = {
    "run_async": [
        {"user_id": USER},  # session_id missing
        {"user_id": USER, "session_id": SESSION, "no_such_argument": 1},
    ],
    "run_live": [
        {"user_id": USER, "session_id": SESSION},  # live_request_queue missing
        {"live_request_queue": None, "no_such_argument": 1},
    ],
}


def _message(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


#: `_underway.running()` when the test began (each test counts from it, so
#: that one test's leak does not fail the next).
_base = 0


def _running() -> int:
    return _underway.running() - _base


def _runner(service: InMemorySessionService, *, slow_delay: float = 0.0) -> Runner:
    llm = TaggingLlm(model="root", slow_delay=slow_delay)
    app = App(name="exact", root_agent=LlmAgent(name="root", model=llm, instruction="Answer."))
    return Runner(app=app, session_service=service)


def _run(main: Callable[[], Any]) -> Any:
    with warnings.catch_warnings():
        for category, text in EXPECTED_WARNINGS:
            warnings.filterwarnings("ignore", message=text, category=category)
        return asyncio.run(main())


@pytest.fixture(autouse=True)
def _baseline() -> None:
    global _base
    _base = _underway.running()


@pytest.fixture
def exact() -> Iterator[None]:
    adk_fastcompact.uninstall()
    assert adk_fastcompact.install(mode="exact") is True
    yield
    adk_fastcompact.uninstall()


def _wrong_calls(runner: Runner) -> list[tuple[str, dict[str, Any], str]]:
    """`(method, keywords, the TypeError's message)` of each wrong call,
    raised at the call: a call that returns instead is an error."""
    found = []
    for name, calls in WRONG.items():
        for kwargs in calls:
            with pytest.raises(TypeError) as raised:
                getattr(runner, name)(**kwargs)
            found.append((name, kwargs, str(raised.value)))
    return found


def test_a_wrong_call_raises_google_adks_type_error_at_the_call() -> None:
    service = InMemorySessionService()
    runner = _runner(service)
    adk_fastcompact.uninstall()
    plain = _wrong_calls(runner)
    assert adk_fastcompact.install(mode="exact") is True
    try:
        assert _wrong_calls(runner) == plain
        assert _running() == 0
    finally:
        adk_fastcompact.uninstall()


@pytest.mark.usefixtures("exact")
def test_a_wrong_call_leaves_no_invocation_under_way() -> None:
    async def main() -> list[int]:
        service = InMemorySessionService()
        await service.create_session(app_name="exact", user_id=USER, session_id=SESSION)
        runner = _runner(service)
        counts = []
        for name, calls in WRONG.items():
            for kwargs in calls:
                # Raised at the call (`test_a_wrong_call_raises_google_adks_type_error_at_the_call`)
                # or, were it not, at the first step: either way nothing stays under way.
                try:
                    events = getattr(runner, name)(**kwargs)
                except TypeError:
                    pass
                else:
                    with pytest.raises(TypeError):
                        await events.__anext__()
                counts.append(_running())
        # A correct call after them is counted while it runs, and left.
        events = runner.run_async(user_id=USER, session_id=SESSION, new_message=_message("hi"))
        await events.__anext__()
        counts.append(_running())
        async for _ in events:
            pass
        counts.append(_running())
        return counts

    assert _run(main) == [0, 0, 0, 0, 1, 0]


@pytest.mark.usefixtures("exact")
def test_a_generator_closed_before_its_first_step_enters_nothing() -> None:
    async def main() -> list[int]:
        service = InMemorySessionService()
        await service.create_session(app_name="exact", user_id=USER, session_id=SESSION)
        runner = _runner(service)
        counts = []
        events = runner.run_async(user_id=USER, session_id=SESSION, new_message=_message("hi"))
        counts.append(_running())
        await events.aclose()
        counts.append(_running())
        live = runner.run_live(
            user_id=USER, session_id=SESSION, live_request_queue=LiveRequestQueue()
        )
        counts.append(_running())
        await live.aclose()
        counts.append(_running())
        # Nothing ran: the session holds no event.
        session = await service.get_session(app_name="exact", user_id=USER, session_id=SESSION)
        assert session is not None
        counts.append(len(session.events))
        return counts

    assert _run(main) == [0, 0, 0, 0, 0]


@pytest.mark.usefixtures("exact")
def test_an_invocation_is_left_when_it_fails_or_is_cancelled() -> None:
    async def main() -> list[int]:
        service = InMemorySessionService()
        await service.create_session(app_name="exact", user_id=USER, session_id=SESSION)
        # An answer that takes a minute: cancelled long before it comes.
        runner = _runner(service, slow_delay=60.0)
        counts = []
        # Failed: no such session.
        with pytest.raises(ValueError, match="not found"):
            async for _ in runner.run_async(
                user_id=USER, session_id="missing", new_message=_message("hi")
            ):
                pass
        counts.append(_running())

        async def consume() -> None:
            async for _ in runner.run_async(
                user_id=USER, session_id=SESSION, new_message=_message("answer slowly")
            ):
                pass

        task = asyncio.ensure_future(consume())
        while _running() == 0:
            await asyncio.sleep(0)
        counts.append(_running())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        counts.append(_running())
        return counts

    assert _run(main) == [0, 1, 0]
