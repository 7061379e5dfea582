//! Binding of `core::coverage`: exact mode's prompt, windows and records.
//!
//! Each call reads the events' views and, of every compaction event, its
//! coverage record (`custom_metadata["adk_fastcompact"]`). A record that is
//! not used (malformed, foreign, later version, oversized, inconsistent) is
//! reported back as `(index, reason)` and its compaction read as its
//! interval; the Python side warns (`_exact`).

use super::error::{finish, Extracted, Outcome};
use super::exact::Skew;
use super::filter::materialize;
use super::index::load::{load, Loaded, Reading};
use super::index::memos::exact::{
    count_exact_extended, exact_again, exact_prefix, exact_prompt_again, ExactAnswer, ExactAsked,
    ForRecord, SeedParts, WrittenOver,
};
use super::index::memos::filter::encode_item;
use super::reading::extract::Extractor;
use super::reading::prefetch::holds_exactly;
use super::reading::read::text;
use super::reading::scratch::Views;
use crate::core::coverage::{self, Coverage, Covered, Prior, Problems, Records};
use crate::core::event::{EventView, Need};
use crate::core::exact::{ClockSkew, Parsed, Record, METADATA_KEY};
use crate::core::select;
use crate::core::{guarded, Sym};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use std::sync::Arc;

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
}

/// Reads `events` through the session's index (as parity mode does: a
/// session seen before is answered from what its objects showed), then what
/// their compactions cover (see [`coverage::session`]).
fn read<'py>(events: &Bound<'py, PyAny>, need: Need) -> Extracted<Read<'py>> {
    let mut loaded = load(events, need)?;
    let mut views = std::mem::take(&mut loaded.views);
    // `load` reads the whole list: its objects are the positions'.
    let objects = std::mem::take(&mut loaded.objects);
    let found = coverage::session(
        &mut Reading {
            loaded: &mut loaded,
            objects: &objects,
            views: &mut views,
        },
        need,
    );
    loaded.objects = objects;
    let (coverage, problems) = found?;
    Ok(Read {
        loaded,
        views,
        coverage,
        problems,
    })
}

impl Records for Reading<'_, '_> {
    fn record(&mut self, at: usize, bounds: (f64, f64)) -> Extracted<Arc<Parsed>> {
        let object = self
            .objects
            .get(at)
            .ok_or(Outcome::Decline("internal error"))?;
        Ok(self
            .loaded
            .record_at(at, object, |e| record_of(e, bounds))?)
    }

    fn invocation(&mut self, id: &str) -> Extracted<Sym> {
        self.loaded.ex.interner.text(id)
    }
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
    if let Some((mut loaded, items, problems)) = exact_prompt_again(list, coverage::PROMPT)? {
        let out = materialize(&mut loaded, &items, make_summary, reuse_for)?;
        return Ok((out, problems));
    }
    let mut r = read(events, coverage::PROMPT)?;
    let (views, cov) = (&r.views, &r.coverage);
    let items = py.detach(|| guarded(|| Ok(coverage::prompt(views, cov))))?;
    let last = coverage::last_key(views, cov, &items);
    let answer = ExactAnswer {
        first: items.iter().map(|&item| encode_item(item)).collect(),
        problems: r.problems.clone(),
        last,
        ..ExactAnswer::default()
    };
    r.loaded
        .remember_exact(ExactAsked::Prompt, Arc::new(answer));
    let out = materialize(&mut r.loaded, &items, make_summary, reuse_for)?;
    Ok((out, r.problems))
}

/// A session read for an exact-mode selection: the live events of one
/// isolation scope and, once [`Scoped::cover`] ran, what their compactions
/// cover (see [`coverage::in_scope`], [`coverage::cover`]).
struct Scoped<'py> {
    loaded: Loaded<'py>,
    /// The list's objects and their views.
    objects: Vec<Bound<'py, PyAny>>,
    all: Views,
    /// Positions in the list of the rewound events, and of those in scope.
    rewound: Vec<usize>,
    scoped: Vec<usize>,
    covered: Option<Covered>,
    /// The coverage of a list this one extends (see [`exact_prefix`]).
    prior: Option<Prior>,
}

