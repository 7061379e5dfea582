//! Dict version tags (PEP 509): a cheap "has this dict changed" check.
//!
//! CPython 3.10 to 3.13 give every dict a 64-bit `ma_version_tag` that is
//! set from an interpreter-wide counter when the dict is created and on
//! every change of its contents, so an equal (address, tag) pair means the
//! same dict with the same contents. The field is part of the `PyDictObject`
//! struct, not of the limited API this module is built against, so it is
//! read only after a self-test on the running interpreter proved the layout
//! (CPython, a GIL build, version 3.10-3.13, and a probe dict whose tag and
//! size behave as PEP 509 says). Everywhere else [`tag`] answers `None` and
//! callers compare values instead; `ADK_FASTCOMPACT_DICT_TAGS=false` in the
//! environment chooses that path too (the tests run it both ways).

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// Byte offset of `ma_used` and `ma_version_tag` in `PyDictObject` after
/// the standard object header (refcount, type).
const USED: usize = 16;
const TAG: usize = 24;

static USABLE: PyOnceLock<bool> = PyOnceLock::new();

/// The version tag of `dict` (an exact `dict`), or `None` where tags are
/// not known to be readable.
#[inline]
pub fn tag(dict: &Bound<'_, PyAny>) -> Option<u64> {
    if !usable(dict.py()) || !dict.is_exact_instance_of::<pyo3::types::PyDict>() {
        return None;
    }
    // SAFETY: `dict` is a live exact dict and `usable` proved the layout.
    Some(unsafe { read(dict.as_ptr(), TAG) })
}

/// Reads the `u64` at `offset` bytes into the object at `obj`.
///
/// # Safety
/// `obj` must be a live dict of a layout where `offset` is in the struct.
#[inline]
unsafe fn read(obj: *mut ffi::PyObject, offset: usize) -> u64 {
    unsafe { std::ptr::read(obj.cast::<u8>().add(offset).cast::<u64>()) }
}

/// Whether version tags are read on this interpreter
/// (`index_stats()["dict_tags"]`).
pub(crate) fn usable(py: Python<'_>) -> bool {
    *USABLE.get_or_init(py, || self_test(py).unwrap_or(false))
}

/// The environment variable that turns tags off (`false` or `0`).
const SWITCH: &str = "ADK_FASTCOMPACT_DICT_TAGS";

/// Whether reading CPython internals may be tried here: the environment
/// variable `switch` is not `false` / `0`, and the interpreter is CPython
/// 3.`minors`, a GIL build (its layout probes come next).
pub fn admitted(
    py: Python<'_>,
    switch: &str,
    minors: std::ops::RangeInclusive<u32>,
) -> PyResult<bool> {
    if std::env::var(switch).is_ok_and(|v| matches!(v.trim(), "0" | "false" | "False")) {
        return Ok(false);
    }
    let sys = py.import("sys")?;
    let cpython = sys
        .getattr("implementation")?
        .getattr("name")?
        .extract::<String>()?
        == "cpython";
    let version = sys.getattr("version_info")?;
    let major: u32 = version.get_item(0)?.extract()?;
    let minor: u32 = version.get_item(1)?.extract()?;
    let free_threaded = py
        .import("sysconfig")?
        .call_method1("get_config_var", ("Py_GIL_DISABLED",))?
        .is_truthy()?;
    Ok(cpython && !free_threaded && major == 3 && minors.contains(&minor))
}

fn self_test(py: Python<'_>) -> PyResult<bool> {
    if !admitted(py, SWITCH, 10..=13)? {
        return Ok(false);
    }
    let probe = pyo3::types::PyDict::new(py);
    let other = pyo3::types::PyDict::new(py);
    // SAFETY: both are live dicts; on the versions admitted above the
    // header is two words followed by `ma_used` and `ma_version_tag`, and
    // the probe checks that before anything relies on it.
    let at = |d: &Bound<'_, pyo3::types::PyDict>, offset| unsafe { read(d.as_ptr(), offset) };
    let empty = (at(&probe, USED), at(&probe, TAG));
    probe.set_item("a", 1)?;
    let one = (at(&probe, USED), at(&probe, TAG));
    probe.set_item("a", 2)?;
    let changed = (at(&probe, USED), at(&probe, TAG));
    probe.set_item("b", 3)?;
    let two = (at(&probe, USED), at(&probe, TAG));
    let read_only = at(&probe, TAG);
    let _ = probe.get_item("a")?;
    Ok(empty.0 == 0
        && one.0 == 1
        && changed.0 == 1
        && two.0 == 2
        && one.1 != empty.1
        && changed.1 != one.1
        && two.1 != changed.1
        && at(&probe, TAG) == read_only
        && at(&other, TAG) != two.1)
}
