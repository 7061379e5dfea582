//! Exact coverage: an interval plus the holes in it.
//!
//! google-adk records what a summary replaced as a bare timestamp interval
//! and hides every raw event stamped inside it. Exact mode keeps that
//! interval and adds, in the compaction event's `custom_metadata`, a
//! [`Record`] naming the events inside it that the summary does *not*
//! stand in for (the holes: an event appended concurrently, a reply tied
//! with the window's edge, a retained tail, a stepped-past pending call).
//! An event is covered by a compaction when its timestamp is inside the
//! interval, it was stored before the compaction event, and no hole names
//! it.
//!
//! Holes are decided by position when the record is written (the caller
//! knows which objects it handed to the summarizer), and stored as
//! [`Key`]s, which every ADK session service keeps: the invocation id and
//! the timestamp in microseconds (SQL backends keep microseconds; Vertex AI
//! replaces a client-assigned event id on read, so ids are not used). A key
//! names an event within one microsecond either way. The imprecision fails
//! in one direction only: an over-named hole leaves an event raw beside its
//! summary (visible, the prompt merely repeats it), while the interval is
//! still compared exactly, so an event just outside it is never pulled in.
//!
//! The compaction's own `EventCompaction` bounds are written narrowed
//! ([`plain_bounds`]) so that they contain no hole: google-adk without the
//! accelerator, or a store that drops `custom_metadata`, then sees an
//! interval that hides nothing unsummarized (it may show a summarized event
//! raw beside its summary: duplication, never loss). The record carries the
//! full interval for readers that know it.

use super::event::{EventView, Sym};
use serde::{Deserialize, Serialize};
use std::fmt;

/// `custom_metadata` key of the record.
pub const METADATA_KEY: &str = "adk_fastcompact";

/// The record format written and understood.
pub const VERSION: u32 = 1;

/// Holes one record may name; a record naming more is refused as
/// oversized (and its compaction read as an interval).
pub const MAX_HOLES: usize = 4096;

/// Microseconds of slack when a key is compared with an event's timestamp:
/// one backend rounds where another truncates.
pub const SLACK_MICROS: i64 = 1;

/// An event as a record refers to it: its invocation id and its timestamp
/// in whole microseconds (rounded to nearest).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Key {
    /// `invocation_id` (empty when the event has none).
    #[serde(rename = "i")]
    pub invocation: String,
    /// `timestamp`, in microseconds.
    #[serde(rename = "t")]
    pub micros: i64,
}

/// `timestamp` in microseconds, rounded to nearest; `None` when it is not
/// finite or out of the `i64` range.
pub fn micros(timestamp: f64) -> Option<i64> {
    let us = (timestamp * 1e6).round();
    (us.is_finite() && us.abs() < 9.0e18).then_some(us as i64)
}

/// Whether `timestamp` has a key (`micros(timestamp).is_some()`), without
/// rounding: rounding keeps a value finite, and a float of magnitude near
/// 9e18 is an integer already, so the bound reads the same before it.
/// (`round` is a libm call on the baseline x86-64 target: the coverage
/// checks ask this of every event, most of them outside every interval.)
#[inline]
pub fn has_key(timestamp: f64) -> bool {
    let us = timestamp * 1e6;
    us.is_finite() && us.abs() < 9.0e18
}

impl Key {
    /// The key of an event, or `None` for a timestamp that has none.
    pub fn of(invocation: &str, timestamp: f64) -> Option<Key> {
        Some(Key {
            invocation: invocation.to_owned(),
            micros: micros(timestamp)?,
        })
    }
}

/// What a compaction written in exact mode records beside its
/// `EventCompaction`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// [`VERSION`].
    pub v: u32,
    /// The interval the summary was made over (the `EventCompaction`
    /// bounds may be narrower, see [`plain_bounds`]).
    pub start: f64,
    /// See `start`.
    pub end: f64,
    /// The events inside the interval, stored before the compaction, that
    /// the summary does not stand in for.
    pub holes: Vec<Key>,
}

/// A compaction event's record as read: `None` when it has none,
/// `Some(Err(why))` when it has one that is not used.
pub type Parsed = Option<Result<Record, String>>;

/// Why a record is not used (its compaction is then read as its interval,
/// as google-adk reads it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// Not JSON of the record's shape.
    Malformed(String),
    /// Written by a later format.
    Version(u32),
    /// More than [`MAX_HOLES`] holes.
    Oversized(usize),
    /// Non-finite or inverted bounds, or `EventCompaction` bounds that are
    /// not inside the record's interval.
    Inconsistent,
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::Malformed(why) => write!(f, "malformed coverage record: {why}"),
            RecordError::Version(v) => write!(
                f,
                "coverage record version {v} is newer than this release reads ({VERSION})"
            ),
            RecordError::Oversized(n) => {
                write!(f, "coverage record names {n} holes (at most {MAX_HOLES})")
            }
            RecordError::Inconsistent => write!(
                f,
                "coverage record bounds are not finite, inverted, or do not contain the \
                 compaction's own bounds"
            ),
        }
    }
}

