//! Tests of window selection against google-adk 2.13.0 `apps/compaction.py`:
//! hand-built sessions for the behaviours the Python source states, then
//! property tests comparing every function with a line-by-line restatement of
//! its Python original (plain `Vec` / `HashSet`, nothing from `window.rs`).

use super::*;
use crate::core::event::{CompactionView, Span};
use crate::core::select::{self, settled, Complete, Rules};
use proptest::prelude::*;
use std::collections::HashSet;

/// The extractor's symbol for the empty string (a pending key may be `""`).
const EMPTY: Sym = 0;
// Invocation ids (call ids are small numbers 1..10, agents 201..).
const A: Sym = 101;
const B: Sym = 102;
const C: Sym = 103;
const D: Sym = 104;
const AG1: Sym = 201;
const AG2: Sym = 202;
const NAN: f64 = f64::NAN;

// ---------------------------------------------------------------------------
// Session builder
// ---------------------------------------------------------------------------

/// One event as the Python code sees it; also what the oracles read.
#[derive(Debug, Clone, Default)]
struct Ev {
    ts: f64,
    inv: Option<Sym>,
    comp: Option<CompactionView>,
    /// Function calls: (id, name is a synthetic client / HITL name).
    calls: Vec<(Sym, bool)>,
    responses: Vec<Sym>,
    long_running: Vec<Sym>,
    /// Keys of requested_tool_confirmations / requested_auth_configs.
    pending: Vec<Sym>,
    tokens: Option<i64>,
    author: Option<Sym>,
}

fn ev(ts: f64, inv: Sym) -> Ev {
    Ev {
        ts,
        inv: Some(inv),
        ..Default::default()
    }
}

/// An event with an empty `invocation_id`.
fn no_inv(ts: f64) -> Ev {
    Ev {
        ts,
        ..Default::default()
    }
}

/// A compaction event with content (no invocation id unless `.inv` is used).
fn comp(ts: f64, start: Option<f64>, end: Option<f64>) -> Ev {
    Ev {
        ts,
        comp: Some(CompactionView {
            start,
            end,
            has_content: true,
        }),
        ..Default::default()
    }
}

impl Ev {
    fn inv(mut self, inv: Sym) -> Self {
        self.inv = Some(inv);
        self
    }
    fn call(mut self, id: Sym) -> Self {
        self.calls.push((id, false));
        self
    }
    fn hitl_call(mut self, id: Sym) -> Self {
        self.calls.push((id, true));
        self
    }
    fn resp(mut self, id: Sym) -> Self {
        self.responses.push(id);
        self
    }
    fn lr(mut self, id: Sym) -> Self {
        self.long_running.push(id);
        self
    }
    fn pend(mut self, id: Sym) -> Self {
        self.pending.push(id);
        self
    }
    fn tokens(mut self, count: i64, author: Sym) -> Self {
        self.tokens = Some(count);
        self.author = Some(author);
        self
    }
    fn no_content(mut self) -> Self {
        if let Some(c) = self.comp.as_mut() {
            c.has_content = false;
        }
        self
    }
}

fn span(ids: &mut Vec<Sym>, items: impl IntoIterator<Item = Sym>) -> Span {
    let start = ids.len() as u32;
    ids.extend(items);
    Span {
        start,
        len: ids.len() as u32 - start,
    }
}

/// The views and the shared id arena of a session.
fn build(evs: &[Ev]) -> (Vec<EventView>, Vec<Sym>) {
    let mut ids = Vec::new();
    let views = evs
        .iter()
        .enumerate()
        .map(|(i, e)| EventView {
            ident: i as u64,
            timestamp: e.ts,
            invocation: e.inv,
            compaction: e.comp,
            calls: span(&mut ids, e.calls.iter().map(|c| c.0)),
            responses: span(&mut ids, e.responses.iter().copied()),
            has_responses: !e.responses.is_empty(),
            hitl_calls: span(&mut ids, e.calls.iter().filter(|c| c.1).map(|c| c.0)),
            long_running: span(&mut ids, e.long_running.iter().copied()),
            pending: span(&mut ids, e.pending.iter().copied()),
            prompt_tokens: e.tokens,
            author: e.author,
            ..Default::default()
        })
        .collect();
    (views, ids)
}

fn all(evs: &[Ev]) -> Vec<usize> {
    (0..evs.len()).collect()
}

fn sw(evs: &[Ev], interval: usize, overlap: usize) -> Vec<usize> {
    sw_live(evs, &all(evs), interval, overlap)
}

/// google-adk 2.13's selections (`core::select`) over the events at `live`
/// alone, nothing else filtered: what the window functions' `live` means.
const OVER_LIVE: Rules = Rules {
    scoped: false,
    priced: false,
    own_counts: false,
    rewinds: false,
    ..Rules::LATEST
};

fn sw_live(evs: &[Ev], live: &[usize], interval: usize, overlap: usize) -> Vec<usize> {
    let (views, ids) = build(&pick(evs, live));
    let mut reader = Complete {
        views: &views,
        ids: &ids,
    };
    let cfg = SlidingWindow { interval, overlap };
    let plan = settled(select::sliding(&mut reader, cfg, OVER_LIVE));
    plan.to_compact.iter().map(|&p| live[p as usize]).collect()
}

fn prefix(evs: &[Ev], window: &[usize], with_all: bool) -> usize {
    let (views, ids) = build(evs);
    let everything = all(evs);
    let all_events = with_all.then_some(everything.as_slice());
    longest_self_contained_prefix(&views, &ids, window, all_events)
}

fn dead(evs: &[Ev], window: &[usize], newest: Option<Sym>) -> Vec<Sym> {
    let (views, ids) = build(evs);
    sorted(provably_dead_call_ids(
        &views,
        &ids,
        window,
        &all(evs),
        newest,
    ))
}

fn split(evs: &[Ev], retention: usize) -> usize {
    let (views, ids) = build(evs);
    safe_split_index(&views, &ids, &all(evs), retention)
}

fn tok(evs: &[Ev], live: &[usize], retention: usize) -> TokenSelection {
    let (views, ids) = build(&pick(evs, live));
    let mut reader = Complete {
        views: &views,
        ids: &ids,
    };
    let plan = settled(select::token(&mut reader, None, None, retention, OVER_LIVE));
    TokenSelection {
        to_compact: plan.to_compact.iter().map(|&p| live[p as usize]).collect(),
        seed_from: plan.seed_from.map(|p| live[p as usize]),
    }
}

