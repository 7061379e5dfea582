//! Binding of `core::analysis`: many sessions at once.

use super::reading::extract::Extractor;
use crate::core::analysis::{self, Analysis};
use crate::core::event::Need;
use crate::core::filter::Item;
use crate::core::window::SlidingWindow;
use crate::core::{guarded, stored, EventView, Sym};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

/// The decisions google-adk would take on each of `sessions` (a list of
/// event lists), computed in parallel on rayon's pool unless `parallel` is
/// false. Reading the events needs the interpreter and is serial; the
/// analyses run with it released. A session that cannot be read exactly
/// gets `{"declined": reason}` instead of an analysis.
#[pyfunction]
#[pyo3(signature = (sessions, compaction_interval = None, overlap_size = 0, parallel = true))]
pub fn analyze_sessions<'py>(
    py: Python<'py>,
    sessions: &Bound<'py, PyList>,
    compaction_interval: Option<i64>,
    overlap_size: i64,
    parallel: bool,
) -> PyResult<Bound<'py, PyList>> {
    let cfg = window_config(compaction_interval, overlap_size)?;
    let mut read: Vec<Read> = Vec::new();
    for item in sessions.iter() {
        read.push(extract(&item)?);
    }
    let ok: Vec<(Vec<EventView>, Vec<Sym>)> = read
        .iter()
        .filter_map(|r| r.as_ref().ok().cloned())
        .collect();
    let results = py
        .detach(|| guarded(|| Ok(analysis::analyze_all(&ok, cfg, parallel))))
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
    let mut results = results.into_iter();
    let out = PyList::empty(py);
    for r in &read {
        match r {
            Ok(_) => {
                let a = results
                    .next()
                    .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("lost a result"))?;
                out.append(to_python(py, &a)?)?;
            }
            Err(reason) => {
                let d = PyDict::new(py);
                d.set_item("declined", *reason)?;
                out.append(d)?;
            }
        }
    }
    Ok(out)
}

/// [`analyze_sessions`] over sessions as stores keep them: each a list of
/// its events' JSON documents (`str` or `bytes`, what
/// `Event.model_dump_json(exclude_none=True)` writes), parsed in Rust
/// (`core::stored`) with the interpreter released, in parallel across
/// sessions unless `parallel` is false. A session with an event that cannot
/// be read gets `{"declined": "event N: why"}`.
#[pyfunction]
#[pyo3(signature = (sessions, compaction_interval = None, overlap_size = 0, parallel = true))]
pub fn analyze_stored<'py>(
    py: Python<'py>,
    sessions: &Bound<'py, PyList>,
    compaction_interval: Option<i64>,
    overlap_size: i64,
    parallel: bool,
) -> PyResult<Bound<'py, PyList>> {
    let cfg = window_config(compaction_interval, overlap_size)?;
    let results = over_stored(py, sessions, parallel, |s| {
        analysis::analyze(&s.views, &s.ids, cfg)
    })?;
    let out = PyList::empty(py);
    for r in results {
        match r {
            Ok(a) => out.append(to_python(py, &a)?)?,
            Err(reason) => {
                let d = PyDict::new(py);
                d.set_item("declined", reason)?;
                out.append(d)?;
            }
        }
    }
    Ok(out)
}

/// `per` over each of `sessions` (lists of stored events' JSON, `str` or
/// `bytes`) read by `core::stored`, with the interpreter released and on
/// rayon's pool unless not `parallel`; in order, a session that cannot be
/// read as `Err("event N: why")`.
pub fn over_stored<'py, R: Send>(
    py: Python<'py>,
    sessions: &Bound<'py, PyList>,
    parallel: bool,
    per: impl Fn(stored::StoredSession) -> R + Sync,
) -> PyResult<Vec<Result<R, String>>> {
    let held: Vec<Vec<Bound<'py, PyAny>>> = sessions
        .iter()
        .map(|s| s.try_iter()?.collect::<PyResult<Vec<_>>>())
        .collect::<PyResult<_>>()?;
    let docs: Vec<Vec<&[u8]>> = held
        .iter()
        .map(|events| events.iter().map(json_bytes).collect::<PyResult<_>>())
        .collect::<PyResult<_>>()?;
    py.detach(|| {
        guarded(|| {
            let one = |events: &Vec<&[u8]>| -> Result<R, String> {
                stored::StoredSession::read(events)
                    .map(&per)
                    .map_err(|(i, e)| format!("event {i}: {e}"))
            };
            Ok(if parallel {
                use rayon::prelude::*;
                docs.par_iter().map(one).collect::<Vec<_>>()
            } else {
                docs.iter().map(one).collect::<Vec<_>>()
            })
        })
    })
    .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))
}

/// The bytes of a stored event's JSON: a `str` (its UTF-8) or `bytes`.
pub fn json_bytes<'a>(item: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
    if let Ok(s) = item.cast::<PyString>() {
        return Ok(s.to_str()?.as_bytes());
    }
    if let Ok(b) = item.cast::<PyBytes>() {
        return Ok(b.as_bytes());
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "a stored event is JSON as str or bytes, not {}",
        item.get_type().name()?
    )))
}

/// One session's views and id arena, or why it cannot be read exactly.
type Read = Result<(Vec<EventView>, Vec<Sym>), &'static str>;

fn extract(item: &Bound<'_, PyAny>) -> PyResult<Read> {
    let list = match Extractor::list(item) {
        Ok(list) => list,
        Err(super::error::Outcome::Decline(reason)) => return Ok(Err(reason)),
        Err(super::error::Outcome::Error(err)) => return Err(err),
    };
    let mut ex = Extractor::new(item.py())?;
    match ex.batch(list, Need::ALL) {
        Ok(batch) => Ok(Ok((batch.views.into_vec(), std::mem::take(&mut ex.ids)))),
        Err(super::error::Outcome::Decline(reason)) => Ok(Err(reason)),
        Err(super::error::Outcome::Error(err)) => Err(err),
    }
}

/// The sliding window asked for, checked.
pub fn window_config(interval: Option<i64>, overlap_size: i64) -> PyResult<Option<SlidingWindow>> {
    let Some(interval) = interval else {
        return Ok(None);
    };
    let (Ok(interval @ 1..), Ok(overlap)) =
        (usize::try_from(interval), usize::try_from(overlap_size))
    else {
        return Err(PyValueError::new_err(format!(
            "compaction_interval must be >= 1 and overlap_size >= 0, \
             not {interval} and {overlap_size}"
        )));
    };
    Ok(Some(SlidingWindow { interval, overlap }))
}

fn to_python<'py>(py: Python<'py>, a: &Analysis) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("live", PyList::new(py, &a.live)?)?;
    let ranges = PyList::empty(py);
    for r in &a.ranges {
        ranges.append(PyTuple::new(
            py,
            [
                r.index.into_pyobject(py)?.into_any(),
                r.start.into_pyobject(py)?.into_any(),
                r.end.into_pyobject(py)?.into_any(),
            ],
        )?)?;
    }
    d.set_item("ranges", ranges)?;
    match &a.prompt {
        Ok(items) => {
            let prompt = PyList::empty(py);
            for item in items {
                match *item {
                    Item::Raw(i) => prompt.append(i)?,
                    Item::Summary(i) => prompt.append(("summary", i))?,
                }
            }
            d.set_item("prompt", prompt)?;
        }
        // google-adk's own sort order is undefined there: say so.
        Err(e) => d.set_item("prompt_declined", e.to_string())?,
    }
    match &a.window {
        Some(w) => d.set_item("window", PyList::new(py, w)?)?,
        None => d.set_item("window", py.None())?,
    }
    Ok(d)
}
