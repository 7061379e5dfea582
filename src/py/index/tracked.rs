//! A session's index ([`Tracked`]): the core's event index, the object
//! each slot is bound to and how that binding is shown to hold (weak
//! references and the death count, copy holders), whether a call is worth
//! indexing (a sample of its items), the caches of what compaction events
//! gave (summaries, source values, coverage records), and the remembered
//! results of the last calls (see `memos`), each naming its objects by a
//! [`Seen`].

use super::memos::Remembered;
use super::objects::{list_item, points_at, starts_with, weak_ref_with, CopyHolder, Obituary};
use super::seen::{lock, Record, Seen, Shared};
use super::summaries::{Origin, Summary, Unchanged};
use crate::core::event::EventView;
use crate::core::exact::Parsed;
use crate::core::hash::FastMap;
use crate::core::index::EventIndex;
use crate::core::slot_table::Slot;
use crate::py::reading::extract::Interner;
use crate::py::summary;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One session's index and what belongs with it on the Python side.
pub(crate) struct Tracked {
    pub(super) core: EventIndex,
    pub(super) interner: Interner,
    /// The object each slot is bound to: a weak reference to it (it must
    /// not keep a session's objects alive), or, where `strong` says so, the
    /// object itself (once it was the source of a deep copy: the stored
    /// original a session service copies for every invocation, which lives
    /// as long as the session anyway).
    pub(super) primary: Vec<Option<Py<PyAny>>>,
    pub(super) strong: Vec<bool>,
    /// Per slot, the [`CopyHolder`] of its second object (a deep copy of
    /// the first, bound by `index_copied`), by number; read only where the
    /// core has a second address for the slot. Empty until the first copy.
    pub(super) alias_holder: Vec<u32>,
    /// The holders of the copies bound so far (dead ones pruned at the
    /// next copy), by number, ascending.
    pub(super) holders: Vec<(u32, Py<CopyHolder>)>,
    pub(super) next_holder: u32,
    /// Summary Events built for compaction events, by slot.
    pub(super) summaries: FastMap<Slot, Summary>,
    /// The call-recovery view of a slot's summaries when their content
    /// holds neither calls nor responses (what a summary usually holds:
    /// text). Every object bound to a slot is its primary or a deep copy
    /// of it, so their compacted contents hold the same parts; learned from
    /// the first summary read, forgotten when the slot is bound anew.
    pub(super) plain: FastMap<Slot, EventView>,
    /// What the summaries of a compaction slot take from the stored
    /// original it holds strongly (see `summary::Source`: timestamp,
    /// content, branch, scope, invocation id, actions), read when its first
    /// summary is built (`Loaded::primary_values`): the summary of the
    /// original and of its copies (see [`Origin::Primary`]). Forgotten when
    /// the slot is bound anew or its values change.
    pub(super) sources: FastMap<Slot, summary::HeldSource>,
    /// Exact mode's coverage record of the stored original slot `slot`
    /// holds strongly, parsed once per binding (see
    /// `Loaded::record_at`).
    pub(super) records: FastMap<Slot, Arc<Parsed>>,
    /// What the last calls of each operation on this session through the
    /// index answered, to answer the next one on the same list, or on it
    /// extended: one slot per operation, by type (see `memos`).
    memos: Vec<Box<dyn Remembered>>,
    /// Bumped whenever what a slot stores changes, so a remembered result
    /// is only reused over unchanged views. (Binding a slot to another
    /// object of equal values does not bump it: a remembered result checks
    /// each of its objects is still bound, see [`Tracked::begins`]; the stored
    /// original a session service copies is bound so in every invocation.)
    pub(super) generation: u64,
    /// The addresses of the last list read directly, as a one-hash bitmap
    /// (see `worth_indexing`); only compared, never dereferenced.
    pub(super) seen: Vec<u64>,
    /// That list's first object, held: while it is, a list that begins
    /// with it can hold that list's objects, and a list that does not
    /// holds new objects, some of them maybe at the addresses of that
    /// list's dead ones (a session's fresh Events are often allocated where
    /// the last invocation's were freed), which `seen` cannot tell apart.
    pub(super) seen_first: Option<Py<PyAny>>,
    pub(super) last_used: u64,
    /// Bumped whenever an object the index may have named in a remembered
    /// result can have died: a weakly bound object dying (its weak
    /// reference's callback, [`Obituary`]), a holder letting go of its
    /// copies, a slot bound anew (its object no longer held or watched).
    /// While it has not moved, an object a remembered result named is
    /// alive, so an item at its address is that object: the result's
    /// objects are then compared by address alone (see [`Tracked::begins`]).
    pub(super) deaths: Arc<AtomicU64>,
    /// The weak references' callback that bumps `deaths`, made once.
    pub(super) obituary: Option<Py<Obituary>>,
    /// The death count at which every weakly bound object was alive (see
    /// [`Tracked::settle`]): while `deaths` has not moved from it, an item
    /// at a weakly bound slot's address is that slot's object, without
    /// asking its weak reference.
    pub(super) alive_at: Option<u64>,
}

