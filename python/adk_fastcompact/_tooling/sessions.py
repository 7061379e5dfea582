"""Deterministic, realistic google-adk sessions for benchmarks and tests.

`build_session(n_events, seed)` returns a list of real
`google.adk.events.event.Event` objects shaped like the history of a
single-agent ADK app that runs sliding-window compaction:

* every invocation (invocation id ``"e-<uuid>"``) starts with a user turn
  (author ``"user"``, text) and ends with a model text answer; in between the
  model makes 0-3 tool steps, each a model event with ``function_call`` parts
  followed by an event (author: the agent) with the matching
  ``function_response`` parts;
* contents come in the classes a deployed app stores (see "Content classes"
  below): `types.ModelContent` beside `types.Content`, `types.UserContent`
  beside it, thought parts and inline images;
* a step is a single call, parallel calls (2-3 calls in one event, the first
  part carrying a thought signature as Gemini does, all responses merged into
  one event), or a long-running call (``long_running_tool_ids`` set, a
  placeholder ``{"status": "pending"}`` response at once, the real response
  sent by the user a few invocations later with the same call id; that user
  turn starts the invocation);
* search and database tools answer with JSON dicts of a few KB;
* now and then the user rewinds: a lone event of its own invocation, author
  ``"user"``, with ``actions.rewind_before_invocation_id`` naming one of the
  last live invocations, as `Runner.rewind_async` writes it;
* after every invocation the generator runs google-adk's sliding-window rule
  (`apps.compaction._run_compaction_for_sliding_window`) with
  ``compaction_interval=3`` and ``overlap_size=1`` over the live (not rewound)
  history, and appends the compaction event `LlmEventSummarizer` would write:
  author ``"user"``, a fresh invocation id, ``EventCompaction(start, end,
  Content(role="model", text summary))`` whose bounds are the timestamps of
  the first and last summarized events. Each window therefore starts at the
  first event of the last invocation of the previous one. The window is never
  trimmed (every invocation here answers its own calls, so google-adk's
  self-contained-prefix trim would keep it whole) and the worth-compacting
  check is assumed to pass.

The session is a snapshot taken while the next model call is being prepared:
its last invocation is in flight and holds the user turn and, to hit
`n_events` exactly, at most an interim model text and one finished tool step.
Over the last ~80 events the user holds back the real responses of
long-running calls (and the model starts one if none is pending), so in a
session of a hundred events or more that user turn is the real response of a
call an earlier summary already covers: the case
`_recover_compacted_function_calls` exists for, which every benchmark of
prompt assembly thus exercises.

Content classes. A streaming Gemini app stores what google-adk's
`utils/streaming_utils.py` aggregates from the SSE chunks, a
`types.ModelContent`, and a client that builds its messages with google-adk's
own helpers (`Runner.run_debug`, the conformance tools) sends
`types.UserContent`; both are `Content` subclasses whose ``role`` is fixed and
frozen, and a reader of events must treat them as the `Content` they are. So:

* a model event's content (text answer, calls) is a `ModelContent` with
  probability `MODEL_CONTENT_SHARE`, a `Content(role="model")` otherwise, and
  `THOUGHT_SHARE` of them open with a thought part (``thought=True`` and a
  ``thought_signature``, as Gemini returns thought summaries);
* a user event's content (text, or the real response of a long-running call)
  is a `UserContent` with probability `USER_CONTENT_SHARE`, and
  `INLINE_DATA_SHARE` of the user texts carry a small inline PNG
  (`types.Blob`);
* the tool-response events stay `Content(role="user")`, as google-adk builds
  them (`flows/llm_flows/tools/_caller.py` and `_batch_executor.py`), and so
  do compaction summaries `Content(role="model")` (`LlmEventSummarizer`
  assigns ``.role``, which a `ModelContent` refuses).

Everything (ids, texts, timestamps) comes from ``random.Random(seed)``, so the
same arguments always give equal sessions. The content classes and the extra
parts are drawn from a second generator, `style_rng(seed)`, so that they leave
the first one's sequence alone: a seed gives the same events, ids, texts,
calls, rewinds and compactions as before they were added. Timestamps start at
1_700_000_000.0 and strictly increase by 1 ms to 4 s per event.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.genai import types

from .bench_options import MIN_DUE_EVENTS

AGENT_NAME = "assistant"
"""Author of the model and tool-response events."""

COMPACTION_INTERVAL = 3
"""New invocations that trigger a sliding-window compaction."""

OVERLAP_SIZE = 1
"""Invocations of the previous window repeated in the next one."""

START_TIMESTAMP = 1_700_000_000.0
"""Timestamp of the first event."""

MODEL_CONTENT_SHARE = 0.65
"""Share of model events whose content is a `types.ModelContent`: a
streaming app's, the rest as a non-streaming call returns them."""

