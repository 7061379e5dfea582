//! Reading single values of google-adk's and google-genai's models: as the
//! drop-ins for google-adk's per-event scans compare them (`scans`,
//! `tasks`: exact `str` or `None`, Python truthiness, model dicts; any
//! other kind declines), a `str` argument's text, and the request content
//! an item of the filtered history carries.

use super::extract::{model_dict, Model};
use crate::core::filter::Item;
use crate::py::error::{Extracted, Outcome};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString};

/// `dict[key]`, declining with `what` when the key is missing (a model
/// built without the field: google-adk's code decides what that means).
#[inline]
pub fn get<'py>(
    dict: &Bound<'py, PyDict>,
    key: &Bound<'py, PyString>,
    what: &'static str,
) -> Extracted<Bound<'py, PyAny>> {
    dict.get_item(key)?.ok_or(Outcome::Decline(what))
}

/// Python truthiness, without a call for the common kinds.
#[inline]
pub fn truthy(value: &Bound<'_, PyAny>) -> PyResult<bool> {
    if value.is_none() {
        Ok(false)
    } else if let Ok(b) = value.cast_exact::<PyBool>() {
        Ok(b.is_true())
    } else if value.is_exact_instance_of::<PyString>() {
        Ok(value.len()? > 0)
    } else if let Ok(l) = value.cast_exact::<PyList>() {
        Ok(!l.is_empty())
    } else {
        value.is_truthy()
    }
}

/// `None` or an exact `str`; anything else declines with `what`.
#[inline]
pub fn optional_str<'a>(
    value: &'a Bound<'_, PyAny>,
    what: &'static str,
) -> Extracted<Option<&'a str>> {
    if value.is_none() {
        return Ok(None);
    }
    match value.cast_exact::<PyString>() {
        Ok(s) => Ok(Some(s.to_str().map_err(|_| Outcome::Decline(what))?)),
        Err(_) => Err(Outcome::Decline(what)),
    }
}

/// A non-empty `str` or `None` (google-adk tests these by truthiness).
#[inline]
pub fn truthy_str<'a>(
    value: &'a Bound<'_, PyAny>,
    what: &'static str,
) -> Extracted<Option<&'a str>> {
    Ok(optional_str(value, what)?.filter(|s| !s.is_empty()))
}

/// The dict of `value` when it is a `model`; `None` when it is `None`.
#[inline]
pub fn optional_model<'py>(
    value: &Bound<'py, PyAny>,
    model: &Model,
    what: &'static str,
) -> Extracted<Option<Bound<'py, PyDict>>> {
    if value.is_none() {
        Ok(None)
    } else {
        model_dict(value, model, what).map(Some)
    }
}

/// A `str` argument's text (`Some(None)` for `None`), or `None` for any
/// other value.
pub fn text(value: &Bound<'_, PyAny>) -> Option<Option<Box<str>>> {
    if value.is_none() {
        return Some(None);
    }
    let s = value.cast_exact::<PyString>().ok()?;
    Some(Some(s.to_str().ok()?.into()))
}

/// The request content an item of the filtered history carries: a raw
/// event's `content`, a summary's `compacted_content`.
pub fn request_content<'py>(event: &Bound<'py, PyAny>, item: Item) -> PyResult<Bound<'py, PyAny>> {
    let py = event.py();
    match item {
        Item::Raw(_) => event.getattr(intern!(py, "content")),
        Item::Summary(_) => event
            .getattr(intern!(py, "actions"))?
            .getattr(intern!(py, "compaction"))?
            .getattr(intern!(py, "compacted_content")),
    }
}