fn sel(to_compact: Vec<usize>, seed_from: Option<usize>) -> TokenSelection {
    TokenSelection {
        to_compact,
        seed_from,
    }
}

fn count(evs: &[Ev], agent: Option<Sym>) -> Option<i64> {
    let (views, _) = build(evs);
    latest_prompt_token_count(&views, &all(evs), agent, true)
}

fn sorted(set: impl IntoIterator<Item = Sym>) -> Vec<Sym> {
    let mut v: Vec<Sym> = set.into_iter().collect();
    v.sort_unstable();
    v
}

// ---------------------------------------------------------------------------
// sliding_window
// ---------------------------------------------------------------------------

#[test]
fn sliding_window_waits_for_interval_new_invocations() {
    let mut evs = vec![ev(1.0, A), ev(2.0, A), ev(3.0, B)];
    assert!(sw(&evs, 3, 0).is_empty());
    evs.push(ev(4.0, C));
    assert_eq!(sw(&evs, 3, 0), vec![0, 1, 2, 3]);
    assert!(sw(&[], 1, 0).is_empty());
}

#[test]
fn sliding_window_docstring_example() {
    // interval 2, overlap 1: invocations 1 and 2 are summarized together,
    // invocation 3 alone triggers nothing, after 4 the summary covers 2..4.
    let mut evs = vec![ev(1.0, A), ev(2.0, B)];
    assert_eq!(sw(&evs, 2, 1), vec![0, 1]);
    evs.push(comp(2.5, Some(1.0), Some(2.0))); // 2
    evs.push(ev(3.0, C)); // 3
    assert!(sw(&evs, 2, 1).is_empty());
    evs.push(ev(4.0, D)); // 4
    assert_eq!(sw(&evs, 2, 1), vec![1, 3, 4]);
    // No overlap: just the new invocations; a large overlap stops at the first.
    assert_eq!(sw(&evs, 2, 0), vec![3, 4]);
    assert_eq!(sw(&evs, 2, 9), vec![0, 1, 3, 4]);
}

#[test]
fn sliding_window_compaction_invocation_extends_the_last_position() {
    // The compaction tagged with B is not one of B's events for the
    // invocation list, but `last_event_idx` finds it, pulling in event 2.
    let evs = vec![
        ev(1.0, A),
        ev(2.0, B),
        no_inv(2.5),
        comp(3.0, None, None).inv(B),
        no_inv(3.5),
    ];
    assert_eq!(sw(&evs, 2, 0), vec![0, 1, 2]);
}

#[test]
fn sliding_window_compaction_invocation_extends_the_first_position() {
    let evs = vec![
        comp(0.5, None, None).inv(A),
        no_inv(0.7),
        ev(1.0, A),
        ev(2.0, B),
    ];
    assert_eq!(sw(&evs, 2, 0), vec![1, 2, 3]);
}

#[test]
fn sliding_window_compaction_only_invocation_is_not_counted() {
    let evs = vec![ev(1.0, A), comp(1.5, None, None).inv(B)];
    assert!(sw(&evs, 2, 0).is_empty());
    assert_eq!(sw(&evs, 1, 0), vec![0]);
}

#[test]
fn sliding_window_nan_end_is_truthy_and_blocks_everything() {
    let evs = vec![
        ev(1.0, A),
        ev(2.0, B),
        comp(2.5, Some(0.0), Some(NAN)),
        ev(3.0, C),
        ev(4.0, D),
    ];
    assert!(sw(&evs, 1, 0).is_empty());
}

#[test]
fn sliding_window_zero_end_is_falsy_and_skipped() {
    let evs = vec![
        ev(1.0, A),
        ev(2.0, B),
        comp(2.5, Some(1.0), Some(2.0)),  // 2: the end that counts
        ev(3.0, C),                       // 3
        comp(3.5, Some(0.0), Some(0.0)),  // 4: 0.0 is falsy
        ev(4.0, D),                       // 5
        comp(4.5, Some(0.0), Some(-0.0)), // 6: so is -0.0
        comp(4.6, Some(0.0), None),       // 7: and None
    ];
    assert_eq!(sw(&evs, 2, 0), vec![3, 5]);
}

#[test]
fn sliding_window_end_counts_whatever_the_content() {
    let evs = vec![
        ev(1.0, A),
        ev(2.0, B),
        comp(2.5, None, Some(2.0)).no_content(),
        ev(3.0, C),
    ];
    assert!(sw(&evs, 2, 0).is_empty());
    assert_eq!(sw(&evs, 1, 0), vec![3]);
}

#[test]
fn sliding_window_uses_each_invocations_latest_timestamp() {
    // A reappears after the compaction: its latest timestamp (4) is new, so
    // A and C are the new invocations and the window spans B in between.
    let evs = vec![
        ev(1.0, A),
        ev(2.0, B),
        comp(3.5, Some(0.0), Some(3.0)),
        ev(4.0, A),
        ev(5.0, C),
    ];
    assert_eq!(sw(&evs, 2, 0), vec![0, 1, 3, 4]);
}

#[test]
fn sliding_window_timestamps_start_from_zero() {
    // max(dict.get(inv, 0.0), ts): a negative or NaN timestamp stays 0.0,
    // which is not newer than the default end 0.0.
    let evs = vec![ev(-1.0, A), ev(NAN, B), ev(1.0, C)];
    assert!(sw(&evs, 2, 0).is_empty());
    assert_eq!(sw(&evs, 1, 0), vec![2]);
    // Overlap still reaches back to the old invocations.
    assert_eq!(sw(&evs, 1, 2), vec![0, 1, 2]);
    // A NaN first timestamp does not stick: max(0.0, nan) is 0.0.
    let evs = vec![ev(NAN, A), ev(5.0, A), ev(6.0, B)];
    assert_eq!(sw(&evs, 2, 0), vec![0, 1, 2]);
}

#[test]
fn sliding_window_candidates_are_the_untrimmed_window() {
    let evs = vec![
        ev(1.0, A).call(1),
        ev(2.0, A).resp(1),
        comp(2.5, None, None),
        ev(3.0, B).call(2),
        ev(4.0, B),
    ];
    let (views, _) = build(&evs);
    let cfg = SlidingWindow {
        interval: 2,
        overlap: 0,
    };
    assert_eq!(
        sliding_window_candidates(&views, &all(&evs), cfg),
        vec![0, 1, 3, 4]
    );
    assert_eq!(sw(&evs, 2, 0), vec![0, 1]);
}

