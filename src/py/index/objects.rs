//! Objects by address: list items read without a reference, the `id` of an
//! exact `Event`, weak references, and the two weak-reference callbacks that
//! keep identity checks cheap ([`Obituary`] counts a session's deaths,
//! [`CopyHolder`] holds a session copy's events while it lives).

use crate::py::error::Extracted;
use crate::py::reading::extract::event_dict;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Item `i` of `list`, borrowed (null past its end).
pub(super) fn list_item(list: &Bound<'_, PyList>, i: usize) -> *mut ffi::PyObject {
    let Ok(i) = ffi::Py_ssize_t::try_from(i) else {
        return std::ptr::null_mut();
    };
    // SAFETY: `list` is a live list; PyList_GetItem returns a borrowed
    // reference, or NULL with IndexError set (cleared here).
    unsafe {
        let item = ffi::PyList_GetItem(list.as_ptr(), i);
        if item.is_null() {
            ffi::PyErr_Clear();
        }
        item
    }
}

/// Whether `list` begins with the objects at `addrs` (compared by address:
/// the caller knows those objects alive).
#[inline]
pub(super) fn starts_with(list: &Bound<'_, PyList>, addrs: &[usize]) -> bool {
    match crate::py::reading::prefetch::item_addresses(list) {
        Some(items) => items.len() >= addrs.len() && items[..addrs.len()] == *addrs,
        None => {
            list.len() >= addrs.len()
                && addrs
                    .iter()
                    .enumerate()
                    .all(|(i, &addr)| list_item(list, i) as usize == addr)
        }
    }
}

/// The `id` (exact `str`) of an exact `Event`, or `None`.
pub(crate) fn event_id<'py>(obj: &Bound<'py, PyAny>) -> Extracted<Option<Bound<'py, PyString>>> {
    let Some(dict) = event_dict(obj)? else {
        return Ok(None);
    };
    let id = dict.get_item(intern!(obj.py(), "id"))?;
    Ok(id.and_then(|id| id.cast_into_exact::<PyString>().ok()))
}

/// Whether the live weak reference `weak` points at `ptr`.
#[inline]
pub(super) fn points_at(weak: &Py<PyAny>, ptr: *mut ffi::PyObject) -> bool {
    let mut obj = std::ptr::null_mut();
    // SAFETY: `weak` is a weak reference we created; GetRef stores a new
    // reference (or NULL when dead) in `obj`, released right away: only
    // its address is compared.
    unsafe {
        if ffi::compat::PyWeakref_GetRef(weak.as_ptr(), &mut obj) != 1 {
            ffi::PyErr_Clear();
            return false;
        }
        ffi::Py_DECREF(obj);
    }
    obj == ptr
}

/// A new weak reference to `obj` whose callback is `callback`.
pub(super) fn weak_ref_with(
    obj: &Bound<'_, PyAny>,
    callback: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    // SAFETY: `obj` is live and `callback` a live callable;
    // PyWeakref_NewRef returns a new reference or NULL with an exception set.
    unsafe {
        Ok(Bound::from_owned_ptr_or_err(
            obj.py(),
            ffi::PyWeakref_NewRef(obj.as_ptr(), callback.as_ptr()),
        )?
        .unbind())
    }
}

/// The callback of the weak references to a session's weakly bound objects:
/// counts their deaths (`Tracked::deaths`). Only an atomic is touched: it
/// runs during deallocations, with or without the registry locked.
#[pyclass(frozen)]
pub(super) struct Obituary {
    pub(super) deaths: Arc<AtomicU64>,
}

#[pymethods]
impl Obituary {
    fn __call__(&self, _weak: &Bound<'_, PyAny>) {
        self.deaths.fetch_add(1, Ordering::AcqRel);
    }
}

/// The deep copies of one `index_copied` call, held strongly while the
/// session copy they belong to lives: an address can only be reused after
/// its object is freed, so while the holder is alive an object at a bound
/// copy's address is that copy, with no weak reference per event. The
/// holder is the callback of a weak reference to the copied session, so it
/// lets go of the copies when the session copy dies (during its
/// deallocation, where the copies would be freed anyway; not in our next
/// call).
#[pyclass(frozen)]
pub(super) struct CopyHolder {
    objects: Mutex<Vec<Py<PyAny>>>,
    alive: AtomicBool,
    /// The session's `Tracked::deaths`, bumped when the copies are let go.
    deaths: Arc<AtomicU64>,
    /// The weak reference to the session copy, kept so the callback runs
    /// (CPython drops its reference to the callback once it ran).
    session: Mutex<Option<Py<PyAny>>>,
}

impl CopyHolder {
    /// A holder of no copies yet, for the session whose deaths `deaths`
    /// counts.
    pub(super) fn new(deaths: Arc<AtomicU64>) -> Self {
        CopyHolder {
            objects: Mutex::new(Vec::new()),
            alive: AtomicBool::new(true),
            deaths,
            session: Mutex::new(None),
        }
    }

    /// Whether it still holds its copies.
    #[inline]
    pub(super) fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Keeps `weak`, its own weak reference to the session copy.
    pub(super) fn watch_session(&self, weak: Py<PyAny>) {
        if let Ok(mut w) = self.session.lock() {
            *w = Some(weak);
        }
    }

    /// Holds `copies`.
    pub(super) fn hold(&self, copies: Vec<Py<PyAny>>) {
        if let Ok(mut objects) = self.objects.lock() {
            *objects = copies;
        }
    }

    pub(super) fn memory_bytes(&self) -> usize {
        let objects = self.objects.lock().map(|v| v.capacity()).unwrap_or(0);
        std::mem::size_of::<Self>() + objects * std::mem::size_of::<Py<PyAny>>() + 64
    }
}

#[pymethods]
impl CopyHolder {
    fn __call__(&self, _weak: &Bound<'_, PyAny>) {
        self.alive.store(false, Ordering::Release);
        self.deaths.fetch_add(1, Ordering::AcqRel);
        let objects = match self.objects.lock() {
            Ok(mut v) => std::mem::take(&mut *v),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        };
        // The weak reference has fired: of no further use.
        let session = match self.session.lock() {
            Ok(mut w) => w.take(),
            Err(p) => p.into_inner().take(),
        };
        // Released with no lock held: freeing them may run callbacks.
        drop(objects);
        drop(session);
    }
}