impl std::error::Error for RecordError {}

impl Record {
    /// Reads and validates a record against its compaction's own bounds.
    pub fn parse(json: &str, bounds: (f64, f64)) -> Result<Record, RecordError> {
        let value: serde_json::Value =
            serde_json::from_str(json).map_err(|e| RecordError::Malformed(e.to_string()))?;
        Record::from_value(value, bounds)
    }

    /// [`Record::parse`] of an already parsed JSON value.
    pub fn from_value(value: serde_json::Value, bounds: (f64, f64)) -> Result<Record, RecordError> {
        // The version first, so that a later format is told apart from a
        // malformed one whatever else it carries.
        match value.get("v").and_then(serde_json::Value::as_u64) {
            Some(v) if v > u64::from(VERSION) => {
                return Err(RecordError::Version(u32::try_from(v).unwrap_or(u32::MAX)))
            }
            _ => {}
        }
        if let Some(n) = value
            .get("holes")
            .and_then(serde_json::Value::as_array)
            .map(Vec::len)
        {
            if n > MAX_HOLES {
                return Err(RecordError::Oversized(n));
            }
        }
        let record: Record =
            serde_json::from_value(value).map_err(|e| RecordError::Malformed(e.to_string()))?;
        if record.v != VERSION {
            return Err(RecordError::Malformed(format!("version {}", record.v)));
        }
        record.check(bounds)?;
        Ok(record)
    }

    /// The record to write for a compaction over `[start, end]` whose
    /// `EventCompaction` carries `bounds`, with `holes` sorted and
    /// deduplicated; refused by the checks a reader makes.
    pub fn new(
        start: f64,
        end: f64,
        mut holes: Vec<Key>,
        bounds: (f64, f64),
    ) -> Result<Record, RecordError> {
        holes.sort();
        holes.dedup();
        if holes.len() > MAX_HOLES {
            return Err(RecordError::Oversized(holes.len()));
        }
        let record = Record {
            v: VERSION,
            start,
            end,
            holes,
        };
        record.check(bounds)?;
        Ok(record)
    }

    fn check(&self, (lo, hi): (f64, f64)) -> Result<(), RecordError> {
        let finite = [self.start, self.end, lo, hi].iter().all(|x| x.is_finite());
        // Plain bounds may be inverted (a compaction whose summarized events
        // all tie with holes covers nothing for a plain reader).
        let inside = lo > hi || (self.start <= lo && hi <= self.end);
        if !finite || self.start > self.end || !inside {
            return Err(RecordError::Inconsistent);
        }
        Ok(())
    }

    /// The record as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A hole as the core compares it: an interned invocation and microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hole {
    /// Microseconds, the sort key.
    pub micros: i64,
    /// The invocation (`None`: an event without one).
    pub invocation: Option<Sym>,
}

/// What one compaction covers in exact mode.
#[derive(Debug, Clone, PartialEq)]
pub struct Extent {
    /// Position of the compaction event in the session.
    pub at: usize,
    /// The interval, compared exactly.
    pub start: f64,
    /// See `start`.
    pub end: f64,
    /// Sorted by microseconds.
    pub holes: Vec<Hole>,
}

impl Extent {
    /// An extent; `holes` are sorted here.
    pub fn new(at: usize, start: f64, end: f64, mut holes: Vec<Hole>) -> Extent {
        holes.sort_unstable();
        Extent {
            at,
            start,
            end,
            holes,
        }
    }

    /// Whether a hole names the event at `timestamp` of `invocation`.
    pub fn excludes(&self, invocation: Option<Sym>, timestamp: f64) -> bool {
        if self.holes.is_empty() {
            return false;
        }
        let Some(us) = micros(timestamp) else {
            // No key: nothing can name it, and nothing covers it either
            // (see `covers`).
            return false;
        };
        let from = self
            .holes
            .partition_point(|h| h.micros < us.saturating_sub(SLACK_MICROS));
        self.holes[from..]
            .iter()
            .take_while(|h| h.micros <= us.saturating_add(SLACK_MICROS))
            .any(|h| h.invocation == invocation)
    }

    /// Whether this compaction covers the raw event at position `pos`.
    pub fn covers(&self, pos: usize, event: &EventView) -> bool {
        let t = event.timestamp;
        // The interval first: most events are outside it.
        pos < self.at
            && self.start <= t
            && t <= self.end
            && event.compaction.is_none()
            && has_key(t)
            && !self.excludes(event.invocation, t)
    }
}

/// The holes of a compaction about to be appended to `events` over
/// `[start, end]`: positions of the raw events inside the interval that
/// neither were handed to the summarizer (`handed[pos]`) nor are covered by
/// a compaction that was (`handed` names compaction events too: a rolling
/// summary's seed stands for what it covers).
pub fn holes(
    events: &[EventView],
    extents: &[Extent],
    start: f64,
    end: f64,
    handed: &[bool],
) -> Vec<usize> {
    let seeds: Vec<&Extent> = extents.iter().filter(|x| handed[x.at]).collect();
    let future = Extent::new(events.len(), start, end, Vec::new());
    events
        .iter()
        .enumerate()
        .filter(|&(pos, e)| {
            future.covers(pos, e) && !handed[pos] && !seeds.iter().any(|s| s.covers(pos, e))
        })
        .map(|(pos, _)| pos)
        .collect()
}

