//! Binding of `core::lean_rows`: a SQL store's rows read once into views,
//! and the positions of those a turn reads.

use super::select::{rules_of, FamilyRules};
use crate::core::hash::FastMap;
use crate::core::lean::Settings;
use crate::core::lean_rows::{Decoding, Listed, RowCache, SessionRows};
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
    /// Per session, the timestamp column (as the store returned it) of the
    /// last decided listing's newest row, with the session's epoch then.
    horizons: Mutex<FastMap<String, (u64, Py<PyAny>)>>,
}

impl LeanRows {
    fn lock(&self) -> MutexGuard<'_, RowCache> {
        // A panic while locked leaves the cache as consistent as any
        // interrupted insert does: every slot a listing checks is whole.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn horizons(&self) -> MutexGuard<'_, FastMap<String, (u64, Py<PyAny>)>> {
        self.horizons.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A row read off a listing query: its columns, its stamp and storage row
/// id as `core::lean_rows::Listed` keys them.
struct Read<'py> {
    id: Bound<'py, PyString>,
    invocation: Bound<'py, PyString>,
    stamp: u64,
    row: i64,
    timestamp: Bound<'py, PyAny>,
}

impl Read<'_> {
    fn listed(&self) -> PyResult<Listed<'_>> {
        Ok(Listed {
            id: self.id.to_str()?,
            invocation: self.invocation.to_str()?,
            stamp: self.stamp,
            row: self.row,
        })
    }
}

/// The rows of a listing query; `None` where a row's columns are not
/// google-adk's.
fn read_rows<'py>(rows: &Bound<'py, PyAny>) -> PyResult<Option<Vec<Read<'py>>>> {
    let mut read = Vec::new();
    for row in rows.try_iter()? {
        let row = row?;
        let Some((id, stamp, extra)) = listed(&row)? else {
            return Ok(None);
        };
        let Ok(invocation) = row.get_item(1)?.cast_into_exact::<PyString>() else {
            return Ok(None);
        };
        read.push(Read {
            id: id.cast_into_exact::<PyString>()?,
            invocation,
            stamp,
            row: extra,
            timestamp: row.get_item(2)?,
        });
    }
    Ok(Some(read))
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
    /// The timestamp column of the listing's newest row (its horizon once
    /// decided).
    last: Option<Py<PyAny>>,
}

/// A listing being made: the slot of each row (read before) or the row
/// still to be read.
struct Made {
    epoch: u64,
    slots: Vec<Option<u32>>,
    missing: Vec<(usize, Missing)>,
}

impl Made {
    /// A listing of `epoch` beginning with the rows read into `slots`.
    fn new(epoch: u64, slots: &[u32]) -> Self {
        Made {
            epoch,
            slots: slots.iter().map(|&s| Some(s)).collect(),
            missing: Vec::new(),
        }
    }

