//! Binding of `core::ranges`.

use super::error::{finish, Extracted};
use super::extract::Need;
use super::index::load;
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
    let loaded = load(events, need)?;
    let views = &loaded.views;
    let kept = py.detach(|| guarded(|| Ok(ranges::compaction_ranges(views))))?;
    let out = PyList::empty(py);
    for r in kept {
        let bounds = loaded.views[r.index]
            .compaction
            .and_then(|c| c.start.zip(c.end));
        let (start, end) = match bounds {
            // Equal floats (same bits) are indistinguishable but by `is`.
            Some((start, end)) if !start.is_nan() && !end.is_nan() => (
                PyFloat::new(py, start).into_any(),
                PyFloat::new(py, end).into_any(),
            ),
            // A NaN must be the very object the caller holds (the tuple
            // then compares equal to the reference's), as in google-adk.
            _ => {
                let compaction = loaded.objects[r.index]
                    .getattr(intern!(py, "actions"))?
                    .getattr(intern!(py, "compaction"))?;
                (
                    compaction.getattr(intern!(py, "start_timestamp"))?,
                    compaction.getattr(intern!(py, "end_timestamp"))?,
                )
            }
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
