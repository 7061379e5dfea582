//! What a call asks its session's index about the compaction events of its
//! list: the summary Events handed out before (`Tracked::summaries`), the
//! values a stored original gives its summaries, exact mode's coverage
//! records, and the call-recovery view of a summary.

use super::load::Loaded;
use super::objects::weak_ref_with;
use super::registry::{registry, REGISTRY};
use super::summaries::{summary_dicts, summary_size, Origin, Summary, Unchanged};
use super::tracked::Tracked;
use crate::core::event::Need;
use crate::core::exact::Parsed;
use crate::core::hash::FastMap;
use crate::core::slot_table::Slot;
use crate::core::EventView;
use crate::py::error::Extracted;
use crate::py::summary;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::sync::Arc;

impl<'py> Loaded<'py> {
    /// The summaries this session's index holds, by the address of the
    /// summary Event (held by the cache, so the address names it).
    pub fn summaries_by_address(&self) -> FastMap<usize, Slot> {
        match &self.checkout {
            Some((_, t)) => t
                .summaries
                .iter()
                .map(|(&slot, s)| (s.event.as_ptr() as usize, slot))
                .collect(),
            None => FastMap::default(),
        }
    }

    /// The call-recovery view of the cached summary of slot `slot`, `obj`
    /// itself, read with `need` unless its content is the one it was cached
    /// with and the slot's summaries are known to hold neither calls nor
    /// responses (see `Tracked::plain`; objects are trusted not to change
    /// in place, as everywhere in the index).
    pub fn summary_view(
        &mut self,
        slot: Slot,
        obj: &Bound<'py, PyAny>,
        need: Need,
    ) -> Extracted<EventView> {
        if let Some(view) = self
            .checkout
            .as_ref()
            .and_then(|(_, t)| t.plain_summary_view(slot, obj.as_ptr(), obj.py()))
        {
            return Ok(EventView {
                ident: obj.as_ptr() as u64,
                ..*view
            });
        }
        let content = obj.getattr(intern!(obj.py(), "content"))?;
        let cached = |t: &Tracked| {
            t.summaries
                .get(&slot)
                .is_some_and(|s| s.content.is(&content))
        };
        if let Some((_, t)) = &self.checkout {
            if let Some(view) = t.plain.get(&slot).filter(|_| cached(t)) {
                return Ok(EventView {
                    ident: obj.as_ptr() as u64,
                    ..*view
                });
            }
        }
        let view = self.ex.event(obj, need)?;
        let plain = view.calls.len == 0 && view.responses.len == 0 && !view.has_responses;
        if let Some((_, t)) = &mut self.checkout {
            if cached(t) {
                if plain {
                    t.plain.insert(slot, view);
                } else {
                    t.plain.remove(&slot);
                }
            }
        }
        Ok(view)
    }

    /// Whether what recovery knows of slot `slot`'s cached summary is that
    /// it holds neither calls nor responses (see `Tracked::plain`).
    pub fn plain_summary(&self, slot: Slot) -> bool {
        self.checkout
            .as_ref()
            .is_some_and(|(_, t)| t.plain.contains_key(&slot))
    }

