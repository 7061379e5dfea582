//! Reading google-adk `Event` objects into core views.
//!
//! Fields are read from each model's instance `__dict__` obtained with
//! `PyObject_GenericGetDict`: pydantic models define `__getattr__`, which
//! sends every ordinary C-level attribute lookup through a Python-level slot,
//! while the instance dict is a plain pointer read. Every object must be of
//! the exact google-adk / google-genai model type expected; anything else
//! (subclasses, foreign objects, `None` in a list, `str` subclasses, non-float
//! timestamps) declines, and the caller falls back to google-adk's own code.

use super::error::{Extracted, Outcome};
use crate::core::{CompactionView, EventView, Span, Sym};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyFloat, PyList, PyString, PyType};
use std::collections::HashMap;

/// The model types extraction accepts, imported once per interpreter.
pub struct Types {
    pub event: Py<PyType>,
    pub actions: Py<PyType>,
    pub compaction: Py<PyType>,
    pub content: Py<PyType>,
    pub part: Py<PyType>,
    pub function_call: Py<PyType>,
    pub function_response: Py<PyType>,
}

static TYPES: PyOnceLock<Types> = PyOnceLock::new();

fn import_type(py: Python<'_>, module: &str, name: &str) -> PyResult<Py<PyType>> {
    Ok(py
        .import(module)?
        .getattr(name)?
        .cast_into::<PyType>()?
        .unbind())
}

/// The cached model types.
pub fn types(py: Python<'_>) -> PyResult<&'static Types> {
    TYPES.get_or_try_init(py, || {
        Ok(Types {
            event: import_type(py, "google.adk.events.event", "Event")?,
            actions: import_type(py, "google.adk.events.event_actions", "EventActions")?,
            compaction: import_type(py, "google.adk.events.event_actions", "EventCompaction")?,
            content: import_type(py, "google.genai.types", "Content")?,
            part: import_type(py, "google.genai.types", "Part")?,
            function_call: import_type(py, "google.genai.types", "FunctionCall")?,
            function_response: import_type(py, "google.genai.types", "FunctionResponse")?,
        })
    })
}

/// The instance `__dict__` of `obj`, which must be exactly of type `ty`.
#[inline]
fn model_dict<'py>(
    obj: &Bound<'py, PyAny>,
    ty: &Py<PyType>,
    what: &'static str,
) -> Extracted<Bound<'py, PyDict>> {
    if !obj.get_type().is(ty) {
        return Err(Outcome::Decline(what));
    }
    // SAFETY: `obj` is a live object; PyObject_GenericGetDict returns a new
    // reference to its instance dict (creating it if needed) or NULL with an
    // exception set.
    let dict = unsafe {
        Bound::from_owned_ptr_or_err(
            obj.py(),
            ffi::PyObject_GenericGetDict(obj.as_ptr(), std::ptr::null_mut()),
        )
    }?;
    dict.cast_into::<PyDict>()
        .map_err(|_| Outcome::Decline(what))
}

/// `dict[key]`; a missing key declines (a model built without the field).
#[inline]
fn field<'py>(
    dict: &Bound<'py, PyDict>,
    key: &Bound<'py, PyString>,
    what: &'static str,
) -> Extracted<Bound<'py, PyAny>> {
    dict.get_item(key)?.ok_or(Outcome::Decline(what))
}

/// A field that must hold `None` or an object of exactly type `ty`; returns
/// the object's dict.
#[inline]
fn optional_model<'py>(
    dict: &Bound<'py, PyDict>,
    key: &Bound<'py, PyString>,
    ty: &Py<PyType>,
    what: &'static str,
) -> Extracted<Option<Bound<'py, PyDict>>> {
    let value = field(dict, key, what)?;
    if value.is_none() {
        Ok(None)
    } else {
        model_dict(&value, ty, what).map(Some)
    }
}

