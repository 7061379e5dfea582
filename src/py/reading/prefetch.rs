//! Overlapping the cache misses of reads through cold Python objects.
//!
//! A session freshly loaded by `get_session` (a deep copy, or Events a
//! database service rebuilt) is megabytes of objects the CPU has not seen
//! lately: each field read is a chain of dependent loads (object, its
//! instance dict, the dict's key table, the value), each one a miss. A loop
//! that reads event after event waits for each miss in turn. Extraction
//! goes stage by stage over chunks of events instead, and before a stage
//! reads a level of the chain for the whole chunk, the loads of that level
//! are started for every event of the chunk ([`prefetch`] hints), so the
//! misses overlap.
//!
//! Finding where the next level lives without a reference taken or a
//! lookup made reads internals that the limited API this module is built
//! against does not name: the managed instance-dict pointer three words
//! before an object (CPython 3.11 to 3.13, types with
//! `Py_TPFLAGS_MANAGED_DICT`, which pydantic models are), a dict's size and
//! key table pointer, and a list's item array pointer. The first three only
//! choose what to *prefetch*: whatever they return, the values are read
//! through the API (or [`super::fields`]). The item array is also read for
//! real by [`item_addresses`]: a list's items are collected, and compared
//! with remembered objects, from it (the array is what `PyList_GetItem`
//! reads, without a call and a bounds check per item). They are made only
//! on an interpreter where [`usable`] proved the layout (CPython, a GIL
//! build, 3.11 to 3.13, and probes: an object whose managed dict is found
//! where expected, a dict's size and a list's item array where they are
//! read); elsewhere these hints are not given, the lookups made only for
//! them are not made, and items are read through the API.
//! `ADK_FASTCOMPACT_PREFETCH=false` in the environment turns them off too.
//! ([`list_items`] hints each item's own address, which needs no such
//! read, everywhere.)

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyListMethods, PyString};

use super::fields::Fields;

/// Asks the CPU to start loading the cache line at `ptr` (a hint: never
/// faults, does nothing where unsupported).
#[inline(always)]
pub(crate) fn prefetch(ptr: *const ffi::PyObject) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing architecturally and cannot fault,
    // whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(ptr.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// Byte offset, before an object, of its managed instance-dict pointer.
const MANAGED_DICT: usize = 24;
/// Byte offset of `ob_item` in `PyListObject`.
const OB_ITEM: usize = 24;
/// Byte offsets of `ma_used` and `ma_keys` in `PyDictObject`.
const MA_USED: usize = 16;
const MA_KEYS: usize = 32;
/// `Py_TPFLAGS_MANAGED_DICT`.
const MANAGED_DICT_FLAG: std::ffi::c_ulong = 1 << 4;
/// Cache lines of a key table hinted at most.
const TABLE_LINES: usize = 12;

static USABLE: PyOnceLock<bool> = PyOnceLock::new();

/// Starts loading an object's header and the line before it (where
/// CPython keeps a managed instance dict's pointer, which
/// `PyObject_GenericGetDict` reads).
#[inline(always)]
pub(crate) fn object(ptr: *const ffi::PyObject) {
    prefetch(ptr);
    prefetch(ptr.cast::<u8>().wrapping_sub(MANAGED_DICT).cast());
}

/// The items of `list`, each a new reference. Taking a reference writes
/// the object's header: each item is prefetched some items ahead, so those
/// misses overlap instead of stalling the loop one by one.
pub(crate) fn list_items<'py>(list: &Bound<'py, PyList>) -> Vec<Bound<'py, PyAny>> {
    let py = list.py();
    let n = list.len();
    match item_addresses(list) {
        // SAFETY: the item array holds `n` live items; nothing below runs
        // Python code that could change it.
        Some(items) => unsafe { referenced(py, n, |i| items[i] as *mut ffi::PyObject) },
        // SAFETY: `list` is a live list and `i` below its length (no Python
        // code runs here, so the length holds); PyList_GetItem returns a
        // borrowed reference.
        None => unsafe {
            referenced(py, n, |i| {
                ffi::PyList_GetItem(list.as_ptr(), i as ffi::Py_ssize_t)
            })
        },
    }
}