    /// Followed by the rows `read` (their slots where read before).
    fn with(mut self, s: &SessionRows, read: &[Read<'_>]) -> PyResult<Self> {
        self.slots.reserve(read.len());
        for r in read {
            let l = r.listed()?;
            let slot = s.slot(&l);
            if slot.is_none() {
                self.missing.push((
                    self.slots.len(),
                    Missing {
                        id: l.id.to_owned(),
                        invocation: l.invocation.to_owned(),
                        stamp: l.stamp,
                        row: l.row,
                    },
                ));
            }
            self.slots.push(slot);
        }
        Ok(self)
    }

    fn finish(
        self,
        owner: &Bound<'_, LeanRows>,
        session: &str,
        columns: bool,
        read: &[Read<'_>],
    ) -> PyResult<Option<LeanListing>> {
        Ok(Some(LeanListing {
            owner: owner.clone().unbind(),
            session: session.to_owned(),
            epoch: self.epoch,
            decoding: if columns {
                Decoding::Columns
            } else {
                Decoding::Json
            },
            state: Mutex::new((self.slots, self.missing)),
            last: read.last().map(|r| r.timestamp.clone().unbind()),
        }))
    }
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
            horizons: Mutex::new(FastMap::default()),
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
        let Some(read) = read_rows(rows)? else {
            return Ok(None);
        };
        let mut cache = slf.get().lock();
        // Slots well past the rows listed were left by a session deleted
        // and made again: start afresh.
        if cache.session(session).slots() > 2 * read.len() + 64 {
            cache.forget(session);
        }
        let s = cache.session(session);
        let made = Made::new(s.epoch, &[]);
        made.with(s, &read)?.finish(slf, session, columns, &read)
    }

    /// The timestamp column (as the store returned it) of the newest row
    /// of the session's last decided listing: a listing of the rows
    /// stamped from it on is handed to `tail_listing`. `None` before one.
    fn horizon(&self, py: Python<'_>, session: &str) -> Option<Py<PyAny>> {
        let cache = self.lock();
        let s = cache.get(session)?;
        s.horizon()?;
        let horizons = self.horizons();
        let (epoch, stamp) = horizons.get(session)?;
        (*epoch == s.epoch).then(|| stamp.clone_ref(py))
    }

    /// A listing of the session under `session` from the last decided one
    /// and `rows`, the session's rows stamped from its `horizon` on (as
    /// `listing` takes them), `count` being the number of the session's
    /// rows now: the last listing's rows before the horizon, then `rows`.
    /// `None` where that is not the whole session (the counts differ, or a
    /// row listed at the horizon is not among `rows`: list it whole).
    #[pyo3(signature = (session, rows, count, columns = false))]
    fn tail_listing(
        slf: &Bound<'_, Self>,
        session: &str,
        rows: &Bound<'_, PyAny>,
        count: usize,
        columns: bool,
    ) -> PyResult<Option<LeanListing>> {
        let Some(read) = read_rows(rows)? else {
            return Ok(None);
        };
        let mut cache = slf.get().lock();
        let s = cache.session(session);
        let Some((below, at)) = s.horizon() else {
            return Ok(None);
        };
        if below.len() + read.len() != count {
            return Ok(None);
        }
        let made = Made::new(s.epoch, below);
        let made = made.with(s, &read)?;
        // Every row listed at the horizon is listed again.
        let again = &made.slots[below.len()..];
        if !at.iter().all(|slot| again.contains(&Some(*slot))) {
            return Ok(None);
        }
        made.finish(slf, session, columns, &read)
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
        self.horizons().clear();
    }
}

impl LeanListing {
    fn lock(&self) -> MutexGuard<'_, Slots> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl LeanListing {
    /// Rows listed.
    fn __len__(&self) -> usize {
        self.lock().0.len()
    }

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
        let result = result.unwrap_or(None);
        if result.is_some() {
            let mut horizons = owner.horizons();
            match &self.last {
                Some(last) => {
                    horizons.insert(self.session.clone(), (epoch, last.clone_ref(py)));
                }
                None => {
                    horizons.remove(&self.session);
                }
            }
        }
        Ok(result)
    }

    /// The event id and storage row id (0 where the store has none) of the
    /// rows at `positions`, to fetch them by.
    fn keys(&self, py: Python<'_>, positions: Vec<usize>) -> PyResult<Vec<(String, i64)>> {
        let state = self.lock();
        let (slots, missing) = &*state;
        let owner = self.owner.bind(py).get();
        let cache = owner.lock();
        let s = cache.get(&self.session).filter(|s| s.epoch == self.epoch);
        positions
            .into_iter()
            .map(|at| {
                let slot = slots
                    .get(at)
                    .ok_or_else(|| PyValueError::new_err("a position past the listing"))?;
                match (slot, s) {
                    (Some(slot), Some(s)) => {
                        let (id, row) = s.key(*slot);
                        Ok((id.to_owned(), row))
                    }
                    (Some(_), None) => Err(PyValueError::new_err(
                        "the session's rows were forgotten meanwhile",
                    )),
                    (None, _) => {
                        let m = missing
                            .binary_search_by_key(&at, |(i, _)| *i)
                            .map_err(|_| PyValueError::new_err("a row not listed"))?;
                        Ok((missing[m].1.id.clone(), missing[m].1.row))
                    }
                }
            })
            .collect()
    }

    /// Whether `rows` (as `listing` takes them) are the listed rows at
    /// `positions`, one each: fetched rows checked against the listing.
    fn holds(
        &self,
        py: Python<'_>,
        positions: Vec<usize>,
        rows: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let Some(read) = read_rows(rows)? else {
            return Ok(false);
        };
        if read.len() != positions.len() {
            return Ok(false);
        }
        let state = self.lock();
        let (slots, missing) = &*state;
        let owner = self.owner.bind(py).get();
        let cache = owner.lock();
        let s = cache.get(&self.session).filter(|s| s.epoch == self.epoch);
        for (at, r) in positions.into_iter().zip(&read) {
            let l = r.listed()?;
            let same = match (slots.get(at), s) {
                (Some(Some(slot)), Some(s)) => s.is(*slot, &l),
                (Some(None), _) => missing
                    .binary_search_by_key(&at, |(i, _)| *i)
                    .is_ok_and(|m| {
                        let m = &missing[m].1;
                        m.id == l.id
                            && m.invocation == l.invocation
                            && m.stamp == l.stamp
                            && m.row == l.row
                    }),
                _ => false,
            };
            if !same {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
