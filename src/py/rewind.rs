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
        let items = kept.iter().map(|&i| list.get_item(i as usize));
        return Ok(PyList::new(py, items.collect::<PyResult<Vec<_>>>()?)?);
    }
    let mut loaded = load(events, need)?;
    let views = std::mem::take(&mut loaded.views);
    let kept = py.detach(move || guarded(|| Ok(rewind::apply_rewinds(&views))))?;
    loaded.remember_rewinds(&kept);
    Ok(PyList::new(py, kept.iter().map(|&i| &loaded.objects[i]))?)
}
