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
//!   `copies::index_copied` (called from the `Session.__deepcopy__` that
//!   `install()` wraps): it equals its source in every field when made. The
//!   copies are held strongly by a `objects::CopyHolder` until the session copy
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

//!
//! Files, by what they do:
//! - `objects`: objects by address, weak references and their callbacks;
//! - `seen`: the objects a remembered result was computed from;
//! - `summaries`: the cached summary Events;
//! - `tracked`: one session's index ([`Tracked`]);
//! - `registry`: the sessions' indexes, checkout and checkin, counters;
//! - `load`: a call's list resolved against its index (`Loaded`);
//! - `compactions`: what a call asks about its compaction events;
//! - `copies`: deep copies bound to their sources (`index_copied`);
//! - `memos`: one remembered result per operation.
//!
//! This file holds the index's Python face: `index_clear`,
//! `index_configure` and `index_stats`.

pub mod compactions;
pub mod copies;
pub mod load;
pub mod memos;
pub mod objects;
pub mod registry;
pub mod seen;
pub mod summaries;
pub mod tracked;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use registry::{evict, registry};
use tracked::Tracked;

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
    let learned = crate::py::reading::classes::learned_verdicts(py);
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
    out.set_item("scratch_bytes", crate::py::reading::scratch::pooled_bytes())?;
    crate::py::rows::stats(&out)?;
    out.set_item("prefetch", crate::py::reading::prefetch::enabled(py))?;
    out.set_item("direct_fields", crate::py::reading::fields::usable(py))?;
    out.set_item("dict_tags", crate::py::reading::version_tag::usable(py))?;
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
    out.set_item("lean_reused", c.lean_reused)?;
    out.set_item("redelivery_reused", c.redelivery_reused)?;
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
