//! Tests of `core::coverage`.

use super::*;
use crate::core::exact::holes;
use crate::core::testing::{Lazy, Session};

/// The coverage of `extents` over the session.
fn covering(s: &Session, extents: Vec<Extent>) -> Coverage {
    Coverage::new(&s.events, extents)
}

#[test]
fn a_pending_call_is_stepped_past_and_its_group_kept_whole() {
    let mut s = Session::default();
    s.raw(1.0, 1);
    let pending = s.call(2.0, 1, 100);
    s.raw(3.0, 1);
    // Parallel calls: one answered, one not; the answered sibling's
    // response shares no id with the pending one, so only the pending
    // call is held.
    let answered = s.call(4.0, 2, 101);
    let response = s.response(5.0, 2, 101);
    s.raw(6.0, 2);
    let cov = covering(&s, Vec::new());
    let window = sliding(&s.events, &s.ids, &cov, 2, 0).unwrap();
    assert!(!window.contains(&pending));
    assert!(window.contains(&answered) && window.contains(&response));
    assert_eq!(window.len(), 5);
}

#[test]
fn a_response_whose_call_stays_raw_is_not_summarized() {
    let mut s = Session::default();
    s.raw(1.0, 1);
    let call = s.call(2.0, 1, 7);
    let response = s.response(3.0, 1, 7);
    s.raw(4.0, 1);
    let cov = covering(&s, Vec::new());
    // Retaining the last two keeps the response; its call stays too.
    let plan = token(&s.events, &s.ids, &cov, 2, f64::INFINITY).unwrap();
    assert_eq!(plan.window, vec![0]);
    assert!(!plan.window.contains(&call) && !plan.window.contains(&response));
}

#[test]
fn an_event_tied_with_a_hole_stays_raw_with_its_call() {
    // One tool round, the reply stamped in the microsecond of the tool
    // response, tail retention keeping the reply: its hole's key names
    // the response too, so the response (and its call) stay raw.
    let mut s = Session::default();
    s.raw(0.5, 1);
    s.call(0.75, 1, 7);
    s.response(1.0, 1, 7);
    s.raw(1.0, 1);
    let cov = covering(&s, Vec::new());
    let plan = token(&s.events, &s.ids, &cov, 1, f64::INFINITY).unwrap();
    assert_eq!(plan.window, vec![0]);
    // The same tie without a call: the tied event alone stays raw.
    let mut s = Session::default();
    s.raw(0.5, 1);
    s.raw(1.0, 1);
    s.raw(1.0, 1);
    let cov = covering(&s, Vec::new());
    assert_eq!(
        token(&s.events, &s.ids, &cov, 1, f64::INFINITY)
            .unwrap()
            .window,
        vec![0]
    );
    // Tied in time but of another invocation: no key names it.
    let mut s = Session::default();
    s.raw(0.5, 1);
    s.raw(1.0, 1);
    s.raw(1.0, 2);
    let cov = covering(&s, Vec::new());
    assert_eq!(
        token(&s.events, &s.ids, &cov, 1, f64::INFINITY)
            .unwrap()
            .window,
        vec![0, 1]
    );
}

#[test]
fn a_sliding_window_keeps_raw_what_a_later_tied_hole_would_name() {
    // A pending call stays raw inside the window's interval; the event
    // of its invocation tied with it would read as excluded.
    let mut s = Session::default();
    s.raw(1.0, 1);
    let pending = s.call(2.0, 1, 9);
    let tied = s.raw(2.0, 1);
    s.raw(3.0, 1);
    let cov = covering(&s, Vec::new());
    let handed = sliding(&s.events, &s.ids, &cov, 1, 0).unwrap();
    assert!(!handed.contains(&pending) && !handed.contains(&tied));
    assert_eq!(handed, vec![0, 3]);
}

#[test]
fn a_hole_naming_a_seeded_event_leaves_the_seed_beside_the_summary() {
    // The documented residual: e3 stored after the seed, stamped in the
    // microsecond and invocation of e1 which the seed covers, retained
    // raw: its hole names e1 too. Nothing is lost; the seed survives.
    let mut s = Session::default();
    s.raw(1.0, 1);
    s.raw(2.0, 1);
    let seed = s.compaction(2.5, 1.0, 2.0);
    s.raw(5.0, 2);
    let tied = s.raw(2.0, 1);
    let cov = covering(&s, vec![Extent::new(seed, 1.0, 2.0, Vec::new())]);
    let plan = token(&s.events, &s.ids, &cov, 1, f64::INFINITY).unwrap();
    assert_eq!(
        (plan.window.clone(), plan.seeds.clone()),
        (vec![3], vec![seed])
    );
    let w = write(&s.events, &cov, &plan.window, &plan.seeds).unwrap();
    assert_eq!(w.holes, vec![tied]);
    let at = s.compaction(6.0, w.start, w.end);
    let hole = Hole {
        micros: 2_000_000,
        invocation: Some(1),
    };
    let cov = covering(
        &s,
        vec![
            Extent::new(seed, 1.0, 2.0, Vec::new()),
            Extent::new(at, w.start, w.end, vec![hole]),
        ],
    );
    assert_eq!(
        prompt(&s.events, &cov),
        vec![Item::Summary(seed), Item::Raw(tied), Item::Summary(at)]
    );
}

