//! Binding of `core::recover`.

use super::error::{finish, Extracted};
use super::extract::{Extractor, Need};
use super::index::load;
use crate::core::guarded;
use crate::core::hash::FastMap;
use crate::core::recover::{self, Recovered};
use pyo3::prelude::*;
use pyo3::types::PyList;

/// `_recover_compacted_function_calls`: `events` itself when nothing is
/// re-injected, a new list otherwise, or `None` to decline.
#[pyfunction]
pub fn recover_compacted_function_calls<'py>(
    events: &Bound<'py, PyAny>,
    source_events: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    finish(run(events, source_events))
}

fn run<'py>(
    events: &Bound<'py, PyAny>,
    source_events: &Bound<'py, PyAny>,
) -> Extracted<Bound<'py, PyAny>> {
    let py = events.py();
    let list = Extractor::list(events)?;
    let need = Need {
        parts: true,
        ..Need::default()
    };
    let mut source = load(source_events, need)?;
    // The filtered list mostly holds the very objects of the source list:
    // reuse their views instead of reading them again.
    let by_ident: FastMap<u64, usize> = source
        .views
        .iter()
        .enumerate()
        .map(|(j, v)| (v.ident, j))
        .collect();
    let mut objects = Vec::with_capacity(list.len());
    let mut views = Vec::with_capacity(list.len());
    for obj in list.iter() {
        let view = match by_ident.get(&(obj.as_ptr() as u64)) {
            Some(&j) => source.views[j],
            None => source.ex.event(&obj, need)?,
        };
        views.push(view);
        objects.push(obj);
    }
    let ids = &source.ex.ids;
    let source_views = &source.views;
    let result = py.detach(|| {
        guarded(|| recover::recover_compacted_function_calls(&views, source_views, ids))
    })?;
    let Some(order) = result else {
        return Ok(events.clone());
    };
    let out = order.iter().map(|r| match *r {
        Recovered::Kept(i) => &objects[i],
        Recovered::Injected(j) => &source.objects[j],
    });
    Ok(PyList::new(py, out)?.into_any())
}
