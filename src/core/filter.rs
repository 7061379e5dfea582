//! Prompt filtering (`_process_compaction_events`): which events a prompt
//! keeps once compaction summaries replace the raw events they cover.

use super::error::CoreError;
use super::event::{CompactionView, EventView};
use super::ranges::{cmp_f64, compaction_ranges, survivors, CompactionRange};

/// One element of the filtered history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// The raw event at this index, kept as is.
    Raw(usize),
    /// The summary materialized from the compaction event at this index.
    Summary(usize),
}

/// Union of the surviving ranges, for "is this timestamp covered" lookups.
#[derive(Debug, Default)]
pub struct Coverage {
    starts: Vec<f64>,
    ends: Vec<f64>,
}

impl Coverage {
    /// Merges `[start, end]` ranges; empty, inverted and NaN ranges cover
    /// nothing (they fail `start <= end`).
    pub fn new(ranges: impl IntoIterator<Item = (f64, f64)>) -> Self {
        let mut sorted: Vec<(f64, f64)> = ranges.into_iter().filter(|(s, e)| s <= e).collect();
        sorted.sort_unstable_by(|a, b| cmp_f64(a.0, b.0).then(cmp_f64(a.1, b.1)));
        let mut cov = Coverage::default();
        for (start, end) in sorted {
            match cov.ends.last_mut() {
                Some(last) if start <= *last => {
                    if end > *last {
                        *last = end;
                    }
                }
                _ => {
                    cov.starts.push(start);
                    cov.ends.push(end);
                }
            }
        }
        cov
    }

    /// Whether `ts` lies in a merged range (inclusive at both ends). NaN is
    /// never covered, as with `bisect_right` and `<=` in Python.
    #[inline]
    pub fn covers(&self, ts: f64) -> bool {
        // bisect_right: the first start strictly greater than ts.
        let pos = self
            .starts
            .partition_point(|&s| ts.partial_cmp(&s) != Some(std::cmp::Ordering::Less));
        pos > 0 && ts <= self.ends[pos - 1]
    }
}

/// The filtered history in prompt order.
///
/// Compaction events never appear raw: each surviving one becomes a summary
/// placed at its end timestamp; raw events inside any surviving range are
/// left out; everything is ordered by (timestamp, event index).
///
/// Fails with [`CoreError::UnorderedTimestamp`] when a NaN would be a sort
/// key, where only CPython's own sort defines the order.
pub fn process_compaction_events(events: &[EventView]) -> Result<Vec<Item>, CoreError> {
    process_extensibly(events).map(|(items, _)| items)
}

/// [`process_compaction_events`] and what extending its result needs (see
/// [`Extension`]), from the same pass.
pub fn process_extensibly(events: &[EventView]) -> Result<(Vec<Item>, Extension), CoreError> {
    let ranges = compaction_ranges(events);
    let coverage = Coverage::new(ranges.iter().map(|r| (r.start, r.end)));
    let mut keyed: Vec<(f64, usize, Item)> = Vec::with_capacity(events.len());
    for r in &ranges {
        keyed.push((r.end, r.index, Item::Summary(r.index)));
    }
    for (i, event) in events.iter().enumerate() {
        if event.compaction.is_some() || coverage.covers(event.timestamp) {
            continue;
        }
        keyed.push((event.timestamp, i, Item::Raw(i)));
    }
    in_order(keyed, coverage).map_err(|index| CoreError::UnorderedTimestamp { index })
}

/// The items of `keyed` (sort key, event index, item) in prompt order, and
/// the extension of that result under `coverage`; or the index of an item
/// whose key is NaN, where only CPython's own sort defines the order.
fn in_order(
    mut keyed: Vec<(f64, usize, Item)>,
    coverage: Coverage,
) -> Result<(Vec<Item>, Extension), usize> {
    if let Some(&(_, index, _)) = keyed.iter().find(|(key, _, _)| key.is_nan()) {
        return Err(index);
    }
    // Keys are NaN-free and indices unique: a total order, so any sort agrees
    // with Python's stable one.
    keyed.sort_unstable_by(|a, b| cmp_f64(a.0, b.0).then(a.1.cmp(&b.1)));
    let extension = Extension {
        coverage,
        last: keyed.last().map_or(f64::NEG_INFINITY, |&(key, _, _)| key),
    };
    Ok((
        keyed.into_iter().map(|(_, _, item)| item).collect(),
        extension,
    ))
}

