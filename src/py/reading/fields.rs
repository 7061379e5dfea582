//! Field reads from a model's instance dict by entry position.
//!
//! A dict lookup hashes the key, probes the dict's index array and then
//! compares the entry it points at; on a cold session the index array is one
//! more cache miss per dict, and the generic lookup code is the largest CPU
//! cost of an extraction. pydantic fills every instance dict of a model by
//! inserting the fields in declaration order, and `copy.deepcopy` (how
//! `InMemorySessionService` hands out sessions) inserts them in the order it
//! finds them, so a field sits at the same entry position in the dict of
//! every instance of a model, with the same interned `str` as its key.
//!
//! [`Fields::get`] therefore first looks at the entry where the field was
//! found last: when that entry's key is the very key object asked for, its
//! value is the field's (a dict holds each key once), and no lookup is made.
//! Anything else (another key there, a deleted entry, a dict of another
//! kind) is a plain `PyDict_GetItemWithError`, after which the field's
//! position is learned again. So a wrong guess costs one lookup, never a
//! wrong value.
//!
//! Reading an entry reads internals that the limited API this module is
//! built against does not name: a dict's key table and values pointers and
//! the table's kind, size, index width and entries. They are read only on
//! an interpreter where a self-test proved the layout (CPython, a GIL build,
//! 3.11 to 3.13, and probe dicts whose every entry read agrees with the
//! API's lookup); elsewhere, and with `ADK_FASTCOMPACT_DIRECT_FIELDS=false`
//! in the environment, every read is the API lookup.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};

/// Byte offsets in `PyDictObject` of `ma_keys` and `ma_values`.
const MA_KEYS: usize = 32;
const MA_VALUES: usize = 40;
/// Byte offsets in `PyDictKeysObject` of `dk_log2_index_bytes`, `dk_kind`,
/// `dk_nentries` and the index array (the entries follow it).
const DK_LOG2_INDEX_BYTES: usize = 9;
const DK_KIND: usize = 10;
const DK_NENTRIES: usize = 24;
const DK_INDICES: usize = 32;
/// `DICT_KEYS_UNICODE`: every key an exact `str`, entries `(key, value)`.
const UNICODE_KIND: u8 = 1;
/// Bytes of a `(key, value)` entry.
const ENTRY: usize = 16;

static USABLE: PyOnceLock<bool> = PyOnceLock::new();

/// Where each field an extraction reads was found last (an entry position
/// per field, learned from the dicts read).
pub struct Fields {
    direct: bool,
    at: [u32; FIELDS],
    /// Where that entry was, in bytes from the start of its key table (the
    /// tables of one model's dicts share a layout): only to choose what to
    /// prefetch.
    offset: [u32; FIELDS],
}

/// The fields [`Fields`] keeps a position for; each caller names its own.
pub const FIELDS: usize = 32;

impl Fields {
    /// Positions not yet learned; entry reads where the layout is proved.
    pub fn new(py: Python<'_>) -> Self {
        Fields {
            direct: usable(py),
            at: [u32::MAX; FIELDS],
            offset: [u32::MAX; FIELDS],
        }
    }

    /// `dict[key]`, borrowed from `dict` (no reference taken; the caller
    /// uses it before any Python code can run), or `None` when missing.
    /// `field` (below [`FIELDS`]) names the field's position slot: the same
    /// key must always come with the same slot.
    #[inline]
    pub fn get<'a, 'py>(
        &mut self,
        dict: &'a Bound<'py, PyDict>,
        key: &Bound<'py, PyString>,
        field: usize,
    ) -> PyResult<Option<Borrowed<'a, 'py, PyAny>>> {
        let py = dict.py();
        let (d, k) = (dict.as_ptr(), key.as_ptr());
        if self.direct {
            // SAFETY: `d` is a live dict (checked exact inside), `usable`
            // proved the layout, and no Python code runs here.
            let value = unsafe { entry_value(d, k, self.at[field] as usize) };
            if !value.is_null() {
                // SAFETY: a value the live dict `dict` holds a reference to.
                return Ok(Some(unsafe { Borrowed::from_ptr(py, value) }));
            }
        }
        // SAFETY: a live dict and a live key; the result is borrowed.
        let value = unsafe { ffi::PyDict_GetItemWithError(d, k) };
        if value.is_null() {
            return match PyErr::take(py) {
                Some(err) => Err(err),
                None => Ok(None),
            };
        }
        if self.direct {
            // SAFETY: as above; the lookup ran no code that could have
            // freed `dict` (the caller holds it).
            if let Some((at, offset)) = unsafe { position(d, k) } {
                self.at[field] = at as u32;
                self.offset[field] = u32::try_from(offset).unwrap_or(u32::MAX);
            }
        }
        // SAFETY: a value the live dict `dict` holds a reference to.
        Ok(Some(unsafe { Borrowed::from_ptr(py, value) }))
    }

    /// The address of `dict[key]` at its last position, or null: only to
    /// choose what to prefetch (no lookup is made, no reference taken).
    #[inline]
    pub fn peek(
        &self,
        dict: &Bound<'_, PyDict>,
        key: &Bound<'_, PyString>,
        field: usize,
    ) -> *mut ffi::PyObject {
        if !self.direct {
            return std::ptr::null_mut();
        }
        // SAFETY: as in `get`.
        unsafe { entry_value(dict.as_ptr(), key.as_ptr(), self.at[field] as usize) }
    }

