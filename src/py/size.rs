//! google-adk's weight of a request content, `len(content.model_dump_json(
//! exclude_none=True, fallback=str))`, worked out from the content's fields
//! instead of writing its JSON.
//!
//! Exact mode weighs every summary it supersedes and every raw event it
//! summarizes (its trigger rule); a session google-adk wrote can hold
//! hundreds of summaries side by side, and pydantic writes each in about
//! 7 µs. The contents summaries and chat hold (a `Content` of text parts,
//! perhaps marked as thoughts) are sized here from their `__dict__`s with
//! [`crate::core::json_size`]; anything else (a function call or response,
//! inline data, a subclass that is not google-genai's own, a string that is
//! not valid UTF-8) answers `None` and the caller serializes it.

use super::classes::types;
use crate::core::json_size::{bool_len, container_len, member_len, string_len};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString};

/// The instance `__dict__` of a pydantic model instance.
fn instance_dict<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    // SAFETY: `obj` is a live object; PyObject_GenericGetDict returns a new
    // reference to its instance dict (creating it if needed) or NULL with an
    // exception set.
    let dict = unsafe {
        Bound::from_owned_ptr_or_err(
            obj.py(),
            ffi::PyObject_GenericGetDict(obj.as_ptr(), std::ptr::null_mut()),
        )
    }?;
    Ok(dict.cast_into::<PyDict>()?)
}

/// The characters of `part`'s JSON, or `None` where it holds a field this
/// sizing does not know how pydantic writes.
fn part_len(part: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    let t = types(part.py())?;
    if !t.part.is_library(&part.get_type()) {
        return Ok(None);
    }
    let (mut n, mut inner) = (0usize, 0usize);
    for (key, value) in instance_dict(part)?.iter() {
        if value.is_none() {
            continue;
        }
        let Ok(key) = key.cast_exact::<PyString>() else {
            return Ok(None);
        };
        let value = match key.to_str()? {
            "text" => match value.cast_exact::<PyString>().map(|s| s.to_str()) {
                Ok(Ok(s)) => string_len(s),
                _ => return Ok(None),
            },
            "thought" => match value.cast_exact::<PyBool>() {
                Ok(b) => bool_len(b.is_true()),
                Err(_) => return Ok(None),
            },
            _ => return Ok(None),
        };
        n += 1;
        inner += member_len(key.to_str()?, value);
    }
    Ok(Some(container_len(n, inner)))
}

/// The characters of `content`'s JSON as google-adk weighs it (0 for
/// `None`), or `None` where it is not a content of text parts sized here.
pub fn content_len(content: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    if content.is_none() {
        return Ok(Some(0));
    }
    let t = types(content.py())?;
    if !t.content.is_library(&content.get_type()) {
        return Ok(None);
    }
    let (mut n, mut inner) = (0usize, 0usize);
    for (key, value) in instance_dict(content)?.iter() {
        if value.is_none() {
            continue;
        }
        let Ok(key) = key.cast_exact::<PyString>() else {
            return Ok(None);
        };
        let value = match key.to_str()? {
            "role" => match value.cast_exact::<PyString>().map(|s| s.to_str()) {
                Ok(Ok(s)) => string_len(s),
                _ => return Ok(None),
            },
            "parts" => {
                let Ok(parts) = value.cast_exact::<PyList>() else {
                    return Ok(None);
                };
                let mut items = 0usize;
                for part in parts.iter() {
                    match part_len(&part)? {
                        Some(len) => items += len,
                        None => return Ok(None),
                    }
                }
                container_len(parts.len(), items)
            }
            _ => return Ok(None),
        };
        n += 1;
        inner += member_len(key.to_str()?, value);
    }
    Ok(Some(container_len(n, inner)))
}

/// `len(content.model_dump_json(exclude_none=True, fallback=str))` for a
/// `Content` of text parts (optionally thoughts) or `None`; `None` for any
/// other content, which the caller serializes.
#[pyfunction]
pub fn content_size(content: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    content_len(content)
}
