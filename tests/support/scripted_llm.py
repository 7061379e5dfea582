"""A scripted, recording in-process model and the tools of the end-to-end app.

`ScriptedLlm` is a real `google.adk.models.base_llm.BaseLlm`: the Runner
builds requests for it exactly as it would for Gemini, and it answers from a
fixed policy, so a conversation is a pure function of the requests it sees.
Every request is recorded (`model_dump` of the whole `LlmRequest`: contents,
system instruction, tool declarations), and so is every response.

The policy reads the newest driver message ("turn N: <action> ..." text from
the user) still present in the request and what came after it:

- `root`: on a driver message it does what the action asks (answer, call one
  tool, call several tools at once, call the large-JSON tool, start a
  long-running job, ask the `researcher` agent tool, transfer to `helper`);
  after tool responses it answers in text, except the `chain` action, which
  makes a second round of calls first.
- `helper` (a sub-agent reached by `transfer_to_agent`): answers (with one
  tool round) while the driver asks for it, and transfers back to `root` as
  soon as the driver asks for something else.
- `researcher` (behind an `AgentTool`): answers in text.
- `summarizer`: writes a summary whose length is drawn from the seed.

Text is drawn from `random.Random` seeded with a string (stable across
processes); every response reports `usage_metadata.prompt_token_count`, the
request's serialized size over four, so token-threshold compaction sees a
prompt that grows with the conversation and shrinks after a summary.
"""

from __future__ import annotations

import random
import re
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pydantic import PrivateAttr

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
    "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()

#: What the driver can ask for on a text turn.
ACTIONS = ("chat", "tool", "chain", "parallel", "big", "long", "long2", "agent", "transfer")

_DRIVER = re.compile(r"^turn (\d+): (\w+)")


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def driver_turn(contents: list[types.Content]) -> tuple[int, str] | None:
    """(turn, action) of the newest driver message still in the request."""
    for content in reversed(contents):
        if content.role != "user":
            continue
        for part in content.parts or []:
            match = _DRIVER.match(part.text or "")
            if match:
                return int(match.group(1)), match.group(2)
    return None


def rounds_since_driver(contents: list[types.Content]) -> int:
    """How many tool rounds the model made after the newest driver message."""
    rounds = 0
    for content in reversed(contents):
        if content.role == "user" and any(_DRIVER.match(p.text or "") for p in content.parts or []):
            break
        if content.role == "model" and any(p.function_call for p in content.parts or []):
            rounds += 1
    return rounds


def _call(name: str, **args: Any) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=args))


def _text(text: str) -> list[types.Part]:
    return [types.Part(text=text)]


class RecordingLlm(BaseLlm):
    """A model that keeps every request and response it saw (as JSON dumps);
    `seed` seeds its text."""

    seed: str = "0"
    _requests: list[dict[str, Any]] = PrivateAttr(default_factory=list)
    _responses: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._requests

    @property
    def responses(self) -> list[dict[str, Any]]:
        return self._responses


