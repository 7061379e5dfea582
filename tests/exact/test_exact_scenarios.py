"""Exact mode through a real `Runner`, two more of the issue's scenarios:
a `ParallelAgent` whose slower branch is stamped before the faster one but
stored after it, and an event another invocation appends to a SQLite session
while the summarizer runs, stamped inside the window being summarized.

Each runs once in exact mode (0 events lost, 0 duplicated, bounded; the
session it writes read back by google-adk's own prompt assembly without
loss) and once with google-adk's own code, asserting the defect is there,
so the test fails if the scenario stops exercising it. The ledger is
`tests/support/exact_llm.py`'s, the bookkeeping `tests/support/exact_runs.py`'s.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from google.adk.apps.app import EventsCompactionConfig
from google.adk.events.event import Event

from support.exact_llm import event_tags
from support.exact_runs import assert_exact
from support.exact_scenarios import (
    FOREIGN,
    SQLITE_CONFIGS,
    run_parallel,
    run_sqlite_append_during_summary,
)
from support.runner_harness import install_probes

pytestmark = [
    pytest.mark.adk_2_13("exact mode"),
    pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning"),
    pytest.mark.filterwarnings("ignore:The `plugins` argument is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:ParallelAgent is deprecated:DeprecationWarning"),
]


# -- a ParallelAgent ------------------------------------------------------------------


def _stored_after_but_stamped_before(events: list[Event]) -> list[tuple[str, str]]:
    """(earlier stored, later stored) tags of consecutive replies of one
    invocation stored in the reverse order of their timestamps."""
    replies = [e for e in events if e.author in ("slow", "fast")]
    return [
        (min(event_tags(a)), min(event_tags(b)))
        for a, b in itertools.pairwise(replies)
        if a.invocation_id == b.invocation_id and b.timestamp < a.timestamp
    ]


def test_a_parallel_agent_stored_out_of_stamp_order() -> None:
    # Both strategies: the sliding window ends a range at the slow reply,
    # stamped before the fast one stored ahead of it; tail retention keeps
    # the last candidate (the slow reply) raw and ends the range at the fast
    # one, stamped after it.
    config = EventsCompactionConfig(
        compaction_interval=2, overlap_size=0, token_threshold=300, event_retention_size=1
    )
    exact, stored = run_parallel(config, 20, mode="exact")
    # Every invocation's replies are stored out of stamp order.
    assert len(_stored_after_but_stamped_before(stored)) == 20
    assert_exact(exact)
    # Bounded: two requests a turn (one per branch), the last 16 no larger
    # than those of turns 5 to 10, with at most two summaries in each.
    early = max(t.chars for t in exact.turns[8:20])
    assert max(t.chars for t in exact.turns[-16:]) <= 1.1 * early
    assert max(t.summaries for t in exact.turns) <= 2

    plain, stored = run_parallel(config, 20, mode=None)
    assert len(_stored_after_but_stamped_before(stored)) == 20
    # One branch's reply is summarized and stays raw, the other's is dropped.
    assert plain.duplicated and all(tag.endswith("f") for tag in plain.duplicated)
    assert len(plain.lost) > 5 and all(tag.endswith("s") for tag in plain.lost)
    assert plain.plain_lost >= plain.lost


# -- SQLite: another invocation appends while the summarizer runs ---------------------


@pytest.mark.parametrize("trigger", list(SQLITE_CONFIGS))
def test_sqlite_append_during_summarization(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trigger: str
) -> None:
    config = EventsCompactionConfig(**SQLITE_CONFIGS[trigger])
    probes = install_probes(monkeypatch)
    exact, foreign = run_sqlite_append_during_summary(
        tmp_path / "exact.db", config, 16, mode="exact"
    )
    assert probes.triggers[1] == trigger, probes.triggers
    assert foreign.stamp, "the second summary never came"
    assert_exact(exact)
    # The paused compaction was kept, its record's interval holds the
    # foreign event, and it names it as a hole (were it dropped instead,
    # the foreign event would be raw and `assert_exact` would still hold).
    assert foreign.record is not None
    assert foreign.record["start"] <= foreign.stamp <= foreign.record["end"]
    assert [h["i"] for h in foreign.record["holes"]] == ["e-other"]
    # Every later request shows the foreign event, raw or through a summary.
    assert foreign.later and "absent" not in foreign.later, foreign.later
    # Bounded: the last six prompts no larger than those of turns 5 to 10.
    early = max(t.chars for t in exact.turns[4:10])
    assert max(t.chars for t in exact.turns[-6:]) <= 1.25 * early
    assert max(t.summaries for t in exact.turns) <= 2

    probes.clear()
    plain, foreign = run_sqlite_append_during_summary(tmp_path / "plain.db", config, 16, mode=None)
    assert probes.triggers[1] == trigger, probes.triggers
    assert foreign.stamp, "the second summary never came"
    # google-adk's interval hides it, and no summary was handed it.
    assert foreign.interval[0] <= foreign.stamp <= foreign.interval[1]
    assert foreign.later and set(foreign.later) == {"absent"}, foreign.later
    assert FOREIGN in plain.lost and FOREIGN in plain.plain_lost
