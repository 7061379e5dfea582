//! The summary Events handed out for compaction events, cached while what
//! they were built from is unchanged (the cache is `Tracked::summaries`;
//! calls use it through `compactions`).

use super::objects::points_at;
use crate::py::reading::version_tag;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// A summary Event handed out for a compaction event, and what it was
/// built from and with: it is handed out again only while all of that is
/// unchanged.
pub(super) struct Summary {
    /// What it was built from (see [`Origin`]).
    pub(super) origin: Origin,
    pub(super) author: Py<PyString>,
    pub(super) event: Py<PyAny>,
    /// What shows it unchanged since it was handed out (see [`Unchanged`]).
    pub(super) unchanged: Unchanged,
    /// Bytes it holds (see `summary_size`), measured when cached.
    pub(super) bytes: usize,
    /// Its `content` when it was cached, held (so an identical address
    /// means the same object): call recovery trusts what it knows of the
    /// slot's compacted content while the summary still has it.
    pub(super) content: Py<PyAny>,
    /// Its `node_info` when it was cached, held: while the summary's dict
    /// is unchanged it still holds this object, whose dict is then read
    /// without a lookup in the summary's. `None` for an Event without one
    /// (google-adk 1.x).
    pub(super) node: Option<Py<PyAny>>,
}

/// What a cached summary was built from, and so for which objects it is
/// handed out again.
pub(super) enum Origin {
    /// A compaction event object, weakly (a live weak reference at its
    /// address names it; held strongly, superseded session copies'
    /// compaction events would die in our next call): for that object.
    Object(Py<PyAny>),
    /// The stored original its slot holds strongly (the object a session
    /// service deep-copies for every invocation), held: the values in
    /// `Tracked::sources`, which are that original's own (its `actions`
    /// and compacted content among them). Handed out for the original and
    /// for every deep copy of it bound to the slot, while the slot holds
    /// that original with the same values: a copy's summary then equals
    /// google-adk's in every field, but its `actions` and `content` are the
    /// original's (equal objects; google-adk's are the copy's).
    Primary(Py<PyAny>),
}

impl Origin {
    pub(super) fn as_ptr(&self) -> *mut ffi::PyObject {
        match self {
            Origin::Object(p) | Origin::Primary(p) => p.as_ptr(),
        }
    }
}

/// How a cached summary is shown to be as it was built: its instance dict
/// and its `node_info`'s (a mutable model some agents write into; Events
/// of google-adk 1.x have none) are the same dicts with the same contents.
pub(super) enum Unchanged {
    /// Their addresses and version tags (`version_tag`): a dict gets a new
    /// tag when created and on every change, so equal pairs mean unchanged
    /// contents, read in two words per dict.
    Tags {
        dict: (usize, u64),
        node: Option<(usize, u64)>,
    },
    /// Where tags are not readable: their values in order, held (so an
    /// identical address means an unchanged value).
    Values {
        dict: Vec<Py<PyAny>>,
        node: Option<Vec<Py<PyAny>>>,
    },
}

/// A summary's `node_info` and that one's instance dict.
type NodeDict<'py> = (Bound<'py, PyAny>, Bound<'py, PyDict>);

/// The instance dict of a summary Event and its `node_info` with that
/// one's instance dict (`None` where Events have no `node_info`: google-adk
/// 1.x), or `None` when it no longer has that shape.
type SummaryDicts<'py> = (Bound<'py, PyDict>, Option<NodeDict<'py>>);

pub(super) fn summary_dicts<'py>(event: &Bound<'py, PyAny>) -> PyResult<Option<SummaryDicts<'py>>> {
    let Some(dict) = generic_dict(event) else {
        return Ok(None);
    };
    let Some(node) = dict.get_item(intern!(event.py(), "node_info"))? else {
        return Ok(Some((dict, None)));
    };
    Ok(generic_dict(&node).map(|node_dict| (dict, Some((node, node_dict)))))
}

/// The address and version tag of `obj`'s instance dict, where tags are
/// readable (see `version_tag`).
pub(super) fn dict_state(obj: &Bound<'_, PyAny>) -> Option<(usize, u64)> {
    let dict = generic_dict(obj)?;
    Some((dict.as_ptr() as usize, version_tag::tag(&dict)?))
}

/// `obj`'s instance dict as `object.__dict__` gives it (what `__dict__`
/// gives for the models a summary is made of, which do not redefine it),
/// without the attribute lookup; `None` when it has none.
fn generic_dict<'py>(obj: &Bound<'py, PyAny>) -> Option<Bound<'py, PyDict>> {
    // SAFETY: `obj` is live; PyObject_GenericGetDict returns a new reference
    // to its instance dict, or NULL with an exception set (cleared here).
    let dict = unsafe {
        Bound::from_owned_ptr_or_opt(
            obj.py(),
            ffi::PyObject_GenericGetDict(obj.as_ptr(), std::ptr::null_mut()),
        )
    };
    if dict.is_none() {
        // SAFETY: clears the exception the failed call set.
        unsafe { ffi::PyErr_Clear() };
    }
    dict.and_then(|d| d.cast_into_exact::<PyDict>().ok())
}

