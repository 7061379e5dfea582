//! The model classes extraction reads, and the subclasses read like them.
//!
//! Extraction reads fields from instance dicts, so it must know that the
//! object's class reads like the model it was written for: the model
//! itself, or a subclass that `adk_fastcompact._classes.reads_like` proved
//! changes nothing about reading an instance (google-genai's `UserContent`
//! and `ModelContent`, which streaming apps store). Library subclasses are
//! proven once, when the types are first imported; any other class met in
//! a read model's place makes that call decline, and its verdict is then
//! computed once (outside the extraction, where running Python code cannot
//! disturb what the extraction holds) and remembered for every later call.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyTuple, PyType};
use std::cell::RefCell;
use std::sync::Mutex;

/// A model class extraction reads, with the subclasses read like it.
pub struct Model {
    base: Py<PyType>,
    /// google-genai / google-adk subclasses proven to read like `base`.
    like: Vec<Py<PyType>>,
}

impl Model {
    /// Whether an object of type `ty` is read like `base`. A class neither
    /// `base` nor a proven library subclass is looked up among the
    /// verdicts learned so far; an unknown one is noted for
    /// [`learn_pending`] and refused for now.
    #[inline]
    pub fn accepts(&self, ty: &Bound<'_, PyType>) -> bool {
        ty.is(&self.base) || self.like.iter().any(|t| ty.is(t)) || self.learned(ty)
    }

    #[cold]
    fn learned(&self, ty: &Bound<'_, PyType>) -> bool {
        let base = self.base.as_ptr() as usize;
        let key = ty.as_ptr() as usize;
        if let Ok(verdicts) = VERDICTS.lock() {
            if let Some(v) = verdicts.iter().find(|v| v.base == base && v.class == key) {
                return v.reads_like;
            }
        }
        PENDING.with_borrow_mut(|p| {
            if p.is_none() {
                *p = Some((self.base.clone_ref(ty.py()), ty.clone().unbind()));
            }
        });
        false
    }

    /// Whether `ty` is the model or one of the library subclasses proven
    /// to read like it (never a class learned at run time).
    #[inline]
    pub fn is_library(&self, ty: &Bound<'_, PyType>) -> bool {
        ty.is(&self.base) || self.like.iter().any(|t| ty.is(t))
    }

    /// The model class itself.
    pub fn base(&self) -> &Py<PyType> {
        &self.base
    }
}

/// The model classes extraction accepts, imported once per interpreter.
pub struct Types {
    pub event: Model,
    pub actions: Model,
    pub compaction: Model,
    pub content: Model,
    pub part: Model,
    pub function_call: Model,
    pub function_response: Model,
    pub usage: Model,
    /// Whether Events have an `isolation_scope` field (google-adk 2.x; 1.x
    /// Events have none, and their scope reads as `None`).
    pub scoped_events: bool,
}

static TYPES: PyOnceLock<Types> = PyOnceLock::new();

/// The cached model classes (`adk_fastcompact._classes.read_models()`).
pub fn types(py: Python<'_>) -> PyResult<&'static Types> {
    TYPES.get_or_try_init(py, || {
        let models = py
            .import("adk_fastcompact._classes")?
            .call_method0("read_models")?;
        let model = |name: &str| -> PyResult<Model> {
            let (base, like): (Bound<'_, PyType>, Bound<'_, PyTuple>) =
                models.get_item(name)?.extract()?;
            let like = like
                .iter()
                .map(|t| Ok(t.cast_into::<PyType>()?.unbind()))
                .collect::<PyResult<_>>()?;
            Ok(Model {
                base: base.unbind(),
                like,
            })
        };
        Ok(Types {
            event: model("event")?,
            actions: model("actions")?,
            compaction: model("compaction")?,
            content: model("content")?,
            part: model("part")?,
            function_call: model("function_call")?,
            function_response: model("function_response")?,
            usage: model("usage")?,
            scoped_events: models
                .get_item("event")?
                .get_item(0)?
                .getattr("model_fields")?
                .contains("isolation_scope")?,
        })
    })
}

/// A verdict on a class met in a model's place. The class is held, so its
/// address names it for as long as the verdict is kept.
struct Verdict {
    base: usize,
    class: usize,
    held: Py<PyType>,
    reads_like: bool,
}

/// Verdicts learned so far, at most [`MAX_VERDICTS`] (beyond that, other
/// classes keep declining: a program making classes without end must not
/// grow this list without end).
static VERDICTS: Mutex<Vec<Verdict>> = Mutex::new(Vec::new());
const MAX_VERDICTS: usize = 256;

thread_local! {
    /// The first unknown class the current call met: `(model, class)`.
    static PENDING: RefCell<Option<(Py<PyType>, Py<PyType>)>> = const { RefCell::new(None) };
}

/// Decides the class a declined call met unknown, if any, by asking
/// `adk_fastcompact._classes.reads_like`, and remembers the verdict. Runs
/// after the extraction ended, so Python code may run.
pub fn learn_pending(py: Python<'_>) {
    let Some((base, class)) = PENDING.with_borrow_mut(Option::take) else {
        return;
    };
    let reads_like = py
        .import("adk_fastcompact._classes")
        .and_then(|m| m.call_method1("reads_like", (&base, &class)))
        .and_then(|v| v.extract::<bool>())
        .unwrap_or(false);
    if let Ok(mut verdicts) = VERDICTS.lock() {
        let (b, c) = (base.as_ptr() as usize, class.as_ptr() as usize);
        if verdicts.len() < MAX_VERDICTS && !verdicts.iter().any(|v| v.base == b && v.class == c) {
            verdicts.push(Verdict {
                base: b,
                class: c,
                held: class,
                reads_like,
            });
        }
    }
}

/// The verdicts learned so far: `(model, class, reads_like)`, for
/// `index_stats()`.
pub fn learned_verdicts(py: Python<'_>) -> Vec<(String, String, bool)> {
    let name = |t: &Py<PyType>| {
        t.bind(py)
            .qualname()
            .map(|n| n.to_string())
            .unwrap_or_default()
    };
    let Ok(t) = types(py) else {
        return Vec::new();
    };
    let models = [
        &t.event,
        &t.actions,
        &t.compaction,
        &t.content,
        &t.part,
        &t.function_call,
        &t.function_response,
        &t.usage,
    ];
    // Copied out first: naming a class reads its attributes, which may run
    // Python code (and let another thread wait for this lock with the GIL).
    let held: Vec<(usize, Py<PyType>, bool)> = match VERDICTS.lock() {
        Ok(verdicts) => verdicts
            .iter()
            .map(|v| (v.base, v.held.clone_ref(py), v.reads_like))
            .collect(),
        Err(_) => return Vec::new(),
    };
    held.into_iter()
        .map(|(base, class, reads_like)| {
            let model = models
                .iter()
                .find(|m| m.base.as_ptr() as usize == base)
                .map(|m| name(&m.base))
                .unwrap_or_default();
            let class = class.bind(py);
            let class = format!(
                "{}.{}",
                class.module().map(|m| m.to_string()).unwrap_or_default(),
                class.qualname().map(|n| n.to_string()).unwrap_or_default()
            );
            (model, class, reads_like)
        })
        .collect()
}
