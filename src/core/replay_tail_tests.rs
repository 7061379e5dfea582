//! Tests of `core::replay_tail`: the audit with replays over tails equals
//! the audit with replays over the makers' whole copies, on sessions whose
//! compactions google-adk's selections wrote.

use super::super::audit::{audit_over, Audit, Order, Session, Settings};
use super::super::event::{EventView, Sym};
use super::super::loading::{loaded, views_at};
use super::super::replay::REPLAYED;
use super::super::select::{self, settled, Complete};
use super::super::testing;
use super::super::window::SlidingWindow;
use proptest::prelude::*;

/// The user author's symbol, and the isolation scope some invocations run
/// in (symbols no invocation or call takes).
const USER: Sym = 1_000_000;
const SCOPE: Sym = 1_000_001;

/// One invocation of a simulated session: its events' shapes (`0` plain,
/// `1` a call, `2` a response to the oldest open call, `3` a long-running
/// call, `4` a pending confirmation, `5` a call reusing an old id), how its
/// stamps go astray (`0` none, `1` each a tie with the event before, `2`
/// but the first stamped before the event before, `3` but the first
/// stamped before earlier invocations), whether it resumes
/// the previous invocation, whether an event of a long-lived background
/// invocation precedes it, whether it runs in a scope, whether a rewind
/// follows it (how many invocations back, `0`: none; `7`: to the first),
/// whether its compaction's selection is made before it is stored
/// (appended while summarizing), and whether a foreign compaction over
/// everything and more follows it.
#[derive(Debug, Clone)]
struct Step {
    shapes: Vec<u8>,
    astray: u8,
    resumed: bool,
    background: bool,
    scoped: bool,
    rewind: u8,
    late: bool,
    wide: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (
        proptest::collection::vec(prop_oneof![12 => 0u8..5, 1 => Just(5u8)], 1..6),
        prop_oneof![12 => Just(0u8), 2 => Just(1u8), 2 => Just(2u8), 1 => Just(3u8)],
        proptest::bool::weighted(0.1),
        proptest::bool::weighted(0.1),
        proptest::bool::weighted(0.1),
        prop_oneof![12 => Just(0u8), 1 => 1u8..4, 1 => Just(7u8)],
        proptest::bool::weighted(0.15),
        proptest::bool::weighted(0.03),
    )
        .prop_map(
            |(shapes, astray, resumed, background, scoped, rewind, late, wide)| Step {
                shapes,
                astray,
                resumed,
                background,
                scoped,
                rewind,
                late,
                wide,
            },
        )
}

/// A session written as google-adk writes one: each step's invocation
/// stored, then the selections of `settings` over the store as loaded in
/// `order` summarized (a late step's selection made before its events
/// were stored).
struct Simulated {
    s: testing::Session,
    event_ids: Vec<Option<String>>,
}

impl Simulated {
    /// The session of `steps` (stamps from `t0` on).
    fn run(steps: &[Step], order: Order, settings: Settings, t0: f64) -> Simulated {
        let mut sim = Simulated {
            s: testing::Session::default(),
            event_ids: Vec::new(),
        };
        let (mut t, mut open, mut next_call) = (t0, Vec::<Sym>::new(), 0u32);
        let mut invocations: Vec<Sym> = Vec::new();
        for (k, step) in steps.iter().enumerate() {
            let inv = match (step.resumed, invocations.last()) {
                (true, Some(&last)) => last,
                _ => 10 + k as Sym,
            };
            invocations.push(inv);
            if step.background {
                t += 1.0;
                sim.s.raw(t, 7);
                sim.stored();
            }
            let pending = step.late.then(|| sim.selections(order, settings));
            for (j, &shape) in step.shapes.iter().enumerate() {
                t += 1.0;
                let stamp = match (j, step.astray) {
                    (_, 0) => t,
                    (_, 1) => t - 1.0,
                    (0, _) => t,
                    (_, 2) => t - 1.5,
                    _ => t - 30.5,
                };
                let p = match shape {
                    1 | 3 | 4 | 5 => {
                        next_call += 1;
                        let id = match shape {
                            5 => 100_001 + (k as Sym * 3) % next_call,
                            _ => 100_000 + next_call,
                        };
                        let p = sim.s.call(stamp, inv, id);
                        match shape {
                            3 => sim.s.events[p].long_running = sim.s.span(&[id]),
                            4 => sim.s.events[p].pending = sim.s.span(&[id]),
                            _ => {}
                        }
                        open.push(id);
                        p
                    }
                    2 if !open.is_empty() => sim.s.response(stamp, inv, open.remove(0)),
                    _ => sim.s.raw(stamp, inv),
                };
                if j == 0 {
                    sim.s.events[p].author = Some(USER);
                }
                if step.scoped {
                    sim.s.events[p].scope = Some(SCOPE);
                }
                sim.stored();
            }
            if step.rewind > 0 {
                let back = (step.rewind as usize).min(invocations.len());
                let target = match step.rewind {
                    7 => invocations[0],
                    _ => invocations[invocations.len() - back],
                };
                t += 1.0;
                let p = sim.s.raw(t, 5_000 + k as Sym);
                sim.s.events[p].rewind_before = Some(target);
                sim.stored();
            }
            let mut made = pending.unwrap_or_else(|| sim.selections(order, settings));
            if step.wide {
                made.push((t0, t + 100.0));
            }
            for (start, end) in made {
                t += 1.0;
                sim.s.events.push(EventView {
                    ident: sim.s.events.len() as u64,
                    invocation: Some(9_000 + k as Sym),
                    ..EventView::compacting(t, start, end)
                });
                sim.stored();
            }
        }
        sim
    }

