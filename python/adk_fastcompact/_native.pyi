"""The compiled core of adk-fastcompact (`adk_fastcompact._native`).

Every function reads only the fields it needs from each google-adk Event and
returns the caller's own objects. A function returns `None` when it declines
an input that only google-adk's own implementation reproduces exactly (a NaN
timestamp that takes part in ordering, an object that is not exactly a
google-adk / google-genai model, a non-float timestamp, a sequence that is not
a list); the wrappers in `adk_fastcompact` then call google-adk's function.
"""

from collections.abc import Callable
from typing import Any, TypeVar, final

from google.adk.events.event import Event
from google.genai.types import Content

__all__ = [
    "ContextFilter",
    "ExactSelection",
    "LeanListing",
    "LeanRows",
    "Rules",
    "Selected",
    "TaskDelegations",
    "TaskScope",
    "__version__",
    "analyze_sessions",
    "analyze_stored",
    "apply_rewinds",
    "audit_stored",
    "content_size",
    "context_events",
    "coverage_record",
    "decline_counts",
    "decline_totals",
    "deep_copy_model",
    "exact_foreign",
    "exact_prompt",
    "exact_record",
    "exact_seeds",
    "exact_sliding_window",
    "exact_token_threshold",
    "function_call_ids",
    "get_compaction_ranges",
    "index_clear",
    "index_configure",
    "index_copied",
    "index_stats",
    "lean_positions",
    "new_coverage_record",
    "process_compaction_events",
    "prompt_chars_delta",
    "recover_compacted_function_calls",
    "sliding_window",
    "stored_again",
    "stored_event",
    "token_threshold_selection",
]

__version__: str

_ModelT = TypeVar("_ModelT")

def analyze_sessions(
    sessions: list[list[Event]],
    compaction_interval: int | None = None,
    overlap_size: int = 0,
    parallel: bool = True,
) -> list[dict[str, Any]]:
    """google-adk's decisions on each session (see `adk_fastcompact.analyze_sessions`).

    Args:
      sessions: Event lists.
      compaction_interval: The sliding window's interval, or None for no window.
      overlap_size: The sliding window's overlap.
      parallel: Analyse on rayon's pool; serially otherwise.

    Returns:
      Per session a dict of `live`, `ranges`, `prompt` (or `prompt_declined`)
      and `window`, or `{"declined": reason}`.

    Raises:
      ValueError: compaction_interval < 1 or overlap_size < 0.
    """

def analyze_stored(
    sessions: list[list[str | bytes]],
    compaction_interval: int | None = None,
    overlap_size: int = 0,
    parallel: bool = True,
) -> list[dict[str, Any]]:
    """`analyze_sessions` over sessions as stores keep them: each a list of
    its events' JSON documents (`Event.model_dump_json(exclude_none=True)`),
    parsed in Rust without building Events, the interpreter released.

    Returns:
      Per session what `analyze_sessions` returns, or
      `{"declined": "event N: why"}` when its event N cannot be read.

    Raises:
      TypeError: An event that is neither `str` nor `bytes`.
      ValueError: compaction_interval < 1 or overlap_size < 0.
    """

def coverage_record(value: object, start: float, end: float) -> dict[str, Any]:
    """Validates an exact-mode coverage record against its compaction's bounds.

    Args:
      value: `custom_metadata["adk_fastcompact"]` of a compaction event.
      start: The compaction's `start_timestamp`.
      end: The compaction's `end_timestamp`.

    Returns:
      The record: `v`, `start`, `end`, `holes` (a list of `{"i": invocation
      id, "t": timestamp in microseconds}`).

    Raises:
      ValueError: The record is malformed, of a later version, oversized,
        or its bounds do not contain the compaction's.
    """

def new_coverage_record(start: float, end: float, holes: list[tuple[str, float]]) -> dict[str, Any]:
    """The exact-mode coverage record of a compaction over `[start, end]`.

    Args:
      start: The interval the summary was made over.
      end: See `start`.
      holes: `(invocation_id, timestamp)` of the events inside the interval
        the summary does not stand in for.

    Returns:
      The record, as `coverage_record` returns it.

    Raises:
      ValueError: A bound or a hole's timestamp is not finite, or the
        bounds are inverted.
    """

