//! Exact-mode coverage records crossing the boundary (`core::exact`).
//!
//! A record lives in a compaction event's `custom_metadata`, a JSON-shaped
//! dict: it crosses as config-shaped data, through pythonize, never on the
//! per-event hot path.

use crate::core::exact::{ClockSkew, Key, Record, RecordError};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBool;

/// A `clock_skew` argument: seconds, a real number (not a bool), finite and
/// not negative (`TypeError` or `ValueError` otherwise).
pub struct Skew(pub ClockSkew);

impl<'a, 'py> FromPyObject<'a, 'py> for Skew {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_instance_of::<PyBool>() {
            return Err(PyTypeError::new_err(
                "clock_skew must be a number of seconds, not a bool",
            ));
        }
        let seconds: f64 = obj.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "clock_skew must be a number of seconds, not {}",
                obj.get_type()
                    .name()
                    .map_or_else(|_| "?".to_owned(), |n| n.to_string())
            ))
        })?;
        ClockSkew::new(seconds).map(Skew).ok_or_else(|| {
            PyValueError::new_err(format!(
                "clock_skew must be finite and not negative, not {seconds}"
            ))
        })
    }
}

/// Validates a record read from `custom_metadata` against its compaction's
/// own bounds and returns it as a dict (`v`, `start`, `end`, `holes`), or
/// raises `ValueError` saying why it is not used.
#[pyfunction]
pub fn coverage_record<'py>(
    value: &Bound<'py, PyAny>,
    start: f64,
    end: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let json: serde_json::Value = pythonize::depythonize(value)
        .map_err(|e| PyErr::from(RecordError::Malformed(e.to_string())))?;
    let record = Record::from_value(json, (start, end))?;
    to_python(value.py(), &record)
}

/// The record of a compaction over `[start, end]` whose holes are the
/// events `(invocation_id, timestamp)`, as a dict to store.
#[pyfunction]
pub fn new_coverage_record(
    py: Python<'_>,
    start: f64,
    end: f64,
    holes: Vec<(String, f64)>,
) -> PyResult<Bound<'_, PyAny>> {
    let keys = holes
        .iter()
        .map(|(invocation, timestamp)| {
            Key::of(invocation, *timestamp).ok_or_else(|| {
                PyValueError::new_err(format!("a hole's timestamp {timestamp} has no key"))
            })
        })
        .collect::<PyResult<Vec<Key>>>()?;
    to_python(py, &Record::new(start, end, keys, (start, end))?)
}

/// A record as the dict stored in `custom_metadata`.
pub(super) fn to_python<'py>(py: Python<'py>, record: &Record) -> PyResult<Bound<'py, PyAny>> {
    pythonize::pythonize(py, record)
        .map_err(|e| PyValueError::new_err(format!("coverage record: {e}")))
}
