"""Generators of ADK-shaped sessions and compaction calls for window selection.

`build_case(c)` draws one case for `test_window.py`: a session of real
google-adk `Event` objects grown invocation by invocation, plus how to call
the compactor on it (sliding window or token threshold, the config, the
summarizer's behaviour, the scope, agent and branch). It runs on any
`strategies.Chooser`, so the same generator serves seeded loops
(`RandomChooser`) and hypothesis (`DrawChooser`, which shrinks toward short
plain sessions).

The sessions are well formed (every object an exact google-adk / google-genai
model, float timestamps in stream order, str invocation ids), so the Rust
selection never declines them; next to that they carry what the selection
finds hard: parallel tool calls answered together or apart, calls never
answered (dead) and calls still in flight in the newest invocation,
long-running calls resumed in a later invocation, tool confirmations and auth
requests (`requested_tool_confirmations` / `requested_auth_configs` keys with
the synthetic `adk_request_confirmation` / `adk_request_credential` calls)
and `adk_request_input`, prompt token counts from several authors, isolated
invocations and isolated sub-agent turns, rewinds, and compaction events
shaped like google-adk's two compactors next to random ones, with NaN,
0.0 and -0.0 bounds now and then.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fastapi.openapi.models import APIKey, APIKeyIn
from google.adk.auth.auth_tool import AuthConfig
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from support.strategies import Chooser, scope_of

AGENTS = ("root", "helper", "other")
BRANCHES = (None, None, "root", "root.helper")
SCOPES = ("task-1", "task-2")
TOOLS = ("search", "lookup", "fetch")
CONFIRMATION = "adk_request_confirmation"
CREDENTIAL = "adk_request_credential"
INPUT = "adk_request_input"
NAN = float("nan")

#: What the recording summarizer does on a call.
BEHAVIOURS = ("summary", "summary", "summary", "summary_minmax", "none", "raise", "plain")
RARE_BEHAVIOURS = ("not_an_event",)


@dataclass(frozen=True)
class Plan:
    """How a case calls the compactor."""

    kind: str  # "window" or "token"
    #: EventsCompactionConfig fields besides the summarizer; None: no config.
    config: dict[str, int] | None
    #: Whether the config gets the recording summarizer (else None, and the
    #: agent is not an LlmAgent, so google-adk raises if it gets that far).
    summarizer: bool
    behaviours: tuple[str, ...]
    summary_chars: int
    isolation_scope: str | None = None
    agent_name: str = ""
    current_branch: str | None = None
    #: Whether the session service knows the session (append_event raises
    #: SessionNotFoundError otherwise).
    registered: bool = True


@dataclass
class Case:
    """A generated session, cut into the chunks the runner would see (one
    invocation each), and the call to make after each chunk."""

    chunks: list[list[Event]]
    plan: Plan
    #: The clock google-adk's `Event()` default reads during the call.
    now: float
    has_nan_bound: bool = False
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def events(self) -> list[Event]:
        return [e for chunk in self.chunks for e in chunk]


def _text(role: str, text: str) -> types.Content:
    return types.Content(role=role, parts=[types.Part(text=text)])


class WindowBuilder:
    """Grows an ADK-shaped session invocation by invocation."""

    def __init__(self, c: Chooser) -> None:
        self.c = c
        self.events: list[Event] = []
        self.chunks: list[list[Event]] = []
        self.clock = c.choice((1000.0, 1.7e9, 50.0))
        self.tie = c.choice((0.0, 0.05, 0.25))
        self.words = c.choice((1, 4, 30))
        self.p_compaction = c.choice((0.0, 0.15, 0.3, 0.5))
        self.p_isolated = c.choice((0.0, 0.1, 0.25))
        self.p_rewind = c.choice((0.0, 0.04, 0.1))
        self.p_dead = c.choice((0.0, 0.1, 0.3))
        self.p_usage = c.choice((0.0, 0.3, 0.8))
        self.ev_n = 0
        self.inv_n = 0
        self.call_n = 0
        self.cmp_n = 0
        self.invocations: list[str] = []
        #: First and last event timestamps of each invocation, in order.
        self.spans: list[tuple[float, float]] = []
        self.inv = ""
        self.scope: str | None = None
        self.branch: str | None = None
        #: Long-running calls awaiting their real result: (id, name).
        self.open_calls: list[tuple[str, str]] = []
        #: Synthetic HITL calls awaiting the client: (request id, name,
        #: original call id, original name).
        self.open_hitl: list[tuple[str, str, str | None, str | None]] = []
        self.compactions: list[tuple[float, float]] = []
        self.has_nan_bound = False

    # -- primitives ------------------------------------------------------

    def tick(self) -> float:
        if not self.events or not self.c.chance(self.tie):
            self.clock += self.c.choice((1.0, 0.5, 2.0, 0.25, 3.0))
        return self.clock

    def say(self, what: str) -> str:
        return " ".join([what] * self.c.integer(1, self.words))

    def emit(
        self,
        *,
        author: str,
        content: types.Content | None = None,
        actions: EventActions | None = None,
        long_running: set[str] | None = None,
        usage: bool = False,
        scope: Any = ...,
        invocation_id: str | None = None,
    ) -> Event:
        self.ev_n += 1
        fields: dict[str, Any] = {
            "id": f"ev-{self.ev_n}",
            "invocation_id": self.inv if invocation_id is None else invocation_id,
            "author": author,
            "content": content,
            "timestamp": self.tick(),
            "branch": self.branch,
            "isolation_scope": self.scope if scope is ... else scope,
        }
        if actions is not None:
            fields["actions"] = actions
        if long_running is not None:
            fields["long_running_tool_ids"] = long_running
        if usage and self.c.chance(self.p_usage):
            count = self.c.choice((None, 0, 5, 40, 200, 1000, 5000, 40000))
            fields["usage_metadata"] = types.GenerateContentResponseUsageMetadata(
                prompt_token_count=count
            )
        event = Event(**fields)
        self.events.append(event)
        return event

    def agent(self) -> str:
        return self.c.choice(("root", "root", "root", "helper", "other"))

    def new_call_id(self) -> str:
        self.call_n += 1
        return f"{self.c.choice(('adk-', 'call_'))}{self.call_n}"

    def call_event(
        self, calls: list[tuple[str, str]], *, long_running: set[str] | None = None
    ) -> Event:
        parts = []
        if self.c.chance(0.2):
            parts.append(types.Part(text=self.say("let me check")))
        for k, (fid, name) in enumerate(calls):
            parts.append(
                types.Part(
                    function_call=types.FunctionCall(
                        id=fid, name=name, args={"q": self.say("arg"), "k": k}
                    )
                )
            )
        return self.emit(
            author=self.agent(),
            content=types.Content(role="model", parts=parts),
            long_running=long_running,
            usage=True,
        )

    def response_event(
        self,
        answers: list[tuple[str, str]],
        payload: dict[str, Any],
        *,
        author: str | None = None,
        actions: EventActions | None = None,
    ) -> Event:
        parts = [
            types.Part(
                function_response=types.FunctionResponse(id=fid, name=name, response=payload)
            )
            for fid, name in answers
        ]
        return self.emit(
            author=author or self.agent(),
            content=types.Content(role="user", parts=parts),
            actions=actions,
        )

    # -- steps within an invocation ---------------------------------------

    def model_text(self) -> None:
        self.emit(author=self.agent(), content=_text("model", self.say("an answer")), usage=True)

    def tool_round(self) -> None:
        c = self.c
        calls = [(self.new_call_id(), c.choice(TOOLS)) for _ in range(c.choice((1, 1, 2, 3)))]
        self.call_event(calls)
        answered = [call for call in calls if not c.chance(self.p_dead)]
        if c.chance(0.35) and len(answered) > 1:
            order = list(answered)
            if c.chance(0.5):
                order.reverse()
            for call in order:
                self.response_event([call], {"result": self.say("ok")})
                if c.chance(0.2):
                    self.model_text()
        elif answered:
            self.response_event(answered, {"result": self.say("ok")})
        if c.chance(0.6):
            self.model_text()

    def long_running_start(self) -> None:
        """A long-running call, maybe with parallel siblings, and its
        placeholder response; the real result comes in a later invocation."""
        c = self.c
        calls = [(self.new_call_id(), c.choice(TOOLS)) for _ in range(c.choice((1, 1, 2)))]
        self.call_event(calls, long_running={calls[0][0]})
        if c.chance(0.85):
            self.response_event(calls[:1], {"status": "pending"})
        if len(calls) > 1:
            self.response_event(calls[1:], {"result": "sibling"})
        self.open_calls.append(calls[0])

    def hitl_start(self) -> None:
        """A tool asks for confirmation or credentials (or the agent asks for
        input): the tool's response carries the request keyed by its call id,
        then ADK's synthetic client call, long-running, asks the client."""
        c = self.c
        kind = c.choice((CONFIRMATION, CONFIRMATION, CREDENTIAL, INPUT))
        request_id = f"adk-{self.new_call_id()}"
        if kind == INPUT:
            self.call_event([(request_id, INPUT)], long_running={request_id})
            self.open_hitl.append((request_id, INPUT, None, None))
            return
        original = (self.new_call_id(), c.choice(TOOLS))
        self.call_event([original])
        if kind == CONFIRMATION:
            actions = EventActions(
                requested_tool_confirmations={original[0]: ToolConfirmation(hint="proceed?")}
            )
        else:
            actions = EventActions(
                requested_auth_configs={
                    original[0]: AuthConfig(
                        auth_scheme=APIKey(**{"in": APIKeyIn.header, "name": "key"}),
                        credential_key=f"cred-{original[0]}",
                    )
                }
            )
        if c.chance(0.15):
            # The request without the tool's placeholder response.
            self.emit(author=self.agent(), actions=actions)
        else:
            self.response_event([original], {"error": "needs the client"}, actions=actions)
        if c.chance(0.9):
            self.call_event([(request_id, kind)], long_running={request_id})
        self.open_hitl.append((request_id, kind, *original))

    def scoped_turn(self) -> None:
        """A sub-agent turn in an isolation scope inside this invocation."""
        saved = self.scope
        self.scope = self.c.choice(SCOPES)
        self.model_text()
        if self.c.chance(0.5):
            self.tool_round()
        self.scope = saved

    # -- invocations -------------------------------------------------------

    def begin(self) -> None:
        self.inv_n += 1
        self.inv = f"inv-{self.inv_n}"
        self.invocations.append(self.inv)
        self.scope = self.c.choice(SCOPES) if self.c.chance(self.p_isolated) else None
        self.branch = self.c.choice(BRANCHES)

    def invocation(self) -> None:
        c = self.c
        start = len(self.events)
        if len(self.invocations) > 1 and c.chance(self.p_rewind):
            self.begin()
            target = c.choice([*self.invocations[:-1], "ghost"])
            self.emit(author="user", actions=EventActions(rewind_before_invocation_id=target))
            if c.chance(0.5):
                self.finish(start)
                return
        else:
            self.begin()
        if self.open_hitl and c.chance(0.4):
            self.hitl_resume()
        elif self.open_calls and c.chance(0.4):
            self.long_running_resume()
        else:
            self.emit(author="user", content=_text("user", self.say("question")))
        for _ in range(c.integer(0, 4)):
            step = c.choice(("text", "tool", "tool", "long", "hitl", "scoped"))
            if step == "text":
                self.model_text()
            elif step == "tool":
                self.tool_round()
            elif step == "long":
                self.long_running_start()
            elif step == "hitl":
                self.hitl_start()
            elif c.chance(0.5):
                self.scoped_turn()
        self.finish(start)

    def finish(self, start: int) -> None:
        stamps = [e.timestamp for e in self.events[start:]]
        self.spans.append((min(stamps), max(stamps)))
        if self.c.chance(self.p_compaction):
            self.compaction()
        self.chunks.append(self.events[start:])

    def hitl_resume(self) -> None:
        c = self.c
        request_id, kind, original_id, original_name = self.open_hitl.pop(
            c.integer(0, len(self.open_hitl) - 1)
        )
        payload: dict[str, Any] = {"confirmed": True} if kind == CONFIRMATION else {"ok": 1}
        self.response_event([(request_id, kind)], payload, author="user")
        if original_id is not None and original_name is not None and c.chance(0.8):
            # The tool runs again and answers its original call.
            self.response_event([(original_id, original_name)], {"result": self.say("done")})
        if c.chance(0.6):
            self.model_text()

    def long_running_resume(self) -> None:
        call = self.open_calls.pop(self.c.integer(0, len(self.open_calls) - 1))
        self.response_event([call], {"result": self.say("done")}, author="user")
        if self.c.chance(0.6):
            self.model_text()

    # -- compactions --------------------------------------------------------

    def compaction(self) -> None:
        c = self.c
        shape = c.choice(("sliding", "sliding", "token", "all", "random"))
        stamps = [e.timestamp for e in self.events if e.actions.compaction is None]
        if shape == "sliding" or not stamps:
            back = c.integer(0, min(3, len(self.spans) - 1))
            lo = self.spans[-1 - back][0]
            hi = self.spans[-1 - c.integer(0, back)][1]
        elif shape == "token":
            keep = c.integer(0, min(4, len(stamps) - 1))
            hi = stamps[-1 - keep]
            lo = self.compactions[-1][0] if self.compactions and c.chance(0.7) else stamps[0]
        elif shape == "all":
            # Everything so far, as a token-threshold compaction that keeps
            # no raw tail writes it.
            lo, hi = stamps[0], stamps[-1]
        else:
            lo, hi = c.choice(stamps), c.choice(stamps)
            if c.chance(0.7):
                lo, hi = min(lo, hi), max(lo, hi)
        odd = c.choice((None,) * 12 + ("end_nan", "end_zero", "end_negzero", "start_nan"))
        if odd == "end_nan":
            hi = NAN
        elif odd == "end_zero":
            hi = 0.0
        elif odd == "end_negzero":
            hi = -0.0
        elif odd == "start_nan":
            lo = NAN
        self.has_nan_bound |= math.isnan(lo) or math.isnan(hi)
        if not (math.isnan(lo) or math.isnan(hi)):
            self.compactions.append((lo, hi))
        self.cmp_n += 1
        scope = self.c.choice(SCOPES) if self.c.chance(0.2) else None
        summary = "summary " * c.choice((1, 10, 200, 1000, 3000))
        self.emit(
            author="user",
            invocation_id=f"cmp-{self.cmp_n}",
            scope=scope,
            actions=EventActions(
                compaction=EventCompaction(
                    start_timestamp=lo,
                    end_timestamp=hi,
                    compacted_content=_text("model", summary),
                )
            ),
        )


