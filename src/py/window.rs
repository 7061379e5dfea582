//! Binding of `core::window`.

use super::error::{finish, Extracted, Outcome};
use super::extract::{Extractor, Need};
use super::filter::request_content;
use super::index::{load, selection_again, Loaded};
use crate::core::filter::{self, History, Item};
use crate::core::ranges;
use crate::core::window::{self, SlidingWindow};
use crate::core::{guarded, rewind, EventView, Sym};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};
use std::borrow::Cow;
use std::sync::Arc;

/// What window selection reads of every event.
pub(super) const LIGHT: Need = Need {
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
/// passes to `_prompt_chars_saved`), with the filtered history of its
/// events (what pricing a compaction appended to it reads of them).
/// `prompt_chars_delta` prices from it instead of reading the events again
/// when it is given this very list, unchanged (same length, the same
/// object at every position; the handle holds the objects, so an address
/// cannot have been reused).
#[pyclass(frozen)]
pub struct Selected {
    list: Py<PyList>,
    objects: Vec<Py<PyAny>>,
    /// `None` for a list too long for one (see [`History::of`]).
    history: Option<Arc<History>>,
}

impl Selected {
    /// The objects and filtered history of `list`'s events, when it is the
    /// handed-out list unchanged.
    pub fn history_of(&self, list: &Bound<'_, PyAny>) -> Option<(&[Py<PyAny>], &History)> {
        let py = list.py();
        let history = self.history.as_deref()?;
        if !list.is(self.list.bind(py)) {
            return None;
        }
        let same = holds_exactly(self.list.bind(py), &self.objects);
        same.then_some((&self.objects[..], history))
    }
}

/// Whether `list` holds exactly `objects`, in order, when a handle holds
/// them (so an item at one's address is that object: compared without a
/// reference taken per item).
pub(super) fn holds_exactly(list: &Bound<'_, PyList>, objects: &[Py<PyAny>]) -> bool {
    if list.len() != objects.len() {
        return false;
    }
    match super::prefetch::item_addresses(list) {
        Some(items) => items
            .iter()
            .zip(objects)
            .all(|(&item, then)| item == then.as_ptr() as usize),
        None => objects
            .iter()
            .enumerate()
            .all(|(i, then)| list.get_item(i).is_ok_and(|now| now.is(then))),
    }
}

/// What a selection was asked besides its list (its answer depends on
/// nothing else).
#[derive(Clone, Debug, PartialEq)]
pub enum Asked {
    /// `sliding_window`: the compaction interval and overlap, and the
    /// family's rules.
    Sliding {
        interval: usize,
        overlap: usize,
        rules: Rules,
    },
    /// `token_threshold_selection`: the isolation scope (`None` inside:
    /// every scope, as google-adk before 2.13 compacts), the retention size
    /// and the agent name (`str` or `None`, compared by value).
    Token {
        scope: Option<Option<Box<str>>>,
        retention: usize,
        agent: Option<Box<str>>,
        rules: Rules,
    },
}

/// Where google-adk's families select differently (the Python profile's
/// flags, see `adk_fastcompact._families.Profile`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// Only unscoped events (sliding window) or the asked scope's (token
    /// threshold) are compacted, as in 2.13; before, every event.
    pub scoped: bool,
    /// The pairing trim retries past provably dead calls (2.12 on).
    pub dead_calls: bool,
    /// The selection is priced for `_is_range_worth_compacting` (2.12 on).
    pub priced: bool,
    /// The observed prompt token count is the agent's own, newer than the
    /// newest compaction (2.10 on); before, the newest of any event.
    pub own_counts: bool,
    /// Rewound invocations are left out first (2.5 on); before, every event.
    pub rewinds: bool,
    /// The pairing trim keeps the longest self-contained prefix (2.3 on);
    /// before, it truncates before pending calls and unresolved requests.
    pub self_contained: bool,
}

/// A selection's answer as positions in its list: what is handed out,
/// built again from the same list's objects without reading them (a
/// session's last one is remembered, see `index::selection_again`).
#[derive(Debug)]
pub struct Plan {
    /// The rewound events (token path; `None`: every event).
    rewound: Option<Vec<u32>>,
    /// The events handed out (`None`: every event).
    handed: Option<Vec<u32>>,
    to_compact: Vec<u32>,
    count: Option<i64>,
    seed_from: Option<u32>,
    priced: Option<Priced>,
}

