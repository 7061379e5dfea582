//! Binding of `core::index`: per-session event indexes kept across calls.
//!
//! A call's list is matched against the index of its session (keyed by the
//! `id` of the list's first event, the session's first event in every list
//! google-adk passes). Each item is one of:
//!
//! - **the object a slot is bound to**, recognised without touching it: the
//!   index holds a *weak* reference to that object, and an address can only
//!   be reused after the object is freed, which clears the weak reference
//!   first; a live weak reference pointing at the address proves identity.
//!   (Strong references would prove it too, but keep every superseded copy
//!   of the session alive and make us its last owner: InMemorySessionService
//!   hands out a deep copy per invocation, and freeing one 10k-event copy
//!   takes ~35 ms, which would land in our next call.) Fields the object
//!   already showed are taken from the index; the rest are read once.
//! - **a deep copy of a bound object**, bound at copy time by
//!   [`index_copied`] (called from the `Session.__deepcopy__` that
//!   `install()` wraps): it equals its source in every field when made. The
//!   copies are held strongly by a [`CopyHolder`] until the session copy
//!   they were made for dies (the holder is the callback of a weak
//!   reference to it), so while it lives an address names its copy with no
//!   weak reference per event; after, they are objects with known ids. The
//!   source, the stored original a session service copies for every
//!   invocation, is then held strongly (it lives as long as the session).
//!   A source known by id only (an event first read through a copy: the
//!   compaction event google-adk appends after an invocation's last model
//!   call is first read in the next invocation's copy) is read at copy
//!   time like any object with a known id, then bound the same way.
//! - **another object with a known `id`** (read through the instance
//!   `__dict__`): an event a database service rebuilt, a copy made without
//!   the hook. The slot is bound to the new object, and every field
//!   the call needs is read from it and compared with the stored value;
//!   what differs replaces the stored value (counted as `changed`). Nothing
//!   about an object is trusted before it showed it: an event with a known id
//!   but other content (a caller that edits stored events, or reuses ids
//!   across sessions) can never be mistaken for the stored one. What the
//!   index saves on such an object is the storing, not the reading.
//! - **an unknown id**: read and stored.
//!
//! Objects are trusted to keep what they showed while they live: an event
//! edited *in place* after a call read it is not re-read (google-adk never
//! edits an appended event; a rewind is a new event). A caller that does
//! must call `index_clear()`.
//!
//! A list whose objects are neither bound nor in the last list read
//! directly is read directly (objects seen once cost more to bind than to
//! read); see `Tracked::worth_indexing`.
//!
//! Indexes are evicted least recently used first beyond `max_sessions`, and
//! all are dropped by `index_clear()` (which `uninstall()` calls).

use super::error::{Extracted, Outcome};
use super::extract::{event_dict, Extractor, Interner, Need, CHUNK};
use super::scratch::Views;
use super::summary;
use super::version_tag;
use super::window::{Asked, Plan};
use crate::core::coverage::Coverage;
use crate::core::event::Sym;
use crate::core::filter::{self, Extension, Item};
use crate::core::hash::FastMap;
use crate::core::index::{copy_spans, group, id_key, pick, EventIndex, Slot};
use crate::core::ranges::{survivors, CompactionRange};
use crate::core::recover::{Calls, Recovered};
use crate::core::EventView;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::Mutex;

/// One session's index and what belongs with it on the Python side.
struct Tracked {
    core: EventIndex,
    interner: Interner,
    /// The object each slot is bound to: a weak reference to it (it must
    /// not keep a session's objects alive), or, where `strong` says so, the
    /// object itself (once it was the source of a deep copy: the stored
    /// original a session service copies for every invocation, which lives
    /// as long as the session anyway).
    primary: Vec<Option<Py<PyAny>>>,
    strong: Vec<bool>,
    /// Per slot, the [`CopyHolder`] of its second object (a deep copy of
    /// the first, bound by [`index_copied`]), by number; read only where the
    /// core has a second address for the slot. Empty until the first copy.
    alias_holder: Vec<u32>,
    /// The holders of the copies bound so far (dead ones pruned at the
    /// next copy), by number, ascending.
    holders: Vec<(u32, Py<CopyHolder>)>,
    next_holder: u32,
    /// Summary Events built for compaction events, by slot.
    summaries: FastMap<Slot, Summary>,
    /// The call-recovery view of a slot's summaries when their content
    /// holds neither calls nor responses (what a summary usually holds:
    /// text). Every object bound to a slot is its primary or a deep copy
    /// of it, so their compacted contents hold the same parts; learned from
    /// the first summary read, forgotten when the slot is bound anew.
    plain: FastMap<Slot, EventView>,
    /// What the summaries of a compaction slot take from the stored
    /// original it holds strongly (see `summary::Source`: timestamp,
    /// content, branch, scope, invocation id, actions), read when its first
    /// summary is built ([`Loaded::primary_values`]): the summary of the
    /// original and of its copies (see [`Origin::Primary`]). Forgotten when
    /// the slot is bound anew or its values change.
    sources: FastMap<Slot, summary::HeldSource>,
    /// Exact mode's coverage record of the stored original slot `slot`
    /// holds strongly, parsed once per binding (see
    /// [`Loaded::record_at`]).
    records: FastMap<Slot, Arc<Parsed>>,
    /// The last `apply_rewinds` on this session through the index, to
    /// answer the next one on the same list, or on it extended (see
    /// [`rewinds_again`]).
    rewinds: Option<RewindsMemo>,
    /// The last `get_compaction_ranges` on this session through the index,
    /// to answer the next one on the same list, or on it extended (see
    /// [`ranges_again`]).
    ranges: Option<RangesMemo>,
    /// The last prompt filtering on this session through the index, to
    /// answer the next one on the same list extended (see
    /// [`filter_again`]).
    filtered: Option<FilterMemo>,
    /// The last call recovery through the index that re-injected nothing,
    /// to answer the next one on both lists extended (see
    /// [`recover_again`]).
    recovered: Option<RecoverMemo>,
    /// The last call recovery through the index that re-injected
    /// something, to answer the next one on the very same lists (see
    /// [`recover_same`]).
    reinjected: Option<ReinjectMemo>,
    /// The last window selection (sliding window or token threshold)
    /// through the index, to answer the next one asked the same on the
    /// very same list (see [`selection_again`]).
    selection: Option<SelectionMemo>,
    /// Exact mode's last answers on this session, one per question (see
    /// [`exact_again`]).
    exact: Vec<ExactMemo>,
    /// Bumped whenever what a slot stores changes, so a remembered result
    /// is only reused over unchanged views. (Binding a slot to another
    /// object of equal values does not bump it: a remembered result checks
    /// each of its objects is still bound, see [`Seen::begin`]; the stored
    /// original a session service copies is bound so in every invocation.)
    generation: u64,
    /// The addresses of the last list read directly, as a one-hash bitmap
    /// (see `worth_indexing`); only compared, never dereferenced.
    seen: Vec<u64>,
    /// That list's first object, held: while it is, a list that begins
    /// with it can hold that list's objects, and a list that does not
    /// holds new objects, some of them maybe at the addresses of that
    /// list's dead ones (a session's fresh Events are often allocated where
    /// the last invocation's were freed), which `seen` cannot tell apart.
    seen_first: Option<Py<PyAny>>,
    last_used: u64,
    /// Bumped whenever an object the index may have named in a remembered
    /// result can have died: a weakly bound object dying (its weak
    /// reference's callback, [`Obituary`]), a holder letting go of its
    /// copies, a slot bound anew (its object no longer held or watched).
    /// While it has not moved, an object a remembered result named is
    /// alive, so an item at its address is that object: the result's
    /// objects are then compared by address alone (see [`Seen::begin`]).
    deaths: Arc<AtomicU64>,
    /// The weak references' callback that bumps `deaths`, made once.
    obituary: Option<Py<Obituary>>,
    /// The death count at which every weakly bound object was alive (see
    /// [`Tracked::settle`]): while `deaths` has not moved from it, an item
    /// at a weakly bound slot's address is that slot's object, without
    /// asking its weak reference.
    alive_at: Option<u64>,
}

/// The addresses and slots of a list's objects as calls saw them, shared
/// by the remembered results that saw the same objects, each naming a
/// prefix of it (see [`Seen`]): the several results a model call leaves
/// over one session list keep one copy of its addresses instead of one
/// each. A result extended by objects past the record's end pushes them in
/// place (the others' prefixes are unchanged); by the very objects the
/// record holds next, it takes those; by others, it forks a record of its
/// own.
#[derive(Default)]
struct Record {
    addrs: Vec<usize>,
    slots: Vec<Slot>,
}

impl Record {
    fn memory_bytes(&self) -> usize {
        self.addrs.capacity() * 8 + self.slots.capacity() * 4 + 64
    }

    /// Whether its entries from `from` on begin with `addrs` and `slots`.
    fn holds_at(&self, from: usize, addrs: &[usize], slots: &[Slot]) -> bool {
        let to = from + addrs.len();
        self.addrs.len() >= to && self.addrs[from..to] == *addrs && self.slots[from..to] == *slots
    }
}

/// A [`Record`] shared by the results of one session's index (which only
/// the thread that checked the index out touches: the lock is never
/// contended).
type Shared = Arc<Mutex<Record>>;

fn lock(record: &Shared) -> std::sync::MutexGuard<'_, Record> {
    record.lock().unwrap_or_else(|p| p.into_inner())
}

/// The objects a remembered result was computed from: the first `len`
/// addresses and slots of `record` (each bound then), with the index's
/// generation and `Tracked::deaths` when they were last known bound.
struct Seen {
    record: Shared,
    len: usize,
    generation: u64,
    deaths: u64,
}

impl Seen {
    /// The objects of a call and their slots, or `None` when one is not
    /// bound; in a record another result of `t` holds, when one begins
    /// with them.
    fn of(t: &Tracked, objects: &[Bound<'_, PyAny>], slots: &[Slot]) -> Option<Self> {
        if slots.contains(&Slot::MAX) {
            return None;
        }
        let addrs: Vec<usize> = objects.iter().map(|o| o.as_ptr() as usize).collect();
        let record = t.record_for(&addrs, slots).unwrap_or_else(|| {
            Arc::new(Mutex::new(Record {
                addrs,
                slots: slots.to_vec(),
            }))
        });
        Some(Seen {
            record,
            len: objects.len(),
            generation: t.generation,
            deaths: t.deaths(),
        })
    }

    /// Its addresses and slots.
    fn with<R>(&self, f: impl FnOnce(&[usize], &[Slot]) -> R) -> R {
        let record = lock(&self.record);
        f(&record.addrs[..self.len], &record.slots[..self.len])
    }

    /// Whether `list` holds exactly these objects, over an unchanged index,
    /// with no object dead since they were known bound (so each is alive,
    /// and an item at its address is it). Without the per-object check of
    /// [`Seen::begin`]: after any death, `false`.
    fn unchanged(&self, t: &Tracked, list: &Bound<'_, PyList>) -> bool {
        self.generation == t.generation
            && self.deaths == t.deaths()
            && list.len() == self.len()
            && self.with(|addrs, _| starts_with(list, addrs))
    }

    fn len(&self) -> usize {
        self.len
    }

    /// Whether `list` begins with these objects, each still bound to its
    /// slot (a copy whose holder lives, or an object the slot is bound to),
    /// over an unchanged index. When no object can have died since they
    /// were known bound (`deaths`, see `Tracked::deaths`), each is still
    /// alive, so an item at its address is it: only addresses are compared.
    /// After a full check, `deaths` is the count now.
    fn begin(&mut self, t: &Tracked, list: &Bound<'_, PyList>) -> bool {
        if self.generation != t.generation || list.len() < self.len() {
            return false;
        }
        let now = t.deaths();
        if self.deaths == now {
            return self.with(|addrs, _| starts_with(list, addrs));
        }
        if !self.with(|addrs, slots| bound_at(t, list, addrs, slots)) {
            return false;
        }
        self.deaths = now;
        true
    }

    /// The items of `list` after these objects, read with `need` and
    /// bound, when it begins with them (see [`Seen::begin`]); `None` when
    /// it does not or a new item could not be bound (see [`resolve_tail`]).
    #[allow(clippy::type_complexity)]
    fn new_items<'py>(
        &mut self,
        t: &mut Tracked,
        list: &Bound<'py, PyList>,
        need: Need,
    ) -> Option<(Vec<Bound<'py, PyAny>>, Views, Vec<Slot>)> {
        if !self.begin(t, list) {
            return None;
        }
        if list.len() == self.len() {
            return Some((Vec::new(), Views::default(), Vec::new()));
        }
        resolve_tail(t, list, self.len(), need)
    }

    /// Adds objects that followed them (bound to `slots`): in place at the
    /// record's end, as they are where the record holds them next, in a
    /// record of its own otherwise.
    fn extend(&mut self, objects: &[Bound<'_, PyAny>], slots: &[Slot]) {
        let (from, to) = (self.len, self.len + objects.len());
        let addrs: Vec<usize> = objects.iter().map(|o| o.as_ptr() as usize).collect();
        let mut record = lock(&self.record);
        if record.addrs.len() == from {
            record.addrs.extend_from_slice(&addrs);
            record.slots.extend_from_slice(slots);
        } else if !record.holds_at(from, &addrs, slots) {
            let mut own = Record {
                addrs: Vec::with_capacity(to),
                slots: Vec::with_capacity(to),
            };
            own.addrs.extend_from_slice(&record.addrs[..from]);
            own.addrs.extend_from_slice(&addrs);
            own.slots.extend_from_slice(&record.slots[..from]);
            own.slots.extend_from_slice(slots);
            drop(record);
            self.record = Arc::new(Mutex::new(own));
        }
        self.len = to;
    }

    /// Names `addrs` (copies just bound to the same slots) instead, in a
    /// record of its own (see [`Tracked::share_records`]).
    fn carry(&mut self, addrs: Vec<usize>, deaths: u64) {
        let slots = self.with(|_, slots| slots.to_vec());
        self.len = addrs.len();
        self.record = Arc::new(Mutex::new(Record { addrs, slots }));
        self.deaths = deaths;
    }
}

/// Whether `list` begins with the objects at `addrs`, each still bound to
/// its slot in `slots` (see [`Seen::begin`]).
fn bound_at(t: &Tracked, list: &Bound<'_, PyList>, addrs: &[usize], slots: &[Slot]) -> bool {
    // Copies are bound by holder: each holder's liveness is looked up once.
    let mut live_holder = 0;
    for (i, (&addr, &slot)) in addrs.iter().zip(slots).enumerate() {
        let ptr = list_item(list, i);
        if ptr as usize != addr {
            return false;
        }
        let holder = t.alias_holder.get(slot as usize).copied().unwrap_or(0);
        let copy_of_live_holder = holder != 0
            && t.core.alias(slot) == addr
            && (holder == live_holder || t.holder_alive(holder));
        if copy_of_live_holder {
            live_holder = holder;
        } else if !t.bound(slot, ptr) {
            return false;
        }
    }
    true
}

/// The last rewinds call: its items and the positions that survived.
struct RewindsMemo {
    seen: Seen,
    kept: Vec<u32>,
}

impl RewindsMemo {
    fn memory_bytes(&self) -> usize {
        self.kept.capacity() * 4
    }
}

/// The last compaction-ranges call: its items and the ranges that
/// survived.
struct RangesMemo {
    seen: Seen,
    ranges: Vec<CompactionRange>,
}

impl RangesMemo {
    fn memory_bytes(&self) -> usize {
        self.ranges.capacity() * std::mem::size_of::<CompactionRange>()
    }
}

/// The last filtering call: its items, its result, and what extending it
/// needs.
struct FilterMemo {
    seen: Seen,
    /// The result: item positions, the top bit set for a summary.
    items: Vec<u32>,
    extension: Extension,
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
    fn memory_bytes(&self) -> usize {
        self.items.capacity() * 4 + 64
    }