def exact_prompt(
    events: list[Event],
    make_summary: Callable[[Event], Event],
    reuse_for: str | None = None,
) -> tuple[list[Event], list[tuple[int, str]]] | None:
    """Exact mode's `_process_compaction_events`.

    Args:
      events: The events prompt assembly filters.
      make_summary: Builds the summary of a surviving compaction event
        (called once per survivor, in event order).
      reuse_for: As for `process_compaction_events`: the summaries' author
        when building one draws no observable id; summaries cached for the
        same compaction event are then handed out again and new ones built
        in Rust.

    Returns:
      `(prompt, problems)`: the raw events no surviving compaction covers
      and the survivors' summaries in google-adk's order, and
      `(index, reason)` of every compaction whose coverage record was not
      used (read as its interval); None to decline.
    """

def exact_sliding_window(
    events: list[Event], interval: int, overlap: int, select: bool = True
) -> (
    tuple[
        list[Event],
        list[int],
        list[bool],
        float,
        list[tuple[int, str]],
        ExactSelection | None,
    ]
    | None
):
    """Exact mode's sliding-window selection over a session's `events`.

    Returns:
      `(events, handed, covered, since, problems, selection)`: the live events without
      isolation scope (rewinds applied), the positions among them to
      summarize (empty: do not run), which of them a compaction already
      covers (overlap), the earliest timestamp the compaction can reach
      (-inf when one is not finite), the unused records, and the handle of
      `events` for `exact_record` (None when nothing is handed); None to
      decline. With `select` false only the live events are read (`handed`
      empty).
    """

def exact_token_threshold(
    events: list[Event],
    isolation_scope: str | None,
    event_retention_size: int,
    agent_name: str,
    token_threshold: int,
    floor: float = ...,
) -> (
    tuple[
        list[Event],
        list[Event],
        int | None,
        list[int],
        list[int],
        float,
        list[tuple[int, str]],
        ExactSelection | None,
    ]
    | None
):
    """Exact mode's tail-retention selection over a session's `events`.

    `floor` is the earliest stamp an event not yet stored may carry (default
    `math.inf`: none); the candidates from the first stamped at or after it
    on stay raw, so the summary's interval ends below it.

    Returns:
      `(rewound, events, count, window, seeds, since, problems, selection)`: the
      rewound events, those of `isolation_scope`, google-adk's latest
      observed prompt token count of `agent_name` (None where google-adk
      estimates it), the positions in `events` of the raw events to
      summarize and of the surviving compaction events whose summaries seed
      the new one (both empty: do not run; not looked for when the count is
      below `token_threshold`), the earliest timestamp the compaction can
      reach, the unused records, and the handle of `events` for
      `exact_record` (None when both lists are empty); None to decline.
    """

def exact_foreign(events: list[Event], stored: list[Event]) -> list[int] | None:
    """The positions in `stored` (the session as its store holds it) of the
    events `events` (this invocation's copy) lacks, compared by event id
    through the session's index; None when either list does not go through
    the index (compare ids instead).
    """

def content_size(content: Content | None) -> int | None:
    """google-adk's weight of a request content, `len(content.model_dump_json(
    exclude_none=True, fallback=str))`, worked out from its fields: 0 for
    None, the length for a `Content` (or google-genai's `UserContent` /
    `ModelContent`) of `Part`s holding only `text` and `thought`, and None
    for anything else (the caller serializes it)."""

def exact_seeds(
    events: list[Event],
    seeds: list[int],
    size: Callable[[Content | None], int],
    selection: ExactSelection | None = None,
) -> tuple[list[Any], str | None, list[int], float | None]:
    """What the rolling summary's seed takes from the compaction events at
    `seeds` (positions in `events`).

    Args:
      events: The list `seeds` index.
      seeds: Positions of the compaction events whose summaries are rolled.
      size: The size of one compacted content, called for a summary that
        is not text parts alone (those are sized natively, as
        `content_size`).
      selection: The handle the selection returned with `events`: when
        `events` is that very list unchanged, the answer is kept with the
        selection and given again without reading the summaries.

    Returns:
      `(parts, role, sizes, start)`: the summaries' parts in order (a new
      list), the last summary's role, each summary's size, and the earliest
      interval start (None when none is set).

    Raises:
      ValueError: A position is out of range or names an event without a
        compaction.
    """

