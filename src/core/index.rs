//! A per-session store of event views, kept across calls so that a call
//! reads from Python only the events it has not seen before.
//!
//! The store knows nothing about Python objects: it records, per event, the
//! key the binding layer matched it by (its `id` text), the address of the
//! object it was last seen as (the binding layer vouches that the address
//! still names that object), and its view in a compact form (about a third
//! of an [`EventView`]; views are expanded when a call gathers them).

use super::event::{CompactionView, EventView, Span, Sym};
use super::hash::{FastHasher, FastMap};
use super::slot_table::Slot;
use super::slot_table::SlotTable;
use std::hash::Hasher;

/// Groups of view fields, as bits: a slot records which groups were read
/// from (or confirmed on) the object it is bound to, so that an object seen
/// again is only read for the groups a call needs and it has not shown yet.
pub mod group {
    /// `timestamp`.
    pub const TIMESTAMP: u16 = 1;
    /// `invocation`.
    pub const INVOCATION: u16 = 1 << 1;
    /// `scope` (and the checks window selection makes on the event).
    pub const WINDOW: u16 = 1 << 2;
    /// `long_running` and `pending`.
    pub const PAIRING: u16 = 1 << 3;
    /// `author` and `prompt_tokens`.
    pub const USAGE: u16 = 1 << 4;
    /// `compaction`.
    pub const COMPACTION: u16 = 1 << 5;
    /// `rewind_before`.
    pub const REWIND: u16 = 1 << 6;
    /// `calls`, `responses`, `has_responses`.
    pub const PARTS: u16 = 1 << 7;
    /// `hitl_calls` (read only when both PARTS and PAIRING are).
    pub const HITL: u16 = 1 << 8;
}

/// An absent symbol / compaction / token count in [`Stored`].
const NONE: u32 = u32::MAX;
const NO_TOKENS: i64 = i64::MIN;

/// Why a view cannot be stored (the binding layer then reads the call
/// without the index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotStorable {
    /// More than `u16::MAX` ids in one of the event's id lists, or an arena
    /// beyond `u32` positions.
    TooManyIds,
    /// A symbol or token count equal to a sentinel of the compact form.
    Sentinel,
}

/// One event, compactly: spans are contiguous in the arena from `arena`,
/// in the order calls, responses, HITL calls, long-running ids, pending keys.
#[derive(Debug, Clone, Copy)]
struct Stored {
    timestamp: f64,
    prompt_tokens: i64,
    invocation: u32,
    rewind_before: u32,
    scope: u32,
    author: u32,
    compaction: u32,
    arena: u32,
    lens: [u16; 5],
    has_responses: bool,
    /// The [`group`]s read from or confirmed on the object at `ptr`.
    verified: u16,
    /// The [`group`]s ever stored (the others hold defaults).
    known: u16,
}

fn pack(sym: Option<Sym>) -> Result<u32, NotStorable> {
    match sym {
        Some(NONE) => Err(NotStorable::Sentinel),
        Some(s) => Ok(s),
        None => Ok(NONE),
    }
}

fn unpack(value: u32) -> Option<Sym> {
    (value != NONE).then_some(value)
}

/// The key an event is found by: a 64-bit hash of its `id`.
///
/// Two ids with one key would share a slot. That costs re-reading, never a
/// wrong view: a slot is only trusted for the object it is bound to, and an
/// object found by key is read again for every field a call needs.
pub fn id_key(id: &str) -> u64 {
    let mut h = FastHasher::default();
    h.write(id.as_bytes());
    h.write_usize(id.len());
    h.finish()
}

/// The views of one session's events, by object address and by event id.
#[derive(Debug, Default)]
pub struct EventIndex {
    stored: Vec<Stored>,
    /// Per slot, the address of the object it was last seen as; 0 for
    /// none. Apart from the stored views, so that address lookups and
    /// comparisons read a dense array.
    ptrs: Vec<usize>,
    compactions: Vec<CompactionView>,
    /// Id arena the expanded views' spans point into. Positions past
    /// `committed` belong to the current call's transient views.
    arena: Vec<Sym>,
    committed: usize,
    /// Events by the hash of their `id` (see [`id_key`]).
    by_id: FastMap<u64, Slot>,
    /// Per slot, the address of a second object bound to it (a deep copy
    /// of the first, equal to it when made); 0 for none. Empty until the
    /// first one.
    alias: Vec<usize>,
    /// Slots by the address they are bound to, and by their second
    /// object's; an address is in at most one of them, under the slot
    /// bound to it last.
    by_ptr: SlotTable,
    by_alias: SlotTable,
}

