//! `stored_event`: a session service's row decoding, answered from
//! `core::rows::RowMemo` once shown deterministic, by a fresh copy.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use crate::core::rows::{Lookup, RowMemo, DEFAULT_BUDGET};

static MEMO: Mutex<RowMemo<Py<PyAny>>> = Mutex::new(RowMemo::new(DEFAULT_BUDGET));

fn memo() -> std::sync::MutexGuard<'static, RowMemo<Py<PyAny>>> {
    MEMO.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What the caller does next, read under the lock.
enum Next {
    Copy(Py<PyAny>),
    First,
    Second(Py<PyAny>),
    Decode,
}

/// Returns what `decode(row)` returns: the decoding itself the first two
/// times a row is seen (compared by `same` the second time), a `copy` of it
/// once two decodings were equal. Rows other than `str` and `bytes` are
/// decoded every time.
#[pyfunction]
pub fn stored_event(
    py: Python<'_>,
    row: &Bound<'_, PyAny>,
    decode: &Bound<'_, PyAny>,
    copy: &Bound<'_, PyAny>,
    same: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    let bytes: &[u8] = if let Ok(s) = row.cast::<PyString>() {
        match s.to_str() {
            Ok(s) => s.as_bytes(),
            Err(_) => return Ok(decode.call1((row,))?.unbind()),
        }
    } else if let Ok(b) = row.cast::<PyBytes>() {
        b.as_bytes()
    } else {
        return Ok(decode.call1((row,))?.unbind());
    };
    let next = match memo().lookup(bytes) {
        Lookup::Copy(v) => Next::Copy(v.clone_ref(py)),
        Lookup::First => Next::First,
        Lookup::Second(v) => Next::Second(v.clone_ref(py)),
        Lookup::Decode => Next::Decode,
    };
    match next {
        Next::Copy(v) => Ok(copy.call1((v,))?.unbind()),
        Next::Decode => Ok(decode.call1((row,))?.unbind()),
        Next::First => {
            let decoded = decode.call1((row,))?;
            let kept = copy.call1((&decoded,))?.unbind();
            let evicted = memo().first(bytes, kept);
            drop(evicted);
            Ok(decoded.unbind())
        }
        Next::Second(first) => {
            let decoded = decode.call1((row,))?;
            let equal = same.call1((first, &decoded))?.is_truthy()?;
            let dropped = memo().settle(bytes, equal);
            drop(dropped);
            Ok(decoded.unbind())
        }
    }
}

/// Sets the memo's budget in bytes of rows (0 turns it off).
pub fn configure(budget: usize) {
    let evicted = memo().set_budget(budget);
    drop(evicted);
}

/// Forgets every remembered row.
pub fn clear() {
    let dropped = memo().clear();
    drop(dropped);
}

/// Adds the memo's figures to `index_stats()`'s dict.
pub fn stats(out: &Bound<'_, PyDict>) -> PyResult<()> {
    let m = memo();
    let c = m.counters();
    out.set_item("rows", m.len())?;
    out.set_item("rows_settled", m.settled())?;
    out.set_item("row_bytes", m.bytes())?;
    out.set_item("max_row_bytes", m.budget())?;
    out.set_item("rows_reused", c.hits)?;
    out.set_item("rows_decoded_first", c.first)?;
    out.set_item("rows_decoded_second", c.second)?;
    out.set_item("rows_unsettled", c.unsettled)?;
    out.set_item("rows_evicted", c.evicted)?;
    Ok(())
}