/// A selection's pricing as positions in its list: the request contents
/// removed and added (a position, and whether it is a summary's), with
/// the handed-out events' filtered history for its handle.
#[derive(Debug)]
struct Priced {
    removed: Vec<(u32, bool)>,
    added: Vec<(u32, bool)>,
    weightless_added: bool,
    previous: Option<u32>,
    materialized: usize,
    history: Option<Arc<History>>,
}

impl Plan {
    /// Bytes held (the history counted whole, though handles may share it).
    pub fn memory_bytes(&self) -> usize {
        let positions = |v: &Option<Vec<u32>>| v.as_ref().map_or(0, |v| v.capacity() * 4);
        std::mem::size_of::<Self>()
            + positions(&self.rewound)
            + positions(&self.handed)
            + self.to_compact.capacity() * 4
            + self.priced.as_ref().map_or(0, |p| {
                (p.removed.capacity() + p.added.capacity()) * 8
                    + p.history.as_ref().map_or(0, |h| h.memory_bytes())
            })
    }
}

/// `idx` (increasing) as positions, `None` when it names every one of `n`
/// (below [`MAX_EVENTS`]).
fn positions(idx: &[usize], n: usize) -> Option<Vec<u32>> {
    (idx.len() != n).then(|| idx.iter().map(|&i| i as u32).collect())
}

/// Events a selection takes: its answer names them by `u32` position.
const MAX_EVENTS: usize = u32::MAX as usize;

/// The objects at `at` (`None`: all of them), in a new list.
fn objects_at<'py>(
    py: Python<'py>,
    objects: &[Bound<'py, PyAny>],
    at: Option<&[u32]>,
) -> PyResult<Bound<'py, PyList>> {
    match at {
        None => PyList::new(py, objects),
        Some(at) => PyList::new(py, at.iter().map(|&i| &objects[i as usize])),
    }
}

/// The list of handed-out events, with its [`Selected`] handle when the
/// selection was priced (only a selection with something to compact is
/// summarized and priced).
#[allow(clippy::type_complexity)]
fn handed_out<'py>(
    py: Python<'py>,
    objects: &[Bound<'py, PyAny>],
    plan: &Plan,
) -> PyResult<(Bound<'py, PyList>, Option<Bound<'py, Selected>>)> {
    let at = plan.handed.as_deref();
    let list = objects_at(py, objects, at)?;
    let selected = match &plan.priced {
        // The handle holds the objects of the list just built.
        Some(priced) => Some(Bound::new(
            py,
            Selected {
                list: list.clone().unbind(),
                objects: list.iter().map(Bound::unbind).collect(),
                history: priced.history.clone(),
            },
        )?),
        None => None,
    };
    Ok((list, selected))
}

/// The views of `idx` (increasing): `views` itself when `idx` names them all
/// (the live events are usually all of them: no rewind, one scope).
fn subset<'a>(views: &'a [EventView], idx: &[usize]) -> Cow<'a, [EventView]> {
    if idx.len() == views.len() {
        return Cow::Borrowed(views);
    }
    Cow::Owned(idx.iter().map(|&i| views[i]).collect())
}

/// The live events of the session: rewinds applied, then only those `keep`s.
pub(super) fn live(views: &[EventView], keep: impl Fn(&EventView) -> bool) -> Vec<usize> {
    rewind::apply_rewinds(views)
        .into_iter()
        .filter(|&i| keep(&views[i]))
        .collect()
}

/// The events a selection reads: [`live`] where the family applies rewinds,
/// else every event `keep` admits.
fn selected_from(
    views: &[EventView],
    rules: Rules,
    keep: impl Fn(&EventView) -> bool,
) -> Vec<usize> {
    match rules.rewinds {
        true => live(views, keep),
        false => (0..views.len()).filter(|&i| keep(&views[i])).collect(),
    }
}

