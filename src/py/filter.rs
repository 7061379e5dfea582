//! Binding of `core::filter`.

use super::error::{finish, Extracted, Outcome};
use super::extract::{read, Need};
use crate::core::filter::{self, Item};
use crate::core::guarded;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// `_process_compaction_events`: the filtered history, or `None` to decline.
///
/// `make_summary(event)` materializes the summary of a compaction event; it
/// is called once per surviving compaction in event order, as google-adk
/// constructs them, so id providers see the same sequence of calls.
#[pyfunction]
pub fn process_compaction_events<'py>(
    events: &Bound<'py, PyAny>,
    make_summary: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyList>>> {
    finish(run(events, make_summary))
}

fn run<'py>(
    events: &Bound<'py, PyAny>,
    make_summary: &Bound<'py, PyAny>,
) -> Extracted<Bound<'py, PyList>> {
    let py = events.py();
    let need = Need {
        timestamp: true,
        compaction: true,
        ..Need::default()
    };
    let batch = read(events, need)?;
    let views = batch.views;
    let items = py.detach(move || guarded(|| filter::process_compaction_events(&views)))?;
    let mut summaries: Vec<Option<Bound<'py, PyAny>>> = vec![None; batch.objects.len()];
    for index in filter::summaries_in_creation_order(&items) {
        summaries[index] = Some(make_summary.call1((&batch.objects[index],))?);
    }
    let mut out = Vec::with_capacity(items.len());
    for item in &items {
        out.push(match *item {
            Item::Raw(i) => &batch.objects[i],
            // Every summary index was materialized above; a miss is our bug
            // and hands the call to the reference implementation.
            Item::Summary(i) => summaries[i]
                .as_ref()
                .ok_or(Outcome::Decline("internal error"))?,
        });
    }
    Ok(PyList::new(py, out)?)
}
