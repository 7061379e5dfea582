//! Binding of `core::lean_rows`: a SQL store's rows read once into views,
//! and the positions of those a turn reads.

use super::select::{rules_of, FamilyRules};
use crate::core::lean::Settings;
use crate::core::lean_rows::{Decoding, Listed, RowCache};
use crate::core::{guarded, CoreError};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyFloat, PyInt, PyString};
use std::sync::{Mutex, MutexGuard};

/// The views of the rows a session service's lean loads have read, per
/// session, within a budget of rows (`core::lean_rows::RowCache`).
#[pyclass(frozen, name = "LeanRows", module = "adk_fastcompact._native")]
pub struct LeanRows {
    cache: Mutex<RowCache>,
}

impl LeanRows {
    fn lock(&self) -> MutexGuard<'_, RowCache> {
        // A panic while locked leaves the cache as consistent as any
        // interrupted insert does: every slot a listing checks is whole.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A listed row's owned columns (for the rows still to be read).
struct Missing {
    id: String,
    invocation: String,
    stamp: u64,
    row: i64,
}

/// A listing's slot for each row (None: not read yet) and the rows not
/// read yet, by position.
type Slots = (Vec<Option<u32>>, Vec<(usize, Missing)>);

/// One load's listing of a session's rows, in loading order.
#[pyclass(frozen, name = "LeanListing", module = "adk_fastcompact._native")]
pub struct LeanListing {
    owner: Py<LeanRows>,
    session: String,
    epoch: u64,
    decoding: Decoding,
    state: Mutex<Slots>,
}

/// `(id, invocation_id, timestamp[, rowid])` of one listed row; `None`
/// where a column is not what google-adk writes (a `str` id and invocation
/// id), which the caller meets with a whole load.
fn listed<'py>(row: &Bound<'py, PyAny>) -> PyResult<Option<(Bound<'py, PyAny>, u64, i64)>> {
    let id = row.get_item(0)?;
    let stamp = row.get_item(2)?;
    let stamp = match stamp.cast::<PyFloat>() {
        Ok(f) => f.value().to_bits(),
        // A datetime column: its hash stands for it (equal values hash
        // equal; a changed stamp under a kept event id is what is caught).
        Err(_) => stamp.hash()? as u64,
    };
    let extra = match row.len()? {
        4 => {
            let r = row.get_item(3)?;
            match r.cast::<PyInt>() {
                Ok(i) => i.extract::<i64>()?,
                Err(_) => return Ok(None),
            }
        }
        _ => 0,
    };
    if id.cast_exact::<PyString>().is_err() {
        return Ok(None);
    }
    Ok(Some((id, stamp, extra)))
}

#[pymethods]
impl LeanRows {
    /// An empty cache holding at most `budget` rows (besides the session in
    /// use; past it the sessions loaded longest ago are read again).
    #[new]
    #[pyo3(signature = (budget = 4_000_000))]
    fn new(budget: usize) -> Self {
        LeanRows {
            cache: Mutex::new(RowCache::new(budget)),
        }
    }

    /// A listing of the session under `session` from `rows` (each
    /// `(id, invocation_id, timestamp)` or `(..., rowid)`, in loading
    /// order). `columns`: rows decode as `DatabaseSessionService` decodes
    /// them (the id and invocation id columns over the stored JSON). `None`
    /// where a row's columns are not google-adk's.
    #[pyo3(signature = (session, rows, columns = false))]
    fn listing(
        slf: &Bound<'_, Self>,
        session: &str,
        rows: &Bound<'_, PyAny>,
        columns: bool,
    ) -> PyResult<Option<LeanListing>> {
        let me = slf.get();
        let mut read = Vec::new();
        for row in rows.try_iter()? {
            let row = row?;
            let Some((id, stamp, extra)) = listed(&row)? else {
                return Ok(None);
            };
            let invocation = row.get_item(1)?;
            if invocation.cast_exact::<PyString>().is_err() {
                return Ok(None);
            }
            read.push((id, invocation, stamp, extra));
        }
        let mut cache = me.lock();
        let rows_now = read.len();
        let s = cache.session(session);
        // Slots well past the rows listed were left by a session deleted
        // and made again: start afresh.
        let stale = s.slots() > 2 * rows_now + 64;
        if stale {
            cache.forget(session);
        }
        let s = cache.session(session);
        let epoch = s.epoch;
        let mut slots = Vec::with_capacity(rows_now);
        let mut missing = Vec::new();
        for (i, (id, invocation, stamp, row)) in read.iter().enumerate() {
            let id = id.cast_exact::<PyString>()?.to_str()?;
            let invocation = invocation.cast_exact::<PyString>()?.to_str()?;
            let l = Listed {
                id,
                invocation,
                stamp: *stamp,
                row: *row,
            };
            let slot = s.slot(&l);
            if slot.is_none() {
                missing.push((
                    i,
                    Missing {
                        id: id.to_owned(),
                        invocation: invocation.to_owned(),
                        stamp: *stamp,
                        row: *row,
                    },
                ));
            }
            slots.push(slot);
        }
        Ok(Some(LeanListing {
            owner: slf.clone().unbind(),
            session: session.to_owned(),
            epoch,
            decoding: if columns {
                Decoding::Columns
            } else {
                Decoding::Json
            },
            state: Mutex::new((slots, missing)),
        }))
    }

