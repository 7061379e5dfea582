//! Binding of `core::ranges`.

use super::error::{finish, Extracted};
use super::extract::Need;
use super::index::load;
use crate::core::guarded;
use crate::core::ranges;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

/// `_get_compaction_ranges`: `[(index, start, end), ...]` with the original
/// float objects, or `None` to decline.
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
    let mut loaded = load(events, need)?;
    let views = std::mem::take(&mut loaded.views);
    let kept = py.detach(move || guarded(|| Ok(ranges::compaction_ranges(&views))))?;
    let out = PyList::empty(py);
    for r in kept {
        // Hand back google-adk's own float objects (a NaN is then the same
        // object the caller holds, as in the reference).
        let compaction = loaded.objects[r.index]
            .getattr(intern!(py, "actions"))?
            .getattr(intern!(py, "compaction"))?;
        let start = compaction.getattr(intern!(py, "start_timestamp"))?;
        let end = compaction.getattr(intern!(py, "end_timestamp"))?;
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