impl EventIndex {
    /// Number of stored events.
    pub fn len(&self) -> usize {
        self.stored.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.stored.is_empty()
    }

    /// The slot last seen at `ptr`, if any. Only the caller knows whether
    /// the object at `ptr` is still the one seen there.
    #[inline]
    pub fn slot_of_ptr(&self, ptr: usize) -> Option<Slot> {
        let (ptrs, alias) = (&self.ptrs, &self.alias);
        self.by_ptr
            .find(ptr, |s| ptrs[s as usize])
            .or_else(|| self.by_alias.find(ptr, |s| alias[s as usize]))
    }

    /// Forgets which slot `ptr` was bound to (the object there then is
    /// another one, about to be bound).
    fn unmap(&mut self, ptr: usize) {
        let (ptrs, alias) = (&self.ptrs, &self.alias);
        if let Some(s) = self.by_ptr.find(ptr, |s| ptrs[s as usize]) {
            self.by_ptr.remove(ptr, s, |s| ptrs[s as usize]);
        }
        if let Some(s) = self.by_alias.find(ptr, |s| alias[s as usize]) {
            self.by_alias.remove(ptr, s, |s| alias[s as usize]);
        }
    }

    /// The address `slot` was last seen at (0 for none).
    #[inline]
    pub fn ptr(&self, slot: Slot) -> usize {
        self.ptrs[slot as usize]
    }

    /// The address of the second object bound to `slot` (0 for none).
    #[inline]
    pub fn alias(&self, slot: Slot) -> usize {
        self.alias.get(slot as usize).copied().unwrap_or(0)
    }

    /// Binds a second object to `slot`: a deep copy of the object bound
    /// to it, made just now (so equal to it in every field). Replaces the
    /// previous second object.
    pub fn bind_alias(&mut self, slot: Slot, ptr: usize) {
        if self.alias.len() <= slot as usize {
            if ptr == 0 {
                return;
            }
            self.alias.resize(self.stored.len(), 0);
        }
        let old = self.alias[slot as usize];
        if old != 0 {
            let alias = &self.alias;
            self.by_alias.remove(old, slot, |s| alias[s as usize]);
            self.alias[slot as usize] = 0;
        }
        if ptr != 0 {
            self.unmap(ptr);
            self.alias[slot as usize] = ptr;
            let alias = &self.alias;
            self.by_alias.insert(ptr, slot, |s| alias[s as usize]);
        }
    }

    /// [`EventIndex::bind_alias`] for each `(slot, address)` of `pairs`
    /// in order (a session copy's objects, all at once), with the table of
    /// second objects rebuilt once instead of updated per pair when the
    /// pairs are many: an update looks its addresses up in both tables,
    /// and a lookup in the first-object table reads each slot it probes
    /// (scattered), where the rebuild only reads the contiguous addresses
    /// of second objects. One difference: a slot whose second object's
    /// address another slot takes is left with none (one by one, it keeps
    /// the address unlisted), as is one whose address was unlisted before.
    ///
    /// `stale_firsts` says whether a first-object address may name an
    /// object that died (one held weakly): when it cannot, a live new
    /// object cannot have it, and `pairs` are not looked up there.
    pub fn bind_aliases(&mut self, pairs: &[(Slot, usize)], stale_firsts: bool) {
        if pairs.len() * 4 < self.by_alias.len() {
            for &(slot, ptr) in pairs {
                self.bind_alias(slot, ptr);
            }
            return;
        }
        if self.alias.len() < self.stored.len() {
            self.alias.resize(self.stored.len(), 0);
        }
        if stale_firsts {
            for &(_, ptr) in pairs {
                let ptrs = &self.ptrs;
                if let Some(s) = self.by_ptr.find(ptr, |s| ptrs[s as usize]) {
                    self.by_ptr.remove(ptr, s, |s| ptrs[s as usize]);
                }
            }
        }
        // The pairs' slots get theirs one by one below, as `bind_alias`
        // gives them, in the table rebuilt (a slot whose address a pair
        // gives loses it there). The other slots keep theirs if listed: an
        // unlisted one lost its address to another object. (A slot is
        // listed under its own address, so a lookup of that address finds
        // it; a session copy pairs most slots, leaving few to look up,
        // where a scan of the table would read every bucket.)
        let mut paired = vec![false; self.alias.len()];
        for &(slot, _) in pairs {
            paired[slot as usize] = true;
            self.alias[slot as usize] = 0;
        }
        for slot in 0..self.alias.len() {
            let ptr = self.alias[slot];
            if ptr != 0 && !paired[slot] {
                let alias = &self.alias;
                if self.by_alias.find(ptr, |s| alias[s as usize]) != Some(slot as Slot) {
                    self.alias[slot] = 0;
                }
            }
        }
        self.by_alias.clear();
        for slot in 0..self.alias.len() {
            let ptr = self.alias[slot];
            if ptr != 0 {
                let alias = &self.alias;
                self.by_alias
                    .insert(ptr, slot as Slot, |s| alias[s as usize]);
            }
        }
        for &(slot, ptr) in pairs {
            let old = self.alias[slot as usize];
            if old != 0 {
                let alias = &self.alias;
                self.by_alias.remove(old, slot, |s| alias[s as usize]);
                self.alias[slot as usize] = 0;
            }
            if ptr == 0 {
                continue;
            }
            let alias = &self.alias;
            if let Some(other) = self.by_alias.find(ptr, |s| alias[s as usize]) {
                self.by_alias.remove(ptr, other, |s| alias[s as usize]);
                self.alias[other as usize] = 0;
            }
            self.alias[slot as usize] = ptr;
            let alias = &self.alias;
            self.by_alias.insert(ptr, slot, |s| alias[s as usize]);
        }
    }