USER_CONTENT_SHARE = 0.5
"""Share of user events whose content is a `types.UserContent`."""

THOUGHT_SHARE = 0.3
"""Share of model events that open with a thought part."""

INLINE_DATA_SHARE = 0.1
"""Share of user texts that carry an inline PNG."""

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# Room kept free by the main loop for short plain invocations and the
# in-flight one: a loop iteration adds at most a rewind event, an invocation
# (1 + 3 * 2 + 1 events) and a compaction event.
_TAIL_ROOM = 12

# In the last `_CLOSING` events a long-running call is kept pending (one is
# started if none is) so that the in-flight user turn can answer it after
# compaction has summarized the call away: about a dozen invocations, several
# sliding windows.
_CLOSING = 80

_WORDS = (
    "the a an of to in for on with by from about as at this that these those "
    "order invoice customer account report quarter revenue margin forecast "
    "region team project deadline budget summary table chart result query "
    "shipment delivery warehouse supplier contract renewal ticket incident "
    "outage latency deploy release build test cluster node service database "
    "please could you check compare explain update list show find why how "
    "when which what increase decrease stable trend risk issue fix plan next "
    "week month year today yesterday previous latest total average maximum "
    "minimum growth drop approved pending rejected escalated resolved open "
    "closed high low medium priority owner status review draft final"
).split()

_CITIES = ("Zurich", "Lisbon", "Osaka", "Denver", "Nairobi", "Oslo", "Lima")


def _words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choices(_WORDS, k=rng.randint(lo, hi)))


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def style_rng(seed: int) -> random.Random:
    """The generator of the content classes and extra parts for `seed`.

    Apart from the main ``random.Random(seed)`` so that adding them did not
    move a single id, text or event of a seed's session (string seeds hash
    with SHA-512: the same in every process).
    """
    return random.Random(f"adk-fastcompact content style {seed}")


@dataclass
class _Invocation:
    """A live invocation as the sliding-window rule sees it."""

    invocation_id: str
    first_timestamp: float
    last_timestamp: float


@dataclass
class _Pending:
    """A long-running call that has only its placeholder response so far."""

    call_id: str
    name: str
    invocation_id: str
    due: int  # Invocation count at which the user sends the real response.