impl<'py> Scoped<'py> {
    /// Reads `events` (a session's whole list) for a selection in isolation
    /// scope `scope`: what parity's selection reads of every event.
    fn read(events: &Bound<'py, PyAny>, scope: &Bound<'py, PyAny>) -> Extracted<Self> {
        let mut loaded = load(events, coverage::SELECT)?;
        let scope = loaded.ex.interner.nullable(scope, "isolation_scope")?;
        let objects = std::mem::take(&mut loaded.objects);
        let all = std::mem::take(&mut loaded.views);
        let (rewound, scoped) = coverage::in_scope(&all, scope);
        Ok(Scoped {
            loaded,
            objects,
            all,
            rewound,
            scoped,
            covered: None,
            prior: None,
        })
    }

    /// What the compactions of the events in scope cover, with the id
    /// arena of the views' function-call links.
    fn cover(&mut self) -> Extracted<(&Covered, &[Sym])> {
        let mut reader = Reading {
            loaded: &mut self.loaded,
            objects: &self.objects,
            views: &mut self.all,
        };
        let covered = coverage::cover(
            &mut reader,
            self.rewound.len(),
            &self.scoped,
            self.prior.take(),
        )?;
        if covered.extended {
            count_exact_extended();
        }
        let covered = self.covered.insert(covered);
        Ok((covered, &self.loaded.ex.ids))
    }

    /// The records not used.
    fn problems(&self) -> Problems {
        self.covered
            .as_ref()
            .map(|c| c.problems.clone())
            .unwrap_or_default()
    }

    /// Remembers `answer` to `asked` for the list.
    fn remember(&mut self, asked: ExactAsked, answer: Arc<ExactAnswer>) {
        self.loaded.remember_exact_for(&self.objects, asked, answer);
    }

    /// What writing the record over the scoped list reads: the views'
    /// timestamps, invocations and compactions (function-call spans
    /// cleared: they point into this call's arena), and the coverage.
    fn for_record(&self) -> Option<Arc<ForRecord>> {
        let covered = self.covered.as_ref()?;
        let views = covered
            .views
            .iter()
            .map(|v| EventView {
                timestamp: v.timestamp,
                invocation: v.invocation,
                compaction: v.compaction,
                ..EventView::default()
            })
            .collect();
        Some(Arc::new(ForRecord {
            views,
            coverage: covered.coverage.clone(),
            seeds: std::sync::OnceLock::new(),
            written: std::sync::Mutex::new(None),
        }))
    }
}

/// What a selection computes: its two lists (positions in the scoped
/// list), its count and its earliest timestamp.
type Computed = (Vec<u32>, Vec<u32>, Option<i64>, f64);

/// Exact mode's answer to `asked` on `events` (a session's whole list) in
/// isolation scope `scope`: remembered for the very same list, or computed
/// by `compute` over the read session and remembered. With the list.
fn answer<'py>(
    events: &Bound<'py, PyAny>,
    scope: &Bound<'py, PyAny>,
    asked: ExactAsked,
    compute: impl FnOnce(&mut Scoped<'py>) -> Extracted<Computed>,
) -> Extracted<(Arc<ExactAnswer>, Bound<'py, PyList>)> {
    let list = Extractor::list(events)?;
    if let Some(answer) = exact_again(list, asked.clone())? {
        return Ok((answer, list.clone()));
    }
    // Looked up before the read binds the new events.
    let sliding = matches!(asked, ExactAsked::Sliding(..));
    let prior = match sliding {
        true => exact_prefix(list, &asked)?,
        false => None,
    };
    let mut r = Scoped::read(events, scope)?;
    r.prior = prior;
    let (first, second, count, since) = compute(&mut r)?;
    let n = r.objects.len();
    let positions = |v: &[usize]| (v.len() != n).then(|| v.iter().map(|&i| i as u32).collect());
    // Only a selection that hands something out has a record written (and
    // so a handle).
    let record = match first.is_empty() && second.is_empty() {
        true => None,
        false => r.for_record(),
    };
    let answer = Arc::new(ExactAnswer {
        first,
        second,
        rewound: positions(&r.rewound),
        scoped: positions(&r.scoped),
        count,
        since,
        problems: r.problems(),
        record,
        // Kept for the next selection over this list extended.
        coverage: r
            .covered
            .take()
            .filter(|_| sliding)
            .map(|c| Arc::new(c.coverage)),
        ..ExactAnswer::default()
    });
    r.remember(asked, answer.clone());
    Ok((answer, list.clone()))
}

