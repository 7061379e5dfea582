//! Lean loading against the full session: every answer a turn's passes give
//! over the lean list equals the one over the full list, on generated
//! sessions and after a turn appended to both.

use super::*;
use crate::core::event::CompactionView;
use crate::core::filter::{process_compaction_events, Item};
use crate::core::recover::{recover_compacted_function_calls, Recovered};
use crate::core::select::{self, Complete, Plan, Rules};
use proptest::prelude::*;

/// Invocation symbols are 0..8, call ids 20..26 (a scope names a call, so
/// scopes are drawn from them), authors 40..43.
const CALLS: std::ops::Range<u32> = 20..26;

#[derive(Debug, Clone)]
struct Spec {
    t: u8,
    invocation: Option<u32>,
    rewind: Option<u32>,
    compaction: Option<(Option<u8>, Option<u8>, bool)>,
    calls: Vec<u32>,
    responses: Vec<u32>,
    long_running: Vec<u32>,
    scope: Option<u32>,
    tokens: Option<i64>,
    author: Option<u32>,
    branched: bool,
    placed: bool,
    pinned: bool,
    marks: u8,
}

fn spec() -> impl Strategy<Value = Spec> {
    let ids = || prop::collection::vec(CALLS, 0..2);
    (
        (
            0u8..30,
            prop::option::weighted(0.95, 0u32..8),
            prop::option::weighted(0.04, 0u32..8),
            prop::option::weighted(
                0.25,
                (
                    prop::option::weighted(0.97, 0u8..30),
                    prop::option::weighted(0.97, 0u8..30),
                    prop::bool::weighted(0.95),
                ),
            ),
        ),
        (ids(), ids(), prop::collection::vec(CALLS, 0..1)),
        (
            prop::option::weighted(0.08, CALLS),
            prop::option::weighted(0.3, 1i64..100),
            prop::option::of(40u32..43),
            (prop::bool::weighted(0.05), prop::bool::weighted(0.08)),
            prop::bool::weighted(0.04),
            0u8..8,
        ),
    )
        .prop_map(
            |(
                (t, invocation, rewind, compaction),
                (calls, responses, long_running),
                (scope, tokens, author, (branched, placed), pinned, marks),
            )| Spec {
                t,
                invocation,
                rewind,
                compaction,
                calls,
                responses,
                long_running,
                scope,
                tokens,
                author,
                branched,
                placed: placed || branched,
                pinned,
                marks,
            },
        )
}

/// Views, facts and the id arena of `specs`, each event its index as
/// identity (shifted by `first`).
fn build(specs: &[Spec], first: u64, ids: &mut Vec<Sym>) -> (Vec<EventView>, Vec<Facts>) {
    let mut span = |syms: &[u32]| {
        let start = ids.len() as u32;
        ids.extend_from_slice(syms);
        Span {
            start,
            len: syms.len() as u32,
        }
    };
    let mut views = Vec::new();
    let mut facts = Vec::new();
    for (k, s) in specs.iter().enumerate() {
        let calls = span(&s.calls);
        let responses = span(&s.responses);
        let long_running = span(&s.long_running);
        views.push(EventView {
            ident: first + k as u64,
            timestamp: f64::from(s.t),
            invocation: s.invocation,
            rewind_before: s.rewind,
            compaction: s
                .compaction
                .map(|(start, end, has_content)| CompactionView {
                    start: start.map(f64::from),
                    end: end.map(f64::from),
                    has_content,
                }),
            calls,
            responses,
            has_responses: !s.responses.is_empty(),
            scope: s.scope,
            long_running,
            prompt_tokens: s.tokens,
            author: s.author,
            ..Default::default()
        });
        facts.push(Facts {
            branched: s.branched,
            placed: s.placed,
            pinned: s.pinned,
            marks: s.marks,
            refs: Span::default(),
        });
    }
    (views, facts)
}

/// A prompt's filtered history (whether a summary, identity) and the
/// history after call recovery.
type Shown = (Vec<(bool, u64)>, Vec<u64>);

