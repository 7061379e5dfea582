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
/// can carry (the writer's clock reading, and the start of every other
/// invocation still under way; see [`super::coverage::write`]): the bounds
/// end strictly below it, so an event stamped in the very clock tick of the
/// last summarized one, or made earlier by an invocation still under way,
/// is never inside them. `f64::INFINITY` sets no limit.
pub fn plain_bounds(
    events: &[EventView],
    start: f64,
    end: f64,
    holes: &[usize],
    foreign: &[f64],
    ceiling: f64,
) -> Option<(f64, f64)> {
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
mod tests {
    use super::*;
    use crate::core::subsume::survivors;

    #[test]
    fn has_key_is_micros_without_rounding() {
        let edge = [
            0.0,
            -0.0,
            1.7e9,
            -1.7e9,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            9.0e12,
            -9.0e12,
            9.0e12 - 1e-7,
            8.999_999_999_999_999e12,
            f64::from_bits(9.0e18f64.to_bits() - 1) / 1e6,
            f64::MAX,
            f64::MIN_POSITIVE,
        ];
        for t in edge {
            assert_eq!(has_key(t), micros(t).is_some(), "{t:e}");
        }
        let mut bits: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200_000 {
            bits ^= bits << 13;
            bits ^= bits >> 7;
            bits ^= bits << 17;
            let t = f64::from_bits(bits);
            assert_eq!(has_key(t), micros(t).is_some(), "{t:e}");
        }
    }

    fn raw(t: f64, inv: u32) -> EventView {
        EventView {
            timestamp: t,
            invocation: Some(inv),
            ..Default::default()
        }
    }

    #[test]
    fn a_key_names_an_event_stored_at_microsecond_precision() {
        let t = 1_700_000_000.123_456_7;
        let x = Extent::new(
            9,
            0.0,
            2e9,
            vec![Hole {
                micros: micros(t).unwrap(),
                invocation: Some(1),
            }],
        );
        // Truncated (SQL), rounded, and exact all match; another invocation
        // or two microseconds away does not.
        for stored in [t, (t * 1e6).trunc() / 1e6, (t * 1e6).round() / 1e6] {
            assert!(x.excludes(Some(1), stored), "{stored}");
        }
        assert!(!x.excludes(Some(2), t));
        assert!(!x.excludes(Some(1), t + 2e-6));
    }

    #[test]
    fn holes_are_the_unsummarized_events_inside_the_interval() {
        // A reply (pos 2) tied with the window's end but not summarized, a
        // concurrent append (pos 1) inside it, an event after it (pos 3).
        let events = [raw(1.0, 1), raw(1.5, 2), raw(2.0, 1), raw(3.0, 3)];
        let handed = [true, false, false, false];
        let h = holes(&events, &[], 1.0, 2.0, &handed);
        assert_eq!(h, vec![1, 2]);
        assert_eq!(
            plain_bounds(&events, 1.0, 2.0, &h, &[], f64::INFINITY),
            Some((1.0, 1.0))
        );
    }

    #[test]
    fn a_rolling_summary_stands_for_what_its_seed_covers() {
        let events = [
            raw(1.0, 1),
            raw(2.0, 1),
            EventView::compacting(2.5, 1.0, 2.0),
            raw(3.0, 2),
        ];
        let seed = Extent::new(2, 1.0, 2.0, Vec::new());
        let handed = [false, false, true, true];
        assert!(holes(&events, std::slice::from_ref(&seed), 1.0, 3.0, &handed).is_empty());
        let rolled = Extent::new(4, 1.0, 3.0, Vec::new());
        let (survive, hidden) = survivors(&events, &[seed, rolled]);
        assert_eq!(survive, vec![1]);
        assert_eq!(hidden, vec![true, true, false, true]);
    }

    #[test]
    fn a_hole_keeps_the_compaction_it_is_in_from_subsuming_another() {
        // The later compaction leaves pos 1 out; the earlier covers it.
        let events = [
            raw(1.0, 1),
            raw(2.0, 2),
            EventView::compacting(2.5, 1.0, 2.0),
        ];
        let early = Extent::new(2, 1.0, 2.0, Vec::new());
        let late = Extent::new(
            3,
            1.0,
            2.0,
            vec![Hole {
                micros: 2_000_000,
                invocation: Some(2),
            }],
        );
        let (survive, hidden) = survivors(&events, &[early, late]);
        assert_eq!(survive, vec![0]);
        assert_eq!(hidden, vec![true, true, false]);
    }

    #[test]
    fn an_event_stored_after_the_compaction_is_not_covered() {
        let events = [
            raw(1.0, 1),
            EventView::compacting(2.5, 1.0, 2.0),
            raw(1.5, 2),
        ];
        let x = Extent::new(1, 1.0, 2.0, Vec::new());
        assert!(x.covers(0, &events[0]));
        assert!(!x.covers(2, &events[2]));
    }

    #[test]
    fn plain_bounds_take_the_largest_hole_free_run() {
        let events = [
            raw(1.0, 1),
            raw(2.0, 9),
            raw(3.0, 1),
            raw(4.0, 1),
            raw(5.0, 1),
        ];
        assert_eq!(
            plain_bounds(&events, 1.0, 5.0, &[1], &[], f64::INFINITY),
            Some((3.0, 5.0))
        );
        // A foreign hole (an invocation under way) at 2.5: its later events
        // may be stamped anywhere after it, so only the run before it is
        // plain-safe.
        assert_eq!(
            plain_bounds(&events, 1.0, 5.0, &[], &[2.5], f64::INFINITY),
            Some((1.0, 2.0))
        );
        assert_eq!(
            plain_bounds(&events, 1.0, 5.0, &[], &[0.5], f64::INFINITY),
            None
        );
        // Every summarized event ties with a hole: nothing is plain-safe.
        let tied = [raw(1.0, 1), raw(1.0, 2)];
        assert_eq!(
            plain_bounds(&tied, 1.0, 1.0, &[1], &[], f64::INFINITY),
            None
        );
    }

    #[test]
    fn plain_bounds_end_below_the_ceiling() {
        let events = [raw(1.0, 1), raw(2.0, 1), raw(3.0, 1), raw(3.0, 2)];
        // The writer's clock reads past the last summarized stamp: the
        // interval is safe as it is.
        assert_eq!(
            plain_bounds(&events, 1.0, 3.0, &[], &[], 3.5),
            Some((1.0, 3.0))
        );
        // It reads the very tick of the last summarized events: the next
        // event may carry that stamp, so the bounds step back before it
        // (those events repeat for a plain reader; none is hidden).
        assert_eq!(
            plain_bounds(&events, 1.0, 3.0, &[], &[], 3.0),
            Some((1.0, 2.0))
        );
        // An invocation under way since 1.5 may still store an event
        // stamped from then on.
        assert_eq!(
            plain_bounds(&events, 1.0, 3.0, &[], &[], 1.5),
            Some((1.0, 1.0))
        );
        // The ceiling and a hole together: the run between them.
        assert_eq!(
            plain_bounds(&events, 1.0, 3.0, &[0], &[], 3.0),
            Some((2.0, 2.0))
        );
        // Nothing summarized below it: bounds that cover nothing.
        assert_eq!(plain_bounds(&events, 1.0, 3.0, &[], &[], 1.0), None);
    }

    #[test]
    fn a_new_record_is_one_a_reader_accepts() {
        let key = Key::of("inv-1", 2.0).unwrap();
        let record = Record::new(1.0, 5.0, vec![key.clone(), key.clone()], (1.0, 5.0)).unwrap();
        assert_eq!(record.holes, vec![key]);
        assert_eq!(Record::parse(&record.to_json(), (1.0, 5.0)), Ok(record));
        assert_eq!(
            Record::new(1.0, f64::NAN, Vec::new(), (1.0, 1.0)),
            Err(RecordError::Inconsistent)
        );
        let many = (0..=MAX_HOLES as i64)
            .map(|t| Key {
                invocation: String::new(),
                micros: t,
            })
            .collect();
        assert_eq!(
            Record::new(1.0, 5.0, many, (1.0, 5.0)),
            Err(RecordError::Oversized(MAX_HOLES + 1))
        );
    }

    #[test]
    fn records_round_trip_and_bad_ones_are_told_apart() {
        let record = Record {
            v: VERSION,
            start: 1.0,
            end: 5.0,
            holes: vec![Key::of("inv-1", 2.0).unwrap()],
        };
        let json = record.to_json();
        assert_eq!(Record::parse(&json, (3.0, 5.0)), Ok(record.clone()));
        assert_eq!(Record::parse(&json, (3.0, 2.0)), Ok(record));
        assert!(matches!(
            Record::parse("{", (1.0, 1.0)),
            Err(RecordError::Malformed(_))
        ));
        assert!(matches!(
            Record::parse(r#"{"v":1,"start":1,"end":5,"holes":[],"x":1}"#, (1.0, 5.0)),
            Err(RecordError::Malformed(_))
        ));
        assert_eq!(
            Record::parse(r#"{"v":7,"anything":true}"#, (1.0, 5.0)),
            Err(RecordError::Version(7))
        );
        assert_eq!(
            Record::parse(r#"{"v":1,"start":1,"end":5,"holes":[]}"#, (0.0, 5.0)),
            Err(RecordError::Inconsistent)
        );
        let many = format!(
            r#"{{"v":1,"start":1,"end":5,"holes":[{}]}}"#,
            vec![r#"{"i":"a","t":1}"#; MAX_HOLES + 1].join(",")
        );
        assert_eq!(
            Record::parse(&many, (1.0, 5.0)),
            Err(RecordError::Oversized(MAX_HOLES + 1))
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// Raw events on a coarse clock (ties are frequent) of a few
        /// invocations, now and then a compaction event.
        fn session() -> impl Strategy<Value = Vec<EventView>> {
            prop::collection::vec(
                (
                    0u8..12,
                    prop::option::of(0u32..4),
                    prop::bool::weighted(0.15),
                ),
                1..40,
            )
            .prop_map(|items| {
                items
                    .into_iter()
                    .map(|(t, inv, is_compaction)| {
                        let t = f64::from(t);
                        if is_compaction {
                            EventView::compacting(t, t - 3.0, t)
                        } else {
                            EventView {
                                timestamp: t,
                                invocation: inv,
                                ..Default::default()
                            }
                        }
                    })
                    .collect()
            })
        }

        fn extent_of(
            events: &[EventView],
            at: usize,
            start: f64,
            end: f64,
            holes: &[usize],
        ) -> Extent {
            let keys = holes
                .iter()
                .map(|&p| Hole {
                    micros: micros(events[p].timestamp).unwrap(),
                    invocation: events[p].invocation,
                })
                .collect();
            Extent::new(at, start, end, keys)
        }

        proptest! {
            #[test]
            fn a_new_compaction_covers_only_what_its_summary_stands_for(
                events in session(),
                bounds in (0u8..12, 0u8..6),
                handed_bits in prop::collection::vec(any::<bool>(), 40),
                seed_pick in any::<prop::sample::Index>(),
                ceiling in prop::option::of(0u8..14),
            ) {
                let ceiling = ceiling.map_or(f64::INFINITY, f64::from);
                let (lo, width) = bounds;
                let (start, end) = (f64::from(lo), f64::from(lo) + f64::from(width));
                let mut handed: Vec<bool> = (0..events.len()).map(|k| handed_bits[k]).collect();
                // Earlier compactions, each covering its own interval; one
                // of them may be the seed handed to the summarizer.
                let extents: Vec<Extent> = events
                    .iter()
                    .enumerate()
                    .filter_map(|(at, e)| {
                        let (s, t) = e.compaction?.bounds()?;
                        Some(Extent::new(at, s, t, Vec::new()))
                    })
                    .collect();
                for x in &extents {
                    handed[x.at] = false;
                }
                if !extents.is_empty() {
                    handed[extents[seed_pick.index(extents.len())].at] = true;
                }
                let h = holes(&events, &extents, start, end, &handed);
                let new = extent_of(&events, events.len(), start, end, &h);
                let stands_for = |pos: usize| {
                    handed[pos] || extents.iter().any(|x| handed[x.at] && x.covers(pos, &events[pos]))
                };
                for (pos, e) in events.iter().enumerate() {
                    // No loss: whatever the new record covers, its summary stands for.
                    if new.covers(pos, e) {
                        prop_assert!(stands_for(pos), "pos {} covered, not summarized", pos);
                    }
                    // And every summarized raw event inside the interval is
                    // covered, unless a hole of its invocation ties with it
                    // (over-naming: visible, never a loss).
                    let inside = e.compaction.is_none() && start <= e.timestamp && e.timestamp <= end;
                    if inside && stands_for(pos) && !new.covers(pos, e) {
                        prop_assert!(h.iter().any(|&q| events[q].invocation == e.invocation
                            && events[q].timestamp == e.timestamp));
                    }
                }
                // A reader of the plain bounds hides nothing unsummarized,
                // and no event stamped from the ceiling on.
                if let Some((a, b)) = plain_bounds(&events, start, end, &h, &[], ceiling) {
                    prop_assert!(start <= a && a <= b && b <= end && b < ceiling);
                    let plain = Extent::new(events.len(), a, b, Vec::new());
                    for (pos, e) in events.iter().enumerate() {
                        if plain.covers(pos, e) {
                            prop_assert!(stands_for(pos));
                        }
                    }
                } else {
                    // Nothing summarized is plain-safe: each ties with a
                    // hole or is stamped from the ceiling on.
                    let summarized_below = events.iter().enumerate().any(|(pos, e)| {
                        e.compaction.is_none()
                            && start <= e.timestamp
                            && e.timestamp <= end
                            && e.timestamp < ceiling
                            && !h.iter().any(|&q| events[q].timestamp == e.timestamp)
                            && !h.contains(&pos)
                    });
                    prop_assert!(!summarized_below);
                }
            }

            #[test]
            fn survivors_hide_exactly_what_some_survivor_covers(
                events in session(),
                hole_bits in prop::collection::vec(any::<bool>(), 40),
            ) {
                let extents: Vec<Extent> = events
                    .iter()
                    .enumerate()
                    .filter_map(|(at, e)| {
                        let (s, t) = e.compaction?.bounds()?;
                        let holes: Vec<usize> = (0..at)
                            .filter(|&p| hole_bits[p] && events[p].compaction.is_none())
                            .collect();
                        Some(extent_of(&events, at, s, t, &holes))
                    })
                    .collect();
                let (survive, hidden) = survivors(&events, &extents);
                for (pos, e) in events.iter().enumerate() {
                    let any = extents.iter().any(|x| x.covers(pos, e));
                    // Dropping subsumed compactions hides nothing more and
                    // nothing less than all of them together.
                    prop_assert_eq!(hidden[pos], any, "pos {}", pos);
                    let by_survivor = survive.iter().any(|&k| extents[k].covers(pos, e));
                    prop_assert_eq!(by_survivor, any);
                }
            }

            #[test]
            fn keys_survive_microsecond_storage(
                t in 1.0e9f64..2.0e9,
                inv in 0u32..3,
            ) {
                let x = Extent::new(1, 0.0, 3.0e9, vec![Hole { micros: micros(t).unwrap(), invocation: Some(inv) }]);
                for stored in [t, (t * 1e6).trunc() / 1e6, (t * 1e6).round() / 1e6, (t * 1e6).floor() / 1e6] {
                    prop_assert!(x.excludes(Some(inv), stored));
                }
                let record = Record { v: VERSION, start: t, end: t, holes: vec![Key::of("i", t).unwrap()] };
                prop_assert_eq!(Record::parse(&record.to_json(), (t, t)), Ok(record));
            }
        }
    }
}
