//! What a session's index remembers of its last call of each operation.

use super::*;

/// The last rewinds call: its items and the positions that survived.
pub(super) struct RewindsMemo {
    pub(super) seen: Seen,
    pub(super) kept: Vec<u32>,
}

impl RewindsMemo {
    pub(super) fn memory_bytes(&self) -> usize {
        self.kept.capacity() * 4
    }
}

/// The last compaction-ranges call: its items and the ranges that
/// survived.
pub(super) struct RangesMemo {
    pub(super) seen: Seen,
    pub(super) ranges: Vec<CompactionRange>,
}

impl RangesMemo {
    pub(super) fn memory_bytes(&self) -> usize {
        self.ranges.capacity() * std::mem::size_of::<CompactionRange>()
    }
}

/// The last filtering call: its items, its result, and what extending it
/// needs.
pub(super) struct FilterMemo {
    pub(super) seen: Seen,
    /// The result: item positions, the top bit set for a summary.
    pub(super) items: Vec<u32>,
    pub(super) extension: Extension,
}

/// Marks an item that is a summary (see `FilterMemo::items`).
pub const SUMMARY_BIT: u32 = 1 << 31;

/// An item of a filtering result as [`FilterMemo::items`] keeps it.
pub fn encode_item(item: Item) -> u32 {
    match item {
        Item::Raw(i) => i as u32,
        Item::Summary(i) => i as u32 | SUMMARY_BIT,
    }
}

/// The item [`encode_item`] encoded.
pub fn decode_item(i: u32) -> Item {
    match i & SUMMARY_BIT {
        0 => Item::Raw(i as usize),
        _ => Item::Summary((i & !SUMMARY_BIT) as usize),
    }
}

impl FilterMemo {
    pub(super) fn memory_bytes(&self) -> usize {
        self.items.capacity() * 4 + 64
    }

    pub(super) fn items(&self) -> Vec<Item> {
        self.items.iter().map(|&i| decode_item(i)).collect()
    }
}

/// The lists of the last recovery call that re-injected nothing: the
/// source's items, the filtered list's items (a source position, or a slot
/// with the top bit set for a cached summary whose content holds neither
/// calls nor responses), and the state of the source's calls (see
/// [`Calls`]).
pub(super) struct RecoverMemo {
    pub(super) source: Seen,
    /// The largest of the source's slots: a slot above it is an event the
    /// source did not hold (slots are numbered in the order events are
    /// stored).
    pub(super) max_slot: Slot,
    pub(super) events: Vec<u32>,
    pub(super) calls: Calls,
}

impl RecoverMemo {
    pub(super) fn memory_bytes(&self) -> usize {
        self.events.capacity() * 4 + self.calls.memory_bytes() + 64
    }
}

/// A call recovery that re-injected something: the source's items, the
/// filtered list's items (their addresses; those not in the source held,
/// so that an address names the same object, with their instance dicts'
/// addresses and version tags: they are summaries, mostly, which are handed
/// out and may be edited), and the result.
pub(super) struct ReinjectMemo {
    pub(super) source: Seen,
    pub(super) events: Vec<usize>,
    pub(super) held: Vec<(Py<PyAny>, (usize, u64))>,
    pub(super) result: Vec<Recovered>,
}

impl ReinjectMemo {
    pub(super) fn memory_bytes(&self) -> usize {
        self.events.capacity() * 8
            + self.held.capacity() * 24
            + self.result.capacity() * std::mem::size_of::<Recovered>()
            + 64
    }
}

/// The last window selection: its items, what it was asked besides them,
/// and its answer.
pub(super) struct SelectionMemo {
    pub(super) seen: Seen,
    pub(super) asked: Asked,
    pub(super) plan: Arc<Plan>,
}

impl SelectionMemo {
    pub(super) fn memory_bytes(&self) -> usize {
        self.plan.memory_bytes() + 64
    }
}

