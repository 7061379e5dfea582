//! Binding of `core::window`.

use super::error::{finish, Extracted, Outcome};
use super::extract::{Extractor, Need};
use super::filter::request_content;
use super::index::load;
use super::scratch::Views;
use crate::core::filter::{self, Item};
use crate::core::ranges;
use crate::core::window::{self, SlidingWindow};
use crate::core::{guarded, rewind, EventView};
use pyo3::prelude::*;
use pyo3::types::PyList;

/// What window selection reads of every event.
const LIGHT: Need = Need {
    timestamp: true,
    compaction: true,
    rewind: true,
    invocation: true,
    parts: false,
    window: true,
    pairing: false,
    usage: false,
};

/// ... and of the events whose function calls it pairs.
const FULL: Need = Need {
    parts: true,
    pairing: true,
    ..LIGHT
};

/// A list a window selection handed out (the live history google-adk then
/// passes to `_prompt_chars_saved`), with what the selection read of its
/// events: their views for prompt filtering. `prompt_chars_delta` uses them
/// instead of reading the events again when it is given this very list,
/// unchanged (same length, the same object at every position; the handle
/// holds the objects, so an address cannot have been reused).
#[pyclass(frozen)]
pub struct Selected {
    list: Py<PyList>,
    objects: Vec<Py<PyAny>>,
    /// The views of the list's events (the selection's own buffer when
    /// every event is live, so nothing is copied).
    views: Views,
}

impl Selected {
    fn new<'py>(
        list: &Bound<'py, PyList>,
        objects: &[Bound<'py, PyAny>],
        views: Views,
        idx: &[usize],
    ) -> Self {
        Selected {
            list: list.clone().unbind(),
            objects: idx.iter().map(|&i| objects[i].clone().unbind()).collect(),
            views,
        }
    }

    /// The objects and views of `list`'s events, when it is the handed-out
    /// list unchanged. The views' spans name an arena of the selection's
    /// call: only their timestamps and compactions are to be read.
    pub fn views_of(&self, list: &Bound<'_, PyAny>) -> Option<(&[Py<PyAny>], &[EventView])> {
        let py = list.py();
        if !list.is(self.list.bind(py)) {
            return None;
        }
        let list = self.list.bind(py);
        if list.len() != self.objects.len() {
            return None;
        }
        // The handle holds every object it names: an item at one's address
        // is that object (compared without a reference taken per item).
        let same = match super::prefetch::item_addresses(list) {
            Some(items) => items
                .iter()
                .zip(&self.objects)
                .all(|(&item, then)| item == then.as_ptr() as usize),
            None => self
                .objects
                .iter()
                .enumerate()
                .all(|(i, then)| list.get_item(i).is_ok_and(|now| now.is(then))),
        };
        same.then_some((&self.objects[..], &self.views[..]))
    }
}

/// The list of `objects[idx]` a selection hands out, with its [`Selected`]
/// handle when it was priced (only a selection with something to compact
/// is summarized and priced): `views` are then the views of that list.
#[allow(clippy::type_complexity)]
fn handed_out<'py>(
    py: Python<'py>,
    objects: &[Bound<'py, PyAny>],
    views: Option<Views>,
    idx: &[usize],
) -> PyResult<(Bound<'py, PyList>, Option<Bound<'py, Selected>>)> {
    let list = objects_of(py, objects, idx)?;
    let selected = match views {
        Some(views) => Some(Bound::new(py, Selected::new(&list, objects, views, idx))?),
        None => None,
    };
    Ok((list, selected))
}

/// The views of `idx` (increasing): `views` itself when `idx` names them all
/// (the live events are usually all of them: no rewind, one scope).
fn subset(views: Views, idx: &[usize]) -> Views {
    if idx.len() == views.len() {
        return views;
    }
    let mut some = Views::with_capacity(idx.len());
    some.extend(idx.iter().map(|&i| views[i]));
    some
}

/// The live events of the session: rewinds applied, then only those `keep`s.
fn live(views: &[EventView], keep: impl Fn(&EventView) -> bool) -> Vec<usize> {
    rewind::apply_rewinds(views)
        .into_iter()
        .filter(|&i| keep(&views[i]))
        .collect()
}

/// Re-reads `indices` with their function-call data (`need`), once each.
fn read_calls<'py>(
    ex: &mut Extractor<'py>,
    objects: &[Bound<'py, PyAny>],
    views: &mut [EventView],
    full: &mut [bool],
    indices: &[usize],
    need: Need,
) -> Extracted<()> {
    let todo: Vec<usize> = indices.iter().copied().filter(|&i| !full[i]).collect();
    // Read together, staged as any batch is.
    let read: Vec<Bound<'py, PyAny>> = todo.iter().map(|&i| objects[i].clone()).collect();
    for (&i, &view) in todo.iter().zip(ex.views(&read, need)?.iter()) {
        views[i] = view;
        full[i] = true;
    }
    Ok(())
}