/// Completes the views at `indices` with their function-call data
/// (`need`), once each (see [`Loaded::complete`]: from the index where the
/// session's index has them).
fn read_calls<'py>(
    loaded: &mut Loaded<'py>,
    objects: &[Bound<'py, PyAny>],
    views: &mut [EventView],
    full: &mut [bool],
    indices: &[usize],
    need: Need,
) -> Extracted<()> {
    let todo: Vec<usize> = indices.iter().copied().filter(|&i| !full[i]).collect();
    loaded.complete(objects, views, &todo, need)?;
    for i in todo {
        full[i] = true;
    }
    Ok(())
}

/// The pairing trim of `window`: the strict pass reads the window's calls;
/// only when its answer is not settled are the calls of all of `live` read
/// for google-adk's dead-call pass (2.12 on: `dead_calls`; before, the
/// strict pass is the answer).
fn trim<'py>(
    loaded: &mut Loaded<'py>,
    objects: &[Bound<'py, PyAny>],
    views: &mut [EventView],
    full: &mut [bool],
    window: &[usize],
    live: &[usize],
    rules: Rules,
) -> Extracted<usize> {
    let need = FULL;
    read_calls(loaded, objects, views, full, window, need)?;
    if !rules.self_contained {
        // Before 2.3: what the whole session leaves pending or unresolved.
        read_calls(loaded, objects, views, full, live, need)?;
        let ids = &loaded.ex.ids;
        return Ok(guarded(|| {
            Ok(window::truncated_prefix(views, ids, window, live))
        })?);
    }
    let ids = &loaded.ex.ids;
    let (strict, settled) = guarded(|| Ok(window::strict_prefix(views, ids, window)))?;
    if settled || !rules.dead_calls {
        return Ok(strict);
    }
    read_calls(loaded, objects, views, full, live, need)?;
    let ids = &loaded.ex.ids;
    Ok(guarded(|| {
        Ok(window::longest_self_contained_prefix(
            views,
            ids,
            window,
            Some(live),
        ))
    })?)
}

/// The plan `asked` remembered for `list` (the same objects as the last
/// selection on its session), with the list's objects.
#[allow(clippy::type_complexity)]
fn again<'py>(
    list: &Bound<'py, PyList>,
    asked: Option<&Asked>,
) -> Extracted<Option<(Vec<Bound<'py, PyAny>>, Arc<Plan>)>> {
    let Some(asked) = asked else {
        return Ok(None);
    };
    let Some(plan) = selection_again(list, asked)? else {
        return Ok(None);
    };
    // As many as the remembered objects (nothing ran since the check).
    Ok(Some((super::prefetch::list_items(list), plan)))
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
///
/// The family's rules (see [`Rules`]): `scoped`, `dead_calls`, `priced`
/// (google-adk 2.13's by default; `pricing` is `None` when not priced).
#[pyfunction]
#[pyo3(signature = (
    events, compaction_interval, overlap_size,
    *, scoped = true, dead_calls = true, priced = true, rewinds = true, self_contained = true
))]
#[allow(clippy::too_many_arguments)]
pub fn sliding_window<'py>(
    events: &Bound<'py, PyAny>,
    compaction_interval: i64,
    overlap_size: i64,
    scoped: bool,
    dead_calls: bool,
    priced: bool,
    rewinds: bool,
    self_contained: bool,
) -> PyResult<Option<SlidingOut<'py>>> {
    let rules = Rules {
        scoped,
        dead_calls,
        priced,
        // The sliding window reads no count.
        own_counts: true,
        rewinds,
        self_contained,
    };
    finish(
        events.py(),
        "_run_compaction_for_sliding_window",
        run_sliding(events, compaction_interval, overlap_size, rules),
    )
}

