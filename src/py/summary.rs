//! Summary Events built in Rust, equal to the ones google-adk materializes.
//!
//! `_process_compaction_events` builds one `Event(timestamp=end, author=...,
//! content=compacted_content, branch=..., isolation_scope=...,
//! invocation_id=..., actions=...)` per surviving compaction through full
//! pydantic validation. `adk_fastcompact._summaries` shows why that result
//! is a template Event's instance dict with those seven values, a fresh
//! `NodeInfo()` and a drawn id put in place; this module does the same
//! without a Python frame per summary, for the case where drawing the id is
//! unobservable (google-adk's default provider, `str(uuid.uuid4())`): the
//! ids are version-4 UUIDs made from one `os.urandom` call per batch, as
//! `uuid.uuid4()` makes each from `os.urandom(16)`.
//!
//! Arguments of another type than validation keeps as is are left to the
//! caller's Python builder (which validates, as google-adk does).
//! `tests/parity/test_summaries.py` compares the results with google-adk's.

use super::error::{Extracted, Outcome};
use super::reading::extract::{model_dict, types};
use crate::core::uuid::uuid4_text;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyFrozenSet, PyString, PyType};

/// The template parts `adk_fastcompact._summaries.native_template()` gives.
struct Template {
    event: Py<PyType>,
    values: Py<PyDict>,
    fields_set: Py<PyFrozenSet>,
    node_info: Py<PyType>,
    node_values: Py<PyDict>,
    node_fields_set: Py<PyFrozenSet>,
    urandom: Py<PyAny>,
    /// Whether summaries carry their compaction event's isolation scope
    /// (google-adk 2.13 passes it; before, the template's default stays).
    scoped: bool,
}

/// `native_template()`'s tuple: the Event type, its template dict and
/// fields set, and the same three for `NodeInfo`.
type Parts<'py> = (
    Bound<'py, PyType>,
    Bound<'py, PyDict>,
    Bound<'py, PyFrozenSet>,
    Bound<'py, PyType>,
    Bound<'py, PyDict>,
    Bound<'py, PyFrozenSet>,
);

static TEMPLATE: PyOnceLock<Option<Template>> = PyOnceLock::new();

/// The template, or `None` when `native_template()` declined to give one.
fn template(py: Python<'_>) -> PyResult<Option<&'static Template>> {
    let template = TEMPLATE.get_or_try_init(py, || {
        let parts = py
            .import("adk_fastcompact._summaries")?
            .call_method0("native_template")?;
        if parts.is_none() {
            return Ok::<_, PyErr>(None);
        }
        let (event, values, fields_set, node_info, node_values, node_fields_set): Parts<'_> =
            parts.extract()?;
        let scoped = fields_set.contains(intern!(py, "isolation_scope"))?;
        Ok(Some(Template {
            scoped,
            event: event.unbind(),
            values: values.unbind(),
            fields_set: fields_set.unbind(),
            node_info: node_info.unbind(),
            node_values: node_values.unbind(),
            node_fields_set: node_fields_set.unbind(),
            urandom: py.import("os")?.getattr("urandom")?.unbind(),
        }))
    })?;
    Ok(template.as_ref())
}

/// Builds summaries of one call's compaction events, drawing their ids
/// from one batch of random bytes.
pub struct Builder<'py> {
    py: Python<'py>,
    template: &'static Template,
    random: Vec<u8>,
    used: usize,
}

/// Random bytes fetched per `os.urandom` call, in ids.
const IDS_PER_BATCH: usize = 256;

impl<'py> Builder<'py> {
    /// A builder for about `expected` summaries, or `None` when there is
    /// no usable template (every summary is then built by the caller).
    pub fn new(py: Python<'py>, expected: usize) -> PyResult<Option<Self>> {
        let Some(template) = template(py)? else {
            return Ok(None);
        };
        let mut builder = Builder {
            py,
            template,
            random: Vec::new(),
            used: 0,
        };
        builder.refill(expected.clamp(1, IDS_PER_BATCH))?;
        Ok(Some(builder))
    }