#[test]
fn holes_read_off_the_survivors_are_the_seeds_holes() {
    let mut s = Session::default();
    for k in 0..8 {
        s.raw(f64::from(k), 1 + k as u32 % 2);
    }
    let hole = Hole {
        micros: 3_000_000,
        invocation: Some(2),
    };
    let a = s.compaction(8.5, 0.0, 4.0);
    s.raw(2.0, 1); // stored after `a`, inside it: not covered
    let b = s.compaction(9.5, 5.0, 6.0);
    s.raw(9.7, 1);
    let cov = covering(
        &s,
        vec![
            Extent::new(a, 0.0, 4.0, vec![hole]),
            Extent::new(b, 5.0, 6.0, Vec::new()),
        ],
    );
    let seeds = cov.surviving_events();
    assert_eq!(seeds, vec![a, b]);
    let handed = [7, 11];
    let mut mask = vec![false; s.events.len()];
    for &p in handed.iter().chain(&seeds) {
        mask[p] = true;
    }
    let slow = holes(&s.events, &cov.extents, 0.0, 9.7, &mask);
    assert_eq!(slow, vec![3, 9]);
    assert_eq!(holes_of(&s.events, &cov, 0.0, 9.7, &handed, &seeds), slow);
}

#[test]
fn covered_events_are_not_offered_again_and_retained_ones_are() {
    let mut s = Session::default();
    for k in 0..6 {
        s.raw(f64::from(k), 1);
    }
    // A tail-retention summary of 0..=3 left 4 and 5 raw.
    let at = s.compaction(6.5, 0.0, 3.0);
    s.raw(7.0, 2);
    let cov = covering(&s, vec![Extent::new(at, 0.0, 3.0, Vec::new())]);
    let plan = token(&s.events, &s.ids, &cov, 1, f64::INFINITY).unwrap();
    assert_eq!(plan.window, vec![4, 5]);
    assert_eq!(plan.seeds, vec![at]);
    // The rolled record stands for the seed's events: no holes.
    let mut handed = vec![false; s.events.len()];
    for &p in plan.window.iter().chain(&plan.seeds) {
        handed[p] = true;
    }
    assert!(holes(&s.events, &cov.extents, 0.0, 5.0, &handed).is_empty());
}

#[test]
fn pending_invocations_do_not_hold_the_sliding_trigger() {
    let mut s = Session::default();
    s.call(1.0, 1, 9);
    s.raw(2.0, 2);
    let cov = covering(&s, Vec::new());
    // Only invocation 2 can be summarized: one invocation, interval 2.
    assert_eq!(sliding(&s.events, &s.ids, &cov, 2, 0), None);
    assert_eq!(sliding(&s.events, &s.ids, &cov, 1, 0), Some(vec![1]));
}

#[test]
fn the_prompt_leaves_out_exactly_what_survivors_cover() {
    let mut s = Session::default();
    s.raw(1.0, 1);
    s.raw(2.0, 2); // a hole of the compaction below
    s.raw(3.0, 1);
    let at = s.compaction(4.0, 1.0, 3.0);
    s.raw(2.5, 3); // stored after it: not covered
    let hole = Hole {
        micros: 2_000_000,
        invocation: Some(2),
    };
    let cov = covering(&s, vec![Extent::new(at, 1.0, 3.0, vec![hole])]);
    assert_eq!(
        prompt(&s.events, &cov),
        vec![Item::Raw(1), Item::Raw(4), Item::Summary(at)]
    );
}

#[test]
fn tail_retention_keeps_raw_what_a_later_event_may_be_stamped_before() {
    // An invocation under way (a sibling branch's reply not yet stored)
    // may store an event stamped from 3.0 on; a store that loads by
    // timestamp would put it before the compaction: the window stops
    // before the first candidate stamped from then on.
    let mut s = Session::default();
    for (t, inv) in [(1.0, 1), (2.0, 1), (3.0, 2), (4.0, 2), (2.5, 2)] {
        s.raw(t, inv);
    }
    let cov = covering(&s, Vec::new());
    let all = token(&s.events, &s.ids, &cov, 0, f64::INFINITY).unwrap();
    assert_eq!(all.window, vec![0, 1, 2, 3, 4]);
    let floored = token(&s.events, &s.ids, &cov, 0, 3.0).unwrap();
    assert_eq!(floored.window, vec![0, 1]);
    let w = write(&s.events, &cov, &floored.window, &floored.seeds).unwrap();
    assert!(w.end < 3.0);
    // Retention still applies below the floor.
    assert_eq!(
        token(&s.events, &s.ids, &cov, 4, 3.0).unwrap().window,
        vec![0]
    );
    assert_eq!(token(&s.events, &s.ids, &cov, 0, 1.0), None);
}

