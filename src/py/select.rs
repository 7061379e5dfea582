//! Binding of `core::select`: the two selections' entry points, their
//! answers built from the list's objects, and the handle of a handed-out
//! list (`Selected`) that `_prompt_chars_saved` prices from.

use super::error::{finish, Extracted, Outcome};
use super::index::load::{load, Reading};
use super::index::memos::selection::selection_again;
use super::reading::extract::Extractor;
use super::reading::prefetch::{holds_exactly, list_items};
use super::reading::read::{request_content, text};
use crate::core::filter::{History, Item};
use crate::core::select::{self, Asked, Plan, Rules, LIGHT, MAX_EVENTS};
use crate::core::window::SlidingWindow;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::sync::Arc;

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

/// A family's selection rules (see `core::select::Rules`), built once per
/// profile and handed to every selection; google-adk 2.13's by default.
#[pyclass(frozen, name = "Rules", module = "adk_fastcompact._native")]
pub struct FamilyRules(Rules);

#[pymethods]
impl FamilyRules {
    #[new]
    #[pyo3(signature = (
        *, scoped = true, dead_calls = true, priced = true, own_counts = true, rewinds = true,
        self_contained = true
    ))]
    fn new(
        scoped: bool,
        dead_calls: bool,
        priced: bool,
        own_counts: bool,
        rewinds: bool,
        self_contained: bool,
    ) -> Self {
        FamilyRules(Rules {
            scoped,
            dead_calls,
            priced,
            own_counts,
            rewinds,
            self_contained,
        })
    }

    fn __repr__(&self) -> String {
        let flags: Vec<String> = (self.0.named().iter())
            .map(|(name, on)| format!("{name}={}", if *on { "True" } else { "False" }))
            .collect();
        format!("Rules({})", flags.join(", "))
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<FamilyRules>()
            .is_ok_and(|other| other.get().0 == self.0)
    }

    fn __hash__(&self) -> u64 {
        (self.0.named().iter()).fold(0, |h, &(_, on)| h << 1 | u64::from(on))
    }
}

/// The rules given, or google-adk 2.13's.
pub(crate) fn rules_of(rules: Option<&Bound<'_, FamilyRules>>) -> Rules {
    rules.map_or(Rules::LATEST, |r| r.get().0)
}

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
    Ok(Some((list_items(list), plan)))
}

/// The selection of `asked` over `events`, decided by the core with the
/// list's fields read where it looks (see `core::select`), remembered for
/// the session when `asked` says what it depends on.
fn decide<'py>(
    events: &Bound<'py, PyAny>,
    asked: Option<Asked>,
    choose: impl FnOnce(&mut Reading<'_, 'py>) -> Extracted<Plan>,
) -> Extracted<(Vec<Bound<'py, PyAny>>, Arc<Plan>)> {
    let list = Extractor::list(events)?;
    if list.len() >= MAX_EVENTS {
        return Err(Outcome::Decline("too many events"));
    }
    if let Some(found) = again(list, asked.as_ref())? {
        return Ok(found);
    }
    let mut loaded = load(events, LIGHT)?;
    let objects = std::mem::take(&mut loaded.objects);
    let mut views = std::mem::take(&mut loaded.views);
    let plan = Arc::new(choose(&mut Reading {
        loaded: &mut loaded,
        objects: &objects,
        views: &mut views,
    })?);
    if let Some(asked) = asked {
        loaded.remember_selection(&objects, asked, plan.clone());
    }
    Ok((objects, plan))
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
/// `rules`: the family's (google-adk 2.13's by default; `pricing` is
/// `None` when not priced).
#[pyfunction]
#[pyo3(signature = (events, compaction_interval, overlap_size, rules = None))]
pub fn sliding_window<'py>(
    events: &Bound<'py, PyAny>,
    compaction_interval: i64,
    overlap_size: i64,
    rules: Option<&Bound<'py, FamilyRules>>,
) -> PyResult<Option<SlidingOut<'py>>> {
    let rules = rules_of(rules);
    let run = || -> Extracted<SlidingOut<'py>> {
        let py = events.py();
        // google-adk validates these ranges; outside them its behaviour is its own.
        let (Ok(interval @ 1..), Ok(overlap)) = (
            usize::try_from(compaction_interval),
            usize::try_from(overlap_size),
        ) else {
            return Err(Outcome::Decline("config out of range"));
        };
        let asked = Asked::Sliding {
            interval,
            overlap,
            rules,
        };
        let cfg = SlidingWindow { interval, overlap };
        let (objects, plan) = decide(events, Some(asked), |reader| {
            select::sliding(reader, cfg, rules)
        })?;
        Ok(sliding_out(py, &objects, &plan)?)
    };
    finish(events.py(), "_run_compaction_for_sliding_window", run())
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
/// `rules` as for `sliding_window`; without `scoped` every event counts
/// and is compacted (`isolation_scope` unread), without `own_counts` the
/// count is any agent's (`agent_name` unread).
#[pyfunction]
#[pyo3(signature = (events, isolation_scope, event_retention_size, agent_name, rules = None))]
pub fn token_threshold_selection<'py>(
    events: &Bound<'py, PyAny>,
    isolation_scope: &Bound<'py, PyAny>,
    event_retention_size: i64,
    agent_name: &Bound<'py, PyAny>,
    rules: Option<&Bound<'py, FamilyRules>>,
) -> PyResult<Option<TokenOut<'py>>> {
    let rules = rules_of(rules);
    let (scoped, own_counts) = (rules.scoped, rules.own_counts);
    let run = || -> Extracted<TokenOut<'py>> {
        let py = events.py();
        let Ok(retention) = usize::try_from(event_retention_size) else {
            return Err(Outcome::Decline("config out of range"));
        };
        // Remembered only for `str` / `None` arguments (compared by value).
        let scope_asked = match scoped {
            true => text(isolation_scope),
            false => Some(None),
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
        let (objects, plan) = decide(events, asked, |reader| {
            // The arguments are read only where the rules look at them.
            let interner = &mut reader.loaded.ex.interner;
            let scope = match scoped {
                true => interner.nullable(isolation_scope, "isolation_scope")?,
                false => None,
            };
            let agent = match own_counts {
                true => interner.optional(agent_name, "agent_name")?,
                false => None,
            };
            select::token(reader, scope, agent, retention, rules)
        })?;
        Ok(token_out(py, &objects, &plan)?)
    };
    finish(
        events.py(),
        "_run_compaction_for_token_threshold_config",
        run(),
    )
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