def exact_record(
    events: list[Event],
    handed: list[int],
    seeds: list[int],
    foreign: list[tuple[str, float]],
    ceiling: float,
    selection: ExactSelection | None = None,
    *,
    clock_skew: float | None = None,
) -> tuple[dict[str, Any], float, float] | None:
    """The coverage record of a compaction about to be appended to `events`.

    Args:
      events: The list `handed` and `seeds` index.
      handed: Positions of the events handed to the summarizer.
      seeds: Positions of the compaction events whose summaries seeded it.
      foreign: `(invocation_id, timestamp)` of events the store holds that
        `events` lacks (appended by another invocation).
      ceiling: The earliest timestamp an event stored after the compaction
        can carry (the caller's clock reading, and the start of every other
        invocation of the session still under way); the plain bounds end
        strictly below it, less `clock_skew` (`math.inf`: no limit; NaN:
        bounds that cover nothing).
      selection: The handle the selection returned with `events`: when
        `events` is that very list unchanged, the session is not read again.
      clock_skew: Seconds another clock may stamp an event stored after
        the compaction behind `ceiling` (another replica's, a stamp the
        application sets): the plain bounds end strictly below
        `ceiling - clock_skew`. None: 0. The record is the same whatever
        the margin.

    Returns:
      `(record, plain_start, plain_end)`: the record for `custom_metadata`
      and the bounds for the `EventCompaction` (inverted where no bounds
      are safe for a reader without the record); None when nothing handed
      has a finite timestamp.

    Raises:
      ValueError: A position is out of range, the events cannot be read,
        or `clock_skew` is not finite or is negative.
      TypeError: `clock_skew` is not a number (a bool is not).
    """

def deep_copy_model(model: _ModelT, memo: dict[int, Any] | None = None) -> _ModelT:
    """Returns a deep copy of a pydantic model, as google-adk's `deep_copy_model` does.

    google-adk's `utils._model_copy.deep_copy_model` (2.12+) made natively:
    lists, dicts, sets and models whose class's `__deepcopy__` is pydantic's,
    google-adk's or ours are copied here; `None`, `bool`, `int`, `float`,
    `str` and `bytes` (exact types) are returned as they are; every other
    value is handed to `copy.deepcopy(value, memo)`. A model that contains
    itself copies as a cycle. A tree deeper than the recursion limit raises
    `RecursionError`. See docs/session-copy.md.

    Args:
      model: The model to copy.
      memo: The `copy.deepcopy` memo (a dict): copies are recorded in it, so
        objects shared within the tree stay shared in the copy, and the
        originals are kept alive in the list at `memo[id(memo)]`.

    Returns:
      A deep copy of `model`.

    Raises:
      RecursionError: The tree is nested deeper than the recursion limit.
    """

def decline_counts(reset: bool = False) -> dict[str, int]:
    """How often the functions below declined on this thread, by reason.

    Args:
      reset: Start the counters again from zero (the returned counts are the
        ones before the reset).

    Returns:
      A mapping from reason to count.
    """

def decline_totals(reset: bool = False) -> tuple[dict[str, int], dict[str, int]]:
    """How often the functions below declined in this process, all threads.

    The first decline of each reason in the process logs one warning on the
    `adk_fastcompact` logger.

    Args:
      reset: Start the counts again from zero (the returned counts are the
        ones before the reset); each reason is then warned about again.

    Returns:
      `(by reason, by the google-adk function whose own code ran instead)`.
    """

def index_clear() -> None:
    """Drops every per-session index and the range tuples kept for reuse
    (`uninstall()` calls this).

    Call it after editing a stored Event in place: an object the index has
    read is trusted to keep what it showed while it lives.
    """

def index_copied(old: object, new: object, session: object) -> None:
    """Binds the deep copies in `new` to the index slots of the events in `old`.

    Called by the patched `Session.__deepcopy__` after copying a session's
    events: a deep copy equals its source when made, so it inherits what the
    index knows of the source instead of being read again.

    Args:
      old: The events copied from (a list of Events).
      new: Their copies, in the same order.
      session: The session copy holding `new`: the copies are held (and
        recognised by address) until it dies.
    """

def index_configure(
    *,
    enabled: bool | None = None,
    max_sessions: int | None = None,
    max_row_bytes: int | None = None,
) -> None:
    """Turns the per-session index on or off and sets how many sessions it keeps.

    Args:
      enabled: Whether calls go through the index (turning it off drops it).
      max_sessions: Sessions kept; beyond, the least recently used goes.
      max_row_bytes: Bytes of stored rows the row memo of `stored_event`
        keeps (256 MiB by default; 0 turns it off); beyond, the rows used
        longest ago go.
    """