    fn items(&self) -> Vec<Item> {
        self.items.iter().map(|&i| decode_item(i)).collect()
    }
}

/// The lists of the last recovery call that re-injected nothing: the
/// source's items, the filtered list's items (a source position, or a slot
/// with the top bit set for a cached summary whose content holds neither
/// calls nor responses), and the state of the source's calls (see
/// [`Calls`]).
struct RecoverMemo {
    source: Seen,
    /// The largest of the source's slots: a slot above it is an event the
    /// source did not hold (slots are numbered in the order events are
    /// stored).
    max_slot: Slot,
    events: Vec<u32>,
    calls: Calls,
}

impl RecoverMemo {
    fn memory_bytes(&self) -> usize {
        self.events.capacity() * 4 + self.calls.memory_bytes() + 64
    }
}

/// A call recovery that re-injected something: the source's items, the
/// filtered list's items (their addresses; those not in the source held,
/// so that an address names the same object, with their instance dicts'
/// addresses and version tags: they are summaries, mostly, which are handed
/// out and may be edited), and the result.
struct ReinjectMemo {
    source: Seen,
    events: Vec<usize>,
    held: Vec<(Py<PyAny>, (usize, u64))>,
    result: Vec<Recovered>,
}

impl ReinjectMemo {
    fn memory_bytes(&self) -> usize {
        self.events.capacity() * 8
            + self.held.capacity() * 24
            + self.result.capacity() * std::mem::size_of::<Recovered>()
            + 64
    }
}

/// The last window selection: its items, what it was asked besides them,
/// and its answer.
struct SelectionMemo {
    seen: Seen,
    asked: Asked,
    plan: Arc<Plan>,
}

impl SelectionMemo {
    fn memory_bytes(&self) -> usize {
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
    /// token threshold.
    Token {
        retention: usize,
        scope: Option<Box<str>>,
        agent: Option<Box<str>>,
        threshold: i64,
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
    fn memory_bytes(&self) -> usize {
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
struct ExactMemo {
    seen: Seen,
    asked: ExactAsked,
    answer: Arc<ExactAnswer>,
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

/// A summary Event handed out for a compaction event, and what it was
/// built from and with: it is handed out again only while all of that is
/// unchanged.
struct Summary {
    /// What it was built from (see [`Origin`]).
    origin: Origin,
    author: Py<PyString>,
    event: Py<PyAny>,
    /// What shows it unchanged since it was handed out (see [`Unchanged`]).
    unchanged: Unchanged,
    /// Bytes it holds (see `summary_size`), measured when cached.
    bytes: usize,
    /// Its `content` when it was cached, held (so an identical address
    /// means the same object): call recovery trusts what it knows of the
    /// slot's compacted content while the summary still has it.
    content: Py<PyAny>,
    /// Its `node_info` when it was cached, held: while the summary's dict
    /// is unchanged it still holds this object, whose dict is then read
    /// without a lookup in the summary's. `None` for an Event without one
    /// (google-adk 1.x).
    node: Option<Py<PyAny>>,
}

/// What a cached summary was built from, and so for which objects it is
/// handed out again.
enum Origin {
    /// A compaction event object, weakly (a live weak reference at its
    /// address names it; held strongly, superseded session copies'
    /// compaction events would die in our next call): for that object.
    Object(Py<PyAny>),
    /// The stored original its slot holds strongly (the object a session
    /// service deep-copies for every invocation), held: the values in
    /// `Tracked::sources`, which are that original's own (its `actions`
    /// and compacted content among them). Handed out for the original and
    /// for every deep copy of it bound to the slot, while the slot holds
    /// that original with the same values: a copy's summary then equals
    /// google-adk's in every field, but its `actions` and `content` are the
    /// original's (equal objects; google-adk's are the copy's).
    Primary(Py<PyAny>),
}

impl Origin {
    fn as_ptr(&self) -> *mut ffi::PyObject {
        match self {
            Origin::Object(p) | Origin::Primary(p) => p.as_ptr(),
        }
    }
}

/// The deep copies of one `index_copied` call, held strongly while the
/// session copy they belong to lives: an address can only be reused after
/// its object is freed, so while the holder is alive an object at a bound
/// copy's address is that copy, with no weak reference per event. The
/// holder is the callback of a weak reference to the copied session, so it
/// lets go of the copies when the session copy dies (during its
/// deallocation, where the copies would be freed anyway; not in our next
/// call).
#[pyclass(frozen)]
struct CopyHolder {
    objects: Mutex<Vec<Py<PyAny>>>,
    alive: AtomicBool,
    /// The session's `Tracked::deaths`, bumped when the copies are let go.
    deaths: Arc<AtomicU64>,
    /// The weak reference to the session copy, kept so the callback runs
    /// (CPython drops its reference to the callback once it ran).
    session: Mutex<Option<Py<PyAny>>>,
}

impl CopyHolder {
    fn memory_bytes(&self) -> usize {
        let objects = self.objects.lock().map(|v| v.capacity()).unwrap_or(0);
        std::mem::size_of::<Self>() + objects * std::mem::size_of::<Py<PyAny>>() + 64
    }
}

#[pymethods]
impl CopyHolder {
    fn __call__(&self, _weak: &Bound<'_, PyAny>) {
        self.alive.store(false, Ordering::Release);
        self.deaths.fetch_add(1, Ordering::AcqRel);
        let objects = match self.objects.lock() {
            Ok(mut v) => std::mem::take(&mut *v),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        };
        // The weak reference has fired: of no further use.
        let session = match self.session.lock() {
            Ok(mut w) => w.take(),
            Err(p) => p.into_inner().take(),
        };
        // Released with no lock held: freeing them may run callbacks.
        drop(objects);
        drop(session);
    }
}

/// The callback of a cached summary's weak reference to its compaction
/// event: when that event dies (a superseded session copy's, usually), the
/// summary goes with it, so what it holds (the copy's `actions` and
/// content) is freed with the copy and not by our next call. Skipped when
/// the registry is busy or the index checked out (the entry is then
/// replaced by the next call that builds the summary anew).
#[pyclass(frozen)]
struct Reaper {
    key: Box<str>,
    slot: Slot,
}

#[pymethods]
impl Reaper {
    fn __call__(&self, weak: &Bound<'_, PyAny>) {
        let taken =
            match REGISTRY.try_lock() {
                Ok(mut reg) => reg.sessions.get_mut(&self.key).and_then(|t| {
                    match t.summaries.get(&self.slot) {
                        Some(s) if s.origin.as_ptr() == weak.as_ptr() => {
                            t.summaries.remove(&self.slot)
                        }
                        _ => None,
                    }
                }),
                Err(_) => None,
            };
        // Dropped with the registry unlocked: freeing it may run callbacks.
        drop(taken);
    }
}

/// The callback of the weak references to a session's weakly bound objects:
/// counts their deaths (`Tracked::deaths`). Only an atomic is touched: it
/// runs during deallocations, with or without the registry locked.
#[pyclass(frozen)]
struct Obituary {
    deaths: Arc<AtomicU64>,
}

#[pymethods]
impl Obituary {
    fn __call__(&self, _weak: &Bound<'_, PyAny>) {
        self.deaths.fetch_add(1, Ordering::AcqRel);
    }
}

/// A new weak reference to `obj` whose callback is `callback`.
fn weak_ref_with(obj: &Bound<'_, PyAny>, callback: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    new_weak_ref(obj, callback.as_ptr())
}

/// How a cached summary is shown to be as it was built: its instance dict
/// and its `node_info`'s (a mutable model some agents write into; Events
/// of google-adk 1.x have none) are the same dicts with the same contents.
enum Unchanged {
    /// Their addresses and version tags (`version_tag`): a dict gets a new
    /// tag when created and on every change, so equal pairs mean unchanged
    /// contents, read in two words per dict.
    Tags {
        dict: (usize, u64),
        node: Option<(usize, u64)>,
    },
    /// Where tags are not readable: their values in order, held (so an
    /// identical address means an unchanged value).
    Values {
        dict: Vec<Py<PyAny>>,
        node: Option<Vec<Py<PyAny>>>,
    },
}

/// A summary's `node_info` and that one's instance dict.
type NodeDict<'py> = (Bound<'py, PyAny>, Bound<'py, PyDict>);

/// The instance dict of a summary Event and its `node_info` with that
/// one's instance dict (`None` where Events have no `node_info`: google-adk
/// 1.x), or `None` when it no longer has that shape.
type SummaryDicts<'py> = (Bound<'py, PyDict>, Option<NodeDict<'py>>);

fn summary_dicts<'py>(event: &Bound<'py, PyAny>) -> PyResult<Option<SummaryDicts<'py>>> {
    let Some(dict) = generic_dict(event) else {
        return Ok(None);
    };
    let Some(node) = dict.get_item(intern!(event.py(), "node_info"))? else {
        return Ok(Some((dict, None)));
    };
    Ok(generic_dict(&node).map(|node_dict| (dict, Some((node, node_dict)))))
}

/// The address and version tag of `obj`'s instance dict, where tags are
/// readable (see `version_tag`).
fn dict_state(obj: &Bound<'_, PyAny>) -> Option<(usize, u64)> {
    let dict = generic_dict(obj)?;
    Some((dict.as_ptr() as usize, version_tag::tag(&dict)?))
}

/// `obj`'s instance dict as `object.__dict__` gives it (what `__dict__`
/// gives for the models a summary is made of, which do not redefine it),
/// without the attribute lookup; `None` when it has none.
fn generic_dict<'py>(obj: &Bound<'py, PyAny>) -> Option<Bound<'py, PyDict>> {
    // SAFETY: `obj` is live; PyObject_GenericGetDict returns a new reference
    // to its instance dict, or NULL with an exception set (cleared here).
    let dict = unsafe {
        Bound::from_owned_ptr_or_opt(
            obj.py(),
            ffi::PyObject_GenericGetDict(obj.as_ptr(), std::ptr::null_mut()),
        )
    };
    if dict.is_none() {
        // SAFETY: clears the exception the failed call set.
        unsafe { ffi::PyErr_Clear() };
    }
    dict.and_then(|d| d.cast_into_exact::<PyDict>().ok())
}

impl Unchanged {
    /// The state of a summary's dicts now.
    fn of(dict: &Bound<'_, PyDict>, node: Option<&Bound<'_, PyDict>>) -> Self {
        let tagged = |d: &Bound<'_, PyDict>| version_tag::tag(d).map(|t| (d.as_ptr() as usize, t));
        let values = |d: &Bound<'_, PyDict>| d.iter().map(|(_, v)| v.unbind()).collect();
        match (tagged(dict), node.map(tagged)) {
            (Some(dict), None) => Unchanged::Tags { dict, node: None },
            (Some(dict), Some(Some(node))) => Unchanged::Tags {
                dict,
                node: Some(node),
            },
            _ => Unchanged::Values {
                dict: values(dict),
                node: node.map(values),
            },
        }
    }

    /// Whether the dicts are as they were.
    fn holds(&self, dict: &Bound<'_, PyDict>, node: Option<&Bound<'_, PyDict>>) -> bool {
        match self {
            Unchanged::Tags { dict: d, node: n } => {
                let same = |d: &Bound<'_, PyDict>, &(addr, tag): &(usize, u64)| {
                    d.as_ptr() as usize == addr && version_tag::tag(d) == Some(tag)
                };
                same(dict, d)
                    && match (node, n) {
                        (None, None) => true,
                        (Some(node), Some(n)) => same(node, n),
                        _ => false,
                    }
            }
            Unchanged::Values { dict: d, node: n } => {
                same_values(dict, d)
                    && match (node, n) {
                        (None, None) => true,
                        (Some(node), Some(n)) => same_values(node, n),
                        _ => false,
                    }
            }
        }
    }

    /// References it holds.
    fn held(&self) -> usize {
        match self {
            Unchanged::Tags { .. } => 0,
            Unchanged::Values { dict, node } => dict.len() + node.as_ref().map_or(0, Vec::len),
        }
    }
}

impl Summary {
    /// Whether the summary is still as built, for the compaction event
    /// `event` bound to slot `slot` of `t` (see [`Origin`]) and `author`.
    fn valid(
        &self,
        t: &Tracked,
        slot: Slot,
        event: &Bound<'_, PyAny>,
        author: &Bound<'_, PyString>,
    ) -> PyResult<bool> {
        let py = event.py();
        let ours = match &self.origin {
            Origin::Object(weak) => points_at(weak, event.as_ptr()),
            Origin::Primary(original) => {
                t.primary_source(slot).is_some_and(|o| o.is(original))
                    && t.bound(slot, event.as_ptr())
            }
        };
        if !ours
            || !(self.author.is(author) || self.author.bind(py).to_str()? == author.to_str()?)
        {
            return Ok(false);
        }
        Ok(self.unchanged_now(py))
    }

