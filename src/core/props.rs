//! Property tests of the core invariants, each against a direct (quadratic)
//! restatement of what the function promises.

use super::coverage::{self, extend_prompt};
use super::event::{CompactionView, EventView, Sym};
use super::exact::Extent;
use super::filter::{
    extend_filtered, extend_with_compactions, presence_diff, process_compaction_events,
    process_extensibly, Coverage, Extended, History, Item,
};
use super::ranges::{compaction_ranges, extend_ranges, survivors};
use super::recover::{extend_quiet, recover_compacted_function_calls, Calls, Recovered};
use super::rewind::{apply_rewinds, extend_kept};
use proptest::prelude::*;

/// Small integer timestamps make ties and containment frequent.
fn ts() -> impl Strategy<Value = f64> {
    prop_oneof![10 => (0u8..20).prop_map(f64::from), 1 => Just(f64::NAN)]
}

fn event() -> impl Strategy<Value = EventView> {
    (
        (0u8..20).prop_map(f64::from),
        prop::option::of(0u32..6),
        prop::option::weighted(0.08, 0u32..8),
        prop::option::weighted(
            0.3,
            (
                prop::option::of(ts()),
                prop::option::of(ts()),
                prop::bool::weighted(0.9),
            ),
        ),
    )
        .prop_map(
            |(timestamp, invocation, rewind_before, compaction)| EventView {
                timestamp,
                invocation,
                rewind_before,
                compaction: compaction.map(|(start, end, has_content)| CompactionView {
                    start,
                    end,
                    has_content,
                }),
                ..Default::default()
            },
        )
}

fn contains(outer: (f64, f64, usize), inner: (f64, f64, usize)) -> bool {
    outer.2 != inner.2
        && outer.0 <= inner.0
        && outer.1 >= inner.1
        && !(outer.0 == inner.0 && outer.1 == inner.1 && outer.2 < inner.2)
}

/// Events with the given timestamps, call ids and response ids (each event
/// its index as identity), and the id arena their spans index.
type CallSpec = (u8, Vec<u32>, Vec<u32>);

