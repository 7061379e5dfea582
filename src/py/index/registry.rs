//! The registry of session indexes: a session's key, checkout and checkin,
//! eviction, and the counters of how calls were answered. (`index_clear`,
//! `index_configure` and `index_stats` are the index's Python face, in
//! `index`.)

use super::objects::event_id;
use super::tracked::Tracked;
use crate::core::hash::FastMap;
use crate::py::error::Extracted;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::sync::{Mutex, MutexGuard};

/// How the index answered, summed over all calls.
#[derive(Default, Clone, Copy)]
pub(super) struct Counters {
    pub(super) by_identity: u64,
    pub(super) by_id: u64,
    pub(super) read: u64,
    pub(super) changed: u64,
    pub(super) transient: u64,
    pub(super) fallbacks: u64,
    pub(super) evictions: u64,
    pub(super) summaries_reused: u64,
    pub(super) summaries_built: u64,
    pub(super) rewinds_reused: u64,
    /// Lean decisions answered from the last one grown by new events.
    pub(super) lean_reused: u64,
    /// Re-delivery tests answered from the stored list's remembered ids.
    pub(super) redelivery_reused: u64,
    pub(super) ranges_reused: u64,
    pub(super) filters_reused: u64,
    pub(super) recoveries_reused: u64,
    pub(super) selections_reused: u64,
    pub(super) exact_reused: u64,
    pub(super) exact_extended: u64,
    pub(super) completed: u64,
    pub(super) copied: u64,
    pub(super) copy_nanos: u64,
    pub(super) direct: u64,
}

pub(super) struct Registry {
    pub(super) sessions: FastMap<Box<str>, Tracked>,
    clock: u64,
    pub(super) max_sessions: usize,
    pub(super) enabled: bool,
    pub(super) counters: Counters,
}

pub(super) static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
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
        lean_reused: 0,
        redelivery_reused: 0,
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
pub(super) fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// The session's index, when there is one.
pub(super) fn checkout_existing(key: &str) -> Option<Tracked> {
    let mut reg = registry();
    if !reg.enabled {
        return None;
    }
    reg.sessions.remove(key)
}

/// The session's index, a new one when there is none.
pub(super) fn checkout(key: &str) -> Option<Tracked> {
    let mut reg = registry();
    if !reg.enabled {
        return None;
    }
    Some(reg.sessions.remove(key).unwrap_or_else(Tracked::new))
}

/// Returns the session's index to the registry.
pub(super) fn checkin(key: Box<str>, mut tracked: Tracked) {
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

/// Drops the least recently used indexes beyond `max_sessions`.
pub(super) fn evict(reg: &mut Registry) {
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
    pub(super) fn add(&mut self, c: &Counters) {
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
        self.lean_reused += c.lean_reused;
        self.redelivery_reused += c.redelivery_reused;
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

/// The `id` of the list's first event, when it is a plain `str` of an
/// exact `Event`; `None` leaves the call to the direct path.
pub(super) fn session_key(list: &Bound<'_, PyList>) -> Extracted<Option<Box<str>>> {
    if list.is_empty() || !registry().enabled {
        return Ok(None);
    }
    let first = list.get_item(0)?;
    let Some(id) = event_id(&first)? else {
        return Ok(None);
    };
    Ok(id.to_str().ok().map(Into::into))
}

/// What `answer` makes of the index of `list`'s session (checked out for
/// it), when there is one and it answers; `count` notes that it did.
pub(super) fn remembered<T>(
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