    /// Whether its dict and its `node_info`'s are as they were cached. The
    /// node is the one held: an unchanged summary dict still holds it (by
    /// tag, or by comparing the values, `node_info` among them).
    fn unchanged_now(&self, py: Python<'_>) -> bool {
        let Some(dict) = generic_dict(self.event.bind(py)) else {
            return false;
        };
        let node = match &self.node {
            Some(node) => match generic_dict(node.bind(py)) {
                Some(node) => Some(node),
                None => return false,
            },
            None => None,
        };
        self.unchanged.holds(&dict, node.as_ref())
    }

    /// Starts loading what [`Summary::valid`] reads: the weak reference,
    /// the summary and its node (and the line before each, where CPython
    /// keeps a managed dict's pointer), and their dicts when known by
    /// address.
    fn prefetch(&self) {
        use super::prefetch::prefetch;
        let before = |p: *mut ffi::PyObject| p.cast::<u8>().wrapping_sub(24).cast();
        prefetch(self.origin.as_ptr());
        for p in [Some(&self.event), self.node.as_ref()]
            .into_iter()
            .flatten()
        {
            prefetch(p.as_ptr());
            prefetch(before(p.as_ptr()));
        }
        if let Unchanged::Tags { dict, node } = &self.unchanged {
            prefetch(dict.0 as *const ffi::PyObject);
            if let Some(node) = node {
                prefetch(node.0 as *const ffi::PyObject);
            }
        }
    }
}

/// Whether `dict`'s values are the objects `then` holds, in order.
fn same_values(dict: &Bound<'_, PyDict>, then: &[Py<PyAny>]) -> bool {
    dict.len() == then.len() && dict.iter().zip(then).all(|((_, now), then)| now.is(then))
}

impl Tracked {
    fn new() -> Self {
        Tracked {
            core: EventIndex::default(),
            interner: Interner::default(),
            primary: Vec::new(),
            strong: Vec::new(),
            alias_holder: Vec::new(),
            holders: Vec::new(),
            next_holder: 1,
            summaries: FastMap::default(),
            plain: FastMap::default(),
            sources: FastMap::default(),
            records: FastMap::default(),
            rewinds: None,
            ranges: None,
            filtered: None,
            recovered: None,
            reinjected: None,
            selection: None,
            exact: Vec::new(),
            generation: 0,
            seen: Vec::new(),
            seen_first: None,
            deaths: Arc::new(AtomicU64::new(0)),
            obituary: None,
            alive_at: None,
            last_used: 0,
        }
    }

    /// The objects each remembered result names.
    fn seens(&self) -> impl Iterator<Item = &Seen> {
        [
            self.rewinds.as_ref().map(|m| &m.seen),
            self.ranges.as_ref().map(|m| &m.seen),
            self.filtered.as_ref().map(|m| &m.seen),
            self.recovered.as_ref().map(|m| &m.source),
            self.reinjected.as_ref().map(|m| &m.source),
            self.selection.as_ref().map(|m| &m.seen),
        ]
        .into_iter()
        .flatten()
        .chain(self.exact.iter().map(|m| &m.seen))
    }

    fn seens_mut(&mut self) -> impl Iterator<Item = &mut Seen> {
        [
            self.rewinds.as_mut().map(|m| &mut m.seen),
            self.ranges.as_mut().map(|m| &mut m.seen),
            self.filtered.as_mut().map(|m| &mut m.seen),
            self.recovered.as_mut().map(|m| &mut m.source),
            self.reinjected.as_mut().map(|m| &mut m.source),
            self.selection.as_mut().map(|m| &mut m.seen),
        ]
        .into_iter()
        .flatten()
        .chain(self.exact.iter_mut().map(|m| &mut m.seen))
    }

    /// A record a remembered result holds that begins with `addrs` and
    /// `slots`.
    fn record_for(&self, addrs: &[usize], slots: &[Slot]) -> Option<Shared> {
        self.seens()
            .find(|seen| lock(&seen.record).holds_at(0, addrs, slots))
            .map(|seen| seen.record.clone())
    }

    /// Makes the remembered results that name the same objects share one
    /// record (after results were carried onto a session copy, each in a
    /// record of its own).
    fn share_records(&mut self) {
        let mut kept: Vec<Shared> = Vec::new();
        for seen in self.seens_mut() {
            if kept.iter().any(|record| Arc::ptr_eq(record, &seen.record)) {
                continue;
            }
            let found = kept
                .iter()
                .find(|record| seen.with(|addrs, slots| lock(record).holds_at(0, addrs, slots)));
            match found {
                Some(record) => seen.record = record.clone(),
                None => kept.push(seen.record.clone()),
            }
        }
    }

    /// Bytes of the records the remembered results hold, each counted once.
    fn records_bytes(&self) -> usize {
        let mut counted: Vec<*const Mutex<Record>> = Vec::new();
        let mut bytes = 0;
        for seen in self.seens() {
            let ptr = Arc::as_ptr(&seen.record);
            if !counted.contains(&ptr) {
                counted.push(ptr);
                bytes += lock(&seen.record).memory_bytes();
            }
        }
        bytes
    }

    /// Bytes held by the index proper: the Rust structures, the weak
    /// reference objects, and the copy holders' references.
    fn memory_bytes(&self) -> usize {
        // A weak reference object is 64 bytes in CPython (pymalloc class 64).
        let weak = self
            .primary
            .iter()
            .zip(&self.strong)
            .filter(|(p, &strong)| p.is_some() && !strong)
            .count();
        let held: usize = self
            .holders
            .iter()
            .map(|(_, h)| h.get().memory_bytes())
            .sum();
        self.core.memory_bytes()
            + self.interner.memory_bytes()
            + self.primary.capacity() * std::mem::size_of::<Option<Py<PyAny>>>()
            + self.strong.capacity()
            + self.alias_holder.capacity() * std::mem::size_of::<u32>()
            + self.seen.capacity() * 8
            + self.records_bytes()
            + self.rewinds.as_ref().map_or(0, RewindsMemo::memory_bytes)
            + self.ranges.as_ref().map_or(0, RangesMemo::memory_bytes)
            + self.filtered.as_ref().map_or(0, FilterMemo::memory_bytes)
            + self.recovered.as_ref().map_or(0, RecoverMemo::memory_bytes)
            + self
                .exact
                .iter()
                .map(|m| m.answer.memory_bytes() + 64)
                .sum::<usize>()
            + self
                .reinjected
                .as_ref()
                .map_or(0, ReinjectMemo::memory_bytes)
            + self
                .selection
                .as_ref()
                .map_or(0, SelectionMemo::memory_bytes)
            + weak * 64
            + held
    }

    /// Binds `slot` to `obj` alone (its second object, if any, unbound),
    /// holding it strongly (a stored original) or weakly.
    fn bind(&mut self, slot: Slot, obj: &Bound<'_, PyAny>, strong: bool) -> PyResult<()> {
        self.core.rebind(slot, obj.as_ptr() as usize);
        self.forget_values(slot);
        let k = slot as usize;
        // The object bound before is no longer held or watched.
        if self.primary[k].is_some() {
            self.deaths.fetch_add(1, Ordering::AcqRel);
        }
        self.primary[k] = Some(if strong {
            obj.clone().unbind()
        } else {
            self.watch(obj)?
        });
        self.strong[k] = strong;
        Ok(())
    }

    /// See `Tracked::deaths`.
    fn deaths(&self) -> u64 {
        self.deaths.load(Ordering::Acquire)
    }

    /// Whether every weakly bound object is known alive (see `alive_at`).
    #[inline]
    fn all_alive(&self) -> bool {
        self.alive_at == Some(self.deaths())
    }

    /// Unbinds the slots whose weakly bound object died, after which every
    /// weakly bound object is alive until the death count moves again (a
    /// death bumps it from the object's deallocation, before its address
    /// can be reused). Asks each weak reference once, where a call would
    /// ask those of all its items.
    fn settle(&mut self) {
        if self.all_alive() {
            return;
        }
        // Read first: a death while this runs moves it past the mark.
        let now = self.deaths();
        for k in 0..self.primary.len() {
            if self.strong[k] {
                continue;
            }
            let dead = self.primary[k]
                .as_ref()
                .is_some_and(|w| !points_at(w, self.core.ptr(k as Slot) as *mut ffi::PyObject));
            if dead {
                // The weak reference is dead: dropping it runs no code.
                self.primary[k] = None;
            }
        }
        self.alive_at = Some(now);
    }

    /// A weak reference to `obj`, to bind it weakly: its death bumps
    /// `deaths`.
    fn watch(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = obj.py();
        let obituary = match &self.obituary {
            Some(o) => o.clone_ref(py),
            None => {
                let o = Py::new(
                    py,
                    Obituary {
                        deaths: self.deaths.clone(),
                    },
                )?;
                self.obituary = Some(o.clone_ref(py));
                o
            }
        };
        weak_ref_with(obj, obituary.bind(py).as_any())
    }

    /// Forgets what was learned from the values slot `slot` stores, when
    /// they change or the slot is bound anew: its summaries' call-recovery
    /// view, the stored original's values and the summary built from them.
    fn forget_values(&mut self, slot: Slot) {
        self.plain.remove(&slot);
        self.sources.remove(&slot);
        self.records.remove(&slot);
        if matches!(
            self.summaries.get(&slot),
            Some(Summary {
                origin: Origin::Primary(_),
                ..
            })
        ) {
            self.summaries.remove(&slot);
        }
    }

    /// The stored original slot `slot` holds strongly, if it holds one
    /// (summaries built from its values serve its copies too, see
    /// [`Origin::Primary`]).
    fn primary_source(&self, slot: Slot) -> Option<&Py<PyAny>> {
        let k = slot as usize;
        if !*self.strong.get(k)? {
            return None;
        }
        self.primary[k].as_ref()
    }

    /// The call-recovery view of slot `slot`'s cached summary when `ptr` is
    /// that summary, its dicts' tags show it unchanged (so it holds the same
    /// content) and that content is known to hold neither calls nor
    /// responses (`plain`): nothing of the summary is read but two dict
    /// headers.
    fn plain_summary_view(
        &self,
        slot: Slot,
        ptr: *mut ffi::PyObject,
        py: Python<'_>,
    ) -> Option<&EventView> {
        let view = self.plain.get(&slot)?;
        let s = self.summaries.get(&slot)?;
        (s.event.as_ptr() == ptr
            && matches!(s.unchanged, Unchanged::Tags { .. })
            && s.unchanged_now(py))
        .then_some(view)
    }

    /// Holder number `id`, while it still holds its copies.
    #[inline]
    fn live_holder(&self, id: u32) -> Option<&CopyHolder> {
        if id == 0 {
            return None;
        }
        let (_, holder) = self.holders.iter().rev().find(|(h, _)| *h == id)?;
        Some(holder.get()).filter(|h| h.alive.load(Ordering::Acquire))
    }

    /// Whether the copies held by holder number `id` are still held.
    #[inline]
    fn holder_alive(&self, id: u32) -> bool {
        self.live_holder(id).is_some()
    }

    /// Whether a call on `list` should go through the index: when at least
    /// half of a sample of its items are objects the index is bound to (the
    /// several calls of one invocation, a copy the session hook bound), or
    /// were in the last list read directly (objects seen a second time, say
    /// a database-backed service's fresh Events on the second call of an
    /// invocation). Otherwise the call reads directly and remembers the
    /// list's addresses: objects seen once are cheaper to read than to bind.
    /// (A false "seen" costs a binding, never a wrong view.) Without
    /// `bind_seen`, objects seen but not bound are read directly again and
    /// stay remembered (see [`load_source`]).
    fn worth_indexing(&mut self, list: &Bound<'_, PyList>, bind_seen: bool) -> bool {
        let sample = sample(list);
        let bound = sample
            .iter()
            .filter(|&&addr| {
                self.slot_of_object(addr as *mut ffi::PyObject, usize::MAX)
                    .is_some()
            })
            .count();
        if 2 * bound >= sample.len() {
            return true;
        }
        let seen = sample.iter().filter(|&&a| self.was_seen(a)).count();
        if 2 * seen >= sample.len() && !sample.is_empty() && self.same_first(list) {
            return bind_seen;
        }
        self.remember(list);
        false
    }

    /// Whether `list` begins with the first object of the last list read
    /// directly (see `seen_first`).
    fn same_first(&self, list: &Bound<'_, PyList>) -> bool {
        match (&self.seen_first, list.get_item(0)) {
            (Some(first), Ok(now)) => now.is(first),
            _ => false,
        }
    }

