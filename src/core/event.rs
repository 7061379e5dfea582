//! The plain event view the algorithms work on.

/// An interned string (an invocation id or a function-call id). Equal strings
/// get equal symbols within one extraction; only non-empty strings are
/// interned, because google-adk treats empty ids as absent everywhere.
/// Symbols are dense (numbered from 0 as texts are first met): some
/// functions index tables by symbol (see [`per_symbol`]).
pub type Sym = u32;

/// A table with a `fill` for every symbol up to the largest of `syms`
/// (symbols are dense, so it is about as long as there are texts).
pub fn per_symbol<T: Clone>(syms: impl Iterator<Item = Sym>, fill: T) -> Vec<T> {
    vec![fill; syms.max().map_or(0, |s| s as usize + 1)]
}

/// A half-open span `[start, start + len)` into an id arena shared by a batch
/// of views (function-call ids, function-response ids).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    /// First position in the arena.
    pub start: u32,
    /// Number of ids.
    pub len: u32,
}

impl Span {
    /// The ids this span names in `arena`.
    #[inline]
    pub fn of<'a>(&self, arena: &'a [Sym]) -> &'a [Sym] {
        &arena[self.start as usize..(self.start + self.len) as usize]
    }
}

/// `actions.compaction` of an event, as far as the algorithms look at it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionView {
    /// `start_timestamp`; `None` when the Python value is `None`. May be NaN.
    pub start: Option<f64>,
    /// `end_timestamp`; `None` when the Python value is `None`. May be NaN.
    pub end: Option<f64>,
    /// Whether `compacted_content` is not `None`.
    pub has_content: bool,
}

impl CompactionView {
    /// Both bounds and the content are present: the compaction can cover events.
    #[inline]
    pub fn bounds(&self) -> Option<(f64, f64)> {
        match (self.start, self.end, self.has_content) {
            (Some(s), Some(e), true) => Some((s, e)),
            _ => None,
        }
    }
}

/// The fields of [`EventView`] an operation needs from each event (the
/// binding reads only those; `ident` is always read).
#[derive(Clone, Copy, Default)]
pub struct Need {
    /// `timestamp`.
    pub timestamp: bool,
    /// `actions.compaction`.
    pub compaction: bool,
    /// `actions.rewind_before_invocation_id`.
    pub rewind: bool,
    /// `invocation_id`.
    pub invocation: bool,
    /// Function call and response ids in `content.parts`, and the
    /// timestamps of the events that hold a response (the only ones
    /// call recovery compares).
    pub parts: bool,
    /// `isolation_scope`, with `actions` required not to be `None`
    /// (google-adk reads `event.actions.compaction` unguarded in window
    /// selection) and `invocation_id` required to be a `str` (it compares
    /// them for equality, and `None != ""` there).
    pub window: bool,
    /// What the function-call pairing trim reads besides the parts: the
    /// names of synthetic HITL calls, `long_running_tool_ids`, pending
    /// confirmation and auth keys.
    pub pairing: bool,
    /// `usage_metadata.prompt_token_count` and `author`.
    pub usage: bool,
}

impl Need {
    /// No field beyond the id every read takes (`Need::default()`, usable
    /// in constants).
    pub const NONE: Need = Need {
        timestamp: false,
        compaction: false,
        rewind: false,
        invocation: false,
        parts: false,
        window: false,
        pairing: false,
        usage: false,
    };

    /// Every field.
    pub const ALL: Need = Need {
        timestamp: true,
        compaction: true,
        rewind: true,
        invocation: true,
        parts: true,
        window: true,
        pairing: true,
        usage: true,
    };

    /// The fields of either.
    pub fn with(self, other: Need) -> Need {
        Need {
            timestamp: self.timestamp || other.timestamp,
            compaction: self.compaction || other.compaction,
            rewind: self.rewind || other.rewind,
            invocation: self.invocation || other.invocation,
            parts: self.parts || other.parts,
            window: self.window || other.window,
            pairing: self.pairing || other.pairing,
            usage: self.usage || other.usage,
        }
    }
}

/// The fields of one `Event` that compaction decisions read. Fields an
/// operation does not need are left at their defaults by the extractor.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EventView {
    /// Object identity of the Python event (google-adk matches some events by
    /// `id(event)`, not by value, so the same object twice is one identity).
    pub ident: u64,
    /// `timestamp`.
    pub timestamp: f64,
    /// Non-empty `invocation_id`.
    pub invocation: Option<Sym>,
    /// Non-empty `actions.rewind_before_invocation_id`.
    pub rewind_before: Option<Sym>,
    /// `actions.compaction`, when set.
    pub compaction: Option<CompactionView>,
    /// Non-empty ids of the function calls in `content.parts`, in order.
    pub calls: Span,
    /// Non-empty ids of the function responses in `content.parts`, in order.
    pub responses: Span,
    /// Whether any part carries a function response (with or without id).
    pub has_responses: bool,
    /// `isolation_scope`, where `None` is Python's `None` (an empty string
    /// is a symbol of its own here: google-adk compares scopes by equality).
    pub scope: Option<Sym>,
    /// Non-empty ids of the calls whose name is one of google-adk's synthetic
    /// client / HITL function names (`adk_request_credential`, ...).
    pub hitl_calls: Span,
    /// `long_running_tool_ids`, non-empty ones (google-adk only ever tests
    /// non-empty call ids against them).
    pub long_running: Span,
    /// Keys of `actions.requested_tool_confirmations` and
    /// `actions.requested_auth_configs`, empty strings included.
    pub pending: Span,
    /// `usage_metadata.prompt_token_count`, when both are set.
    pub prompt_tokens: Option<i64>,
    /// `author` (an empty author is a symbol too).
    pub author: Option<Sym>,
}

impl EventView {
    /// A view with only a timestamp set; handy in tests and benches.
    pub fn at(timestamp: f64) -> Self {
        EventView {
            timestamp,
            ..Default::default()
        }
    }

    /// A raw event at `timestamp` of invocation `invocation`; handy in tests.
    pub fn raw(timestamp: f64, invocation: Sym) -> Self {
        EventView {
            timestamp,
            invocation: Some(invocation),
            ..Default::default()
        }
    }

    /// A compaction event at `timestamp` over `[start, end]`, with content;
    /// handy in tests.
    pub fn compacting(timestamp: f64, start: f64, end: f64) -> Self {
        EventView {
            timestamp,
            compaction: Some(CompactionView {
                start: Some(start),
                end: Some(end),
                has_content: true,
            }),
            ..Default::default()
        }
    }
}
