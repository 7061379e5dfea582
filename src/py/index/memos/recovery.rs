//! The remembered call recovery (`_recover_compacted_function_calls`), one
//! memo or the other: a recovery that re-injected nothing ([`Quiet`]),
//! extended over new events by `core::recover::extend_quiet`, or one that
//! re-injected something ([`Reinjected`]), answered again on the very same
//! lists only.

use super::filter::SUMMARY_BIT;
use super::{Carry, Memo, Value};
use crate::core::event::Need;
use crate::core::recover::{extend_quiet, Calls, Recovered};
use crate::core::slot_table::Slot;
use crate::py::error::Extracted;
use crate::py::index::load::{memo_index, resolve_tail, Loaded};
use crate::py::index::objects::{list_item, starts_with};
use crate::py::index::registry::remembered;
use crate::py::index::summaries::dict_state;
use crate::py::index::tracked::Tracked;
use crate::py::reading::scratch::Views;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// The last recovery that re-injected nothing, over its source (the
/// memo's objects): the filtered list's items (a source position, or a
/// slot with the top bit set for a cached summary whose content holds
/// neither calls nor responses), and the state of the source's calls (see
/// [`Calls`]).
pub(crate) struct Quiet {
    /// The largest of the source's slots: a slot above it is an event the
    /// source did not hold (slots are numbered in the order events are
    /// stored).
    max_slot: Slot,
    events: Vec<u32>,
    calls: Calls,
}

impl Value for Quiet {
    const CARRY: Carry = Carry::Positional;

    fn memory_bytes(&self) -> usize {
        self.events.capacity() * 4 + self.calls.memory_bytes() + 64
    }
}

/// The last recovery that re-injected something, over its source (the
/// memo's objects): the filtered list's items (their addresses; those not
/// in the source held, so that an address names the same object, with
/// their instance dicts' addresses and version tags: they are summaries,
/// mostly, which are handed out and may be edited), and the result.
pub(crate) struct Reinjected {
    events: Vec<usize>,
    held: Vec<(Py<PyAny>, (usize, u64))>,
    result: Vec<Recovered>,
}

impl Value for Reinjected {
    const CARRY: Carry = Carry::No;

    fn memory_bytes(&self) -> usize {
        self.events.capacity() * 8
            + self.held.capacity() * 24
            + self.result.capacity() * std::mem::size_of::<Recovered>()
            + 64
    }
}

/// Forgets both memos: a call re-injects or it does not.
fn forget(t: &mut Tracked) {
    t.forget_memo::<Memo<Quiet>>();
    t.forget_memo::<Memo<Reinjected>>();
}

impl<'py> Loaded<'py> {
    /// Remembers a recovery on this call's list (the source) that
    /// re-injected nothing, for [`recover_again`]: `events` says what each
    /// item of the filtered list was (see `Quiet::events`). Not remembered
    /// when a source item is unbound or a present response's latest call
    /// is absent.
    pub fn remember_recovery(&mut self, events: Vec<u32>) {
        let Some(t) = memo_index(&mut self.checkout, &self.at) else {
            return;
        };
        forget(t);
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
        if let Some(seen) = t.seen_of(&self.objects, &self.slots) {
            let max_slot = self.slots.iter().copied().max().unwrap_or(0);
            t.keep_memo(Box::new(Memo {
                seen,
                value: Quiet {
                    max_slot,
                    events,
                    calls,
                },
            }));
        }
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
        forget(t);
        let Some(seen) = t.seen_of(&self.objects, &self.slots) else {
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
        t.keep_memo(Box::new(Memo {
            seen,
            value: Reinjected {
                events: events.iter().map(|o| o.as_ptr() as usize).collect(),
                held,
                result,
            },
        }));
    }
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
        |t| same(t, events, source),
        |c| c.recoveries_reused += 1,
    )
}

fn same(
    t: &mut Tracked,
    events: &Bound<'_, PyList>,
    source: &Bound<'_, PyList>,
) -> Option<Vec<Recovered>> {
    let mut memo = t.take_memo::<Memo<Reinjected>>()?;
    let py = events.py();
    let r = &memo.value;
    let same = r
        .held
        .iter()
        .all(|(o, state)| dict_state(o.bind(py)) == Some(*state))
        && source.len() == memo.seen.len()
        && events.len() == r.events.len()
        && starts_with(events, &r.events)
        && t.begins(&mut memo.seen, source);
    let result = same.then(|| memo.value.result.clone());
    t.keep_memo(memo);
    result
}

/// Call recovery on `events` (the filtered list) and `source` from the
/// session's last one that re-injected nothing: true when it again
/// re-injects nothing, so `events` is the answer. That holds when `source`
/// holds the last call's source objects (still bound to the same slots,
/// over an unchanged index) followed by new events (resolved as any call
/// resolves its list), `events` holds the last filtered list (the same
/// source objects, and the cached summaries of the same slots, still
/// unchanged and holding neither calls nor responses) followed by some of
/// the new events, and [`extend_quiet`] says so.
pub fn recover_again(events: &Bound<'_, PyList>, source: &Bound<'_, PyList>) -> Extracted<bool> {
    let again = remembered(
        source,
        |t| extend(t, events, source).then_some(()),
        |c| c.recoveries_reused += 1,
    )?;
    Ok(again.is_some())
}

fn extend(t: &mut Tracked, events: &Bound<'_, PyList>, source: &Bound<'_, PyList>) -> bool {
    let Some(mut memo) = t.take_memo::<Memo<Quiet>>() else {
        return false;
    };
    let py = events.py();
    let (known, listed) = (memo.seen.len(), memo.value.events.len());
    if events.len() < listed
        || source.len() >= SUMMARY_BIT as usize
        || !t.begins(&mut memo.seen, source)
    {
        return false;
    }
    let listed_same = memo.seen.with(|addrs, _| {
        memo.value.events.iter().enumerate().all(|(i, &entry)| {
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
    let q = &mut memo.value;
    if slots.iter().any(|&s| s <= q.max_slot) {
        return false;
    }
    // The filtered list's new items, by address (the views' identities).
    let new_items = (listed..events.len()).map(|i| list_item(events, i) as u64);
    let Some(present) = extend_quiet(&mut q.calls, &views, new_items, t.core.arena()) else {
        return false;
    };
    q.max_slot = slots.iter().copied().fold(q.max_slot, Slot::max);
    q.events.extend(
        present
            .iter()
            .enumerate()
            .filter(|(_, p)| **p)
            .map(|(k, _)| (known + k) as u32),
    );
    memo.seen.extend(&objects, &slots);
    t.keep_memo(memo);
    true
}
