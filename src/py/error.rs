//! The one place where core errors and extraction refusals meet Python.

use crate::core::exact::RecordError;
use crate::core::CoreError;
use pyo3::prelude::*;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Mutex;

thread_local! {
    // Declines by reason on this thread: lets tests and users see that the
    // Rust path really ran (a path that always declined would still pass
    // every parity test, by falling back).
    static DECLINES: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
}

/// Declines of the whole process: by reason, and by the google-adk
/// function that ran in Rust's place.
#[derive(Default)]
struct Totals {
    by_reason: BTreeMap<&'static str, u64>,
    by_function: BTreeMap<&'static str, u64>,
}

static TOTALS: Mutex<Totals> = Mutex::new(Totals {
    by_reason: BTreeMap::new(),
    by_function: BTreeMap::new(),
});

/// How often each binding declined on the calling thread, by reason; with
/// `reset`, the counters start again from zero.
#[pyfunction]
#[pyo3(signature = (reset = false))]
pub fn decline_counts(reset: bool) -> BTreeMap<&'static str, u64> {
    DECLINES.with_borrow_mut(|d| if reset { std::mem::take(d) } else { d.clone() })
}

/// Declines of the whole process, all threads: `(by reason, by replaced
/// function)`. With `reset`, the counts start again from zero and each
/// reason is warned about again when it next occurs.
#[pyfunction]
#[pyo3(signature = (reset = false))]
pub fn decline_totals(reset: bool) -> (BTreeMap<&'static str, u64>, BTreeMap<&'static str, u64>) {
    let Ok(mut t) = TOTALS.lock() else {
        return Default::default();
    };
    if reset {
        let t = std::mem::take(&mut *t);
        (t.by_reason, t.by_function)
    } else {
        (t.by_reason.clone(), t.by_function.clone())
    }
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

impl From<RecordError> for PyErr {
    /// A record that is not used is a `ValueError` (the caller reads its
    /// compaction as an interval and warns).
    fn from(err: RecordError) -> Self {
        pyo3::exceptions::PyValueError::new_err(err.to_string())
    }
}

/// Result of an extraction or binding step.
pub type Extracted<T> = Result<T, Outcome>;

/// Turns an outcome into what the `#[pyfunction]` returns: `Some(value)`,
/// `None` for a decline, or the raised error. A decline is counted (per
/// thread and per process), warned about once per reason per process, and
/// an unknown class it met is judged for the next calls; `function` names
/// the google-adk function whose own code then runs.
pub fn finish<T>(
    py: Python<'_>,
    function: &'static str,
    result: Extracted<T>,
) -> PyResult<Option<T>> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(Outcome::Decline(reason)) => {
            declined(py, function, reason);
            Ok(None)
        }
        Err(Outcome::Error(err)) => Err(err),
    }
}

/// Counts a decline; the first of its reason in the process is logged.
fn declined(py: Python<'_>, function: &'static str, reason: &'static str) {
    DECLINES.with_borrow_mut(|d| *d.entry(reason).or_insert(0) += 1);
    let first = TOTALS.lock().is_ok_and(|mut t| {
        *t.by_function.entry(function).or_insert(0) += 1;
        let count = t.by_reason.entry(reason).or_insert(0);
        *count += 1;
        *count == 1
    });
    super::reading::classes::learn_pending(py);
    if first {
        warn(py, function, reason);
    }
}

/// One warning on the `adk_fastcompact` logger. A logging failure is not
/// the caller's problem: it is swallowed (the counts still show the decline).
fn warn(py: Python<'_>, function: &'static str, reason: &'static str) {
    let message = format!(
        "adk-fastcompact declined {function} (reason: {reason}): its input is outside what \
         the Rust core reproduces exactly, so google-adk's own code ran instead (same \
         result, without the speed-up). Logged once per reason per process; counts are \
         in adk_fastcompact.index_stats()['declines']. If your app stores such events, \
         please report this message with your google-adk and google-genai versions and \
         the classes of the events' content to the adk-fastcompact issue tracker."
    );
    let logged = py
        .import("logging")
        .and_then(|l| l.call_method1("getLogger", ("adk_fastcompact",)))
        .and_then(|logger| logger.call_method1("warning", (message,)));
    drop(logged);
}