#[test]
fn several_summaries_roll_into_one() {
    let mut s = Session::default();
    s.raw(1.0, 1);
    let a = s.compaction(1.5, 1.0, 1.0);
    s.raw(2.0, 2);
    let b = s.compaction(2.5, 2.0, 2.0);
    let cov = covering(
        &s,
        vec![
            Extent::new(a, 1.0, 1.0, Vec::new()),
            Extent::new(b, 2.0, 2.0, Vec::new()),
        ],
    );
    let plan = token(&s.events, &s.ids, &cov, 0, f64::INFINITY).unwrap();
    assert_eq!(
        plan,
        TokenPlan {
            window: vec![],
            seeds: vec![a, b]
        }
    );
}

// ---------------------------------------------------------------------------
// What an exact-mode call reads: records, the scope's coverage, the record
// it stores
// ---------------------------------------------------------------------------

/// What the exact-mode readers know of each event before they ask: all
/// but its invocation.
const KNOWN: Need = Need {
    invocation: false,
    ..Need::ALL
};

fn record(start: f64, end: f64, holes: &[(&str, f64)]) -> Record {
    let keys = holes.iter().filter_map(|&(i, t)| Key::of(i, t)).collect();
    Record::new(start, end, keys, (start, end)).unwrap()
}

#[test]
fn extents_take_records_report_unused_ones_and_read_what_holes_name() {
    let mut s = Session::default();
    s.raw(1.0, 1);
    s.raw(2.0, 2);
    s.compaction(2.5, 1.0, 2.0);
    s.compaction(3.5, 1.0, 2.0);
    s.compaction(4.5, 1.0, 2.0);
    let records = vec![
        None,
        None,
        Some(Ok(record(1.0, 2.0, &[("inv-2", 2.0)]))),
        Some(Err("malformed".to_owned())),
        None,
    ];
    let mut r = Lazy::new(&s, KNOWN, records);
    let all: Vec<usize> = (0..5).collect();
    let (found, problems) = extents(&mut r, &all, false).unwrap();
    assert_eq!(found.len(), 3);
    // The record's interval minus its hole, named by the interned id.
    assert_eq!(
        found[0].holes,
        vec![Hole {
            micros: 2_000_000,
            invocation: Some(2)
        }]
    );
    // An unused record: its interval, reported at its position.
    assert!(found[1].holes.is_empty());
    assert_eq!(problems, vec![(3, "malformed".to_owned())]);
    // A hole names events by invocation: every view's is read.
    assert_eq!(r.asked.len(), 1);
    assert!(r.asked[0].1.invocation);
    assert_eq!(r.views[1].invocation, Some(2));
    // Read already: nothing asked.
    let mut r = Lazy::new(
        &s,
        KNOWN,
        vec![
            None,
            None,
            Some(Ok(record(1.0, 2.0, &[("inv-2", 2.0)]))),
            None,
            None,
        ],
    );
    extents(&mut r, &all, true).unwrap();
    assert!(r.asked.is_empty());
}

#[test]
fn an_extent_s_position_is_its_place_among_the_events_read() {
    let mut s = Session::default();
    s.raw(1.0, 1);
    s.raw(2.0, 2);
    s.compaction(2.5, 1.0, 2.0);
    let mut r = Lazy::new(&s, KNOWN, vec![None, None, Some(Err("late".to_owned()))]);
    let (found, problems) = extents(&mut r, &[1, 2], true).unwrap();
    assert_eq!(found[0].at, 1);
    assert_eq!(problems, vec![(1, "late".to_owned())]);
}

