//! Binding of `core::lean`: which events of a stored session a turn reads.

use super::error::{finish, Extracted, Outcome};
use super::index::load::load;
use super::reading::extract::Interner;
use super::select::{rules_of, FamilyRules};
use crate::core::event::{Need, Span, Sym};
use crate::core::lean::{self, mark, Facts, Settings, Turn};
use crate::core::window::SlidingWindow;
use crate::core::{guarded, EventView};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// `error_code` of the events google-adk writes to seal an aborted
/// invocation (`_abort_events._INVOCATION_ABORTED`).
const ABORTED: &str = "INVOCATION_ABORTED";

/// Positions (ascending) of the events of `events` a Runner turn reads
/// (`core::lean::needed`), or `None` when the list cannot be read exactly
/// (a decline, counted; the caller loads the whole session).
#[pyfunction]
#[pyo3(signature = (
    events, compaction_interval = None, overlap_size = 0, rules = None, underway = Vec::new(),
    answering = Vec::new()
))]
pub fn lean_positions<'py>(
    events: &Bound<'py, PyAny>,
    compaction_interval: Option<i64>,
    overlap_size: i64,
    rules: Option<&Bound<'py, FamilyRules>>,
    underway: Vec<Bound<'py, PyString>>,
    answering: Vec<Bound<'py, PyString>>,
) -> PyResult<Option<Vec<usize>>> {
    let window = match compaction_interval {
        Some(interval) if interval > 0 && overlap_size >= 0 => Some(SlidingWindow {
            interval: interval as usize,
            overlap: overlap_size as usize,
        }),
        _ => None,
    };
    let settings = Settings {
        window,
        rules: rules_of(rules),
    };
    finish(
        events.py(),
        "get_session",
        run(events, settings, &underway, &answering),
    )
}

fn run<'py>(
    events: &Bound<'py, PyAny>,
    settings: Settings,
    underway: &[Bound<'py, PyString>],
    answering: &[Bound<'py, PyString>],
) -> Extracted<Vec<usize>> {
    let py = events.py();
    let mut loaded = load(events, Need::ALL)?;
    let mut refs: Vec<Sym> = Vec::new();
    let interner = &mut loaded.ex.interner;
    let mut facts = Vec::with_capacity(loaded.objects.len());
    for obj in &loaded.objects {
        facts.push(read_facts(obj, interner, &mut refs)?);
    }
    let mut texts = |strings: &[Bound<'py, PyString>]| -> Extracted<Vec<Sym>> {
        strings
            .iter()
            .map(|s| interner.text(s.to_str().map_err(|_| Outcome::Decline("id text"))?))
            .collect()
    };
    let underway = texts(underway)?;
    let answering = texts(answering)?;
    let views: &[EventView] = &loaded.views;
    let ids: &[Sym] = &loaded.ex.ids;
    let turn = Turn {
        underway: &underway,
        answering: &answering,
    };
    Ok(py.detach(|| guarded(|| Ok(lean::needed(views, &facts, ids, &refs, &settings, turn))))?)
}

/// What lean loading reads of an event besides its view: its branch (and
/// the call ids its `<tool>@<id>` segments name), node path, error code,
/// transfer, agent state and the lookups it ends.
fn read_facts(
    event: &Bound<'_, PyAny>,
    interner: &mut Interner,
    refs: &mut Vec<Sym>,
) -> Extracted<Facts> {
    let py = event.py();
    let branch = event.getattr(intern!(py, "branch"))?;
    let branch = super::reading::read::optional_str(&branch, "branch")?.unwrap_or("");
    let start = refs.len() as u32;
    for segment in branch.split('.') {
        if let Some((_, id)) = segment.split_once('@') {
            if !id.is_empty() {
                refs.push(interner.text(id)?);
            }
        }
    }
    let node_info = event.getattr(intern!(py, "node_info"))?;
    let path = match node_info.is_none() {
        true => false,
        false => {
            let path = node_info.getattr(intern!(py, "path"))?;
            super::reading::read::truthy(&path)?
        }
    };
    let error_code = event.getattr(intern!(py, "error_code"))?;
    let error = super::reading::read::truthy(&error_code)?;
    let aborted = error
        && error_code
            .cast_exact::<PyString>()
            .is_ok_and(|s| s.to_str().is_ok_and(|s| s == ABORTED));
    let actions = event.getattr(intern!(py, "actions"))?;
    let (transfer, state) = match actions.is_none() {
        true => (false, false),
        false => {
            let transfer = actions.getattr(intern!(py, "transfer_to_agent"))?;
            let state = actions.getattr(intern!(py, "agent_state"))?;
            let end = actions.getattr(intern!(py, "end_of_agent"))?;
            (
                super::reading::read::truthy(&transfer)?,
                !state.is_none() || super::reading::read::truthy(&end)?,
            )
        }
    };
    let author = event.getattr(intern!(py, "author"))?;
    let by_user = author
        .cast_exact::<PyString>()
        .is_ok_and(|s| s.to_str().is_ok_and(|s| s == "user"));
    let mut marks = 0;
    // `find_agent_to_run` passes over the user's events, abort seals, agent
    // state changes and content-less errors.
    let content_less_error = error && !has_parts(event)?;
    if !(by_user || aborted || state || content_less_error) {
        marks |= mark::ROUTE;
    }
    if !event.getattr(intern!(py, "cache_metadata"))?.is_none() {
        marks |= mark::CACHE;
    }
    if let Ok(id) = event.getattr(intern!(py, "interaction_id")) {
        if super::reading::read::truthy(&id)? {
            marks |= mark::INTERACTION;
        }
    }
    Ok(Facts {
        branched: !branch.is_empty(),
        placed: !branch.is_empty() || path,
        pinned: aborted || error || transfer,
        marks,
        refs: Span {
            start,
            len: refs.len() as u32 - start,
        },
    })
}

/// Whether `event.content.parts` is a non-empty list.
fn has_parts(event: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = event.py();
    let content = event.getattr(intern!(py, "content"))?;
    if content.is_none() {
        return Ok(false);
    }
    super::reading::read::truthy(&content.getattr(intern!(py, "parts"))?)
}