#[test]
fn sliding_window_trims_before_an_unanswered_call() {
    let evs = vec![
        ev(1.0, A).call(1),
        ev(2.0, A).resp(1),
        ev(3.0, B).call(2),
        ev(4.0, B),
    ];
    assert_eq!(sw(&evs, 2, 0), vec![0, 1]);
}

#[test]
fn sliding_window_reads_only_live_events() {
    let evs = vec![
        ev(1.0, A),
        ev(2.0, B),
        comp(2.5, Some(0.0), Some(9.0)),
        ev(3.0, C),
    ];
    assert_eq!(sw_live(&evs, &[0, 3], 2, 0), vec![0, 3]);
    assert!(sw_live(&evs, &[0, 1, 2, 3], 2, 0).is_empty());
}

// ---------------------------------------------------------------------------
// longest_self_contained_prefix / provably_dead_call_ids
// ---------------------------------------------------------------------------

#[test]
fn prefix_stops_before_an_unanswered_call() {
    let evs = vec![
        ev(1.0, A).call(1),
        ev(2.0, A).resp(1),
        ev(3.0, A).call(2),
        ev(4.0, A),
    ];
    assert_eq!(prefix(&evs, &[0, 1, 2, 3], false), 2);
    assert_eq!(prefix(&evs, &[0, 1], false), 2);
    assert_eq!(prefix(&evs, &[], false), 0);
}

#[test]
fn prefix_applies_responses_before_calls_within_an_event() {
    let evs = vec![ev(1.0, A).call(1).resp(1)];
    assert_eq!(prefix(&evs, &[0], false), 0);
    let evs = vec![
        ev(1.0, A).call(1),
        ev(2.0, A).resp(1).call(2),
        ev(3.0, A).resp(2),
    ];
    assert_eq!(prefix(&evs, &[0, 1, 2], false), 3);
}

#[test]
fn prefix_pending_keys_keep_it_open() {
    let evs = vec![ev(1.0, A).pend(5), ev(2.0, A).resp(5)];
    assert_eq!(prefix(&evs, &[0], false), 0);
    assert_eq!(prefix(&evs, &[0, 1], false), 2);
    // The empty key can never be answered, and is no call, so never dead.
    let evs = vec![ev(1.0, A).pend(EMPTY), ev(2.0, A).resp(1), ev(3.0, C)];
    assert_eq!(prefix(&evs, &[0, 1], false), 0);
    assert_eq!(prefix(&evs, &[0, 1], true), 0);
}

#[test]
fn prefix_second_pass_skips_dead_calls() {
    let evs = vec![ev(1.0, A).call(9), ev(2.0, A), ev(3.0, B), ev(4.0, C)];
    assert_eq!(prefix(&evs, &[0, 1, 2], false), 0);
    assert_eq!(prefix(&evs, &[0, 1, 2], true), 3);
}

#[test]
fn prefix_second_pass_only_inside_an_invocation() {
    // The strict prefix ends at an invocation boundary: it stands.
    let evs = vec![ev(1.0, A), ev(2.0, B).call(9), ev(3.0, B), ev(4.0, C)];
    assert_eq!(prefix(&evs, &[0, 1, 2], true), 1);
    // It ends inside invocation A: the dead call is skipped.
    let evs = vec![ev(1.0, A), ev(2.0, A).call(9), ev(3.0, A), ev(4.0, C)];
    assert_eq!(prefix(&evs, &[0, 1, 2], true), 3);
}

#[test]
fn prefix_long_running_ids_protect_calls() {
    let evs = vec![ev(1.0, A).call(9).lr(9), ev(2.0, A), ev(3.0, C)];
    assert_eq!(prefix(&evs, &[0, 1], true), 0);
    // ...except a synthetic HITL call's own id in an older invocation.
    let evs = vec![ev(1.0, A).hitl_call(9).lr(9), ev(2.0, A), ev(3.0, C)];
    assert_eq!(prefix(&evs, &[0, 1], true), 2);
    assert_eq!(dead(&evs, &[0, 1], Some(C)), vec![9]);
    // The exclusion is per event: another older event's long-running id protects.
    let evs = vec![
        ev(1.0, A).hitl_call(9),
        ev(2.0, A),
        ev(2.5, B).lr(9),
        ev(3.0, C),
    ];
    assert_eq!(prefix(&evs, &[0, 1], true), 0);
    // An id-less event or the newest invocation protects even HITL ids.
    let evs = vec![
        ev(1.0, A).hitl_call(9),
        ev(2.0, A),
        no_inv(2.5).hitl_call(9).lr(9),
        ev(3.0, C),
    ];
    assert_eq!(prefix(&evs, &[0, 1], true), 0);
    let evs = vec![
        ev(1.0, A).hitl_call(9),
        ev(2.0, A),
        ev(3.0, C).hitl_call(9).lr(9),
    ];
    assert_eq!(prefix(&evs, &[0, 1], true), 0);
}

#[test]
fn prefix_pending_keys_protect_only_when_newest_or_unscoped() {
    let evs = vec![ev(1.0, A).call(9), ev(2.0, A), ev(3.0, C).pend(9)];
    assert_eq!(prefix(&evs, &[0, 1], true), 0);
    let evs = vec![
        ev(1.0, A).call(9),
        ev(2.0, A),
        no_inv(2.5).pend(9),
        ev(3.0, C),
    ];
    assert_eq!(prefix(&evs, &[0, 1], true), 0);
    let evs = vec![
        ev(1.0, A).call(9),
        ev(2.0, A),
        ev(2.5, B).pend(9),
        ev(3.0, C),
    ];
    assert_eq!(prefix(&evs, &[0, 1], true), 2);
}

#[test]
fn prefix_a_response_anywhere_keeps_a_call_alive() {
    let evs = vec![ev(1.0, A).call(9), ev(2.0, A), ev(3.0, C).resp(9)];
    assert_eq!(prefix(&evs, &[0, 1], true), 0);
    assert!(dead(&evs, &[0, 1], Some(C)).is_empty());
    // A response whose id is a pending key of its own event is not resolved.
    let evs = vec![
        ev(1.0, A).call(9),
        ev(2.0, A),
        ev(2.5, B).resp(9).pend(9),
        ev(3.0, C),
    ];
    assert_eq!(prefix(&evs, &[0, 1], true), 2);
}