/// What a result of [`process_compaction_events`] needs to be extended to
/// the same events followed by more: the union of its ranges and the key of
/// its last item (see [`process_extensibly`]).
#[derive(Debug)]
pub struct Extension {
    coverage: Coverage,
    /// The largest sort key among the items (`-inf` for none).
    last: f64,
}

impl Extension {
    /// The largest key among the items.
    pub fn last_key(&self) -> f64 {
        self.last
    }

    /// Whether appending `tail` to the events leaves their result as it is,
    /// followed by every tail event in tail order; if so, it now describes
    /// the extended result. That holds when no tail event is a compaction
    /// (the ranges stay), none is covered by a range, and their timestamps
    /// are numbers that do not decrease from the last key on (each sorts
    /// after every item so far: a tie goes to the larger index).
    pub fn extend(&mut self, tail: &[EventView]) -> bool {
        let mut last = self.last;
        for e in tail {
            if e.compaction.is_some()
                || e.timestamp.is_nan()
                || e.timestamp < last
                || self.coverage.covers(e.timestamp)
            {
                return false;
            }
            last = e.timestamp;
        }
        self.last = last;
        true
    }
}

/// The filtered history of some events followed by `tail` (numbered from
/// `offset`), from `items`, the history of those events, when
/// [`Extension::extend`] declines the tail for holding compactions; with
/// what extending it further needs. `view_of(i)` is the view of event `i`
/// of `items` (its timestamp and compaction are read, of the raw events and
/// the summaries' compaction events only).
///
/// Adding ranges only drops ranges (see [`survivors`]: the survivors are
/// those of the old survivors and the tail's ranges) into ranges that
/// still cover them, so the union of the ranges only grows: the raw events
/// are the old raw items and the tail's events that the new union leaves
/// uncovered. `None` when a sort key would be NaN (the full computation
/// then fails as it does) or `items` names a summary of an event without
/// bounds.
pub fn extend_with_compactions(
    items: &[Item],
    view_of: impl Fn(usize) -> EventView,
    tail: &[EventView],
    offset: usize,
) -> Option<(Vec<Item>, Extension)> {
    let mut ranges = Vec::new();
    let mut raw = Vec::new();
    for &item in items {
        match item {
            Item::Summary(index) => {
                let (start, end) = view_of(index).compaction.and_then(|c| c.bounds())?;
                ranges.push(CompactionRange { index, start, end });
            }
            Item::Raw(i) => raw.push((view_of(i).timestamp, i)),
        }
    }
    ranges.sort_unstable_by_key(|r| r.index);
    for (k, e) in tail.iter().enumerate() {
        if let Some((start, end)) = e.compaction.and_then(|c| c.bounds()) {
            let index = offset + k;
            ranges.push(CompactionRange { index, start, end });
        }
    }
    let ranges = survivors(ranges);
    let coverage = Coverage::new(ranges.iter().map(|r| (r.start, r.end)));
    let mut keyed: Vec<(f64, usize, Item)> = Vec::with_capacity(ranges.len() + raw.len());
    for r in &ranges {
        keyed.push((r.end, r.index, Item::Summary(r.index)));
    }
    let tail_raw = tail
        .iter()
        .enumerate()
        .filter(|(_, e)| e.compaction.is_none())
        .map(|(k, e)| (e.timestamp, offset + k));
    for (ts, i) in raw.into_iter().chain(tail_raw) {
        if !coverage.covers(ts) {
            keyed.push((ts, i, Item::Raw(i)));
        }
    }
    in_order(keyed, coverage).ok()
}

/// How [`extend_filtered`] extended a filtered history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extended {
    /// The tail's events followed the items, raw, in tail order.
    Appended,
    /// The items were computed anew from the last ones and the tail (it
    /// held compactions, or events out of order or covered).
    Merged,
}