/// A list an exact-mode selection handed out, with what writing the
/// record over it reads (see [`exact_record`]): the record is written
/// without reading the session again when it is given this very list,
/// unchanged (the handle holds the objects, so an address cannot have been
/// reused).
#[pyclass(frozen)]
pub struct ExactSelection {
    list: Py<PyList>,
    objects: Vec<Py<PyAny>>,
    record: Arc<ForRecord>,
}

impl ExactSelection {
    fn new<'py>(
        list: &Bound<'py, PyList>,
        record: Option<&Arc<ForRecord>>,
    ) -> PyResult<Option<Bound<'py, ExactSelection>>> {
        let Some(record) = record else {
            return Ok(None);
        };
        let handle = ExactSelection {
            list: list.clone().unbind(),
            objects: list.iter().map(Bound::unbind).collect(),
            record: record.clone(),
        };
        Bound::new(list.py(), handle).map(Some)
    }

    /// What the record over `list` reads, when it is the handed-out list
    /// unchanged.
    fn of(&self, list: &Bound<'_, PyAny>) -> Option<(&[Py<PyAny>], &ForRecord)> {
        let py = list.py();
        let ours = self.list.bind(py);
        let same = list.is(ours)
            && self.record.views.len() == self.objects.len()
            && holds_exactly(ours, &self.objects);
        same.then_some((&self.objects[..], &*self.record))
    }
}

/// The items of `list` at `at` (`None`: all of them), in a new list.
fn items_at<'py>(list: &Bound<'py, PyList>, at: Option<&[u32]>) -> PyResult<Bound<'py, PyList>> {
    match at {
        None => Ok(PyList::new(list.py(), list.iter())?),
        Some(at) => PyList::new(
            list.py(),
            at.iter()
                .map(|&i| list.get_item(i as usize))
                .collect::<PyResult<Vec<_>>>()?,
        ),
    }
}

/// A sliding-window selection: `(events, handed, covered, since,
/// problems, handle)`.
type Sliding<'py> = (
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    f64,
    Problems,
    Option<Bound<'py, ExactSelection>>,
);

/// Exact mode's sliding-window selection over a session's `events`:
/// `(events, handed, covered, since, problems)`: the live events without
/// isolation scope (rewinds applied), the positions among them to hand the
/// summarizer (an empty list when nothing should be summarized), which of
/// them a compaction already covers (overlap), the earliest timestamp the
/// compaction can reach (-inf when one is not finite), and the records not
/// used; `None` to decline.
///
/// With `select` false only the live events are read (what google-adk's
/// sliding-window entry point looks at before the token-threshold path
/// when no sliding window is configured): `handed` is empty.
#[pyfunction]
#[pyo3(signature = (events, interval, overlap, select = true))]
pub fn exact_sliding_window<'py>(
    events: &Bound<'py, PyAny>,
    interval: i64,
    overlap: i64,
    select: bool,
) -> PyResult<Option<Sliding<'py>>> {
    let py = events.py();
    let none = py.None().into_bound(py);
    let run = || -> Extracted<Sliding<'py>> {
        let asked = match select {
            true => ExactAsked::Sliding(interval, overlap),
            false => ExactAsked::Live,
        };
        let (a, list) = answer(events, &none, asked, |r| {
            if !select {
                return Ok((Vec::new(), Vec::new(), None, f64::NEG_INFINITY));
            }
            let (c, ids) = r.cover()?;
            let (handed, covered, since) =
                py.detach(|| coverage::sliding_answer(c, ids, interval, overlap))?;
            Ok((
                handed.iter().map(|&p| p as u32).collect(),
                covered.into_iter().map(u32::from).collect(),
                None,
                since,
            ))
        })?;
        let covered = a.second.iter().map(|&flag| flag != 0);
        let events = items_at(&list, a.scoped.as_deref())?;
        let handle = ExactSelection::new(&events, a.record.as_ref())?;
        Ok((
            events,
            PyList::new(py, &a.first)?,
            PyList::new(py, covered)?,
            a.since,
            a.problems.clone(),
            handle,
        ))
    };
    finish(py, "_run_compaction_for_sliding_window", run())
}

