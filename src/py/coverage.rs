//! Binding of `core::coverage`: exact mode's prompt, windows and records.
//!
//! Each call reads the events' views and, of every compaction event, its
//! coverage record (`custom_metadata["adk_fastcompact"]`). A record that is
//! not used (malformed, foreign, later version, oversized, inconsistent) is
//! reported back as `(index, reason)` and its compaction read as its
//! interval; the Python side warns (`_exact`).

use super::error::{finish, Extracted, Outcome};
use super::extract::{Extractor, Need};
use super::filter::materialize;
use super::index::{
    encode_item, exact_again, exact_prompt_again, load, ExactAnswer, ExactAsked, Loaded,
};
use super::scratch::Views;
use crate::core::coverage::{self, Coverage};
use crate::core::event::EventView;
use crate::core::exact::{Extent, Hole, Key, Record, METADATA_KEY};
use crate::core::filter::Item;
use crate::core::{guarded, Sym};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use std::sync::Arc;

/// What exact mode's prompt reads of every event: what parity's reads
/// (the invocation ids a hole names are read only where a record has one).
const PROMPT: Need = Need {
    timestamp: true,
    compaction: true,
    ..Need::NONE
};

/// What exact mode's window selection reads of every event: coverage, and
/// the function-call links that keep call groups whole.
const EXACT: Need = Need {
    timestamp: true,
    compaction: true,
    invocation: true,
    parts: true,
    pairing: true,
    ..Need::NONE
};

/// Unused records: `(index of the compaction event, why)`.
type Problems = Vec<(usize, String)>;

/// A selection: two lists of positions and the unused records.
type Plan<'py> = (Bound<'py, PyList>, Bound<'py, PyList>, Problems);

/// A session read for exact mode.
struct Read<'py> {
    loaded: Loaded<'py>,
    views: Views,
    coverage: Coverage,
    problems: Problems,
}

impl<'py> Read<'py> {
    fn views(&self) -> &[EventView] {
        &self.views
    }

    fn ids(&self) -> &[Sym] {
        &self.loaded.ex.ids
    }
}

/// Reads `events` through the session's index (as parity mode does: a
/// session seen before is answered from what its objects showed), then the
/// coverage record of every compaction event.
fn read<'py>(events: &Bound<'py, PyAny>, need: Need) -> Extracted<Read<'py>> {
    let py = events.py();
    let mut loaded = load(events, need)?;
    let mut views = std::mem::take(&mut loaded.views);
    let mut extents = Vec::new();
    let mut problems = Problems::new();
    for (pos, view) in views.iter().enumerate() {
        let Some((start, end)) = view.compaction.and_then(|c| c.bounds()) else {
            continue;
        };
        let object = loaded
            .object(pos)
            .ok_or(Outcome::Decline("internal error"))?;
        let record = match record_of(object, (start, end))? {
            Some(Ok(record)) => Some(record),
            Some(Err(why)) => {
                problems.push((pos, why));
                None
            }
            None => None,
        };
        let extent = match record {
            Some(r) => {
                let mut holes = Vec::with_capacity(r.holes.len());
                for key in &r.holes {
                    holes.push(Hole {
                        micros: key.micros,
                        invocation: intern(&mut loaded.ex, &key.invocation)?,
                    });
                }
                Extent::new(pos, r.start, r.end, holes)
            }
            // Without a record: the interval, as google-adk reads it, minus
            // the events stored after the compaction (exact mode's rule).
            None => Extent::new(pos, start, end, Vec::new()),
        };
        extents.push(extent);
    }
    if !need.invocation && extents.iter().any(|x| !x.holes.is_empty()) {
        // A hole names an event by invocation: every event's is needed.
        let all: Vec<usize> = (0..views.len()).collect();
        let objects = std::mem::take(&mut loaded.objects);
        let need = Need {
            invocation: true,
            ..need
        };
        let done = loaded.complete(&objects, &mut views, &all, need);
        loaded.objects = objects;
        done?;
    }
    let coverage = py.detach(|| guarded(|| Ok(Coverage::new(&views, extents))))?;
    Ok(Read {
        loaded,
        views,
        coverage,
        problems,
    })
}