/// Extends `items`, the filtered history of some events, and `extension`,
/// what extending it needs, to those events followed by `tail` (numbered
/// from `offset`): the tail appended raw where [`Extension::extend`]
/// accepts it, else merged into the items by [`extend_with_compactions`]
/// (`view_of` as there). `None` (both left as they were) when that
/// declines: the history must be computed.
pub fn extend_filtered(
    items: &mut Vec<Item>,
    extension: &mut Extension,
    view_of: impl Fn(usize) -> EventView,
    tail: &[EventView],
    offset: usize,
) -> Option<Extended> {
    if extension.extend(tail) {
        items.extend((offset..offset + tail.len()).map(Item::Raw));
        return Some(Extended::Appended);
    }
    let (merged, next) = extend_with_compactions(items, view_of, tail, offset)?;
    *items = merged;
    *extension = next;
    Some(Extended::Merged)
}

/// Indices of the compaction events whose summaries the filtered history
/// holds, ascending: the order in which google-adk materializes them.
pub fn summaries_in_creation_order(items: &[Item]) -> Vec<usize> {
    let mut out: Vec<usize> = items
        .iter()
        .filter_map(|item| match item {
            Item::Summary(i) => Some(*i),
            Item::Raw(_) => None,
        })
        .collect();
    out.sort_unstable();
    out
}

/// What appending `extra` to `events` changes in the filtered history:
/// `(removed, added)`, each in index order. `Item` indices refer to
/// `events`, and index `events.len()` to `extra`.
///
/// google-adk prices a compaction (`_prompt_chars_saved`) by filtering the
/// history with and without it and serializing both in full; every item the
/// two share has the same size on both sides (the same raw event, or the same
/// compaction's content), so only these differences need measuring.
pub fn presence_diff(events: &[EventView], extra: EventView) -> Result<PresenceDiff, CoreError> {
    let history = History::of(events)?;
    if let Some(diff) = history.as_ref().and_then(|h| h.diff(extra)) {
        return Ok(diff);
    }
    // Where extending declines (a NaN sort key), in full: the full
    // filtering fails alike or gives the answer.
    let before = match history {
        Some(history) => history.items(),
        None => process_compaction_events(events)?,
    };
    let mut with_extra = Vec::with_capacity(events.len() + 1);
    with_extra.extend_from_slice(events);
    with_extra.push(extra);
    let after = process_compaction_events(&with_extra)?;
    Ok(difference(before, after))
}

/// The filtered history of a list of events with what pricing a
/// compaction appended to that list reads of it: per item, a raw event's
/// timestamp or a summary's compaction bounds. Built once, it prices any
/// appended compaction without the list's other events (see
/// [`presence_diff`]).
#[derive(Debug, Clone, Default)]
pub struct History {
    /// The items by event index (ascending), a summary's with
    /// [`History::SUMMARY`] set: the answer does not depend on their order
    /// (extending sorts what it keeps, and differences are taken sorted).
    items: Vec<u32>,
    /// Per item, a raw event's timestamp or a summary's start.
    first: Vec<f64>,
    /// Per item, a summary's end (unused for a raw event).
    end: Vec<f64>,
    /// Events in the list (the index an appended event gets).
    len: usize,
}

impl History {
    const SUMMARY: u32 = 1 << 31;

    /// The filtered history of `events`; `None` for a list too long to
    /// number in 31 bits (and, were there one, for a summary without
    /// bounds: summaries are made of bounded ranges only).
    pub fn of(events: &[EventView]) -> Result<Option<Self>, CoreError> {
        if events.len() >= Self::SUMMARY as usize {
            return Ok(None);
        }
        let mut items = process_compaction_events(events)?;
        // An index is one item at most: a compaction event is never raw.
        items.sort_unstable_by_key(|item| match *item {
            Item::Raw(i) | Item::Summary(i) => i,
        });
        let mut history = History {
            items: Vec::with_capacity(items.len()),
            first: Vec::with_capacity(items.len()),
            end: Vec::with_capacity(items.len()),
            len: events.len(),
        };
        for item in items {
            let (code, first, end) = match item {
                Item::Raw(i) => (i as u32, events[i].timestamp, 0.0),
                Item::Summary(i) => match events[i].compaction.and_then(|c| c.bounds()) {
                    Some((start, end)) => (i as u32 | Self::SUMMARY, start, end),
                    None => return Ok(None),
                },
            };
            history.items.push(code);
            history.first.push(first);
            history.end.push(end);
        }
        Ok(Some(history))
    }

