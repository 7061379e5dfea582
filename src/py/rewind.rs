//! Binding of `core::rewind`.

use super::error::{finish, Extracted};
use super::extract::Need;
use super::index::load;
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
    let mut loaded = load(events, need)?;
    let views = std::mem::take(&mut loaded.views);
    let kept = py.detach(move || guarded(|| Ok(rewind::apply_rewinds(&views))))?;
    Ok(PyList::new(py, kept.iter().map(|&i| &loaded.objects[i]))?)
}