    /// The [`group`]s confirmed on the object `slot` is bound to.
    #[inline]
    pub fn verified(&self, slot: Slot) -> u16 {
        self.stored[slot as usize].verified
    }

    /// The field groups stored for `slot`, confirmed or not.
    pub fn known(&self, slot: Slot) -> u16 {
        self.stored[slot as usize].known
    }

    /// The slot of the event whose id has key `key` ([`id_key`]).
    #[inline]
    pub fn slot_of_id(&self, key: u64) -> Option<Slot> {
        self.by_id.get(&key).copied()
    }

    /// Binds `slot` to the object at `ptr` alone: nothing is confirmed on
    /// it yet, and a second object bound before is unbound.
    pub fn rebind(&mut self, slot: Slot, ptr: usize) {
        self.bind_alias(slot, 0);
        self.stored[slot as usize].verified = 0;
        let old = self.ptrs[slot as usize];
        if old != 0 {
            let ptrs = &self.ptrs;
            self.by_ptr.remove(old, slot, |s| ptrs[s as usize]);
            self.ptrs[slot as usize] = 0;
        }
        if ptr != 0 {
            self.unmap(ptr);
            self.ptrs[slot as usize] = ptr;
            let ptrs = &self.ptrs;
            self.by_ptr.insert(ptr, slot, |s| ptrs[s as usize]);
        }
    }

    /// Stores a new event whose id has key `key` (absent so far), bound
    /// to the object at `ptr`, of which `view` holds the fields of `groups`
    /// (spans into `scratch`). Must not be called while transient views
    /// exist.
    pub fn insert(
        &mut self,
        key: u64,
        ptr: usize,
        view: &EventView,
        groups: u16,
        scratch: &[Sym],
    ) -> Result<Slot, NotStorable> {
        debug_assert_eq!(self.arena.len(), self.committed);
        let slot = Slot::try_from(self.stored.len()).map_err(|_| NotStorable::TooManyIds)?;
        let stored = self.compact(view, scratch)?;
        self.committed = self.arena.len();
        self.stored.push(stored);
        self.ptrs.push(0);
        if !self.alias.is_empty() {
            self.alias.push(0);
        }
        self.by_id.insert(key, slot);
        self.rebind(slot, ptr);
        self.stored[slot as usize].verified = groups;
        self.stored[slot as usize].known = groups;
        Ok(slot)
    }

    /// Takes the fields of `groups` from `view` (read from the object
    /// `slot` is bound to; spans into `scratch`), marks them confirmed and
    /// says whether a value stored before (not a group stored for the first
    /// time) changed. Must not be called while transient views exist.
    pub fn merge(
        &mut self,
        slot: Slot,
        view: &EventView,
        groups: u16,
        scratch: &[Sym],
    ) -> Result<bool, NotStorable> {
        debug_assert_eq!(self.arena.len(), self.committed);
        let old = self.view(slot, view.ident);
        let Stored {
            verified, known, ..
        } = self.stored[slot as usize];
        let write = self.differs(&old, view, groups, scratch);
        // Changed: a group stored before (not stored for the first time).
        let changed = write && self.differs(&old, view, groups & known, scratch);
        if write {
            // The five spans, contiguous, each from where its value comes.
            let mut new = pick(&old, view, groups);
            let mut owned: Vec<Sym> = Vec::new();
            let mut out = [Span::default(); 5];
            for (k, (span, group)) in spans(&new).into_iter().zip(SPAN_GROUPS).enumerate() {
                let ids = if groups & group != 0 {
                    span.of(scratch)
                } else {
                    span.of(&self.arena)
                };
                out[k] = Span {
                    start: owned.len() as u32,
                    len: span.len,
                };
                owned.extend_from_slice(ids);
            }
            [
                new.calls,
                new.responses,
                new.hitl_calls,
                new.long_running,
                new.pending,
            ] = out;
            let stored = self.compact(&new, &owned)?;
            self.committed = self.arena.len();
            self.stored[slot as usize] = stored;
        }
        let s = &mut self.stored[slot as usize];
        s.verified = verified | groups;
        s.known = known | groups;
        Ok(changed)
    }