    /// Its items (in event-index order).
    fn items(&self) -> Vec<Item> {
        self.items
            .iter()
            .map(|&code| {
                let i = (code & !Self::SUMMARY) as usize;
                match code & Self::SUMMARY {
                    0 => Item::Raw(i),
                    _ => Item::Summary(i),
                }
            })
            .collect()
    }

    /// What appending `extra` changes (see [`presence_diff`]), or `None`
    /// where extending the history declines (a NaN sort key), which only
    /// the full filtering of the list and `extra` answers.
    pub fn diff(&self, extra: EventView) -> Option<PresenceDiff> {
        let before = self.items();
        // Extending asks only for its items' events.
        let view_of = |i: usize| {
            let Ok(k) = self
                .items
                .binary_search_by_key(&(i as u32), |&c| c & !Self::SUMMARY)
            else {
                return EventView::default();
            };
            match self.items[k] & Self::SUMMARY {
                0 => EventView::at(self.first[k]),
                _ => EventView {
                    compaction: Some(CompactionView {
                        start: Some(self.first[k]),
                        end: Some(self.end[k]),
                        has_content: true,
                    }),
                    ..Default::default()
                },
            }
        };
        let (after, _) = extend_with_compactions(&before, view_of, &[extra], self.len)?;
        Some(difference(before, after))
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.items.capacity() * 4 + (self.first.capacity() + self.end.capacity()) * 8
    }
}

/// The items only in `before` and only in `after`, each in index order,
/// with the summaries both materialize.
fn difference(mut before: Vec<Item>, mut after: Vec<Item>) -> PresenceDiff {
    let key = |item: &Item| match *item {
        Item::Raw(i) => (i, 0u8),
        Item::Summary(i) => (i, 1u8),
    };
    let summaries = |items: &[Item]| {
        items
            .iter()
            .filter(|i| matches!(i, Item::Summary(_)))
            .count()
    };
    let materialized = summaries(&before) + summaries(&after);
    before.sort_unstable_by_key(key);
    after.sort_unstable_by_key(key);
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    let (mut b, mut a) = (0, 0);
    while b < before.len() || a < after.len() {
        match (before.get(b), after.get(a)) {
            (Some(x), Some(y)) if key(x) == key(y) => {
                b += 1;
                a += 1;
            }
            (Some(x), Some(y)) if key(x) < key(y) => {
                removed.push(*x);
                b += 1;
            }
            (Some(_), Some(y)) => {
                added.push(*y);
                a += 1;
            }
            (Some(x), None) => {
                removed.push(*x);
                b += 1;
            }
            (None, Some(y)) => {
                added.push(*y);
                a += 1;
            }
            (None, None) => unreachable!("loop condition"),
        }
    }
    PresenceDiff {
        removed,
        added,
        materialized,
    }
}

