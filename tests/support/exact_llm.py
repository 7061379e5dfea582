"""A tagging model and the ledger that checks exact mode's invariants.

Every piece of conversation the `TaggingLlm` writes, and every user message
the tests send, carries a unique tag (`<<u3>>`, `<<m3>>`, `<<c3>>`,
`<<r3>>`). Its summarizer policy answers with a summary of realistic length
(about 400 characters) that names itself (`<<s5>>`) and records which tags
its input held, directly or through an earlier summary it was handed (a
rolling seed), so the ledger knows what every summary stands for.

`Ledger.check(request, expected)` then says, of one model request, which
expected tags are absent from it and from every summary in it (lost), and
which are present raw and inside a summary in it at once (duplicated).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import AsyncGenerator, Iterable
from dataclasses import dataclass, field
from typing import Any

from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import PrivateAttr

TAG = re.compile(r"<<([a-z]\d+[a-z]?)>>")
SUMMARY = re.compile(r"<<(s\d+)>>")
FILLER = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


def tags(text: str) -> set[str]:
    return set(TAG.findall(text))


def event_tags(event: Event) -> set[str]:
    """The conversation tags an event carries (none for a compaction)."""
    if event.actions and event.actions.compaction:
        return set()
    if event.content is None:
        return set()
    return tags(event.content.model_dump_json())


@dataclass
class Ledger:
    """What each summary stands for, by its own tag."""

    stands_for: dict[str, set[str]] = field(default_factory=dict)

    def expand(self, found: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for tag in found:
            if tag.startswith("s"):
                out |= self.stands_for.get(tag, set())
            else:
                out.add(tag)
        return out

    def check(
        self, contents: list[dict[str, Any]], expected: set[str]
    ) -> tuple[set[str], set[str]]:
        """(lost, duplicated) tags of one request's contents."""
        raw: set[str] = set()
        summarized: set[str] = set()
        for content in contents:
            text = json.dumps(content)
            names = SUMMARY.findall(text)
            if names:
                for name in names:
                    summarized |= self.stands_for.get(name, set())
            else:
                raw |= tags(text)
        lost = expected - raw - summarized
        duplicated = raw & summarized
        return lost, duplicated


class TaggingLlm(BaseLlm):
    """`model="root"` answers, `model="summarizer"` summarizes; see the module doc.

    `delay` (seconds) is awaited before each answer, and `summary_delay`
    before each summary, so that concurrent invocations interleave;
    `slow_delay` instead of `delay` before answering a question that says
    "slowly"."""

    delay: float = 0.0
    slow_delay: float = 0.0
    summary_delay: float = 0.0
    summary_chars: int = 400
    answer_words: int = 0
    #: Seconds the test's clock moves on during each call (see `pace`).
    latency: float = 0.0
    _jump: Any = PrivateAttr(default=None)
    _ledger: Ledger = PrivateAttr(default_factory=Ledger)
    _requests: list[list[dict[str, Any]]] = PrivateAttr(default_factory=list)
    _count: int = PrivateAttr(default=0)

    @property
    def ledger(self) -> Ledger:
        return self._ledger

    @property
    def requests(self) -> list[list[dict[str, Any]]]:
        """The contents of every answering request, as JSON dumps."""
        return self._requests

    def pace(self, jump: Any) -> None:
        """Each call moves the test's clock on by `latency` (`jump(seconds)`),
        after its request and before its reply: as a model's reply is
        stamped when its call began, the next event is stamped that much
        later."""
        self._jump = jump

    def share(self, other: TaggingLlm) -> None:
        """Use `other`'s ledger (the summarizer's), so answers can check it."""
        self._ledger = other._ledger

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        del stream
        self._count += 1
        n = self._count
        contents = llm_request.contents
        if self.model == "summarizer":
            if self.summary_delay:
                await asyncio.sleep(self.summary_delay)
            prompt = "".join(p.text or "" for c in contents for p in c.parts or [])
            name = f"s{n}"
            self._ledger.stands_for[name] = self._ledger.expand(TAG.findall(prompt))
            rng = random.Random(name)
            filler = " ".join(rng.choice(FILLER) for _ in range(self.summary_chars // 6))
            parts = [types.Part(text=f"<<{name}>> summary: {filler}")]
        else:
            self._requests.append([c.model_dump(mode="json", exclude_none=True) for c in contents])
            last = "".join(p.text or "" for p in contents[-1].parts or []) if contents else ""
            delay = self.slow_delay if "slowly" in last else self.delay
            if delay:
                await asyncio.sleep(delay)
            parts = self._answer(contents, n)
        size = sum(len(c.model_dump_json(exclude_none=True)) for c in contents)
        if self._jump is not None and self.latency:
            self._jump(self.latency)
        yield LlmResponse(
            content=types.Content(role="model", parts=parts),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=size // 4, candidates_token_count=20, total_token_count=size // 4
            ),
        )

    def _answer(self, contents: list[types.Content], n: int) -> list[types.Part]:
        last = contents[-1]
        text = "".join(p.text or "" for p in last.parts or [])
        responded = [p.function_response for p in last.parts or [] if p.function_response]
        if responded:
            found = sorted(tags(json.dumps(responded[0].response)))
            turn = found[0][1:] if found else f"x{n}"
            return [types.Part(text=f"<<m{turn}b>> read the tool: {' '.join(FILLER[:6])}")]
        match = re.search(r"<<u(\d+)>>", text)
        turn = match.group(1) if match else f"{n}"
        if "call the job" in text:
            return [
                types.Part(
                    function_call=types.FunctionCall(name="start_job", args={"job": f"<<c{turn}>>"})
                )
            ]
        if "call the tool" in text:
            return [
                types.Part(
                    function_call=types.FunctionCall(name="lookup", args={"key": f"<<c{turn}>>"})
                )
            ]
        words = self.answer_words or 3 + n % 8
        filler = " ".join(FILLER[k % len(FILLER)] for k in range(n, n + words))
        return [types.Part(text=f"<<m{turn}>> answer: {filler}")]


def lookup(key: str) -> dict[str, Any]:
    """Looks a key up."""
    return {"result": key.replace("<<c", "<<r")}


def start_job(job: str) -> None:
    """Starts a job whose result arrives later (here: never): returning
    nothing leaves the long-running call open."""
    del job