/// What the prompt of the agents of `scope` shows: the filtered history and
/// the calls recovery re-injects (`None`: declined).
fn prompt(views: &[EventView], ids: &[Sym], scope: Option<Sym>) -> Option<Shown> {
    let live: Vec<EventView> = apply_rewinds(views)
        .into_iter()
        .map(|i| views[i])
        .filter(|e| e.scope == scope)
        .collect();
    let items = process_compaction_events(&live).ok()?;
    let shown: Vec<EventView> = items
        .iter()
        .map(|item| match *item {
            Item::Raw(i) => live[i],
            // A materialized summary: a new object holding no call.
            Item::Summary(i) => EventView {
                ident: u64::MAX - live[i].ident,
                ..EventView::at(live[i].timestamp)
            },
        })
        .collect();
    let filtered = items
        .iter()
        .map(|item| match *item {
            Item::Raw(i) => (false, live[i].ident),
            Item::Summary(i) => (true, live[i].ident),
        })
        .collect();
    let recovered = recover_compacted_function_calls(&shown, &live, ids).ok()?;
    let recovered = recovered
        .unwrap_or_default()
        .into_iter()
        .map(|r| match r {
            Recovered::Kept(i) => shown[i].ident,
            Recovered::Injected(j) => live[j].ident,
        })
        .collect();
    Some((filtered, recovered))
}

/// A plan's answers as identities (what google-adk builds back from it).
fn plan(views: &[EventView], plan: Result<Plan, CoreError>) -> String {
    let Ok(p) = plan else {
        return "declined".into();
    };
    let id = |i: u32| views[i as usize].ident;
    let priced = p.priced.map(|pr| {
        (
            pr.removed
                .iter()
                .map(|&(i, s)| (id(i), s))
                .collect::<Vec<_>>(),
            pr.added
                .iter()
                .map(|&(i, s)| (id(i), s))
                .collect::<Vec<_>>(),
            pr.weightless_added,
            pr.previous.map(id),
            pr.materialized,
        )
    });
    format!(
        "{:?} {:?} {:?} {:?}",
        p.to_compact.iter().map(|&i| id(i)).collect::<Vec<_>>(),
        p.count,
        p.seed_from.map(id),
        priced
    )
}

use crate::core::error::CoreError;

/// Every answer of a turn's passes over `views`.
fn answers(views: &[EventView], ids: &[Sym], window: SlidingWindow, rules: Rules) -> Vec<String> {
    let mut out = Vec::new();
    let scopes: Vec<Option<Sym>> = std::iter::once(None)
        .chain(views.iter().filter_map(|e| e.scope).map(Some))
        .collect();
    for &scope in &scopes {
        out.push(format!("prompt {scope:?} {:?}", prompt(views, ids, scope)));
    }
    let mut reader = Complete { views, ids };
    out.push(format!(
        "sliding {}",
        plan(views, select::sliding(&mut reader, window, rules))
    ));
    for &scope in &scopes {
        for agent in [None, Some(40)] {
            for retention in [0, 1, 3] {
                let mut reader = Complete { views, ids };
                out.push(format!(
                    "token {scope:?} {agent:?} {retention} {}",
                    plan(
                        views,
                        select::token(&mut reader, scope, agent, retention, rules)
                    )
                ));
            }
        }
    }
    out
}

fn lean_of(views: &[EventView], keep: &[usize]) -> Vec<EventView> {
    keep.iter().map(|&i| views[i]).collect()
}