def index_stats() -> dict[str, object]:
    """What the per-session indexes hold and how calls were answered.

    Returns:
      `enabled`, `max_sessions`, `sessions`, `events` (stored), `bytes`
      (memory of the indexes: stored views, id and address tables, weak
      references), `summaries` and `summary_bytes` (the cached summary
      Events, with their dicts), `scratch_bytes` (view buffers the calling
      thread keeps for its next calls: at most two, of up to 16,384 views),
      the row memo of `stored_event` (`rows` remembered, `rows_settled`,
      `row_bytes`, `max_row_bytes`, and counters `rows_reused`,
      `rows_decoded_first`, `rows_decoded_second`, `rows_unsettled`,
      `rows_evicted`), `prefetch` (whether reads of cold objects start their loads ahead:
      CPython 3.11 to 3.13 GIL builds, unless `ADK_FASTCOMPACT_PREFETCH` is
      `false`), `direct_fields` (whether model fields are read at their
      entry position in the instance dict instead of by a lookup: the
      same interpreters, unless `ADK_FASTCOMPACT_DIRECT_FIELDS` is
      `false`), `dict_tags` (whether a cached summary's dicts are checked
      for changes by their PEP 509 version tags instead of by their values:
      CPython 3.10 to 3.13 GIL builds, unless `ADK_FASTCOMPACT_DICT_TAGS` is
      `false`; each of the three only after its self-test on the running
      interpreter), and counters since the start: `by_identity` (items recognised as the
      object a slot is bound to), `by_id` (new objects of known events),
      `read` (new events), `changed` (stored values that a new object
      contradicted), `transient` (items read but not stored), `fallbacks`
      (calls that went without the index), `evictions`,
      `summaries_reused`, `summaries_built`, `rewinds_reused` (rewinds
      answered from the last one on the same list, or on it extended by
      events that rewind nothing), `ranges_reused` (compaction ranges
      likewise, the new events' ranges added), `filters_reused` (prompt
      filtering answered from the last one on the same list, or on it
      extended: plain events after its last item and outside every
      compacted range are appended, anything else is merged into it),
      `recoveries_reused` (call recovery answered from the last one that
      re-injected nothing, on both lists again or extended at their ends,
      or from the last one that re-injected, on the very same lists),
      `selections_reused` (a sliding-window or token-threshold selection
      answered from the session's last one, asked the same on the very
      same list), `exact_reused` (an exact-mode prompt or selection
      answered from the session's last one, asked the same on the very
      same list), `completed` (events a selection read for function-call
      data or usage counts beyond what its list was resolved for; with
      the index, each bound event's are read once and kept),
      `copied`, `direct`, `copy_seconds` (binding session copies), and
      for the whole process (all threads): `declines` (calls that fell
      back to google-adk's own code, by reason), `declines_by_function`
      (the same by the google-adk function that ran instead) and
      `classes_learned` (`(model, class, reads_like)` for every class met in
      a read model's place besides the model and its google-genai /
      google-adk subclasses; see `adk_fastcompact._classes`).
    """

def stored_event(
    row: object,
    decode: Callable[[Any], Any],
    copy: Callable[[Any], Any],
    same: Callable[[Any, Any], bool],
) -> Any:
    """Returns what `decode(row)` returns, decoding each stored row at most twice.

    The first sighting of a `str` or `bytes` row keeps `copy` of its
    decoding; the second decodes again and keeps the row if `same(first,
    second)`. Later sightings of a kept row return `copy` of its decoding;
    a row whose decodings differed is decoded every time. Keyed on the
    row's exact bytes; bounded by `index_configure(max_row_bytes=...)`.

    Args:
      row: The stored row (its bytes are the key).
      decode: google-adk's own decoding of the row.
      copy: Makes a copy the caller may mutate.
      same: Whether two decodings are interchangeable.

    Returns:
      The decoding, or a copy of an earlier equal one.
    """