class ScriptedLlm(RecordingLlm):
    """A deterministic model; `model` names its policy (see the module doc)."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        del stream
        self._requests.append(llm_request.model_dump(mode="json"))
        n = len(self._requests)
        rng = random.Random(f"{self.seed}/{self.model}/{n}")
        parts = getattr(self, f"_{self.model}")(llm_request.contents, rng, n)
        size = sum(len(c.model_dump_json(exclude_none=True)) for c in llm_request.contents) + len(
            str(llm_request.config.system_instruction or "")
        )
        response = LlmResponse(
            content=types.Content(role="model", parts=parts),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=size // 4,
                candidates_token_count=8 + rng.randrange(40),
                total_token_count=size // 4 + 48,
            ),
        )
        self._responses.append(response.model_dump(mode="json"))
        yield response

    # --- policies ---

    def _root(self, contents: list[types.Content], rng: random.Random, n: int) -> list[types.Part]:
        last = contents[-1] if contents else None
        turn = driver_turn(contents)
        action = turn[1] if turn else "chat"
        tag = f"t{turn[0]}" if turn else "t?"
        answered = last is not None and any(p.function_response for p in last.parts or [])
        if answered:
            if action == "chain" and rounds_since_driver(contents) == 1:
                return [_call("calc", a=rng.randrange(100), b=rng.randrange(100), op="mul")]
            names = sorted(
                {p.function_response.name or "" for p in last.parts or [] if p.function_response}
            )
            return _text(f"root {tag} read {', '.join(names)}: {words(rng, 6 + rng.randrange(30))}")
        if action == "tool":
            return [_call("calc", a=rng.randrange(1000), b=rng.randrange(1000), op="add")]
        if action == "chain":
            return [_call("lookup", key=words(rng, 1))]
        if action == "parallel":
            calls = [_call("lookup", key=words(rng, 1)) for _ in range(2 + rng.randrange(3))]
            calls.append(_call("calc", a=rng.randrange(50), b=rng.randrange(50), op="sub"))
            return calls
        if action == "big":
            return [_call("big_report", rows=20 + rng.randrange(60), topic=words(rng, 1))]
        if action == "long":
            return [_call("start_job", job=f"{tag}-{words(rng, 1)}")]
        if action == "long2":
            return [
                _call("start_job", job=f"{tag}-a"),
                _call("lookup", key=words(rng, 1)),
                _call("start_job", job=f"{tag}-b"),
            ]
        if action == "agent":
            return [_call("researcher", request=f"{tag} {words(rng, 5)}")]
        if action == "transfer":
            return [_call("transfer_to_agent", agent_name="helper")]
        return _text(f"root {tag}: {words(rng, 4 + rng.randrange(40))}")

    def _helper(
        self, contents: list[types.Content], rng: random.Random, n: int
    ) -> list[types.Part]:
        last = contents[-1] if contents else None
        turn = driver_turn(contents)
        if turn is None or turn[1] != "transfer":
            return [_call("transfer_to_agent", agent_name="root")]
        if last is not None and any(p.function_response for p in last.parts or []):
            return _text(f"helper t{turn[0]} answered: {words(rng, 10 + rng.randrange(20))}")
        if rng.random() < 0.5:
            return [_call("lookup", key=words(rng, 1))]
        return _text(f"helper t{turn[0]}: {words(rng, 5 + rng.randrange(20))}")

    def _researcher(
        self, contents: list[types.Content], rng: random.Random, n: int
    ) -> list[types.Part]:
        return _text(f"research {n}: {words(rng, 10 + rng.randrange(30))}")

    def _summarizer(
        self, contents: list[types.Content], rng: random.Random, n: int
    ) -> list[types.Part]:
        prompt = contents[-1].parts[0].text or "" if contents and contents[-1].parts else ""
        return _text(
            f"Conversation Language: English. Summary {n} of {len(prompt)} chars: "
            + words(rng, 5 + rng.randrange(60))
        )


# --- tools (plain functions; google-adk wraps them in FunctionTool) ---


def calc(a: int, b: int, op: str) -> dict[str, Any]:
    """Adds, subtracts or multiplies two integers."""
    value = {"add": a + b, "sub": a - b, "mul": a * b}.get(op)
    return {"op": op, "a": a, "b": b, "value": value}


def lookup(key: str) -> dict[str, Any]:
    """Looks a key up in the catalogue."""
    rng = random.Random(f"lookup/{key}")
    return {"key": key, "found": rng.random() < 0.8, "note": words(rng, 3 + rng.randrange(8))}


def big_report(rows: int, topic: str) -> dict[str, Any]:
    """Builds a large JSON report about a topic."""
    rng = random.Random(f"report/{topic}/{rows}")
    return {
        "topic": topic,
        "columns": ["id", "name", "score", "tags", "detail"],
        "rows": [
            f"{i}|{words(rng, 2)}|{rng.randrange(10_000) / 100}|{words(rng, 3)}|{words(rng, 12)}"
            for i in range(rows)
        ],
        "stats": {"total": rows, "mean": rng.randrange(10_000) / 100},
    }


def start_job(job: str, tool_context: ToolContext) -> dict[str, Any]:
    """Starts a long-running job; its result arrives later."""
    return {"status": "pending", "job": job, "ticket": tool_context.function_call_id}