/// What exact mode asked of a list (see [`exact_again`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ExactAsked {
    /// The prompt.
    Prompt,
    /// A sliding-window selection: interval and overlap.
    Sliding(i64, i64),
    /// The live events only (no selection).
    Live,
    /// A tail-retention selection: the retained events, the isolation
    /// scope and the agent name (`str` or `None`, compared by value), the
    /// token threshold, and the floor (the bits of the `f64`).
    Token {
        retention: usize,
        scope: Option<Box<str>>,
        agent: Option<Box<str>>,
        threshold: i64,
        floor: u64,
    },
}

/// A compaction event's coverage record as exact mode reads it: none,
/// one, or why the one it has is not used.
pub type Parsed = Option<Result<crate::core::exact::Record, String>>;

/// What writing a coverage record over a selection's handed-out list
/// reads: its views (timestamps, invocations, compactions) and coverage;
/// and, once read, what the rolling summary's seed takes from the
/// summaries it rolls (see `coverage::exact_seeds`).
#[derive(Debug)]
pub struct ForRecord {
    pub views: Vec<EventView>,
    pub coverage: Coverage,
    pub seeds: std::sync::OnceLock<SeedParts>,
    /// The record last written over these views with no foreign event:
    /// `(handed, seeds, written)`.
    pub written: std::sync::Mutex<Option<WrittenOver>>,
}

/// A record written over a handed-out list: the positions it was asked
/// for and what `coverage::write` made of them.
pub type WrittenOver = (
    Vec<usize>,
    Vec<usize>,
    Option<crate::core::coverage::Written>,
);

/// What the rolling summary's seed takes from the compaction events at
/// `positions` of a handed-out list: their summaries' parts in order, the
/// last summary's role, each summary's serialized size and the earliest
/// interval start (`None`: none is set).
#[derive(Debug)]
pub struct SeedParts {
    pub positions: Vec<usize>,
    pub parts: Py<PyList>,
    pub role: Py<PyAny>,
    pub sizes: Vec<i64>,
    pub start: Option<f64>,
}

/// An exact-mode answer: up to two lists of positions (a prompt's items,
/// or a selection's two lists) and the records that were not used.
#[derive(Debug, Default)]
pub struct ExactAnswer {
    pub first: Vec<u32>,
    pub second: Vec<u32>,
    /// A selection's list positions: the rewound events and those of its
    /// scope (`None`: every event), whose positions `first` and `second`
    /// are.
    pub rewound: Option<Vec<u32>>,
    pub scoped: Option<Vec<u32>>,
    /// A tail-retention selection's observed prompt token count.
    pub count: Option<i64>,
    /// A selection's earliest timestamp its compaction can reach (see
    /// `coverage::earliest`).
    pub since: f64,
    /// What a selection's record is written from (see
    /// `coverage::ExactSelection`).
    pub record: Option<Arc<ForRecord>>,
    /// A sliding-window selection's coverage, extended for the list with
    /// raw events appended (see [`exact_prefix`]).
    pub coverage: Option<Arc<Coverage>>,
    pub problems: Vec<(usize, String)>,
    /// A prompt's last sort key (its last item's timestamp, or interval
    /// end for a summary; -inf for an empty prompt, NaN when unknown).
    pub last: f64,
}

impl ExactAnswer {
    pub(super) fn memory_bytes(&self) -> usize {
        let positions = |v: &Option<Vec<u32>>| v.as_ref().map_or(0, Vec::capacity);
        (self.first.capacity()
            + self.second.capacity()
            + positions(&self.rewound)
            + positions(&self.scoped))
            * 4
            + self.record.as_ref().map_or(0, |r| {
                r.views.len() * std::mem::size_of::<EventView>() + coverage_bytes(&r.coverage)
            })
            + self.coverage.as_deref().map_or(0, coverage_bytes)
            + self
                .problems
                .iter()
                .map(|(_, why)| why.len() + 32)
                .sum::<usize>()
    }
}

/// An exact-mode answer and the list it was computed on.
pub(super) struct ExactMemo {
    pub(super) seen: Seen,
    pub(super) asked: ExactAsked,
    pub(super) answer: Arc<ExactAnswer>,
}

/// Bytes a coverage holds, about.
fn coverage_bytes(c: &Coverage) -> usize {
    c.hidden.len()
        + c.survive.len() * 8
        + c.extents
            .iter()
            .map(|x| 48 + x.holes.len() * 16)
            .sum::<usize>()
}