/// Result of [`presence_diff`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresenceDiff {
    /// Items present without `extra` and absent with it, in index order.
    pub removed: Vec<Item>,
    /// Items present only with `extra`, in index order.
    pub added: Vec<Item>,
    /// Summaries google-adk materializes (and draws an id for) when it
    /// filters the history both ways.
    pub materialized: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example() {
        // [e1(1), e2(2), c1(1-2), e3(4), c2(2-4), e4(6)]
        let events = vec![
            EventView::at(1.0),
            EventView::at(2.0),
            EventView::compacting(3.0, 1.0, 2.0),
            EventView::at(4.0),
            EventView::compacting(5.0, 2.0, 4.0),
            EventView::at(6.0),
        ];
        let out = process_compaction_events(&events).unwrap();
        assert_eq!(out, vec![Item::Summary(2), Item::Summary(4), Item::Raw(5)]);
    }

    #[test]
    fn extending_appends_a_plain_tail_and_merges_a_compaction() {
        let all = [
            EventView::at(1.0),
            EventView::at(2.0),
            EventView::at(3.0),
            EventView::compacting(4.0, 0.0, 2.0),
            EventView::compacting(5.0, 0.0, f64::NAN),
        ];
        let view_of = |i: usize| all[i];
        let (mut items, mut ext) = process_extensibly(&all[..2]).unwrap();
        let how = extend_filtered(&mut items, &mut ext, view_of, &all[2..3], 2);
        assert_eq!(how, Some(Extended::Appended));
        assert_eq!(items, vec![Item::Raw(0), Item::Raw(1), Item::Raw(2)]);
        let how = extend_filtered(&mut items, &mut ext, view_of, &all[3..4], 3);
        assert_eq!(how, Some(Extended::Merged));
        assert_eq!(items, vec![Item::Summary(3), Item::Raw(2)]);
        // A NaN key declines and leaves both as they were.
        assert_eq!(
            extend_filtered(&mut items, &mut ext, view_of, &all[4..], 4),
            None
        );
        assert_eq!(items, vec![Item::Summary(3), Item::Raw(2)]);
        assert_eq!(ext.last_key(), 3.0);
    }

    #[test]
    fn ties_keep_event_order() {
        let events = vec![
            EventView::at(1.0),
            EventView::compacting(0.5, 0.0, 1.0),
            EventView::at(1.0),
        ];
        // Both raw events at 1.0 are covered; the summary sits at 1.0.
        assert_eq!(
            process_compaction_events(&events).unwrap(),
            vec![Item::Summary(1)]
        );
        let events = vec![EventView::at(2.0), EventView::compacting(0.5, 0.0, 2.0)];
        assert_eq!(
            process_compaction_events(&events).unwrap(),
            vec![Item::Summary(1)]
        );
    }

    #[test]
    fn compaction_without_content_disappears() {
        let mut c = EventView::compacting(3.0, 0.0, 1.0);
        c.compaction.as_mut().unwrap().has_content = false;
        let events = vec![EventView::at(0.5), c];
        assert_eq!(
            process_compaction_events(&events).unwrap(),
            vec![Item::Raw(0)]
        );
    }

    #[test]
    fn nan_raw_timestamp_is_refused() {
        let events = vec![EventView::at(f64::NAN), EventView::at(1.0)];
        assert_eq!(
            process_compaction_events(&events),
            Err(CoreError::UnorderedTimestamp { index: 0 })
        );
    }

    #[test]
    fn nan_start_covers_nothing_but_is_summarized() {
        let events = vec![
            EventView::at(1.0),
            EventView::compacting(3.0, f64::NAN, 2.0),
        ];
        assert_eq!(
            process_compaction_events(&events).unwrap(),
            vec![Item::Raw(0), Item::Summary(1)]
        );
    }

    #[test]
    fn appending_a_compaction_removes_what_it_newly_covers() {
        let events = vec![
            EventView::at(1.0),
            EventView::at(2.0),
            EventView::compacting(2.5, 1.0, 1.0),
            EventView::at(3.0),
        ];
        // Covers 1..=2: event 1 goes (event 0 was covered already), the
        // contained summary 2 goes, the new summary 4 comes.
        let diff = presence_diff(&events, EventView::compacting(4.0, 1.0, 2.0)).unwrap();
        assert_eq!(diff.removed, vec![Item::Raw(1), Item::Summary(2)]);
        assert_eq!(diff.added, vec![Item::Summary(4)]);
        // Summary 2 without the new compaction, summary 4 with it.
        assert_eq!(diff.materialized, 2);
    }

    #[test]
    fn coverage_merges_touching_ranges() {
        let cov = Coverage::new([(1.0, 2.0), (2.0, 3.0), (5.0, 6.0), (4.0, 3.0)]);
        assert!(cov.covers(1.0) && cov.covers(2.5) && cov.covers(3.0) && cov.covers(5.5));
        assert!(!cov.covers(3.5) && !cov.covers(0.5) && !cov.covers(f64::NAN));
    }
}