@final
class ContextFilter:
    """google-adk's `_should_include_event_in_context`, read natively.

    Called as google-adk calls its function; an event or argument it does
    not read like google-adk's models (a foreign part, a non-`str` branch,
    ...) declines, and `original` answers. Each instance carries the
    `__name__`, `__qualname__`, `__module__`, `__doc__` and `__signature__`
    of `original` (and pickles by that name); a call that does not bind to
    `original`'s parameters goes to `original`, which raises its own
    `TypeError`.
    """

    def __new__(
        cls,
        original: Callable[..., Any],
        framework: str,
        credential: str,
        confirmation: str,
        node_info: type,
    ) -> ContextFilter:
        """Args:
        original: google-adk's function.
        framework: The framework's own function name (`adk_framework`).
        credential: The credential request's function name.
        confirmation: The confirmation request's function name.
        node_info: google-adk's `NodeInfo` model.

        Raises:
          TypeError: `original` does not take `_should_include_event_in_context`'s
            parameters.
        """

    @property
    def original(self) -> Callable[..., Any]:
        """google-adk's function this drop-in answers for."""

    def __call__(
        self,
        current_branch: str | None,
        event: Event,
        isolation_scope: str | None = None,
        *,
        node_path: str | None = None,
        include_thoughts: object = None,
    ) -> bool:
        """Whether `event` belongs in the LLM context (google-adk's rule)."""

@final
class TaskScope:
    """google-adk's `runners._find_active_task_scope`, read natively.

    Called as google-adk calls its function: calls the module's
    `_apply_rewinds` on `session.events` and reads the live events; an
    event it does not read like google-adk's models (a foreign part, a
    non-`str` scope, a response that is not a `dict`, ...) declines, and
    `original` answers (called with the same arguments). Named, and called
    wrongly, as `ContextFilter` is.
    """

    def __new__(
        cls,
        original: Callable[..., Any],
        module: object,
        finish: str,
        success: str,
        error: str,
        aborted: str,
    ) -> TaskScope:
        """Args:
        original: google-adk's function.
        module: The module defining it (whose `_apply_rewinds` it calls).
        finish: `FINISH_TASK_TOOL_NAME` as the module binds it.
        success: `FINISH_TASK_SUCCESS_RESULT` as the module binds it.
        error: `FINISH_TASK_ERROR_RESULT` as the module binds it.
        aborted: The error code of an abort event (`_INVOCATION_ABORTED`).

        Raises:
          TypeError: `original` does not take `_find_active_task_scope`'s parameters.
        """

    @property
    def original(self) -> Callable[..., Any]:
        """google-adk's function this drop-in answers for."""

    def __call__(self, session: Any) -> tuple[str, str] | None:
        """The active task's `(isolation_scope, invocation_id)`, or None."""

@final
class TaskDelegations:
    """google-adk's `_find_unresolved_task_delegations`, read natively.

    Called as google-adk calls its function: imports `_apply_rewinds` and
    `_TaskAgentTool` at every call, and asks `tools_dict.get` and
    `isinstance` about the same calls in the same order; an event or
    argument it does not read like google-adk's models declines, and
    `original` answers (called with the same arguments). Named, and called
    wrongly, as `ContextFilter` is.
    """

    def __new__(cls, original: Callable[..., Any], rewinds: str, tools: str) -> TaskDelegations:
        """Args:
        original: google-adk's function.
        rewinds: The module `_apply_rewinds` is imported from.
        tools: The module `_TaskAgentTool` is imported from.

        Raises:
          TypeError: `original` does not take `_find_unresolved_task_delegations`'s
            parameters.
        """

    @property
    def original(self) -> Callable[..., Any]:
        """google-adk's function this drop-in answers for."""

    def __call__(
        self, session: Any, owner: str, tools_dict: Any, isolation_scope: str | None = None
    ) -> list[Any]:
        """The task delegation calls of `owner` without a response."""

def function_call_ids(events: object, method: Callable[..., Any]) -> set[Any] | None:
    """The truthy ids of every function call in the events' parts.

    Args:
      events: A list of Events.
      method: google-adk's `LlmResponse.get_function_calls`; an event whose
        class overrides it declines.

    Returns:
      The ids, or None to decline.
    """

def context_events(
    events: object,
    invocation_id: object,
    branch: object,
    current_invocation: bool,
    current_branch: bool,
    methods: tuple[Callable[..., Any], Callable[..., Any]],
) -> list[Event] | None:
    """`InvocationContext._get_events` for a context that is not a
    single-turn node: the session's `events` of the context's invocation
    (with `current_invocation`) that match its `branch` (with
    `current_branch`), in order.

    Args:
      events: The session's events.
      invocation_id: The context's invocation id.
      branch: The context's branch.
      current_invocation: Keep only the context's invocation.
      current_branch: Keep only events matching the context's branch.
      methods: google-adk's `get_function_calls` and
        `get_function_responses`; an event whose class overrides them declines.

    Returns:
      The kept events (a new list), or None to decline.
    """