def draw_plan(c: Chooser, events: list[Event]) -> Plan:
    kind = c.choice(("window", "window", "token"))
    which = c.choice(("sliding", "token", "both"))
    config: dict[str, int] | None = {}
    assert config is not None
    if which in ("sliding", "both"):
        config["compaction_interval"] = c.integer(1, 4)
        config["overlap_size"] = c.choice((0, 0, 1, 2, 3))
    if which in ("token", "both"):
        config["token_threshold"] = c.choice((1, 1, 10, 50, 200, 1000, 5000, 10**6))
        config["event_retention_size"] = c.integer(0, 6)
    if c.chance(0.02):
        config = None
    behaviours = tuple(
        c.choice(RARE_BEHAVIOURS) if c.chance(0.05) else c.choice(BEHAVIOURS)
        for _ in range(c.integer(1, 3))
    )
    scopes = sorted({scope_of(e) for e in events if scope_of(e) is not None})
    return Plan(
        kind=kind,
        config=config,
        summarizer=not c.chance(0.05),
        behaviours=behaviours,
        summary_chars=c.choice((0, 40, 3000)),
        isolation_scope=(c.choice((*scopes, "task-9")) if scopes and c.chance(0.3) else None),
        agent_name=c.choice(("", "", "root", "helper", "other")),
        current_branch=c.choice((None, None, "root", "root.helper")),
        registered=not c.chance(0.05),
    )


def build_case(c: Chooser, *, max_invocations: int = 12) -> Case:
    """A session of up to `max_invocations` invocations and a call plan."""
    builder = WindowBuilder(c)
    for _ in range(c.integer(1, max_invocations)):
        builder.invocation()
    events = builder.events
    plan = draw_plan(c, events)
    return Case(
        chunks=builder.chunks,
        plan=plan,
        now=builder.clock + 10.0,
        has_nan_bound=builder.has_nan_bound,
    )