/// A tail-retention selection: `(rewound, events, count, window, seeds,
/// since, problems, handle)`.
type Token<'py> = (
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    Option<i64>,
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    f64,
    Problems,
    Option<Bound<'py, ExactSelection>>,
);

/// Exact mode's tail-retention selection over a session's `events`:
/// `(rewound, events, count, window, seeds, since, problems)`: the rewound
/// events, those of `isolation_scope`, google-adk's latest observed prompt
/// token count of `agent_name` (`None` where google-adk estimates it), the
/// positions in `events` of the raw events to summarize and of the
/// surviving compaction events whose summaries seed the new one (both
/// empty when nothing should be summarized, and without a look when the
/// count is below `token_threshold`), the earliest timestamp the
/// compaction can reach, and the records not used; `None` to decline.
///
/// `floor`: the earliest stamp an event not yet stored may carry (see
/// `coverage::token`); candidates from the first stamped at or after it on
/// stay raw.
#[pyfunction]
#[pyo3(signature = (events, isolation_scope, event_retention_size, agent_name, token_threshold, floor = f64::INFINITY))]
pub fn exact_token_threshold<'py>(
    events: &Bound<'py, PyAny>,
    isolation_scope: &Bound<'py, PyAny>,
    event_retention_size: i64,
    agent_name: &Bound<'py, PyAny>,
    token_threshold: i64,
    floor: f64,
) -> PyResult<Option<Token<'py>>> {
    let py = events.py();
    let run = || -> Extracted<Token<'py>> {
        let Ok(retention) = usize::try_from(event_retention_size) else {
            return Err(Outcome::Decline("config out of range"));
        };
        let (Some(scope), Some(agent)) = (text(isolation_scope), text(agent_name)) else {
            return Err(Outcome::Decline("isolation scope or agent name not a str"));
        };
        let asked = ExactAsked::Token {
            retention,
            scope,
            agent,
            threshold: token_threshold,
            floor: floor.to_bits(),
        };
        let (a, list) = answer(events, isolation_scope, asked, |r| {
            let agent = r.loaded.ex.interner.optional(agent_name, "agent_name")?;
            let mut reader = Reading {
                loaded: &mut r.loaded,
                objects: &r.objects,
                views: &mut r.all,
            };
            let count = select::latest_count(&mut reader, &r.scoped, agent, true)?;
            if count.is_some_and(|c| c < token_threshold) {
                // Observed below the threshold: nothing to select.
                return Ok((Vec::new(), Vec::new(), count, f64::NEG_INFINITY));
            }
            let (c, ids) = r.cover()?;
            let (window, seeds, since) =
                py.detach(|| coverage::token_answer(c, ids, retention, floor))?;
            let positions = |v: Vec<usize>| v.into_iter().map(|p| p as u32).collect();
            Ok((positions(window), positions(seeds), count, since))
        })?;
        let scoped = items_at(&list, a.scoped.as_deref())?;
        let rewound = if a.rewound == a.scoped {
            scoped.clone()
        } else {
            items_at(&list, a.rewound.as_deref())?
        };
        let handle = ExactSelection::new(&scoped, a.record.as_ref())?;
        Ok((
            rewound,
            scoped,
            a.count,
            PyList::new(py, &a.first)?,
            PyList::new(py, &a.second)?,
            a.since,
            a.problems.clone(),
            handle,
        ))
    };
    finish(py, "_run_compaction_for_token_threshold_config", run())
}

