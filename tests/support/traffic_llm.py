"""A streaming, recording in-process model shaped like real Gemini traffic.

`TrafficLlm` is a real `google.adk.models.base_llm.BaseLlm`, like
`scripted_llm.ScriptedLlm`, and answers from a fixed policy (a conversation
is a pure function of the requests it sees), but its answers carry what real
apps store:

- With `stream=True` (the Runner under `RunConfig(streaming_mode=SSE)`) it
  does what google-adk's Gemini SSE path does
  (`google/adk/models/google_llm.py`): it cuts the answer into
  `GenerateContentResponse` chunks and feeds them through google-adk's own
  `StreamingResponseAggregator`, yielding every `partial=True` chunk and then
  the aggregated response, whose content the aggregator builds as a
  `types.ModelContent`. With `stream=False` (the summarizer, the agent behind
  an `AgentTool`) it answers with a plain `types.Content`, as Gemini's
  non-streaming path does.
- Thought parts with thought signatures, a thought signature on the first
  function-call part of a parallel call, model-generated inline data,
  executable code and code results, grounding metadata, usage metadata on
  every answer, `MAX_TOKENS`/`SAFETY`-style finish errors and plain error
  responses (`error_code`/`error_message`).

The policy reads the newest driver message ("turn N: <action> ...") still in
the request, as `ScriptedLlm` does; see `root_reply` for the actions. The
tools and callbacks of the app live here too: a state- and artifact-writing
tool, a tool that needs the user's confirmation, a before-model callback that
rewrites the request (and answers from a "cache" without calling the model)
and an after-model callback that rewrites the response and writes state.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.tool_context import ToolContext
from google.adk.utils.streaming_utils import StreamingResponseAggregator
from google.genai import types

from support.scripted_llm import RecordingLlm, driver_turn, words

#: What the driver can ask the root agent for on a text turn.
ACTIONS = (
    "chat",
    "search",
    "tool",
    "parallel",
    "code",
    "image",
    "remember",
    "long",
    "confirm",
    "agent",
    "transfer",
    "fanout",
    "loop",
    "truncated",
    "error",
    "cached",
)

#: The marker the after-model callback appends to the root's text answers.
CHECKED = " [checked]"

#: The prefix of the summaries the summarizer writes.
SUMMARY = "Conversation Language: English. Summary"

MODEL_VERSION = "traffic-sse-1"


@dataclass
class Reply:
    """What a policy answers: parts, and how the answer ends."""

    parts: list[types.Part]
    grounded: bool = False
    #: A finish reason other than STOP (the aggregator turns it into an error).
    finish: types.FinishReason | None = None
    #: A plain error response (no content): (error_code, error_message).
    error: tuple[str, str] | None = None


def _signature(rng: random.Random) -> bytes:
    return f"sig-{rng.randrange(16**8):08x}".encode()


def thought(rng: random.Random, about: str) -> types.Part:
    return types.Part(
        text=f"thinking about {about}: {words(rng, 4 + rng.randrange(12))}",
        thought=True,
        thought_signature=_signature(rng),
    )


def call(name: str, **args: Any) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=args))


def text(value: str) -> types.Part:
    return types.Part(text=value)


def is_driver(content: types.Content) -> bool:
    return driver_turn([content]) is not None


def last_is_driver(contents: list[types.Content]) -> bool:
    """Whether the request ends with the driver's message itself."""
    return bool(contents) and is_driver(contents[-1])


def answered(contents: list[types.Content]) -> list[str]:
    """Names of the function responses the request ends with."""
    last = contents[-1] if contents else None
    if last is None or last.role != "user":
        return []
    return sorted({p.function_response.name or "" for p in last.parts or [] if p.function_response})


def _own_since_driver(contents: list[types.Content], prefix: str) -> int:
    """Model answers starting with `prefix` after the newest driver message."""
    found = 0
    for content in reversed(contents):
        if is_driver(content):
            break
        if content.role == "model":
            found += sum((p.text or "").startswith(prefix) for p in content.parts or [])
    return found


def _tag(contents: list[types.Content]) -> tuple[str, str]:
    turn = driver_turn(contents)
    return (f"t{turn[0]}", turn[1]) if turn else ("t?", "chat")


