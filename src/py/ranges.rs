//! Binding of `core::ranges`.

use super::error::{finish, Extracted};
use super::index::load::load;
use super::index::memos::ranges::ranges_again;
use super::reading::extract::Extractor;
use crate::core::event::Need;
use crate::core::guarded;
use crate::core::hash::FastMap;
use crate::core::ranges;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyList, PyTuple};
use std::sync::Mutex;

/// `_get_compaction_ranges`: `[(index, start, end), ...]` (equal floats, the
/// original objects where one is NaN), or `None` to decline.
#[pyfunction]
pub fn get_compaction_ranges<'py>(
    events: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyList>>> {
    finish(events.py(), "_get_compaction_ranges", run(events))
}

fn run<'py>(events: &Bound<'py, PyAny>) -> Extracted<Bound<'py, PyList>> {
    let py = events.py();
    let need = Need {
        compaction: true,
        ..Need::default()
    };
    let list = Extractor::list(events)?;
    let kept = match ranges_again(list)? {
        Some(kept) => kept,
        None => {
            let mut loaded = load(events, need)?;
            let views = &loaded.views;
            let kept = py.detach(|| guarded(|| Ok(ranges::compaction_ranges(views))))?;
            loaded.remember_ranges(&kept);
            kept
        }
    };
    // Made tuples are looked up, and new ones stored, with the table's lock
    // held only around that: building the list can run a collection, whose
    // finalizers could call in here again.
    let cached: Vec<Option<Py<PyTuple>>> = {
        let mut guard = TUPLES.lock().unwrap_or_else(|e| e.into_inner());
        let made = guard.get_or_insert_with(FastMap::default);
        kept.iter()
            .map(|r| made.get(&key(r)).map(|t| t.clone_ref(py)))
            .collect()
    };
    let out = PyList::empty(py);
    let mut new: Vec<(RangeKey, Py<PyTuple>)> = Vec::new();
    for (r, cached) in kept.iter().zip(cached) {
        if let Some(tuple) = cached {
            out.append(tuple.bind(py))?;
            continue;
        }
        let nan = r.start.is_nan() || r.end.is_nan();
        let (start, end) = if !nan {
            // Equal floats (same bits) are indistinguishable but by `is`.
            (
                PyFloat::new(py, r.start).into_any(),
                PyFloat::new(py, r.end).into_any(),
            )
        } else {
            // A NaN must be the very object the caller holds (the tuple
            // then compares equal to the reference's), as in google-adk.
            let compaction = list
                .get_item(r.index)?
                .getattr(intern!(py, "actions"))?
                .getattr(intern!(py, "compaction"))?;
            (
                compaction.getattr(intern!(py, "start_timestamp"))?,
                compaction.getattr(intern!(py, "end_timestamp"))?,
            )
        };
        let tuple = PyTuple::new(
            py,
            [
                r.index
                    .into_pyobject(py)
                    .unwrap_or_else(|never| match never {})
                    .into_any(),
                start,
                end,
            ],
        )?;
        out.append(&tuple)?;
        if !nan {
            new.push((key(r), tuple.unbind()));
        }
    }
    if !new.is_empty() {
        let mut guard = TUPLES.lock().unwrap_or_else(|e| e.into_inner());
        let made = guard.get_or_insert_with(FastMap::default);
        if made.len() + new.len() > MAX_TUPLES {
            // Dropping them deallocates tuples of numbers: no Python code.
            made.clear();
        }
        made.extend(new);
    }
    Ok(out)
}

fn key(r: &ranges::CompactionRange) -> RangeKey {
    (r.index, r.start.to_bits(), r.end.to_bits())
}

/// Range tuples made so far, by value: `(index, start, end)` of numbers is
/// immutable, so an equal tuple made for an earlier call (of any session)
/// is handed out again instead of building three objects per range on
/// every call. (Not for NaN bounds, which must be the caller's objects.)
static TUPLES: Mutex<Option<FastMap<RangeKey, Py<PyTuple>>>> = Mutex::new(None);

/// `(index, start bits, end bits)`.
type RangeKey = (usize, u64, u64);

/// Tuples kept at most; past that the table starts over.
const MAX_TUPLES: usize = 1 << 14;

/// Drops the made tuples (with the indexes, on `index_clear()`).
pub fn forget_tuples() {
    let taken = TUPLES.lock().unwrap_or_else(|e| e.into_inner()).take();
    // Dropped after the lock is released.
    drop(taken);
}