/// `item(0..n)`, each a new reference, their loads started some items
/// ahead.
///
/// # Safety
/// `item(i)` must be a live object for every `i < n`, borrowed from
/// something that holds it throughout.
unsafe fn referenced<'py>(
    py: Python<'py>,
    n: usize,
    item: impl Fn(usize) -> *mut ffi::PyObject,
) -> Vec<Bound<'py, PyAny>> {
    const AHEAD: usize = 16;
    for i in 0..AHEAD.min(n) {
        object(item(i));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if i + AHEAD < n {
            object(item(i + AHEAD));
        }
        // SAFETY: a live borrowed object (the caller's promise), owned here.
        out.push(unsafe { Bound::from_borrowed_ptr(py, item(i)) });
    }
    out
}

/// Whether `list` holds exactly `objects`, in order, when a handle holds
/// them (so an item at one's address is that object: compared without a
/// reference taken per item).
pub(crate) fn holds_exactly(list: &Bound<'_, PyList>, objects: &[Py<PyAny>]) -> bool {
    if list.len() != objects.len() {
        return false;
    }
    match item_addresses(list) {
        Some(items) => items
            .iter()
            .zip(objects)
            .all(|(&item, then)| item == then.as_ptr() as usize),
        None => objects
            .iter()
            .enumerate()
            .all(|(i, then)| list.get_item(i).is_ok_and(|now| now.is(then))),
    }
}

/// The items of `list` at `picked` (increasing positions; those past the
/// list's end left out), each a new reference (their loads started some
/// picked items ahead), and each position's place among them (`u32::MAX`
/// where not picked).
pub(crate) fn list_items_where<'py>(
    list: &Bound<'py, PyList>,
    picked: &[usize],
) -> (Vec<Bound<'py, PyAny>>, Vec<u32>) {
    const AHEAD: usize = 16;
    let py = list.py();
    let n = list.len();
    let item = |i: usize| -> *mut ffi::PyObject {
        // SAFETY: as in `list_items`: a live list, `i` below its length.
        unsafe { ffi::PyList_GetItem(list.as_ptr(), i as ffi::Py_ssize_t) }
    };
    let picked = &picked[..picked.partition_point(|&i| i < n)];
    for &i in picked.iter().take(AHEAD) {
        object(item(i));
    }
    let mut at = vec![u32::MAX; n];
    let mut out = Vec::with_capacity(picked.len());
    for (k, &i) in picked.iter().enumerate() {
        if let Some(&ahead) = picked.get(k + AHEAD) {
            object(item(ahead));
        }
        at[i] = k as u32;
        // SAFETY: a live item of `list` (see above), borrowed, owned here.
        out.push(unsafe { Bound::from_borrowed_ptr(py, item(i)) });
    }
    (out, at)
}

/// Whether the loads of cold objects are started ahead on this
/// interpreter (`index_stats()["prefetch"]`).
pub(crate) fn enabled(py: Python<'_>) -> bool {
    usable(py)
}

/// `items` where the layout reads are proved, else nothing.
fn when_usable<'a, 'py: 'a, T: 'a>(
    items: impl IntoIterator<Item = &'a Bound<'py, T>>,
) -> impl Iterator<Item = &'a Bound<'py, T>> {
    let mut items = items.into_iter().peekable();
    let on = items.peek().is_some_and(|first| usable(first.py()));
    items.take_while(move |_| on)
}

/// Whether the layout reads are proved on this interpreter.
fn usable(py: Python<'_>) -> bool {
    *USABLE.get_or_init(py, || self_test(py).unwrap_or(false))
}