    /// The bit of `addr` in a bitmap of `words` 64-bit words (a power of two).
    #[inline]
    fn bit(addr: usize, words: usize) -> (usize, u64) {
        let h = ((addr >> 4) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let bit = (h >> 32) as usize & (words * 64 - 1);
        (bit / 64, 1u64 << (bit % 64))
    }

    fn was_seen(&self, addr: usize) -> bool {
        if self.seen.is_empty() {
            return false;
        }
        let (word, mask) = Self::bit(addr, self.seen.len());
        self.seen[word] & mask != 0
    }

    /// Replaces the remembered addresses by `list`'s (about 8 bits per
    /// item, so that a sample rarely hits by chance).
    fn remember(&mut self, list: &Bound<'_, PyList>) {
        let words = (list.len() * 8 / 64).next_power_of_two().clamp(16, 1 << 14);
        self.seen.clear();
        self.seen.resize(words, 0);
        self.seen_first = list.get_item(0).ok().map(Bound::unbind);
        for obj in list.iter() {
            let (word, mask) = Self::bit(obj.as_ptr() as usize, words);
            self.seen[word] |= mask;
        }
    }

    /// Makes room for `additional` more events (see `EventIndex::reserve`).
    fn reserve(&mut self, additional: usize) {
        self.core.reserve(additional);
        let len = self.primary.len();
        if self.primary.capacity() - len < additional {
            self.primary.reserve_exact(additional.max(len / 4));
            self.strong.reserve_exact(additional.max(len / 4));
        }
    }

    /// Whether `ptr` is an object bound to `slot` (and alive: a live weak
    /// reference to that address, or our own strong one).
    #[inline]
    fn bound(&self, slot: Slot, ptr: *mut ffi::PyObject) -> bool {
        let addr = ptr as usize;
        let s = slot as usize;
        (self.core.ptr(slot) == addr
            && match &self.primary[s] {
                Some(o) if self.strong[s] => o.as_ptr() == ptr,
                Some(w) => self.all_alive() || points_at(w, ptr),
                None => false,
            })
            || (self.core.alias(slot) == addr
                && self
                    .alias_holder
                    .get(s)
                    .is_some_and(|&id| self.holder_alive(id)))
    }

    /// The slot the object at `ptr` is bound to, trying `next` first.
    #[inline]
    fn slot_of_object(&self, ptr: *mut ffi::PyObject, next: usize) -> Option<Slot> {
        let addr = ptr as usize;
        let slot = if next < self.core.len()
            && (self.core.ptr(next as Slot) == addr || self.core.alias(next as Slot) == addr)
        {
            Some(next as Slot)
        } else {
            self.core.slot_of_ptr(addr)
        };
        slot.filter(|&s| self.bound(s, ptr))
    }

    /// Bytes held by the summary cache: its table, and each cached
    /// summary as measured when it was cached.
    fn summary_bytes(&self) -> usize {
        crate::core::index::map_bytes(&self.summaries)
            + crate::core::index::map_bytes(&self.plain)
            + crate::core::index::map_bytes(&self.sources)
            + crate::core::index::map_bytes(&self.records)
            + self.summaries.values().map(|s| s.bytes).sum::<usize>()
    }
}

/// What a summary Event holds: its own sizes (`__sizeof__`) and those of
/// its dict, fields set, `node_info` and `node_info`'s dict (where it has
/// one), plus our references to its values.
fn summary_size(
    event: &Bound<'_, PyAny>,
    node: Option<&NodeDict<'_>>,
    values: usize,
) -> PyResult<usize> {
    let py = event.py();
    let mut bytes = values * 8;
    let mut held = vec![
        event.clone(),
        event.getattr(intern!(py, "__dict__"))?,
        event.getattr(intern!(py, "__pydantic_fields_set__"))?,
    ];
    if let Some((node, node_dict)) = node {
        held.extend([node.clone(), node_dict.clone().into_any()]);
    }
    for obj in held {
        bytes += obj
            .call_method0(intern!(py, "__sizeof__"))?
            .extract::<usize>()?;
    }
    Ok(bytes)
}

/// How the index answered, summed over all calls.
#[derive(Default, Clone, Copy)]
struct Counters {
    by_identity: u64,
    by_id: u64,
    read: u64,
    changed: u64,
    transient: u64,
    fallbacks: u64,
    evictions: u64,
    summaries_reused: u64,
    summaries_built: u64,
    rewinds_reused: u64,
    ranges_reused: u64,
    filters_reused: u64,
    recoveries_reused: u64,
    selections_reused: u64,
    exact_reused: u64,
    exact_extended: u64,
    completed: u64,
    copied: u64,
    copy_nanos: u64,
    direct: u64,
}

struct Registry {
    sessions: FastMap<Box<str>, Tracked>,
    clock: u64,
    max_sessions: usize,
    enabled: bool,
    counters: Counters,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    sessions: FastMap::with_hasher(std::hash::BuildHasherDefault::new()),
    clock: 0,
    max_sessions: 64,
    enabled: true,
    counters: Counters {
        by_identity: 0,
        by_id: 0,
        read: 0,
        changed: 0,
        transient: 0,
        fallbacks: 0,
        evictions: 0,
        summaries_reused: 0,
        summaries_built: 0,
        rewinds_reused: 0,
        ranges_reused: 0,
        filters_reused: 0,
        recoveries_reused: 0,
        selections_reused: 0,
        exact_reused: 0,
        exact_extended: 0,
        completed: 0,
        copied: 0,
        copy_nanos: 0,
        direct: 0,
    },
});

/// The registry. Only ever locked while attached to the interpreter and
/// never across a `detach`, so the lock is never contended with the GIL
/// held elsewhere; a poisoned lock (a panic while held) is taken over.
fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// A list's events as views, and the objects themselves. Returns the
/// session's index to the registry when dropped.
pub struct Loaded<'py> {
    pub objects: Vec<Bound<'py, PyAny>>,
    pub views: Views,
    /// Extractor for events outside the list; its arena holds the views'
    /// ids (the index's arena while the index is checked out).
    pub ex: Extractor<'py>,
    /// The slot of each object (`Slot::MAX` when not stored).
    slots: Vec<Slot>,
    /// When not empty, `objects` holds only some of the list's items and
    /// this gives each position's place in it (`u32::MAX`: not taken; see
    /// [`filter_again`]).
    at: Vec<u32>,
    checkout: Option<(Box<str>, Tracked)>,
    /// Field groups [`complete`](Loaded::complete) read from bound objects
    /// whose slots had not confirmed them: each slot's view (spans into
    /// `learned_ids`) with the groups read, merged into the index when the
    /// call returns it (storing while the call's views point into the lent
    /// arena would move what they point at).
    learned: Vec<(Slot, EventView, u16)>,
    learned_ids: Vec<Sym>,
}

impl<'py> Loaded<'py> {
    /// Completes `views` (this call's, taken from the batch with
    /// `objects`) at `positions` with the fields of `need`: from the index
    /// where the slot's object showed them before, read from the object
    /// otherwise. What is read of a bound object is stored when the call
    /// ends, so the next call on the session takes it from the index.
    pub fn complete(
        &mut self,
        objects: &[Bound<'py, PyAny>],
        views: &mut [EventView],
        positions: &[usize],
        need: Need,
    ) -> Extracted<()> {
        let need = normalized(need);
        let groups = groups_of(need);
        let index = match &self.checkout {
            Some((_, t)) if self.at.is_empty() => Some(t),
            _ => None,
        };
        let slot = |i: usize| self.slots.get(i).copied().filter(|&s| s != Slot::MAX);
        let mut todo = Vec::new();
        for &i in positions {
            match (index, slot(i)) {
                (Some(t), Some(s)) if t.core.verified(s) & groups == groups => {
                    let view = t.core.view_of_groups(s, objects[i].as_ptr() as u64, groups);
                    views[i] = pick(&views[i], &view, groups);
                }
                _ => todo.push(i),
            }
        }
        if todo.is_empty() {
            return Ok(());
        }
        registry().counters.completed += todo.len() as u64;
        let read: Vec<Bound<'py, PyAny>> = todo.iter().map(|&i| objects[i].clone()).collect();
        let read = self.ex.views(&read, need)?;
        for (&i, view) in todo.iter().zip(read.iter()) {
            views[i] = pick(&views[i], view, groups);
            if let (Some(_), Some(s)) = (index, slot(i)) {
                let view = copy_spans(view, &self.ex.ids, &mut self.learned_ids);
                self.learned.push((s, view, groups));
            }
        }
        Ok(())
    }

    /// The object at position `i` of the list, when taken.
    pub fn object(&self, i: usize) -> Option<&Bound<'py, PyAny>> {
        if self.at.is_empty() {
            return self.objects.get(i);
        }
        let k = *self.at.get(i)?;
        self.objects.get(k as usize)
    }

    /// The slot each position's object is bound to, when every one is
    /// (the list went through the index and each event could be stored).
    pub fn bound_slots(&self) -> Option<&[Slot]> {
        let bound = self.checkout.is_some()
            && self.at.is_empty()
            && self.slots.len() == self.objects.len()
            && !self.slots.contains(&Slot::MAX);
        bound.then_some(&self.slots[..])
    }

    /// Positions in the list.
    pub fn len(&self) -> usize {
        if self.at.is_empty() {
            self.objects.len()
        } else {
            self.at.len()
        }
    }

    /// The summaries this session's index holds, by the address of the
    /// summary Event (held by the cache, so the address names it).
    pub fn summaries_by_address(&self) -> FastMap<usize, Slot> {
        match &self.checkout {
            Some((_, t)) => t
                .summaries
                .iter()
                .map(|(&slot, s)| (s.event.as_ptr() as usize, slot))
                .collect(),
            None => FastMap::default(),
        }
    }

    /// The call-recovery view of the cached summary of slot `slot`, `obj`
    /// itself, read with `need` unless its content is the one it was cached
    /// with and the slot's summaries are known to hold neither calls nor
    /// responses (see `Tracked::plain`; objects are trusted not to change
    /// in place, as everywhere in the index).
    pub fn summary_view(
        &mut self,
        slot: Slot,
        obj: &Bound<'py, PyAny>,
        need: Need,
    ) -> Extracted<EventView> {
        if let Some(view) = self
            .checkout
            .as_ref()
            .and_then(|(_, t)| t.plain_summary_view(slot, obj.as_ptr(), obj.py()))
        {
            return Ok(EventView {
                ident: obj.as_ptr() as u64,
                ..*view
            });
        }
        let content = obj.getattr(intern!(obj.py(), "content"))?;
        let cached = |t: &Tracked| {
            t.summaries
                .get(&slot)
                .is_some_and(|s| s.content.is(&content))
        };
        if let Some((_, t)) = &self.checkout {
            if let Some(view) = t.plain.get(&slot).filter(|_| cached(t)) {
                return Ok(EventView {
                    ident: obj.as_ptr() as u64,
                    ..*view
                });
            }
        }
        let view = self.ex.event(obj, need)?;
        let plain = view.calls.len == 0 && view.responses.len == 0 && !view.has_responses;
        if let Some((_, t)) = &mut self.checkout {
            if cached(t) {
                if plain {
                    t.plain.insert(slot, view);
                } else {
                    t.plain.remove(&slot);
                }
            }
        }
        Ok(view)
    }