/// A float field: exactly `float` (Python compares ints and floats exactly,
/// which an `f64` cannot always reproduce, so anything else declines).
#[inline]
fn float_value(value: &Bound<'_, PyAny>, what: &'static str) -> Extracted<f64> {
    match value.cast_exact::<PyFloat>() {
        Ok(f) => Ok(f.value()),
        Err(_) => Err(Outcome::Decline(what)),
    }
}

/// `None` or a float.
#[inline]
fn optional_float(value: &Bound<'_, PyAny>, what: &'static str) -> Extracted<Option<f64>> {
    if value.is_none() {
        Ok(None)
    } else {
        float_value(value, what).map(Some)
    }
}

/// Interns non-empty exact `str` values into dense symbols. Only distinct
/// strings are copied, once each.
#[derive(Default)]
pub struct Interner {
    map: HashMap<Box<str>, Sym>,
}

impl Interner {
    /// The symbol of a `str | None` value; `None` and `""` are absent, as
    /// google-adk tests ids for truthiness.
    pub fn optional(
        &mut self,
        value: &Bound<'_, PyAny>,
        what: &'static str,
    ) -> Extracted<Option<Sym>> {
        if value.is_none() {
            return Ok(None);
        }
        let s = value
            .cast_exact::<PyString>()
            .map_err(|_| Outcome::Decline(what))?;
        // Strings with lone surrogates cannot be borrowed as UTF-8; rare
        // enough to leave to the reference implementation.
        let text = s.to_str().map_err(|_| Outcome::Decline(what))?;
        if text.is_empty() {
            return Ok(None);
        }
        if let Some(&sym) = self.map.get(text) {
            return Ok(Some(sym));
        }
        let sym = self.map.len() as Sym;
        self.map.insert(text.into(), sym);
        Ok(Some(sym))
    }
}

/// What an operation needs from each event.
#[derive(Clone, Copy, Default)]
pub struct Need {
    /// `timestamp`.
    pub timestamp: bool,
    /// `actions.compaction`.
    pub compaction: bool,
    /// `actions.rewind_before_invocation_id`.
    pub rewind: bool,
    /// Function call and response ids in `content.parts`.
    pub parts: bool,
}

/// Extracted views of one list of events plus the objects themselves (held
/// so identities stay valid and results can be built without re-reading the
/// list, which a Python callback could mutate).
pub struct Batch<'py> {
    pub objects: Vec<Bound<'py, PyAny>>,
    pub views: Vec<EventView>,
}

/// Reads events into views.
pub struct Extractor<'py> {
    py: Python<'py>,
    types: &'static Types,
    pub interner: Interner,
    /// Arena of function-call / response id symbols the views' spans index.
    pub ids: Vec<Sym>,
}

impl<'py> Extractor<'py> {
    /// A new extractor; imports the model types on first use.
    pub fn new(py: Python<'py>) -> PyResult<Self> {
        Ok(Extractor {
            py,
            types: types(py)?,
            interner: Interner::default(),
            ids: Vec::new(),
        })
    }

