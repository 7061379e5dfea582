//! Binding of `core::rewind`.

use super::error::{finish, Extracted};
use super::extract::Extractor;
use super::extract::Need;
use super::index::{load, rewinds_again};
use crate::core::guarded;
use crate::core::rewind;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// `_apply_rewinds`: the events that survive every rewind, or `None` to
/// decline.
#[pyfunction]
pub fn apply_rewinds<'py>(events: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyList>>> {
    finish(run(events))
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
        // Referenced before the new list is made (making it may run a
        // collection, whose finalizers could change `list`).
        let items: Vec<Bound<'py, PyAny>> = match super::prefetch::item_addresses(list) {
            Some(addrs) => kept
                .iter()
                .map(|&i| {
                    let ptr = addrs[i as usize] as *mut pyo3::ffi::PyObject;
                    // SAFETY: a live item of `list` (no Python code runs
                    // while the array is read), owned here.
                    unsafe { Bound::from_borrowed_ptr(py, ptr) }
                })
                .collect(),
            None => kept
                .iter()
                .map(|&i| list.get_item(i as usize))
                .collect::<PyResult<_>>()?,
        };
        return Ok(PyList::new(py, items)?);
    }
    let mut loaded = load(events, need)?;
    let views = std::mem::take(&mut loaded.views);
    let kept = py.detach(move || guarded(|| Ok(rewind::apply_rewinds(&views))))?;
    loaded.remember_rewinds(&kept);
    Ok(PyList::new(py, kept.iter().map(|&i| &loaded.objects[i]))?)
}
