"""End-to-end: a real Runner, with and without `install()`, must behave identically.

An `LlmAgent` app (tools: a small calculator, a catalogue lookup, a tool with
large JSON responses, a `LongRunningFunctionTool`, an `AgentTool` around a
`researcher` agent, and a `helper` sub-agent reached by `transfer_to_agent`)
runs a long seeded conversation through `Runner.run_async`, driven by the
scripted models of `scripted_llm.py`, with compaction configured on the
`App` and summaries written by google-adk's `LlmEventSummarizer` over a
scripted model. Long-running jobs are answered several turns later by a user
message carrying the `FunctionResponse`, and now and then the newest
invocation is rewound.

Ids come from a counter (`google.adk.platform.uuid.set_id_provider`) and time
from a fixed-step clock (`google.adk.platform.time.set_time_provider`, every
reading advances it), so a conversation is a pure function of the code that
runs it. The same conversation runs once on google-adk's own code and once
after `adk_fastcompact.install()`; every request every model saw, every event
the runner yielded and the stored session at the end must be equal, and so
must the sequence of compaction triggers.

It runs on both session services google-adk ships in-process:
`InMemorySessionService` (140 user messages) and `SqliteSessionService` on a
`tmp_path` file (100, a cheaper and a cold-load path: every turn reloads the
events), under three configs: sliding window, token threshold, and both.
`tests/e2e/test_postgres.py` runs the same (`run_both`) on `DatabaseSessionService`
over a PostgreSQL server.
The test also checks that the comparison is not vacuous: several summaries
are stored (from both triggers when both are configured), most root prompts
carry a summary, the newest invocation was rewound at least once, a
long-running call was resumed after a stored compaction covered it and came
back into the prompt that read its result, and the installed run went
through each Rust entry point on this path without a single decline.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.conversation import CONFIGS, run_both
from support.runner_harness import Probes, install_probes


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> Probes:
    """Counts the calls into the Rust core and records the compaction triggers."""
    return install_probes(monkeypatch)


@pytest.mark.parametrize("service_kind", ["memory", "sqlite"])
@pytest.mark.parametrize("config_name", list(CONFIGS))
def test_runner_conversation_is_identical_with_install(
    service_kind: str,
    config_name: str,
    tmp_path: Path,
    probes: Probes,
) -> None:
    run_both(service_kind, config_name, tmp_path / "plain.db", tmp_path / "fast.db", probes)
