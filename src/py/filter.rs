//! Binding of `core::filter`.

use super::error::{finish, Extracted, Outcome};
use super::index::load::{load, Loaded};
use super::index::memos::filter::filter_again;
use super::reading::extract::Extractor;
use super::reading::read::request_content;
use super::select::Selected;
use super::summary;
use crate::core::event::Need;
use crate::core::filter::{self, Item, PresenceDiff};
use crate::core::guarded;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

/// What prompt filtering reads of every event.
const FILTER: Need = Need {
    timestamp: true,
    compaction: true,
    rewind: false,
    invocation: false,
    parts: false,
    window: false,
    pairing: false,
    usage: false,
};

/// `_process_compaction_events`: the filtered history, or `None` to decline.
///
/// `make_summary(event)` materializes the summary of a compaction event; it
/// is called once per surviving compaction in event order, as google-adk
/// constructs them, so id providers see the same sequence of calls. With
/// `reuse_for` (the summaries' author), a summary handed out before for the
/// same compaction event object and author is handed out again while
/// neither it nor its values changed, instead of building a new one, and
/// new ones are built in Rust (`summary.rs`, `make_summary` only for
/// arguments it leaves to validation); the caller passes it only when
/// building draws no observable id.
#[pyfunction]
#[pyo3(signature = (events, make_summary, reuse_for = None))]
pub fn process_compaction_events<'py>(
    events: &Bound<'py, PyAny>,
    make_summary: &Bound<'py, PyAny>,
    reuse_for: Option<&Bound<'py, PyString>>,
) -> PyResult<Option<Bound<'py, PyList>>> {
    finish(
        events.py(),
        "_process_compaction_events",
        run(events, make_summary, reuse_for),
    )
}

fn run<'py>(
    events: &Bound<'py, PyAny>,
    make_summary: &Bound<'py, PyAny>,
    reuse_for: Option<&Bound<'py, PyString>>,
) -> Extracted<Bound<'py, PyList>> {
    let py = events.py();
    let need = FILTER;
    let list = Extractor::list(events)?;
    let (mut batch, items) = match filter_again(list, need)? {
        Some(again) => again,
        None => {
            let mut batch = load(events, need)?;
            let views = std::mem::take(&mut batch.views);
            let (items, extension) =
                py.detach(|| guarded(|| filter::process_extensibly(&views)))?;
            batch.remember_filter(&items, extension);
            (batch, items)
        }
    };
    materialize(&mut batch, &items, make_summary, reuse_for)
}

/// The filtered history `items` names in `batch`: raw events are the
/// batch's objects, summaries `make_summary(event)` of their compaction
/// events, called in creation order, or with `reuse_for` (see
/// [`process_compaction_events`]) the summaries cached for them or built in
/// Rust.
pub fn materialize<'py>(
    batch: &mut Loaded<'py>,
    items: &[Item],
    make_summary: &Bound<'py, PyAny>,
    reuse_for: Option<&Bound<'py, PyString>>,
) -> Extracted<Bound<'py, PyList>> {
    let py = make_summary.py();
    let mut summaries: Vec<Option<Bound<'py, PyAny>>> = vec![None; batch.len()];
    let order = filter::summaries_in_creation_order(items);
    // Summaries built in Rust (only where ids are unobservable) all have one
    // size, measured on the first.
    let mut builder = None;
    let mut built_bytes = None;
    // Checking a cached summary reads a few cold objects; their loads are
    // started some summaries ahead.
    const AHEAD: usize = 8;
    let reuse = reuse_for.is_some();
    if reuse {
        for &index in order.iter().take(AHEAD) {
            batch.prefetch_summary(index);
        }
    }
    for (k, &index) in order.iter().enumerate() {
        if let Some(&ahead) = order.get(k + AHEAD).filter(|_| reuse) {
            batch.prefetch_summary(ahead);
        }
        // Every item's object is taken (see `filter_again`); a miss is our
        // bug and hands the call to the reference implementation.
        let event = &batch
            .object(index)
            .ok_or(Outcome::Decline("internal error"))?
            .clone();
        let Some(author) = reuse_for else {
            summaries[index] = Some(make_summary.call1((event,))?);
            continue;
        };
        if let Some(summary) = batch.cached_summary(index, author)? {
            summaries[index] = Some(summary);
            continue;
        }
        if builder.is_none() {
            builder = Some(summary::Builder::new(py, order.len())?);
        }
        // Built from the stored original's values when the event is it or
        // a deep copy of it (see `index::Origin`), else from the event's.
        let built = match builder.as_mut().and_then(Option::as_mut) {
            Some(b) => match batch.primary_values(index)? {
                Some(values) => Some((b.build_from(&values, author)?, true)),
                None => b.build(event, author)?.map(|s| (s, false)),
            },
            None => None,
        };
        let summary = match built {
            Some((summary, from_primary)) => {
                built_bytes = batch
                    .cache_summary(index, author, &summary, built_bytes, from_primary)?
                    .or(built_bytes);
                summary
            }
            None => {
                let summary = make_summary.call1((event,))?;
                batch.cache_summary(index, author, &summary, None, false)?;
                summary
            }
        };
        summaries[index] = Some(summary);
    }
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        out.push(match *item {
            Item::Raw(i) => batch.object(i).ok_or(Outcome::Decline("internal error"))?,
            // Every summary index was materialized above; a miss is our bug
            // and hands the call to the reference implementation.
            Item::Summary(i) => summaries[i]
                .as_ref()
                .ok_or(Outcome::Decline("internal error"))?,
        });
    }
    Ok(PyList::new(py, out)?)
}