    /// What the summary of the compaction event at `i` of the list takes
    /// from the stored original its slot holds strongly (see
    /// [`Origin::Primary`]), when the event is that original or a deep copy
    /// of it bound to the slot: read from the original once per binding
    /// (`Tracked::sources`), never from a copy. `None` otherwise, or when
    /// a value is not of the type validation keeps as is.
    pub fn primary_values(
        &mut self,
        i: usize,
    ) -> PyResult<Option<summary::Source<Bound<'py, PyAny>>>> {
        let obj = self.object(i).cloned();
        let (Some((_, t)), Some(&slot), Some(obj)) = (&mut self.checkout, self.slots.get(i), obj)
        else {
            return Ok(None);
        };
        let py = obj.py();
        if slot == Slot::MAX || !t.bound(slot, obj.as_ptr()) {
            return Ok(None);
        }
        let Some(original) = t.primary_source(slot).map(|o| o.bind(py).clone()) else {
            return Ok(None);
        };
        let src = match t.sources.entry(slot) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => match summary::Source::read(&original)?
            {
                Some(src) => e.insert(src.unbind()),
                None => return Ok(None),
            },
        };
        Ok(Some(src.bind(py)))
    }

    /// Exact mode's coverage record of `obj`, the compaction event at `i`
    /// of the list, `parse`d off the stored original its slot holds strongly when
    /// the event is that original or a deep copy of it bound to the slot
    /// (once per binding, as [`Loaded::primary_values`] reads summaries'
    /// values: a session service deep-copies the originals for every
    /// invocation), off the event otherwise.
    pub fn record_at(
        &mut self,
        i: usize,
        obj: &Bound<'py, PyAny>,
        parse: impl Fn(&Bound<'py, PyAny>) -> PyResult<Parsed>,
    ) -> PyResult<Arc<Parsed>> {
        let (Some((_, t)), Some(&slot), true) =
            (&mut self.checkout, self.slots.get(i), self.at.is_empty())
        else {
            return parse(obj).map(Arc::new);
        };
        let py = obj.py();
        let original = match slot != Slot::MAX && t.bound(slot, obj.as_ptr()) {
            true => t.primary_source(slot).map(|o| o.bind(py).clone()),
            false => None,
        };
        let Some(original) = original else {
            return parse(obj).map(Arc::new);
        };
        if let Some(known) = t.records.get(&slot) {
            return Ok(known.clone());
        }
        let parsed = Arc::new(parse(&original)?);
        t.records.insert(slot, parsed.clone());
        Ok(parsed)
    }

    /// Starts loading what checking the cached summary of the compaction
    /// event at `i` of the list reads (see [`Loaded::cached_summary`]);
    /// issued some summaries ahead, so that their cache misses overlap.
    pub fn prefetch_summary(&self, i: usize) {
        if let Some(&slot) = self.slots.get(i) {
            self.prefetch_summary_of(slot);
        }
    }

    /// [`Loaded::prefetch_summary`] for the cached summary of slot `slot`.
    pub fn prefetch_summary_of(&self, slot: Slot) {
        if let Some(summary) = self
            .checkout
            .as_ref()
            .and_then(|(_, t)| t.summaries.get(&slot))
        {
            summary.prefetch();
        }
    }

    /// The summary handed out before for the compaction event at `i` of
    /// the list, when it, the event and the author are unchanged.
    pub fn cached_summary(
        &self,
        i: usize,
        author: &Bound<'py, PyString>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let (Some((_, tracked)), Some(&slot)) = (&self.checkout, self.slots.get(i)) else {
            return Ok(None);
        };
        let Some(event) = self.object(i) else {
            return Ok(None);
        };
        match tracked.summaries.get(&slot) {
            Some(summary) if summary.valid(tracked, slot, event, author)? => {
                registry().counters.summaries_reused += 1;
                Ok(Some(summary.event.bind(author.py()).clone()))
            }
            _ => {
                registry().counters.summaries_built += 1;
                Ok(None)
            }
        }
    }

    /// Remembers `event` as the summary of the compaction event at `i`;
    /// returns its size in bytes (`summary_size`), measured unless `bytes`
    /// gives it (summaries built alike have one size), or `None` when it is
    /// not cached (its compaction event is not in the index).
    pub fn cache_summary(
        &mut self,
        i: usize,
        author: &Bound<'py, PyString>,
        event: &Bound<'py, PyAny>,
        bytes: Option<usize>,
        from_primary: bool,
    ) -> PyResult<Option<usize>> {
        let Some(compaction_event) = self.object(i).cloned() else {
            return Ok(None);
        };
        let (Some((key, tracked)), Some(&slot)) = (&mut self.checkout, self.slots.get(i)) else {
            return Ok(None);
        };
        if slot == Slot::MAX {
            return Ok(None);
        }
        let Some((dict, node)) = summary_dicts(event)? else {
            return Ok(None);
        };
        let Some(content) = dict.get_item(intern!(event.py(), "content"))? else {
            return Ok(None);
        };
        let unchanged = Unchanged::of(&dict, node.as_ref().map(|(_, d)| d));
        let origin = match tracked.primary_source(slot) {
            Some(original) if from_primary => Origin::Primary(original.clone_ref(event.py())),
            _ => {
                let reaper = Bound::new(
                    event.py(),
                    Reaper {
                        key: key.clone(),
                        slot,
                    },
                )?;
                Origin::Object(weak_ref_with(&compaction_event, reaper.as_any())?)
            }
        };
        let bytes = match bytes {
            Some(bytes) => bytes,
            None => summary_size(event, node.as_ref(), unchanged.held())?,
        };
        tracked.summaries.insert(
            slot,
            Summary {
                bytes,
                origin,
                author: author.clone().unbind(),
                event: event.clone().unbind(),
                unchanged,
                content: content.unbind(),
                node: node.map(|(node, _)| node.unbind()),
            },
        );
        Ok(Some(bytes))
    }

    /// Remembers `items`, the result of prompt filtering on this call's
    /// list, and what extending it needs, for [`filter_again`] (when every
    /// item is bound and the list is short enough to number).
    pub fn remember_filter(&mut self, items: &[Item], extension: Extension) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        t.filtered = Seen::of(t, &self.objects, &self.slots)
            .filter(|_| self.objects.len() < SUMMARY_BIT as usize)
            .map(|seen| FilterMemo {
                seen,
                items: items.iter().map(|&item| encode_item(item)).collect(),
                extension,
            });
    }

    /// Whether what recovery knows of slot `slot`'s cached summary is that
    /// it holds neither calls nor responses (see `Tracked::plain`).
    pub fn plain_summary(&self, slot: Slot) -> bool {
        self.checkout
            .as_ref()
            .is_some_and(|(_, t)| t.plain.contains_key(&slot))
    }

    /// Remembers a recovery on this call's list (the source) that
    /// re-injected nothing, for [`recover_again`]: `events` says what each
    /// item of the filtered list was (see `RecoverMemo::events`). Not
    /// remembered when a source item is unbound or a present response's
    /// latest call is absent.
    pub fn remember_recovery(&mut self, events: Vec<u32>) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        // One recovery memo or the other: a call re-injects or it does not.
        t.recovered = None;
        t.reinjected = None;
        if self.slots.contains(&Slot::MAX) || self.objects.len() >= SUMMARY_BIT as usize {
            return;
        }
        let mut present = vec![false; self.views.len()];
        for &e in &events {
            if e & SUMMARY_BIT == 0 {
                present[e as usize] = true;
            }
        }
        let Some(calls) = Calls::of(&self.views, &present, &self.ex.ids) else {
            return;
        };
        t.recovered = Seen::of(t, &self.objects, &self.slots).map(|source| RecoverMemo {
            source,
            max_slot: self.slots.iter().copied().max().unwrap_or(0),
            events,
            calls,
        });
    }

    /// Remembers `ranges`, the result of `get_compaction_ranges` on this
    /// call's list, for [`ranges_again`] (when every item is bound).
    pub fn remember_ranges(&mut self, ranges: &[CompactionRange]) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        t.ranges = Seen::of(t, &self.objects, &self.slots).map(|seen| RangesMemo {
            seen,
            ranges: ranges.to_vec(),
        });
    }

    /// Remembers `result`, a recovery on this call's list (the source) and
    /// `events` (the filtered list) that re-injected something, for
    /// [`recover_same`] (when every source item is bound).
    pub fn remember_reinjection(
        &mut self,
        events: &[Bound<'py, PyAny>],
        in_source: &[bool],
        result: Vec<Recovered>,
    ) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        // One recovery memo or the other: a call re-injects or it does not.
        t.reinjected = None;
        t.recovered = None;
        let Some(source) = Seen::of(t, &self.objects, &self.slots) else {
            return;
        };
        let mut held = Vec::new();
        for (o, _) in events.iter().zip(in_source).filter(|(_, &known)| !known) {
            // Not remembered where a dict's changes cannot be seen.
            let Some(state) = dict_state(o) else {
                return;
            };
            held.push((o.clone().unbind(), state));
        }
        t.reinjected = Some(ReinjectMemo {
            source,
            events: events.iter().map(|o| o.as_ptr() as usize).collect(),
            held,
            result,
        });
    }

    /// Remembers `plan`, the answer of a window selection asked `asked` on
    /// this call's list (`objects`, taken from the batch), for
    /// [`selection_again`] (when every item is bound).
    pub fn remember_selection(
        &mut self,
        objects: &[Bound<'_, PyAny>],
        asked: Asked,
        plan: Arc<Plan>,
    ) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        t.selection =
            Seen::of(t, objects, &self.slots).map(|seen| SelectionMemo { seen, asked, plan });
    }

    /// Remembers `answer`, exact mode's answer to `asked` on this call's
    /// list, for [`exact_again`] (when every item is bound).
    pub fn remember_exact(&mut self, asked: ExactAsked, answer: Arc<ExactAnswer>) {
        let objects = std::mem::take(&mut self.objects);
        self.remember_exact_for(&objects, asked, answer);
        self.objects = objects;
    }

    /// [`remember_exact`](Loaded::remember_exact) for a call that took the
    /// list's objects (`objects`) out of this.
    pub fn remember_exact_for(
        &mut self,
        objects: &[Bound<'py, PyAny>],
        asked: ExactAsked,
        answer: Arc<ExactAnswer>,
    ) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        let Some(seen) = Seen::of(t, objects, &self.slots) else {
            return;
        };
        t.exact.retain(|m| m.asked != asked);
        t.exact.push(ExactMemo {
            seen,
            asked,
            answer,
        });
    }

    /// Remembers `kept`, the result of `apply_rewinds` on this call's list,
    /// for [`rewinds_again`] (when every item is bound).
    pub fn remember_rewinds(&mut self, kept: &[usize]) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        t.rewinds = Seen::of(t, &self.objects, &self.slots).map(|seen| RewindsMemo {
            seen,
            kept: kept.iter().map(|&i| i as u32).collect(),
        });
    }
}

/// The session index a call's result is remembered in: the call's own,
/// when its batch holds every item of the list (one taken in part, see
/// [`filter_again`], names no list to remember).
fn memo_index<'a>(
    checkout: &'a mut Option<(Box<str>, Tracked)>,
    at: &[u32],
) -> Option<&'a mut Tracked> {
    if !at.is_empty() {
        return None;
    }
    checkout.as_mut().map(|(_, t)| t)
}

impl Drop for Loaded<'_> {
    fn drop(&mut self) {
        let Some((key, mut tracked)) = self.checkout.take() else {
            return;
        };
        tracked.core.restore_arena(std::mem::take(&mut self.ex.ids));
        tracked.interner = std::mem::take(&mut self.ex.interner);
        let mut changed = 0;
        for (slot, view, groups) in self.learned.drain(..) {
            // Not storable: left unconfirmed, read again next time.
            if let Ok(true) = tracked.core.merge(slot, &view, groups, &self.learned_ids) {
                // As in `resolve`: what the object showed replaces what
                // another object of its id showed before.
                tracked.forget_values(slot);
                tracked.generation += 1;
                changed += 1;
            }
        }
        if changed > 0 {
            registry().counters.changed += changed;
        }
        checkin(key, tracked);
    }
}

/// Reads `events` (exactly a `list`) for an operation that needs `need`:
/// through the session's index when enabled and every event can be stored,
/// otherwise directly.
pub fn load<'py>(events: &Bound<'py, PyAny>, need: Need) -> Extracted<Loaded<'py>> {
    load_with(events, need, true)
}

/// [`load`] for the source list of call recovery, which `_get_contents`
/// passes right after filtering it: objects the filtering call read
/// directly (seen once) are read directly again instead of being bound.
/// The several model calls of an invocation still bind them at the next
/// filtering call, while an invocation with one model call (a database
/// service's fresh Events, used once) never pays for binding.
pub fn load_source<'py>(events: &Bound<'py, PyAny>, need: Need) -> Extracted<Loaded<'py>> {
    load_with(events, need, false)
}

fn load_with<'py>(
    events: &Bound<'py, PyAny>,
    need: Need,
    bind_seen: bool,
) -> Extracted<Loaded<'py>> {
    let py = events.py();
    let list = Extractor::list(events)?;
    if let Some(key) = session_key(list)? {
        if let Some(tracked) = checkout(&key) {
            let mut tracked = tracked;
            if !tracked.worth_indexing(list, bind_seen) {
                // Objects seen neither now nor in the last call: most
                // likely read once (a copy made for one call); binding
                // them would cost more than reading them.
                checkin(key, tracked);
                registry().counters.direct += 1;
                return direct(list, need);
            }
            let mut ex = Extractor::with_interner(py, std::mem::take(&mut tracked.interner))?;
            ex.interner.begin_call();
            match resolve(&mut tracked, &mut ex, list, normalized(need)) {
                Ok((objects, views, slots, counts)) => {
                    ex.ids = tracked.core.take_arena();
                    registry().counters.add(&counts);
                    return Ok(Loaded {
                        objects,
                        views,
                        ex,
                        slots,
                        at: Vec::new(),
                        checkout: Some((key, tracked)),
                        learned: Vec::new(),
                        learned_ids: Vec::new(),
                    });
                }
                Err(outcome) => {
                    tracked.interner = std::mem::take(&mut ex.interner);
                    tracked.core.end_call();
                    checkin(key, tracked);
                    if let Outcome::Error(err) = outcome {
                        return Err(Outcome::Error(err));
                    }
                    // Some event cannot be stored: this call goes without
                    // the index (it declines there only if the operation
                    // itself cannot take the input).
                    registry().counters.fallbacks += 1;
                }
            }
        }
    }
    direct(list, need)
}

/// `apply_rewinds` on `list` from the session's last one, without reading
/// or viewing the events it had: when `list` holds the last call's objects
/// (still bound to the same slots, over an unchanged index) followed by
/// events that carry no rewind (nothing before them changes, and they all
/// stay; they are resolved as any call resolves its list: new ones read and
/// stored), the surviving positions. `None`: compute.
pub fn rewinds_again(list: &Bound<'_, PyList>) -> Extracted<Option<Vec<u32>>> {
    remembered(list, |t| extend_rewinds(t, list), |c| c.rewinds_reused += 1)
}

/// The answer of the session's last window selection, when it was asked
/// `asked` too and `list` holds exactly its objects (none of the session's
/// bound objects died since, over an unchanged index): a selection reads
/// nothing but the events, so the same events give the same answer.
/// `None`: compute.
pub fn selection_again(list: &Bound<'_, PyList>, asked: &Asked) -> Extracted<Option<Arc<Plan>>> {
    remembered(
        list,
        |t| {
            let memo = t.selection.as_ref()?;
            (memo.asked == *asked && memo.seen.unchanged(t, list)).then(|| memo.plan.clone())
        },
        |c| c.selections_reused += 1,
    )
}

/// Exact mode's answer to `asked` from the session's last one, when `list`
/// holds exactly the objects it was computed on (none of the session's
/// bound objects died since, over an unchanged index): exact mode reads
/// nothing but the events, so the same events give the same answer.
/// `None`: compute.
pub fn exact_again(
    list: &Bound<'_, PyList>,
    asked: ExactAsked,
) -> Extracted<Option<Arc<ExactAnswer>>> {
    remembered(
        list,
        |t| {
            t.exact
                .iter()
                .find(|m| m.asked == asked && m.seen.unchanged(t, list))
                .map(|m| m.answer.clone())
        },
        |c| c.exact_reused += 1,
    )
}

/// The coverage remembered with the last answer to `asked` when `list`
/// begins with that answer's list (the same objects, each still bound, over
/// an unchanged index) and that list had no rewind and no event of another
/// scope: `(its length, coverage, unused records)`. A selection over `list`
/// extends it when what follows is raw events only: an event stored after
/// every compaction is covered by none, so the extents, the survivors and
/// what they hide stay as they were (see `coverage::Scoped::cover`).
#[allow(clippy::type_complexity)]
pub fn exact_prefix(
    list: &Bound<'_, PyList>,
    asked: &ExactAsked,
) -> Extracted<Option<(usize, Arc<Coverage>, Vec<(usize, String)>)>> {
    remembered(
        list,
        |t| {
            let k = t.exact.iter().position(|m| &m.asked == asked)?;
            let mut memo = t.exact.swap_remove(k);
            let a = memo.answer.clone();
            let whole = a.rewound.is_none() && a.scoped.is_none();
            let found = match (&a.coverage, whole && memo.seen.begin(t, list)) {
                (Some(c), true) => Some((memo.seen.len(), c.clone(), a.problems.clone())),
                _ => None,
            };
            t.exact.push(memo);
            found
        },
        // Counted where it is used (see [`count_exact_extended`]).
        |_| {},
    )
}

/// Notes that a selection extended a remembered coverage.
pub fn count_exact_extended() {
    registry().counters.exact_extended += 1;
}

/// What `answer` makes of the index of `list`'s session (checked out for
/// it), when there is one and it answers; `count` notes that it did.
fn remembered<T>(
    list: &Bound<'_, PyList>,
    answer: impl FnOnce(&mut Tracked) -> Option<T>,
    count: fn(&mut Counters),
) -> Extracted<Option<T>> {
    let Some(key) = session_key(list)? else {
        return Ok(None);
    };
    let Some(mut t) = checkout_existing(&key) else {
        return Ok(None);
    };
    let answered = answer(&mut t);
    checkin(key, t);
    if answered.is_some() {
        count(&mut registry().counters);
    }
    Ok(answered)
}

/// The compaction ranges of `list` from the session's last call: when
/// `list` holds the last call's objects (still bound to the same slots,
/// over an unchanged index) followed by new events (resolved as any call
/// resolves its list), the survivors of the last ranges and the new
/// events' (see [`survivors`]: the same as those of all the ranges).
pub fn ranges_again(list: &Bound<'_, PyList>) -> Extracted<Option<Vec<CompactionRange>>> {
    remembered(list, |t| extend_ranges(t, list), |c| c.ranges_reused += 1)
}

fn extend_ranges(t: &mut Tracked, list: &Bound<'_, PyList>) -> Option<Vec<CompactionRange>> {
    let mut memo = t.ranges.take()?;
    let known = memo.seen.len();
    let need = Need {
        compaction: true,
        ..Need::default()
    };
    let (objects, views, slots) = memo.seen.new_items(t, list, need)?;
    if !views.is_empty() {
        let mut ranges = std::mem::take(&mut memo.ranges);
        ranges.extend(views.iter().enumerate().filter_map(|(k, v)| {
            let (start, end) = v.compaction.and_then(|c| c.bounds())?;
            Some(CompactionRange {
                index: known + k,
                start,
                end,
            })
        }));
        memo.ranges = survivors(ranges);
        memo.seen.extend(&objects, &slots);
    }
    let ranges = memo.ranges.clone();
    t.ranges = Some(memo);
    Some(ranges)
}