const RULES: [Rules; 2] = [
    Rules::LATEST,
    Rules {
        scoped: false,
        dead_calls: false,
        priced: false,
        own_counts: false,
        rewinds: false,
        self_contained: false,
    },
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn a_lean_list_answers_as_the_full_one(
        specs in prop::collection::vec(spec(), 0..45),
        turn in prop::collection::vec(spec(), 0..6),
        interval in 1usize..4,
        overlap in 0usize..3,
        old_rules in any::<bool>(),
    ) {
        let rules = RULES[usize::from(old_rules)];
        let window = SlidingWindow { interval, overlap };
        let mut ids = Vec::new();
        let (views, facts) = build(&specs, 0, &mut ids);
        let settings = Settings { window: Some(window), rules };
        let answering: Vec<Sym> = turn.iter().flat_map(|s| s.responses.iter().copied()).collect();
        let keep = needed(&views, &facts, &ids, &[], &settings, Turn { underway: &[], answering: &answering });
        prop_assert!(keep.windows(2).all(|w| w[0] < w[1]));
        let lean = lean_of(&views, &keep);
        prop_assert_eq!(answers(&lean, &ids, window, rules), answers(&views, &ids, window, rules));

        // The turn: its events appended to both lists (a new invocation,
        // stamped after everything stored).
        let turn: Vec<Spec> = turn
            .into_iter()
            .map(|s| Spec {
                t: s.t + 30,
                invocation: Some(9),
                rewind: None,
                compaction: None,
                // The turn's calls are new ids (google-adk draws them).
                calls: s.calls.iter().map(|c| c + 10).collect(),
                long_running: s.long_running.iter().map(|c| c + 10).collect(),
                ..s
            })
            .collect();
        // google-adk appends a message answering a stored call to the
        // invocation that made the call.
        let answered = turn.iter().flat_map(|s| s.responses.iter()).find_map(|id| {
            views.iter().rev().find(|e| e.calls.of(&ids).contains(id)).and_then(|e| e.invocation)
        });
        let turn: Vec<Spec> = turn
            .into_iter()
            .map(|s| Spec { invocation: answered.or(s.invocation), ..s })
            .collect();
        let (tail, _) = build(&turn, 1000, &mut ids);
        let full_after: Vec<EventView> = views.iter().chain(&tail).copied().collect();
        let lean_after: Vec<EventView> = lean.iter().chain(&tail).copied().collect();
        prop_assert_eq!(
            answers(&lean_after, &ids, window, rules),
            answers(&full_after, &ids, window, rules)
        );

        // Kept up to date: the lean list grown by the turn, made lean again,
        // where what was left out admits the turn.
        let (again, dropped) = decide(&views, &facts, &ids, &[], &settings, Turn { underway: &[], answering: &answering });
        prop_assert_eq!(&again, &keep);
        let tail_facts = vec![Facts::default(); tail.len()];
        let next = Turn::default();
        if dropped.admits(&tail, &tail_facts, (&ids, &[]), next) {
            let lean_facts: Vec<Facts> = keep.iter().map(|&i| facts[i]).chain(tail_facts.iter().copied()).collect();
            let relean = needed(&lean_after, &lean_facts, &ids, &[], &settings, next);
            let lean2 = lean_of(&lean_after, &relean);
            prop_assert_eq!(
                answers(&lean2, &ids, window, rules),
                answers(&full_after, &ids, window, rules)
            );
        }

        // A compaction made during the turn over the token threshold's
        // selection, then the sliding window after it.
        let mut reader = Complete { views: &full_after, ids: &ids };
        if let Ok(p) = select::token(&mut reader, None, None, 1, rules) {
            let stamps: Vec<f64> = p
                .seed_from
                .and_then(|i| full_after[i as usize].compaction?.start)
                .into_iter()
                .chain(p.to_compact.iter().map(|&i| full_after[i as usize].timestamp))
                .collect();
            if !stamps.is_empty() {
                let low = stamps.iter().copied().fold(f64::INFINITY, f64::min);
                let high = stamps.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let made = EventView { ident: 5000, ..EventView::compacting(high + 0.5, low, high) };
                let full_made: Vec<EventView> = full_after.iter().copied().chain([made]).collect();
                let lean_made: Vec<EventView> = lean_after.iter().copied().chain([made]).collect();
                prop_assert_eq!(
                    answers(&lean_made, &ids, window, rules),
                    answers(&full_made, &ids, window, rules)
                );
            }
        }
    }

    #[test]
    fn a_lean_list_kept_up_to_date_turn_by_turn_answers_as_the_full_one(
        specs in prop::collection::vec(spec(), 0..30),
        turns in prop::collection::vec(prop::collection::vec(spec(), 1..5), 1..6),
        interval in 1usize..4,
        overlap in 0usize..3,
    ) {
        let rules = Rules::LATEST;
        let window = SlidingWindow { interval, overlap };
        let settings = Settings { window: Some(window), rules };
        let mut ids = Vec::new();
        let (mut full, mut full_facts) = build(&specs, 0, &mut ids);
        let (keep, mut dropped) = decide(&full, &full_facts, &ids, &[], &settings, Turn::default());
        let mut lean: Vec<EventView> = lean_of(&full, &keep);
        let mut lean_facts: Vec<Facts> = keep.iter().map(|&i| full_facts[i]).collect();
        for (k, turn) in turns.into_iter().enumerate() {
            // A turn: new invocation, new call ids (its responses may answer
            // stored calls, as a resumed long-running call's do).
            let turn: Vec<Spec> = turn
                .into_iter()
                .map(|s| Spec {
                    t: s.t + 30 * (k as u8 + 1),
                    invocation: Some(10 + k as u32),
                    rewind: None,
                    calls: s.calls.iter().map(|c| c + 100 + 10 * k as u32).collect(),
                    long_running: vec![],
                    ..s
                })
                .collect();
            let answering: Vec<Sym> = turn.iter().flat_map(|s| s.responses.iter().copied()).collect();
            // google-adk appends a message answering a stored call to the
            // invocation that made the call.
            let answered = answering.iter().find_map(|id| {
                full.iter().rev().find(|e| e.calls.of(&ids).contains(id)).and_then(|e| e.invocation)
            });
            let turn: Vec<Spec> = turn
                .into_iter()
                .map(|s| Spec { invocation: answered.or(s.invocation), ..s })
                .collect();
            let message = Turn { underway: &[], answering: &answering };
            let (tail, tail_facts) = build(&turn, 1000 * (k as u64 + 1), &mut ids);
            let grown = tail.len();
            lean.extend_from_slice(&tail);
            lean_facts.extend_from_slice(&tail_facts);
            full.extend_from_slice(&tail);
            full_facts.extend_from_slice(&tail_facts);
            match decide_grown(&lean, &lean_facts, (&ids, &[]), grown, &mut dropped, &settings, message) {
                Some(keep) => {
                    lean = lean_of(&lean, &keep);
                    lean_facts = keep.iter().map(|&i| lean_facts[i]).collect();
                }
                None => {
                    let (keep, again) = decide(&full, &full_facts, &ids, &[], &settings, message);
                    lean = lean_of(&full, &keep);
                    lean_facts = keep.iter().map(|&i| full_facts[i]).collect();
                    dropped = again;
                }
            }
            prop_assert_eq!(answers(&lean, &ids, window, rules), answers(&full, &ids, window, rules));
        }
    }

    #[test]
    fn a_session_compacted_in_order_loads_lean(
        turns in 20usize..60,
        interval in 1usize..4,
        overlap in 0usize..3,
    ) {
        // One invocation a turn, three events each, a summary after every
        // `interval` turns over them and `overlap` before: what a sliding
        // window app stores. The lean list stays short.
        let mut s = crate::core::testing::Session::default();
        let mut t = 0.0;
        let mut since = 0;
        for inv in 0..turns as u32 {
            for _ in 0..3 {
                t += 1.0;
                s.raw(t, inv);
            }
            since += 1;
            if since == interval {
                since = 0;
                let first = (inv as usize + 1).saturating_sub(interval + overlap);
                s.compaction(t + 0.5, (first * 3 + 1) as f64, t);
                t += 1.0;
            }
        }
        let facts = vec![Facts::default(); s.events.len()];
        let window = SlidingWindow { interval, overlap };
        let settings = Settings { window: Some(window), rules: Rules::LATEST };
        let keep = needed(&s.events, &facts, &s.ids, &[], &settings, Turn::default());
        let summaries = s.events.iter().filter(|e| e.compaction.is_some()).count();
        prop_assert!(keep.len() <= summaries + 3 * (interval + overlap + 1) + 1,
            "{} kept of {}", keep.len(), s.events.len());
        let lean = lean_of(&s.events, &keep);
        prop_assert_eq!(answers(&lean, &s.ids, window, Rules::LATEST), answers(&s.events, &s.ids, window, Rules::LATEST));
    }
}