    /// Whether `view` (spans into `scratch`) differs from `old` (spans into
    /// the arena) in the fields of `groups`.
    fn differs(&self, old: &EventView, view: &EventView, groups: u16, scratch: &[Sym]) -> bool {
        if groups == 0 {
            return false;
        }
        !same_plain(&self.mask(old, groups), &self.mask(view, groups))
            || (0..5).any(|k| {
                groups & SPAN_GROUPS[k] != 0
                    && spans(old)[k].of(&self.arena) != spans(view)[k].of(scratch)
            })
    }

    /// The view of an event that is not stored (a summary, an event being
    /// priced, a second object of a known id in one call), with its spans
    /// copied into the arena until [`end_call`].
    ///
    /// [`end_call`]: EventIndex::end_call
    pub fn transient(&mut self, view: &EventView, scratch: &[Sym]) -> EventView {
        copy_spans(view, scratch, &mut self.arena)
    }

    /// Drops the current call's transient views.
    pub fn end_call(&mut self) {
        self.arena.truncate(self.committed);
    }

    /// Lends the arena out for a call (expanded views point into it; the
    /// borrower may append transient ids). Give it back with
    /// [`restore_arena`](EventIndex::restore_arena) before storing again.
    pub fn take_arena(&mut self) -> Vec<Sym> {
        std::mem::take(&mut self.arena)
    }

    /// Takes the lent arena back, dropping what the call appended.
    pub fn restore_arena(&mut self, mut arena: Vec<Sym>) {
        arena.truncate(self.committed);
        self.arena = arena;
    }

    /// Makes room for `additional` more events. Tables grow by a quarter
    /// (or what is asked) rather than doubling: a session's index lives
    /// long and grows slowly, so spare capacity is memory held for nothing.
    pub fn reserve(&mut self, additional: usize) {
        fn grow<T>(v: &mut Vec<T>, additional: usize) {
            if v.capacity() - v.len() < additional {
                v.reserve_exact(additional.max(v.len() / 4));
            }
        }
        grow(&mut self.stored, additional);
        grow(&mut self.ptrs, additional);
        if !self.alias.is_empty() {
            grow(&mut self.alias, additional);
        }
        // About two ids per event (a call and its response), on average.
        grow(&mut self.arena, 2 * additional);
    }

    /// The id arena of expanded views.
    pub fn arena(&self) -> &[Sym] {
        &self.arena
    }

    /// The expanded view of `slot`, with identity `ident`.
    #[inline]
    pub fn view(&self, slot: Slot, ident: u64) -> EventView {
        let s = &self.stored[slot as usize];
        let mut start = s.arena;
        let mut span = |len: u16| {
            let out = Span {
                start,
                len: u32::from(len),
            };
            start += u32::from(len);
            out
        };
        let calls = span(s.lens[0]);
        let responses = span(s.lens[1]);
        let hitl_calls = span(s.lens[2]);
        let long_running = span(s.lens[3]);
        let pending = span(s.lens[4]);
        EventView {
            ident,
            timestamp: s.timestamp,
            invocation: unpack(s.invocation),
            rewind_before: unpack(s.rewind_before),
            compaction: (s.compaction != NONE).then(|| self.compactions[s.compaction as usize]),
            calls,
            responses,
            has_responses: s.has_responses,
            scope: unpack(s.scope),
            hitl_calls,
            long_running,
            pending,
            prompt_tokens: (s.prompt_tokens != NO_TOKENS).then_some(s.prompt_tokens),
            author: unpack(s.author),
        }
    }