    /// The list itself; other sequences decline (google-adk accepts any
    /// iterable, and the reference implementation handles those).
    pub fn list<'a>(events: &'a Bound<'py, PyAny>) -> Extracted<&'a Bound<'py, PyList>> {
        events
            .cast::<PyList>()
            .map_err(|_| Outcome::Decline("events is not a list"))
    }

    /// Extracts every event of `list`.
    pub fn batch(&mut self, list: &Bound<'py, PyList>, need: Need) -> Extracted<Batch<'py>> {
        let n = list.len();
        let mut objects = Vec::with_capacity(n);
        let mut views = Vec::with_capacity(n);
        for obj in list.iter() {
            views.push(self.event(&obj, need)?);
            objects.push(obj);
        }
        Ok(Batch { objects, views })
    }

    /// Extracts one event.
    pub fn event(&mut self, obj: &Bound<'py, PyAny>, need: Need) -> Extracted<EventView> {
        let py = self.py;
        let t = self.types;
        let dict = model_dict(obj, &t.event, "not an Event")?;
        let mut view = EventView {
            ident: obj.as_ptr() as u64,
            ..Default::default()
        };
        if need.timestamp {
            view.timestamp = float_value(
                &field(&dict, intern!(py, "timestamp"), "timestamp")?,
                "timestamp",
            )?;
        }
        if need.compaction || need.rewind {
            if let Some(actions) =
                optional_model(&dict, intern!(py, "actions"), &t.actions, "actions")?
            {
                if need.rewind {
                    let target = field(
                        &actions,
                        intern!(py, "rewind_before_invocation_id"),
                        "rewind",
                    )?;
                    view.rewind_before = self.interner.optional(&target, "rewind")?;
                }
                if need.compaction {
                    if let Some(c) = optional_model(
                        &actions,
                        intern!(py, "compaction"),
                        &t.compaction,
                        "compaction",
                    )? {
                        view.compaction = Some(CompactionView {
                            start: optional_float(
                                &field(&c, intern!(py, "start_timestamp"), "start")?,
                                "start",
                            )?,
                            end: optional_float(
                                &field(&c, intern!(py, "end_timestamp"), "end")?,
                                "end",
                            )?,
                            has_content: !field(&c, intern!(py, "compacted_content"), "content")?
                                .is_none(),
                        });
                    }
                }
            }
        }
        if need.parts {
            self.parts(&dict, &mut view)?;
        }
        Ok(view)
    }

    /// `invocation_id` of an event already known to be an `Event`.
    pub fn invocation(&mut self, obj: &Bound<'py, PyAny>) -> Extracted<Option<Sym>> {
        let dict = model_dict(obj, &self.types.event, "not an Event")?;
        let value = field(&dict, intern!(self.py, "invocation_id"), "invocation_id")?;
        self.interner.optional(&value, "invocation_id")
    }

    fn parts(&mut self, dict: &Bound<'py, PyDict>, view: &mut EventView) -> Extracted<()> {
        let py = self.py;
        let t = self.types;
        let Some(content) = optional_model(dict, intern!(py, "content"), &t.content, "content")?
        else {
            return Ok(());
        };
        let parts = field(&content, intern!(py, "parts"), "parts")?;
        if parts.is_none() {
            return Ok(());
        }
        let parts = parts
            .cast_exact::<PyList>()
            .map_err(|_| Outcome::Decline("parts"))?;
        let mut responses: Vec<Sym> = Vec::new();
        let calls_start = self.ids.len() as u32;
        for part in parts.iter() {
            let part = model_dict(&part, &t.part, "part")?;
            if let Some(call) = optional_model(
                &part,
                intern!(py, "function_call"),
                &t.function_call,
                "call",
            )? {
                let id = field(&call, intern!(py, "id"), "call id")?;
                if let Some(sym) = self.interner.optional(&id, "call id")? {
                    self.ids.push(sym);
                }
            }
            if let Some(resp) = optional_model(
                &part,
                intern!(py, "function_response"),
                &t.function_response,
                "response",
            )? {
                view.has_responses = true;
                let id = field(&resp, intern!(py, "id"), "response id")?;
                if let Some(sym) = self.interner.optional(&id, "response id")? {
                    responses.push(sym);
                }
            }
        }
        view.calls = Span {
            start: calls_start,
            len: self.ids.len() as u32 - calls_start,
        };
        view.responses = Span {
            start: self.ids.len() as u32,
            len: responses.len() as u32,
        };
        self.ids.extend_from_slice(&responses);
        Ok(())
    }
}

/// A Python list of the given objects (new references to the same objects).
pub fn list_of<'py, 'a>(
    py: Python<'py>,
    items: impl ExactSizeIterator<Item = &'a Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyList>>
where
    'py: 'a,
{
    PyList::new(py, items)
}
