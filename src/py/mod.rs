//! The binding layer: it reads Python objects for the core and builds the
//! core's answers out of the caller's objects; it decides nothing
//! google-adk decides. `reading` reads objects and values, `index` keeps
//! what each session's objects showed across calls, `error` turns every
//! refusal into a counted decline, and each other file is the Python face
//! of one core operation (`select` of `core::select`, `coverage` of
//! `core::coverage`, ...), plus the session copy (`copy`), row decoding
//! (`rows`) and summary Events (`summary`) built natively.

mod analysis;
mod audit;
mod copy;
mod coverage;
mod dropin;
mod error;
mod exact;
mod filter;
mod index;
mod lean;
mod lean_rows;
mod ranges;
mod reading;
mod recover;
mod rewind;
mod rows;
mod scans;
mod select;
mod summary;
mod tasks;

use pyo3::prelude::*;

/// Adds the module's functions and `__version__`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<select::FamilyRules>()?;
    m.add_class::<select::Selected>()?;
    m.add_class::<coverage::ExactSelection>()?;
    m.add_class::<scans::ContextFilter>()?;
    m.add_class::<tasks::TaskScope>()?;
    m.add_class::<tasks::TaskDelegations>()?;
    m.add_class::<lean_rows::LeanRows>()?;
    m.add_class::<lean_rows::LeanListing>()?;
    m.add_function(wrap_pyfunction!(copy::deep_copy_model, m)?)?;
    m.add_function(wrap_pyfunction!(error::decline_counts, m)?)?;
    m.add_function(wrap_pyfunction!(error::decline_totals, m)?)?;
    m.add_function(wrap_pyfunction!(analysis::analyze_sessions, m)?)?;
    m.add_function(wrap_pyfunction!(analysis::analyze_stored, m)?)?;
    m.add_function(wrap_pyfunction!(audit::audit_stored, m)?)?;
    m.add_function(wrap_pyfunction!(exact::coverage_record, m)?)?;
    m.add_function(wrap_pyfunction!(exact::new_coverage_record, m)?)?;
    m.add_function(wrap_pyfunction!(coverage::exact_prompt, m)?)?;
    m.add_function(wrap_pyfunction!(coverage::exact_record, m)?)?;
    m.add_function(wrap_pyfunction!(coverage::exact_foreign, m)?)?;
    m.add_function(wrap_pyfunction!(coverage::exact_seeds, m)?)?;
    m.add_function(wrap_pyfunction!(coverage::exact_sliding_window, m)?)?;
    m.add_function(wrap_pyfunction!(coverage::exact_token_threshold, m)?)?;
    m.add_function(wrap_pyfunction!(index::index_clear, m)?)?;
    m.add_function(wrap_pyfunction!(index::index_configure, m)?)?;
    m.add_function(wrap_pyfunction!(index::copies::index_copied, m)?)?;
    m.add_function(wrap_pyfunction!(index::index_stats, m)?)?;
    m.add_function(wrap_pyfunction!(lean::lean_positions, m)?)?;
    m.add_function(wrap_pyfunction!(rewind::apply_rewinds, m)?)?;
    m.add_function(wrap_pyfunction!(rows::stored_event, m)?)?;
    m.add_function(wrap_pyfunction!(scans::function_call_ids, m)?)?;
    m.add_function(wrap_pyfunction!(scans::context_events, m)?)?;
    m.add_function(wrap_pyfunction!(scans::stored_again, m)?)?;
    m.add_function(wrap_pyfunction!(reading::size::content_size, m)?)?;
    m.add_function(wrap_pyfunction!(ranges::get_compaction_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(filter::process_compaction_events, m)?)?;
    m.add_function(wrap_pyfunction!(filter::prompt_chars_delta, m)?)?;
    m.add_function(wrap_pyfunction!(
        recover::recover_compacted_function_calls,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(select::sliding_window, m)?)?;
    m.add_function(wrap_pyfunction!(select::token_threshold_selection, m)?)?;
    Ok(())
}