#[test]
fn newest_invocation_is_never_dead() {
    let evs = vec![ev(1.0, A).call(1), ev(2.0, C).call(2)];
    assert_eq!(dead(&evs, &[0, 1], Some(C)), vec![1]);
    assert_eq!(dead(&evs, &[0, 1], None), vec![1, 2]);
    let evs = vec![ev(1.0, C).call(2), ev(2.0, C)];
    assert_eq!(prefix(&evs, &[0, 1], true), 0);
}

#[test]
fn newest_invocation_skips_compactions_and_id_less_events() {
    let mut evs = vec![
        ev(1.0, A).call(9),
        ev(2.0, A),
        comp(3.0, None, None).inv(C),
        no_inv(4.0),
    ];
    // The newest invocation is A, so A's call may still be answered.
    assert_eq!(prefix(&evs, &[0, 1], true), 0);
    evs.push(ev(5.0, B));
    assert_eq!(prefix(&evs, &[0, 1], true), 2);
}

#[test]
fn strict_prefix_is_settled_when_whole_or_at_a_boundary() {
    let (views, ids) = build(&[ev(1.0, A), ev(2.0, B).call(9), ev(3.0, B)]);
    assert_eq!(strict_prefix(&views, &ids, &[0, 1, 2]), (1, true));
    assert_eq!(strict_prefix(&views, &ids, &[0]), (1, true));
    assert_eq!(strict_prefix(&views, &ids, &[1, 2]), (0, false));
    assert_eq!(strict_prefix(&views, &ids, &[]), (0, true));
    let (views, ids) = build(&[ev(1.0, A), ev(2.0, A).call(9)]);
    assert_eq!(strict_prefix(&views, &ids, &[0, 1]), (1, false));
}

fn bounds(ts: &[f64]) -> Option<(f64, f64)> {
    let evs: Vec<Ev> = ts.iter().map(|&t| ev(t, A)).collect();
    let (views, _) = build(&evs);
    weightless_compaction(&views, &all(&evs)).map(|v| v.compaction.unwrap().bounds().unwrap())
}

#[test]
fn weightless_compaction_uses_python_min_and_max() {
    assert_eq!(bounds(&[]), None);
    assert_eq!(bounds(&[3.0, 1.0, 2.0]), Some((1.0, 3.0)));
    // A later NaN never compares smaller or larger; a first NaN is kept.
    assert_eq!(bounds(&[1.0, NAN, 0.0]), Some((0.0, 1.0)));
    // Ties keep the first element: min/max of [0.0, -0.0] are both 0.0.
    let (lo, hi) = bounds(&[0.0, -0.0]).unwrap();
    assert!(lo.is_sign_positive() && hi.is_sign_positive());
    let (lo, hi) = bounds(&[-0.0, 0.0]).unwrap();
    assert!(lo.is_sign_negative() && hi.is_sign_negative());
    let (lo, hi) = bounds(&[NAN, 1.0]).unwrap();
    assert!(lo.is_nan() && hi.is_nan());
}

// ---------------------------------------------------------------------------
// safe_split_index
// ---------------------------------------------------------------------------

#[test]
fn split_is_zero_when_everything_is_retained() {
    let evs = vec![ev(1.0, A), ev(2.0, A)];
    assert_eq!(split(&evs, 2), 0);
    assert_eq!(split(&evs, 5), 0);
    assert_eq!(split(&evs, 1), 1);
    assert_eq!(split(&[], 0), 0);
}

#[test]
fn split_moves_earlier_to_keep_a_call_with_its_response() {
    let evs = vec![
        ev(1.0, A),
        ev(2.0, A).call(1),
        ev(3.0, A),
        ev(4.0, A).resp(1),
        ev(5.0, A),
    ];
    assert_eq!(split(&evs, 2), 1);
    assert_eq!(split(&evs, 1), 4);
}

#[test]
fn split_ignores_pairs_inside_the_prefix_and_fails_on_orphans() {
    let evs = vec![
        ev(1.0, A).call(1),
        ev(2.0, A).resp(1),
        ev(3.0, A),
        ev(4.0, A),
    ];
    assert_eq!(split(&evs, 1), 3);
    let evs = vec![ev(1.0, A), ev(2.0, A), ev(3.0, A).resp(9)];
    assert_eq!(split(&evs, 1), 0);
}

// ---------------------------------------------------------------------------
// token_threshold_selection
// ---------------------------------------------------------------------------

#[test]
fn token_retention_zero_takes_all_candidates() {
    let evs = vec![ev(1.0, A), ev(2.0, A), ev(3.0, A).resp(9)];
    assert_eq!(tok(&evs, &all(&evs), 0), sel(vec![0, 1, 2], None));
    // With retention the orphan response forces the split to 0.
    assert_eq!(tok(&evs, &all(&evs), 1), TokenSelection::default());
    assert_eq!(tok(&evs, &all(&evs), 3), TokenSelection::default());
}

#[test]
fn token_candidates_are_after_the_last_compaction_end() {
    let evs = vec![
        ev(1.0, A),
        ev(2.0, A),
        comp(2.5, Some(1.0), Some(2.0)),
        ev(2.0, B), // at the end: not a candidate
        ev(3.0, B),
        ev(4.0, B),
    ];
    assert_eq!(tok(&evs, &all(&evs), 1), sel(vec![4], Some(2)));
    assert_eq!(tok(&evs, &all(&evs), 2), TokenSelection::default());
}

#[test]
fn token_seed_is_the_latest_surviving_compaction() {
    let evs = vec![
        comp(10.5, Some(0.0), Some(10.0)),
        comp(11.0, Some(2.0), Some(5.0)), // contained in the first
        ev(12.0, A),
        ev(13.0, A),
    ];
    assert_eq!(tok(&evs, &all(&evs), 0), sel(vec![2, 3], Some(0)));
    // Of partly overlapping survivors, the latest in stream order counts,
    // even when its end is earlier.
    let evs = vec![
        comp(5.5, Some(2.0), Some(5.0)),
        comp(6.0, Some(0.0), Some(3.0)),
        ev(4.0, A),
        ev(7.0, A),
    ];
    assert_eq!(tok(&evs, &all(&evs), 0), sel(vec![2, 3], Some(1)));
}

#[test]
fn token_compactions_without_content_or_start_do_not_count() {
    let evs = vec![
        ev(1.0, A),
        comp(1.5, Some(0.0), Some(10.0)).no_content(),
        comp(1.6, None, Some(10.0)),
        ev(2.0, A),
    ];
    assert_eq!(tok(&evs, &all(&evs), 0), sel(vec![0, 3], None));
}

