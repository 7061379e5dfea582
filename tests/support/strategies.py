"""Generators of google-adk sessions that hit the hard cases of compaction.

One generator, two drivers. `random_session(seed)` runs it on a seeded
`random.Random`: fast, for loops over hundreds of long sessions.
`sessions()` runs it on hypothesis draws: every decision is a draw that
shrinks toward the plain case, so a failure shrinks to a short session.

Sessions are lists of real `google.adk` `Event` objects. Next to ordinary
traffic (user turns, model replies, tool rounds) they deliberately contain
what the bookkeeping finds hard: tied and out-of-order timestamps, a few NaN
and int timestamps, compactions whose ranges are identical, contained,
containing, partially overlapping, touching or inverted, compactions with a
None or NaN bound or no `compacted_content`, rewinds to earlier, own, later
and unknown invocations (nested too), branches and isolation scopes, reused,
empty and None function-call ids, parallel calls answered in one or several
events, long-running calls whose call was compacted away before the real
result arrived, the same Event object twice in a list, and events without
content or parts.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.genai import types
from hypothesis import strategies as st

T = TypeVar("T")

NAN = float("nan")
AGENTS = ("root", "helper")
TOOLS = ("search", "lookup", "approve")
BRANCHES = ("root", "root.helper", "root.other", "root.helper.deep")
SCOPES = ("task-1", "task-2")
#: Floats stop at integers here: 2**53 + 1 has no float, so an int timestamp
#: and a float one can compare differently in Python than as two f64.
HUGE = 2.0**53


class Chooser(Protocol):
    """The decisions a generator makes; a driver answers them."""

    def integer(self, lo: int, hi: int) -> int: ...

    def chance(self, p: float) -> bool: ...

    def choice(self, options: Sequence[T]) -> T: ...


class RandomChooser:
    """Answers from a seeded `random.Random`."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self._rng.randint(lo, hi)

    def chance(self, p: float) -> bool:
        return self._rng.random() < p

    def choice(self, options: Sequence[T]) -> T:
        return options[self._rng.randrange(len(options))]