impl Tracked {
    pub(super) fn new() -> Self {
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
            memos: Vec::new(),
            generation: 0,
            seen: Vec::new(),
            seen_first: None,
            deaths: Arc::new(AtomicU64::new(0)),
            obituary: None,
            alive_at: None,
            last_used: 0,
        }
    }

    /// The remembered result of type `M`, if any.
    pub(super) fn memo<M: Remembered>(&self) -> Option<&M> {
        self.memos
            .iter()
            .find_map(|m| (&**m as &dyn Any).downcast_ref::<M>())
    }

    /// [`Tracked::memo`], to change it.
    pub(super) fn memo_mut<M: Remembered>(&mut self) -> Option<&mut M> {
        self.memos
            .iter_mut()
            .find_map(|m| (&mut **m as &mut dyn Any).downcast_mut::<M>())
    }

    /// Takes the remembered result of type `M` out (to extend it with the
    /// index at hand; [`Tracked::keep_memo`] puts it back).
    pub(super) fn take_memo<M: Remembered>(&mut self) -> Option<Box<M>> {
        let k = self
            .memos
            .iter()
            .position(|m| (&**m as &dyn Any).is::<M>())?;
        let memo: Box<dyn Any> = self.memos.swap_remove(k);
        memo.downcast().ok()
    }

    /// Remembers `memo`, in place of the result of its type.
    pub(super) fn keep_memo<M: Remembered>(&mut self, memo: Box<M>) {
        self.forget_memo::<M>();
        self.memos.push(memo);
    }

    /// Forgets the result of type `M`.
    pub(super) fn forget_memo<M: Remembered>(&mut self) {
        self.memos.retain(|m| !(&**m as &dyn Any).is::<M>());
    }

    /// Takes every remembered result out (to change them with the index
    /// at hand; [`Tracked::keep_memos`] puts them back).
    pub(super) fn take_memos(&mut self) -> Vec<Box<dyn Remembered>> {
        std::mem::take(&mut self.memos)
    }

    pub(super) fn keep_memos(&mut self, memos: Vec<Box<dyn Remembered>>) {
        self.memos = memos;
    }

    /// The objects of a call and their slots, or `None` when one is not
    /// bound; in a record another remembered result holds, when one begins
    /// with them.
    pub(super) fn seen_of(&self, objects: &[Bound<'_, PyAny>], slots: &[Slot]) -> Option<Seen> {
        if slots.contains(&Slot::MAX) {
            return None;
        }
        let addrs: Vec<usize> = objects.iter().map(|o| o.as_ptr() as usize).collect();
        let record = self
            .record_for(&addrs, slots)
            .unwrap_or_else(|| Arc::new(Mutex::new(Record::new(addrs, slots.to_vec()))));
        Some(Seen::new(
            record,
            objects.len(),
            self.generation,
            self.deaths(),
        ))
    }

    /// Whether `list` holds exactly the objects `seen`, over an unchanged
    /// index, with no object dead since they were known bound (so each is
    /// alive, and an item at its address is it). Without the per-object
    /// check of [`Tracked::begins`]: after any death, `false`.
    pub(super) fn unchanged(&self, seen: &Seen, list: &Bound<'_, PyList>) -> bool {
        seen.generation == self.generation
            && seen.deaths == self.deaths()
            && list.len() == seen.len()
            && seen.with(|addrs, _| starts_with(list, addrs))
    }

    /// Whether `list` begins with the objects `seen`, each still bound to
    /// its slot (a copy whose holder lives, or an object the slot is bound
    /// to), over an unchanged index. When no object can have died since
    /// they were known bound (`deaths`), each is still alive, so an item
    /// at its address is it: only addresses are compared. After a full
    /// check, `seen` was known bound at the death count now.
    pub(super) fn begins(&self, seen: &mut Seen, list: &Bound<'_, PyList>) -> bool {
        if seen.generation != self.generation || list.len() < seen.len() {
            return false;
        }
        let now = self.deaths();
        if seen.deaths == now {
            return seen.with(|addrs, _| starts_with(list, addrs));
        }
        if !seen.with(|addrs, slots| self.bound_at(list, addrs, slots)) {
            return false;
        }
        seen.deaths = now;
        true
    }

    /// Whether `list` begins with the objects at `addrs`, each still bound
    /// to its slot in `slots` (see [`Tracked::begins`]).
    fn bound_at(&self, list: &Bound<'_, PyList>, addrs: &[usize], slots: &[Slot]) -> bool {
        // Copies are bound by holder: each holder's liveness is looked up once.
        let mut live_holder = 0;
        for (i, (&addr, &slot)) in addrs.iter().zip(slots).enumerate() {
            let ptr = list_item(list, i);
            if ptr as usize != addr {
                return false;
            }
            let holder = self.alias_holder.get(slot as usize).copied().unwrap_or(0);
            let copy_of_live_holder = holder != 0
                && self.core.alias(slot) == addr
                && (holder == live_holder || self.holder_alive(holder));
            if copy_of_live_holder {
                live_holder = holder;
            } else if !self.bound(slot, ptr) {
                return false;
            }
        }
        true
    }

    /// A record a remembered result holds that begins with `addrs` and
    /// `slots`.
    fn record_for(&self, addrs: &[usize], slots: &[Slot]) -> Option<Shared> {
        let mut found = None;
        for memo in &self.memos {
            memo.each_seen(&mut |seen| {
                if found.is_none() && lock(&seen.record).holds_at(0, addrs, slots) {
                    found = Some(seen.record.clone());
                }
            });
        }
        found
    }

    /// Makes the remembered results that name the same objects share one
    /// record (after results were carried onto a session copy, each in a
    /// record of its own).
    pub(super) fn share_records(&mut self) {
        let mut kept: Vec<Shared> = Vec::new();
        for memo in &mut self.memos {
            memo.each_seen_mut(&mut |seen| {
                if kept.iter().any(|record| Arc::ptr_eq(record, &seen.record)) {
                    return;
                }
                let found = kept.iter().find(|record| {
                    seen.with(|addrs, slots| lock(record).holds_at(0, addrs, slots))
                });
                match found {
                    Some(record) => seen.record = record.clone(),
                    None => kept.push(seen.record.clone()),
                }
            });
        }
    }

    /// Bytes of the records the remembered results hold, each counted once.
    fn records_bytes(&self) -> usize {
        let mut counted: Vec<*const Mutex<Record>> = Vec::new();
        let mut bytes = 0;
        for memo in &self.memos {
            memo.each_seen(&mut |seen| {
                let ptr = Arc::as_ptr(&seen.record);
                if !counted.contains(&ptr) {
                    counted.push(ptr);
                    bytes += lock(&seen.record).memory_bytes();
                }
            });
        }
        bytes
    }

    /// Bytes held by the index proper: the Rust structures, the weak
    /// reference objects, and the copy holders' references.
    pub(super) fn memory_bytes(&self) -> usize {
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
            + self.memos.iter().map(|m| m.memory_bytes()).sum::<usize>()
            + weak * 64
            + held
    }

    /// Binds `slot` to `obj` alone (its second object, if any, unbound),
    /// holding it strongly (a stored original) or weakly.
    pub(super) fn bind(
        &mut self,
        slot: Slot,
        obj: &Bound<'_, PyAny>,
        strong: bool,
    ) -> PyResult<()> {
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
    pub(super) fn deaths(&self) -> u64 {
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
    pub(super) fn settle(&mut self) {
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
    pub(super) fn watch(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
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
    pub(super) fn forget_values(&mut self, slot: Slot) {
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
    pub(super) fn primary_source(&self, slot: Slot) -> Option<&Py<PyAny>> {
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
    pub(super) fn plain_summary_view(
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
    pub(super) fn live_holder(&self, id: u32) -> Option<&CopyHolder> {
        if id == 0 {
            return None;
        }
        let (_, holder) = self.holders.iter().rev().find(|(h, _)| *h == id)?;
        Some(holder.get()).filter(|h| h.alive())
    }

    /// Whether the copies held by holder number `id` are still held.
    #[inline]
    pub(super) fn holder_alive(&self, id: u32) -> bool {
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
    /// stay remembered (see `load::load_source`).
    pub(super) fn worth_indexing(&mut self, list: &Bound<'_, PyList>, bind_seen: bool) -> bool {
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
    pub(super) fn bit(addr: usize, words: usize) -> (usize, u64) {
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
    pub(super) fn remember(&mut self, list: &Bound<'_, PyList>) {
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
    pub(super) fn reserve(&mut self, additional: usize) {
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
    pub(super) fn bound(&self, slot: Slot, ptr: *mut ffi::PyObject) -> bool {
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
    pub(super) fn slot_of_object(&self, ptr: *mut ffi::PyObject, next: usize) -> Option<Slot> {
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
    pub(super) fn summary_bytes(&self) -> usize {
        crate::core::index::map_bytes(&self.summaries)
            + crate::core::index::map_bytes(&self.plain)
            + crate::core::index::map_bytes(&self.sources)
            + crate::core::index::map_bytes(&self.records)
            + self.summaries.values().map(|s| s.bytes).sum::<usize>()
    }
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