fn run_sliding<'py>(
    events: &Bound<'py, PyAny>,
    interval: i64,
    overlap: i64,
    rules: Rules,
) -> Extracted<SlidingOut<'py>> {
    let py = events.py();
    // google-adk validates these ranges; outside them its behaviour is its own.
    let (Ok(interval @ 1..), Ok(overlap)) = (usize::try_from(interval), usize::try_from(overlap))
    else {
        return Err(Outcome::Decline("config out of range"));
    };
    let asked = Asked::Sliding {
        interval,
        overlap,
        rules,
    };
    let list = Extractor::list(events)?;
    if list.len() >= MAX_EVENTS {
        return Err(Outcome::Decline("too many events"));
    }
    if let Some((objects, plan)) = again(list, Some(&asked))? {
        return Ok(sliding_out(py, &objects, &plan)?);
    }
    let cfg = SlidingWindow { interval, overlap };
    // Function-call data (content parts) is read only where the decision
    // looks at it: the window, and the whole live session only when the
    // pairing trim needs its second pass; with the index, only of events
    // whose objects have not shown it yet (see `Loaded::complete`).
    let mut loaded = load(events, LIGHT)?;
    let objects = std::mem::take(&mut loaded.objects);
    let mut views = std::mem::take(&mut loaded.views);
    let live = selected_from(&views, rules, |e| !rules.scoped || e.scope.is_none());
    let candidates = guarded(|| Ok(window::sliding_window_candidates(&views, &live, cfg)))?;
    let mut full = vec![false; views.len()];
    let keep = trim(
        &mut loaded,
        &objects,
        &mut views,
        &mut full,
        &candidates,
        &live,
        rules,
    )?;
    let to_compact = &candidates[..keep];
    let priced = if to_compact.is_empty() || !rules.priced {
        None
    } else {
        let weightless = window::weightless_compaction(&views, to_compact);
        Some(price(&subset(&views, &live), &live, weightless)?)
    };
    let plan = Arc::new(Plan {
        rewound: None,
        handed: positions(&live, views.len()),
        to_compact: to_compact.iter().map(|&i| i as u32).collect(),
        count: None,
        seed_from: None,
        priced,
    });
    loaded.remember_selection(&objects, asked, plan.clone());
    Ok(sliding_out(py, &objects, &plan)?)
}

/// A sliding window's outputs from its plan.
fn sliding_out<'py>(
    py: Python<'py>,
    objects: &[Bound<'py, PyAny>],
    plan: &Plan,
) -> PyResult<SlidingOut<'py>> {
    let (events, selected) = handed_out(py, objects, plan)?;
    Ok((
        events,
        objects_at(py, objects, Some(&plan.to_compact))?,
        pricing(py, objects, plan)?,
        selected,
    ))
}

/// What google-adk's `_is_range_worth_compacting` measures, as presence
/// changes of the filtered history of the handed-out events (`handed`,
/// whose views are `views`) when the weightless summary of the range is
/// appended.
fn price(
    views: &[EventView],
    handed: &[usize],
    weightless: Option<EventView>,
) -> Extracted<Priced> {
    let weightless = weightless.ok_or(Outcome::Decline("internal error"))?;
    let history = guarded(|| History::of(views))?;
    let diff = match history.as_ref().and_then(|h| h.diff(weightless)) {
        Some(diff) => diff,
        None => guarded(|| filter::presence_diff(views, weightless))?,
    };
    let previous = ranges::compaction_ranges(views)
        .last()
        .map(|r| handed[r.index] as u32);
    // Positions in the list; the weightless summary (past the handed-out
    // events) is flagged instead.
    let parts = |items: &[Item]| -> Vec<(u32, bool)> {
        items
            .iter()
            .filter_map(|&item| {
                let (Item::Raw(k) | Item::Summary(k)) = item;
                let summary = matches!(item, Item::Summary(_));
                handed.get(k).map(|&i| (i as u32, summary))
            })
            .collect()
    };
    Ok(Priced {
        removed: parts(&diff.removed),
        added: parts(&diff.added),
        weightless_added: diff.added.contains(&Item::Summary(handed.len())),
        previous,
        materialized: diff.materialized,
        history: history.map(Arc::new),
    })
}