class DrawChooser:
    """Answers from hypothesis draws; each shrinks to False / lo / options[0]."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        self._draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self._draw(st.integers(lo, hi))

    def chance(self, p: float) -> bool:
        if p <= 0:
            return False
        if p >= 1:
            return True
        return self._draw(st.integers(0, 999)) >= round(1000 * (1 - p))

    def choice(self, options: Sequence[T]) -> T:
        return self._draw(st.sampled_from(options))


@dataclass(frozen=True)
class Profile:
    """How hostile a session is; drawn once per session."""

    realistic: bool  # monotone clock, ADK-shaped compactions, paired calls
    tie: float  # P(timestamp equal to the previous one)
    disorder: float  # P(timestamp before the previous one)
    nan_events: int  # events whose timestamp becomes NaN
    int_timestamps: float  # P(an event's timestamp is an int)
    huge: bool  # clock at 2**53, where int and float part ways
    compaction: float  # P(a compaction event at a step)
    odd_compaction: float  # P(None/NaN/int bound or None compacted_content)
    rewind: float
    duplicate: float  # P(an Event object appears again later in the list)
    branchy: float  # P(an event gets a branch; half that for a scope)
    long_running: float
    bad_ids: float  # P(a reused, empty or None function-call id)


def draw_profile(c: Chooser, *, realistic: bool | None = None) -> Profile:
    if realistic is None:
        realistic = c.chance(0.35)
    if realistic:
        return Profile(
            realistic=True,
            tie=c.choice((0.0, 0.05, 0.2)),
            disorder=0.0,
            nan_events=0,
            int_timestamps=0.0,
            huge=False,
            compaction=c.choice((0.1, 0.2, 0.35)),
            odd_compaction=0.0,
            rewind=c.choice((0.0, 0.02, 0.05)),
            duplicate=0.0,
            branchy=c.choice((0.0, 0.1)),
            long_running=c.choice((0.1, 0.25)),
            bad_ids=0.0,
        )
    return Profile(
        realistic=False,
        tie=c.choice((0.0, 0.1, 0.3, 0.6)),
        disorder=c.choice((0.0, 0.05, 0.2)),
        nan_events=c.choice((0,) * 14 + (1, 2)),
        # Ints and NaNs send a whole session to google-adk's own code (the
        # Rust core declines them), so only a minority of sessions get them.
        int_timestamps=c.choice((0.0,) * 12 + (0.02, 0.2)),
        huge=c.chance(0.08),
        compaction=c.choice((0.05, 0.15, 0.3, 0.5)),
        odd_compaction=c.choice((0.0, 0.1, 0.3)),
        rewind=c.choice((0.0, 0.03, 0.1)),
        duplicate=c.choice((0.0, 0.0, 0.02, 0.05)),
        branchy=c.choice((0.0, 0.2, 0.5)),
        long_running=c.choice((0.05, 0.2, 0.4)),
        bad_ids=c.choice((0.0, 0.05, 0.2)),
    )


@dataclass
class Session:
    """A generated session: the events and how they were generated."""

    events: list[Event]
    profile: Profile


def _text(role: str, text: str, **part: Any) -> types.Content:
    return types.Content(role=role, parts=[types.Part(text=text, **part)])


#: The google-genai subclasses a role's content may be stored as: streaming
#: responses are aggregated into `ModelContent`, `Runner` helpers send
#: `UserContent` (both fix `role` and need parts).
STREAMED = {"user": types.UserContent, "model": types.ModelContent}

#: P(a content with parts is stored as its role's google-genai subclass).
STREAMED_SHARE = 0.4


def streamed(c: Chooser, content: types.Content | None) -> types.Content | None:
    """`content`, or now and then the same parts as `UserContent` /
    `ModelContent`, as a streaming app stores them."""
    if content is None or type(content) is not types.Content or not content.parts:
        return content
    cls = STREAMED.get(content.role or "")
    if cls is None or not c.chance(STREAMED_SHARE):
        return content
    return cls(parts=content.parts)


def is_finite_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))


class _Builder:
    def __init__(self, c: Chooser, profile: Profile) -> None:
        self.c = c
        self.p = profile
        self.events: list[Event] = []
        self.serial = itertools.count(1)
        self.call_serial = itertools.count(1)
        self.clock = HUGE if profile.huge else c.choice((0.0, 1000.0, 1.7e9))
        self.inv_serial = 0
        self.invocations: list[str] = []
        self.inv = self.new_invocation()
        self.call_ids: list[str] = []
        # Long-running calls whose real result has not arrived: (id, name).
        self.pending: list[tuple[str | None, str]] = []
        # Finite bounds of the compactions made so far.
        self.ranges: list[tuple[float, float]] = []
        self.last_end = -math.inf

    # -- primitives ------------------------------------------------------

    def new_invocation(self) -> str:
        if self.invocations and not self.p.realistic and self.c.chance(0.1):
            # Interleaved invocations: an old id comes back.
            return self.c.choice(self.invocations)
        self.inv_serial += 1
        inv = f"inv-{self.inv_serial}"
        self.invocations.append(inv)
        return inv

    def ts(self, *, fresh: bool = False) -> float:
        c, p = self.c, self.p
        if fresh or not self.events or not c.chance(p.tie):
            self.clock += c.choice((1.0, 0.5, 2.0, 0.25, 5.0))
        value = self.clock
        if c.chance(p.disorder):
            value -= c.choice((0.5, 1.0, 2.5, 10.0))
        return value

    def agent(self) -> str:
        return AGENTS[0] if self.c.chance(0.8) else AGENTS[1]

    def emit(
        self,
        *,
        author: str,
        content: types.Content | None = None,
        actions: EventActions | None = None,
        invocation_id: str | None = None,
        long_running: set[str] | None = None,
        fresh: bool = False,
    ) -> Event:
        c, p = self.c, self.p
        fields: dict[str, Any] = {
            "id": f"e{next(self.serial)}",
            "invocation_id": self.inv if invocation_id is None else invocation_id,
            "author": author,
            "content": streamed(c, content),
            "actions": EventActions() if actions is None else actions,
            "long_running_tool_ids": long_running,
            "timestamp": self.ts(fresh=fresh),
            "branch": c.choice(BRANCHES) if c.chance(p.branchy) else None,
            "isolation_scope": (c.choice(SCOPES) if c.chance(p.branchy / 2) else None),
        }
        if c.chance(p.int_timestamps):
            # Unvalidated, so the int stays an int (Event() would make it float).
            fields["timestamp"] = self.int_timestamp(fields["timestamp"])
            event = Event.model_construct(**fields)
        else:
            event = Event(**fields)
        self.events.append(event)
        return event

    def int_timestamp(self, value: float) -> int:
        if self.p.huge:
            return int(value) + self.c.choice((0, 1, -1))
        return math.floor(value)

    def call_id(self) -> str | None:
        c, p = self.c, self.p
        if self.call_ids and c.chance(p.bad_ids):
            return c.choice(self.call_ids)  # reused id
        if c.chance(p.bad_ids / 2):
            return c.choice(("", None))
        fid = f"{c.choice(('adk-', 'call_'))}{next(self.call_serial)}"
        self.call_ids.append(fid)
        return fid

    def call_event(self, n_calls: int, *, long_running: int = 0) -> list[tuple[str | None, str]]:
        """A model event with `n_calls` parallel calls, the first `long_running`
        of them long-running."""
        c = self.c
        parts = []
        if c.chance(0.2):
            parts.append(types.Part(text="let me check"))
        calls = []
        for k in range(n_calls):
            fid, name = self.call_id(), c.choice(TOOLS)
            calls.append((fid, name))
            part = types.Part(function_call=types.FunctionCall(id=fid, name=name, args={"k": k}))
            if k == 0 and c.chance(0.3):
                part.thought_signature = b"sig"
            parts.append(part)
        lr = {fid for fid, _ in calls[:long_running] if fid} or None
        self.emit(
            author=self.agent(),
            content=types.Content(role="model", parts=parts),
            long_running=lr,
        )
        return calls

    def responses(
        self,
        calls: Sequence[tuple[str | None, str]],
        *,
        author: str,
        payload: dict[str, Any],
        split: bool,
        fresh: bool = False,
    ) -> None:
        groups = [[call] for call in calls] if split else [list(calls)]
        if split and len(groups) > 1 and self.c.chance(0.5):
            groups.reverse()
        for group in groups:
            parts = [
                types.Part(
                    function_response=types.FunctionResponse(id=fid, name=name, response=payload)
                )
                for fid, name in group
            ]
            self.emit(
                author=author,
                content=types.Content(role="user", parts=parts),
                fresh=fresh,
            )

    # -- steps -----------------------------------------------------------

    def user_turn(self) -> None:
        self.inv = self.new_invocation()
        self.emit(author="user", content=_text("user", f"question {len(self.events)}"))

    def model_text(self) -> None:
        self.emit(author=self.agent(), content=_text("model", "an answer"))

    def tool_round(self) -> None:
        c = self.c
        calls = self.call_event(c.choice((1, 1, 2, 3)))
        answered = list(calls)
        if not self.p.realistic and c.chance(0.15):
            answered.pop()  # a call left without a response
        if not self.p.realistic and c.chance(0.1):
            answered.append((c.choice(("ghost", "", None)), "search"))  # orphan
        if answered:
            self.responses(
                answered,
                author=self.agent(),
                payload={"result": "ok"},
                split=c.chance(0.3),
            )
        if c.chance(0.6):
            self.model_text()

    def long_running_start(self) -> list[tuple[str | None, str]]:
        """A long-running call (maybe with parallel siblings) and its
        placeholder response; the real result comes later."""
        c = self.c
        calls = self.call_event(c.choice((1, 1, 2, 3)), long_running=1)
        self.responses(calls[:1], author=self.agent(), payload={"status": "pending"}, split=False)
        if len(calls) > 1:
            self.responses(
                calls[1:],
                author=self.agent(),
                payload={"result": "sibling"},
                split=c.chance(0.5),
            )
        self.pending.append(calls[0])
        return calls

    def long_running_resume(self) -> None:
        """The caller posts the real result back in a new invocation."""
        c = self.c
        call = self.pending.pop(c.integer(0, len(self.pending) - 1))
        self.inv = self.new_invocation()
        self.responses([call], author="user", payload={"result": "done"}, split=False, fresh=True)
        if c.chance(0.7):
            self.model_text()

    def long_running_compacted(self) -> None:
        """The call and its placeholder are summarized before the result comes
        back: `_recover_compacted_function_calls` must re-inject the call."""
        c = self.c
        first = max(0, len(self.events) - c.integer(0, 3))
        self.long_running_start()
        for _ in range(c.integer(0, 2)):
            self.model_text()
        window = [
            e.timestamp
            for e in self.events[first:]
            if not e.actions.compaction and is_finite_number(e.timestamp)
        ]
        if window:
            self.add_compaction(min(window), max(window))
        if c.chance(0.6):
            self.long_running_resume()

    def odd_event(self) -> None:
        c = self.c
        kind = c.choice(("state", "parts_none", "parts_empty", "thought", "both"))
        if kind == "state":
            self.emit(author=self.agent(), actions=EventActions(state_delta={"k": 1}))
        elif kind == "parts_none":
            self.emit(author=self.agent(), content=types.Content(role="model"))
        elif kind == "parts_empty":
            self.emit(author=self.agent(), content=types.Content(role="model", parts=[]))
        elif kind == "thought":
            self.emit(author=self.agent(), content=_text("model", "hm", thought=True))
        else:
            # A text part and a response part in one event.
            fid = c.choice(self.call_ids) if self.call_ids else None
            self.emit(
                author="user",
                content=types.Content(
                    role="user",
                    parts=[
                        types.Part(text="also"),
                        types.Part(
                            function_response=types.FunctionResponse(
                                id=fid, name="search", response={"r": 2}
                            )
                        ),
                    ],
                ),
            )

    def rewind(self) -> None:
        c = self.c
        mode = c.choice(("earlier", "own", "later", "unknown", "empty"))
        if c.chance(0.5):
            self.inv = self.new_invocation()
        target = {
            "earlier": c.choice(self.invocations),
            "own": self.inv,
            "later": f"inv-{self.inv_serial + c.integer(1, 3)}",
            "unknown": "ghost",
            "empty": "",
        }[mode]
        self.emit(author="user", actions=EventActions(rewind_before_invocation_id=target))

    # -- compactions -----------------------------------------------------

    def compaction(self) -> None:
        bounds = self.realistic_bounds() if self.p.realistic else self.chaotic_bounds()
        if bounds is not None:
            self.add_compaction(*bounds)

    def stamps(self) -> list[float]:
        return [
            e.timestamp
            for e in self.events
            if not e.actions.compaction and is_finite_number(e.timestamp)
        ]

    def realistic_bounds(self) -> tuple[float, float] | None:
        """Like the sliding-window and token-threshold compactors: a window of
        consecutive events after the last summary (with some overlap), maybe
        keeping a tail of recent events raw."""
        c = self.c
        stamps = self.stamps()
        fresh = [k for k, t in enumerate(stamps) if t > self.last_end]
        if not fresh:
            return None
        first = max(0, fresh[0] - c.choice((0, 0, 1, 2)))
        last = len(stamps) - 1 - c.choice((0, 0, 1, 2))
        if last < first:
            return None
        return stamps[first], stamps[last]

    def chaotic_bounds(self) -> tuple[Any, Any] | None:
        c = self.c
        stamps = self.stamps() or [self.clock]
        mode = c.choice(
            (
                "window",
                "identical",
                "contained",
                "containing",
                "overlap",
                "touching",
                "inverted",
                "offgrid",
                "point",
            )
        )
        if mode == "window" or not self.ranges:
            i = c.integer(0, len(stamps) - 1)
            j = c.integer(i, len(stamps) - 1)
            lo, hi = stamps[i], stamps[j]
        else:
            s, e = c.choice(self.ranges)
            width = e - s
            if mode == "identical":
                lo, hi = s, e
            elif mode == "contained":
                lo = s + width * c.choice((0.0, 0.25, 0.5))
                hi = e - width * c.choice((0.0, 0.25))
            elif mode == "containing":
                lo, hi = s - c.choice((0.0, 1.0, 2.0)), e + c.choice((0.0, 1.0, 3.0))
            elif mode == "overlap":
                lo, hi = s + width / 2, e + c.choice((0.5, 2.0, 5.0))
            elif mode == "touching":
                lo, hi = e, e + c.choice((0.25, 1.0, 4.0))
            elif mode == "inverted":
                lo, hi = e + 1.0, s
            elif mode == "offgrid":
                lo, hi = s + 0.125, e - 0.125
            else:
                lo = hi = c.choice(stamps)
        if c.chance(self.p.odd_compaction):
            odd_kinds = ["start_none", "end_none", "both_none", "start_nan"]
            # A NaN end is a NaN sort key and an int bound a non-float: both
            # make the Rust core decline, so only NaN / int sessions get them.
            if self.p.nan_events:
                odd_kinds += ["end_nan", "both_nan"]
            if self.p.int_timestamps:
                odd_kinds.append("ints")
            odd = c.choice(odd_kinds)
            if odd in ("start_none", "both_none"):
                lo = None
            if odd in ("end_none", "both_none"):
                hi = None
            if odd in ("start_nan", "both_nan"):
                lo = NAN
            if odd in ("end_nan", "both_nan"):
                hi = NAN
            if odd == "ints":
                lo, hi = self.int_timestamp(lo), self.int_timestamp(hi)
        return lo, hi

    def add_compaction(self, lo: Any, hi: Any) -> None:
        c, p = self.c, self.p
        content: types.Content | None = _text("model", f"summary of {lo}..{hi}")
        if not p.realistic and c.chance(p.odd_compaction / 2):
            content = None
        content = streamed(c, content)
        if lo is None or hi is None or content is None or type(lo) is int:
            # Unvalidated: None bounds, None content and ints stay as they are.
            compaction = EventCompaction.model_construct(
                start_timestamp=lo, end_timestamp=hi, compacted_content=content
            )
        else:
            compaction = EventCompaction(
                start_timestamp=lo, end_timestamp=hi, compacted_content=content
            )
        if is_finite_number(lo) and is_finite_number(hi):
            self.ranges.append((float(lo), float(hi)))
            if content is not None:
                self.last_end = max(self.last_end, hi)
        self.emit(
            author="user",
            invocation_id=f"summary-{len(self.ranges)}",
            actions=EventActions(compaction=compaction),
            fresh=p.realistic,
        )

    # -- the session -----------------------------------------------------

    def step(self) -> None:
        c, p = self.c, self.p
        if c.chance(p.compaction):
            self.compaction()
        elif self.pending and c.chance(0.3):
            self.long_running_resume()
        elif c.chance(p.long_running):
            if c.chance(0.5):
                self.long_running_compacted()
            else:
                self.long_running_start()
        elif c.chance(p.rewind):
            self.rewind()
        else:
            kind = c.choice(("user", "model", "tool", "tool", "odd"))
            if kind == "user":
                self.user_turn()
            elif kind == "model":
                self.model_text()
            elif kind == "tool":
                self.tool_round()
            else:
                self.odd_event()

    def finish(self, n: int) -> list[Event]:
        c, p = self.c, self.p
        events = self.events[:n]
        for _ in range(p.nan_events if events else 0):
            events[c.integer(0, len(events) - 1)].timestamp = NAN
        if p.duplicate:
            # The same Event object again, later in the list.
            for k in range(len(events) - 1, -1, -1):
                if c.chance(p.duplicate):
                    events.insert(c.integer(k + 1, len(events)), events[k])
        return events


def build_session(c: Chooser, *, max_events: int, realistic: bool | None = None) -> Session:
    profile = draw_profile(c, realistic=realistic)
    n = c.integer(0, max_events)
    builder = _Builder(c, profile)
    builder.user_turn()
    while len(builder.events) < n:
        builder.step()
    return Session(builder.finish(n), profile)


def random_session(seed: int, *, max_events: int = 300, realistic: bool | None = None) -> Session:
    """A session from a seeded plain-random generator."""
    rng = random.Random(seed)
    return build_session(RandomChooser(rng), max_events=max_events, realistic=realistic)


@st.composite
def sessions(
    draw: Callable[[st.SearchStrategy[Any]], Any],
    *,
    max_events: int = 40,
    realistic: bool | None = None,
) -> Session:
    """Hypothesis strategy of sessions."""
    return build_session(DrawChooser(draw), max_events=max_events, realistic=realistic)


def subset(c: Chooser, events: Sequence[Event]) -> list[Event]:
    """Post-compaction-like views of `events` for the recovery function: a
    contiguous window cut out, a random thinning, sometimes reordered."""
    out = list(events)
    mode = c.choice(("window", "thin", "all"))
    if mode == "window" and out:
        i = c.integer(0, len(out) - 1)
        j = c.integer(i, min(len(out), i + 20))
        del out[i:j]
    elif mode == "thin":
        out = [e for e in out if not c.chance(0.3)]
    if len(out) > 1 and c.chance(0.15):
        for k in range(len(out) - 1, 0, -1):  # Fisher-Yates
            m = c.integer(0, k)
            out[k], out[m] = out[m], out[k]
    return out


def scope_of(event: Event) -> str | None:
    """The event's isolation scope (google-adk 1.x Events have no such field
    and drop it when built)."""
    return getattr(event, "isolation_scope", None)


def describe(events: Sequence[object]) -> str:
    """A compact listing of a session, for failure messages."""
    lines = []
    for k, event in enumerate(events):
        if not isinstance(event, Event):
            lines.append(f"{k:3}: {event!r}")
            continue
        bits = [
            f"{k:3}: obj={id(event):x} id={event.id!r} ts={event.timestamp!r}",
            f"inv={event.invocation_id!r} author={event.author!r}",
        ]
        if event.branch or scope_of(event):
            bits.append(f"branch={event.branch!r} scope={scope_of(event)!r}")
        actions = event.actions
        if actions is not None and actions.compaction is not None:
            comp = actions.compaction
            has = comp.compacted_content is not None
            bits.append(
                f"COMPACTION[{comp.start_timestamp!r}, {comp.end_timestamp!r}]"
                f"{'' if has else ' compacted_content=None'}"
            )
        if actions is not None and actions.rewind_before_invocation_id is not None:
            bits.append(f"REWIND->{actions.rewind_before_invocation_id!r}")
        calls = [f.id for f in event.get_function_calls()]
        responses = [f.id for f in event.get_function_responses()]
        if calls:
            bits.append(f"calls={calls}")
        if responses:
            bits.append(f"responses={responses}")
        if event.long_running_tool_ids:
            bits.append(f"long_running={sorted(event.long_running_tool_ids)}")
        if event.content is None:
            bits.append("no-content")
        elif event.content.parts is None:
            bits.append("parts=None")
        lines.append(" ".join(bits))
    return "\n".join(lines)
