//! Tests of `core::select`: each of the family rules changes the answer
//! where google-adk's releases differ, and a reader that knows nothing
//! beyond what a selection asks for leads to the plan complete views give.

use super::*;
use crate::core::testing::{Lazy, Session};
use proptest::prelude::*;

const AGENT: Sym = 201;
const OTHER: Sym = 202;
const SCOPE: Sym = 301;

/// The selections over a test session's views.
trait Select {
    fn sliding(&self, interval: usize, overlap: usize, rules: Rules) -> Plan;
    fn token(&self, scope: Option<Sym>, agent: Option<Sym>, retention: usize, rules: Rules)
        -> Plan;
}

impl Select for Session {
    fn sliding(&self, interval: usize, overlap: usize, rules: Rules) -> Plan {
        let mut reader = Complete {
            views: &self.events,
            ids: &self.ids,
        };
        settled(sliding(
            &mut reader,
            SlidingWindow { interval, overlap },
            rules,
        ))
    }

    fn token(
        &self,
        scope: Option<Sym>,
        agent: Option<Sym>,
        retention: usize,
        rules: Rules,
    ) -> Plan {
        let mut reader = Complete {
            views: &self.events,
            ids: &self.ids,
        };
        settled(token(&mut reader, scope, agent, retention, rules))
    }
}

fn at(v: &[u32]) -> Vec<usize> {
    v.iter().map(|&i| i as usize).collect()
}

/// Three invocations of one event each.
fn three() -> Session {
    let mut s = Session::default();
    for k in 1..=3 {
        s.raw(k as f64, k);
    }
    s
}

#[test]
fn scoped_leaves_other_scopes_out_of_the_sliding_window() {
    let mut s = three();
    s.events[1].scope = Some(SCOPE);
    let on = s.sliding(2, 0, Rules::LATEST);
    assert_eq!(at(&on.to_compact), vec![0, 2]);
    assert_eq!(on.handed, Some(vec![0, 2]));
    let off = s.sliding(
        2,
        0,
        Rules {
            scoped: false,
            ..Rules::LATEST
        },
    );
    assert_eq!(at(&off.to_compact), vec![0, 1, 2]);
    assert_eq!(off.handed, None);
}

#[test]
fn scoped_keeps_the_token_threshold_to_its_scope() {
    let mut s = three();
    s.events[0].scope = Some(SCOPE);
    s.events[2].scope = Some(SCOPE);
    let on = s.token(Some(SCOPE), None, 0, Rules::LATEST);
    assert_eq!(at(&on.to_compact), vec![0, 2]);
    assert_eq!(on.rewound, None);
    assert_eq!(on.handed, Some(vec![0, 2]));
    let off = s.token(
        Some(SCOPE),
        None,
        0,
        Rules {
            scoped: false,
            ..Rules::LATEST
        },
    );
    assert_eq!(at(&off.to_compact), vec![0, 1, 2]);
}

#[test]
fn rewinds_leave_the_rewound_invocation_out() {
    let mut s = three();
    // Event 2 rewinds to before invocation 2: both leave the history.
    s.events[2].rewind_before = Some(2);
    s.raw(4.0, 4);
    let on = s.sliding(1, 5, Rules::LATEST);
    assert_eq!(on.handed, Some(vec![0, 3]));
    let off = s.sliding(
        1,
        5,
        Rules {
            rewinds: false,
            ..Rules::LATEST
        },
    );
    assert_eq!(off.handed, None);
    let on = s.token(None, None, 0, Rules::LATEST);
    assert_eq!(on.rewound, Some(vec![0, 3]));
    let off = s.token(
        None,
        None,
        0,
        Rules {
            rewinds: false,
            ..Rules::LATEST
        },
    );
    assert_eq!(off.rewound, None);
}

#[test]
fn priced_prices_only_a_selection_with_something_to_compact() {
    let s = three();
    let on = s.sliding(3, 0, Rules::LATEST);
    let priced = on.priced.expect("priced");
    // Summarizing all three removes their three contents.
    assert_eq!(priced.removed, vec![(0, false), (1, false), (2, false)]);
    assert!(priced.weightless_added);
    assert!(s
        .sliding(
            3,
            0,
            Rules {
                priced: false,
                ..Rules::LATEST
            }
        )
        .priced
        .is_none());
    // Not due yet: nothing to price.
    assert!(s.sliding(4, 0, Rules::LATEST).priced.is_none());
}

#[test]
fn own_counts_take_the_agent_s_count_since_the_newest_compaction() {
    let mut s = three();
    s.events[0].prompt_tokens = Some(10);
    s.events[0].author = Some(AGENT);
    s.compaction(1.5, 1.0, 1.0);
    s.raw(4.0, 4);
    s.events[4].prompt_tokens = Some(20);
    s.events[4].author = Some(OTHER);
    // 2.10 on: the agent's own count, never past the newest compaction.
    let own = s.token(None, Some(AGENT), 9, Rules::LATEST);
    assert_eq!(own.count, None);
    // Before: the newest count of any event.
    let any = s.token(
        None,
        Some(AGENT),
        9,
        Rules {
            own_counts: false,
            ..Rules::LATEST
        },
    );
    assert_eq!(any.count, Some(20));
    // The agent's count before the compaction is found without own_counts
    // only when it is the newest.
    s.events[4].prompt_tokens = None;
    let any = s.token(
        None,
        Some(AGENT),
        9,
        Rules {
            own_counts: false,
            ..Rules::LATEST
        },
    );
    assert_eq!(any.count, Some(10));
}