def root_reply(contents: list[types.Content], rng: random.Random) -> Reply:
    """The root agent: does what the newest driver message asks.

    After tool responses it answers in text (a thought first, now and then);
    the `error` and `truncated` actions only fail the step that reads the
    driver's message.
    """
    tag, action = _tag(contents)
    names = answered(contents)
    if names:
        parts = [thought(rng, tag)] if rng.random() < 0.4 else []
        parts.append(
            text(f"root {tag} read {', '.join(names)}: {words(rng, 6 + rng.randrange(24))}")
        )
        return Reply(parts)
    fresh = last_is_driver(contents)
    if action == "chat":
        return Reply([thought(rng, tag), text(f"root {tag}: {words(rng, 4 + rng.randrange(30))}")])
    if action == "search":
        return Reply(
            [text(f"root {tag} found: {words(rng, 10 + rng.randrange(20))}")], grounded=True
        )
    if action == "tool":
        return Reply([call("calc", a=rng.randrange(1000), b=rng.randrange(1000), op="add")])
    if action == "parallel":
        calls = [call("lookup", key=words(rng, 1)) for _ in range(2 + rng.randrange(2))]
        calls.append(call("calc", a=rng.randrange(50), b=rng.randrange(50), op="sub"))
        # Gemini signs the first function-call part of a parallel call.
        calls[0].thought_signature = _signature(rng)
        return Reply([types.Part(text=f"planning {tag}", thought=True), *calls])
    if action == "code":
        n = 2 + rng.randrange(20)
        return Reply(
            [
                types.Part(
                    executable_code=types.ExecutableCode(
                        language=types.Language.PYTHON, code=f"print(sum(range({n})))"
                    )
                ),
                types.Part(
                    code_execution_result=types.CodeExecutionResult(
                        outcome=types.Outcome.OUTCOME_OK, output=f"{sum(range(n))}\n"
                    )
                ),
                text(f"root {tag} computed {sum(range(n))}: {words(rng, 3 + rng.randrange(8))}"),
            ]
        )
    if action == "image":
        data = bytes(rng.randrange(256) for _ in range(32 + rng.randrange(64)))
        return Reply(
            [
                text(f"root {tag} drew: {words(rng, 3 + rng.randrange(6))}"),
                types.Part(inline_data=types.Blob(mime_type="image/png", data=data)),
            ]
        )
    if action == "remember":
        return Reply([call("remember", note=f"{tag} {words(rng, 3)}")])
    if action == "long":
        return Reply([call("start_job", job=f"{tag}-{words(rng, 1)}")])
    if action == "confirm":
        return Reply([call("transfer_funds", amount=1 + rng.randrange(500), to=words(rng, 1))])
    if action == "agent":
        return Reply([call("researcher", request=f"{tag} {words(rng, 5)}")])
    if action in ("transfer", "fanout", "loop"):
        target = {"transfer": "helper", "fanout": "fanout", "loop": "refine"}[action]
        return Reply([call("transfer_to_agent", agent_name=target)])
    if action == "truncated" and fresh:
        return Reply(
            [text(f"root {tag} starts: {words(rng, 3 + rng.randrange(6))}")],
            finish=types.FinishReason.MAX_TOKENS,
        )
    if action == "error" and fresh:
        return Reply([], error=("RESOURCE_EXHAUSTED", f"quota exceeded at {tag}"))
    return Reply([text(f"root {tag} again: {words(rng, 4 + rng.randrange(10))}")])


def helper_reply(contents: list[types.Content], rng: random.Random) -> Reply:
    """A sub-agent reached by `transfer_to_agent`: answers (with a lookup now
    and then) while the driver asks for it, and transfers back otherwise."""
    tag, action = _tag(contents)
    if action != "transfer":
        return Reply([call("transfer_to_agent", agent_name="root")])
    if answered(contents):
        return Reply([text(f"helper {tag} answered: {words(rng, 8 + rng.randrange(16))}")])
    if rng.random() < 0.5:
        return Reply([thought(rng, tag), call("lookup", key=words(rng, 1))])
    return Reply([text(f"helper {tag}: {words(rng, 5 + rng.randrange(16))}")])


def critic_reply(contents: list[types.Content], rng: random.Random, name: str) -> Reply:
    """A branch of the `fanout` ParallelAgent; `critic_a` looks something up first."""
    tag, _ = _tag(contents)
    if name == "critic_a" and not answered(contents):
        return Reply([call("lookup", key=words(rng, 1))])
    return Reply([thought(rng, tag), text(f"{name} {tag}: {words(rng, 5 + rng.randrange(16))}")])