impl Unchanged {
    /// The state of a summary's dicts now.
    pub(super) fn of(dict: &Bound<'_, PyDict>, node: Option<&Bound<'_, PyDict>>) -> Self {
        let tagged = |d: &Bound<'_, PyDict>| version_tag::tag(d).map(|t| (d.as_ptr() as usize, t));
        let values = |d: &Bound<'_, PyDict>| d.iter().map(|(_, v)| v.unbind()).collect();
        match (tagged(dict), node.map(tagged)) {
            (Some(dict), None) => Unchanged::Tags { dict, node: None },
            (Some(dict), Some(Some(node))) => Unchanged::Tags {
                dict,
                node: Some(node),
            },
            _ => Unchanged::Values {
                dict: values(dict),
                node: node.map(values),
            },
        }
    }

    /// Whether the dicts are as they were.
    pub(super) fn holds(&self, dict: &Bound<'_, PyDict>, node: Option<&Bound<'_, PyDict>>) -> bool {
        match self {
            Unchanged::Tags { dict: d, node: n } => {
                let same = |d: &Bound<'_, PyDict>, &(addr, tag): &(usize, u64)| {
                    d.as_ptr() as usize == addr && version_tag::tag(d) == Some(tag)
                };
                same(dict, d)
                    && match (node, n) {
                        (None, None) => true,
                        (Some(node), Some(n)) => same(node, n),
                        _ => false,
                    }
            }
            Unchanged::Values { dict: d, node: n } => {
                same_values(dict, d)
                    && match (node, n) {
                        (None, None) => true,
                        (Some(node), Some(n)) => same_values(node, n),
                        _ => false,
                    }
            }
        }
    }

    /// References it holds.
    pub(super) fn held(&self) -> usize {
        match self {
            Unchanged::Tags { .. } => 0,
            Unchanged::Values { dict, node } => dict.len() + node.as_ref().map_or(0, Vec::len),
        }
    }
}

impl Summary {
    /// Whether the summary is still as built, for the compaction event
    /// `event` and `author` (see [`Origin`]); `primary(original)` says
    /// whether `event` is bound to the slot that holds `original`.
    pub(super) fn valid(
        &self,
        primary: impl FnOnce(&Py<PyAny>) -> bool,
        event: &Bound<'_, PyAny>,
        author: &Bound<'_, PyString>,
    ) -> PyResult<bool> {
        let py = event.py();
        let ours = match &self.origin {
            Origin::Object(weak) => points_at(weak, event.as_ptr()),
            Origin::Primary(original) => primary(original),
        };
        if !ours
            || !(self.author.is(author) || self.author.bind(py).to_str()? == author.to_str()?)
        {
            return Ok(false);
        }
        Ok(self.unchanged_now(py))
    }

    /// Whether its dict and its `node_info`'s are as they were cached. The
    /// node is the one held: an unchanged summary dict still holds it (by
    /// tag, or by comparing the values, `node_info` among them).
    pub(super) fn unchanged_now(&self, py: Python<'_>) -> bool {
        let Some(dict) = generic_dict(self.event.bind(py)) else {
            return false;
        };
        let node = match &self.node {
            Some(node) => match generic_dict(node.bind(py)) {
                Some(node) => Some(node),
                None => return false,
            },
            None => None,
        };
        self.unchanged.holds(&dict, node.as_ref())
    }

    /// Starts loading what [`Summary::valid`] reads: the weak reference,
    /// the summary and its node (and the line before each, where CPython
    /// keeps a managed dict's pointer), and their dicts when known by
    /// address.
    pub(super) fn prefetch(&self) {
        use crate::py::reading::prefetch::prefetch;
        let before = |p: *mut ffi::PyObject| p.cast::<u8>().wrapping_sub(24).cast();
        prefetch(self.origin.as_ptr());
        for p in [Some(&self.event), self.node.as_ref()]
            .into_iter()
            .flatten()
        {
            prefetch(p.as_ptr());
            prefetch(before(p.as_ptr()));
        }
        if let Unchanged::Tags { dict, node } = &self.unchanged {
            prefetch(dict.0 as *const ffi::PyObject);
            if let Some(node) = node {
                prefetch(node.0 as *const ffi::PyObject);
            }
        }
    }
}

/// Whether `dict`'s values are the objects `then` holds, in order.
fn same_values(dict: &Bound<'_, PyDict>, then: &[Py<PyAny>]) -> bool {
    dict.len() == then.len() && dict.iter().zip(then).all(|((_, now), then)| now.is(then))
}

/// What a summary Event holds: its own sizes (`__sizeof__`) and those of
/// its dict, fields set, `node_info` and `node_info`'s dict (where it has
/// one), plus our references to its values.
pub(super) fn summary_size(
    event: &Bound<'_, PyAny>,
    node: Option<&NodeDict<'_>>,
    values: usize,
) -> PyResult<usize> {
    let py = event.py();
    let mut bytes = values * 8;
    let mut held = vec![
        event.clone(),
        event.getattr(intern!(py, "__dict__"))?,
        event.getattr(intern!(py, "__pydantic_fields_set__"))?,
    ];
    if let Some((node, node_dict)) = node {
        held.extend([node.clone(), node_dict.clone().into_any()]);
    }
    for obj in held {
        bytes += obj
            .call_method0(intern!(py, "__sizeof__"))?
            .extract::<usize>()?;
    }
    Ok(bytes)
}