def stored_again(events: object, event: object) -> bool | None:
    """Whether `events` (a stored session's) holds an event with `event`'s
    id that equals it (`InMemorySessionService.append_event`'s re-delivery
    test).

    Args:
      events: The stored session's events.
      event: The event being appended.

    Returns:
      Whether it is stored already, or None to decline.
    """

def lean_positions(
    events: object,
    compaction_interval: int | None = None,
    overlap_size: int = 0,
    rules: Rules | None = None,
    underway: list[str] = ...,
    answering: list[str] = ...,
) -> list[int] | None:
    """Positions of the events a Runner turn reads (docs/lean-loading.md).

    Args:
      events: The stored session's events, in the order the store loads them.
      compaction_interval: The app's sliding-window interval (None: none).
      overlap_size: The sliding window's overlap.
      rules: The family's selection rules (google-adk 2.13's by default).
      underway: Invocation ids whose events are all needed (a resumed one).
      answering: Function-call ids the turn's new message answers.

    Returns:
      Ascending positions, or None to decline (load the whole session).
    """

@final
class LeanRows:
    """The views of the rows a SQL session service's lean loads have read,
    per session, within a budget of rows (docs/lean-loading.md)."""

    def __new__(cls, budget: int = 4_000_000) -> LeanRows:
        """An empty cache.

        Args:
          budget: Rows held at most besides the session in use; past it the
            sessions loaded longest ago are forgotten (read again when next
            loaded).
        """

    def listing(self, session: str, rows: object, columns: bool = False) -> LeanListing | None:
        """One load's listing of a session's rows.

        Args:
          session: The session's key (app, user and session id).
          rows: Each row's `(id, invocation_id, timestamp)` or
            `(id, invocation_id, timestamp, rowid)`, in loading order.
          columns: Rows decode as `DatabaseSessionService` decodes them (the
            id and invocation id columns over the stored JSON).

        Returns:
          The listing, or None where a row's columns are not google-adk's.
        """

    def horizon(self, session: str) -> Any | None:
        """The timestamp column (as the store returned it) of the newest row
        of the session's last decided listing, or None before one."""

    def tail_listing(
        self, session: str, rows: object, count: int, columns: bool = False
    ) -> LeanListing | None:
        """A listing from the last decided one and the rows stamped from its
        `horizon` on.

        Args:
          session: The session's key.
          rows: The session's rows stamped from the horizon on, as `listing`
            takes them, in loading order.
          count: The number of the session's rows now.
          columns: As for `listing`.

        Returns:
          The last listing's rows before the horizon followed by `rows`, or
          None where that is not the whole session (list it whole).
        """

    def stats(self) -> tuple[int, int]:
        """`(sessions, rows)` held."""

    def clear(self) -> None:
        """Forgets every session."""

@final
class LeanListing:
    """One load's listing of a session's rows (`LeanRows.listing`)."""

    def __len__(self) -> int:
        """Rows listed."""

    @property
    def missing(self) -> list[int]:
        """Positions of the rows not read yet (their JSON goes to `parse`)."""

    def keys(self, positions: list[int]) -> list[tuple[str, int]]:
        """The event id and storage row id (0 where the store has none) of
        the rows at `positions`, to fetch them by.

        Raises:
          ValueError: A position past the listing, or the session's rows
            forgotten meanwhile.
        """

    def holds(self, positions: list[int], rows: object) -> bool:
        """Whether `rows` (as `LeanRows.listing` takes them) are the listed
        rows at `positions`, one each."""

    def parse(
        self,
        positions: list[int],
        texts: list[Any],
        timestamps: list[float | None] | None = None,
    ) -> str | None:
        """Reads the stored JSON of the rows at `positions`.

        Args:
          positions: Listing positions, ascending.
          texts: Each row's stored JSON (`str` or `bytes`).
          timestamps: For a columns listing, each row's timestamp column as
            an epoch (used where its JSON has none).

        Returns:
          None, or why a row cannot be read (the caller loads whole).

        Raises:
          ValueError: The lists differ in length.
        """

    def needed(
        self,
        compaction_interval: int | None = None,
        overlap_size: int = 0,
        rules: Rules | None = None,
        underway: list[str] = ...,
        answering: list[str] = ...,
    ) -> list[int] | None:
        """Positions of the rows a Runner turn reads (`lean_positions`'s
        answer over the listed rows).

        Returns:
          Ascending positions, or None where a row is not read yet (or the
          session's rows were forgotten meanwhile): load the whole session.
        """

