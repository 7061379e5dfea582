//! Binding of `core::rewind`.

use super::error::{finish, Extracted, Outcome};
use super::index::load::load;
use super::index::memos::rewinds::rewinds_again;
use super::reading::extract::Extractor;
use crate::core::event::Need;
use crate::core::guarded;
use crate::core::rewind;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// `_apply_rewinds`: the events that survive every rewind, or `None` to
/// decline.
#[pyfunction]
pub fn apply_rewinds<'py>(events: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyList>>> {
    finish(events.py(), "_apply_rewinds", run(events))
}

fn run<'py>(events: &Bound<'py, PyAny>) -> Extracted<Bound<'py, PyList>> {
    let py = events.py();
    // Invocation ids are read in the same pass: the event's dict is in cache
    // already, and the interner answers repeated id objects by address.
    let need = Need {
        rewind: true,
        invocation: true,
        ..Need::default()
    };
    let list = Extractor::list(events)?;
    if let Some(kept) = rewinds_again(list)? {
        // Everything kept (no rewind in the session): a copy of the list.
        if kept.len() == list.len() {
            return Ok(list
                .get_slice(0, list.len())
                .cast_into_exact::<PyList>()
                .map_err(PyErr::from)?);
        }
        return kept_items(list, &kept);
    }
    let mut loaded = load(events, need)?;
    let views = std::mem::take(&mut loaded.views);
    let kept = py.detach(move || guarded(|| Ok(rewind::apply_rewinds(&views))))?;
    loaded.remember_rewinds(&kept);
    Ok(PyList::new(py, kept.iter().map(|&i| &loaded.objects[i]))?)
}

/// A new list of `list`'s items at `kept` (positions below its length).
fn kept_items<'py>(list: &Bound<'py, PyList>, kept: &[u32]) -> Extracted<Bound<'py, PyList>> {
    let py = list.py();
    let Ok(len) = pyo3::ffi::Py_ssize_t::try_from(kept.len()) else {
        return Err(Outcome::Decline("too many events"));
    };
    // SAFETY: a new list of `len` empty slots, owned here (NULL with an
    // exception set on failure).
    let out = unsafe { Bound::from_owned_ptr_or_err(py, pyo3::ffi::PyList_New(len))? }
        .cast_into_exact::<PyList>()
        .map_err(PyErr::from)?;
    // Read after the new list exists: making it may have run a collection,
    // whose finalizers could have changed `list`.
    let n = list.len();
    if kept.iter().any(|&i| i as usize >= n) {
        return Err(Outcome::Decline("list changed"));
    }
    match super::reading::prefetch::item_addresses(list) {
        Some(addrs) => {
            // Referencing writes each item's header: their loads are
            // started some items ahead.
            const AHEAD: usize = 16;
            for (j, &i) in kept.iter().enumerate() {
                if let Some(&ahead) = kept.get(j + AHEAD) {
                    super::reading::prefetch::prefetch(
                        addrs[ahead as usize] as *const pyo3::ffi::PyObject,
                    );
                }
                let item = addrs[i as usize] as *mut pyo3::ffi::PyObject;
                // SAFETY: a live item of `list` (no Python code runs in
                // this loop); the new list takes the reference made here
                // into its empty slot `j < len`.
                unsafe {
                    pyo3::ffi::Py_IncRef(item);
                    pyo3::ffi::PyList_SetItem(out.as_ptr(), j as pyo3::ffi::Py_ssize_t, item);
                }
            }
        }
        None => {
            for (j, &i) in kept.iter().enumerate() {
                out.set_item(j, list.get_item(i as usize)?)?;
            }
        }
    }
    Ok(out)
}