#[test]
fn token_nan_bounds() {
    // NaN end: nothing is after it.
    let evs = vec![ev(1.0, A), comp(1.5, Some(0.0), Some(NAN)), ev(2.0, A)];
    assert_eq!(tok(&evs, &all(&evs), 0), TokenSelection::default());
    // NaN start: the range survives and, its start being set, seeds.
    let evs = vec![ev(0.5, A), comp(1.5, Some(NAN), Some(1.0)), ev(2.0, A)];
    assert_eq!(tok(&evs, &all(&evs), 0), sel(vec![2], Some(1)));
}

#[test]
fn token_pairing_trim_and_empty_result() {
    let evs = vec![
        ev(1.0, A).call(1),
        ev(2.0, A).resp(1),
        ev(3.0, B).call(2),
        ev(4.0, B),
    ];
    assert_eq!(tok(&evs, &all(&evs), 0), sel(vec![0, 1], None));
    // Nothing compactable: no seed either.
    let evs = vec![
        comp(0.5, Some(0.0), Some(0.5)),
        ev(1.0, C).call(1),
        ev(2.0, C),
    ];
    assert_eq!(tok(&evs, &all(&evs), 0), TokenSelection::default());
}

#[test]
fn token_reads_only_live_events() {
    let evs = vec![ev(1.0, A), comp(1.5, Some(0.0), Some(5.0)), ev(2.0, A)];
    assert_eq!(tok(&evs, &[0, 2], 0), sel(vec![0, 2], None));
    assert_eq!(tok(&evs, &[0, 1, 2], 0), TokenSelection::default());
}

/// google-adk 2.0: the window stops before a call answered nowhere, and
/// before a request no later response resolves; a response in the
/// requesting event itself resolves nothing.
#[test]
fn truncation_stops_at_pending_calls_and_unresolved_requests() {
    let evs = vec![
        ev(1.0, A).call(1),
        ev(2.0, A).resp(1),
        ev(3.0, B).call(2),
        ev(4.0, B).pend(3).resp(3),
        ev(5.0, C).pend(4),
        ev(6.0, C).resp(4),
    ];
    let (views, ids) = build(&evs);
    let every = all(&evs);
    // Call 2 is answered nowhere: cut before it.
    assert_eq!(truncated_prefix(&views, &ids, &every, &every), 2);
    // Past it, request 3 is answered only in its own event: cut there.
    assert_eq!(truncated_prefix(&views, &ids, &every[3..], &every), 0);
    // Request 4 is resolved later: nothing cut.
    assert_eq!(truncated_prefix(&views, &ids, &every[4..], &every), 2);
    // Unlike the self-contained prefix, an open call answered later in the
    // session does not stop the window.
    assert_eq!(truncated_prefix(&views, &ids, &every[..1], &every), 1);
    assert_eq!(prefix(&evs, &every[..1], false), 0);
}

// ---------------------------------------------------------------------------
// latest_prompt_token_count
// ---------------------------------------------------------------------------

#[test]
fn prompt_count_is_the_newest_matching() {
    let evs = vec![
        ev(1.0, A).tokens(10, AG1),
        ev(2.0, A).tokens(20, AG2),
        ev(3.0, A),
    ];
    assert_eq!(count(&evs, None), Some(20));
    assert_eq!(count(&evs, Some(AG2)), Some(20));
    assert_eq!(count(&evs, Some(AG1)), Some(10));
    assert_eq!(count(&evs, Some(203)), None);
    assert_eq!(count(&[ev(1.0, A).tokens(0, AG1)], None), Some(0));
    assert_eq!(count(&[ev(1.0, A)], None), None);
}

#[test]
fn prompt_count_stops_at_a_compaction() {
    let evs = vec![
        ev(1.0, A).tokens(10, AG1),
        comp(1.5, None, None).no_content(),
        ev(2.0, A).tokens(20, AG2),
    ];
    assert_eq!(count(&evs, Some(AG2)), Some(20));
    assert_eq!(count(&evs, Some(AG1)), None);
    let (views, _) = build(&evs);
    assert_eq!(
        latest_prompt_token_count(&views, &[0, 2], Some(AG1), true),
        Some(10)
    );
    assert_eq!(latest_prompt_token_count(&views, &[0, 1], None, true), None);
}

/// Before 2.10 the newest count of any event counts, a compaction no stop.
#[test]
fn prompt_count_before_2_10_looks_past_compactions() {
    let evs = vec![
        ev(1.0, A).tokens(10, AG1),
        comp(1.5, None, None).no_content(),
        ev(2.0, A),
    ];
    let (views, _) = build(&evs);
    assert_eq!(
        latest_prompt_token_count(&views, &[0, 1, 2], None, true),
        None
    );
    assert_eq!(
        latest_prompt_token_count(&views, &[0, 1, 2], None, false),
        Some(10)
    );
}

// ---------------------------------------------------------------------------
// Oracles: google-adk's Python, restated line by line on `Ev` lists. Each
// returns positions into the list it was given (Python returns the events).
// ---------------------------------------------------------------------------

type Set = HashSet<Sym>;

/// `_event_function_call_ids`
fn py_call_ids(e: &Ev) -> Set {
    e.calls.iter().map(|c| c.0).collect()
}

/// `_event_function_response_ids`
fn py_response_ids(e: &Ev) -> Set {
    e.responses.iter().copied().collect()
}

/// `_event_resolved_response_ids`
fn py_resolved_response_ids(e: &Ev) -> Set {
    let pending_in_event: Set = e.pending.iter().copied().collect();
    py_response_ids(e)
        .difference(&pending_in_event)
        .copied()
        .collect()
}