    /// What the summary of the compaction event at `i` of the list takes
    /// from the stored original its slot holds strongly (see
    /// [`Origin::Primary`]), when the event is that original or a deep copy
    /// of it bound to the slot: read from the original once per binding
    /// (`Tracked::sources`), never from a copy. `None` otherwise, or when
    /// a value is not of the type validation keeps as is.
    pub fn primary_values(
        &mut self,
        i: usize,
    ) -> PyResult<Option<summary::Source<Bound<'py, PyAny>>>> {
        let obj = self.object(i).cloned();
        let (Some((_, t)), Some(&slot), Some(obj)) = (&mut self.checkout, self.slots.get(i), obj)
        else {
            return Ok(None);
        };
        let py = obj.py();
        if slot == Slot::MAX || !t.bound(slot, obj.as_ptr()) {
            return Ok(None);
        }
        let Some(original) = t.primary_source(slot).map(|o| o.bind(py).clone()) else {
            return Ok(None);
        };
        let src = match t.sources.entry(slot) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => match summary::Source::read(&original)?
            {
                Some(src) => e.insert(src.unbind()),
                None => return Ok(None),
            },
        };
        Ok(Some(src.bind(py)))
    }

    /// Exact mode's coverage record of `obj`, the compaction event at `i`
    /// of the list, `parse`d off the stored original its slot holds strongly when
    /// the event is that original or a deep copy of it bound to the slot
    /// (once per binding, as [`Loaded::primary_values`] reads summaries'
    /// values: a session service deep-copies the originals for every
    /// invocation), off the event otherwise.
    pub fn record_at(
        &mut self,
        i: usize,
        obj: &Bound<'py, PyAny>,
        parse: impl Fn(&Bound<'py, PyAny>) -> PyResult<Parsed>,
    ) -> PyResult<Arc<Parsed>> {
        let (Some((_, t)), Some(&slot), true) =
            (&mut self.checkout, self.slots.get(i), self.at.is_empty())
        else {
            return parse(obj).map(Arc::new);
        };
        let py = obj.py();
        let original = match slot != Slot::MAX && t.bound(slot, obj.as_ptr()) {
            true => t.primary_source(slot).map(|o| o.bind(py).clone()),
            false => None,
        };
        let Some(original) = original else {
            return parse(obj).map(Arc::new);
        };
        if let Some(known) = t.records.get(&slot) {
            return Ok(known.clone());
        }
        let parsed = Arc::new(parse(&original)?);
        t.records.insert(slot, parsed.clone());
        Ok(parsed)
    }

    /// Starts loading what checking the cached summary of the compaction
    /// event at `i` of the list reads (see [`Loaded::cached_summary`]);
    /// issued some summaries ahead, so that their cache misses overlap.
    pub fn prefetch_summary(&self, i: usize) {
        if let Some(&slot) = self.slots.get(i) {
            self.prefetch_summary_of(slot);
        }
    }

    /// [`Loaded::prefetch_summary`] for the cached summary of slot `slot`.
    pub fn prefetch_summary_of(&self, slot: Slot) {
        if let Some(summary) = self
            .checkout
            .as_ref()
            .and_then(|(_, t)| t.summaries.get(&slot))
        {
            summary.prefetch();
        }
    }

    /// The summary handed out before for the compaction event at `i` of
    /// the list, when it, the event and the author are unchanged.
    pub fn cached_summary(
        &self,
        i: usize,
        author: &Bound<'py, PyString>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let (Some((_, tracked)), Some(&slot)) = (&self.checkout, self.slots.get(i)) else {
            return Ok(None);
        };
        let Some(event) = self.object(i) else {
            return Ok(None);
        };
        // Whether `event` is bound to the slot that holds the stored
        // original a summary was built from (see `Origin::Primary`).
        let primary = |original: &Py<PyAny>| {
            tracked.primary_source(slot).is_some_and(|o| o.is(original))
                && tracked.bound(slot, event.as_ptr())
        };
        match tracked.summaries.get(&slot) {
            Some(summary) if summary.valid(primary, event, author)? => {
                registry().counters.summaries_reused += 1;
                Ok(Some(summary.event.bind(author.py()).clone()))
            }
            _ => {
                registry().counters.summaries_built += 1;
                Ok(None)
            }
        }
    }

    /// Remembers `event` as the summary of the compaction event at `i`;
    /// returns its size in bytes (`summary_size`), measured unless `bytes`
    /// gives it (summaries built alike have one size), or `None` when it is
    /// not cached (its compaction event is not in the index).
    pub fn cache_summary(
        &mut self,
        i: usize,
        author: &Bound<'py, PyString>,
        event: &Bound<'py, PyAny>,
        bytes: Option<usize>,
        from_primary: bool,
    ) -> PyResult<Option<usize>> {
        let Some(compaction_event) = self.object(i).cloned() else {
            return Ok(None);
        };
        let (Some((key, tracked)), Some(&slot)) = (&mut self.checkout, self.slots.get(i)) else {
            return Ok(None);
        };
        if slot == Slot::MAX {
            return Ok(None);
        }
        let Some((dict, node)) = summary_dicts(event)? else {
            return Ok(None);
        };
        let Some(content) = dict.get_item(intern!(event.py(), "content"))? else {
            return Ok(None);
        };
        let unchanged = Unchanged::of(&dict, node.as_ref().map(|(_, d)| d));
        let origin = match tracked.primary_source(slot) {
            Some(original) if from_primary => Origin::Primary(original.clone_ref(event.py())),
            _ => {
                let reaper = Bound::new(
                    event.py(),
                    Reaper {
                        key: key.clone(),
                        slot,
                    },
                )?;
                Origin::Object(weak_ref_with(&compaction_event, reaper.as_any())?)
            }
        };
        let bytes = match bytes {
            Some(bytes) => bytes,
            None => summary_size(event, node.as_ref(), unchanged.held())?,
        };
        tracked.summaries.insert(
            slot,
            Summary {
                bytes,
                origin,
                author: author.clone().unbind(),
                event: event.clone().unbind(),
                unchanged,
                content: content.unbind(),
                node: node.map(|(node, _)| node.unbind()),
            },
        );
        Ok(Some(bytes))
    }
}

/// The callback of a cached summary's weak reference to its compaction
/// event: when that event dies (a superseded session copy's, usually), the
/// summary goes with it, so what it holds (the copy's `actions` and
/// content) is freed with the copy and not by our next call. Skipped when
/// the registry is busy or the index checked out (the entry is then
/// replaced by the next call that builds the summary anew).
#[pyclass(frozen)]
pub(super) struct Reaper {
    pub(super) key: Box<str>,
    pub(super) slot: Slot,
}

#[pymethods]
impl Reaper {
    fn __call__(&self, weak: &Bound<'_, PyAny>) {
        let taken =
            match REGISTRY.try_lock() {
                Ok(mut reg) => reg.sessions.get_mut(&self.key).and_then(|t| {
                    match t.summaries.get(&self.slot) {
                        Some(s) if s.origin.as_ptr() == weak.as_ptr() => {
                            t.summaries.remove(&self.slot)
                        }
                        _ => None,
                    }
                }),
                Err(_) => None,
            };
        // Dropped with the registry unlocked: freeing it may run callbacks.
        drop(taken);
    }
}
