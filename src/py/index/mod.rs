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

mod again;
mod copies;
mod loaded;
mod memo;
mod registry;
mod summaries;
mod tracked;

use super::error::{Extracted, Outcome};
use super::extract::{event_dict, Extractor, Interner, CHUNK};
use super::scratch::Views;
use super::summary;
use super::version_tag;
use crate::core::coverage::Coverage;
use crate::core::event::Need;
use crate::core::event::Sym;
use crate::core::filter::{self, Extension, Item};
use crate::core::hash::FastMap;
use crate::core::index::{copy_spans, group, id_key, pick, EventIndex};
use crate::core::ranges::{survivors, CompactionRange};
use crate::core::recover::{Calls, Recovered};
use crate::core::select::{Asked, Plan};
use crate::core::slot_table::Slot;
use crate::core::EventView;
pub use again::*;
pub use copies::*;
pub use loaded::*;
pub use memo::*;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
pub use registry::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
use summaries::*;

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