    fn refill(&mut self, ids: usize) -> PyResult<()> {
        let bytes = self.template.urandom.bind(self.py).call1((16 * ids,))?;
        self.random = bytes.cast_into::<PyBytes>()?.as_bytes().to_vec();
        self.used = 0;
        Ok(())
    }

    /// A new `str(uuid.uuid4())`.
    fn new_id(&mut self) -> PyResult<Bound<'py, PyString>> {
        if self.used + 16 > self.random.len() {
            self.refill(IDS_PER_BATCH)?;
        }
        let mut b = [0u8; 16];
        b.copy_from_slice(&self.random[self.used..self.used + 16]);
        self.used += 16;
        Ok(PyString::new(self.py, &uuid4_text(b)))
    }

    /// The summary of the compaction event `event` for `author`, or `None`
    /// when an argument is not of the exact type validation keeps as is
    /// (the caller then builds it through validation).
    pub fn build(
        &mut self,
        event: &Bound<'py, PyAny>,
        author: &Bound<'py, PyString>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        match Source::read(event)? {
            Some(source) => self.build_from(&source, author).map(Some),
            None => Ok(None),
        }
    }

    /// The summary of a compaction event whose values are `source`'s.
    pub fn build_from(
        &mut self,
        source: &Source<Bound<'py, PyAny>>,
        author: &Bound<'py, PyString>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let tpl = self.template;
        let values = tpl.values.bind(py).copy()?;
        values.set_item(intern!(py, "timestamp"), &source.timestamp)?;
        values.set_item(intern!(py, "author"), author)?;
        values.set_item(intern!(py, "content"), &source.content)?;
        values.set_item(intern!(py, "branch"), &source.branch)?;
        if tpl.scoped {
            values.set_item(intern!(py, "isolation_scope"), &source.scope)?;
        }
        values.set_item(intern!(py, "invocation_id"), &source.invocation)?;
        values.set_item(intern!(py, "actions"), &source.actions)?;
        let node = self.model(
            &tpl.node_info,
            tpl.node_values.bind(py).copy()?,
            &tpl.node_fields_set,
        )?;
        values.set_item(intern!(py, "node_info"), node)?;
        // The id is drawn last, as `model_post_init` draws it.
        values.set_item(intern!(py, "id"), self.new_id()?)?;
        self.model(&tpl.event, values, &tpl.fields_set)
    }

    /// A model instance of `cls` with instance dict `values`, fields set a
    /// copy of `fields_set`, and neither extra nor private values, as
    /// `object.__new__` plus `object.__setattr__` make it.
    fn model(
        &self,
        cls: &Py<PyType>,
        values: Bound<'py, PyDict>,
        fields_set: &Py<PyFrozenSet>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        // SAFETY: `cls` is a live type (a pydantic model class, which keeps
        // `object.__new__`: PyType_GenericNew allocates as it does, through
        // the type's tp_alloc, ignoring arguments); a new reference or NULL
        // with an exception set.
        let obj = unsafe {
            Bound::from_owned_ptr_or_err(
                py,
                ffi::PyType_GenericNew(
                    cls.as_ptr().cast::<ffi::PyTypeObject>(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                ),
            )?
        };
        // SAFETY: PySet_New copies an iterable (a frozenset: its table is
        // copied directly) into a new set, or returns NULL with an
        // exception set.
        let fields_set =
            unsafe { Bound::from_owned_ptr_or_err(py, ffi::PySet_New(fields_set.as_ptr()))? };
        let none = py.None().into_bound(py);
        for (name, value) in [
            (intern!(py, "__dict__"), values.as_any()),
            (intern!(py, "__pydantic_fields_set__"), fields_set.as_any()),
            (intern!(py, "__pydantic_extra__"), &none),
            (intern!(py, "__pydantic_private__"), &none),
        ] {
            // SAFETY: three live objects; `PyObject_GenericSetAttr` is
            // `object.__setattr__`, which bypasses pydantic's `__setattr__`
            // exactly as `_summaries` does.
            let rc = unsafe {
                ffi::PyObject_GenericSetAttr(obj.as_ptr(), name.as_ptr(), value.as_ptr())
            };
            if rc != 0 {
                return Err(PyErr::fetch(py));
            }
        }
        Ok(obj)
    }
}

