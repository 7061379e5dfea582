//! Binding of `core::audit`: stored sessions audited in parallel.

use crate::core::audit::{self, Audit, Finding, Order, RecordKind, Settings, Trigger};
use crate::core::stored::StoredSession;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// Audits stored sessions: each a list of its events' JSON documents (`str`
/// or `bytes`) in storage order. `order` is how the store loads them:
/// `"stored"` (as given), `"timestamp"` (by timestamp, ties in storage
/// order: `SqliteSessionService`) or `"timestamp_id"` (ties by event id:
/// `DatabaseSessionService`). The replay uses the sliding window (`compaction_interval`,
/// `overlap_size`) and tail retention (`event_retention_size`) given;
/// `token_threshold` is checked but the replay does not need it (what a
/// stored compaction was handed does not depend on when it fired). Parsed
/// and analysed with the interpreter released, sessions in parallel unless
/// `parallel` is false. A session with an event that cannot be read gets
/// `{"declined": "event N: why"}`. An event whose fate the store cannot
/// decide (a summary reproducing under several copies of the session that
/// disagree on it) is listed under `"undecidable"`, not as hidden or
/// duplicated, with why the copy is unknown (`"reason"`).
#[pyfunction]
#[pyo3(signature = (
    sessions,
    order = "stored",
    compaction_interval = None,
    overlap_size = 0,
    token_threshold = None,
    event_retention_size = None,
    parallel = true,
))]
#[allow(clippy::too_many_arguments)]
pub fn audit_stored<'py>(
    py: Python<'py>,
    sessions: &Bound<'py, PyList>,
    order: &str,
    compaction_interval: Option<i64>,
    overlap_size: i64,
    token_threshold: Option<i64>,
    event_retention_size: Option<i64>,
    parallel: bool,
) -> PyResult<Bound<'py, PyList>> {
    let order = match order {
        "stored" => Order::Stored,
        "timestamp" => Order::Timestamp,
        "timestamp_id" => Order::TimestampId,
        other => {
            return Err(PyValueError::new_err(format!(
                "order must be 'stored', 'timestamp' or 'timestamp_id', not {other:?}"
            )))
        }
    };
    let sliding = super::analysis::window_config(compaction_interval, overlap_size)?;
    if token_threshold.is_some_and(|t| t < 1) {
        return Err(PyValueError::new_err("token_threshold must be >= 1"));
    }
    let retention = match event_retention_size {
        None => None,
        Some(r) => Some(usize::try_from(r).map_err(|_| {
            PyValueError::new_err(format!("event_retention_size must be >= 0, not {r}"))
        })?),
    };
    let settings = Settings { sliding, retention };
    let results = super::analysis::over_stored(py, sessions, parallel, |s| {
        let StoredSession {
            views,
            ids,
            mut texts,
            event_ids,
            has_parts,
            records,
        } = s;
        let user = texts.symbol("user").ok();
        let session = audit::Session {
            events: &views,
            ids: &ids,
            has_parts: &has_parts,
            event_ids: &event_ids,
            records: &records,
            user,
        };
        let intern = |text: &str| texts.symbol(text).ok();
        (views.len(), audit::audit(session, intern, order, settings))
    })?;
    let out = PyList::empty(py);
    for r in results {
        let d = PyDict::new(py);
        match r {
            Ok((n, a)) => to_python(&d, n, &a)?,
            Err(reason) => d.set_item("declined", reason)?,
        }
        out.append(d)?;
    }
    Ok(out)
}

fn trigger_name(t: Trigger) -> &'static str {
    match t {
        Trigger::SlidingWindow => "sliding_window",
        Trigger::TokenThreshold => "token_threshold",
    }
}

fn to_python(d: &Bound<'_, PyDict>, n: usize, a: &Audit) -> PyResult<()> {
    let py = d.py();
    d.set_item("events", n)?;
    let compactions = PyList::empty(py);
    for c in &a.compactions {
        let x = PyDict::new(py);
        x.set_item("position", c.position)?;
        x.set_item("trigger", c.trigger.map(trigger_name))?;
        x.set_item("replayed", c.known)?;
        x.set_item("handed", PyList::new(py, &c.handed)?)?;
        x.set_item("seeds", PyList::new(py, &c.seeds)?)?;
        x.set_item("selected_over", c.selected_over)?;
        x.set_item("unseen", PyList::new(py, &c.unseen)?)?;
        match &c.record {
            RecordKind::Interval => x.set_item("record", "interval")?,
            RecordKind::Exact => x.set_item("record", "exact")?,
            RecordKind::Malformed(why) => {
                x.set_item("record", "malformed")?;
                x.set_item("record_error", why)?;
            }
        }
        compactions.append(x)?;
    }
    d.set_item("compactions", compactions)?;
    let hidden = PyList::empty(py);
    for h in &a.hidden {
        let x = PyDict::new(py);
        x.set_item("position", h.position)?;
        x.set_item("cause", h.cause.name())?;
        x.set_item("compaction", h.compaction)?;
        hidden.append(x)?;
    }
    d.set_item("hidden", hidden)?;
    let duplicated = PyList::empty(py);
    for x in &a.duplicated {
        let y = PyDict::new(py);
        y.set_item("position", x.position)?;
        y.set_item("compaction", x.compaction)?;
        duplicated.append(y)?;
    }
    d.set_item("duplicated", duplicated)?;
    let undecidable = PyList::empty(py);
    for x in &a.undecidable {
        let y = PyDict::new(py);
        y.set_item("position", x.position)?;
        let could_be = match x.could_be {
            Finding::Hidden => "hidden",
            Finding::Duplicated => "duplicated",
        };
        y.set_item("could_be", could_be)?;
        y.set_item("compaction", x.compaction)?;
        y.set_item("readings", x.readings)?;
        y.set_item("reason", x.reason.name())?;
        undecidable.append(y)?;
    }
    d.set_item("undecidable", undecidable)?;
    d.set_item("prompt_size", a.prompt_size)?;
    match &a.stalled {
        None => d.set_item("stalled", py.None())?,
        Some(s) => {
            let x = PyDict::new(py);
            x.set_item("trigger", trigger_name(s.trigger))?;
            x.set_item("backlog", s.backlog)?;
            x.set_item("backlog_invocations", s.backlog_invocations)?;
            x.set_item("prompt_then", s.prompt_then)?;
            d.set_item("stalled", x)?;
        }
    }
    if let Some(e) = &a.prompt_error {
        d.set_item("prompt_error", e)?;
    }
    Ok(())
}