    /// [`view`](EventIndex::view), with the fields outside `groups` at
    /// their defaults.
    ///
    /// Built field group by field group (a call walks every item of its
    /// list through this; expanding the whole view first and masking it
    /// costs twice as much); equal to `pick(default, view(slot))`, tested.
    #[inline]
    pub fn view_of_groups(&self, slot: Slot, ident: u64, groups: u16) -> EventView {
        use group::*;
        let s = &self.stored[slot as usize];
        let has = |g: u16| groups & g != 0;
        let mut v = EventView {
            ident,
            ..EventView::default()
        };
        if has(TIMESTAMP) {
            v.timestamp = s.timestamp;
        }
        if has(INVOCATION) {
            v.invocation = unpack(s.invocation);
        }
        if has(REWIND) {
            v.rewind_before = unpack(s.rewind_before);
        }
        if has(COMPACTION) && s.compaction != NONE {
            v.compaction = Some(self.compactions[s.compaction as usize]);
        }
        if has(WINDOW) {
            v.scope = unpack(s.scope);
        }
        if has(USAGE) {
            v.prompt_tokens = (s.prompt_tokens != NO_TOKENS).then_some(s.prompt_tokens);
            v.author = unpack(s.author);
        }
        if groups & (PARTS | HITL | PAIRING) != 0 {
            let mut start = s.arena;
            let spans = s.lens.map(|len| {
                let span = Span {
                    start,
                    len: u32::from(len),
                };
                start += u32::from(len);
                span
            });
            if has(PARTS) {
                (v.calls, v.responses, v.has_responses) = (spans[0], spans[1], s.has_responses);
            }
            if has(HITL) {
                v.hitl_calls = spans[2];
            }
            if has(PAIRING) {
                (v.long_running, v.pending) = (spans[3], spans[4]);
            }
        }
        v
    }

    /// `v` with the fields outside `groups` at their defaults.
    #[inline]
    fn mask(&self, v: &EventView, groups: u16) -> EventView {
        pick(&EventView::default(), v, groups)
    }

    fn compact(&mut self, view: &EventView, scratch: &[Sym]) -> Result<Stored, NotStorable> {
        let spans = spans(view);
        let mut lens = [0u16; 5];
        for (len, span) in lens.iter_mut().zip(spans) {
            *len = u16::try_from(span.len).map_err(|_| NotStorable::TooManyIds)?;
        }
        let arena = u32::try_from(self.arena.len()).map_err(|_| NotStorable::TooManyIds)?;
        let total: usize = spans.iter().map(|s| s.len as usize).sum();
        if u32::try_from(self.arena.len() + total).is_err() {
            return Err(NotStorable::TooManyIds);
        }
        let prompt_tokens = match view.prompt_tokens {
            Some(NO_TOKENS) => return Err(NotStorable::Sentinel),
            Some(t) => t,
            None => NO_TOKENS,
        };
        let stored = Stored {
            timestamp: view.timestamp,
            prompt_tokens,
            invocation: pack(view.invocation)?,
            rewind_before: pack(view.rewind_before)?,
            scope: pack(view.scope)?,
            author: pack(view.author)?,
            compaction: match view.compaction {
                Some(c) => {
                    let k = u32::try_from(self.compactions.len())
                        .ok()
                        .filter(|&k| k != NONE)
                        .ok_or(NotStorable::TooManyIds)?;
                    self.compactions.push(c);
                    k
                }
                None => NONE,
            },
            arena,
            lens,
            has_responses: view.has_responses,
            verified: 0,
            known: 0,
        };
        for span in spans {
            self.arena.extend_from_slice(span.of(scratch));
        }
        Ok(stored)
    }

    /// Bytes held, counting allocated capacity (hash maps at their bucket
    /// count with one control byte per bucket).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.stored.capacity() * std::mem::size_of::<Stored>()
            + self.ptrs.capacity() * std::mem::size_of::<usize>()
            + self.compactions.capacity() * std::mem::size_of::<CompactionView>()
            + self.arena.capacity() * std::mem::size_of::<Sym>()
            + self.alias.capacity() * std::mem::size_of::<usize>()
            + map_bytes(&self.by_id)
            + self.by_ptr.memory_bytes()
            + self.by_alias.memory_bytes()
    }
}

/// Bytes of a hash map's table: hashbrown keeps capacity at 7/8 of a
/// power-of-two bucket count, with one control byte per bucket.
pub fn map_bytes<K, V>(m: &FastMap<K, V>) -> usize {
    let buckets = if m.capacity() == 0 {
        0
    } else {
        (m.capacity() * 8 / 7).next_power_of_two()
    };
    buckets * (std::mem::size_of::<(K, V)>() + 1)
}

/// The group of each of [`spans`]' five spans.
const SPAN_GROUPS: [u16; 5] = [
    group::PARTS,
    group::PARTS,
    group::HITL,
    group::PAIRING,
    group::PAIRING,
];