fn self_test(py: Python<'_>) -> PyResult<bool> {
    if !super::version_tag::admitted(py, "ADK_FASTCOMPACT_PREFETCH", 11..=13)? {
        return Ok(false);
    }
    // A class with a managed dict, an instance, and its dict made real.
    let class = py
        .import("builtins")?
        .getattr("type")?
        .call1(("Probe", (), PyDict::new(py)))?;
    let probe = class.call0()?;
    probe.setattr("field", 1)?;
    let dict = probe.getattr("__dict__")?;
    if !managed(&probe) {
        return Ok(false);
    }
    // SAFETY: CPython 3.11 to 3.13 (GIL builds) put a pre-header of at
    // least one word before the GC header of an object of a managed-dict
    // type, its dict pointer three words before the object (3.13's
    // MANAGED_DICT_OFFSET); the read is inside that.
    let found = unsafe { instance_dict_ptr(probe.as_ptr()) };
    // A dict's size and a list's item array where they are read.
    let sized = PyDict::new(py);
    sized.set_item("a", 1)?;
    sized.set_item("b", 2)?;
    let list = PyList::new(py, [&dict])?;
    // SAFETY: a live dict and a live list, whose structs on these versions
    // are longer than the offsets read; the item array holds one pointer.
    let (used, item) = unsafe {
        let items = std::ptr::read(
            list.as_ptr()
                .cast::<u8>()
                .add(OB_ITEM)
                .cast::<*const *mut ffi::PyObject>(),
        );
        (
            std::ptr::read(sized.as_ptr().cast::<u8>().add(MA_USED).cast::<isize>()),
            std::ptr::read(items),
        )
    };
    Ok(found == dict.as_ptr() && used == 2 && item == dict.as_ptr())
}

/// Whether `obj`'s type keeps a managed instance dict.
#[inline]
fn managed(obj: &Bound<'_, PyAny>) -> bool {
    // SAFETY: `obj` is live; its type is a live type object.
    unsafe { ffi::PyType_GetFlags(ffi::Py_TYPE(obj.as_ptr())) & MANAGED_DICT_FLAG != 0 }
}

/// The managed instance-dict pointer of `obj` (null while not made).
///
/// # Safety
/// `obj` must be a live object of a managed-dict type on an interpreter
/// [`usable`] admitted.
#[inline]
unsafe fn instance_dict_ptr(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    unsafe {
        std::ptr::read(
            obj.cast::<u8>()
                .sub(MANAGED_DICT)
                .cast::<*mut ffi::PyObject>(),
        )
    }
}

/// Starts loading the instance dicts of `objs` (each header already
/// loaded or in flight; nothing is hinted for an object of another type).
pub(crate) fn instance_dicts<'a, 'py: 'a>(objs: impl IntoIterator<Item = &'a Bound<'py, PyAny>>) {
    for obj in when_usable(objs) {
        if managed(obj) {
            // SAFETY: a live managed-dict object, layout proved.
            prefetch(unsafe { instance_dict_ptr(obj.as_ptr()) });
        }
    }
}