/// What a summary takes from its compaction event: `actions`, its
/// compaction's `end_timestamp` and `compacted_content`, and the event's
/// `branch`, `isolation_scope` and `invocation_id`, each of the exact type
/// validation keeps as is; borrowed for a call (`Bound`) or held (`Py`).
pub struct Source<T> {
    pub timestamp: T,
    pub content: T,
    pub branch: T,
    pub scope: T,
    pub invocation: T,
    pub actions: T,
}

/// The values held across calls (see `index::Tracked::sources`).
pub type HeldSource = Source<Py<PyAny>>;

impl HeldSource {
    /// The values, borrowed for a call.
    pub fn bind<'py>(&self, py: Python<'py>) -> Source<Bound<'py, PyAny>> {
        Source {
            timestamp: self.timestamp.bind(py).clone(),
            content: self.content.bind(py).clone(),
            branch: self.branch.bind(py).clone(),
            scope: self.scope.bind(py).clone(),
            invocation: self.invocation.bind(py).clone(),
            actions: self.actions.bind(py).clone(),
        }
    }
}

impl<'py> Source<Bound<'py, PyAny>> {
    /// The values, held.
    pub fn unbind(self) -> HeldSource {
        Source {
            timestamp: self.timestamp.unbind(),
            content: self.content.unbind(),
            branch: self.branch.unbind(),
            scope: self.scope.unbind(),
            invocation: self.invocation.unbind(),
            actions: self.actions.unbind(),
        }
    }

    /// Reads `event` through the instance dicts (no attribute protocol);
    /// `None` when a value is not of the type validation keeps as is.
    pub fn read(event: &Bound<'py, PyAny>) -> PyResult<Option<Self>> {
        let py = event.py();
        let t = types(py)?;
        let read = || -> Extracted<_> {
            let fields = model_dict(event, &t.event, "")?;
            let get = |dict: &Bound<'py, PyDict>, key: &Bound<'py, PyString>| {
                dict.get_item(key)?.ok_or(Outcome::Decline(""))
            };
            let actions = get(&fields, intern!(py, "actions"))?;
            let compaction = get(
                &model_dict(&actions, &t.actions, "")?,
                intern!(py, "compaction"),
            )?;
            let compaction_fields = model_dict(&compaction, &t.compaction, "")?;
            Ok(Source {
                timestamp: get(&compaction_fields, intern!(py, "end_timestamp"))?,
                content: get(&compaction_fields, intern!(py, "compacted_content"))?,
                branch: get(&fields, intern!(py, "branch"))?,
                scope: get(&fields, intern!(py, "isolation_scope"))?,
                invocation: get(&fields, intern!(py, "invocation_id"))?,
                actions,
            })
        };
        let source = match read() {
            Ok(source) => source,
            Err(Outcome::Decline(_)) => return Ok(None),
            Err(Outcome::Error(err)) => return Err(err),
        };
        let optional_str =
            |v: &Bound<'py, PyAny>| v.is_none() || v.is_exact_instance_of::<PyString>();
        let exact = source.timestamp.is_exact_instance_of::<PyFloat>()
            && t.content.accepts(&source.content.get_type())
            && source.invocation.is_exact_instance_of::<PyString>()
            && optional_str(&source.branch)
            && optional_str(&source.scope);
        Ok(exact.then_some(source))
    }
}