/// The last recovery that re-injected something, when `events` and
/// `source` are the very lists it was computed from (the same objects at
/// every position, the source's still bound, over an unchanged index; the
/// filtered list's others held by the memo): its result, as positions.
pub fn recover_same(
    events: &Bound<'_, PyList>,
    source: &Bound<'_, PyList>,
) -> Extracted<Option<Vec<Recovered>>> {
    remembered(
        source,
        |t| same_reinjection(t, events, source),
        |c| c.recoveries_reused += 1,
    )
}

fn same_reinjection(
    t: &mut Tracked,
    events: &Bound<'_, PyList>,
    source: &Bound<'_, PyList>,
) -> Option<Vec<Recovered>> {
    let mut memo = t.reinjected.take()?;
    let py = events.py();
    let same = memo
        .held
        .iter()
        .all(|(o, state)| dict_state(o.bind(py)) == Some(*state))
        && source.len() == memo.source.len()
        && events.len() == memo.events.len()
        && starts_with(events, &memo.events)
        && memo.source.begin(t, source);
    let result = same.then(|| memo.result.clone());
    t.reinjected = Some(memo);
    result
}

/// Prompt filtering of `list` from the session's last one: when `list`
/// holds the last call's objects (still bound to the same slots, over an
/// unchanged index) followed by new events (resolved as any call resolves
/// its list), the last result followed by them where [`Extension::extend`]
/// accepts them (no compaction, uncovered, in order after the last item),
/// else merged into it ([`filter::extend_with_compactions`]); with the
/// items the result names loaded for materializing summaries (objects and
/// slots, no views).
pub fn filter_again<'py>(
    list: &Bound<'py, PyList>,
    need: Need,
) -> Extracted<Option<(Loaded<'py>, Vec<Item>)>> {
    let Some(key) = session_key(list)? else {
        return Ok(None);
    };
    let Some(mut t) = checkout_existing(&key) else {
        return Ok(None);
    };
    let Some(items) = extend_filtered(&mut t, list, need) else {
        checkin(key, t);
        return Ok(None);
    };
    let slots = t
        .filtered
        .as_ref()
        .map(|m| m.seen.with(|_, slots| slots.to_vec()))
        .unwrap_or_default();
    registry().counters.filters_reused += 1;
    let loaded = taken(list, key, t, slots, &items)?;
    Ok(Some((loaded, items)))
}

/// The session's index `t`, checked out under `key`, lent to a call on
/// `list` answered from a remembered result naming `items` (over the list's
/// `slots`): only the items the result names are taken (raw events handed
/// back, compaction events whose summaries are handed out); the others,
/// most of a compacted session, stay untouched, `None` in their place. No
/// Python code ran since the result's list was compared with `list`, so the
/// list still holds what it compared.
fn taken<'py>(
    list: &Bound<'py, PyList>,
    key: Box<str>,
    mut t: Tracked,
    slots: Vec<Slot>,
    items: &[Item],
) -> Extracted<Loaded<'py>> {
    let mut ex = match Extractor::taking_interner(list.py(), &mut t.interner) {
        Ok(ex) => ex,
        Err(err) => {
            checkin(key, t);
            return Err(err.into());
        }
    };
    ex.interner.begin_call();
    ex.ids = t.core.take_arena();
    let mut needed = vec![false; list.len()];
    for &(Item::Raw(i) | Item::Summary(i)) in items {
        needed[i] = true;
    }
    let (objects, at) = super::prefetch::list_items_where(list, &needed);
    Ok(Loaded {
        objects,
        views: Views::default(),
        ex,
        slots,
        at,
        checkout: Some((key, t)),
        learned: Vec::new(),
        learned_ids: Vec::new(),
    })
}

/// Exact mode's prompt items of `list` from the session's last ones, when
/// `list` holds exactly their objects (see [`exact_again`]), with the items
/// loaded for materializing summaries (see [`taken`]) and the records that
/// were not used.
#[allow(clippy::type_complexity)]
pub fn exact_prompt_again<'py>(
    list: &Bound<'py, PyList>,
    need: Need,
) -> Extracted<Option<(Loaded<'py>, Vec<Item>, Vec<(usize, String)>)>> {
    let Some(key) = session_key(list)? else {
        return Ok(None);
    };
    let Some(mut t) = checkout_existing(&key) else {
        return Ok(None);
    };
    let Some(k) = t.exact.iter().position(|m| m.asked == ExactAsked::Prompt) else {
        checkin(key, t);
        return Ok(None);
    };
    let mut memo = t.exact.swap_remove(k);
    if !memo.seen.unchanged(&t, list) && !extend_prompt(&mut t, &mut memo, list, need) {
        // Dropped: the call computes the prompt and remembers it anew.
        checkin(key, t);
        return Ok(None);
    }
    let (answer, slots) = (memo.answer.clone(), memo.seen.with(|_, s| s.to_vec()));
    t.exact.push(memo);
    registry().counters.exact_reused += 1;
    let items: Vec<Item> = answer.first.iter().map(|&i| decode_item(i)).collect();
    let loaded = taken(list, key, t, slots, &items)?;
    Ok(Some((loaded, items, answer.problems.clone())))
}

/// Extends the remembered exact-mode prompt `memo` to `list`, when `list`
/// holds its objects followed by raw events stamped in order from the
/// prompt's last sort key on: no compaction covers an event stored after
/// it, so they are raw and go last, in order.
fn extend_prompt(
    t: &mut Tracked,
    memo: &mut ExactMemo,
    list: &Bound<'_, PyList>,
    need: Need,
) -> bool {
    let known = memo.seen.len();
    let mut last = memo.answer.last;
    if !(last.is_finite() || last == f64::NEG_INFINITY) || list.len() >= SUMMARY_BIT as usize {
        return false;
    }
    let Some((objects, views, slots)) = memo.seen.new_items(t, list, need) else {
        return false;
    };
    for v in views.iter() {
        if v.compaction.is_some() || !v.timestamp.is_finite() || v.timestamp < last {
            return false;
        }
        last = v.timestamp;
    }
    memo.seen.extend(&objects, &slots);
    let mut first = memo.answer.first.clone();
    first.extend((known..known + views.len()).map(|i| encode_item(Item::Raw(i))));
    memo.answer = Arc::new(ExactAnswer {
        first,
        problems: memo.answer.problems.clone(),
        last,
        ..ExactAnswer::default()
    });
    true
}

fn extend_filtered(t: &mut Tracked, list: &Bound<'_, PyList>, need: Need) -> Option<Vec<Item>> {
    let mut memo = t.filtered.take()?;
    let known = memo.seen.len();
    let n = list.len();
    if n >= SUMMARY_BIT as usize {
        return None;
    }
    let (objects, views, slots) = memo.seen.new_items(t, list, need)?;
    if !views.is_empty() {
        if memo.extension.extend(&views) {
            memo.items.extend(known as u32..n as u32);
        } else {
            // A new compaction (or a tail event out of order or covered):
            // the result is computed from the last one and the tail, the
            // views of its items read from the index.
            let groups = group::TIMESTAMP | group::COMPACTION;
            let (items, extension) = memo.seen.with(|_, slots| {
                let view_of = |i: usize| t.core.view_of_groups(slots[i], 0, groups);
                filter::extend_with_compactions(&memo.items(), view_of, &views, known)
            })?;
            memo.items = items.iter().map(|&item| encode_item(item)).collect();
            memo.extension = extension;
        }
        memo.seen.extend(&objects, &slots);
    }
    let items = memo.items();
    t.filtered = Some(memo);
    Some(items)
}

/// Call recovery on `events` (the filtered list) and `source` from the
/// session's last one that re-injected nothing: true when it again
/// re-injects nothing, so `events` is the answer. That holds when `source`
/// holds the last call's source objects (still bound to the same slots,
/// over an unchanged index) followed by new events (resolved as any call
/// resolves its list), `events` holds the last filtered list (the same
/// source objects, and the cached summaries of the same slots, still
/// unchanged and holding neither calls nor responses) followed by some of
/// the new events in order, and [`Calls::extend`] finds no present
/// response of theirs whose latest call event is absent.
pub fn recover_again(events: &Bound<'_, PyList>, source: &Bound<'_, PyList>) -> Extracted<bool> {
    let again = remembered(
        source,
        |t| extend_recovered(t, events, source).then_some(()),
        |c| c.recoveries_reused += 1,
    )?;
    Ok(again.is_some())
}

fn extend_recovered(
    t: &mut Tracked,
    events: &Bound<'_, PyList>,
    source: &Bound<'_, PyList>,
) -> bool {
    let Some(mut memo) = t.recovered.take() else {
        return false;
    };
    let py = events.py();
    let (known, listed) = (memo.source.len(), memo.events.len());
    if events.len() < listed
        || source.len() >= SUMMARY_BIT as usize
        || !memo.source.begin(t, source)
    {
        return false;
    }
    let listed_same = memo.source.with(|addrs, _| {
        memo.events.iter().enumerate().all(|(i, &entry)| {
            let ptr = list_item(events, i) as usize;
            if entry & SUMMARY_BIT == 0 {
                addrs[entry as usize] == ptr
            } else {
                t.plain_summary_view(entry & !SUMMARY_BIT, ptr as *mut ffi::PyObject, py)
                    .is_some()
            }
        })
    });
    if !listed_same {
        return false;
    }
    let need = Need {
        parts: true,
        ..Need::default()
    };
    let (objects, views, slots) = if source.len() > known {
        match resolve_tail(t, source, known, need) {
            Some(tail) => tail,
            None => return false,
        }
    } else {
        (Vec::new(), Views::default(), Vec::new())
    };
    if slots.iter().any(|&s| s <= memo.max_slot) {
        return false;
    }
    // The filtered list's new items: new source events, in order.
    let mut present = vec![false; objects.len()];
    let mut cursor = 0;
    for i in listed..events.len() {
        let ptr = list_item(events, i);
        match objects[cursor..].iter().position(|o| o.as_ptr() == ptr) {
            Some(k) => {
                present[cursor + k] = true;
                cursor += k + 1;
            }
            None => return false,
        }
    }
    if !memo.calls.extend(&views, &present, t.core.arena()) {
        return false;
    }
    memo.source.extend(&objects, &slots);
    memo.max_slot = slots.iter().copied().fold(memo.max_slot, Slot::max);
    memo.events.extend(
        present
            .iter()
            .enumerate()
            .filter(|(_, p)| **p)
            .map(|(k, _)| (known + k) as u32),
    );
    t.recovered = Some(memo);
    true
}

/// Resolves `list[known..]` as any call resolves its list (new events read
/// and stored, known ones confirmed), for extending a remembered result:
/// `None` when that changed what a slot stores or left an item unbound. (An
/// object of a known id may take its slot from a prefix object: the views
/// are the same, so is the result; the next call finds the prefix object
/// unbound and computes.)
fn resolve_tail<'py>(
    t: &mut Tracked,
    list: &Bound<'py, PyList>,
    known: usize,
    need: Need,
) -> Option<(Vec<Bound<'py, PyAny>>, Views, Vec<Slot>)> {
    let tail = list.get_slice(known, list.len());
    let generation = t.generation;
    let mut ex = Extractor::taking_interner(list.py(), &mut t.interner).ok()?;
    ex.interner.begin_call();
    let resolved = resolve(t, &mut ex, &tail, normalized(need));
    t.interner = std::mem::take(&mut ex.interner);
    t.core.end_call();
    let (objects, views, slots, counts) = resolved.ok()?;
    registry().counters.add(&counts);
    if t.generation != generation || slots.contains(&Slot::MAX) {
        return None;
    }
    Some((objects, views, slots))
}

fn extend_rewinds(t: &mut Tracked, list: &Bound<'_, PyList>) -> Option<Vec<u32>> {
    let mut memo = t.rewinds.take()?;
    let known = memo.seen.len();
    let need = Need {
        rewind: true,
        invocation: true,
        ..Need::default()
    };
    let (objects, views, slots) = memo.seen.new_items(t, list, need)?;
    if views.iter().any(|v| v.rewind_before.is_some()) {
        return None;
    }
    memo.seen.extend(&objects, &slots);
    memo.kept.extend(known as u32..list.len() as u32);
    let kept = memo.kept.clone();
    t.rewinds = Some(memo);
    Some(kept)
}

/// Reads `list` without the index.
fn direct<'py>(list: &Bound<'py, PyList>, need: Need) -> Extracted<Loaded<'py>> {
    let mut ex = Extractor::new(list.py())?;
    // About one distinct id per few events (invocations; call ids where
    // the parts are read): room for them without growing step by step.
    ex.interner.reserve(list.len() / 4);
    let batch = ex.batch(list, need)?;
    Ok(Loaded {
        objects: batch.objects,
        views: batch.views,
        ex,
        slots: Vec::new(),
        at: Vec::new(),
        checkout: None,
        learned: Vec::new(),
        learned_ids: Vec::new(),
    })
}

/// Items sampled to decide whether a call goes through the index.
const SAMPLES: usize = 16;

/// The addresses at `SAMPLES` evenly spaced positions of `list`.
fn sample(list: &Bound<'_, PyList>) -> Vec<usize> {
    let n = list.len();
    let k = n.min(SAMPLES);
    (0..k)
        .filter_map(|j| list.get_item(j * n / k).ok())
        .map(|obj| obj.as_ptr() as usize)
        .collect()
}

/// The `id` of the list's first event, when it is a plain `str` of an
/// exact `Event`; `None` leaves the call to the direct path.
fn session_key(list: &Bound<'_, PyList>) -> Extracted<Option<Box<str>>> {
    if list.is_empty() || !registry().enabled {
        return Ok(None);
    }
    let first = list.get_item(0)?;
    let Some(id) = event_id(&first)? else {
        return Ok(None);
    };
    Ok(id.to_str().ok().map(Into::into))
}