/// The pairing trim of `window`: the strict pass reads the window's calls;
/// only when its answer is not settled are the calls of all of `live` read
/// for google-adk's dead-call pass.
fn trim<'py>(
    ex: &mut Extractor<'py>,
    objects: &[Bound<'py, PyAny>],
    views: &mut [EventView],
    full: &mut [bool],
    window: &[usize],
    live: &[usize],
    need: Need,
) -> Extracted<usize> {
    read_calls(ex, objects, views, full, window, need)?;
    let (strict, settled) = guarded(|| Ok(window::strict_prefix(views, &ex.ids, window)))?;
    if settled {
        return Ok(strict);
    }
    read_calls(ex, objects, views, full, live, need)?;
    Ok(guarded(|| {
        Ok(window::longest_self_contained_prefix(
            views,
            &ex.ids,
            window,
            Some(live),
        ))
    })?)
}

fn objects_of<'py>(
    py: Python<'py>,
    all: &[Bound<'py, PyAny>],
    idx: &[usize],
) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, idx.iter().map(|&i| &all[i]))
}

/// What a sliding-window call needs besides the events: `(removed, added,
/// weightless_added, previous_summary, materialized)` for google-adk's "worth compacting"
/// check; see `run_compaction_for_sliding_window` in Python.
type Pricing<'py> = (
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    bool,
    Option<Bound<'py, PyAny>>,
    usize,
);

/// `(events, events_to_compact, pricing)`.
type SlidingOut<'py> = (
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    Option<Pricing<'py>>,
    Option<Bound<'py, Selected>>,
);

/// The sliding window of `_run_compaction_for_sliding_window`, or `None` to
/// decline.
///
/// Returns `events` (the session's live unscoped events), the window after
/// the pairing trim, and, when the window is not empty, what pricing it with
/// google-adk's weightless summary changes in the filtered history: the
/// request contents removed and added (besides the weightless summary's own
/// empty content, flagged separately) and the latest surviving summary's
/// compacted content.
#[pyfunction]
pub fn sliding_window<'py>(
    events: &Bound<'py, PyAny>,
    compaction_interval: i64,
    overlap_size: i64,
) -> PyResult<Option<SlidingOut<'py>>> {
    finish(run_sliding(events, compaction_interval, overlap_size))
}

fn run_sliding<'py>(
    events: &Bound<'py, PyAny>,
    interval: i64,
    overlap: i64,
) -> Extracted<SlidingOut<'py>> {
    let py = events.py();
    // google-adk validates these ranges; outside them its behaviour is its own.
    let (Ok(interval @ 1..), Ok(overlap)) = (usize::try_from(interval), usize::try_from(overlap))
    else {
        return Err(Outcome::Decline("config out of range"));
    };
    let cfg = SlidingWindow { interval, overlap };
    // Without the index, function-call data (content parts) is read only
    // where the decision looks at it: the window, and the whole live
    // session only when the pairing trim needs its second pass.
    let mut loaded = load(events, LIGHT)?;
    let objects = std::mem::take(&mut loaded.objects);
    let mut views = std::mem::take(&mut loaded.views);
    let live = live(&views, |e| e.scope.is_none());
    let candidates = guarded(|| Ok(window::sliding_window_candidates(&views, &live, cfg)))?;
    let mut full = vec![false; views.len()];
    let keep = trim(
        &mut loaded.ex,
        &objects,
        &mut views,
        &mut full,
        &candidates,
        &live,
        FULL,
    )?;
    let to_compact = &candidates[..keep];
    let (pricing, live_views) = if to_compact.is_empty() {
        (None, None)
    } else {
        let weightless = window::weightless_compaction(&views, to_compact);
        let live_views = subset(views, &live);
        let pricing = price(py, &objects, &live_views, &live, weightless)?;
        (Some(pricing), Some(live_views))
    };
    let (events, selected) = handed_out(py, &objects, live_views, &live)?;
    Ok((
        events,
        objects_of(py, &objects, to_compact)?,
        pricing,
        selected,
    ))
}