/// `a` with the fields of `groups` taken from `b` (and `b`'s identity):
/// the one place that says which field belongs to which group. Spans are
/// taken as they are: both views must index the same arena.
pub fn pick(a: &EventView, b: &EventView, groups: u16) -> EventView {
    use group::*;
    let has = |g: u16| groups & g != 0;
    let mut v = EventView {
        ident: b.ident,
        ..*a
    };
    if has(TIMESTAMP) {
        v.timestamp = b.timestamp;
    }
    if has(INVOCATION) {
        v.invocation = b.invocation;
    }
    if has(REWIND) {
        v.rewind_before = b.rewind_before;
    }
    if has(COMPACTION) {
        v.compaction = b.compaction;
    }
    if has(PARTS) {
        (v.calls, v.responses, v.has_responses) = (b.calls, b.responses, b.has_responses);
    }
    if has(WINDOW) {
        v.scope = b.scope;
    }
    if has(HITL) {
        v.hitl_calls = b.hitl_calls;
    }
    if has(PAIRING) {
        (v.long_running, v.pending) = (b.long_running, b.pending);
    }
    if has(USAGE) {
        (v.prompt_tokens, v.author) = (b.prompt_tokens, b.author);
    }
    v
}

/// `view` with its spans' ids (in `from`) copied to the end of `into`, and
/// its spans pointing there.
pub fn copy_spans(view: &EventView, from: &[Sym], into: &mut Vec<Sym>) -> EventView {
    let mut out = *view;
    for span in [
        &mut out.calls,
        &mut out.responses,
        &mut out.hitl_calls,
        &mut out.long_running,
        &mut out.pending,
    ] {
        let start = into.len() as u32;
        into.extend_from_slice(span.of(from));
        span.start = start;
    }
    out
}

fn spans(v: &EventView) -> [Span; 5] {
    [
        v.calls,
        v.responses,
        v.hitl_calls,
        v.long_running,
        v.pending,
    ]
}