def apply_rewinds(events: object) -> list[Event] | None:
    """The events that survive every rewind, in order.

    Args:
      events: The session's events, in chronological order.

    Returns:
      The surviving events, or None to decline.
    """

def audit_stored(
    sessions: list[list[str | bytes]],
    order: str = "stored",
    compaction_interval: int | None = None,
    overlap_size: int = 0,
    token_threshold: int | None = None,
    event_retention_size: int | None = None,
    parallel: bool = True,
) -> list[dict[str, Any]]:
    """Audits stored sessions for events interval coverage hid or showed twice.

    Args:
      sessions: Per session its events' JSON documents, in storage order.
      order: How the store loads a session: "stored" (as given),
        "timestamp" (by timestamp, ties in storage order: the SQLite
        service) or "timestamp_id" (ties by event id: the database service).
      compaction_interval: The sliding window replayed (None: not replayed).
      overlap_size: Its overlap.
      token_threshold: Checked (>= 1); the replay does not need it.
      event_retention_size: Tail retention replayed (None: not replayed).
      parallel: Sessions on rayon's pool; serially otherwise.

    Returns:
      Per session `{"declined": "event N: why"}`, or a dict of `events`,
      `compactions` (each `position`, `trigger`, `replayed`, `handed`,
      `seeds`, `selected_over`, `unseen` (events stored before it that its
      selection did not see), `record` and, for a malformed record,
      `record_error`), `hidden` (each `position`, `cause`, `compaction`),
      `duplicated` (each `position`, `compaction`), `undecidable` (each
      `position`, `could_be` ("hidden" or "duplicated"), `compaction`,
      `readings`: a surviving summary reproduces under several copies of the
      session, which disagree on whether it was handed the event, and
      `reason`, why the copy is unknown: "maker" (several invocations'
      copies), "resumed" (its maker's, fetched where it ran or resumed),
      "prefix" (no maker's copy; several prefixes of the store) or "seed"
      (a summary it rolls up has several readings)),
      `prompt_size` (of the root scope's prompt), `stalled` (None, or
      `trigger`, `backlog`, `backlog_invocations`, `prompt_then`: a
      configured entry point is due and selects nothing) and, where a
      prompt cannot be built, `prompt_error`. Each isolation scope's prompt
      is built from that scope's events alone, as google-adk does. Positions
      index the session's list.

    Raises:
      TypeError: An event that is neither `str` nor `bytes`.
      ValueError: A setting out of range or an unknown `order`.
    """

def get_compaction_ranges(events: object) -> list[tuple[int, float, float]] | None:
    """The non-subsumed compaction ranges, in event order.

    Args:
      events: The session's events.

    Returns:
      `(event index, start, end)` per surviving compaction (floats equal to
      the events' own, which are the very objects where a bound is NaN), or
      None to decline. Equal tuples of numbers are made once and handed out
      again by later calls.
    """

def process_compaction_events(
    events: object, make_summary: Callable[[Event], Event], reuse_for: str | None = None
) -> list[Event] | None:
    """The history with compacted events replaced by summaries.

    Args:
      events: The events to filter.
      make_summary: Builds the summary Event of a compaction event; called
        once per surviving compaction that needs a new summary, in event
        order.
      reuse_for: The summaries' author, when a summary handed out before for
        the same compaction event object and author may be handed out again
        while neither it nor any of its values changed (only when building
        one draws no observable id).

    Returns:
      The filtered events in prompt order, or None to decline.
    """

def recover_compacted_function_calls(
    events: object, source_events: object, by_id: bool = False
) -> list[Event] | None:
    """Re-injects function-call events whose responses survived compaction.

    Args:
      events: The filtered events.
      source_events: The events before filtering.
      by_id: Match calls to responses by id alone, as google-adk 2.7 to
        2.12 do (else by occurrence, as 2.13 does).

    Returns:
      `events` itself when nothing is re-injected, a new list otherwise, or
      None to decline.
    """

