//! The methods of a session's index ([`Tracked`]).

use super::*;

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
    pub(super) fn record_for(&self, addrs: &[usize], slots: &[Slot]) -> Option<Shared> {
        self.seens()
            .find(|seen| lock(&seen.record).holds_at(0, addrs, slots))
            .map(|seen| seen.record.clone())
    }

    /// Makes the remembered results that name the same objects share one
    /// record (after results were carried onto a session copy, each in a
    /// record of its own).
    pub(super) fn share_records(&mut self) {
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
        Some(holder.get()).filter(|h| h.alive.load(Ordering::Acquire))
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
    /// stay remembered (see [`load_source`]).
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