    /// `(sessions, rows)` held.
    fn stats(&self) -> (usize, usize) {
        self.lock().stats()
    }

    /// Forgets every session.
    fn clear(&self) {
        let mut cache = self.lock();
        let budget = cache.budget;
        *cache = RowCache::new(budget);
    }
}

impl LeanListing {
    fn lock(&self) -> MutexGuard<'_, Slots> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl LeanListing {
    /// Positions of the rows not read yet, ascending: their stored JSON is
    /// to be handed to `parse`.
    #[getter]
    fn missing(&self) -> Vec<usize> {
        self.lock().1.iter().map(|(i, _)| *i).collect()
    }

    /// Reads the stored JSON of the rows at `positions` (`texts`, `str` or
    /// `bytes`, one each; `timestamps`, for a columns listing, each row's
    /// timestamp column as an epoch). Returns None, or why a row cannot be
    /// read (nothing is kept of that row; the caller loads whole).
    #[pyo3(signature = (positions, texts, timestamps = None))]
    fn parse(
        &self,
        py: Python<'_>,
        positions: Vec<usize>,
        texts: Vec<Bound<'_, PyAny>>,
        timestamps: Option<Vec<Option<f64>>>,
    ) -> PyResult<Option<String>> {
        if texts.len() != positions.len()
            || timestamps
                .as_ref()
                .is_some_and(|t| t.len() != positions.len())
        {
            return Err(PyValueError::new_err(
                "positions, texts and timestamps differ in length",
            ));
        }
        let owner = self.owner.bind(py).get();
        let mut state = self.lock();
        let (slots, missing) = &mut *state;
        let mut cache = owner.lock();
        let s = cache.session(&self.session);
        if s.epoch != self.epoch {
            return Ok(Some("the session's rows were forgotten meanwhile".into()));
        }
        let before = s.slots();
        let mut error = None;
        for (k, &at) in positions.iter().enumerate() {
            let Ok(m) = missing.binary_search_by_key(&at, |(i, _)| *i) else {
                continue;
            };
            let m = &missing[m].1;
            let text = &texts[k];
            let json: &[u8] = if let Ok(b) = text.cast::<PyBytes>() {
                b.as_bytes()
            } else if let Ok(t) = text.cast::<PyString>() {
                t.to_str()?.as_bytes()
            } else {
                error = Some(format!("row {at}: stored event data is not text"));
                break;
            };
            let l = Listed {
                id: &m.id,
                invocation: &m.invocation,
                stamp: m.stamp,
                row: m.row,
            };
            let fallback = timestamps.as_ref().and_then(|t| t[k]);
            match s.insert(&l, json, self.decoding, fallback) {
                Ok(slot) => slots[at] = Some(slot),
                Err(e) => {
                    error = Some(format!("row {at}: {e}"));
                    break;
                }
            }
        }
        let added = s.slots() - before;
        cache.added(&self.session, added);
        Ok(error)
    }

    /// Positions (ascending) of the rows the turn reads
    /// (`core::lean::needed`), once every row is read; None otherwise
    /// (a row not read, or the session's rows forgotten meanwhile).
    #[pyo3(signature = (
        compaction_interval = None, overlap_size = 0, rules = None, underway = Vec::new(),
        answering = Vec::new()
    ))]
    fn needed(
        &self,
        py: Python<'_>,
        compaction_interval: Option<i64>,
        overlap_size: i64,
        rules: Option<&Bound<'_, FamilyRules>>,
        underway: Vec<String>,
        answering: Vec<String>,
    ) -> PyResult<Option<Vec<usize>>> {
        let settings = Settings::of(compaction_interval, overlap_size, rules_of(rules));
        let Some(slots) = self.lock().0.iter().copied().collect::<Option<Vec<u32>>>() else {
            return Ok(None);
        };
        let owner = self.owner.bind(py).get();
        let session = &self.session;
        let epoch = self.epoch;
        let result = py.detach(|| {
            let mut cache = owner.lock();
            let s = cache.session(session);
            if s.epoch != epoch {
                return Ok(None);
            }
            let underway: Vec<&str> = underway.iter().map(String::as_str).collect();
            let answering: Vec<&str> = answering.iter().map(String::as_str).collect();
            guarded(|| {
                s.needed(&slots, &settings, &underway, &answering)
                    .map(Some)
                    .map_err(|e| CoreError::Internal(e.to_string()))
            })
        });
        // A symbol table full, or a bug of ours: the caller loads whole.
        Ok(result.unwrap_or(None))
    }
}
