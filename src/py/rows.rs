//! `stored_event`: a session service's row decoding, answered from
//! `core::rows::RowMemo` once shown deterministic, by a fresh copy.
//!
//! The memo's private decodings live as long as the memo keeps them, and
//! the cyclic garbage collector would walk every one of their objects in
//! each full collection (some twenty per event). They hold no cycle and
//! nothing outside reaches them, so they are taken out of its sight
//! ([`untrack_private`]); the copies handed out are new objects, tracked as
//! any decoding is.

use std::ffi::{c_int, c_void};
use std::sync::Mutex;

use pyo3::ffi;
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
            untrack_private(&kept);
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

/// Appends a container `tp_traverse` visits to the `Vec` behind `arg`.
unsafe extern "C" fn collect(object: *mut ffi::PyObject, arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Vec` `untrack_private` passes, alive and not
    // otherwise borrowed during the traversal.
    let out = unsafe { &mut *arg.cast::<Vec<*mut ffi::PyObject>>() };
    out.push(object);
    0
}

/// Untracks from the cyclic garbage collector every container of the
/// object tree under `root` that the tree alone holds.
///
/// An object is taken only when its reference count is 1: the root's is
/// the caller's reference (the memo's, from then on), any other's its
/// parent's. Such objects form a tree that nothing else reaches, so none
/// can be part of a cycle: reference counting frees them when the root is
/// dropped, as it frees any acyclic object, and a collection that skipped
/// them loses nothing. A shared object (an enum member, a class, one held
/// twice) stays tracked, and the walk does not go below it. The children
/// are found by each type's own `tp_traverse`, as `gc.get_referents` finds
/// them; no Python code runs during the walk, so the borrowed pointers stay
/// valid. CPython tracks a container again only when it is mutated, and the
/// memo's decodings are never mutated nor handed out (`copy` reads them).
fn untrack_private(root: &Py<PyAny>) {
    let mut stack = vec![root.as_ptr()];
    let mut children: Vec<*mut ffi::PyObject> = Vec::new();
    while let Some(obj) = stack.pop() {
        // SAFETY: `obj` is the root, or a child of an object of the tree
        // visited by its `tp_traverse` with no Python code run since: alive
        // while the caller holds the root. The calls only read its type
        // and reference count, and untrack it.
        unsafe {
            if ffi::Py_REFCNT(obj) != 1 || ffi::PyType_Check(obj) != 0 {
                continue;
            }
            let ty = ffi::Py_TYPE(obj);
            if ffi::PyType_IS_GC(ty) == 0 {
                continue;
            }
            let traverse = ffi::PyType_GetSlot(ty, ffi::Py_tp_traverse);
            if traverse.is_null() {
                continue;
            }
            if ffi::PyObject_GC_IsTracked(obj) != 0 {
                ffi::PyObject_GC_UnTrack(obj.cast());
            }
            let traverse: ffi::traverseproc = std::mem::transmute(traverse);
            children.clear();
            let arg = std::ptr::addr_of_mut!(children).cast::<c_void>();
            if traverse(obj, collect, arg) != 0 {
                continue;
            }
        }
        stack.extend_from_slice(&children);
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