/// The `id` (exact `str`) of an exact `Event`, or `None`.
fn event_id<'py>(obj: &Bound<'py, PyAny>) -> Extracted<Option<Bound<'py, PyString>>> {
    let Some(dict) = event_dict(obj)? else {
        return Ok(None);
    };
    let id = dict.get_item(intern!(obj.py(), "id"))?;
    Ok(id.and_then(|id| id.cast_into_exact::<PyString>().ok()))
}

/// Moves the last rewinds and recovery results onto a session copy: when
/// the copies at their positions in `new` (the session's list, which both
/// took as their source) were just bound (by holder `holder`) to their
/// slots, they name those copies instead (same slots, same stored views, so
/// the same results; recovery names its summaries by slot), and the
/// invocation's first calls are answered from them.
fn carry_positional(t: &mut Tracked, new: &Bound<'_, PyList>, holder: u32) {
    let generation = t.generation;
    let carried = |seen: &Seen| {
        (seen.generation == generation)
            .then(|| seen.with(|_, slots| copies_at(t, new, slots, holder)))
            .flatten()
    };
    let rewinds = t.rewinds.as_ref().and_then(|m| carried(&m.seen));
    let recovered = t.recovered.as_ref().and_then(|m| carried(&m.source));
    let ranges = t.ranges.as_ref().and_then(|m| carried(&m.seen));
    // The copies are bound (and held) now.
    let deaths = t.deaths();
    if let (Some(memo), Some(addrs)) = (t.rewinds.as_mut(), rewinds) {
        memo.seen.carry(addrs, deaths);
    }
    if let (Some(memo), Some(addrs)) = (t.recovered.as_mut(), recovered) {
        memo.source.carry(addrs, deaths);
    }
    if let (Some(memo), Some(addrs)) = (t.ranges.as_mut(), ranges) {
        memo.seen.carry(addrs, deaths);
    }
}

/// The addresses of `new`'s first items when each is the copy of the
/// object at its position that holder `holder` bound to the slot `slots`
/// names there.
fn copies_at(
    t: &Tracked,
    new: &Bound<'_, PyList>,
    slots: &[Slot],
    holder: u32,
) -> Option<Vec<usize>> {
    if slots.len() > new.len() {
        return None;
    }
    let mut addrs = Vec::with_capacity(slots.len());
    for (j, &slot) in slots.iter().enumerate() {
        let ptr = list_item(new, j) as usize;
        if ptr == 0
            || t.core.alias(slot) != ptr
            || t.alias_holder.get(slot as usize) != Some(&holder)
        {
            return None;
        }
        addrs.push(ptr);
    }
    Some(addrs)
}

/// Moves the last filtering result onto a session copy: when every slot it
/// names had its copy bound just now (by holder `holder`), it names those
/// copies instead (same slots, same stored views, so the same result for
/// the copy's list of them), and the invocation's first filtering call is
/// answered from it.
fn carry_filtered(t: &mut Tracked, holder: u32) {
    let Some(memo) = t.filtered.as_ref() else {
        return;
    };
    if let Some(addrs) = copies_of(t, &memo.seen, holder) {
        let deaths = t.deaths();
        if let Some(memo) = t.filtered.as_mut() {
            memo.seen.carry(addrs, deaths);
        }
    }
}

/// Moves exact mode's last answers onto a session copy, as
/// [`carry_filtered`] moves the filtering result: each names the copies of
/// its slots when every one had its copy bound just now by `holder`.
fn carry_exact(t: &mut Tracked, holder: u32) {
    let carried: Vec<Option<Vec<usize>>> = t
        .exact
        .iter()
        .map(|m| copies_of(t, &m.seen, holder))
        .collect();
    let deaths = t.deaths();
    for (memo, addrs) in t.exact.iter_mut().zip(carried) {
        if let Some(addrs) = addrs {
            memo.seen.carry(addrs, deaths);
        }
    }
}

/// The addresses of the copies bound just now (by `holder`) to every slot
/// `seen` names, when each had one, over an unchanged index.
fn copies_of(t: &Tracked, seen: &Seen, holder: u32) -> Option<Vec<usize>> {
    if seen.generation != t.generation {
        return None;
    }
    seen.with(|_, slots| {
        let mut addrs = Vec::with_capacity(slots.len());
        for &slot in slots {
            let ptr = t.core.alias(slot);
            if ptr == 0 || t.alias_holder.get(slot as usize) != Some(&holder) {
                return None;
            }
            addrs.push(ptr);
        }
        Some(addrs)
    })
}

/// Binds the deep copies in `new` to the slots of the objects in `old` they
/// were copied from, position by position (`Session.__deepcopy__` calls
/// this after copying a session's events, see `_patch`). A deep copy equals
/// its source in every field when made, so it inherits what the source
/// showed without being read; the source stays bound (held strongly from
/// then on: it is the stored original copied for every invocation). The
/// copies are held by a [`CopyHolder`] until `session`, the session copy
/// holding `new`, dies. Sources the index knows by id only are read and
/// bound (see [`adopt`]); others are left alone, and so is anything but two
/// lists of one length holding exact `Event`s. (The copies' summaries are
/// those of the stored originals, see [`Origin::Primary`]: nothing of a copy
/// is read for them.)
#[pyfunction]
pub fn index_copied(
    old: &Bound<'_, PyAny>,
    new: &Bound<'_, PyAny>,
    session: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let start = std::time::Instant::now();
    let (Ok(old), Ok(new)) = (old.cast_exact::<PyList>(), new.cast_exact::<PyList>()) else {
        return Ok(());
    };
    if old.len() != new.len() {
        return Ok(());
    }
    let key = match session_key(old) {
        Ok(Some(key)) => key,
        Ok(None) | Err(Outcome::Decline(_)) => return Ok(()),
        Err(Outcome::Error(err)) => return Err(err),
    };
    let Some(mut t) = checkout_existing(&key) else {
        return Ok(());
    };
    let py = old.py();
    let holder = Bound::new(
        py,
        CopyHolder {
            objects: Mutex::new(Vec::new()),
            alive: AtomicBool::new(true),
            deaths: t.deaths.clone(),
            session: Mutex::new(None),
        },
    )?;
    let Ok(weak) = weak_ref_with(session, holder.as_any()) else {
        // A session that takes no weak reference: its copies go unbound.
        checkin(key, t);
        return Ok(());
    };
    if let Ok(mut w) = holder.get().session.lock() {
        *w = Some(weak);
    }
    let holder_id = t.next_holder;
    t.next_holder += 1;
    t.holders
        .retain(|(_, h)| h.get().alive.load(Ordering::Acquire));
    let mut held: Vec<Py<PyAny>> = Vec::with_capacity(new.len());
    let event_type = super::extract::types(py)?.event.base().bind(py).clone();
    let mut copied = 0;
    let mut adopted = 0;
    let mut changed = 0;
    let mut next = 0;
    let mut pairs: Vec<(Slot, usize)> = Vec::with_capacity(new.len());
    let mut claimed = vec![false; t.core.len()];
    let mut claim = |s: Slot| !std::mem::replace(&mut claimed[s as usize], true);
    // Sources the index knows by id only: events first seen as copies (a
    // compaction event google-adk appends after the invocation's last
    // model call is first read in the next invocation's copy).
    let mut misses: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>, Slot)> = Vec::new();
    let mut result = Ok(());
    // The stored originals are read by address only (the session keeps
    // them, and nothing below runs Python code that could change the
    // lists): they are not touched unless known by id only. Their copies
    // are touched once, to be held.
    let event_type = event_type.as_ptr().cast::<ffi::PyTypeObject>();
    // The copies were made just now but are cold again (the deep copy
    // went through megabytes since): their loads are started some items
    // ahead so that the misses overlap.
    const AHEAD: usize = 16;
    for i in 0..AHEAD.min(new.len()) {
        super::prefetch::prefetch(list_item(new, i));
    }
    for i in 0..old.len() {
        if i + AHEAD < new.len() {
            super::prefetch::prefetch(list_item(new, i + AHEAD));
        }
        let (o, n) = (list_item(old, i), list_item(new, i));
        // SAFETY: `n` is a live item of `new` (borrowed from it).
        if n.is_null() || unsafe { ffi::Py_TYPE(n) } != event_type {
            continue;
        }
        // SAFETY: both are live items of their lists, borrowed.
        let (o, n) = unsafe { (Borrowed::from_ptr(py, o), Borrowed::from_ptr(py, n)) };
        let Some(s) = t.slot_of_object(o.as_ptr(), next) else {
            match known_id(&t, &o) {
                Ok(Some(s)) if claim(s) => misses.push((o.to_owned(), n.to_owned(), s)),
                Ok(_) => {}
                Err(err) => {
                    result = Err(err);
                    break;
                }
            }
            continue;
        };
        claim(s);
        next = s as usize + 1;
        let k = s as usize;
        let primary = t.core.ptr(s) == o.as_ptr() as usize;
        if primary && !t.strong[k] {
            t.primary[k] = Some(o.to_owned().unbind());
            t.strong[k] = true;
        }
        pairs.push((s, n.as_ptr() as usize));
        held.push(n.to_owned().unbind());
        copied += 1;
    }
    // Bound at once: see `EventIndex::bind_aliases`.
    if t.alias_holder.len() < t.core.len() {
        t.alias_holder.resize(t.core.len(), 0);
    }
    for &(s, _) in &pairs {
        t.alias_holder[s as usize] = holder_id;
    }
    let stale_firsts = (0..t.core.len())
        .any(|k| t.core.ptr(k as Slot) != 0 && !(t.strong[k] && t.primary[k].is_some()));
    t.core.bind_aliases(&pairs, stale_firsts);
    if result.is_ok() && !misses.is_empty() {
        match adopt(&mut t, &misses, holder_id, &mut held) {
            Ok(c) => {
                adopted = misses.len() as u64;
                changed = c;
            }
            // The index may be half updated: it is dropped, not kept.
            Err(Outcome::Decline(_)) => {
                registry().counters.fallbacks += 1;
                return Ok(());
            }
            Err(Outcome::Error(err)) => return Err(err),
        }
    }
    if result.is_ok() {
        carry_positional(&mut t, new, holder_id);
        carry_filtered(&mut t, holder_id);
        carry_exact(&mut t, holder_id);
        t.share_records();
    }
    if let Ok(mut objects) = holder.get().objects.lock() {
        *objects = held;
    }
    t.holders.push((holder_id, holder.unbind()));
    checkin(key, t);
    let mut reg = registry();
    reg.counters.copied += copied + adopted;
    reg.counters.by_id += adopted;
    reg.counters.changed += changed;
    reg.counters.copy_nanos += start.elapsed().as_nanos() as u64;
    result
}

/// Binds the deep copy `n` as the second object of slot `s`, held by
/// holder number `holder` (`n` is added to `held`, which goes to it).
fn bind_copy(
    t: &mut Tracked,
    s: Slot,
    n: &Bound<'_, PyAny>,
    holder: u32,
    held: &mut Vec<Py<PyAny>>,
) {
    let k = s as usize;
    if t.alias_holder.len() <= k {
        t.alias_holder.resize(t.core.len(), 0);
    }
    t.alias_holder[k] = holder;
    t.core.bind_alias(s, n.as_ptr() as usize);
    held.push(n.clone().unbind());
}

/// Whether `list` begins with the objects at `addrs` (compared by address:
/// the caller knows those objects alive).
#[inline]
fn starts_with(list: &Bound<'_, PyList>, addrs: &[usize]) -> bool {
    match super::prefetch::item_addresses(list) {
        Some(items) => items.len() >= addrs.len() && items[..addrs.len()] == *addrs,
        None => {
            list.len() >= addrs.len()
                && addrs
                    .iter()
                    .enumerate()
                    .all(|(i, &addr)| list_item(list, i) as usize == addr)
        }
    }
}

/// Item `i` of `list`, borrowed (null past its end).
fn list_item(list: &Bound<'_, PyList>, i: usize) -> *mut ffi::PyObject {
    let Ok(i) = ffi::Py_ssize_t::try_from(i) else {
        return std::ptr::null_mut();
    };
    // SAFETY: `list` is a live list; PyList_GetItem returns a borrowed
    // reference, or NULL with IndexError set (cleared here).
    unsafe {
        let item = ffi::PyList_GetItem(list.as_ptr(), i);
        if item.is_null() {
            ffi::PyErr_Clear();
        }
        item
    }
}

/// The slot of the event `obj`'s `id` (an exact `Event` with a `str` id).
fn known_id(t: &Tracked, obj: &Bound<'_, PyAny>) -> PyResult<Option<Slot>> {
    let id = match event_id(obj) {
        Ok(Some(id)) => id,
        Ok(None) | Err(Outcome::Decline(_)) => return Ok(None),
        Err(Outcome::Error(err)) => return Err(err),
    };
    Ok(id
        .to_str()
        .ok()
        .and_then(|id| t.core.slot_of_id(id_key(id))))
}

/// Binds sources known by id only, with their copies: each source is read
/// in every field group its slot stores and merged (as the id path of a
/// call does, so a source that differs replaces what was stored), then
/// bound strongly (it is the stored original), its copy as second object.
/// Returns how many differed from what was stored.
fn adopt(
    t: &mut Tracked,
    misses: &[(Bound<'_, PyAny>, Bound<'_, PyAny>, Slot)],
    holder: u32,
    held: &mut Vec<Py<PyAny>>,
) -> Extracted<u64> {
    let py = misses[0].0.py();
    let groups = misses.iter().fold(0, |g, &(_, _, s)| g | t.core.known(s));
    let need = normalized(need_of(groups));
    let mut ex = Extractor::with_interner(py, std::mem::take(&mut t.interner))?;
    ex.interner.begin_call();
    let sources: Vec<Bound<'_, PyAny>> = misses.iter().map(|(o, _, _)| o.clone()).collect();
    let read = ex.views(&sources, need);
    let scratch = std::mem::take(&mut ex.ids);
    t.interner = std::mem::take(&mut ex.interner);
    let mut changed = 0;
    for ((o, n, s), &view) in misses.iter().zip(read?.iter()) {
        t.bind(*s, o, true)?;
        if t.core
            .merge(*s, &view, groups_of(need), &scratch)
            .map_err(|_| Outcome::Decline("not storable"))?
        {
            t.generation += 1;
            changed += 1;
        }
        bind_copy(t, *s, n, holder, held);
    }
    Ok(changed)
}