/// The symbol a record's invocation id has in this extraction (`None` for
/// `""`, as the views intern only non-empty ids).
fn intern(extractor: &mut Extractor<'_>, invocation: &str) -> Extracted<Option<Sym>> {
    if invocation.is_empty() {
        return Ok(None);
    }
    extractor.interner.text(invocation).map(Some)
}

/// The record of the compaction event `event` (bounds `(start, end)`):
/// `None` when it has none, `Some(Err(why))` when it has one that is not
/// used.
fn record_of(
    event: &Bound<'_, PyAny>,
    bounds: (f64, f64),
) -> PyResult<Option<Result<Record, String>>> {
    let py = event.py();
    let metadata = event.getattr(intern!(py, "custom_metadata"))?;
    if metadata.is_none() {
        return Ok(None);
    }
    let Ok(metadata) = metadata.cast::<PyDict>() else {
        return Ok(None);
    };
    let Some(value) = metadata.get_item(METADATA_KEY)? else {
        return Ok(None);
    };
    let json: serde_json::Value = match pythonize::depythonize(&value) {
        Ok(json) => json,
        Err(e) => return Ok(Some(Err(format!("malformed coverage record: {e}")))),
    };
    Ok(Some(
        Record::from_value(json, bounds).map_err(|e| e.to_string()),
    ))
}

/// Exact mode's `_process_compaction_events`: `(prompt, problems)`, the
/// prompt being the raw events no surviving compaction covers and
/// `make_summary(event)` of every surviving compaction event (called in
/// event order), in prompt order; `None` to decline. `reuse_for` as for
/// parity's `process_compaction_events`: summaries cached for the same
/// compaction event and author are handed out again, new ones built in
/// Rust.
#[pyfunction]
#[pyo3(signature = (events, make_summary, reuse_for = None))]
pub fn exact_prompt<'py>(
    events: &Bound<'py, PyAny>,
    make_summary: &Bound<'py, PyAny>,
    reuse_for: Option<&Bound<'py, PyString>>,
) -> PyResult<Option<(Bound<'py, PyList>, Problems)>> {
    finish(
        events.py(),
        "_process_compaction_events",
        run_prompt(events, make_summary, reuse_for),
    )
}

fn run_prompt<'py>(
    events: &Bound<'py, PyAny>,
    make_summary: &Bound<'py, PyAny>,
    reuse_for: Option<&Bound<'py, PyString>>,
) -> Extracted<(Bound<'py, PyList>, Problems)> {
    let py = events.py();
    let list = Extractor::list(events)?;
    if let Some((mut loaded, items, problems)) = exact_prompt_again(list, PROMPT)? {
        let out = materialize(&mut loaded, &items, make_summary, reuse_for)?;
        return Ok((out, problems));
    }
    let mut r = read(events, PROMPT)?;
    let (views, cov) = (&r.views, &r.coverage);
    let items = py.detach(|| guarded(|| Ok(coverage::prompt(views, cov))))?;
    let last = match items.last() {
        None => f64::NEG_INFINITY,
        Some(&Item::Raw(p)) => views[p].timestamp,
        Some(&Item::Summary(at)) => cov
            .extents
            .iter()
            .find(|x| x.at == at)
            .map_or(f64::NAN, |x| x.end),
    };
    let answer = ExactAnswer {
        first: items.iter().map(|&item| encode_item(item)).collect(),
        second: Vec::new(),
        problems: r.problems.clone(),
        last,
    };
    r.loaded
        .remember_exact(ExactAsked::Prompt, Arc::new(answer));
    let out = materialize(&mut r.loaded, &items, make_summary, reuse_for)?;
    Ok((out, r.problems))
}

