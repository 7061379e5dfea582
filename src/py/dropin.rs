//! What makes a native drop-in (`scans::ContextFilter`,
//! `tasks::TaskScope`, `tasks::TaskDelegations`) read as the google-adk
//! function it replaces: its `__name__`, `__qualname__`, `__module__`,
//! `__doc__` and `__signature__` (set on the instance, as `functools.wraps`
//! sets them on a wrapper), and google-adk's own `TypeError` for a wrong
//! call.
//!
//! A drop-in's `__call__` takes `*args`, every parameter of google-adk's
//! function as an optional keyword ([`Given`]) and `**extra`, so that PyO3
//! raises no argument error of its own (its errors name
//! `ContextFilter.__call__` and word some cases their own way: "takes 1
//! positional arguments") and a correct call costs what a plain signature
//! costs (no keyword dict is copied). [`Params::bind`] then binds the call
//! as Python binds it to google-adk's function; a call that does not bind
//! goes to google-adk's function with the same arguments ([`Params::call`]),
//! whose binding raises its own `TypeError` before any of its code runs.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// One parameter of a drop-in's `__call__`, given by keyword or not (a
/// `None` given stays given, unlike an `Option` argument's).
pub enum Given<'py> {
    Missing,
    Value(Bound<'py, PyAny>),
}

impl<'a, 'py> FromPyObject<'a, 'py> for Given<'py> {
    type Error = PyErr;

    #[inline]
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Given::Value(obj.to_owned()))
    }
}

/// The parameters of google-adk's function, as a drop-in binds a call:
/// `names` in order, the first `positional` positional-or-keyword (the
/// first `required` of them without a default), the rest keyword-only with
/// defaults.
pub struct Params<const N: usize> {
    pub names: [&'static str; N],
    pub positional: usize,
    pub required: usize,
}

/// A call's arguments by parameter (`None`: not given), borrowed from the
/// call's tuple and keywords.
pub type Args<'a, 'py, const N: usize> = [Option<Borrowed<'a, 'py, PyAny>>; N];

impl<const N: usize> Params<N> {
    /// The call's arguments by parameter, or `None` where Python would not
    /// bind the call (`args`, the `keywords` given by name, the `extra`
    /// keywords no parameter has) to google-adk's function: too many
    /// positional arguments, an unknown keyword, a value given twice, a
    /// required one missing.
    #[inline]
    pub fn bind<'a, 'py>(
        &self,
        args: &'a Bound<'py, PyTuple>,
        keywords: &'a [Given<'py>; N],
        extra: Option<&Bound<'py, PyDict>>,
    ) -> Option<Args<'a, 'py, N>> {
        let given = args.len();
        if extra.is_some() || given > self.positional {
            return None;
        }
        let mut slots: Args<'a, 'py, N> = [None; N];
        for (k, (slot, keyword)) in slots.iter_mut().zip(keywords).enumerate() {
            let positional = (k < given)
                .then(|| args.get_borrowed_item(k).ok())
                .flatten();
            *slot = match (positional, keyword) {
                (Some(_), Given::Value(_)) => return None,
                (Some(value), Given::Missing) => Some(value),
                (None, Given::Value(value)) => Some(value.as_borrowed()),
                (None, Given::Missing) if k < self.required => return None,
                (None, Given::Missing) => None,
            };
        }
        Some(slots)
    }

    /// google-adk's function called with the call's arguments: `args`,
    /// then the keywords given by name, in parameter order, then `extra`
    /// in the call's order. (Where one call holds two keyword errors, an
    /// unknown keyword and a value given twice, google-adk's function may
    /// name another of them than it names for the call as written.)
    pub fn call<'py>(
        &self,
        original: &Bound<'py, PyAny>,
        args: &Bound<'py, PyTuple>,
        keywords: &[Given<'py>; N],
        extra: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let py = original.py();
        let given = keywords.iter().any(|k| matches!(k, Given::Value(_)));
        if !given {
            return Ok(original.call(args, extra)?.unbind());
        }
        let kwargs = PyDict::new(py);
        for (name, keyword) in self.names.iter().zip(keywords) {
            if let Given::Value(value) = keyword {
                kwargs.set_item(name, value)?;
            }
        }
        if let Some(extra) = extra {
            kwargs.update(extra.as_mapping())?;
        }
        Ok(original.call(args, Some(&kwargs))?.unbind())
    }

    /// Checks that `signature` (google-adk's function's
    /// `inspect.Signature`) has exactly these parameters, kinds and
    /// required ones.
    fn check(&self, signature: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = signature.py();
        let parameter = py.import("inspect")?.getattr("Parameter")?;
        let (empty, by_either, by_keyword) = (
            parameter.getattr("empty")?,
            parameter.getattr("POSITIONAL_OR_KEYWORD")?,
            parameter.getattr("KEYWORD_ONLY")?,
        );
        let parameters = signature
            .getattr(intern!(py, "parameters"))?
            .call_method0("values")?;
        let mut found = 0;
        for (k, p) in parameters.try_iter()?.enumerate() {
            let p = p?;
            let kind = if k < self.positional {
                &by_either
            } else {
                &by_keyword
            };
            let same = k < N
                && p.getattr("name")?.extract::<String>()? == self.names[k]
                && p.getattr("kind")?.eq(kind)?
                && p.getattr("default")?.is(&empty) == (k < self.required);
            if !same {
                break;
            }
            found += 1;
        }
        if found != N || parameters.len()? != N {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "google-adk's function takes {}, not the parameters ({}) this drop-in binds",
                signature.str()?,
                self.names.join(", ")
            )));
        }
        Ok(())
    }
}

/// Gives `made` (a drop-in) the names, docstring and signature of
/// `original` (google-adk's function), after checking that `original`
/// takes exactly `params`.
pub fn name_as<const N: usize>(
    made: &Bound<'_, PyAny>,
    original: &Bound<'_, PyAny>,
    params: &Params<N>,
) -> PyResult<()> {
    let signature = made
        .py()
        .import("inspect")?
        .call_method1("signature", (original,))?;
    params.check(&signature)?;
    for name in ["__name__", "__qualname__", "__module__", "__doc__"] {
        made.setattr(name, original.getattr(name)?)?;
    }
    made.setattr("__signature__", signature)
}

/// `__reduce__` of a drop-in: its qualified name, so that it pickles by
/// reference, as google-adk's function does (`__module__` is google-adk's).
pub fn reduce<'py>(made: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    made.getattr(intern!(made.py(), "__qualname__"))
}