/// `max(a, b)`: Python keeps `a` unless `b > a`.
fn py_max(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

/// `min(xs)` and `max(xs)` of a non-empty list: the first element wins
/// unless a later one compares strictly smaller / larger.
fn py_min_max(xs: &[f64]) -> (f64, f64) {
    let mut lo = xs[0];
    let mut hi = xs[0];
    for &x in &xs[1..] {
        if x < lo {
            lo = x;
        }
        hi = py_max(hi, x);
    }
    (lo, hi)
}

/// Truthiness of a float.
fn py_truthy(x: f64) -> bool {
    x != 0.0
}

fn py_provably_dead_call_ids(events: &[Ev], all_events: &[Ev], newest: Option<Sym>) -> Set {
    let mut protected_ids = Set::new();
    let mut answered_ids = Set::new();
    for event in all_events {
        let is_newest_or_unscoped =
            event.inv.is_none() || (event.inv.is_some() && event.inv == newest);
        if !event.long_running.is_empty() {
            if is_newest_or_unscoped {
                protected_ids.extend(event.long_running.iter().copied());
            } else {
                let synthetic_hitl_ids: Set =
                    event.calls.iter().filter(|c| c.1).map(|c| c.0).collect();
                for id in &event.long_running {
                    if !synthetic_hitl_ids.contains(id) {
                        protected_ids.insert(*id);
                    }
                }
            }
        }
        if is_newest_or_unscoped {
            protected_ids.extend(event.pending.iter().copied());
        }
        answered_ids.extend(py_resolved_response_ids(event));
    }
    let mut dead_ids = Set::new();
    for event in events {
        if newest.is_some() && event.inv == newest {
            continue;
        }
        for call_id in py_call_ids(event) {
            if !protected_ids.contains(&call_id) && !answered_ids.contains(&call_id) {
                dead_ids.insert(call_id);
            }
        }
    }
    dead_ids
}

fn py_longest_self_contained_prefix(events: &[Ev], all_events: Option<&[Ev]>) -> usize {
    let pass = |dead_ids: &Set| -> usize {
        let mut open_ids = Set::new();
        let mut safe_length = 0;
        for (index, event) in events.iter().enumerate() {
            for id in py_response_ids(event) {
                open_ids.remove(&id);
            }
            for id in py_call_ids(event) {
                if !dead_ids.contains(&id) {
                    open_ids.insert(id);
                }
            }
            for id in &event.pending {
                if !dead_ids.contains(id) {
                    open_ids.insert(*id);
                }
            }
            if open_ids.is_empty() {
                safe_length = index + 1;
            }
        }
        safe_length
    };
    let safe_length = pass(&Set::new());
    if safe_length == events.len() {
        return safe_length;
    }
    let Some(all_events) = all_events else {
        return safe_length;
    };
    if safe_length > 0 && events[safe_length - 1].inv != events[safe_length].inv {
        return safe_length;
    }
    let mut newest_invocation_id = None;
    for event in all_events.iter().rev() {
        if event.inv.is_some() && event.comp.is_none() {
            newest_invocation_id = event.inv;
            break;
        }
    }
    let dead_ids = py_provably_dead_call_ids(events, all_events, newest_invocation_id);
    if dead_ids.is_empty() {
        return safe_length;
    }
    safe_length.max(pass(&dead_ids))
}

fn py_safe_token_compaction_split_index(candidate_events: &[Ev], retention: usize) -> usize {
    let initial_split = candidate_events.len() as isize - retention as isize;
    if initial_split <= 0 {
        return 0;
    }
    let mut unmatched_response_ids = Set::new();
    let mut best_split = 0;
    for i in (0..candidate_events.len()).rev() {
        let event = &candidate_events[i];
        unmatched_response_ids.extend(py_response_ids(event));
        for id in py_call_ids(event) {
            unmatched_response_ids.remove(&id);
        }
        if unmatched_response_ids.is_empty() && i as isize <= initial_split {
            best_split = i;
            break;
        }
    }
    best_split
}

/// `_get_compaction_ranges`: (index, start, end) survivors in event order.
fn py_get_compaction_ranges(events: &[Ev]) -> Vec<(usize, f64, f64)> {
    let mut ranges = Vec::new();
    let mut comparable = Vec::new();
    let mut retained: Vec<usize> = Vec::new();
    for (index, event) in events.iter().enumerate() {
        let Some(c) = event.comp else { continue };
        if !c.has_content {
            continue;
        }
        let (Some(start), Some(end)) = (c.start, c.end) else {
            continue;
        };
        ranges.push((index, start, end));
        if start.is_nan() || end.is_nan() {
            retained.push(index);
        } else {
            comparable.push((index, start, end));
        }
    }
    // key=(start, -end, -index); no NaN among these.
    comparable.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap()
            .then(b.2.partial_cmp(&a.2).unwrap())
            .then(b.0.cmp(&a.0))
    });
    let mut max_end: Option<f64> = None;
    for &(index, _, end) in &comparable {
        if max_end.is_none() || end > max_end.unwrap() {
            retained.push(index);
            max_end = Some(end);
        }
    }
    ranges
        .into_iter()
        .filter(|r| retained.contains(&r.0))
        .collect()
}

/// `_events_to_compact_for_token_threshold`: (positions to compact, position
/// of the compaction the seed event is built from).
fn py_events_to_compact_for_token_threshold(
    events: &[Ev],
    retention: usize,
) -> (Vec<usize>, Option<usize>) {
    let ranges = py_get_compaction_ranges(events);
    let latest_compaction_event = ranges.last().map(|r| r.0);
    let last_compacted_end_timestamp = match latest_compaction_event {
        None => 0.0,
        Some(i) => events[i].comp.unwrap().end.unwrap_or(0.0),
    };
    let candidate_events: Vec<usize> = (0..events.len())
        .filter(|&i| events[i].comp.is_none() && events[i].ts > last_compacted_end_timestamp)
        .collect();
    if candidate_events.len() <= retention {
        return (vec![], None);
    }
    let mut events_to_compact = if retention == 0 {
        candidate_events
    } else {
        let cands: Vec<Ev> = candidate_events
            .iter()
            .map(|&i| events[i].clone())
            .collect();
        let split_index = py_safe_token_compaction_split_index(&cands, retention);
        candidate_events[..split_index].to_vec()
    };
    let window: Vec<Ev> = events_to_compact
        .iter()
        .map(|&i| events[i].clone())
        .collect();
    events_to_compact.truncate(py_longest_self_contained_prefix(&window, Some(events)));
    if events_to_compact.is_empty() {
        return (vec![], None);
    }
    let seed = latest_compaction_event.filter(|&i| {
        let c = events[i].comp.unwrap();
        c.start.is_some() && c.has_content
    });
    (events_to_compact, seed)
}