def refiner_reply(contents: list[types.Content], rng: random.Random) -> Reply:
    """The `refine` LoopAgent's sub-agent: drafts once, then exits the loop."""
    tag, _ = _tag(contents)
    if _own_since_driver(contents, "refine draft") >= 1:
        return Reply([call("exit_loop")])
    return Reply([text(f"refine draft {tag}: {words(rng, 6 + rng.randrange(16))}")])


def _grounding(rng: random.Random) -> types.GroundingMetadata:
    topic = words(rng, 1)
    return types.GroundingMetadata(
        web_search_queries=[f"{topic} {words(rng, 2)}"],
        grounding_chunks=[
            types.GroundingChunk(
                web=types.GroundingChunkWeb(uri=f"https://example.com/{topic}", title=topic)
            )
        ],
        grounding_supports=[
            types.GroundingSupport(
                segment=types.Segment(start_index=0, end_index=4, text="root"),
                grounding_chunk_indices=[0],
                confidence_scores=[0.5 + rng.randrange(50) / 100],
            )
        ],
    )


def _pieces(parts: list[types.Part], rng: random.Random) -> list[types.Part]:
    """The parts cut as a stream delivers them: text in runs of words (the
    signature on the first piece), every other part whole."""
    pieces = []
    for part in parts:
        if part.text is None:
            pieces.append(part)
            continue
        tokens = part.text.split(" ")
        cuts = sorted(rng.sample(range(1, len(tokens)), min(2, len(tokens) - 1)))
        bounds = [0, *cuts, len(tokens)]
        for i, (a, b) in enumerate(itertools.pairwise(bounds)):
            piece = " ".join(tokens[a:b]) + (" " if b < len(tokens) else "")
            pieces.append(
                types.Part(
                    text=piece,
                    thought=part.thought,
                    thought_signature=part.thought_signature if i == 0 else None,
                )
            )
    return pieces


def _chunks(
    reply: Reply, rng: random.Random, usage: types.GenerateContentResponseUsageMetadata
) -> list[types.GenerateContentResponse]:
    pieces = _pieces(reply.parts, rng)
    candidates = [
        types.Candidate(content=types.Content(role="model", parts=[piece])) for piece in pieces
    ]
    if reply.finish is not None:
        # The stream ends on a chunk that only says why it stopped.
        candidates.append(
            types.Candidate(finish_reason=reply.finish, finish_message="output limit reached")
        )
    else:
        candidates[-1].finish_reason = types.FinishReason.STOP
    if reply.grounded:
        candidates[-1].grounding_metadata = _grounding(rng)
    chunks = [
        types.GenerateContentResponse(candidates=[c], model_version=MODEL_VERSION)
        for c in candidates
    ]
    chunks[-1].usage_metadata = usage
    return chunks


class TrafficLlm(RecordingLlm):
    """A deterministic streaming model; `model` names its policy (module doc)."""

    def _reply(self, contents: list[types.Content], rng: random.Random, n: int) -> Reply:
        name = self.model
        if name == "root":
            return root_reply(contents, rng)
        if name == "helper":
            return helper_reply(contents, rng)
        if name in ("critic_a", "critic_b"):
            return critic_reply(contents, rng, name)
        if name == "refiner":
            return refiner_reply(contents, rng)
        if name == "researcher":
            return Reply([text(f"research {n}: {words(rng, 10 + rng.randrange(30))}")])
        if name == "summarizer":
            prompt = contents[-1].parts[0].text or "" if contents and contents[-1].parts else ""
            return Reply(
                [text(f"{SUMMARY} {n} of {len(prompt)} chars: {words(rng, 5 + rng.randrange(50))}")]
            )
        raise AssertionError(f"no policy for {name!r}")

    def _emit(self, response: LlmResponse) -> LlmResponse:
        self._responses.append(response.model_dump(mode="json"))
        return response

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self._requests.append(llm_request.model_dump(mode="json"))
        n = len(self._requests)
        rng = random.Random(f"{self.seed}/{self.model}/{n}")
        reply = self._reply(llm_request.contents, rng, n)
        size = sum(len(c.model_dump_json(exclude_none=True)) for c in llm_request.contents) + len(
            str(llm_request.config.system_instruction or "")
        )
        thoughts = sum(len(p.text or "") // 4 for p in reply.parts if p.thought)
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=size // 4,
            candidates_token_count=8 + rng.randrange(40),
            thoughts_token_count=thoughts or None,
            total_token_count=size // 4 + 48 + thoughts,
        )
        if reply.error is not None:
            code, message = reply.error
            yield self._emit(
                LlmResponse(error_code=code, error_message=message, usage_metadata=usage)
            )
            return
        if not stream:
            # Gemini's non-streaming answer: a plain Content (which
            # google-adk's LlmEventSummarizer may set the role of).
            yield self._emit(
                LlmResponse(
                    content=types.Content(role="model", parts=reply.parts),
                    usage_metadata=usage,
                    grounding_metadata=_grounding(rng) if reply.grounded else None,
                    finish_reason=reply.finish or types.FinishReason.STOP,
                    model_version=MODEL_VERSION,
                )
            )
            return
        aggregator = StreamingResponseAggregator()
        for chunk in _chunks(reply, rng, usage):
            async for response in aggregator.process_response(chunk):
                yield self._emit(response)
        final = aggregator.close()
        assert final is not None
        assert type(final.content) is types.ModelContent, final
        yield self._emit(final)