#[test]
fn a_prior_coverage_is_extended_only_by_raw_events_of_a_whole_list() {
    let mut s = Session::default();
    s.raw(1.0, 1);
    s.raw(2.0, 2);
    s.compaction(2.5, 1.0, 2.0);
    s.raw(3.0, 3);
    let prefix = Session {
        events: s.events[..3].to_vec(),
        ids: Vec::new(),
    };
    let prior = Coverage::new(&prefix.events, vec![Extent::new(2, 1.0, 2.0, Vec::new())]);
    let prior = || Some((3, Arc::new(prior.clone()), Problems::new()));
    let (rewound, scoped) = in_scope(&s.events, None);
    let mut r = Lazy::new(&s, KNOWN, vec![None; 4]);
    let c = cover(&mut r, rewound.len(), &scoped, prior()).unwrap();
    assert!(c.extended);
    assert_eq!(c.coverage.hidden, vec![true, true, false, false]);
    // The candidates' function-call links are read.
    assert_eq!(r.asked.last().unwrap().0, vec![3]);
    // A compaction among the new events: worked out again.
    s.compaction(3.5, 3.0, 3.0);
    let (rewound, scoped) = in_scope(&s.events, None);
    let mut r = Lazy::new(&s, KNOWN, vec![None; 5]);
    let c = cover(&mut r, rewound.len(), &scoped, prior()).unwrap();
    assert!(!c.extended);
    assert_eq!(c.coverage.hidden, vec![true, true, false, true, false]);
    // Not every event in scope: worked out again.
    let mut s = Session::default();
    s.raw(1.0, 1);
    s.raw(2.0, 2);
    s.compaction(2.5, 1.0, 2.0);
    s.raw(3.0, 3);
    s.events[3].scope = Some(7);
    let (rewound, scoped) = in_scope(&s.events, None);
    assert_eq!(scoped, vec![0, 1, 2]);
    let mut r = Lazy::new(&s, KNOWN, vec![None; 4]);
    assert!(
        !cover(&mut r, rewound.len(), &scoped, prior())
            .unwrap()
            .extended
    );
}

#[test]
fn the_stored_record_names_foreign_events_inside_and_inverts_unsafe_bounds() {
    let mut s = Session::default();
    s.raw(1.0, 1);
    s.raw(2.0, 2);
    s.raw(3.0, 3);
    let cov = covering(&s, Vec::new());
    let w = write(&s.events, &cov, &[0, 2], &[]).unwrap();
    assert_eq!(w.holes, vec![1]);
    let foreign = [("inv-9".to_owned(), 2.5), ("inv-8".to_owned(), 7.0)];
    let (record, start, end) = stored_record(
        &s.events,
        &w,
        &["inv-2".to_owned()],
        &foreign,
        f64::INFINITY,
        ClockSkew::NONE,
    )
    .unwrap();
    let named: Vec<&str> = record.holes.iter().map(|k| k.invocation.as_str()).collect();
    // The hole and the foreign event inside the interval; not the one after.
    assert_eq!(named, vec!["inv-2", "inv-9"]);
    assert!(start <= end);
    // Under a ceiling at the interval's start no plain bounds are safe:
    // inverted, covering nothing.
    let (_, start, end) = stored_record(
        &s.events,
        &w,
        &["inv-2".to_owned()],
        &foreign,
        1.0,
        ClockSkew::NONE,
    )
    .unwrap();
    assert!(start > end, "{start} {end}");
}

#[test]
fn a_clock_skew_narrows_the_plain_bounds_only() {
    let mut s = Session::default();
    for k in 1..=4 {
        s.raw(f64::from(k), k);
    }
    let cov = covering(&s, Vec::new());
    let w = write(&s.events, &cov, &[0, 1, 2, 3], &[]).unwrap();
    let stored = |skew: f64| {
        let skew = ClockSkew::new(skew).unwrap();
        stored_record(&s.events, &w, &[], &[], 4.5, skew).unwrap()
    };
    let (plain, start, end) = stored(0.0);
    assert_eq!((start, end), (1.0, 4.0));
    // Another clock a second behind may stamp a later event 3.5: the
    // bounds stop before it; the record (interval, holes) is the same, and
    // a reader accepts it (its interval contains the bounds).
    let (skewed, start, end) = stored(1.0);
    assert_eq!((start, end), (1.0, 3.0));
    assert_eq!(skewed, plain);
    assert_eq!(Record::parse(&skewed.to_json(), (start, end)), Ok(skewed));
    // A margin past every stamp: inverted bounds, covering nothing.
    let (_, start, end) = stored(4.0);
    assert!(start > end, "{start} {end}");
}

#[test]
fn the_prompt_s_last_key_is_its_last_item_s() {
    let mut s = Session::default();
    s.raw(1.0, 1);
    s.raw(2.0, 2);
    s.compaction(2.5, 1.0, 1.5);
    let cov = covering(&s, vec![Extent::new(2, 1.0, 1.5, Vec::new())]);
    let items = prompt(&s.events, &cov);
    assert_eq!(last_key(&s.events, &cov, &items), 2.0);
    assert_eq!(last_key(&s.events, &cov, &items[..1]), 1.5);
    assert_eq!(last_key(&s.events, &cov, &[]), f64::NEG_INFINITY);
}
