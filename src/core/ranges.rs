//! Compaction ranges and subsumption (`_get_compaction_ranges`).

use super::event::EventView;
use std::cmp::Ordering;

/// A surviving compaction: the event index and its `[start, end]` bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionRange {
    /// Index of the compaction event.
    pub index: usize,
    /// `start_timestamp` (may be NaN).
    pub start: f64,
    /// `end_timestamp` (may be NaN).
    pub end: f64,
}

/// Python's `<` on floats seen as an ordering: NaN never occurs here (NaN
/// bounds are filtered out before sorting), and `-0.0 == 0.0` as in Python.
#[inline]
pub(crate) fn cmp_f64(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

/// Non-subsumed compaction ranges, in event order.
///
/// A compaction takes part when it has content and both bounds. A range with
/// a NaN bound neither contains nor is contained by another and always
/// survives. Among the others, a range contained in another is dropped and of
/// identical ranges only the latest event survives.
pub fn compaction_ranges(events: &[EventView]) -> Vec<CompactionRange> {
    let ranges = events
        .iter()
        .enumerate()
        .filter_map(|(index, event)| {
            let (start, end) = event.compaction.and_then(|c| c.bounds())?;
            Some(CompactionRange { index, start, end })
        })
        .collect();
    survivors(ranges)
}

/// The ranges of `ranges` (in event order, one per event) that no other
/// contains, as [`compaction_ranges`] decides, in event order.
///
/// Being contained (in a range that is not NaN-bounded and holds it, the
/// later of two identical ones holding the earlier) is a transitive
/// relation of two ranges alone: the survivors of a set and more ranges
/// are the survivors of the set's survivors and those ranges, which is how
/// a filtered history is extended by a new compaction.
pub fn survivors(mut ranges: Vec<CompactionRange>) -> Vec<CompactionRange> {
    let nan = |r: &CompactionRange| r.start.is_nan() || r.end.is_nan();
    let mut retained = vec![false; ranges.len()];
    // Positions in `ranges`, start ascending, end descending, index
    // descending: every range that can contain another sorts before it, so
    // a running maximum end decides.
    let mut comparable: Vec<usize> = Vec::with_capacity(ranges.len());
    for (k, r) in ranges.iter().enumerate() {
        if nan(r) {
            retained[k] = true;
        } else {
            comparable.push(k);
        }
    }
    comparable.sort_unstable_by(|&a, &b| {
        let (a, b) = (&ranges[a], &ranges[b]);
        cmp_f64(a.start, b.start)
            .then(cmp_f64(b.end, a.end))
            .then(b.index.cmp(&a.index))
    });
    let mut max_end: Option<f64> = None;
    for k in comparable {
        let end = ranges[k].end;
        if max_end.is_none_or(|m| end > m) {
            retained[k] = true;
            max_end = Some(end);
        }
    }
    let mut k = 0;
    ranges.retain(|_| {
        k += 1;
        retained[k - 1]
    });
    ranges
}

/// The compaction ranges of some events followed by `tail` (numbered from
/// `offset`), from `ranges`, those of the events alone: the tail's ranges
/// appended, then their [`survivors`] (the same as those of every range).
/// An empty tail changes nothing.
pub fn extend_ranges(
    mut ranges: Vec<CompactionRange>,
    offset: usize,
    tail: &[EventView],
) -> Vec<CompactionRange> {
    if tail.is_empty() {
        return ranges;
    }
    ranges.extend(tail.iter().enumerate().filter_map(|(k, v)| {
        let (start, end) = v.compaction.and_then(|c| c.bounds())?;
        Some(CompactionRange {
            index: offset + k,
            start,
            end,
        })
    }));
    survivors(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::CompactionView;

    pub(crate) fn compaction(start: f64, end: f64) -> EventView {
        EventView {
            timestamp: end + 0.5,
            compaction: Some(CompactionView {
                start: Some(start),
                end: Some(end),
                has_content: true,
            }),
            ..Default::default()
        }
    }

    fn indices(events: &[EventView]) -> Vec<usize> {
        compaction_ranges(events).iter().map(|r| r.index).collect()
    }

    #[test]
    fn contained_range_is_dropped() {
        let events = vec![compaction(1.0, 2.0), compaction(0.0, 5.0)];
        assert_eq!(indices(&events), vec![1]);
    }

    #[test]
    fn identical_ranges_keep_the_latest() {
        let events = vec![
            compaction(1.0, 2.0),
            EventView::at(3.0),
            compaction(1.0, 2.0),
        ];
        assert_eq!(indices(&events), vec![2]);
    }

    #[test]
    fn partial_overlaps_both_survive() {
        let events = vec![compaction(1.0, 3.0), compaction(2.0, 4.0)];
        assert_eq!(indices(&events), vec![0, 1]);
    }

    #[test]
    fn nan_bounds_always_survive_and_contain_nothing() {
        let events = vec![compaction(f64::NAN, 9.0), compaction(1.0, 2.0)];
        assert_eq!(indices(&events), vec![0, 1]);
    }

    #[test]
    fn missing_content_or_bound_is_ignored() {
        let mut no_content = compaction(0.0, 9.0);
        no_content.compaction.as_mut().unwrap().has_content = false;
        let mut no_end = compaction(0.0, 9.0);
        no_end.compaction.as_mut().unwrap().end = None;
        let events = vec![no_content, no_end, compaction(1.0, 2.0)];
        assert_eq!(indices(&events), vec![2]);
    }

    #[test]
    fn extending_appends_the_tail_ranges_and_keeps_the_survivors() {
        let events = vec![compaction(1.0, 2.0), compaction(5.0, 6.0)];
        let tail = vec![EventView::at(7.0), compaction(0.0, 3.0)];
        let extended = extend_ranges(compaction_ranges(&events), 2, &tail);
        let indices: Vec<usize> = extended.iter().map(|r| r.index).collect();
        // The tail's range (at 2 + 1) holds the first; the second stays.
        assert_eq!(indices, vec![1, 3]);
        let none = extend_ranges(compaction_ranges(&events), 2, &[]);
        assert_eq!(none, compaction_ranges(&events));
    }

    #[test]
    fn inverted_range_is_kept_like_any_other() {
        let events = vec![compaction(5.0, 1.0)];
        assert_eq!(indices(&events), vec![0]);
    }
}