/// Starts loading what reading `keys` (each with its [`Fields`] slot) from
/// each of `dicts` (exact dicts, each already loaded or in flight) reads of
/// their key tables: the header and, where `fields` knows each key's entry
/// offset (dicts of one model share a table layout), those entries' lines
/// only, else the whole table (the indices and the entries).
pub(crate) fn tables<'a, 'py: 'a>(
    dicts: impl IntoIterator<Item = &'a Bound<'py, PyDict>>,
    keys: &[(&Bound<'py, PyString>, usize)],
    fields: &Fields,
) {
    let mut offsets = [0usize; 8];
    let known = keys.len() <= offsets.len()
        && keys
            .iter()
            .zip(offsets.iter_mut())
            .all(|(&(_, slot), o)| fields.entry_offset(slot).map(|at| *o = at).is_some());
    for dict in when_usable(dicts) {
        let d = dict.as_ptr().cast::<u8>();
        // SAFETY: a live exact dict, whose struct holds `ma_keys` at this
        // offset on the admitted versions.
        let table = unsafe { std::ptr::read(d.add(MA_KEYS).cast::<*const u8>()) };
        prefetch(table.cast());
        if known {
            for &at in &offsets[..keys.len()] {
                prefetch(table.wrapping_add(at).cast());
            }
            continue;
        }
        // SAFETY: as above, for `ma_used`.
        let used = unsafe { std::ptr::read(d.add(MA_USED).cast::<isize>()) };
        // Header (32 bytes), one-byte indices (up to 2^7 slots: at least
        // 3/2 of the entries), 16-byte entries (string keys).
        let used = used.clamp(0, 64) as usize;
        let bytes = 32 + (used * 3 / 2).next_power_of_two() + 16 * used;
        for line in 1..bytes.div_ceil(64).min(TABLE_LINES) {
            prefetch(table.wrapping_add(64 * line).cast());
        }
    }
}

/// Starts loading the values of `keys` (each with its [`Fields`] slot) in
/// each of `dicts` (exact dicts whose tables are loaded or in flight): the
/// value's header, and its instance dict's pointer. The value is found at
/// the field's last entry position where `fields` reads entries, else by a
/// lookup; no reference is taken and no value read.
pub(crate) fn values<'a, 'py: 'a>(
    dicts: impl IntoIterator<Item = &'a Bound<'py, PyDict>>,
    keys: &[(&Bound<'py, PyString>, usize)],
    fields: &Fields,
) {
    for dict in when_usable(dicts) {
        for &(key, slot) in keys {
            let value = if fields.direct() {
                fields.peek(dict, key, slot)
            } else {
                // SAFETY: a live dict and a live exact `str` key (hashing it
                // runs no Python code); the result is borrowed and only its
                // address is used. A failed lookup (none can, with a `str`
                // key) is cleared.
                let value = unsafe { ffi::PyDict_GetItemWithError(dict.as_ptr(), key.as_ptr()) };
                if value.is_null() {
                    // SAFETY: clearing a possible error indicator is always valid.
                    unsafe { ffi::PyErr_Clear() };
                }
                value
            };
            if !value.is_null() {
                object(value);
            }
        }
    }
}

/// The addresses of `list`'s items, read from its item array where the
/// layout is proved (else `None`: read them through the API). The caller
/// must run no Python code while it holds the slice (nothing can resize
/// the list meanwhile).
pub(crate) fn item_addresses<'a>(list: &'a Bound<'_, PyList>) -> Option<&'a [usize]> {
    if !usable(list.py()) {
        return None;
    }
    let n = list.len();
    if n == 0 {
        return Some(&[]);
    }
    // SAFETY: a live exact-or-subclass list (its struct starts as
    // `PyListObject`), whose `ob_item` on the admitted versions points at
    // `n` item pointers; pointers and `usize` share size and alignment.
    unsafe {
        let items = std::ptr::read(
            list.as_ptr()
                .cast::<u8>()
                .add(OB_ITEM)
                .cast::<*const usize>(),
        );
        Some(std::slice::from_raw_parts(items, n))
    }
}

/// Starts loading the item arrays of `lists` (each header loaded or in
/// flight).
pub(crate) fn arrays<'a, 'py: 'a>(lists: impl IntoIterator<Item = &'a Bound<'py, PyList>>) {
    for list in when_usable(lists) {
        // SAFETY: a live exact list, whose struct holds `ob_item` at this
        // offset on the admitted versions.
        let items = unsafe {
            std::ptr::read(
                list.as_ptr()
                    .cast::<u8>()
                    .add(OB_ITEM)
                    .cast::<*const ffi::PyObject>(),
            )
        };
        prefetch(items);
    }
}

/// Starts loading the items of `lists` (their arrays loaded or in flight):
/// each item's header and instance-dict pointer.
pub(crate) fn items<'a, 'py: 'a>(lists: impl IntoIterator<Item = &'a Bound<'py, PyList>>) {
    for list in when_usable(lists) {
        for i in 0..list.len() {
            // SAFETY: `i` is below the length of a live list (no Python
            // code runs here); the item is borrowed and only its address
            // used.
            object(unsafe { ffi::PyList_GetItem(list.as_ptr(), i as ffi::Py_ssize_t) });
        }
    }
}