#[test]
fn an_uncovered_gap_is_loaded() {
    let mut s = crate::core::testing::Session::default();
    for (t, inv) in [(1.0, 0), (2.0, 0), (3.0, 1), (4.0, 1), (5.0, 2), (6.0, 2)] {
        s.raw(t, inv);
    }
    // Covers 1-2 and 5-6, not the gap 3-4.
    s.compaction(6.5, 1.0, 2.0);
    s.compaction(6.6, 5.0, 6.0);
    let facts = vec![Facts::default(); s.events.len()];
    let keep = needed(
        &s.events,
        &facts,
        &s.ids,
        &[],
        &Settings::default(),
        Turn::default(),
    );
    assert_eq!(keep, vec![2, 3, 6, 7]);
}

#[test]
fn a_covered_call_whose_response_shows_is_loaded() {
    let mut s = crate::core::testing::Session::default();
    s.call(1.0, 0, 20);
    s.raw(2.0, 0);
    s.compaction(2.5, 1.0, 2.0);
    s.response(3.0, 1, 20);
    let facts = vec![Facts::default(); s.events.len()];
    let keep = needed(
        &s.events,
        &facts,
        &s.ids,
        &[],
        &Settings::default(),
        Turn::default(),
    );
    assert_eq!(keep, vec![0, 2, 3]);
}
