//! Binding of `core::ranges`.

use super::error::{finish, Extracted};
use super::extract::{Extractor, Need};
use super::index::{load, ranges_again};
use crate::core::guarded;
use crate::core::ranges;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyList, PyTuple};

/// `_get_compaction_ranges`: `[(index, start, end), ...]` (equal floats, the
/// original objects where one is NaN), or `None` to decline.
#[pyfunction]
pub fn get_compaction_ranges<'py>(
    events: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyList>>> {
    finish(run(events))
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
    let out = PyList::empty(py);
    for r in kept {
        let (start, end) = if !r.start.is_nan() && !r.end.is_nan() {
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
        out.append(PyTuple::new(
            py,
            [
                r.index
                    .into_pyobject(py)
                    .unwrap_or_else(|never| match never {})
                    .into_any(),
                start,
                end,
            ],
        )?)?;
    }
    Ok(out)
}