/// The coverage record of a compaction about to be appended to `events`:
/// `handed` and `seeds` are positions in `events` (what the summarizer was
/// given), `foreign` the `(invocation_id, timestamp)` of events the store
/// holds and `events` lacks, `ceiling` the earliest timestamp an event
/// stored after the compaction can carry (the caller's clock reading and
/// the start of every other invocation of the session under way), and
/// `clock_skew` (seconds) how far behind that clock another may stamp such
/// an event: the plain bounds end strictly below `ceiling - clock_skew`
/// (the record is the same whatever the margin). Returns `(record, plain_start, plain_end)`:
/// the record to store and the bounds for its `EventCompaction` (inverted,
/// covering nothing, where no bounds are safe for a plain reader); `None`
/// when nothing handed has a finite timestamp. Raises `ValueError` on a
/// position out of range.
#[pyfunction]
#[pyo3(signature = (events, handed, seeds, foreign, ceiling, selection = None, *, clock_skew = None))]
pub fn exact_record<'py>(
    events: &Bound<'py, PyAny>,
    handed: Vec<usize>,
    seeds: Vec<usize>,
    foreign: Vec<(String, f64)>,
    ceiling: f64,
    selection: Option<&Bound<'py, ExactSelection>>,
    clock_skew: Option<Skew>,
) -> PyResult<Option<(Bound<'py, PyAny>, f64, f64)>> {
    let py = events.py();
    let skew = clock_skew.map_or(ClockSkew::NONE, |s| s.0);
    if let Some((objects, record)) = selection.and_then(|s| s.get().of(events)) {
        let object = |p: usize| objects.get(p).map(|o| o.bind(py).clone());
        return write_record(
            py,
            &record.views,
            &record.coverage,
            object,
            handed,
            seeds,
            foreign,
            ceiling,
            skew,
            Some(&record.written),
        );
    }
    let r = match read(events, coverage::PROMPT) {
        Ok(r) => r,
        Err(Outcome::Error(e)) => return Err(e),
        Err(Outcome::Decline(why)) => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "cannot write a coverage record over these events: {why}"
            )))
        }
    };
    let object = |p: usize| r.loaded.object(p).cloned();
    write_record(
        py,
        r.views(),
        &r.coverage,
        object,
        handed,
        seeds,
        foreign,
        ceiling,
        skew,
        None,
    )
}

/// [`exact_record`] over `views` (the list's, `object(p)` its items) and
/// their coverage. `memo` keeps, for a handed-out list, the last record
/// written (its interval and holes, which neither the foreign events nor the
/// ceiling change), so the same positions asked again (the same compaction
/// retried over the same list) are not worked out again.
#[allow(clippy::too_many_arguments)]
fn write_record<'py>(
    py: Python<'py>,
    views: &[EventView],
    cov: &Coverage,
    object: impl Fn(usize) -> Option<Bound<'py, PyAny>>,
    handed: Vec<usize>,
    seeds: Vec<usize>,
    foreign: Vec<(String, f64)>,
    ceiling: f64,
    skew: ClockSkew,
    memo: Option<&std::sync::Mutex<Option<WrittenOver>>>,
) -> PyResult<Option<(Bound<'py, PyAny>, f64, f64)>> {
    if let Some(&bad) = handed.iter().chain(&seeds).find(|&&p| p >= views.len()) {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "position {bad} is not in the {} events",
            views.len()
        )));
    }
    let known = memo.and_then(|m| {
        let held = m.lock().ok()?;
        let (h, s, w) = held.as_ref()?;
        (*h == handed && *s == seeds).then(|| w.clone())
    });
    let written = match known {
        Some(w) => w,
        None => {
            let w = coverage::write(views, cov, &handed, &seeds);
            if let Some(Ok(mut held)) = memo.map(|m| m.lock()) {
                *held = Some((handed.clone(), seeds.clone(), w.clone()));
            }
            w
        }
    };
    let Some(w) = written else {
        return Ok(None);
    };
    let mut holes = Vec::with_capacity(w.holes.len());
    for &p in &w.holes {
        let object = object(p).ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(format!("position {p} was not read"))
        })?;
        let invocation: Option<String> = object.getattr(intern!(py, "invocation_id"))?.extract()?;
        holes.push(invocation.unwrap_or_default());
    }
    let (record, plain_start, plain_end) =
        coverage::stored_record(views, &w, &holes, &foreign, ceiling, skew)?;
    let dict = super::exact::to_python(py, &record)?;
    Ok(Some((dict, plain_start, plain_end)))
}