/// Exact mode's answer to `asked` on `events`: remembered for the very same
/// list, or computed by `compute` (over the read session) and remembered.
fn answer<'py>(
    events: &Bound<'py, PyAny>,
    asked: ExactAsked,
    compute: impl FnOnce(&Read<'py>) -> Extracted<(Vec<u32>, Vec<u32>)>,
) -> Extracted<Arc<ExactAnswer>> {
    let list = Extractor::list(events)?;
    let answer = match exact_again(list, asked)? {
        Some(answer) => answer,
        None => {
            let mut r = read(events, EXACT)?;
            let (first, second) = compute(&r)?;
            let answer = Arc::new(ExactAnswer {
                first,
                second,
                problems: std::mem::take(&mut r.problems),
                last: f64::NAN,
            });
            r.loaded.remember_exact(asked, answer.clone());
            answer
        }
    };
    Ok(answer)
}

/// Exact mode's sliding-window selection over `events` (rewound and
/// scoped): `(handed, covered, problems)`, the positions to summarize (an
/// empty list when nothing should be) and which of them a compaction already
/// covers (overlap); `None` to decline.
#[pyfunction]
pub fn exact_sliding_window<'py>(
    events: &Bound<'py, PyAny>,
    interval: i64,
    overlap: i64,
) -> PyResult<Option<Plan<'py>>> {
    let py = events.py();
    let plan = answer(events, ExactAsked::Sliding(interval, overlap), |r| {
        let (views, ids, cov) = (r.views(), r.ids(), &r.coverage);
        let handed = py.detach(|| {
            guarded(
                || Ok(coverage::sliding(views, ids, cov, interval, overlap).unwrap_or_default()),
            )
        })?;
        let covered = handed.iter().map(|&p| u32::from(cov.hidden[p])).collect();
        Ok((handed.iter().map(|&p| p as u32).collect(), covered))
    });
    let plan = plan.and_then(|a| {
        let covered = a.second.iter().map(|&flag| flag != 0);
        Ok((
            PyList::new(py, &a.first)?,
            PyList::new(py, covered)?,
            a.problems.clone(),
        ))
    });
    finish(py, "_run_compaction_for_sliding_window", plan)
}

/// Exact mode's tail-retention selection over `events` (rewound and
/// scoped): `(window, seeds, problems)`, the raw events to summarize and the
/// surviving compaction events whose summaries seed the new one (both empty
/// when nothing should be summarized); `None` to decline.
#[pyfunction]
pub fn exact_token_threshold<'py>(
    events: &Bound<'py, PyAny>,
    retention: usize,
) -> PyResult<Option<Plan<'py>>> {
    let py = events.py();
    let plan = answer(events, ExactAsked::Token(retention), |r| {
        let (views, ids, cov) = (r.views(), r.ids(), &r.coverage);
        let plan = py.detach(|| guarded(|| Ok(coverage::token(views, ids, cov, retention))))?;
        let (window, seeds) = plan.map(|p| (p.window, p.seeds)).unwrap_or_default();
        let positions = |v: Vec<usize>| v.into_iter().map(|p| p as u32).collect();
        Ok((positions(window), positions(seeds)))
    });
    let plan = plan.and_then(|a| {
        Ok((
            PyList::new(py, &a.first)?,
            PyList::new(py, &a.second)?,
            a.problems.clone(),
        ))
    });
    finish(py, "_run_compaction_for_token_threshold_config", plan)
}

