//! The objects a remembered result was computed from ([`Seen`]), kept as
//! addresses and slots in [`Record`]s that results over one list share.
//! Whether a list still holds them is the index's to say (see
//! `Tracked::begins` and `Tracked::unchanged`).

use crate::core::slot_table::Slot;
use pyo3::prelude::*;
use std::sync::{Arc, Mutex, MutexGuard};

/// The addresses and slots of a list's objects as calls saw them, shared
/// by the remembered results that saw the same objects, each naming a
/// prefix of it (see [`Seen`]): the several results a model call leaves
/// over one session list keep one copy of its addresses instead of one
/// each. A result extended by objects past the record's end pushes them in
/// place (the others' prefixes are unchanged); by the very objects the
/// record holds next, it takes those; by others, it forks a record of its
/// own.
#[derive(Default)]
pub(super) struct Record {
    addrs: Vec<usize>,
    slots: Vec<Slot>,
}

impl Record {
    pub(super) fn new(addrs: Vec<usize>, slots: Vec<Slot>) -> Self {
        Record { addrs, slots }
    }

    pub(super) fn memory_bytes(&self) -> usize {
        self.addrs.capacity() * 8 + self.slots.capacity() * 4 + 64
    }

    /// Whether its entries from `from` on begin with `addrs` and `slots`.
    pub(super) fn holds_at(&self, from: usize, addrs: &[usize], slots: &[Slot]) -> bool {
        let to = from + addrs.len();
        self.addrs.len() >= to && self.addrs[from..to] == *addrs && self.slots[from..to] == *slots
    }
}

/// A [`Record`] shared by the results of one session's index (which only
/// the thread that checked the index out touches: the lock is never
/// contended).
pub(super) type Shared = Arc<Mutex<Record>>;

pub(super) fn lock(record: &Shared) -> MutexGuard<'_, Record> {
    record.lock().unwrap_or_else(|p| p.into_inner())
}

/// The objects a remembered result was computed from: the first `len`
/// addresses and slots of `record` (each bound then), with the index's
/// generation and `Tracked::deaths` when they were last known bound.
pub(crate) struct Seen {
    pub(super) record: Shared,
    len: usize,
    pub(super) generation: u64,
    pub(super) deaths: u64,
}

impl Seen {
    /// The first `len` entries of `record`, known bound at `generation`
    /// and `deaths`.
    pub(super) fn new(record: Shared, len: usize, generation: u64, deaths: u64) -> Self {
        Seen {
            record,
            len,
            generation,
            deaths,
        }
    }

    /// Its addresses and slots.
    pub(super) fn with<R>(&self, f: impl FnOnce(&[usize], &[Slot]) -> R) -> R {
        let record = lock(&self.record);
        f(&record.addrs[..self.len], &record.slots[..self.len])
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Adds objects that followed them (bound to `slots`): in place at the
    /// record's end, as they are where the record holds them next, in a
    /// record of its own otherwise.
    pub(super) fn extend(&mut self, objects: &[Bound<'_, PyAny>], slots: &[Slot]) {
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
    /// record of its own (see `Tracked::share_records`).
    pub(super) fn carry(&mut self, addrs: Vec<usize>, deaths: u64) {
        let slots = self.with(|_, slots| slots.to_vec());
        self.len = addrs.len();
        self.record = Arc::new(Mutex::new(Record { addrs, slots }));
        self.deaths = deaths;
    }
}
