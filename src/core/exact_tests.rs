//! Tests of `core::exact`.

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
    let events = [
        EventView::raw(1.0, 1),
        EventView::raw(1.5, 2),
        EventView::raw(2.0, 1),
        EventView::raw(3.0, 3),
    ];
    let handed = [true, false, false, false];
    let h = holes(&events, &[], 1.0, 2.0, &handed);
    assert_eq!(h, vec![1, 2]);
    assert_eq!(
        plain_bounds(&events, 1.0, 2.0, &h, &[], f64::INFINITY, ClockSkew::NONE),
        Some((1.0, 1.0))
    );
}

#[test]
fn a_rolling_summary_stands_for_what_its_seed_covers() {
    let events = [
        EventView::raw(1.0, 1),
        EventView::raw(2.0, 1),
        EventView::compacting(2.5, 1.0, 2.0),
        EventView::raw(3.0, 2),
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
        EventView::raw(1.0, 1),
        EventView::raw(2.0, 2),
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
        EventView::raw(1.0, 1),
        EventView::compacting(2.5, 1.0, 2.0),
        EventView::raw(1.5, 2),
    ];
    let x = Extent::new(1, 1.0, 2.0, Vec::new());
    assert!(x.covers(0, &events[0]));
    assert!(!x.covers(2, &events[2]));
}

#[test]
fn plain_bounds_take_the_largest_hole_free_run() {
    let events = [
        EventView::raw(1.0, 1),
        EventView::raw(2.0, 9),
        EventView::raw(3.0, 1),
        EventView::raw(4.0, 1),
        EventView::raw(5.0, 1),
    ];
    assert_eq!(
        plain_bounds(&events, 1.0, 5.0, &[1], &[], f64::INFINITY, ClockSkew::NONE),
        Some((3.0, 5.0))
    );
    // A foreign hole (an invocation under way) at 2.5: its later events
    // may be stamped anywhere after it, so only the run before it is
    // plain-safe.
    assert_eq!(
        plain_bounds(
            &events,
            1.0,
            5.0,
            &[],
            &[2.5],
            f64::INFINITY,
            ClockSkew::NONE
        ),
        Some((1.0, 2.0))
    );
    assert_eq!(
        plain_bounds(
            &events,
            1.0,
            5.0,
            &[],
            &[0.5],
            f64::INFINITY,
            ClockSkew::NONE
        ),
        None
    );
    // Every summarized event ties with a hole: nothing is plain-safe.
    let tied = [EventView::raw(1.0, 1), EventView::raw(1.0, 2)];
    assert_eq!(
        plain_bounds(&tied, 1.0, 1.0, &[1], &[], f64::INFINITY, ClockSkew::NONE),
        None
    );
}

#[test]
fn plain_bounds_end_below_the_ceiling() {
    let events = [
        EventView::raw(1.0, 1),
        EventView::raw(2.0, 1),
        EventView::raw(3.0, 1),
        EventView::raw(3.0, 2),
    ];
    // The writer's clock reads past the last summarized stamp: the
    // interval is safe as it is.
    assert_eq!(
        plain_bounds(&events, 1.0, 3.0, &[], &[], 3.5, ClockSkew::NONE),
        Some((1.0, 3.0))
    );
    // It reads the very tick of the last summarized events: the next
    // event may carry that stamp, so the bounds step back before it
    // (those events repeat for a plain reader; none is hidden).
    assert_eq!(
        plain_bounds(&events, 1.0, 3.0, &[], &[], 3.0, ClockSkew::NONE),
        Some((1.0, 2.0))
    );
    // An invocation under way since 1.5 may still store an event
    // stamped from then on.
    assert_eq!(
        plain_bounds(&events, 1.0, 3.0, &[], &[], 1.5, ClockSkew::NONE),
        Some((1.0, 1.0))
    );
    // The ceiling and a hole together: the run between them.
    assert_eq!(
        plain_bounds(&events, 1.0, 3.0, &[0], &[], 3.0, ClockSkew::NONE),
        Some((2.0, 2.0))
    );
    // Nothing summarized below it: bounds that cover nothing.
    assert_eq!(
        plain_bounds(&events, 1.0, 3.0, &[], &[], 1.0, ClockSkew::NONE),
        None
    );
}

#[test]
fn plain_bounds_end_below_the_ceiling_less_the_skew() {
    let events = [
        EventView::raw(1.0, 1),
        EventView::raw(2.0, 1),
        EventView::raw(3.0, 1),
        EventView::raw(3.6, 1),
    ];
    let skew = |s: f64| ClockSkew::new(s).unwrap();
    // The writer's clock reads 4.0: without a margin the whole interval.
    assert_eq!(
        plain_bounds(&events, 1.0, 3.6, &[], &[], 4.0, ClockSkew::NONE),
        Some((1.0, 3.6))
    );
    // Another clock 0.5 s behind may stamp a later event 3.5: the
    // events from there on repeat for a plain reader instead.
    assert_eq!(
        plain_bounds(&events, 1.0, 3.6, &[], &[], 4.0, skew(0.5)),
        Some((1.0, 3.0))
    );
    // The margin reaches the ceiling less the skew exactly: strictly below.
    assert_eq!(
        plain_bounds(&events, 1.0, 3.6, &[], &[], 4.0, skew(1.0)),
        Some((1.0, 2.0))
    );
    // A hole and the margin together: the larger run below both.
    assert_eq!(
        plain_bounds(&events, 1.0, 3.6, &[1], &[], 4.0, skew(0.5)),
        Some((1.0, 1.0))
    );
    // A margin past every summarized stamp: nothing is plain-safe.
    assert_eq!(
        plain_bounds(&events, 1.0, 3.6, &[], &[], 4.0, skew(3.0)),
        None
    );
    // No ceiling, no limit, whatever the margin.
    assert_eq!(
        plain_bounds(&events, 1.0, 3.6, &[], &[], f64::INFINITY, skew(5.0)),
        Some((1.0, 3.6))
    );
}

#[test]
fn a_clock_skew_is_finite_and_not_negative() {
    for bad in [-0.1, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert_eq!(ClockSkew::new(bad), None, "{bad}");
    }
    assert_eq!(ClockSkew::new(-0.0).map(|s| s.seconds().to_bits()), Some(0));
    assert_eq!(ClockSkew::new(1.5).map(ClockSkew::seconds), Some(1.5));
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

    fn extent_of(events: &[EventView], at: usize, start: f64, end: f64, holes: &[usize]) -> Extent {
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
            skew in 0u8..4,
        ) {
            let ceiling = ceiling.map_or(f64::INFINITY, f64::from);
            let skew = ClockSkew::new(f64::from(skew) / 2.0).unwrap();
            // Every stamp another clock may put on a later event is at
            // or after this.
            let lowest = skew.below(ceiling);
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
            // and no event stamped from the ceiling less the skew on.
            if let Some((a, b)) = plain_bounds(&events, start, end, &h, &[], ceiling, skew) {
                prop_assert!(start <= a && a <= b && b <= end && b < lowest);
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
                        && e.timestamp < lowest
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