    /// The byte offset, from the start of a key table, of `field`'s entry
    /// where it was found last (`None`: not learned, or no entry reads).
    #[inline]
    pub fn entry_offset(&self, field: usize) -> Option<usize> {
        let offset = self.offset[field];
        (self.direct && offset != u32::MAX).then_some(offset as usize)
    }

    /// Whether entries are read directly on this interpreter.
    pub fn direct(&self) -> bool {
        self.direct
    }
}

/// Reads a `T` at `offset` bytes into `base`.
///
/// # Safety
/// `base + offset` must be readable for a `T`.
#[inline(always)]
unsafe fn at<T: Copy>(base: *const u8, offset: usize) -> T {
    unsafe { std::ptr::read_unaligned(base.add(offset).cast::<T>()) }
}

/// The unicode key table of `dict` with its entry count and the offset of
/// its first entry, when `dict` is an exact dict whose values live in that
/// table.
///
/// # Safety
/// `dict` must be a live object on an interpreter [`usable`] admitted.
#[inline(always)]
unsafe fn table(dict: *mut ffi::PyObject) -> Option<(usize, *const u8, usize)> {
    unsafe {
        if ffi::PyDict_CheckExact(dict) == 0 {
            return None;
        }
        let d = dict.cast::<u8>().cast_const();
        if !at::<*const u8>(d, MA_VALUES).is_null() {
            return None;
        }
        let keys = at::<*const u8>(d, MA_KEYS);
        if at::<u8>(keys, DK_KIND) != UNICODE_KIND {
            return None;
        }
        let entries = usize::try_from(at::<isize>(keys, DK_NENTRIES)).unwrap_or(0);
        let index_bytes = 1usize << (at::<u8>(keys, DK_LOG2_INDEX_BYTES) & 63);
        let first = DK_INDICES + index_bytes;
        Some((entries, keys, first))
    }
}

/// The value of the entry at `position` when its key is `key`, else null.
///
/// # Safety
/// As [`table`]; `key` is only compared.
#[inline(always)]
unsafe fn entry_value(
    dict: *mut ffi::PyObject,
    key: *mut ffi::PyObject,
    position: usize,
) -> *mut ffi::PyObject {
    unsafe {
        match table(dict) {
            Some((n, keys, first)) if position < n => {
                let entry = keys.add(first + position * ENTRY);
                if at::<*mut ffi::PyObject>(entry, 0) == key {
                    at::<*mut ffi::PyObject>(entry, 8)
                } else {
                    std::ptr::null_mut()
                }
            }
            _ => std::ptr::null_mut(),
        }
    }
}

/// The entry position of `key` (by identity) in `dict`, if any, and that
/// entry's byte offset in the key table.
///
/// # Safety
/// As [`table`].
unsafe fn position(dict: *mut ffi::PyObject, key: *mut ffi::PyObject) -> Option<(usize, usize)> {
    unsafe {
        let (n, keys, first) = table(dict)?;
        (0..n)
            .find(|&i| at::<*mut ffi::PyObject>(keys.add(first + i * ENTRY), 0) == key)
            .map(|i| (i, first + i * ENTRY))
    }
}

/// Whether entries are read directly on this interpreter
/// (`index_stats()["direct_fields"]`).
pub fn usable(py: Python<'_>) -> bool {
    *USABLE.get_or_init(py, || self_test(py).unwrap_or(false))
}

/// Probes: dicts of several sizes filled as pydantic fills a model's dict
/// (interned `str` keys, inserted in order), where every entry read must
/// give the API's value at the key's insertion position and nothing
/// elsewhere; a deleted key and a dict with a non-`str` key give nothing.
fn self_test(py: Python<'_>) -> PyResult<bool> {
    if !super::version_tag::admitted(py, "ADK_FASTCOMPACT_DIRECT_FIELDS", 11..=13)? {
        return Ok(false);
    }
    for size in [1usize, 2, 5, 8, 35, 200] {
        let dict = PyDict::new(py);
        let keys: Vec<Bound<'_, PyString>> = (0..size)
            .map(|i| PyString::intern(py, &format!("probe_field_{i}")))
            .collect();
        for (i, key) in keys.iter().enumerate() {
            dict.set_item(key, i * 7 + 1)?;
        }
        for (i, key) in keys.iter().enumerate() {
            let expected = dict.get_item(key)?.map(|v| v.as_ptr());
            // SAFETY: a live exact dict; reads bounded by the probed layout,
            // which this test is establishing (a wrong layout reads inside
            // the table's allocation for these sizes).
            let (found, elsewhere, learned) = unsafe {
                (
                    entry_value(dict.as_ptr(), key.as_ptr(), i),
                    entry_value(dict.as_ptr(), key.as_ptr(), (i + 1) % size.max(2)),
                    position(dict.as_ptr(), key.as_ptr()),
                )
            };
            if expected != Some(found)
                || (size > 1 && !elsewhere.is_null())
                || learned.map(|(at, _)| at) != Some(i)
            {
                return Ok(false);
            }
        }
        if size > 1 {
            let gone = &keys[size / 2];
            dict.del_item(gone)?;
            // SAFETY: as above.
            if !unsafe { entry_value(dict.as_ptr(), gone.as_ptr(), size / 2) }.is_null() {
                return Ok(false);
            }
        }
    }
    let mixed = PyDict::new(py);
    let key = PyString::intern(py, "probe_field_0");
    mixed.set_item(&key, 1)?;
    mixed.set_item(2, 3)?;
    // SAFETY: a live exact dict of the general kind, which `table` refuses.
    Ok(unsafe { entry_value(mixed.as_ptr(), key.as_ptr(), 0) }.is_null())
}
