"""Scenarios the lean-loading tests add to the ground-truth ones
(`truth_scenarios.SCENARIOS`): overlapping invocations ordered by gates
rather than by wall-clock sleeps, so a run is a pure function of the code
(the ground truth's "overlap" and "under-way" race real sleeps, and two runs
of the same code, accelerated or not, can interleave differently), and a
late answer to a long-running call followed by one more turn.

Each is (app factory, conversation), the conversation taking the Runner and
its service, as `truth_scenarios.SCENARIOS`' do.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from pydantic import PrivateAttr

from support.exact_llm import TaggingLlm
from support.ground_truth import config_with, send
from support.truth_scenarios import OVERLAP


class GatedLlm(TaggingLlm):
    """A `TaggingLlm` that answers a question saying "slowly" only once its
    gate is open (`gate`); its request is made, and its reply event stamped,
    before it waits. Without a gate it answers at once; with `opens`, its
    answer to any other question opens the gate."""

    _gate: asyncio.Event | None = PrivateAttr(default=None)
    _opens: bool = PrivateAttr(default=True)

    def gate(self, gate: asyncio.Event, *, opens: bool) -> None:
        self._gate = gate
        self._opens = opens

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = llm_request.contents
        last = "".join(p.text or "" for p in contents[-1].parts or []) if contents else ""
        gate = self._gate
        if gate is not None and "slowly" in last:
            await gate.wait()
        async for response in super().generate_content_async(llm_request, stream):
            yield response
        if gate is not None and self._opens and "slowly" not in last:
            # The other invocation's model has answered: the slow one may.
            gate.set()


def gated_app(name: str) -> App:
    agent = LlmAgent(name="root", model=GatedLlm(model="root"), instruction="Answer.")
    config = config_with(OVERLAP, TaggingLlm(model="summarizer"))
    return App(name=name, root_agent=agent, events_compaction_config=config)


def _llm(runner: Runner) -> GatedLlm:
    model = runner.app.root_agent.model  # type: ignore[union-attr]
    assert isinstance(model, GatedLlm)
    return model


async def interleaved_chat(runner: Runner, service: BaseSessionService) -> None:
    """Pairs of invocations at once: the slow one's model answers after the
    other's did, while the other goes on (its reply appended, its
    compaction) around it."""
    del service
    for k in range(1, 17, 2):
        _llm(runner).gate(asyncio.Event(), opens=True)
        await asyncio.gather(
            send(runner, f"<<u{k}>> answer slowly"), send(runner, f"<<u{k + 1}>> second")
        )


async def under_way_chat(runner: Runner, service: BaseSessionService) -> None:
    """Pairs of invocations at once: the slow one's model answers only after
    the other invocation ran to its end and compacted (its window holding
    the slow one's question); the slow reply, stamped when its call began,
    is stored after that compaction."""
    del service
    for k in range(1, 13, 2):
        gate = asyncio.Event()
        _llm(runner).gate(gate, opens=False)

        async def second(k: int = k, gate: asyncio.Event = gate) -> None:
            await send(runner, f"<<u{k + 1}>> second")
            # Opened here, not by the model: the run with its compaction is over.
            gate.set()

        await asyncio.gather(send(runner, f"<<u{k}>> answer slowly"), second())


#: name -> (app factory, conversation).
LEAN_SCENARIOS: dict[str, tuple[Any, Any]] = {
    "interleaved": (gated_app, interleaved_chat),
    "under-way-gated": (gated_app, under_way_chat),
}