/// The rolling summary's seed: `(parts, role, sizes, start)`.
type Seeds<'py> = (Bound<'py, PyList>, Bound<'py, PyAny>, Vec<i64>, Option<f64>);

/// What the rolling summary's seed takes from the compaction events at
/// `seeds` (positions in `events`): their summaries' parts in order, in a
/// new list; the last summary's role; each summary's size (google-adk's
/// weight of its compacted content: worked out natively for text parts,
/// else as `size`, a callable, gives it); and the earliest interval
/// start (`None` where none is set). Read once per selection: given the
/// list its `selection` handed out, unchanged, the answer is kept with the
/// selection (which is remembered for that very list), so a tail-retention
/// call that rolls hundreds of summaries reads them once, not on every
/// call. Raises `ValueError` on a position out of range or of an event
/// without a compaction.
#[pyfunction]
#[pyo3(signature = (events, seeds, size, selection = None))]
pub fn exact_seeds<'py>(
    events: &Bound<'py, PyAny>,
    seeds: Vec<usize>,
    size: &Bound<'py, PyAny>,
    selection: Option<&Bound<'py, ExactSelection>>,
) -> PyResult<Seeds<'py>> {
    let py = events.py();
    let held = selection.and_then(|s| s.get().of(events));
    let answer = |s: &SeedParts| -> PyResult<Seeds<'py>> {
        let parts = PyList::new(py, s.parts.bind(py).iter())?;
        Ok((parts, s.role.bind(py).clone(), s.sizes.clone(), s.start))
    };
    if let Some(known) = held.and_then(|(_, r)| r.seeds.get()) {
        if known.positions == seeds {
            return answer(known);
        }
    }
    let list = events.cast::<PyList>()?;
    let parts = PyList::empty(py);
    let mut role = py.None().into_bound(py);
    let mut sizes = Vec::with_capacity(seeds.len());
    let mut start: Option<f64> = None;
    for &p in &seeds {
        let event = match held {
            Some((objects, _)) => objects.get(p).map(|o| o.bind(py).clone()),
            None => list.get_item(p).ok(),
        }
        .ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "position {p} is not in the {} events",
                list.len()
            ))
        })?;
        let compaction = event
            .getattr(intern!(py, "actions"))?
            .getattr(intern!(py, "compaction"))?;
        if compaction.is_none() {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "the event at position {p} holds no compaction"
            )));
        }
        let content = compaction.getattr(intern!(py, "compacted_content"))?;
        sizes.push(match super::reading::size::content_len(&content)? {
            Some(len) => i64::try_from(len).unwrap_or(i64::MAX),
            None => size.call1((&content,))?.extract()?,
        });
        let begins = compaction.getattr(intern!(py, "start_timestamp"))?;
        if !begins.is_none() {
            let t: f64 = begins.extract()?;
            start = Some(start.map_or(t, |s| s.min(t)));
        }
        if content.is_none() {
            continue;
        }
        let held_parts = content.getattr(intern!(py, "parts"))?;
        if !held_parts.is_none() {
            for part in held_parts.try_iter()? {
                parts.append(part?)?;
            }
        }
        role = content.getattr(intern!(py, "role"))?;
    }
    let read = SeedParts {
        positions: seeds,
        parts: parts.unbind(),
        role: role.unbind(),
        sizes,
        start,
    };
    let out = answer(&read)?;
    if let Some((_, record)) = held {
        // Another thread may have kept the same answer first: either serves.
        let _ = record.seeds.set(read);
    }
    Ok(out)
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
