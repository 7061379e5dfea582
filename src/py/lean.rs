//! Binding of `core::lean`: which events of a stored session a turn reads.

use super::error::{finish, Extracted, Outcome};
use super::index::load::load;
use super::index::memos::lean::lean_again;
use super::reading::extract::Extractor;
use super::reading::facts::read_facts;
use super::select::{rules_of, FamilyRules};
use crate::core::event::{Need, Sym};
use crate::core::guarded;
use crate::core::lean::{decide, Settings, Turn};
use pyo3::prelude::*;
use pyo3::types::PyString;

/// Positions (ascending) of the events of `events` a Runner turn reads
/// (`core::lean::needed`), or `None` when the list cannot be read exactly
/// (a decline, counted; the caller loads the whole session). A stored
/// session's list grown since the last call is answered from the last
/// decision where it admits the new events (`memos::lean`).
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
    let settings = Settings::of(compaction_interval, overlap_size, rules_of(rules));
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
    let list = Extractor::list(events)?;
    if let Some(keep) = lean_again(list, settings, underway, answering)? {
        return Ok(keep);
    }
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
    let turn = Turn {
        underway: &underway,
        answering: &answering,
    };
    let (views, ids) = (&loaded.views, &loaded.ex.ids);
    let (keep, dropped) =
        py.detach(|| guarded(|| Ok(decide(views, &facts, ids, &refs, &settings, turn))))?;
    loaded.remember_lean(settings, &keep, (&facts, &refs), dropped);
    Ok(keep)
}