/// How far behind the writer's clock another clock may stamp an event
/// stored after a compaction: seconds, finite and not negative. The plain
/// bounds ([`plain_bounds`]) end that much further below the writer's
/// ceiling; exact mode's own reading (the record) does not use it.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct ClockSkew(f64);

impl ClockSkew {
    /// No margin: only the writer's clock stamps events.
    pub const NONE: ClockSkew = ClockSkew(0.0);

    /// `seconds` as a margin, or `None` when it is not finite or is negative.
    pub fn new(seconds: f64) -> Option<ClockSkew> {
        (seconds.is_finite() && seconds >= 0.0).then_some(ClockSkew(seconds + 0.0))
    }

    /// The margin in seconds.
    pub fn seconds(self) -> f64 {
        self.0
    }

    /// The earliest stamp another clock may put on an event the writer's
    /// clock would stamp at `ceiling` or later (`ceiling` when infinite).
    pub fn below(self, ceiling: f64) -> f64 {
        ceiling - self.0
    }
}

/// The bounds to write into the `EventCompaction` of a compaction over
/// `[start, end]` with `holes`, so that a reader of the bare interval hides
/// no event the summary does not stand for, whether stored before the
/// compaction or after it: the run of summarized raw events (inside the
/// interval, not holes) strictly between two consecutive hole timestamps
/// that holds the most of them, from its first to its last timestamp,
/// among the timestamps strictly below every limit. Without holes, limits
/// or a limit inside the interval, the interval itself. `None` when no
/// summarized event is left (the caller writes bounds that cover nothing).
///
/// `foreign` are the timestamps of holes that are not in `events`: events
/// of other invocations found in the store when the record was written. An
/// invocation under way may still append events stamped after its first
/// stored one (an event is stamped when it is made, not when it is
/// stored), so only runs that end before the earliest foreign hole are
/// taken.
///
/// `ceiling` is the earliest timestamp an event stored after the compaction
/// can carry by the writer's clock (its reading, and the start of every
/// other invocation still under way; see [`super::coverage::write`]), and
/// `skew` how far behind it another clock may stamp such an event (another
/// replica's, or a stamp the application sets): the bounds end strictly
/// below `ceiling - skew`, so an event stamped in the very clock tick of
/// the last summarized one, made earlier by an invocation still under way,
/// or stamped up to `skew` behind the writer's clock, is never inside them.
/// The summarized events stamped within `skew` of the ceiling then repeat
/// raw beside their summary for a plain reader. `f64::INFINITY` sets no
/// limit.
pub fn plain_bounds(
    events: &[EventView],
    start: f64,
    end: f64,
    holes: &[usize],
    foreign: &[f64],
    ceiling: f64,
    skew: ClockSkew,
) -> Option<(f64, f64)> {
    let ceiling = skew.below(ceiling);
    if holes.is_empty() && foreign.is_empty() && end < ceiling {
        return Some((start, end));
    }
    let limit = foreign.iter().copied().fold(ceiling, f64::min);
    let future = Extent::new(events.len(), start, end, Vec::new());
    let mut cuts: Vec<f64> = holes.iter().map(|&p| events[p].timestamp).collect();
    cuts.extend_from_slice(foreign);
    cuts.sort_by(|a, b| a.total_cmp(b));
    let is_hole = {
        let mut mask = vec![false; events.len()];
        for &p in holes {
            mask[p] = true;
        }
        mask
    };
    let mut inside: Vec<f64> = events
        .iter()
        .enumerate()
        .filter(|&(pos, e)| !is_hole[pos] && future.covers(pos, e))
        .map(|(_, e)| e.timestamp)
        .collect();
    inside.sort_by(|a, b| a.total_cmp(b));
    // Group the summarized timestamps by the gap between cuts they fall in;
    // one equal to a cut belongs to no gap.
    let mut best: Option<(usize, f64, f64)> = None;
    let mut run: Option<(usize, f64, f64, usize)> = None; // (count, lo, hi, gap)
    for &t in inside.iter().filter(|&&t| t < limit) {
        let gap = cuts.partition_point(|&c| c < t);
        if cuts.get(gap) == Some(&t) {
            continue;
        }
        run = match run {
            Some((n, lo, _, g)) if g == gap => Some((n + 1, lo, t, g)),
            other => {
                if let Some((n, lo, hi, _)) = other {
                    if best.is_none_or(|(m, _, _)| n > m) {
                        best = Some((n, lo, hi));
                    }
                }
                Some((1, t, t, gap))
            }
        };
    }
    if let Some((n, lo, hi, _)) = run {
        if best.is_none_or(|(m, _, _)| n > m) {
            best = Some((n, lo, hi));
        }
    }
    best.map(|(_, lo, hi)| (lo, hi))
}

#[cfg(test)]
#[path = "exact_tests.rs"]
mod tests;
