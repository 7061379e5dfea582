//! adk-fastcompact: Rust bookkeeping for google-adk context compaction.
//!
//! `core` holds the algorithms and never touches Python; `py` (feature
//! `python`, switched on by maturin) converts Python events into core views
//! and results back.

pub mod core;

#[cfg(feature = "python")]
mod py;

#[cfg(feature = "python")]
use pyo3::prelude::*;

/// The compiled module, `adk_fastcompact._native`.
#[cfg(feature = "python")]
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    py::register(m)
}