/// The [`Need`] that reads field groups `groups` (the inverse of
/// [`groups_of`]).
fn need_of(groups: u16) -> Need {
    let has = |bit| groups & bit != 0;
    Need {
        timestamp: has(group::TIMESTAMP),
        invocation: has(group::INVOCATION),
        window: has(group::WINDOW),
        pairing: has(group::PAIRING) || has(group::HITL),
        usage: has(group::USAGE),
        compaction: has(group::COMPACTION),
        rewind: has(group::REWIND),
        parts: has(group::PARTS) || has(group::HITL),
    }
}

/// The session's index, when there is one.
fn checkout_existing(key: &str) -> Option<Tracked> {
    let mut reg = registry();
    if !reg.enabled {
        return None;
    }
    reg.sessions.remove(key)
}

fn checkout(key: &str) -> Option<Tracked> {
    let mut reg = registry();
    if !reg.enabled {
        return None;
    }
    Some(reg.sessions.remove(key).unwrap_or_else(Tracked::new))
}

fn checkin(key: Box<str>, mut tracked: Tracked) {
    // The last string's address is only valid within a call.
    tracked.interner.begin_call();
    let mut reg = registry();
    if !reg.enabled {
        return;
    }
    reg.clock += 1;
    tracked.last_used = reg.clock;
    // A concurrent call on the same session checked in first: keep the
    // larger index (both are correct; the other is only a cache).
    if let Some(other) = reg.sessions.get(&key) {
        if other.core.len() >= tracked.core.len() {
            return;
        }
    }
    reg.sessions.insert(key, tracked);
    evict(&mut reg);
}

fn evict(reg: &mut Registry) {
    while reg.sessions.len() > reg.max_sessions {
        let Some(oldest) = reg
            .sessions
            .iter()
            .min_by_key(|(_, t)| t.last_used)
            .map(|(k, _)| k.clone())
        else {
            return;
        };
        reg.sessions.remove(&oldest);
        reg.counters.evictions += 1;
    }
}

impl Counters {
    fn add(&mut self, c: &Counters) {
        self.by_identity += c.by_identity;
        self.by_id += c.by_id;
        self.read += c.read;
        self.changed += c.changed;
        self.transient += c.transient;
        self.fallbacks += c.fallbacks;
        self.evictions += c.evictions;
        self.summaries_reused += c.summaries_reused;
        self.summaries_built += c.summaries_built;
        self.rewinds_reused += c.rewinds_reused;
        self.ranges_reused += c.ranges_reused;
        self.filters_reused += c.filters_reused;
        self.recoveries_reused += c.recoveries_reused;
        self.selections_reused += c.selections_reused;
        self.exact_reused += c.exact_reused;
        self.exact_extended += c.exact_extended;
        self.completed += c.completed;
        self.copied += c.copied;
        self.copy_nanos += c.copy_nanos;
        self.direct += c.direct;
    }
}

/// Whether the live weak reference `weak` points at `ptr`.
#[inline]
fn points_at(weak: &Py<PyAny>, ptr: *mut ffi::PyObject) -> bool {
    let mut obj = std::ptr::null_mut();
    // SAFETY: `weak` is a weak reference we created; GetRef stores a new
    // reference (or NULL when dead) in `obj`, released right away: only
    // its address is compared.
    unsafe {
        if ffi::compat::PyWeakref_GetRef(weak.as_ptr(), &mut obj) != 1 {
            ffi::PyErr_Clear();
            return false;
        }
        ffi::Py_DECREF(obj);
    }
    obj == ptr
}

/// `PyWeakref_NewRef(obj, callback)`, `callback` NULL for none.
fn new_weak_ref(obj: &Bound<'_, PyAny>, callback: *mut ffi::PyObject) -> PyResult<Py<PyAny>> {
    // SAFETY: `obj` is live and `callback` is NULL or a live callable;
    // PyWeakref_NewRef returns a new reference or NULL with an exception set.
    unsafe {
        Ok(
            Bound::from_owned_ptr_or_err(obj.py(), ffi::PyWeakref_NewRef(obj.as_ptr(), callback))?
                .unbind(),
        )
    }
}

/// The [`group`]s a need reads.
fn groups_of(need: Need) -> u16 {
    let mut g = 0;
    for (on, bit) in [
        (need.timestamp, group::TIMESTAMP),
        (need.invocation, group::INVOCATION),
        (need.window, group::WINDOW),
        (need.pairing, group::PAIRING),
        (need.usage, group::USAGE),
        (need.compaction, group::COMPACTION),
        (need.rewind, group::REWIND),
        (need.parts, group::PARTS),
        (need.parts && need.pairing, group::HITL),
    ] {
        if on {
            g |= bit;
        }
    }
    g
}

/// `need` as the index reads it: fields the extractor reads only in part
/// or under a condition are read whole, so that what is stored does not
/// depend on which operation read it first (timestamps of every event, not
/// only of those with responses; invocation ids with the window checks).
fn normalized(need: Need) -> Need {
    Need {
        timestamp: need.timestamp || need.parts,
        invocation: need.invocation || need.window,
        ..need
    }
}

/// What becomes of an item the identity pass did not settle.
enum Pending {
    /// Bound to its slot already; read the groups not yet confirmed.
    Confirm(Slot),
    /// Known id, another object: bind to the slot, read and merge.
    Rebind(Slot),
    /// Unknown id (its key): read and store.
    Insert(u64),
    /// A known id whose slot another object of this call holds: read, not
    /// stored.
    Transient,
}

type Resolution<'py> = (Vec<Bound<'py, PyAny>>, Views, Vec<Slot>, Counters);

fn resolve<'py>(
    t: &mut Tracked,
    ex: &mut Extractor<'py>,
    list: &Bound<'py, PyList>,
    need: Need,
) -> Extracted<Resolution<'py>> {
    let py = list.py();
    let groups = groups_of(need);
    // The identity pass below then asks no weak reference while nothing died.
    t.settle();
    let objects: Vec<Bound<'py, PyAny>> = super::prefetch::list_items(list);
    let n = objects.len();
    let mut counts = Counters::default();
    let mut slots: Vec<Slot> = vec![Slot::MAX; n];
    let mut pending: Vec<(usize, Pending)> = Vec::new();
    let mut unplaced: Vec<usize> = Vec::new();
    // Identity pass. Consecutive items are usually consecutive slots, so
    // the next slot is tried before the address map.
    let mut next: usize = 0;
    for (i, obj) in objects.iter().enumerate() {
        match t.slot_of_object(obj.as_ptr(), next) {
            Some(s) => {
                slots[i] = s;
                next = s as usize + 1;
                counts.by_identity += 1;
                if t.core.verified(s) & groups != groups {
                    pending.push((i, Pending::Confirm(s)));
                }
            }
            None => unplaced.push(i),
        }
    }
    if !unplaced.is_empty() {
        // Slots held by objects of this call.
        let mut claimed = vec![false; t.core.len()];
        for &s in &slots {
            if s != Slot::MAX {
                claimed[s as usize] = true;
            }
        }
        // Id pass, staged over chunks like extraction (each stage's
        // pointer chases are independent, so their cache misses overlap).
        let mut dicts: Vec<Bound<'py, PyDict>> = Vec::with_capacity(CHUNK);
        for chunk in unplaced.chunks(CHUNK) {
            dicts.clear();
            for &i in chunk {
                dicts.push(event_dict(&objects[i])?.ok_or(Outcome::Decline("not an Event"))?);
            }
            for (&i, dict) in chunk.iter().zip(&dicts) {
                let id = dict
                    .get_item(intern!(py, "id"))?
                    .ok_or(Outcome::Decline("id"))?
                    .cast_into_exact::<PyString>()
                    .map_err(|_| Outcome::Decline("id"))?;
                let key = id_key(id.to_str().map_err(|_| Outcome::Decline("id"))?);
                let p = match t.core.slot_of_id(key) {
                    Some(s) if claimed[s as usize] => Pending::Transient,
                    Some(s) => {
                        claimed[s as usize] = true;
                        Pending::Rebind(s)
                    }
                    None => Pending::Insert(key),
                };
                pending.push((i, p));
            }
        }
    }
    if pending.is_empty() {
        let views = views_of(&t.core, &objects, &slots, &[], groups);
        return Ok((objects, views, slots, counts));
    }
    let inserts = pending
        .iter()
        .filter(|(_, p)| matches!(p, Pending::Insert(_)))
        .count();
    if inserts > 0 {
        t.reserve(inserts);
    }
    // Read everything that needs reading in one staged pass.
    let to_read: Vec<Bound<'py, PyAny>> =
        pending.iter().map(|(i, _)| objects[*i].clone()).collect();
    let read = ex.views(&to_read, need)?;
    let scratch = std::mem::take(&mut ex.ids);
    let mut transients: Vec<(usize, EventView)> = Vec::new();
    for ((i, p), &view) in pending.into_iter().zip(read.iter()) {
        let obj = &objects[i];
        let addr = obj.as_ptr() as usize;
        let storable = |_| Outcome::Decline("not storable");
        match p {
            Pending::Confirm(slot) => {
                if t.core
                    .merge(slot, &view, groups, &scratch)
                    .map_err(storable)?
                {
                    t.forget_values(slot);
                    t.generation += 1;
                    counts.changed += 1;
                }
            }
            Pending::Rebind(slot) => {
                t.bind(slot, obj, false)?;
                if t.core
                    .merge(slot, &view, groups, &scratch)
                    .map_err(storable)?
                {
                    t.generation += 1;
                    counts.changed += 1;
                }
                slots[i] = slot;
                counts.by_id += 1;
            }
            Pending::Insert(key) => {
                // The same new id twice in this call: the first is stored.
                if t.core.slot_of_id(key).is_some() {
                    transients.push((i, view));
                    counts.transient += 1;
                    continue;
                }
                let slot = t
                    .core
                    .insert(key, addr, &view, groups, &scratch)
                    .map_err(storable)?;
                let watched = t.watch(obj)?;
                t.primary.push(Some(watched));
                t.strong.push(false);
                slots[i] = slot;
                counts.read += 1;
            }
            Pending::Transient => {
                transients.push((i, view));
                counts.transient += 1;
            }
        }
    }
    // Transient views go into the arena past the stored ones.
    let extra: Vec<(usize, EventView)> = transients
        .into_iter()
        .map(|(i, view)| (i, t.core.transient(&view, &scratch)))
        .collect();
    let views = views_of(&t.core, &objects, &slots, &extra, groups);
    Ok((objects, views, slots, counts))
}

/// The views of a call: stored views, with the fields of other groups at
/// their defaults (as a direct read leaves them), and transient ones.
fn views_of(
    core: &EventIndex,
    objects: &[Bound<'_, PyAny>],
    slots: &[Slot],
    extra: &[(usize, EventView)],
    groups: u16,
) -> Views {
    let mut views = Views::with_capacity(slots.len());
    views.extend(slots.iter().zip(objects).map(|(&s, obj)| {
        if s == Slot::MAX {
            EventView::default()
        } else {
            core.view_of_groups(s, obj.as_ptr() as u64, groups)
        }
    }));
    for &(i, view) in extra {
        views[i] = EventView {
            ident: objects[i].as_ptr() as u64,
            ..view
        };
    }
    views
}

/// Drops every index.
#[pyfunction]
pub fn index_clear() {
    let mut reg = registry();
    reg.sessions.clear();
    drop(reg);
    super::ranges::forget_tuples();
}

/// Turns the index on or off and sets how many sessions it keeps; omitted
/// arguments keep their value. Turning it off drops every index.
#[pyfunction]
#[pyo3(signature = (*, enabled = None, max_sessions = None))]
pub fn index_configure(enabled: Option<bool>, max_sessions: Option<usize>) {
    let mut reg = registry();
    if let Some(enabled) = enabled {
        reg.enabled = enabled;
        if !enabled {
            reg.sessions.clear();
        }
    }
    if let Some(max) = max_sessions {
        reg.max_sessions = max;
        evict(&mut reg);
    }
}

/// What the indexes hold and how calls were answered.
#[pyfunction]
pub fn index_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    // Read before the registry is locked: judging classes may import.
    let (by_reason, by_function) = super::error::decline_totals(false);
    let learned = super::classes::learned_verdicts(py);
    let reg = registry();
    let events: usize = reg.sessions.values().map(|t| t.core.len()).sum();
    let bytes: usize = reg.sessions.values().map(Tracked::memory_bytes).sum();
    let summary_bytes: usize = reg.sessions.values().map(Tracked::summary_bytes).sum();
    let out = PyDict::new(py);
    out.set_item("enabled", reg.enabled)?;
    out.set_item("max_sessions", reg.max_sessions)?;
    out.set_item("sessions", reg.sessions.len())?;
    out.set_item("events", events)?;
    out.set_item("bytes", bytes)?;
    out.set_item(
        "summaries",
        reg.sessions
            .values()
            .map(|t| t.summaries.len())
            .sum::<usize>(),
    )?;
    out.set_item("summary_bytes", summary_bytes)?;
    out.set_item("scratch_bytes", super::scratch::pooled_bytes())?;
    out.set_item("prefetch", super::prefetch::enabled(py))?;
    out.set_item("direct_fields", super::fields::usable(py))?;
    out.set_item("dict_tags", version_tag::usable(py))?;
    let c = reg.counters;
    out.set_item("by_identity", c.by_identity)?;
    out.set_item("by_id", c.by_id)?;
    out.set_item("read", c.read)?;
    out.set_item("changed", c.changed)?;
    out.set_item("transient", c.transient)?;
    out.set_item("fallbacks", c.fallbacks)?;
    out.set_item("evictions", c.evictions)?;
    out.set_item("summaries_reused", c.summaries_reused)?;
    out.set_item("summaries_built", c.summaries_built)?;
    out.set_item("rewinds_reused", c.rewinds_reused)?;
    out.set_item("ranges_reused", c.ranges_reused)?;
    out.set_item("filters_reused", c.filters_reused)?;
    out.set_item("recoveries_reused", c.recoveries_reused)?;
    out.set_item("selections_reused", c.selections_reused)?;
    out.set_item("exact_reused", c.exact_reused)?;
    out.set_item("exact_extended", c.exact_extended)?;
    out.set_item("completed", c.completed)?;
    out.set_item("copied", c.copied)?;
    out.set_item("direct", c.direct)?;
    out.set_item("copy_seconds", c.copy_nanos as f64 * 1e-9)?;
    out.set_item("declines", by_reason)?;
    out.set_item("declines_by_function", by_function)?;
    out.set_item("classes_learned", learned)?;
    Ok(out)
}