/// A selection's pricing outputs, when it was priced: `(removed, added,
/// weightless_added, previous_summary, materialized)`.
fn pricing<'py>(
    py: Python<'py>,
    objects: &[Bound<'py, PyAny>],
    plan: &Plan,
) -> PyResult<Option<Pricing<'py>>> {
    let Some(priced) = &plan.priced else {
        return Ok(None);
    };
    let contents = |parts: &[(u32, bool)]| -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for &(i, summary) in parts {
            let i = i as usize;
            let item = if summary {
                Item::Summary(i)
            } else {
                Item::Raw(i)
            };
            out.append(request_content(&objects[i], item)?)?;
        }
        Ok(out)
    };
    let previous = match priced.previous {
        Some(i) => Some(request_content(
            &objects[i as usize],
            Item::Summary(i as usize),
        )?),
        None => None,
    };
    Ok(Some((
        contents(&priced.removed)?,
        contents(&priced.added)?,
        priced.weightless_added,
        previous,
        priced.materialized,
    )))
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
///
/// The family's rules as for `sliding_window`; without `scoped` every event
/// counts and is compacted (`isolation_scope` unread).
#[pyfunction]
#[pyo3(signature = (
    events, isolation_scope, event_retention_size, agent_name,
    *, scoped = true, dead_calls = true, priced = true, own_counts = true, rewinds = true,
    self_contained = true
))]
#[allow(clippy::too_many_arguments)]
pub fn token_threshold_selection<'py>(
    events: &Bound<'py, PyAny>,
    isolation_scope: &Bound<'py, PyAny>,
    event_retention_size: i64,
    agent_name: &Bound<'py, PyAny>,
    scoped: bool,
    dead_calls: bool,
    priced: bool,
    own_counts: bool,
    rewinds: bool,
    self_contained: bool,
) -> PyResult<Option<TokenOut<'py>>> {
    let rules = Rules {
        scoped,
        dead_calls,
        priced,
        own_counts,
        rewinds,
        self_contained,
    };
    finish(
        events.py(),
        "_run_compaction_for_token_threshold_config",
        run_token(
            events,
            isolation_scope,
            event_retention_size,
            agent_name,
            rules,
        ),
    )
}

fn run_token<'py>(
    events: &Bound<'py, PyAny>,
    isolation_scope: &Bound<'py, PyAny>,
    retention: i64,
    agent_name: &Bound<'py, PyAny>,
    rules: Rules,
) -> Extracted<TokenOut<'py>> {
    let scoped = rules.scoped;
    let py = events.py();
    let Ok(retention) = usize::try_from(retention) else {
        return Err(Outcome::Decline("config out of range"));
    };
    // Remembered only for `str` / `None` arguments (compared by value).
    let scope_asked = if scoped {
        text(isolation_scope)
    } else {
        Some(None)
    };
    let asked = match (scope_asked, text(agent_name)) {
        (Some(scope), Some(agent)) => Some(Asked::Token {
            scope: scoped.then_some(scope),
            retention,
            agent,
            rules,
        }),
        _ => None,
    };
    let list = Extractor::list(events)?;
    if list.len() >= MAX_EVENTS {
        return Err(Outcome::Decline("too many events"));
    }
    if let Some((objects, plan)) = again(list, asked.as_ref())? {
        return Ok(token_out(py, &objects, &plan)?);
    }
    // Usage counts and authors are read only where the count's scan reaches
    // (see `latest_count`).
    let mut loaded = load(events, LIGHT)?;
    let ex = &mut loaded.ex;
    let scope = match scoped {
        true => Some(ex.interner.nullable(isolation_scope, "isolation_scope")?),
        false => None,
    };
    let agent = match rules.own_counts {
        true => ex.interner.optional(agent_name, "agent_name")?,
        false => None,
    };
    let objects = std::mem::take(&mut loaded.objects);
    let mut views = std::mem::take(&mut loaded.views);
    let rewound = selected_from(&views, rules, |_| true);
    let scoped: Vec<usize> = rewound
        .iter()
        .copied()
        .filter(|&i| scope.is_none_or(|scope| views[i].scope == scope))
        .collect();
    let count = latest_count(
        &mut loaded,
        &objects,
        &mut views,
        &scoped,
        agent,
        rules.own_counts,
    )?;
    let candidates = guarded(|| Ok(window::token_candidates(&views, &scoped)))?;
    // Function-call data only where the decision reads it (see run_sliding).
    let need = FULL;
    let mut full = vec![false; views.len()];
    read_calls(
        &mut loaded,
        &objects,
        &mut views,
        &mut full,
        &candidates.candidates,
        need,
    )?;
    let ids = &loaded.ex.ids;
    let window =
        guarded(|| Ok(window::token_window(&views, ids, &candidates, retention).to_vec()))?;
    let keep = trim(
        &mut loaded,
        &objects,
        &mut views,
        &mut full,
        &window,
        &scoped,
        rules,
    )?;
    let selection = window::finish_token_selection(&views, &candidates, &window[..keep]);
    let priced = if selection.to_compact.is_empty() || !rules.priced {
        None
    } else {
        let seed_ts = selection
            .seed_from
            .and_then(|i| views[i].compaction)
            .and_then(|c| c.start);
        let stamps = seed_ts
            .into_iter()
            .chain(selection.to_compact.iter().map(|&i| views[i].timestamp));
        let weightless = window::weightless_over(stamps);
        Some(price(&subset(&views, &scoped), &scoped, weightless)?)
    };
    let plan = Arc::new(Plan {
        rewound: positions(&rewound, views.len()),
        handed: positions(&scoped, views.len()),
        to_compact: selection.to_compact.iter().map(|&i| i as u32).collect(),
        count,
        seed_from: selection.seed_from.map(|i| i as u32),
        priced,
    });
    if let Some(asked) = asked {
        loaded.remember_selection(&objects, asked, plan.clone());
    }
    Ok(token_out(py, &objects, &plan)?)
}