@final
class ExactSelection:
    """The list an exact-mode selection handed out, with what writing the
    coverage record over it reads (pass it to `exact_record`)."""

@final
class Rules:
    """Where google-adk's families select differently, built once per profile
    and given to `sliding_window` and `token_threshold_selection`.

    Args:
      scoped: Compact only events of no isolation scope (sliding window) or
        of the asked scope (token threshold), as google-adk 2.13 does (before
        2.13, every event).
      dead_calls: Retry the pairing trim past provably dead calls (2.12 on;
        before, the strict pass is the answer).
      priced: Price the selection for `_is_range_worth_compacting` (2.12 on;
        else `pricing` is None).
      own_counts: The observed prompt token count is the agent's own, newer
        than the newest compaction (2.10 on; before, the newest of any event).
      rewinds: Leave rewound invocations out first (2.5 on; before, every
        event is read).
      self_contained: Trim the window to its longest self-contained prefix
        (2.3 on; before, truncate it before pending function calls and
        unresolved tool confirmation or auth requests of the session).
    """

    def __new__(
        cls,
        *,
        scoped: bool = True,
        dead_calls: bool = True,
        priced: bool = True,
        own_counts: bool = True,
        rewinds: bool = True,
        self_contained: bool = True,
    ) -> Rules: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Selected:
    """The filtered history of the live list a window selection handed out.

    Given back to `prompt_chars_delta` with that list (unchanged: same
    length, the same object at every position), it spares reading the
    list's events again.
    """

def prompt_chars_delta(
    events: object, compaction_event: object, selected: Selected | None = None
) -> tuple[list[Content | None], list[Content | None], int] | None:
    """What appending a compaction to the history changes in the prompt.

    Args:
      events: The session events the compaction would be appended to.
      compaction_event: The compaction event to price.
      selected: The handle of the selection that handed out `events`, if any.

    Returns:
      `(removed, added, materialized)`: the request contents of the
      filtered-history items that appending the compaction removes and adds,
      and how many summary Events google-adk builds measuring that; or None
      to decline.
    """

def sliding_window(
    events: object,
    compaction_interval: int,
    overlap_size: int,
    rules: Rules | None = None,
) -> (
    tuple[
        list[Event],
        list[Event],
        tuple[list[Content | None], list[Content | None], bool, Content | None, int] | None,
        Selected | None,
    ]
    | None
):
    """The sliding-window selection of google-adk's compactor.

    Args:
      events: `session.events`.
      compaction_interval: New invocations that trigger a compaction.
      overlap_size: Earlier invocations the window reaches back.
      rules: The family's `Rules` (None: google-adk 2.13's).

    Returns:
      `(events, events_to_compact, pricing, selected)`: the live unscoped
      events, the window after the function-call pairing trim, (for a
      non-empty window) `(removed, added, weightless_added, previous_summary,
      materialized)`, what google-adk's weightless-summary pricing changes in
      the filtered history and how many summary Events it builds doing so,
      and the `Selected` handle of `events` (None when the window is empty);
      or None to decline.
    """

def token_threshold_selection(
    events: object,
    isolation_scope: str | None,
    event_retention_size: int,
    agent_name: str,
    rules: Rules | None = None,
) -> (
    tuple[
        list[Event],
        list[Event],
        int | None,
        list[Event],
        Event | None,
        tuple[list[Content | None], list[Content | None], bool, Content | None, int] | None,
        Selected | None,
    ]
    | None
):
    """The token-threshold selection of google-adk's compactor.

    Args:
      events: `session.events`.
      isolation_scope: The scope compacted.
      event_retention_size: Raw events kept uncompacted at the tail.
      agent_name: Whose observed prompt token counts count (all when empty).
      rules: The family's `Rules` (None: google-adk 2.13's); without
        `scoped` every event counts (the scope unread), without `own_counts`
        the newest count of any event (the agent unread).

    Returns:
      `(rewound_events, events, prompt_token_count, events_to_compact,
      seed_compaction_event, pricing, selected)`, or None to decline
      (`rewound_events` is `events` itself when they hold the same events;
      neither is to be modified). The count is None
      where google-adk falls back to its estimate; the rolling-summary seed is
      not in `events_to_compact` and is built from `seed_compaction_event`;
      `pricing` is as for `sliding_window`, with the seed priced too;
      `selected` is the `Selected` handle of `events` (None when nothing is
      to be compacted).
    """
