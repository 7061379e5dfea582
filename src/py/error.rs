//! The one place where core errors and extraction refusals meet Python.

use crate::core::CoreError;
use pyo3::prelude::*;
use std::cell::RefCell;
use std::collections::BTreeMap;

thread_local! {
    // Declines by reason on this thread: lets tests and users see that the
    // Rust path really ran (a path that always declined would still pass
    // every parity test, by falling back).
    static DECLINES: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
}

/// How often each binding declined on the calling thread, by reason; with
/// `reset`, the counters start again from zero.
#[pyfunction]
#[pyo3(signature = (reset = false))]
pub fn decline_counts(reset: bool) -> BTreeMap<&'static str, u64> {
    DECLINES.with_borrow_mut(|d| if reset { std::mem::take(d) } else { d.clone() })
}

/// Why a binding did not produce a result.
#[derive(Debug)]
pub enum Outcome {
    /// The input is outside what the Rust path reproduces exactly (a NaN
    /// ordering key, an object that is not a plain google-adk model, a
    /// non-`float` timestamp, a `str` subclass, ...). The binding returns
    /// `None` and the Python wrapper runs google-adk's own function, which
    /// gives the reference result or raises the reference exception.
    Decline(&'static str),
    /// A genuine Python error (an import failing, a summary constructor raising).
    Error(PyErr),
}

impl From<PyErr> for Outcome {
    fn from(err: PyErr) -> Self {
        Outcome::Error(err)
    }
}

impl From<CoreError> for Outcome {
    fn from(err: CoreError) -> Self {
        match err {
            CoreError::UnorderedTimestamp { .. } => Outcome::Decline("NaN ordering key"),
            // A bug of ours must not cost the caller a correct answer: the
            // reference implementation takes over, and the count shows it.
            CoreError::Internal(_) => Outcome::Decline("internal error"),
        }
    }
}

/// Result of an extraction or binding step.
pub type Extracted<T> = Result<T, Outcome>;

/// Turns an outcome into what the `#[pyfunction]` returns: `Some(value)`,
/// `None` for a decline, or the raised error.
pub fn finish<T>(result: Extracted<T>) -> PyResult<Option<T>> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(Outcome::Decline(reason)) => {
            DECLINES.with_borrow_mut(|d| *d.entry(reason).or_insert(0) += 1);
            Ok(None)
        }
        Err(Outcome::Error(err)) => Err(err),
    }
}