/// google-adk's `_latest_prompt_token_count` over `scoped` (see
/// [`window::latest_prompt_token_count`]), reading usage counts and authors
/// only of the events its scan reaches, as google-adk does: newest first,
/// in blocks (staged as any batch is) that double in size, never past the
/// newest compaction where `since_compaction` (2.10 on) stops the scan.
pub(super) fn latest_count<'py>(
    loaded: &mut Loaded<'py>,
    objects: &[Bound<'py, PyAny>],
    views: &mut [EventView],
    scoped: &[usize],
    agent: Option<Sym>,
    since_compaction: bool,
) -> Extracted<Option<i64>> {
    let usage = Need {
        usage: true,
        ..Need::default()
    };
    // The scan stops at the newest compaction (or reads them all).
    let first = match since_compaction {
        true => scoped
            .iter()
            .rposition(|&i| views[i].compaction.is_some())
            .unwrap_or(0),
        false => 0,
    };
    let (mut end, mut block) = (scoped.len(), 32);
    while end > first {
        let start = end.saturating_sub(block).max(first);
        let todo: Vec<usize> = scoped[start..end]
            .iter()
            .copied()
            .filter(|&i| !since_compaction || views[i].compaction.is_none())
            .collect();
        loaded.complete(objects, views, &todo, usage)?;
        let block_events = &scoped[start..end];
        if let Some(count) =
            window::latest_prompt_token_count(views, block_events, agent, since_compaction)
        {
            return Ok(Some(count));
        }
        (end, block) = (start, block * 2);
    }
    // Every block scanned, none counted (the oldest one ends at the
    // compaction, which stops the scan).
    Ok(None)
}

/// A token-threshold selection's outputs from its plan.
fn token_out<'py>(
    py: Python<'py>,
    objects: &[Bound<'py, PyAny>],
    plan: &Plan,
) -> PyResult<TokenOut<'py>> {
    let (events, selected) = handed_out(py, objects, plan)?;
    // The same list object for both when they hold the same events (one
    // scope, the usual case): the caller only reads them.
    let rewound = match plan.rewound == plan.handed {
        true => events.clone(),
        false => objects_at(py, objects, plan.rewound.as_deref())?,
    };
    Ok((
        rewound,
        events,
        plan.count,
        objects_at(py, objects, Some(&plan.to_compact))?,
        plan.seed_from.map(|i| objects[i as usize].clone()),
        pricing(py, objects, plan)?,
        selected,
    ))
}

/// A `str` argument's text (`Some(None)` for `None`), or `None` for any
/// other value.
pub(super) fn text(value: &Bound<'_, PyAny>) -> Option<Option<Box<str>>> {
    if value.is_none() {
        return Some(None);
    }
    let s = value.cast_exact::<PyString>().ok()?;
    Some(Some(s.to_str().ok()?.into()))
}