@dataclass
class _Builder:
    """Appends events and keeps the live-history view compaction needs.

    `live` mirrors `_apply_rewinds(events)` restricted to non-compaction
    invocations, and `compactions` the live compaction events as
    ``(invocations live when appended, end_timestamp, event)``; both are updated
    incrementally, so building stays linear in the number of events.
    """

    rng: random.Random
    #: Draws the content classes and extra parts (see `style_rng`).
    style: random.Random = field(default_factory=lambda: style_rng(0))
    events: list[Event] = field(default_factory=list)
    timestamp: float = START_TIMESTAMP
    invocations: int = 0
    live: list[_Invocation] = field(default_factory=list)
    compactions: list[tuple[int, float, Event]] = field(default_factory=list)
    pending: list[_Pending] = field(default_factory=list)
    prompt_chars: int = 2_000

    # -- low-level ----------------------------------------------------------

    def _next_timestamp(self) -> float:
        # Whole milliseconds keep the values short and strictly increasing.
        self.timestamp = round(self.timestamp + self.rng.randint(1, 4_000) / 1e3, 3)
        return self.timestamp

    def _append(self, invocation_id: str, author: str, **fields: Any) -> Event:
        event = Event(
            id=_uuid(self.rng),
            invocation_id=invocation_id,
            author=author,
            timestamp=self._next_timestamp(),
            **fields,
        )
        self.events.append(event)
        if not (event.actions.compaction or event.actions.rewind_before_invocation_id):
            if self.live and self.live[-1].invocation_id == invocation_id:
                self.live[-1].last_timestamp = event.timestamp
            else:
                self.live.append(_Invocation(invocation_id, event.timestamp, event.timestamp))
        return event

    def _usage(self, text_chars: int) -> types.GenerateContentResponseUsageMetadata:
        self.prompt_chars += text_chars
        prompt = self.prompt_chars // 4
        candidates = max(1, text_chars // 4)
        return types.GenerateContentResponseUsageMetadata(
            prompt_token_count=prompt,
            candidates_token_count=candidates,
            total_token_count=prompt + candidates,
        )

    # -- contents -----------------------------------------------------------

    def model_content(self, parts: list[types.Part]) -> types.Content:
        """A model response's content: maybe a thought first, maybe a
        `ModelContent` (see the module docstring)."""
        style = self.style
        if style.random() < THOUGHT_SHARE:
            thought = types.Part(
                text=_words(style, 10, 60), thought=True, thought_signature=style.randbytes(32)
            )
            parts = [thought, *parts]
        if style.random() < MODEL_CONTENT_SHARE:
            return types.ModelContent(parts=parts)
        return types.Content(role="model", parts=parts)

    def user_content(self, parts: list[types.Part], media: bool = False) -> types.Content:
        """A user message's content: maybe a `UserContent`, with `media`
        maybe an inline PNG of a few hundred bytes after the text."""
        style = self.style
        if media and style.random() < INLINE_DATA_SHARE:
            data = _PNG_SIGNATURE + style.randbytes(style.randint(200, 600))
            image = types.Part(inline_data=types.Blob(mime_type="image/png", data=data))
            parts = [*parts, image]
        if style.random() < USER_CONTENT_SHARE:
            return types.UserContent(parts=parts)
        return types.Content(role="user", parts=parts)

    # -- event kinds --------------------------------------------------------

    def user_text(self, invocation_id: str) -> None:
        text = _words(self.rng, 6, 50)
        self.prompt_chars += len(text)
        self._append(
            invocation_id,
            "user",
            content=self.user_content([types.Part(text=text)], media=True),
        )

    def model_text(self, invocation_id: str, lo: int = 30, hi: int = 250) -> None:
        text = _words(self.rng, lo, hi)
        self._append(
            invocation_id,
            AGENT_NAME,
            content=self.model_content([types.Part(text=text)]),
            usage_metadata=self._usage(len(text)),
        )

    def _tool_call(self) -> tuple[str, dict[str, Any]]:
        rng = self.rng
        kind = rng.random()
        if kind < 0.3:
            return "search_docs", {"query": _words(rng, 2, 6), "top_k": 10}
        if kind < 0.5:
            return "query_database", {
                "sql": f"SELECT * FROM orders WHERE region = {rng.randint(1, 40)}"
            }
        if kind < 0.7:
            return "get_weather", {"city": rng.choice(_CITIES)}
        if kind < 0.85:
            return "lookup_order", {"order_id": f"ORD-{rng.randint(10_000, 99_999)}"}
        return "calculator", {"expression": f"{rng.randint(1, 999)} * 1.07"}

    def _tool_result(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        rng = self.rng
        if name == "search_docs":
            return {
                "query": args["query"],
                "results": [
                    {
                        "doc_id": f"doc-{rng.getrandbits(32):08x}",
                        "title": _words(rng, 3, 8),
                        "url": f"https://kb.example.com/a/{rng.getrandbits(24)}",
                        "score": round(rng.random(), 4),
                        "snippet": _words(rng, 20, 45),
                    }
                    for _ in range(rng.randint(6, 14))
                ],
            }
        if name == "query_database":
            rows = [
                [
                    f"ORD-{rng.randint(10_000, 99_999)}",
                    rng.choice(_CITIES),
                    round(rng.uniform(10, 5_000), 2),
                    rng.choice(("open", "shipped", "delivered", "returned")),
                    f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                ]
                for _ in range(rng.randint(20, 60))
            ]
            return {
                "columns": ["order_id", "city", "amount", "status", "date"],
                "rows": rows,
                "row_count": len(rows),
            }
        if name == "get_weather":
            return {
                "city": args["city"],
                "temp_c": rng.randint(-10, 35),
                "conditions": rng.choice(("sunny", "cloudy", "rain", "snow")),
            }
        if name == "lookup_order":
            return {
                "order_id": args["order_id"],
                "status": rng.choice(("open", "shipped", "delivered")),
                "items": [
                    {"sku": f"SKU-{rng.randint(100, 999)}", "qty": rng.randint(1, 5)}
                    for _ in range(rng.randint(1, 4))
                ],
            }
        return {"result": round(rng.uniform(1, 1_000), 2)}

    def tool_step(self, invocation_id: str, parallel: int) -> None:
        """A model event with `parallel` calls, then one event answering all."""
        calls = []
        for _ in range(parallel):
            name, args = self._tool_call()
            calls.append((f"adk-{_uuid(self.rng)}", name, args))
        parts = []
        if self.rng.random() < 0.3:
            parts.append(types.Part(text=_words(self.rng, 5, 25)))
        for index, (call_id, name, args) in enumerate(calls):
            parts.append(
                types.Part(
                    function_call=types.FunctionCall(id=call_id, name=name, args=args),
                    # Gemini signs only the first call of a parallel batch.
                    thought_signature=self.rng.randbytes(32) if index == 0 else None,
                )
            )
        self._append(
            invocation_id,
            AGENT_NAME,
            content=self.model_content(parts),
            usage_metadata=self._usage(200),
        )
        responses = [
            types.Part(
                function_response=types.FunctionResponse(
                    id=call_id, name=name, response=self._tool_result(name, args)
                )
            )
            for call_id, name, args in calls
        ]
        self._append(
            invocation_id,
            AGENT_NAME,
            content=types.Content(role="user", parts=responses),
        )
        self.prompt_chars += 1_500 * parallel

    def long_running_step(self, invocation_id: str) -> None:
        """A long-running call, answered now by a placeholder only."""
        rng = self.rng
        call_id = f"adk-{_uuid(rng)}"
        name = rng.choice(("start_batch_job", "request_approval"))
        args = {"job": _words(rng, 2, 4), "priority": rng.choice(("low", "high"))}
        self._append(
            invocation_id,
            AGENT_NAME,
            content=self.model_content(
                [
                    types.Part(
                        function_call=types.FunctionCall(id=call_id, name=name, args=args),
                        thought_signature=rng.randbytes(32),
                    )
                ]
            ),
            long_running_tool_ids={call_id},
            usage_metadata=self._usage(120),
        )
        ticket = f"T-{rng.randint(100_000, 999_999)}"
        self._append(
            invocation_id,
            AGENT_NAME,
            content=types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(
                            id=call_id,
                            name=name,
                            response={"status": "pending", "ticket": ticket},
                        )
                    )
                ],
            ),
        )
        due = self.invocations + rng.randint(2, 6)
        self.pending.append(_Pending(call_id, name, invocation_id, due))

    def user_resume(self, invocation_id: str, pending: _Pending) -> None:
        """The user sends the real result of a long-running call."""
        self.pending.remove(pending)
        result = {
            "status": "done",
            "result": self._tool_result("search_docs", {"query": pending.name}),
        }
        self._append(
            invocation_id,
            "user",
            content=self.user_content(
                [
                    types.Part(
                        function_response=types.FunctionResponse(
                            id=pending.call_id, name=pending.name, response=result
                        )
                    )
                ]
            ),
        )
        self.prompt_chars += 2_000

    def rewind(self) -> None:
        """The user rewinds to before one of the last live invocations."""
        back = self.rng.randint(1, min(3, len(self.live)))
        keep = len(self.live) - back
        target = self.live[keep].invocation_id
        self.invocations += 1
        self._append(
            f"e-{_uuid(self.rng)}",
            "user",
            actions=EventActions(rewind_before_invocation_id=target),
        )
        dropped = {inv.invocation_id for inv in self.live[keep:]}
        del self.live[keep:]
        # Compaction events appended after the target's first event are rewound
        # too: they were appended when more than `keep` invocations were live.
        while self.compactions and self.compactions[-1][0] > keep:
            self.compactions.pop()
        self.pending = [p for p in self.pending if p.invocation_id not in dropped]

    def maybe_compact(self) -> None:
        """google-adk's sliding-window rule, run after an invocation ends."""
        last_end = self.compactions[-1][1] if self.compactions else 0.0
        first_new = len(self.live)
        while first_new > 0 and self.live[first_new - 1].last_timestamp > last_end:
            first_new -= 1
        if len(self.live) - first_new < COMPACTION_INTERVAL:
            return
        start = self.live[max(0, first_new - OVERLAP_SIZE)].first_timestamp
        end = self.live[-1].last_timestamp
        summary = _words(self.rng, 80, 250)
        event = self._append(
            _uuid(self.rng),
            "user",
            actions=EventActions(
                compaction=EventCompaction(
                    start_timestamp=start,
                    end_timestamp=end,
                    compacted_content=types.Content(role="model", parts=[types.Part(text=summary)]),
                )
            ),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=self.prompt_chars // 4,
                candidates_token_count=len(summary) // 4,
            ),
        )
        self.compactions.append((len(self.live), end, event))
        self.prompt_chars = 2_000 + 4 * len(summary)

    # -- invocations --------------------------------------------------------

    def invocation(self, closing: bool) -> None:
        """A full invocation; `closing` keeps a long-running call pending."""
        rng = self.rng
        self.invocations += 1
        invocation_id = f"e-{_uuid(rng)}"
        due = [p for p in self.pending if p.due <= self.invocations]
        if due and not closing:
            self.user_resume(invocation_id, due[0])
        else:
            self.user_text(invocation_id)
        steps = rng.choices((0, 1, 2, 3), weights=(30, 40, 20, 10))[0]
        force_long_running = closing and not self.pending
        for step in range(max(steps, force_long_running)):
            kind = rng.random()
            if (step == 0 and force_long_running) or (kind < 0.12 and len(self.pending) < 3):
                self.long_running_step(invocation_id)
            elif kind < 0.37:
                self.tool_step(invocation_id, parallel=rng.randint(2, 3))
            else:
                self.tool_step(invocation_id, parallel=1)
        self.model_text(invocation_id)
        self.maybe_compact()

    def plain_invocation(self) -> None:
        """User text and model text, then the usual compaction check."""
        self.invocations += 1
        invocation_id = f"e-{_uuid(self.rng)}"
        self.user_text(invocation_id)
        self.model_text(invocation_id)
        self.maybe_compact()

    def in_flight(self, size: int, resume: bool = True) -> None:
        """The invocation whose next model call is being prepared.

        `size` (1-4) events: the user turn (the real response of a pending
        long-running call if there is one and `resume`, else text), an
        interim model text when `size` is even, a finished tool step when
        `size` >= 3.
        """
        self.invocations += 1
        invocation_id = f"e-{_uuid(self.rng)}"
        if self.pending and resume:
            self.user_resume(invocation_id, self.pending[0])
        else:
            self.user_text(invocation_id)
        if size % 2 == 0:
            self.model_text(invocation_id, 5, 20)
        if size >= 3:
            self.tool_step(invocation_id, parallel=1)


