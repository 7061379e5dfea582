//! The registry of session indexes: checkout and checkin, eviction, the
//! counters, and `index_clear`, `index_configure` and `index_stats`.

use super::*;

/// How the index answered, summed over all calls.
#[derive(Default, Clone, Copy)]
pub(super) struct Counters {
    pub(super) by_identity: u64,
    pub(super) by_id: u64,
    pub(super) read: u64,
    pub(super) changed: u64,
    pub(super) transient: u64,
    pub(super) fallbacks: u64,
    evictions: u64,
    pub(super) summaries_reused: u64,
    pub(super) summaries_built: u64,
    pub(super) rewinds_reused: u64,
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
    max_sessions: usize,
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
pub(super) fn registry() -> std::sync::MutexGuard<'static, Registry> {
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

pub(super) fn checkout(key: &str) -> Option<Tracked> {
    let mut reg = registry();
    if !reg.enabled {
        return None;
    }
    Some(reg.sessions.remove(key).unwrap_or_else(Tracked::new))
}

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

/// Drops every index.
#[pyfunction]
pub fn index_clear() {
    let mut reg = registry();
    reg.sessions.clear();
    drop(reg);
    crate::py::ranges::forget_tuples();
    crate::py::rows::clear();
}

/// Turns the index on or off and sets how many sessions it keeps and how
/// many bytes of stored rows the row memo keeps; omitted arguments keep
/// their value. Turning it off drops every index.
#[pyfunction]
#[pyo3(signature = (*, enabled = None, max_sessions = None, max_row_bytes = None))]
pub fn index_configure(
    enabled: Option<bool>,
    max_sessions: Option<usize>,
    max_row_bytes: Option<usize>,
) {
    if let Some(budget) = max_row_bytes {
        crate::py::rows::configure(budget);
    }
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
    let (by_reason, by_function) = crate::py::error::decline_totals(false);
    let learned = crate::py::classes::learned_verdicts(py);
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
    out.set_item("scratch_bytes", crate::py::scratch::pooled_bytes())?;
    crate::py::rows::stats(&out)?;
    out.set_item("prefetch", crate::py::prefetch::enabled(py))?;
    out.set_item("direct_fields", crate::py::fields::usable(py))?;
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
