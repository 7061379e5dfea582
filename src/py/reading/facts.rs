//! What lean loading reads of an event besides its view
//! (`core::lean::Facts`): its branch (and the call ids its `<tool>@<id>`
//! segments name), node path, error code, transfer, agent state and the
//! backward lookups it ends.

use super::extract::Interner;
use super::read::truthy;
use crate::core::event::{Span, Sym};
use crate::core::lean::{branch_refs, Facts, Shown, ABORTED};
use crate::py::error::Extracted;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// The facts of `event`, its refs appended to `refs` (interned by
/// `interner`, the one of its view).
pub fn read_facts(
    event: &Bound<'_, PyAny>,
    interner: &mut Interner,
    refs: &mut Vec<Sym>,
) -> Extracted<Facts> {
    let py = event.py();
    let branch = event.getattr(intern!(py, "branch"))?;
    let branch = super::read::optional_str(&branch, "branch")?.unwrap_or("");
    let start = refs.len() as u32;
    for id in branch_refs(branch) {
        refs.push(interner.text(id)?);
    }
    let node_info = event.getattr(intern!(py, "node_info"))?;
    let path = match node_info.is_none() {
        true => false,
        false => truthy(&node_info.getattr(intern!(py, "path"))?)?,
    };
    let error_code = event.getattr(intern!(py, "error_code"))?;
    let error = truthy(&error_code)?;
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
            (truthy(&transfer)?, !state.is_none() || truthy(&end)?)
        }
    };
    let author = event.getattr(intern!(py, "author"))?;
    let interaction = match event.getattr(intern!(py, "interaction_id")) {
        Ok(id) => truthy(&id)?,
        Err(_) => false,
    };
    let shown = Shown {
        branch: !branch.is_empty(),
        path,
        error,
        aborted,
        content_less_error: error && !has_parts(event)?,
        transfer,
        state,
        by_user: author
            .cast_exact::<PyString>()
            .is_ok_and(|s| s.to_str().is_ok_and(|s| s == "user")),
        cache: !event.getattr(intern!(py, "cache_metadata"))?.is_none(),
        interaction,
    };
    let refs = Span {
        start,
        len: refs.len() as u32 - start,
    };
    Ok(Facts::of(&shown, refs))
}

/// Whether `event.content.parts` is a non-empty list.
fn has_parts(event: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = event.py();
    let content = event.getattr(intern!(py, "content"))?;
    if content.is_none() {
        return Ok(false);
    }
    truthy(&content.getattr(intern!(py, "parts"))?)
}
