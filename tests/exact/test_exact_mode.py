"""Exact mode through a real `Runner`: the issue's scenarios, each losing
and duplicating nothing and staying bounded in exact mode, each shown to
go wrong with google-adk's own code (parity mode reproduces that exactly),
and every session written in exact mode read back by google-adk's own
prompt assembly without loss.

Every turn's first model request is checked against the session as stored
before it (`exact_llm.Ledger`): no tag absent from the prompt and from
every summary in it, none raw and summarized at once.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from typing import Any

import adk_fastcompact
import pytest
from adk_fastcompact import _exact
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.events.event import Event
from google.adk.runners import Runner
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.genai import types

from support.exact_llm import TaggingLlm
from support.exact_runs import SESSION, USER, assert_exact, chat, run
from support.runner_harness import EXPECTED_WARNINGS

pytestmark = [
    pytest.mark.adk_2_13("exact mode"),
    pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning"),
    pytest.mark.filterwarnings("ignore:The `plugins` argument is deprecated:DeprecationWarning"),
]


def test_both_strategies_stay_bounded_over_300_turns() -> None:
    # Answers outweigh the summary, so the sliding window fires every two
    # invocations; five retained events keep google-adk's tail retention
    # from ever firing, and its sliding summaries never merge.
    config = EventsCompactionConfig(
        compaction_interval=2, overlap_size=0, token_threshold=600, event_retention_size=5
    )
    exact = run(config, chat(300), mode="exact", answer_words=100)
    assert_exact(exact)
    late = max(t.chars for t in exact.turns[200:])
    assert late <= 1.25 * max(t.chars for t in exact.turns[50:100])
    # The summaries reaching the model: as many late as early (they pile up
    # only until the prompt reaches the threshold and tail retention rolls
    # them into one).
    assert max(t.summaries for t in exact.turns[200:]) <= max(
        t.summaries for t in exact.turns[50:100]
    )
    plain = run(config, chat(100), mode=None, answer_words=100)
    assert plain.turns[-1].chars > 2 * late
    assert plain.turns[-1].summaries > 20


def test_tail_retention_near_the_threshold_does_not_fire_every_turn() -> None:
    # The rolling summary (~400 chars) alone is near the threshold.
    config = EventsCompactionConfig(token_threshold=150, event_retention_size=2)
    exact = run(config, chat(120), mode="exact")
    assert_exact(exact)
    assert exact.compactions < 0.5 * len(exact.turns)
    assert max(t.chars for t in exact.turns[60:]) <= 1.25 * max(t.chars for t in exact.turns[20:60])
    assert max(t.summaries for t in exact.turns[10:]) == 1
    plain = run(config, chat(120), mode=None)
    assert plain.compactions > 0.75 * len(plain.turns)


def test_a_long_running_call_left_pending_for_40_turns() -> None:
    config = EventsCompactionConfig(
        compaction_interval=2, overlap_size=0, token_threshold=400, event_retention_size=2
    )
    messages = ["<<u0>> please call the job", *chat(40)]
    exact = run(config, messages, mode="exact")
    assert_exact(exact)
    assert max(t.chars for t in exact.turns[30:]) <= 1.5 * max(t.chars for t in exact.turns[5:15])
    plain = run(config, messages, mode=None)
    assert plain.turns[-1].chars > 2 * exact.turns[-1].chars


def test_tied_timestamps_lose_nothing() -> None:
    # Every two clock readings share a tick: questions tie with replies.
    config = EventsCompactionConfig(
        compaction_interval=2, overlap_size=1, token_threshold=300, event_retention_size=1
    )
    messages = chat(40)
    exact = run(config, messages, mode="exact", ties=2)
    assert_exact(exact)
    plain = run(config, messages, mode=None, ties=2)
    assert plain.lost or plain.duplicated


def test_overlapping_invocations_lose_nothing() -> None:
    # Two run_async calls at once on one in-memory session, again and again:
    # each invocation's copy lacks the other's events, and the summarizer
    # runs while the other appends. (google-adk's SQLite service refuses
    # such overlap itself with StaleSessionError on the invocations' own
    # appends, in either mode.)
    config = EventsCompactionConfig(compaction_interval=2, overlap_size=0)
    messages: list[str | tuple[str, ...]] = [
        (f"<<u{k}>> first", f"<<u{k + 1}>> second") for k in range(1, 30, 2)
    ]
    timing: dict[str, Any] = {"delay": 0.002, "summary_delay": 0.003}
    exact = run(config, messages, mode="exact", **timing)
    assert exact.lost == set()
    assert exact.plain_lost == set()
    assert exact.records == exact.compactions > 0
    plain = run(config, messages, mode=None, **timing)
    assert plain.lost


def _stored_inside_earlier_interval(events: list[Event]) -> list[Event]:
    """The events stored after a compaction and stamped inside the interval
    its summary was made over (its record's, or its bounds'): the ones plain
    google-adk hid when exact mode wrote that interval as the bounds."""
    out = []
    for pos, event in enumerate(events):
        for compaction_event in events[:pos]:
            compaction = compaction_event.actions.compaction if compaction_event.actions else None
            if compaction is None or event.actions.compaction is not None:
                continue
            record = _exact.read_record(compaction_event) or {}
            start = record.get("start", compaction.start_timestamp)
            end = record.get("end", compaction.end_timestamp)
            if start <= event.timestamp <= end:
                out.append(event)
                break
    return out


def test_a_question_in_the_tick_of_the_last_summarized_event_is_not_hidden() -> None:
    # A coarse clock (a tick every 12 readings, as Windows' ~15 ms
    # time.time() is to a fast turn): the next question is often stamped in
    # the very tick of the last event a sliding-window summary was made
    # over, and is stored after that summary. google-adk reads the bounds
    # as `start <= ts <= end`, so bounds that end at that stamp hide it.
    config = EventsCompactionConfig(compaction_interval=2, overlap_size=0)
    exact = run(config, chat(30), mode="exact", ties=12)
    assert _stored_inside_earlier_interval(exact.final), "the clock tie did not happen"
    assert_exact(exact)


def test_a_reply_of_an_invocation_under_way_is_not_hidden() -> None:
    # Invocation A's model call is slow; B runs, ends and compacts
    # meanwhile, its window holding A's question. A's reply is stamped when
    # A's call began (before B's events) and stored after B's compaction.
    config = EventsCompactionConfig(compaction_interval=2, overlap_size=0)
    messages: list[str | tuple[str, ...]] = [
        (f"<<u{k}>> answer slowly", f"<<u{k + 1}>> second") for k in range(1, 12, 2)
    ]
    exact = run(config, messages, mode="exact", slow_delay=0.05)
    late = _stored_inside_earlier_interval(exact.final)
    assert any("slowly" not in json.dumps(e.content.model_dump(mode="json")) for e in late), (
        "no reply of a slow invocation was stored after a compaction spanning its stamp"
    )
    assert exact.lost == set()
    assert exact.plain_lost == set()
    assert exact.records == exact.compactions > 0


def test_exact_mode_knows_the_invocations_under_way() -> None:
    # install(mode="exact") wraps Runner.run_async (and run_live) so that a compaction knows
    # which other invocations of its session are under way; each leaves
    # when its generator finishes, fails or is closed early, and
    # uninstall() puts google-adk's method back.
    from adk_fastcompact import _underway

    original = Runner.__dict__["run_async"]
    live = Runner.__dict__["run_live"]
    adk_fastcompact.uninstall()
    assert adk_fastcompact.install(mode="exact") is True
    try:
        assert Runner.__dict__["run_async"] is not original
        assert Runner.__dict__["run_live"] is not live
        llm = TaggingLlm(model="root", slow_delay=0.05)
        app = App(name="exact", root_agent=LlmAgent(name="root", model=llm, instruction="Answer."))

        def message(text: str) -> types.Content:
            return types.Content(role="user", parts=[types.Part(text=text)])

        async def main() -> tuple[int, int, int, int]:
            service = InMemorySessionService()
            await service.create_session(app_name=app.name, user_id=USER, session_id=SESSION)
            runner = Runner(app=app, session_service=service)

            async def one(text: str) -> None:
                async for _ in runner.run_async(
                    user_id=USER, session_id=SESSION, new_message=message(text)
                ):
                    pass

            task = asyncio.ensure_future(one("<<u1>> answer slowly"))
            await asyncio.sleep(0.02)
            during = _underway.running()
            await task
            after = _underway.running()
            # Closed after its first event.
            events = runner.run_async(
                user_id=USER, session_id=SESSION, new_message=message("<<u2>> hi")
            )
            await events.__anext__()
            opened = _underway.running()
            await events.aclose()
            # Failed: no such session.
            with pytest.raises(Exception, match="not found"):
                async for _ in runner.run_async(
                    user_id=USER, session_id="missing", new_message=message("<<u3>> hi")
                ):
                    pass
            return during, after, opened, _underway.running()

        with warnings.catch_warnings():
            for category, text in EXPECTED_WARNINGS:
                warnings.filterwarnings("ignore", message=text, category=category)
            assert asyncio.run(main()) == (1, 0, 1, 0)
    finally:
        adk_fastcompact.uninstall()
    assert Runner.__dict__["run_async"] is original
    assert Runner.__dict__["run_live"] is live