    /// An event was appended: its id (ties broken out of storage order).
    fn stored(&mut self) {
        let p = self.event_ids.len();
        self.event_ids
            .push(Some(format!("e{:05}", (p * 7919) % 10_007)));
    }

    /// The intervals google-adk's configured selections summarize now.
    fn selections(&self, order: Order, settings: Settings) -> Vec<(f64, f64)> {
        let events = &self.s.events;
        let all: Vec<usize> = (0..events.len()).collect();
        let views = views_at(events, &loaded(events, &all, order, &self.event_ids));
        let mut reader = Complete {
            views: &views,
            ids: &self.s.ids,
        };
        let mut out = Vec::new();
        if let Some(cfg) = settings.sliding {
            let plan = settled(select::sliding(&mut reader, cfg, REPLAYED));
            if let (Some(&a), Some(&z)) = (plan.to_compact.first(), plan.to_compact.last()) {
                out.push((views[a as usize].timestamp, views[z as usize].timestamp));
            }
        }
        if let (Some(retention), true) = (settings.retention, out.is_empty()) {
            let plan = settled(select::token(&mut reader, None, None, retention, REPLAYED));
            if let (Some(&a), Some(&z)) = (plan.to_compact.first(), plan.to_compact.last()) {
                let seeded = plan
                    .seed_from
                    .and_then(|k| views[k as usize].compaction)
                    .and_then(|c| c.start);
                out.push((
                    seeded.unwrap_or(views[a as usize].timestamp),
                    views[z as usize].timestamp,
                ));
            }
        }
        out
    }

    fn audit(&self, order: Order, settings: Settings, first_tail: Option<usize>) -> Audit {
        // Identified by storage position already, as the stored reader
        // identifies them.
        let events = &self.s.events;
        let parts = vec![true; events.len()];
        let session = Session {
            events,
            ids: &self.s.ids,
            has_parts: &parts,
            event_ids: &self.event_ids,
            records: &[],
            user: Some(USER),
        };
        audit_over(session, |_| None, order, settings, first_tail)
    }
}

fn orders() -> impl Strategy<Value = Order> {
    prop_oneof![
        Just(Order::Stored),
        Just(Order::Timestamp),
        Just(Order::TimestampId)
    ]
}

fn settings() -> impl Strategy<Value = Settings> {
    let sliding = proptest::option::weighted(
        0.8,
        (1usize..4, 0usize..3).prop_map(|(interval, overlap)| SlidingWindow { interval, overlap }),
    );
    let retention = proptest::option::weighted(0.5, 0usize..6);
    (sliding, retention).prop_map(|(sliding, retention)| Settings { sliding, retention })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn replays_over_tails_audit_as_over_whole_copies(
        steps in proptest::collection::vec(step(), 1..60),
        order in orders(),
        settings in settings(),
        first_tail in 1usize..24,
        t0 in prop_oneof![Just(0.0), Just(-1000.0)],
    ) {
        let sim = Simulated::run(&steps, order, settings, t0);
        let whole = sim.audit(order, settings, None);
        let tails = sim.audit(order, settings, Some(first_tail));
        prop_assert_eq!(tails, whole);
    }
}

#[test]
fn a_long_session_s_compactions_all_replay_over_tails() {
    // 600 invocations of a call and its response, a sliding window of 3
    // with an overlap of 1: every compaction reproduces, over tails as over
    // whole copies, and nothing is hidden.
    let steps: Vec<Step> = (0..600)
        .map(|_| Step {
            shapes: vec![0, 1, 2, 0],
            astray: 0,
            resumed: false,
            background: false,
            scoped: false,
            rewind: 0,
            late: false,
            wide: false,
        })
        .collect();
    let settings = Settings {
        sliding: Some(SlidingWindow {
            interval: 3,
            overlap: 1,
        }),
        retention: None,
    };
    for order in [Order::Stored, Order::Timestamp, Order::TimestampId] {
        let sim = Simulated::run(&steps, order, settings, 0.0);
        let tails = sim.audit(order, settings, Some(8));
        assert!(
            tails.compactions.len() >= 190,
            "{}",
            tails.compactions.len()
        );
        assert!(tails.compactions.iter().all(|c| c.known));
        assert!(tails.hidden.is_empty() && tails.undecidable.is_empty());
        assert_eq!(tails, sim.audit(order, settings, None));
    }
}