/// The coverage record of a compaction about to be appended to `events`:
/// `handed` and `seeds` are positions in `events` (what the summarizer was
/// given), `foreign` the `(invocation_id, timestamp)` of events the store
/// holds and `events` lacks. Returns `(record, plain_start, plain_end)`:
/// the record to store and the bounds for its `EventCompaction` (inverted,
/// covering nothing, where no bounds are safe for a plain reader); `None`
/// when nothing handed has a finite timestamp. Raises `ValueError` on a
/// position out of range.
#[pyfunction]
pub fn exact_record<'py>(
    events: &Bound<'py, PyAny>,
    handed: Vec<usize>,
    seeds: Vec<usize>,
    foreign: Vec<(String, f64)>,
) -> PyResult<Option<(Bound<'py, PyAny>, f64, f64)>> {
    let py = events.py();
    let r = match read(events, PROMPT) {
        Ok(r) => r,
        Err(Outcome::Error(e)) => return Err(e),
        Err(Outcome::Decline(why)) => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "cannot write a coverage record over these events: {why}"
            )))
        }
    };
    let (views, cov) = (r.views(), &r.coverage);
    if let Some(&bad) = handed.iter().chain(&seeds).find(|&&p| p >= views.len()) {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "position {bad} is not in the {} events",
            views.len()
        )));
    }
    let foreign_ts: Vec<f64> = foreign.iter().map(|(_, t)| *t).collect();
    let Some(w) = coverage::write(views, cov, &handed, &seeds, &foreign_ts) else {
        return Ok(None);
    };
    let mut keys: Vec<Key> = Vec::with_capacity(w.holes.len() + foreign.len());
    for &p in &w.holes {
        let object = r.loaded.object(p).ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(format!("position {p} was not read"))
        })?;
        let invocation: String = object
            .getattr(intern!(py, "invocation_id"))?
            .extract::<Option<String>>()?
            .unwrap_or_default();
        keys.extend(Key::of(&invocation, views[p].timestamp));
    }
    for (invocation, t) in &foreign {
        if w.start <= *t && *t <= w.end {
            keys.extend(Key::of(invocation, *t));
        }
    }
    let (plain_start, plain_end) = w.plain.unwrap_or_else(|| nothing_between(w.start, w.end));
    let record = Record::new(w.start, w.end, keys, (plain_start, plain_end))?;
    let dict = super::exact::to_python(py, &record)?;
    Ok(Some((dict, plain_start, plain_end)))
}

/// What scoping a session needs.
const SCOPE: Need = Need {
    window: true,
    ..Need::NONE
};

/// The events of `events` whose `isolation_scope` is `scope` (the same
/// objects, in order), read through the session's index; `None` to decline
/// (an event the window selection could not read: the caller filters).
#[pyfunction]
#[pyo3(signature = (events, scope = None))]
pub fn exact_in_scope<'py>(
    events: &Bound<'py, PyAny>,
    scope: Option<&str>,
) -> PyResult<Option<Bound<'py, PyList>>> {
    let py = events.py();
    let run = || -> Extracted<Bound<'py, PyList>> {
        let mut loaded = load(events, SCOPE)?;
        let wanted = match scope {
            None => None,
            Some(text) => Some(loaded.ex.interner.text(text)?),
        };
        let views = std::mem::take(&mut loaded.views);
        let mut out = Vec::with_capacity(views.len());
        for (pos, view) in views.iter().enumerate() {
            if view.scope == wanted {
                out.push(
                    loaded
                        .object(pos)
                        .ok_or(Outcome::Decline("internal error"))?,
                );
            }
        }
        Ok(PyList::new(py, out)?)
    };
    finish(py, "_run_compaction_for_sliding_window", run())
}

/// What identifying an event needs: nothing beyond its id, which every
/// read takes.
const IDENTITY: Need = Need::NONE;

/// The positions in `stored` (the session as its store holds it) of the
/// events `events` (this invocation's copy) lacks, by event id through the
/// session's index; `None` when either list does not go through it (the
/// caller then compares ids itself).
#[pyfunction]
pub fn exact_foreign(events: &Bound<'_, PyAny>, stored: &Bound<'_, PyAny>) -> Option<Vec<usize>> {
    let ours = load(events, IDENTITY).ok()?;
    let mut known = vec![false; 0];
    for &slot in ours.bound_slots()? {
        let slot = slot as usize;
        if slot >= known.len() {
            known.resize(slot + 1, false);
        }
        known[slot] = true;
    }
    drop(ours);
    let theirs = load(stored, IDENTITY).ok()?;
    let slots = theirs.bound_slots()?;
    Some(
        (0..slots.len())
            .filter(|&i| !known.get(slots[i] as usize).copied().unwrap_or(false))
            .collect(),
    )
}

/// Inverted bounds: a reader of the bare interval hides nothing with them
/// (google-adk tests `start <= end`), and the summary still reaches it.
fn nothing_between(start: f64, end: f64) -> (f64, f64) {
    (end, start - 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_that_cover_nothing_are_inverted() {
        for (start, end) in [(1.0, 2.0), (3.0, 3.0)] {
            let (a, b) = nothing_between(start, end);
            assert!(a > b);
        }
    }
}
