//! Binding of `core::recover`.

use super::error::{finish, Extracted};
use super::index::load::load_source;
use super::index::memos::filter::SUMMARY_BIT;
use super::index::memos::recovery::{recover_again, recover_same};
use super::reading::extract::Extractor;
use crate::core::event::Need;
use crate::core::guarded;
use crate::core::hash::FastMap;
use crate::core::recover::{self, Recovered};
use crate::core::EventView;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// `_recover_compacted_function_calls`: `events` itself when nothing is
/// re-injected, a new list otherwise, or `None` to decline. `by_id`:
/// google-adk 2.7 to 2.12's matching of calls to responses by id alone
/// ([`recover::recover_by_id`]; not remembered between calls), else 2.13's
/// by occurrence.
#[pyfunction]
#[pyo3(signature = (events, source_events, by_id = false))]
pub fn recover_compacted_function_calls<'py>(
    events: &Bound<'py, PyAny>,
    source_events: &Bound<'py, PyAny>,
    by_id: bool,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    finish(
        events.py(),
        "_recover_compacted_function_calls",
        run(events, source_events, by_id),
    )
}

fn run<'py>(
    events: &Bound<'py, PyAny>,
    source_events: &Bound<'py, PyAny>,
    by_id: bool,
) -> Extracted<Bound<'py, PyAny>> {
    let py = events.py();
    let list = Extractor::list(events)?;
    let need = Need {
        parts: true,
        ..Need::default()
    };
    if let (false, Ok(source_list)) = (by_id, Extractor::list(source_events)) {
        if recover_again(list, source_list)? {
            return Ok(events.clone());
        }
        if let Some(result) = recover_same(list, source_list)? {
            return Ok(PyList::new(
                py,
                result
                    .iter()
                    .map(|r| match *r {
                        Recovered::Kept(i) => list.get_item(i),
                        Recovered::Injected(j) => source_list.get_item(j),
                    })
                    .collect::<PyResult<Vec<_>>>()?,
            )?
            .into_any());
        }
    }
    let mut source = load_source(source_events, need)?;
    // The filtered list holds the source's own objects in source order,
    // and summaries (of this session's cache, mostly): a cursor over the
    // source finds the former, the summary cache the latter; a map over
    // the source only when an object is out of order.
    let summaries = source.summaries_by_address();
    let mut by_ident: Option<FastMap<u64, usize>> = None;
    let mut cursor = 0;
    let mut objects = Vec::with_capacity(list.len());
    let mut views = Vec::with_capacity(list.len());
    // What each item is, for remembering the call (see
    // `Loaded::remember_recovery`): a source position, or a plain summary's
    // slot; `None` once an item is neither.
    let mut entries: Option<Vec<u32>> = Some(Vec::with_capacity(list.len()));
    // Whether each item is a source object (for remembering a
    // re-injection, see `Loaded::remember_reinjection`).
    let mut in_source = Vec::with_capacity(list.len());
    // Positions of the items neither in the source nor cached summaries.
    let mut unknown: Vec<usize> = Vec::new();
    // Checking a cached summary reads a few cold objects; their loads are
    // started some items ahead.
    const AHEAD: usize = 8;
    let items: Vec<Bound<'py, PyAny>> = super::reading::prefetch::list_items(list);
    let summary_at = |k: usize| {
        items
            .get(k)
            .and_then(|obj| summaries.get(&(obj.as_ptr() as usize)))
            .copied()
    };
    for k in 0..AHEAD {
        if let Some(slot) = summary_at(k) {
            source.prefetch_summary_of(slot);
        }
    }
    for (k, obj) in items.iter().enumerate() {
        if let Some(slot) = summary_at(k + AHEAD) {
            source.prefetch_summary_of(slot);
        }
        let obj = obj.clone();
        let ident = obj.as_ptr() as u64;
        let summary = summaries.get(&(ident as usize)).copied();
        let found = if summary.is_some() {
            None
        } else if let Some(map) = &by_ident {
            map.get(&ident).copied()
        } else {
            let ahead = &source.views[cursor.min(source.views.len())..];
            match ahead.iter().position(|v| v.ident == ident) {
                Some(k) => Some(cursor + k),
                None => {
                    let map: FastMap<u64, usize> = source
                        .views
                        .iter()
                        .enumerate()
                        .map(|(j, v)| (v.ident, j))
                        .collect();
                    let j = map.get(&ident).copied();
                    by_ident = Some(map);
                    j
                }
            }
        };
        in_source.push(found.is_some());
        let view = match (found, summary) {
            (Some(j), _) => {
                cursor = j + 1;
                if let Some(e) = entries.as_mut() {
                    e.push(j as u32);
                }
                source.views[j]
            }
            (None, Some(slot)) => {
                let view = source.summary_view(slot, &obj, need)?;
                match entries.as_mut() {
                    Some(e) if source.plain_summary(slot) => e.push(slot | SUMMARY_BIT),
                    _ => entries = None,
                }
                view
            }
            (None, None) => {
                entries = None;
                unknown.push(k);
                EventView::default()
            }
        };
        views.push(view);
        objects.push(obj);
    }
    // Items that are neither (summaries built for this call, mostly) are
    // read together, staged as any batch is.
    if !unknown.is_empty() {
        let read: Vec<Bound<'py, PyAny>> = unknown.iter().map(|&k| objects[k].clone()).collect();
        for (&k, &view) in unknown.iter().zip(source.ex.views(&read, need)?.iter()) {
            views[k] = view;
        }
    }
    let ids = &source.ex.ids;
    let source_views = &source.views;
    let result = py.detach(|| {
        guarded(|| match by_id {
            true => recover::recover_by_id(&views, source_views, ids),
            false => recover::recover_compacted_function_calls(&views, source_views, ids),
        })
    })?;
    let Some(order) = result else {
        if let (false, Some(entries)) = (by_id, entries) {
            source.remember_recovery(entries);
        }
        return Ok(events.clone());
    };
    let out = PyList::new(
        py,
        order.iter().map(|r| match *r {
            Recovered::Kept(i) => &objects[i],
            Recovered::Injected(j) => &source.objects[j],
        }),
    )?;
    if !by_id {
        source.remember_reinjection(&objects, &in_source, order);
    }
    Ok(out.into_any())
}