/// Equal except for spans (compared by content elsewhere) and identity;
/// timestamps and bounds bitwise, so a NaN equals its own copy.
fn same_plain(a: &EventView, b: &EventView) -> bool {
    let bits = |c: Option<CompactionView>| {
        c.map(|c| {
            (
                c.start.map(f64::to_bits),
                c.end.map(f64::to_bits),
                c.has_content,
            )
        })
    };
    a.timestamp.to_bits() == b.timestamp.to_bits()
        && a.invocation == b.invocation
        && a.rewind_before == b.rewind_before
        && bits(a.compaction) == bits(b.compaction)
        && a.has_responses == b.has_responses
        && a.scope == b.scope
        && a.prompt_tokens == b.prompt_tokens
        && a.author == b.author
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: u16 = (1 << 9) - 1;

    fn view_with(arena: &mut Vec<Sym>, calls: &[Sym], responses: &[Sym]) -> EventView {
        let start = arena.len() as u32;
        arena.extend_from_slice(calls);
        let rstart = arena.len() as u32;
        arena.extend_from_slice(responses);
        EventView {
            timestamp: 3.5,
            invocation: Some(7),
            calls: Span {
                start,
                len: calls.len() as u32,
            },
            responses: Span {
                start: rstart,
                len: responses.len() as u32,
            },
            has_responses: !responses.is_empty(),
            prompt_tokens: Some(12),
            compaction: Some(CompactionView {
                start: Some(1.0),
                end: None,
                has_content: true,
            }),
            author: Some(0),
            ..EventView::default()
        }
    }

    #[test]
    fn copied_spans_name_the_same_ids_in_their_new_arena() {
        let mut from = vec![99, 98];
        let view = view_with(&mut from, &[1, 2, 3], &[4]);
        let mut into = vec![50];
        let copied = copy_spans(&view, &from, &mut into);
        assert_eq!(into, [50, 1, 2, 3, 4]);
        for (a, b) in spans(&view).iter().zip(spans(&copied).iter()) {
            assert_eq!(a.of(&from), b.of(&into));
        }
        assert!(same_plain(&view, &copied));
    }

    #[test]
    fn group_views_are_the_masked_full_view() {
        let mut scratch = Vec::new();
        let mut v = view_with(&mut scratch, &[1, 2], &[3]);
        let mut span = |ids: &[Sym]| {
            let start = scratch.len() as u32;
            scratch.extend_from_slice(ids);
            Span {
                start,
                len: ids.len() as u32,
            }
        };
        v.hitl_calls = span(&[4]);
        v.long_running = span(&[5, 6]);
        v.pending = span(&[7, 8, 9]);
        v.scope = Some(3);
        v.rewind_before = Some(2);
        let mut index = EventIndex::default();
        let full = index
            .insert(id_key("e1"), 0x1000, &v, ALL, &scratch)
            .unwrap();
        let bare = index
            .insert(id_key("e2"), 0x2000, &EventView::at(2.0), ALL, &scratch)
            .unwrap();
        for slot in [full, bare] {
            for groups in 0..=ALL {
                let masked = pick(&EventView::default(), &index.view(slot, 9), groups);
                assert_eq!(
                    index.view_of_groups(slot, 9, groups),
                    masked,
                    "groups {groups:#x}"
                );
            }
        }
    }

    #[test]
    fn stored_views_expand_to_the_same_ids() {
        let mut scratch = vec![99, 98];
        let v = view_with(&mut scratch, &[1, 2], &[3]);
        let mut index = EventIndex::default();
        let slot = index
            .insert(id_key("e1"), 0x1000, &v, ALL, &scratch)
            .unwrap();
        let back = index.view(slot, 5);
        assert_eq!(back.calls.of(index.arena()), &[1, 2]);
        assert_eq!(back.responses.of(index.arena()), &[3]);
        assert_eq!(back.ident, 5);
        assert_eq!(back.timestamp, v.timestamp);
        assert_eq!(back.invocation, v.invocation);
        assert_eq!(back.compaction, v.compaction);
        assert_eq!(back.prompt_tokens, v.prompt_tokens);
        assert_eq!(back.author, v.author);
        assert_eq!(index.slot_of_id(id_key("e1")), Some(slot));
        assert_eq!(index.slot_of_ptr(0x1000), Some(slot));
        assert_eq!(index.slot_of_id(id_key("e2")), None);
        assert_eq!(index.verified(slot), ALL);
    }

    #[test]
    fn rebinding_moves_the_address_and_forgets_what_was_confirmed() {
        let mut index = EventIndex::default();
        let slot = index
            .insert(id_key("a"), 0x10, &EventView::at(1.0), ALL, &[])
            .unwrap();
        index.rebind(slot, 0x20);
        assert_eq!(index.slot_of_ptr(0x10), None);
        assert_eq!(index.slot_of_ptr(0x20), Some(slot));
        assert_eq!(index.ptr(slot), 0x20);
        assert_eq!(index.verified(slot), 0);
    }

    #[test]
    fn a_second_object_is_found_until_the_slot_is_rebound() {
        let mut index = EventIndex::default();
        let slot = index
            .insert(id_key("a"), 0x10, &EventView::at(1.0), ALL, &[])
            .unwrap();
        index.bind_alias(slot, 0x20);
        assert_eq!(index.slot_of_ptr(0x20), Some(slot));
        assert_eq!(index.slot_of_ptr(0x10), Some(slot));
        assert_eq!(index.verified(slot), ALL);
        index.bind_alias(slot, 0x30);
        assert_eq!(index.slot_of_ptr(0x20), None);
        index.rebind(slot, 0x40);
        assert_eq!(index.slot_of_ptr(0x30), None);
        assert_eq!(index.alias(slot), 0);
    }

    /// An index of `n` slots at addresses `0x1000 + 16 * slot`, with the
    /// second objects `aliases` bound one by one.
    fn index_with_aliases(n: usize, aliases: &[(Slot, usize)]) -> EventIndex {
        let mut index = EventIndex::default();
        for k in 0..n {
            index
                .insert(
                    id_key(&k.to_string()),
                    0x1000 + 16 * k,
                    &EventView::at(1.0),
                    ALL,
                    &[],
                )
                .unwrap();
        }
        for &(slot, ptr) in aliases {
            index.bind_alias(slot, ptr);
        }
        index
    }

    proptest::proptest! {
        /// Binding many second objects at once finds every address where
        /// binding them one by one does, and gives each slot the same
        /// second object, but for the documented difference (a slot whose
        /// address another object took has none, not an unlisted one).
        #[test]
        fn second_objects_bound_at_once_are_found_as_one_by_one(
            n in 1usize..40,
            before in proptest::collection::vec((0u32..40, 0usize..64), 0..60),
            pairs in proptest::collection::vec((0u32..40, 0usize..64), 0..60),
            stale in proptest::prelude::any::<bool>(),
        ) {
            // Second objects at 0x8000 up, or (with `stale`, as a dead
            // first object's address reused) at first objects' addresses.
            let addr = |k: usize| match k {
                0 => 0,
                k if stale && k % 5 == 0 => 0x1000 + 16 * (k / 5),
                k => 0x8000 + 16 * k,
            };
            let fit = |v: &[(u32, usize)]| -> Vec<(Slot, usize)> {
                v.iter().map(|&(s, k)| (s % n as u32, addr(k))).collect()
            };
            let (before, pairs) = (fit(&before), fit(&pairs));
            let mut one = index_with_aliases(n, &before);
            let mut all = index_with_aliases(n, &before);
            for &(slot, ptr) in &pairs {
                one.bind_alias(slot, ptr);
            }
            all.bind_aliases(&pairs, stale);
            for k in 0..64 {
                proptest::prop_assert_eq!(one.slot_of_ptr(addr(k)), all.slot_of_ptr(addr(k)));
            }
            for slot in 0..n as Slot {
                let (a, b) = (one.alias(slot), all.alias(slot));
                let unlisted = a != 0 && one.slot_of_ptr(a) != Some(slot);
                proptest::prop_assert!(a == b || (unlisted && b == 0), "slot {}: {:#x} {:#x}", slot, a, b);
            }
        }
    }

    #[test]
    fn an_address_taken_over_by_another_slot_stays_with_it() {
        let mut index = EventIndex::default();
        let a = index
            .insert(id_key("a"), 0x10, &EventView::at(1.0), ALL, &[])
            .unwrap();
        let b = index
            .insert(id_key("b"), 0x10, &EventView::at(2.0), ALL, &[])
            .unwrap();
        index.rebind(a, 0x30);
        assert_eq!(index.slot_of_ptr(0x10), Some(b));
    }

    #[test]
    fn transient_views_are_dropped_at_the_end_of_the_call() {
        let mut scratch = Vec::new();
        let v = view_with(&mut scratch, &[4], &[]);
        let mut index = EventIndex::default();
        index.insert(id_key("a"), 1, &v, ALL, &scratch).unwrap();
        let before = index.arena().len();
        let t = index.transient(&v, &scratch);
        assert_eq!(t.calls.of(index.arena()), &[4]);
        index.end_call();
        assert_eq!(index.arena().len(), before);
        assert_eq!(index.view(0, 0).calls.of(index.arena()), &[4]);
    }

    #[test]
    fn merging_takes_only_the_given_groups() {
        let mut scratch = Vec::new();
        let v = view_with(&mut scratch, &[4], &[5]);
        let mut index = EventIndex::default();
        let slot = index
            .insert(
                id_key("a"),
                1,
                &v,
                group::TIMESTAMP | group::PARTS,
                &scratch,
            )
            .unwrap();
        // Same timestamp and parts: nothing changes, more is confirmed.
        let mut other = Vec::new();
        let same = view_with(&mut other, &[4], &[5]);
        assert!(!index
            .merge(slot, &same, group::TIMESTAMP | group::PARTS, &other)
            .unwrap());
        // New calls, and a timestamp that is not in the merged groups.
        let mut third = Vec::new();
        let changed = EventView {
            timestamp: 99.0,
            ..view_with(&mut third, &[6, 7], &[5])
        };
        assert!(index
            .merge(slot, &changed, group::PARTS | group::COMPACTION, &third)
            .unwrap());
        let back = index.view(slot, 0);
        assert_eq!(back.timestamp, 3.5);
        assert_eq!(back.calls.of(index.arena()), &[6, 7]);
        assert_eq!(back.responses.of(index.arena()), &[5]);
        assert_eq!(
            index.verified(slot),
            group::TIMESTAMP | group::PARTS | group::COMPACTION
        );
        assert_eq!(index.slot_of_id(id_key("a")), Some(slot));
    }

    #[test]
    fn a_nan_timestamp_equals_its_own_copy() {
        let mut index = EventIndex::default();
        let slot = index
            .insert(id_key("a"), 1, &EventView::at(f64::NAN), ALL, &[])
            .unwrap();
        assert!(!index
            .merge(slot, &EventView::at(f64::NAN), group::TIMESTAMP, &[])
            .unwrap());
    }

    #[test]
    fn sentinels_and_oversized_id_lists_are_not_storable() {
        let mut index = EventIndex::default();
        let v = EventView {
            invocation: Some(NONE),
            ..EventView::default()
        };
        assert_eq!(
            index.insert(id_key("a"), 1, &v, ALL, &[]),
            Err(NotStorable::Sentinel)
        );
        let scratch = vec![1; 70_000];
        let v = EventView {
            calls: Span {
                start: 0,
                len: 70_000,
            },
            ..EventView::default()
        };
        assert_eq!(
            index.insert(id_key("a"), 1, &v, ALL, &scratch),
            Err(NotStorable::TooManyIds)
        );
        assert!(index.is_empty());
    }

    #[test]
    fn memory_is_counted() {
        let mut index = EventIndex::default();
        for i in 0..1000 {
            let id = format!("{i:036}");
            index
                .insert(id_key(&id), i + 1, &EventView::at(1.0), ALL, &[])
                .unwrap();
        }
        let per_event = index.memory_bytes() / index.len();
        assert!(per_event > 72 && per_event < 300, "{per_event}");
    }
}