/// A call (invocation 1) answered in invocation 3, with a call in
/// invocation 2 that is never answered.
fn pending_calls() -> Session {
    let mut s = Session::default();
    s.call(1.0, 1, 7);
    s.call(2.0, 2, 8);
    s.raw(2.5, 2);
    s.response(3.0, 3, 7);
    s
}

#[test]
fn self_contained_keeps_the_longest_paired_prefix() {
    let s = pending_calls();
    let rules = Rules {
        priced: false,
        ..Rules::LATEST
    };
    // 2.3 on: the longest self-contained prefix; call 8 is never answered
    // (provably dead), so all four.
    assert_eq!(at(&s.sliding(2, 0, rules).to_compact), vec![0, 1, 2, 3]);
    // Before 2.3: truncated before the first call the session leaves
    // pending (8).
    let before = Rules {
        self_contained: false,
        ..rules
    };
    assert_eq!(at(&s.sliding(2, 0, before).to_compact), vec![0]);
}

#[test]
fn dead_calls_retry_past_a_call_never_answered() {
    let s = pending_calls();
    let rules = Rules {
        priced: false,
        ..Rules::LATEST
    };
    assert_eq!(at(&s.sliding(3, 0, rules).to_compact), vec![0, 1, 2, 3]);
    // Before 2.12 the strict pass is the answer: call 7 is open until the
    // last event, and call 8 after it.
    let strict = Rules {
        dead_calls: false,
        ..rules
    };
    assert!(s.sliding(3, 0, strict).to_compact.is_empty());
}

/// One generated event: the time step, invocation, kind, call and response
/// ids, usage count (and whether the agent's own) and scope draw.
type Drawn = (f64, u8, u8, Vec<u8>, Vec<u8>, Option<(i64, bool)>, u8);

fn arb_view() -> impl Strategy<Value = Drawn> {
    (
        0.0f64..20.0,
        0u8..6,
        0u8..8,
        prop::collection::vec(1u8..8, 0..2),
        prop::collection::vec(1u8..8, 0..2),
        prop::option::of((1i64..100, any::<bool>())),
        0u8..10,
    )
}

prop_compose! {
    fn arb_session()(raw in prop::collection::vec(arb_view(), 0..24)) -> Session {
        let mut s = Session::default();
        let mut ts = 0.0;
        for (k, (step, inv, kind, calls, responses, usage, scope)) in raw.into_iter().enumerate() {
            ts += step.floor() / 4.0;
            let inv = inv as Sym + 1;
            match kind {
                // A compaction over an earlier stretch.
                0 => {
                    s.compaction(ts, (ts - 3.0).max(0.0), (ts - 1.0).max(0.0));
                }
                // A rewind to before an earlier invocation.
                1 if k > 0 => {
                    let p = s.raw(ts, inv);
                    s.events[p].rewind_before = Some(inv.saturating_sub(1).max(1));
                }
                _ => {
                    let calls: Vec<Sym> = calls.into_iter().map(Sym::from).collect();
                    let responses: Vec<Sym> = responses.into_iter().map(Sym::from).collect();
                    let (c, r) = (s.span(&calls), s.span(&responses));
                    let p = s.raw(ts, inv);
                    let e = &mut s.events[p];
                    (e.calls, e.responses, e.has_responses) = (c, r, r.len > 0);
                    if let Some((count, own)) = usage {
                        e.prompt_tokens = Some(count);
                        e.author = Some(if own { AGENT } else { OTHER });
                    }
                    e.scope = (scope == 0).then_some(SCOPE);
                }
            }
        }
        s
    }
}

fn rules_from(bits: u8) -> Rules {
    let on = |k: u8| bits & (1 << k) != 0;
    Rules {
        scoped: on(0),
        dead_calls: on(1),
        priced: on(2),
        own_counts: on(3),
        rewinds: on(4),
        self_contained: on(5),
    }
}

/// The answers of two plans, pricing by its positions.
fn answer(p: &Plan) -> impl PartialEq + std::fmt::Debug {
    (
        p.rewound.clone(),
        p.handed.clone(),
        p.to_compact.clone(),
        p.count,
        p.seed_from,
        p.priced.as_ref().map(|q| {
            (
                q.removed.clone(),
                q.added.clone(),
                q.weightless_added,
                q.previous,
                q.materialized,
            )
        }),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn prop_a_lazy_reader_gives_the_complete_plan(
        s in arb_session(),
        bits in 0u8..64,
        interval in 1usize..4,
        overlap in 0usize..3,
        retention in 0usize..6,
        scope in prop::option::of(Just(SCOPE)),
    ) {
        let rules = rules_from(bits);
        let lazy = || Lazy::new(&s, LIGHT, Vec::new());
        let want = s.sliding(interval, overlap, rules);
        let got = settled(sliding(&mut lazy(), SlidingWindow { interval, overlap }, rules));
        prop_assert_eq!(answer(&got), answer(&want));
        let want = s.token(scope, Some(AGENT), retention, rules);
        let got = settled(token(&mut lazy(), scope, Some(AGENT), retention, rules));
        prop_assert_eq!(answer(&got), answer(&want));
    }
}
