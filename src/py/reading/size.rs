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
use super::extract::instance_dict;
use crate::core::json_size::{bool_len, container_len, member_len, string_len};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList, PyString};

/// The characters of a model instance's JSON with `None` fields left out,
/// each other field written in `field(name, value)` characters; `None`
/// where `field` answers `None` (a field this sizing does not know how
/// pydantic writes) or the instance has no plain dict.
fn object_len(
    obj: &Bound<'_, PyAny>,
    mut field: impl FnMut(&str, &Bound<'_, PyAny>) -> PyResult<Option<usize>>,
) -> PyResult<Option<usize>> {
    let Some(dict) = instance_dict(obj)? else {
        return Ok(None);
    };
    let (mut n, mut inner) = (0usize, 0usize);
    for (key, value) in dict.iter() {
        if value.is_none() {
            continue;
        }
        let Ok(key) = key.cast_exact::<PyString>() else {
            return Ok(None);
        };
        let key = key.to_str()?;
        let Some(len) = field(key, &value)? else {
            return Ok(None);
        };
        n += 1;
        inner += member_len(key, len);
    }
    Ok(Some(container_len(n, inner)))
}

/// The characters of an exact `str`, `None` for anything else (or a string
/// that is not valid UTF-8).
fn str_len(value: &Bound<'_, PyAny>) -> Option<usize> {
    let s = value.cast_exact::<PyString>().ok()?;
    s.to_str().ok().map(string_len)
}

/// The characters of `part`'s JSON, or `None` where it holds a field this
/// sizing does not know how pydantic writes.
fn part_len(part: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    if !types(part.py())?.part.is_library(&part.get_type()) {
        return Ok(None);
    }
    object_len(part, |key, value| {
        Ok(match key {
            "text" => str_len(value),
            "thought" => value
                .cast_exact::<PyBool>()
                .ok()
                .map(|b| bool_len(b.is_true())),
            _ => None,
        })
    })
}

/// The characters of `content`'s JSON as google-adk weighs it (0 for
/// `None`), or `None` where it is not a content of text parts sized here.
pub fn content_len(content: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    if content.is_none() {
        return Ok(Some(0));
    }
    if !types(content.py())?.content.is_library(&content.get_type()) {
        return Ok(None);
    }
    object_len(content, |key, value| match key {
        "role" => Ok(str_len(value)),
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
            Ok(Some(container_len(parts.len(), items)))
        }
        _ => Ok(None),
    })
}

/// `len(content.model_dump_json(exclude_none=True, fallback=str))` for a
/// `Content` of text parts (optionally thoughts) or `None`; `None` for any
/// other content, which the caller serializes.
#[pyfunction]
pub fn content_size(content: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    content_len(content)
}
