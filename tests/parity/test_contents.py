"""The prompt google-adk builds is the same with and without `install()`.

`_get_contents` (and `_get_current_turn_contents`, which calls it on a
suffix) runs rewinds, branch and scope filtering, compaction, call recovery
and pairing repair over a session; the resulting `types.Content` list must
dump identically, or raise the same exception, whether google-adk runs its
own helpers or ours.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Iterator
from typing import Any

import adk_fastcompact as fc
import pytest
from adk_fastcompact import _reference
from adk_fastcompact._patch import replacement
from hypothesis import given, note, settings
from hypothesis import strategies as st

from support.compare import adk_module, assert_same_error, call, deep_equal, examples
from support.strategies import AGENTS, BRANCHES, SCOPES, describe, random_session, sessions

pytestmark = pytest.mark.usefixtures("index_mode")

# The contents processor's module (moved in 2.10).
_contents = adk_module(
    "google.adk.flows.llm_flows.context._contents", "google.adk.flows.llm_flows.contents"
)

# google-adk 1.x builds prompts without isolation scopes.
SCOPED = "isolation_scope" in inspect.signature(_contents._get_contents).parameters

SEEDED_SESSIONS = 300
HYPOTHESIS_EXAMPLES = examples(100)

Params = dict[str, Any]


@pytest.fixture
def patched() -> Iterator[Callable[[], None]]:
    """Hands out `install`; the finalizer always restores google-adk."""

    def install() -> None:
        assert fc.install() is True
        assert _contents._process_compaction_events is replacement("process_compaction_events")
        if "apply_rewinds" in _reference.locations():  # rewinds came in 2.5
            assert _contents._apply_rewinds is replacement("apply_rewinds")

    try:
        yield install
    finally:
        fc.uninstall()
        assert fc.installed() is None


def draw_params(rng: random.Random) -> Params:
    return {
        "current_branch": rng.choice((None, None, *BRANCHES)),
        "agent_name": rng.choice(AGENTS),
        "isolation_scope": rng.choice((None, None, None, *SCOPES)),
        "preserve_function_call_ids": rng.random() < 0.3,
    }


def build(events: list[Any], params: Params, current_turn: bool) -> list[Any]:
    builder = _contents._get_current_turn_contents if current_turn else None
    builder = builder or _contents._get_contents
    params = dict(params)
    if not SCOPED:
        del params["isolation_scope"]
    contents = builder(params.pop("current_branch"), events, **params)
    return [content.model_dump() for content in contents]


def assert_same_prompt(ours: Any, orig: Any) -> bool:
    if not assert_same_error(ours, orig):
        return False
    assert deep_equal(ours.value, orig.value), f"{ours.value!r}\n!=\n{orig.value!r}"
    return True


def test_seeded_sessions(patched: Callable[[], None]) -> None:
    cases = []
    for seed in range(SEEDED_SESSIONS):
        rng = random.Random(seed)
        events = random_session(seed, max_events=200, realistic=seed % 3 != 0).events
        params = draw_params(rng)
        current_turn = rng.random() < 0.15
        cases.append((seed, events, params, current_turn))

    # google-adk's own prompts first, then ours with everything patched.
    baseline = [call(build, ev, params, ct) for _, ev, params, ct in cases]
    patched()
    built = compacted = 0
    for (seed, events, params, current_turn), orig in zip(cases, baseline, strict=True):
        ours = call(build, events, params, current_turn)
        try:
            if assert_same_prompt(ours, orig):
                built += 1
                compacted += "summary of" in repr(orig.value)
        except AssertionError as error:
            raise AssertionError(
                f"seed {seed} params {params} current_turn={current_turn}:\n{describe(events)}"
            ) from error
    assert built >= SEEDED_SESSIONS * 0.8
    assert compacted >= SEEDED_SESSIONS * 0.3


@settings(max_examples=HYPOTHESIS_EXAMPLES)
@given(
    session=sessions(max_events=40),
    current_branch=st.sampled_from((None, *BRANCHES)),
    agent_name=st.sampled_from(AGENTS),
    isolation_scope=st.sampled_from((None, *SCOPES)),
)
def test_hypothesis_sessions(
    session: Any,
    current_branch: str | None,
    agent_name: str,
    isolation_scope: str | None,
) -> None:
    note(describe(session.events))
    params: Params = {
        "current_branch": current_branch,
        "agent_name": agent_name,
        "isolation_scope": isolation_scope,
    }
    orig = call(build, session.events, params, False)
    try:
        assert fc.install() is True
        ours = call(build, session.events, params, False)
    finally:
        fc.uninstall()
    assert_same_prompt(ours, orig)


def test_patched_prompt_really_runs_ours(
    patched: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the test above against comparing google-adk with itself."""
    seen: list[str] = []
    real = fc._filtering._native.process_compaction_events

    def spy(*args: Any) -> Any:
        seen.append("native")
        return real(*args)

    monkeypatch.setattr(fc._filtering._native, "process_compaction_events", spy)
    patched()
    events = random_session(7, max_events=200, realistic=True).events
    assert any(e.actions.compaction for e in events)
    _contents._get_contents(None, events, "root")
    assert seen