def _build(n_events: int, seed: int, resume: bool = True) -> _Builder:
    if n_events < 0:
        raise ValueError(f"n_events must be >= 0, got {n_events}")
    builder = _Builder(random.Random(seed), style_rng(seed))
    while n_events - len(builder.events) > _TAIL_ROOM:
        if len(builder.live) >= 2 and builder.rng.random() < 0.03:
            builder.rewind()
        builder.invocation(closing=n_events - len(builder.events) <= _CLOSING)
    # A plain invocation and its compaction event leave at least 2 events.
    while n_events - len(builder.events) >= 5:
        builder.plain_invocation()
    if len(builder.events) < n_events:
        builder.in_flight(n_events - len(builder.events), resume)
    assert len(builder.events) == n_events
    return builder


def build_session(n_events: int, seed: int = 0) -> list[Event]:
    """Builds a realistic ADK session of exactly `n_events` events.

    Args:
        n_events: Number of events to return (>= 0).
        seed: Seed of the `random.Random` all content, ids and timing come
            from; equal arguments give equal sessions.

    Returns:
        The session's events in chronological (append) order, strictly
        increasing timestamps. See the module docstring for their shape.

    Raises:
        ValueError: If `n_events` is negative.
    """
    return _build(n_events, seed).events


def build_due_session(n_events: int, seed: int = 0) -> list[Event]:
    """A session of exactly `n_events` events whose compaction is due.

    `build_session(n_events + 1, seed)` without its last live compaction
    event, and with an in-flight invocation that opens with a user text: the
    state of a session whose summarizer did not write the last summary (it
    failed, or it is being written now). The invocations that summary covered
    are new again, so google-adk's sliding window (`compaction_interval=3`,
    `overlap_size=1`) triggers on it, its window reaching from the invocation
    before them to the in-flight one; and the events after the previous
    summary, each model answer carrying the `usage_metadata` the generator
    gives it (prompt token counts of at least 500), are the token-threshold
    candidates. (A user turn answering a call summarized away, as
    `build_session` ends, would hold google-adk's token-threshold split at 0:
    the retained tail would keep a response whose call no candidate holds.)

    Args:
        n_events: Number of events to return, at least `MIN_DUE_EVENTS`.
        seed: As for `build_session`.

    Returns:
        The session's events in chronological order.

    Raises:
        ValueError: If `n_events` is below `MIN_DUE_EVENTS`.
    """
    if n_events < MIN_DUE_EVENTS:
        raise ValueError(f"n_events must be >= {MIN_DUE_EVENTS}, got {n_events}")
    builder = _build(n_events + 1, seed, resume=False)
    if not builder.compactions:
        raise ValueError(f"the {n_events + 1}-event session of seed {seed} has no compaction")
    last = builder.compactions[-1][2]
    return [event for event in builder.events if event is not last]