/// `_run_compaction_for_sliding_window` up to the pairing trim (included
/// when `trim`).
fn py_sliding_window(events: &[Ev], interval: usize, overlap: usize, trim: bool) -> Vec<usize> {
    if events.is_empty() {
        return vec![];
    }
    let mut last_compacted_end_timestamp = 0.0;
    for event in events.iter().rev() {
        if let Some(end) = event.comp.and_then(|c| c.end) {
            if py_truthy(end) {
                last_compacted_end_timestamp = end;
                break;
            }
        }
    }
    // An insertion-ordered dict as a Vec of pairs.
    let mut invocation_latest_timestamps: Vec<(Sym, f64)> = Vec::new();
    for event in events {
        if let (Some(inv), None) = (event.inv, event.comp) {
            match invocation_latest_timestamps.iter_mut().find(|p| p.0 == inv) {
                Some(p) => p.1 = py_max(p.1, event.ts),
                None => invocation_latest_timestamps.push((inv, py_max(0.0, event.ts))),
            }
        }
    }
    let unique_invocation_ids: Vec<Sym> =
        invocation_latest_timestamps.iter().map(|p| p.0).collect();
    let new_invocation_ids: Vec<Sym> = invocation_latest_timestamps
        .iter()
        .filter(|p| p.1 > last_compacted_end_timestamp)
        .map(|p| p.0)
        .collect();
    if new_invocation_ids.len() < interval {
        return vec![];
    }
    let end_inv_id = *new_invocation_ids.last().unwrap();
    let first_new_inv_id = new_invocation_ids[0];
    let first_new_inv_idx = unique_invocation_ids
        .iter()
        .position(|&x| x == first_new_inv_id)
        .unwrap() as isize;
    let start_idx = 0.max(first_new_inv_idx - overlap as isize) as usize;
    let start_inv_id = unique_invocation_ids[start_idx];

    let mut last_event_idx: isize = -1;
    for i in (0..events.len()).rev() {
        if events[i].inv == Some(end_inv_id) {
            last_event_idx = i as isize;
            break;
        }
    }
    let mut events_to_compact: Vec<usize> = vec![];
    if last_event_idx != -1 {
        let mut first_event_start_inv_idx: isize = -1;
        for (i, event) in events.iter().enumerate() {
            if event.inv == Some(start_inv_id) {
                first_event_start_inv_idx = i as isize;
                break;
            }
        }
        if first_event_start_inv_idx != -1 {
            events_to_compact = (first_event_start_inv_idx..last_event_idx + 1)
                .map(|i| i as usize)
                .filter(|&i| events[i].comp.is_none())
                .collect();
            if trim {
                let window: Vec<Ev> = events_to_compact
                    .iter()
                    .map(|&i| events[i].clone())
                    .collect();
                events_to_compact.truncate(py_longest_self_contained_prefix(&window, Some(events)));
            }
        }
    }
    events_to_compact
}

/// google-adk 2.0's `_truncate_events_before_pending_function_call` after
/// `_pending_function_call_ids(all_events)`, then
/// `_truncate_events_before_hitl_signal` after
/// `_resolved_hitl_call_ids(all_events)`: the length kept.
fn py_truncated(events: &[Ev], all_events: &[Ev]) -> usize {
    let mut all_call_ids = Set::new();
    let mut all_response_ids = Set::new();
    for event in all_events {
        all_call_ids.extend(py_call_ids(event));
        all_response_ids.extend(py_response_ids(event));
    }
    let pending_ids: Set = all_call_ids
        .difference(&all_response_ids)
        .copied()
        .collect();
    let mut kept = events.len();
    for (index, event) in events.iter().enumerate() {
        let call_ids = py_call_ids(event);
        if !call_ids.is_empty() && !call_ids.is_disjoint(&pending_ids) {
            kept = index;
            break;
        }
    }
    let mut hitl_position: std::collections::HashMap<Sym, usize> = Default::default();
    let mut resolved = Set::new();
    for (index, event) in all_events.iter().enumerate() {
        for call_id in &event.pending {
            hitl_position.entry(*call_id).or_insert(index);
        }
        for resp_id in py_response_ids(event) {
            if hitl_position.get(&resp_id).is_some_and(|&pos| index > pos) {
                resolved.insert(resp_id);
            }
        }
    }
    for (index, event) in events[..kept].iter().enumerate() {
        let requested: Set = event.pending.iter().copied().collect();
        if !requested.is_empty() && !requested.is_subset(&resolved) {
            return index;
        }
    }
    kept
}

/// The loop of `_latest_prompt_token_count` (`None`: it estimates instead);
/// before 2.10 (`since_compaction` false) without the compaction stop.
fn py_latest_prompt_token_count(
    scoped_events: &[Ev],
    agent: Option<Sym>,
    since_compaction: bool,
) -> Option<i64> {
    for event in scoped_events.iter().rev() {
        if since_compaction && event.comp.is_some() {
            break;
        }
        if event.tokens.is_some() && (agent.is_none() || event.author == agent) {
            return event.tokens;
        }
    }
    None
}

// ---------------------------------------------------------------------------
// Property tests
// ---------------------------------------------------------------------------

fn arb_ts() -> impl Strategy<Value = f64> {
    prop_oneof![
        20 => (0u8..12).prop_map(f64::from),
        1 => Just(-1.0),
        1 => Just(f64::NAN),
    ]
}

fn arb_bound() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => (0u8..12).prop_map(f64::from),
        2 => Just(0.0),
        1 => Just(-0.0),
        2 => Just(f64::NAN),
    ]
}

fn arb_ev() -> impl Strategy<Value = Ev> {
    let id = || 1u32..6;
    (
        arb_ts(),
        prop::option::weighted(0.85, 101u32..105),
        prop::option::weighted(
            0.15,
            (
                prop::option::weighted(0.85, arb_bound()),
                prop::option::weighted(0.85, arb_bound()),
                prop::bool::weighted(0.85),
            ),
        ),
        prop_oneof![
            2 => Just(vec![]),
            1 => prop::collection::vec((id(), prop::bool::weighted(0.25)), 1..3),
        ],
        prop_oneof![3 => Just(vec![]), 2 => prop::collection::vec(id(), 1..3)],
        prop_oneof![3 => Just(vec![]), 1 => prop::collection::vec(id(), 1..3)],
        prop_oneof![
            5 => Just(vec![]),
            1 => prop::collection::vec(prop_oneof![1 => Just(EMPTY), 4 => id()], 1..3),
        ],
        prop::option::weighted(0.3, 0i64..100),
        prop::option::of(201u32..204),
    )
        .prop_map(
            |(ts, inv, comp, calls, responses, long_running, pending, tokens, author)| Ev {
                ts,
                inv,
                comp: comp.map(|(start, end, has_content)| CompactionView {
                    start,
                    end,
                    has_content,
                }),
                calls,
                responses,
                long_running,
                pending,
                tokens,
                author,
            },
        )
}