fn calls_and_responses(spec: &[CallSpec]) -> (Vec<EventView>, Vec<Sym>) {
    let spec: Vec<(u64, f64, &[Sym], &[Sym])> = spec
        .iter()
        .enumerate()
        .map(|(i, (t, calls, resps))| (i as u64, f64::from(*t), &calls[..], &resps[..]))
        .collect();
    crate::core::recover::tests::build(&spec)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn ranges_drop_exactly_the_contained(events in prop::collection::vec(event(), 0..40)) {
        let all: Vec<(f64, f64, usize)> = events
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.compaction.and_then(|c| c.bounds()).map(|(s, t)| (s, t, i)))
            .collect();
        let kept: Vec<usize> = compaction_ranges(&events).iter().map(|r| r.index).collect();
        let expected: Vec<usize> = all
            .iter()
            .filter(|r| r.0.is_nan() || r.1.is_nan()
                || !all.iter().any(|o| !(o.0.is_nan() || o.1.is_nan()) && contains(*o, **r)))
            .map(|r| r.2)
            .collect();
        prop_assert_eq!(kept, expected);
    }

    #[test]
    fn filtering_keeps_each_uncovered_event_once_in_order(events in prop::collection::vec(event(), 0..40)) {
        let ranges = compaction_ranges(&events);
        let Ok(items) = process_compaction_events(&events) else {
            // Declined only when a NaN would be a sort key.
            prop_assert!(events.iter().any(|e| e.timestamp.is_nan()) || ranges.iter().any(|r| r.end.is_nan()));
            return Ok(());
        };
        let covered = |t: f64| ranges.iter().any(|r| r.start <= t && t <= r.end);
        let expected_raw: Vec<usize> = (0..events.len())
            .filter(|&i| events[i].compaction.is_none() && !covered(events[i].timestamp))
            .collect();
        let mut raw: Vec<usize> = items.iter().filter_map(|it| match it { Item::Raw(i) => Some(*i), _ => None }).collect();
        let mut summaries: Vec<usize> = items.iter().filter_map(|it| match it { Item::Summary(i) => Some(*i), _ => None }).collect();
        let key = |it: &Item| match *it {
            Item::Raw(i) => (events[i].timestamp, i),
            Item::Summary(i) => (ranges.iter().find(|r| r.index == i).unwrap().end, i),
        };
        for pair in items.windows(2) {
            prop_assert!(key(&pair[0]) < key(&pair[1]));
        }
        raw.sort_unstable();
        summaries.sort_unstable();
        prop_assert_eq!(raw, expected_raw);
        prop_assert_eq!(summaries, ranges.iter().map(|r| r.index).collect::<Vec<_>>());
    }

    #[test]
    fn coverage_is_the_union(ranges in prop::collection::vec((ts(), ts()), 0..12), probe in ts()) {
        let cov = Coverage::new(ranges.iter().copied());
        let expected = ranges.iter().any(|&(s, e)| s <= e && s <= probe && probe <= e);
        prop_assert_eq!(cov.covers(probe), expected);
    }

    #[test]
    fn rewinds_keep_an_increasing_subset_without_rewind_events(events in prop::collection::vec(event(), 0..40)) {
        let kept = apply_rewinds(&events);
        prop_assert!(kept.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(kept.iter().all(|&i| events[i].rewind_before.is_none()));
        if events.iter().all(|e| e.rewind_before.is_none()) {
            prop_assert_eq!(kept, (0..events.len()).collect::<Vec<_>>());
        }
    }

    /// What the index's rewind memo relies on: events appended after a
    /// list, none of them a rewind, change nothing before them and all
    /// survive.
    #[test]
    fn rewinds_of_an_extended_list_extend_the_result(
        events in prop::collection::vec(event(), 0..40),
        tail in prop::collection::vec(event(), 0..8),
    ) {
        let mut all = events.clone();
        all.extend(tail.iter().map(|e| EventView { rewind_before: None, ..*e }));
        let mut expected = apply_rewinds(&events);
        expected.extend(events.len()..all.len());
        prop_assert_eq!(apply_rewinds(&all), expected);
    }

    /// `extend_kept` extends exactly where that holds: its answer for any
    /// tail is the result of the whole list, and it declines a tail with a
    /// rewind.
    #[test]
    fn extending_kept_equals_recomputing(
        events in prop::collection::vec(event(), 0..40),
        tail in prop::collection::vec(event(), 0..8),
    ) {
        let mut all = events.clone();
        all.extend_from_slice(&tail);
        let mut kept: Vec<u32> = apply_rewinds(&events).iter().map(|&i| i as u32).collect();
        let rewind = tail.iter().any(|e| e.rewind_before.is_some());
        prop_assert_eq!(extend_kept(&mut kept, events.len(), &tail), !rewind);
        if !rewind {
            let whole: Vec<u32> = apply_rewinds(&all).iter().map(|&i| i as u32).collect();
            prop_assert_eq!(kept, whole);
        }
    }

    /// The presence diff of one more event: the items of the filtering
    /// without it that the filtering with it lacks, and the other way
    /// round (each in index order), and the summaries both materialize.
    #[test]
    fn presence_diff_is_the_difference_of_both_filterings(
        events in prop::collection::vec(event(), 0..40),
        extra in event(),
    ) {
        let mut all = events.clone();
        all.push(extra);
        let (Ok(before), Ok(after)) = (process_compaction_events(&events), process_compaction_events(&all)) else {
            prop_assert!(presence_diff(&events, extra).is_err());
            return Ok(());
        };
        let key = |item: &Item| match *item {
            Item::Raw(i) => (i, 0u8),
            Item::Summary(i) => (i, 1u8),
        };
        let mut removed: Vec<Item> = before.iter().copied().filter(|x| !after.contains(x)).collect();
        let mut added: Vec<Item> = after.iter().copied().filter(|x| !before.contains(x)).collect();
        removed.sort_unstable_by_key(key);
        added.sort_unstable_by_key(key);
        let summaries = |items: &[Item]| items.iter().filter(|i| matches!(i, Item::Summary(_))).count();
        let diff = presence_diff(&events, extra).unwrap();
        prop_assert_eq!(&diff.removed, &removed);
        prop_assert_eq!(&diff.added, &added);
        prop_assert_eq!(diff.materialized, summaries(&before) + summaries(&after));
        // The history alone (what a selection's handle keeps) prices alike
        // wherever it answers, and it answers for every list whose keys
        // are not NaN.
        let history = History::of(&events).unwrap().unwrap();
        match history.diff(extra) {
            Some(again) => prop_assert_eq!(again, diff),
            None => {
                let nan = all.iter().any(|e| e.timestamp.is_nan()
                    || e.compaction.is_some_and(|c| c.end.is_some_and(f64::is_nan)));
                prop_assert!(nan);
            }
        }
    }

    /// What the index's filtering memo relies on: when `Extension` says a
    /// tail extends a result, filtering the extended list gives that result
    /// followed by the tail, in order; and it says so for a tail of later,
    /// uncovered plain events.
    #[test]
    fn filtering_of_an_extended_list_extends_the_result(
        events in prop::collection::vec(event(), 0..40),
        tail in prop::collection::vec(event(), 0..8),
        tail_ts in prop::collection::vec(ts(), 8),
        plain in prop::bool::ANY,
        tie in prop::bool::ANY,
    ) {
        let Ok((before, mut ext)) = process_extensibly(&events) else {
            return Ok(());
        };
        // A tie with the last item, often a summary whose range covers its
        // own key: after every item, yet covered.
        let last = ext.last_key();
        let tail: Vec<EventView> = tail
            .iter()
            .zip(&tail_ts)
            .map(|(e, &t)| match (plain, tie && last.is_finite()) {
                (true, true) => EventView { compaction: None, timestamp: last, ..*e },
                (true, false) => EventView { compaction: None, ..*e },
                (false, _) => EventView { timestamp: t, ..*e },
            })
            .collect();
        let mut all = events.clone();
        all.extend_from_slice(&tail);
        if ext.extend(&tail) {
            let mut expected = before.clone();
            expected.extend((events.len()..all.len()).map(Item::Raw));
            prop_assert_eq!(process_compaction_events(&all).ok(), Some(expected));
            // And it keeps extending: the extended result's extension.
            let (_, again) = process_extensibly(&all).unwrap();
            prop_assert_eq!(again.last_key().to_bits(), ext.last_key().to_bits());
        }
    }

    /// What the index's filtering memo relies on when a tail holds
    /// compactions (or anything `Extension::extend` declines): the result
    /// it computes from the last result and the tail is the filtering of
    /// the extended list, and so is the next extension of it; it declines
    /// only where that filtering fails (a NaN sort key).
    #[test]
    fn filtering_of_a_list_extended_by_compactions_is_computed_from_the_result(
        events in prop::collection::vec(event(), 0..40),
        tail in prop::collection::vec(event(), 0..8),
        more in prop::collection::vec(event(), 0..8),
    ) {
        let Ok((before, _)) = process_extensibly(&events) else {
            return Ok(());
        };
        let mut all = events.clone();
        all.extend_from_slice(&tail);
        let view_of = |all: &[EventView]| {
            let all = all.to_vec();
            move |i: usize| all[i]
        };
        let extended = extend_with_compactions(&before, view_of(&events), &tail, events.len());
        let full = process_extensibly(&all);
        prop_assert_eq!(extended.is_some(), full.is_ok());
        let (Some((items, mut ext)), Ok((expected, _))) = (extended, full) else {
            return Ok(());
        };
        prop_assert_eq!(&items, &expected);
        let n = all.len();
        all.extend_from_slice(&more);
        let next = if ext.extend(&more) {
            let mut next = items.clone();
            next.extend((n..all.len()).map(Item::Raw));
            Some(next)
        } else {
            extend_with_compactions(&items, view_of(&all), &more, n).map(|(next, _)| next)
        };
        prop_assert_eq!(next, process_compaction_events(&all).ok());
    }

    /// What the index's compaction-ranges memo relies on: the survivors of
    /// a list extended are those of the list's survivors and the new
    /// events' ranges.
    #[test]
    fn ranges_of_an_extended_list_come_from_the_last_survivors(
        events in prop::collection::vec(event(), 0..40),
        tail in prop::collection::vec(event(), 0..12),
    ) {
        let mut all = events.clone();
        all.extend_from_slice(&tail);
        let mut ranges = compaction_ranges(&events);
        ranges.extend(compaction_ranges(&tail).into_iter().map(|r| super::ranges::CompactionRange {
            index: r.index + events.len(),
            ..r
        }));
        // The tail's own survivors drop nothing the whole would keep.
        let mut every = compaction_ranges(&events);
        every.extend(tail.iter().enumerate().filter_map(|(k, e)| {
            let (start, end) = e.compaction.and_then(|c| c.bounds())?;
            Some(super::ranges::CompactionRange { index: events.len() + k, start, end })
        }));
        let expected = compaction_ranges(&all);
        let bits = |v: &[super::ranges::CompactionRange]| -> Vec<(usize, u64, u64)> {
            v.iter().map(|r| (r.index, r.start.to_bits(), r.end.to_bits())).collect()
        };
        prop_assert_eq!(bits(&survivors(every)), bits(&expected));
        prop_assert_eq!(bits(&survivors(ranges)), bits(&expected));
        let extended = extend_ranges(compaction_ranges(&events), events.len(), &tail);
        prop_assert_eq!(bits(&extended), bits(&expected));
    }

    /// `extend_filtered` gives the filtering of the extended list wherever
    /// that filtering succeeds, declines where it fails (a NaN sort key),
    /// and keeps extending; it appends a tail of later, uncovered plain
    /// events.
    #[test]
    fn extending_filtered_equals_recomputing(
        events in prop::collection::vec(event(), 0..40),
        tail in prop::collection::vec(event(), 0..8),
        more in prop::collection::vec(event(), 0..8),
        plain in prop::bool::ANY,
    ) {
        let Ok((mut items, mut ext)) = process_extensibly(&events) else {
            return Ok(());
        };
        let last = ext.last_key();
        let tail: Vec<EventView> = match plain {
            true if last.is_finite() => tail
                .iter()
                .enumerate()
                .map(|(k, e)| EventView { compaction: None, timestamp: 1000.0 + last + k as f64, ..*e })
                .collect(),
            _ => tail,
        };
        let mut all = events.clone();
        all.extend_from_slice(&tail);
        let view_of = |all: &[EventView]| {
            let all = all.to_vec();
            move |i: usize| all[i]
        };
        let how = extend_filtered(&mut items, &mut ext, view_of(&events), &tail, events.len());
        let full = process_compaction_events(&all);
        prop_assert_eq!(how.is_some(), full.is_ok());
        if plain && last.is_finite() {
            prop_assert_eq!(how, Some(Extended::Appended));
        }
        let Ok(expected) = full else {
            return Ok(());
        };
        prop_assert_eq!(&items, &expected);
        let n = all.len();
        all.extend_from_slice(&more);
        match extend_filtered(&mut items, &mut ext, view_of(&all), &more, n) {
            Some(_) => prop_assert_eq!(Ok(items), process_compaction_events(&all)),
            None => prop_assert!(process_compaction_events(&all).is_err()),
        }
    }

    /// `extend_prompt` extends exact mode's prompt only where the prompt of
    /// the extended list is the last one followed by the tail, raw, with
    /// the new last key; and it does for raw events stamped in order.
    #[test]
    fn extending_the_exact_prompt_equals_recomputing(
        events in prop::collection::vec(event(), 0..30),
        tail in prop::collection::vec(event(), 0..8),
        in_order in prop::bool::ANY,
    ) {
        let extents: Vec<Extent> = events
            .iter()
            .enumerate()
            .filter_map(|(at, e)| {
                let (start, end) = e.compaction.and_then(|c| c.bounds())?;
                (start.is_finite() && end.is_finite()).then(|| Extent::new(at, start, end, Vec::new()))
            })
            .collect();
        let prompt = |events: &[EventView]| {
            let cov = coverage::Coverage::new(events, extents.clone());
            let items = coverage::prompt(events, &cov);
            let key = |item: &Item| match *item {
                Item::Raw(i) => events[i].timestamp,
                Item::Summary(at) => cov.extent_at(at).map_or(f64::NAN, |x| x.end),
            };
            let last = items.last().map_or(f64::NEG_INFINITY, key);
            (items, last)
        };
        let (before, last) = prompt(&events);
        let tail: Vec<EventView> = match in_order {
            true if last.is_finite() || last == f64::NEG_INFINITY => tail
                .iter()
                .enumerate()
                .map(|(k, e)| EventView { compaction: None, timestamp: last.max(0.0) + k as f64, ..*e })
                .collect(),
            _ => tail,
        };
        let mut all = events.clone();
        all.extend_from_slice(&tail);
        let extended = extend_prompt(last, &tail);
        if in_order && (last.is_finite() || last == f64::NEG_INFINITY) {
            prop_assert!(extended.is_some());
        }
        if let Some(next) = extended {
            let (after, whole_last) = prompt(&all);
            let mut expected = before.clone();
            expected.extend((events.len()..all.len()).map(Item::Raw));
            prop_assert_eq!(after, expected);
            prop_assert_eq!(next.to_bits(), whole_last.to_bits());
        }
    }

    /// What the index's recovery memo relies on: when `Calls` says the
    /// source and the filtered list extended at their ends re-inject
    /// nothing, recovery on them re-injects nothing.
    #[test]
    fn recovery_of_lists_extended_at_their_ends(
        spec in prop::collection::vec((0u8..10, prop::collection::vec(0u32..5, 0..3), prop::collection::vec(0u32..5, 0..3)), 0..25),
        keep in prop::collection::vec(prop::bool::weighted(0.7), 25),
        cut in 0usize..25,
    ) {
        let (source, ids) = calls_and_responses(&spec);
        let cut = cut.min(source.len());
        let present = &keep[..source.len()];
        let kept = |upto: usize| -> Vec<EventView> {
            source[..upto].iter().zip(present).filter(|(_, k)| **k).map(|(e, _)| *e).collect()
        };
        let Some(mut calls) = Calls::of(&source[..cut], &present[..cut], &ids) else {
            return Ok(());
        };
        prop_assert_eq!(recover_compacted_function_calls(&kept(cut), &source[..cut], &ids).unwrap(), None);
        if calls.extend(&source[cut..], &present[cut..], &ids) {
            prop_assert_eq!(recover_compacted_function_calls(&kept(source.len()), &source, &ids).unwrap(), None);
        }
    }

    /// `extend_quiet` finds the listed tail events by identity, in order,
    /// and answers as `Calls::extend` does: where it extends, recovery on
    /// the extended lists re-injects nothing; it declines a listed event
    /// out of order.
    #[test]
    fn extending_a_quiet_recovery_re_injects_nothing(
        spec in prop::collection::vec((0u8..10, prop::collection::vec(0u32..5, 0..3), prop::collection::vec(0u32..5, 0..3)), 0..25),
        keep in prop::collection::vec(prop::bool::weighted(0.7), 25),
        cut in 0usize..25,
        swap in prop::bool::ANY,
    ) {
        let (source, ids) = calls_and_responses(&spec);
        let cut = cut.min(source.len());
        let present = &keep[..source.len()];
        let Some(mut calls) = Calls::of(&source[..cut], &present[..cut], &ids) else {
            return Ok(());
        };
        let tail = &source[cut..];
        let mut listed: Vec<u64> = tail.iter().zip(&present[cut..]).filter(|(_, p)| **p).map(|(e, _)| e.ident).collect();
        if swap && listed.len() >= 2 {
            listed.swap(0, 1);
            prop_assert_eq!(extend_quiet(&mut calls, tail, listed, &ids), None);
            return Ok(());
        }
        let mut alone = Calls::of(&source[..cut], &present[..cut], &ids).unwrap();
        let accepts = alone.extend(tail, &present[cut..], &ids);
        let extended = extend_quiet(&mut calls, tail, listed, &ids);
        prop_assert_eq!(extended.is_some(), accepts);
        if let Some(p) = extended {
            prop_assert_eq!(&p[..], &present[cut..]);
            let kept: Vec<EventView> = source.iter().zip(present).filter(|(_, k)| **k).map(|(e, _)| *e).collect();
            prop_assert_eq!(recover_compacted_function_calls(&kept, &source, &ids).unwrap(), None);
        }
    }

    #[test]
    fn recovery_keeps_every_event_in_order(
        spec in prop::collection::vec((0u8..10, prop::collection::vec(0u32..4, 0..3), prop::collection::vec(0u32..4, 0..3)), 0..25),
        keep in prop::collection::vec(prop::bool::ANY, 25),
    ) {
        let (source, ids) = calls_and_responses(&spec);
        let events: Vec<EventView> = source.iter().zip(&keep).filter(|(_, k)| **k).map(|(e, _)| *e).collect();
        match recover_compacted_function_calls(&events, &source, &ids).unwrap() {
            None => {}
            Some(out) => {
                let kept: Vec<usize> = out.iter().filter_map(|r| match r { Recovered::Kept(i) => Some(*i), _ => None }).collect();
                prop_assert_eq!(kept, (0..events.len()).collect::<Vec<_>>());
                let injected: Vec<u64> = out.iter().filter_map(|r| match r { Recovered::Injected(j) => Some(source[*j].ident), _ => None }).collect();
                // Nothing injected is already present. An event can come back
                // at most twice: once as a call, once as a sibling response
                // (an event holding a call and its own response), as in
                // google-adk, which keeps the two kinds apart.
                let present: Vec<u64> = events.iter().map(|e| e.ident).collect();
                prop_assert!(injected.iter().all(|i| !present.contains(i)));
                prop_assert!(injected.iter().all(|i| injected.iter().filter(|j| *j == i).count() <= 2));
            }
        }
    }
}

/// `extend_prompt` on a plain example: raw events stamped in order extend,
/// a compaction, an earlier stamp, a NaN stamp or an unusable last key do
/// not.
#[test]
fn extend_prompt_takes_raw_events_stamped_in_order() {
    let raw = EventView::at;
    assert_eq!(extend_prompt(2.0, &[raw(2.0), raw(3.0)]), Some(3.0));
    assert_eq!(extend_prompt(f64::NEG_INFINITY, &[raw(1.0)]), Some(1.0));
    assert_eq!(extend_prompt(2.0, &[]), Some(2.0));
    assert_eq!(extend_prompt(2.0, &[raw(3.0), raw(2.5)]), None);
    assert_eq!(
        extend_prompt(2.0, &[EventView::compacting(3.0, 0.0, 1.0)]),
        None
    );
    assert_eq!(extend_prompt(2.0, &[raw(f64::NAN)]), None);
    assert_eq!(extend_prompt(f64::NAN, &[]), None);
    assert_eq!(extend_prompt(f64::INFINITY, &[]), None);
}