/// For `_prompt_chars_saved`: `(removed, added, materialized)`, the request
/// contents (`Content | None`) that appending `compaction_event` to `events`
/// removes from and adds to the filtered history, and how many summary
/// Events google-adk builds (drawing an id each) while measuring that; or
/// `None` to decline. With `selected` (what the window selection that
/// handed out `events` read of them), the events are not read again when
/// `events` is that list, unchanged.
#[pyfunction]
#[pyo3(signature = (events, compaction_event, selected = None))]
pub fn prompt_chars_delta<'py>(
    events: &Bound<'py, PyAny>,
    compaction_event: &Bound<'py, PyAny>,
    selected: Option<&Bound<'py, Selected>>,
) -> PyResult<Option<Delta<'py>>> {
    finish(
        events.py(),
        "_prompt_chars_saved",
        run_delta(events, compaction_event, selected),
    )
}

/// `(removed, added, materialized)`.
type Delta<'py> = (Bound<'py, PyList>, Bound<'py, PyList>, usize);

fn run_delta<'py>(
    events: &Bound<'py, PyAny>,
    compaction_event: &Bound<'py, PyAny>,
    selected: Option<&Bound<'py, Selected>>,
) -> Extracted<Delta<'py>> {
    let py = events.py();
    let need = FILTER;
    if let Some((held, history)) = selected.and_then(|s| s.get().history_of(events)) {
        let extra = Extractor::new(py)?.event(compaction_event, need)?;
        // `None`: extending the history declines (a NaN sort key); the
        // events are then read and filtered in full.
        if let Some(diff) = guarded(|| Ok(history.diff(extra)))? {
            return delta(&diff, compaction_event, held.len(), |i| {
                held.get(i).map(|o| o.bind(py).clone())
            });
        }
    }
    let mut loaded = load(events, need)?;
    let views = std::mem::take(&mut loaded.views);
    // The batch's own extractor: its arena is the index's while the index
    // is checked out, and goes back with it.
    let extra = loaded.ex.event(compaction_event, need)?;
    let n = views.len();
    let diff = py.detach(move || guarded(|| filter::presence_diff(&views, extra)))?;
    let objects = std::mem::take(&mut loaded.objects);
    delta(&diff, compaction_event, n, |i| objects.get(i).cloned())
}

/// The request contents `diff` removes and adds, with the summaries it
/// materializes; `object(i)` is the event at `i` of the `n` events, and
/// position `n` is `compaction_event`.
fn delta<'py>(
    diff: &PresenceDiff,
    compaction_event: &Bound<'py, PyAny>,
    n: usize,
    object: impl Fn(usize) -> Option<Bound<'py, PyAny>>,
) -> Extracted<Delta<'py>> {
    let py = compaction_event.py();
    let contents = |items: &[Item]| -> Extracted<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for &item in items {
            let (Item::Raw(i) | Item::Summary(i)) = item;
            // A position past `n` is our bug and hands the call to the
            // reference implementation.
            let event = match i == n {
                true => compaction_event.clone(),
                false => object(i).ok_or(Outcome::Decline("internal error"))?,
            };
            out.append(request_content(&event, item)?)?;
        }
        Ok(out)
    };
    Ok((
        contents(&diff.removed)?,
        contents(&diff.added)?,
        diff.materialized,
    ))
}