/// A session and its live indices (all of them, or a random subset).
fn arb_session() -> impl Strategy<Value = (Vec<Ev>, Vec<usize>)> {
    (
        prop::collection::vec(arb_ev(), 0..30),
        prop::collection::vec(prop::bool::weighted(0.8), 30),
        any::<bool>(),
    )
        .prop_map(|(evs, mask, full)| {
            let live = (0..evs.len()).filter(|&i| full || mask[i]).collect();
            (evs, live)
        })
}

fn pick(evs: &[Ev], idx: &[usize]) -> Vec<Ev> {
    idx.iter().map(|&i| evs[i].clone()).collect()
}

/// A contiguous slice `live[a..b]` from two random numbers.
fn sub_window(live: &[usize], a: usize, b: usize) -> Vec<usize> {
    let n = live.len() + 1;
    let (a, b) = (a % n, b % n);
    live[a.min(b)..a.max(b)].to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn prop_longest_prefix_matches_python(
        (evs, live) in arb_session(),
        a in 0usize..64,
        b in 0usize..64,
        with_all in any::<bool>(),
    ) {
        let (views, ids) = build(&evs);
        let window = sub_window(&live, a, b);
        let got = longest_self_contained_prefix(&views, &ids, &window, with_all.then_some(live.as_slice()));
        let all_events = pick(&evs, &live);
        let want = py_longest_self_contained_prefix(&pick(&evs, &window), with_all.then_some(all_events.as_slice()));
        prop_assert_eq!(got, want);
    }

    #[test]
    fn prop_truncated_prefix_matches_python(
        (evs, live) in arb_session(),
        a in 0usize..64,
        b in 0usize..64,
    ) {
        let (views, ids) = build(&evs);
        let window = sub_window(&live, a, b);
        let got = truncated_prefix(&views, &ids, &window, &live);
        let want = py_truncated(&pick(&evs, &window), &pick(&evs, &live));
        prop_assert_eq!(got, want);
    }

    #[test]
    fn prop_provably_dead_matches_python(
        (evs, live) in arb_session(),
        a in 0usize..64,
        b in 0usize..64,
        newest in prop::option::of(101u32..105),
    ) {
        let (views, ids) = build(&evs);
        let window = sub_window(&live, a, b);
        let got = sorted(provably_dead_call_ids(&views, &ids, &window, &live, newest));
        let want = sorted(py_provably_dead_call_ids(&pick(&evs, &window), &pick(&evs, &live), newest));
        prop_assert_eq!(got, want);
    }

    #[test]
    fn prop_safe_split_matches_python((evs, live) in arb_session(), retention in 0usize..12) {
        let (views, ids) = build(&evs);
        let got = safe_split_index(&views, &ids, &live, retention);
        prop_assert_eq!(got, py_safe_token_compaction_split_index(&pick(&evs, &live), retention));
    }

    #[test]
    fn prop_sliding_window_matches_python(
        (evs, live) in arb_session(),
        interval in 1usize..5,
        overlap in 0usize..4,
    ) {
        let got = sw_live(&evs, &live, interval, overlap);
        let want: Vec<usize> = py_sliding_window(&pick(&evs, &live), interval, overlap, true)
            .into_iter()
            .map(|p| live[p])
            .collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn prop_token_threshold_matches_python((evs, live) in arb_session(), retention in 0usize..10) {
        let got = tok(&evs, &live, retention);
        let (to_compact, seed) = py_events_to_compact_for_token_threshold(&pick(&evs, &live), retention);
        let want = TokenSelection {
            to_compact: to_compact.into_iter().map(|p| live[p]).collect(),
            seed_from: seed.map(|p| live[p]),
        };
        prop_assert_eq!(got, want);
    }

    #[test]
    fn prop_latest_prompt_count_matches_python(
        (evs, live) in arb_session(),
        agent in prop::option::of(201u32..204),
        since_compaction in any::<bool>(),
    ) {
        let (views, _) = build(&evs);
        let got = latest_prompt_token_count(&views, &live, agent, since_compaction);
        let want = py_latest_prompt_token_count(&pick(&evs, &live), agent, since_compaction);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn prop_strict_prefix_matches_python(
        (evs, live) in arb_session(),
        a in 0usize..64,
        b in 0usize..64,
    ) {
        let (views, ids) = build(&evs);
        let window = sub_window(&live, a, b);
        let w = pick(&evs, &window);
        let strict = py_longest_self_contained_prefix(&w, None);
        let settled = strict == w.len() || (strict > 0 && w[strict - 1].inv != w[strict].inv);
        prop_assert_eq!(strict_prefix(&views, &ids, &window), (strict, settled));
        if settled {
            // Then the whole session cannot change the answer.
            let all_events = pick(&evs, &live);
            prop_assert_eq!(py_longest_self_contained_prefix(&w, Some(&all_events)), strict);
        }
    }

    #[test]
    fn prop_sliding_window_candidates_match_python(
        (evs, live) in arb_session(),
        interval in 1usize..5,
        overlap in 0usize..4,
    ) {
        let (views, _) = build(&evs);
        let got = sliding_window_candidates(&views, &live, SlidingWindow { interval, overlap });
        let want: Vec<usize> = py_sliding_window(&pick(&evs, &live), interval, overlap, false)
            .into_iter()
            .map(|p| live[p])
            .collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn prop_weightless_compaction_matches_python((evs, live) in arb_session()) {
        let (views, _) = build(&evs);
        let got = weightless_compaction(&views, &live);
        let timestamps: Vec<f64> = live.iter().map(|&i| evs[i].ts).collect();
        match got {
            None => prop_assert!(timestamps.is_empty()),
            Some(v) => {
                prop_assert!(!timestamps.is_empty());
                let c = v.compaction.unwrap();
                prop_assert!(c.has_content);
                let (lo, hi) = py_min_max(&timestamps);
                // Bitwise, so NaN equals NaN and -0.0 differs from 0.0.
                prop_assert_eq!(c.start.map(f64::to_bits), Some(lo.to_bits()));
                prop_assert_eq!(c.end.map(f64::to_bits), Some(hi.to_bits()));
            }
        }
    }
}