# --- tools (plain functions; google-adk wraps them in FunctionTool) ---


async def remember(note: str, tool_context: ToolContext) -> dict[str, Any]:
    """Remembers a note: in the session state and as an artifact."""
    state = tool_context.state
    state["notes"] = [*state.get("notes", []), note]
    state["user:last_note"] = note
    state["app:remembered"] = state.get("app:remembered", 0) + 1
    state["temp:scratch"] = note.upper()
    filename = f"note-{note.split()[0]}.txt"
    version = await tool_context.save_artifact(
        filename, types.Part(inline_data=types.Blob(mime_type="text/plain", data=note.encode()))
    )
    return {"saved": filename, "version": version}


def transfer_funds(amount: int, to: str) -> dict[str, Any]:
    """Transfers an amount of money; the user must confirm it first."""
    return {"status": "sent", "amount": amount, "to": to}


# --- callbacks of the root agent ---


def before_model(callback_context: CallbackContext, llm_request: LlmRequest) -> LlmResponse | None:
    """Adds what the state holds to the instruction; answers a `cached`
    driver message itself, without calling the model."""
    notes = callback_context.state.get("notes", [])
    llm_request.append_instructions([f"The user saved {len(notes)} notes so far."])
    turn = driver_turn(llm_request.contents)
    if turn is not None and turn[1] == "cached" and last_is_driver(llm_request.contents):
        rng = random.Random(f"cache/{turn[0]}")
        return LlmResponse(
            content=types.ModelContent(parts=[text(f"cached t{turn[0]}: {words(rng, 6)}")])
        )
    return None


def after_model(callback_context: CallbackContext, llm_response: LlmResponse) -> LlmResponse | None:
    """Marks every complete text answer of the root as checked (a rewritten
    response, built as ModelContent) and counts them in the state."""
    content = llm_response.content
    if llm_response.partial or llm_response.error_code or content is None:
        return None
    parts = content.parts or []
    if any(p.function_call for p in parts) or not any(p.text and not p.thought for p in parts):
        return None
    rewritten = [
        p.model_copy(update={"text": p.text + CHECKED}) if p.text and not p.thought else p
        for p in parts
    ]
    callback_context.state["checked"] = callback_context.state.get("checked", 0) + 1
    return llm_response.model_copy(update={"content": types.ModelContent(parts=rewritten)})


class Turnstile:
    """Lets the second branch of a ParallelAgent start once the first is done.

    google-adk runs the branches as tasks and stores each event as the merge
    hands it over; with `SqliteSessionService` storing is a real wait (on
    aiosqlite's thread), during which a branch still working runs on, so the
    order of the two branches' events depends on the thread's timing, even
    on google-adk's own code. Holding the second branch (its
    before-agent callback) until the first one's after-agent callback makes
    that order fixed; the branches still run as tasks on their own branches.
    """

    def __init__(self) -> None:
        self._done: dict[str, asyncio.Event] = {}

    def _event(self, callback_context: CallbackContext) -> asyncio.Event:
        return self._done.setdefault(callback_context.invocation_id, asyncio.Event())

    def open(self, callback_context: CallbackContext) -> None:
        self._event(callback_context).set()

    async def wait(self, callback_context: CallbackContext) -> None:
        await self._event(callback_context).wait()