/// What google-adk's `_is_range_worth_compacting` measures, as presence
/// changes of the filtered live history when the weightless summary of
/// `range` is appended. `live_views` are the views of `objects[live]`.
fn price<'py>(
    py: Python<'py>,
    objects: &[Bound<'py, PyAny>],
    live_views: &[EventView],
    live: &[usize],
    weightless: Option<EventView>,
) -> Extracted<Pricing<'py>> {
    let weightless = weightless.ok_or(Outcome::Decline("internal error"))?;
    let diff = guarded(|| filter::presence_diff(live_views, weightless))?;
    let (removed, added) = (diff.removed, diff.added);
    let previous = ranges::compaction_ranges(live_views)
        .last()
        .map(|r| live[r.index]);
    let contents = |items: &[Item]| -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for &item in items {
            let (Item::Raw(k) | Item::Summary(k)) = item;
            if k < live.len() {
                out.append(request_content(&objects[live[k]], item)?)?;
            }
        }
        Ok(out)
    };
    let weightless_added = added.contains(&Item::Summary(live.len()));
    let previous = match previous {
        Some(i) => Some(request_content(&objects[i], Item::Summary(i))?),
        None => None,
    };
    Ok((
        contents(&removed)?,
        contents(&added)?,
        weightless_added,
        previous,
        diff.materialized,
    ))
}

/// What the token-threshold path decides before the summarizer.
type TokenOut<'py> = (
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    Option<i64>,
    Bound<'py, PyList>,
    Option<Bound<'py, PyAny>>,
    Option<Pricing<'py>>,
    Option<Bound<'py, Selected>>,
);

/// The token-threshold inputs of `_run_compaction_for_token_threshold_config`:
/// `(rewound_events, events, observed_prompt_token_count, events_to_compact,
/// seed_compaction_event, pricing)`, or `None` to decline. `events` are the
/// rewound events of `isolation_scope`; the count is `None` where google-adk
/// falls back to its estimate; `events_to_compact` excludes the
/// rolling-summary seed, which google-adk builds from
/// `seed_compaction_event` when set; `pricing` is as for `sliding_window`,
/// with the seed's timestamp priced first, as google-adk does.
#[pyfunction]
pub fn token_threshold_selection<'py>(
    events: &Bound<'py, PyAny>,
    isolation_scope: &Bound<'py, PyAny>,
    event_retention_size: i64,
    agent_name: &Bound<'py, PyAny>,
) -> PyResult<Option<TokenOut<'py>>> {
    finish(run_token(
        events,
        isolation_scope,
        event_retention_size,
        agent_name,
    ))
}

fn run_token<'py>(
    events: &Bound<'py, PyAny>,
    isolation_scope: &Bound<'py, PyAny>,
    retention: i64,
    agent_name: &Bound<'py, PyAny>,
) -> Extracted<TokenOut<'py>> {
    let py = events.py();
    let Ok(retention) = usize::try_from(retention) else {
        return Err(Outcome::Decline("config out of range"));
    };
    let mut loaded = load(
        events,
        Need {
            usage: true,
            ..LIGHT
        },
    )?;
    let ex = &mut loaded.ex;
    let scope = ex.interner.nullable(isolation_scope, "isolation_scope")?;
    let agent = ex.interner.optional(agent_name, "agent_name")?;
    let objects = std::mem::take(&mut loaded.objects);
    let mut views = std::mem::take(&mut loaded.views);
    let rewound = live(&views, |_| true);
    let scoped: Vec<usize> = rewound
        .iter()
        .copied()
        .filter(|&i| views[i].scope == scope)
        .collect();
    let count = window::latest_prompt_token_count(&views, &scoped, agent);
    let candidates = guarded(|| Ok(window::token_candidates(&views, &scoped)))?;
    // Function-call data only where the decision reads it (see run_sliding).
    let need = Need {
        usage: true,
        ..FULL
    };
    let mut full = vec![false; views.len()];
    let ex = &mut loaded.ex;
    read_calls(
        ex,
        &objects,
        &mut views,
        &mut full,
        &candidates.candidates,
        need,
    )?;
    let window =
        guarded(|| Ok(window::token_window(&views, &ex.ids, &candidates, retention).to_vec()))?;
    let keep = trim(ex, &objects, &mut views, &mut full, &window, &scoped, need)?;
    let selection = window::finish_token_selection(&views, &candidates, &window[..keep]);
    let (pricing, live_views) = if selection.to_compact.is_empty() {
        (None, None)
    } else {
        let seed_ts = selection
            .seed_from
            .and_then(|i| views[i].compaction)
            .and_then(|c| c.start);
        let stamps = seed_ts
            .into_iter()
            .chain(selection.to_compact.iter().map(|&i| views[i].timestamp));
        let weightless = window::weightless_over(stamps);
        let live_views = subset(views, &scoped);
        let pricing = price(py, &objects, &live_views, &scoped, weightless)?;
        (Some(pricing), Some(live_views))
    };
    let (events, selected) = handed_out(py, &objects, live_views, &scoped)?;
    Ok((
        objects_of(py, &objects, &rewound)?,
        events,
        count,
        objects_of(py, &objects, &selection.to_compact)?,
        selection.seed_from.map(|i| objects[i].clone()),
        pricing,
        selected,
    ))
}
