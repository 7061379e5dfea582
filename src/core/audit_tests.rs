//! Tests of `core::audit`.

use super::*;
use crate::core::window::SlidingWindow;
use crate::core::CompactionView;

fn raw(t: f64, inv: Sym) -> EventView {
    EventView {
        timestamp: t,
        invocation: Some(inv),
        ..EventView::default()
    }
}

fn compaction(t: f64, start: f64, end: f64) -> EventView {
    EventView {
        timestamp: t,
        invocation: Some(99),
        compaction: Some(CompactionView {
            start: Some(start),
            end: Some(end),
            has_content: true,
        }),
        ..EventView::default()
    }
}

/// Invocations 1 (at 1.0 and 1.1) and 2 (at 2.0 and 2.1).
fn two_invocations() -> Vec<EventView> {
    vec![raw(1.0, 1), raw(1.1, 1), raw(2.0, 2), raw(2.1, 2)]
}

fn sliding(interval: usize, overlap: usize) -> Settings {
    Settings {
        sliding: Some(SlidingWindow { interval, overlap }),
        retention: None,
    }
}

fn run(events: &[EventView], order: Order, settings: Settings) -> Audit {
    run_with(events, &[], &[], order, settings)
}

/// Every event with parts; records' hole invocations interned as
/// "inv-N" -> N.
fn run_with(
    events: &[EventView],
    ids: &[Sym],
    records: &[(usize, serde_json::Value)],
    order: Order,
    settings: Settings,
) -> Audit {
    let intern = |text: &str| text.strip_prefix("inv-").and_then(|n| n.parse().ok());
    // Identified by storage position, as the stored reader identifies them.
    let events: Vec<EventView> = events
        .iter()
        .enumerate()
        .map(|(i, e)| EventView {
            ident: i as u64,
            ..*e
        })
        .collect();
    let events = &events[..];
    let parts = vec![true; events.len()];
    let event_ids: Vec<Option<String>> = (0..events.len())
        .map(|i| Some(format!("e{i:03}")))
        .collect();
    let session = Session {
        events,
        ids,
        has_parts: &parts,
        event_ids: &event_ids,
        records,
        user: None,
    };
    audit(session, intern, order, settings)
}

#[test]
fn an_ordinary_sliding_window_session_has_nothing_hidden() {
    // Two invocations of two events, summarized after the second.
    let events = [
        two_invocations(),
        vec![compaction(2.2, 1.0, 2.1), raw(3.0, 3)],
    ]
    .concat();
    let a = run(&events, Order::Stored, sliding(2, 0));
    assert_eq!(a.compactions.len(), 1);
    assert_eq!(a.compactions[0].trigger, Some(Trigger::SlidingWindow));
    assert_eq!(a.compactions[0].handed, vec![0, 1, 2, 3]);
    assert!(a.hidden.is_empty() && a.duplicated.is_empty());
    assert_eq!(a.prompt_size, 2); // the summary and the last event
}

#[test]
fn an_event_appended_while_summarizing_inside_the_interval_is_hidden() {
    // Event 4 (another invocation, stamped 1.5) is stored after the
    // selection over events 0-3 and before the compaction.
    let events = [
        two_invocations(),
        vec![raw(1.5, 7), compaction(2.2, 1.0, 2.1)],
    ]
    .concat();
    let a = run(&events, Order::Stored, sliding(2, 0));
    assert_eq!(a.compactions[0].selected_over, 4);
    assert_eq!(
        a.hidden,
        vec![Hidden {
            position: 4,
            cause: Cause::AppendedWhileSummarizing,
            compaction: Some(5)
        }]
    );
}

#[test]
fn a_next_question_stamped_on_the_interval_end_is_hidden_as_tied() {
    // Event 5 (the next invocation) is stamped in the tick the summary
    // ends on and stored after it: google-adk's interval hides it.
    let events = [
        two_invocations(),
        vec![compaction(2.2, 1.0, 2.1), raw(2.1, 3)],
    ]
    .concat();
    let a = run(&events, Order::Stored, sliding(2, 0));
    assert_eq!(
        a.hidden,
        vec![Hidden {
            position: 5,
            cause: Cause::TiedTimestamp,
            compaction: Some(4)
        }]
    );
    // An event stored out of stamp order around a handed one.
    let events = [
        raw(1.0, 1),
        raw(1.6, 1),
        raw(2.0, 2),
        raw(2.1, 2),
        compaction(2.2, 1.0, 2.1),
        raw(1.5, 3),
    ];
    let a = run(&events, Order::Stored, sliding(2, 0));
    assert_eq!(a.hidden.len(), 1);
    assert_eq!(a.hidden[0].cause, Cause::OutOfOrderTimestamp);
}

#[test]
fn an_unreplayable_compaction_hides_with_an_unknown_cause() {
    let events = [
        raw(1.0, 1),
        raw(2.0, 2),
        compaction(3.0, 0.5, 2.5),
        raw(4.0, 3),
    ];
    let a = run(&events, Order::Stored, Settings::default());
    assert!(!a.compactions[0].known);
    assert_eq!(a.hidden.len(), 2);
    assert!(a
        .hidden
        .iter()
        .all(|h| h.cause == Cause::Unknown && h.compaction == Some(2)));
}

#[test]
fn the_store_order_decides_the_replay() {
    // Each invocation's events stored out of timestamp order: loaded by
    // timestamp (as SQLite stores load) the selection spans 1.0 to 2.1,
    // the compaction's interval; in storage order it would not.
    let events = [
        raw(1.1, 1),
        raw(1.0, 1),
        raw(2.1, 2),
        raw(2.0, 2),
        compaction(2.2, 1.0, 2.1),
    ];
    let a = run(&events, Order::Timestamp, sliding(2, 0));
    assert!(a.compactions[0].known);
    let mut handed = a.compactions[0].handed.clone();
    handed.sort_unstable();
    assert_eq!(handed, vec![0, 1, 2, 3]);
    assert!(a.hidden.is_empty());
    let a = run(&events, Order::Stored, sliding(2, 0));
    assert!(!a.compactions[0].known);
    // Tied timestamps: by id, or in storage order.
    let tied = [raw(1.0, 1), raw(1.0, 1), compaction(1.5, 1.0, 1.0)];
    for order in [Order::Timestamp, Order::TimestampId] {
        assert!(run(&tied, order, sliding(1, 0)).compactions[0].known);
    }
}

#[test]
fn another_invocation_s_event_the_maker_s_copy_lacked_is_unseen() {
    // Invocation 2 starts (event 2), invocation 3 appends event 3 stamped
    // inside what invocation 2 then summarizes (0-2 and 4): its copy never
    // held event 3, though the whole prefix selects the same interval.
    let events = [
        raw(1.0, 1),
        raw(1.1, 1),
        raw(2.0, 2),
        raw(2.05, 3),
        raw(2.1, 2),
        compaction(2.2, 1.0, 2.1),
    ];
    let a = run(&events, Order::Stored, sliding(2, 0));
    assert_eq!(a.compactions[0].unseen, vec![3]);
    assert_eq!(a.compactions[0].handed, vec![0, 1, 2, 4]);
    assert_eq!(
        a.hidden,
        vec![Hidden {
            position: 3,
            cause: Cause::AppendedWhileSummarizing,
            compaction: Some(5)
        }]
    );
}

#[test]
fn a_rolling_token_summary_stands_for_its_seed_s_events() {
    let events = [two_invocations(), vec![raw(3.0, 3)]].concat();
    let retention = Settings {
        sliding: None,
        retention: Some(1),
    };
    // google-adk's own selection decides the first compaction's bounds.
    let select = |views: &[EventView]| {
        let mut reader = Complete { views, ids: &[] };
        settled(select::token(&mut reader, None, None, 1, REPLAYED))
    };
    let first = select(&events);
    let (a, b) = (
        first.to_compact[0] as usize,
        *first.to_compact.last().unwrap() as usize,
    );
    let mut session = events.to_vec();
    session.push(compaction(3.05, events[a].timestamp, events[b].timestamp));
    session.push(raw(4.0, 4));
    let second = select(&session);
    assert_eq!(second.seed_from, Some(5));
    let last = *second.to_compact.last().unwrap() as usize;
    session.push(compaction(
        4.05,
        events[a].timestamp,
        session[last].timestamp,
    ));
    let got = run(&session, Order::Stored, retention);
    assert_eq!(got.compactions.len(), 2);
    assert!(got
        .compactions
        .iter()
        .all(|c| c.trigger == Some(Trigger::TokenThreshold)));
    assert_eq!(got.compactions[1].seeds, vec![5]);
    assert!(got.hidden.is_empty(), "{:?}", got.hidden);
    assert!(got.duplicated.is_empty(), "{:?}", got.duplicated);
}

#[test]
fn an_exact_record_s_holes_stay_raw_and_nothing_is_hidden() {
    // Event 1 (another invocation) was appended inside the interval
    // while the summary of 0 and 2 was made: a hole.
    let events = [
        raw(1.0, 1),
        raw(1.5, 7),
        raw(2.0, 1),
        compaction(2.5, 1.0, 1.0),
        raw(3.0, 2),
    ];
    let record = serde_json::json!({
        "v": 1, "start": 1.0, "end": 2.0, "holes": [{"i": "inv-7", "t": 1_500_000}]
    });
    let got = run_with(&events, &[], &[(3, record)], Order::Stored, sliding(1, 0));
    assert_eq!(got.compactions[0].record, RecordKind::Exact);
    assert_eq!(got.compactions[0].handed, vec![0, 2]);
    assert!(got.hidden.is_empty() && got.duplicated.is_empty());
    // Read as a bare interval (the record malformed), event 1 is hidden.
    let bad = serde_json::json!({"v": 1, "start": 1.0});
    let got = run_with(
        &events,
        &[],
        &[(3, bad)],
        Order::Stored,
        Settings::default(),
    );
    assert!(matches!(
        got.compactions[0].record,
        RecordKind::Malformed(_)
    ));
    assert!(got.hidden.iter().all(|h| h.cause == Cause::MalformedRecord));
    assert!(!got.hidden.is_empty());
}

#[test]
fn a_pending_call_stalls_the_sliding_window() {
    use crate::core::event::Span;
    // Invocation 1 starts a long-running call whose response never
    // comes; four more invocations follow.
    let ids = [42];
    let mut call = raw(1.0, 1);
    call.calls = Span { start: 0, len: 1 };
    call.long_running = Span { start: 0, len: 1 };
    let mut events = vec![call];
    for k in 2..6 {
        events.push(raw(f64::from(k), k));
    }
    let a = run_with(&events, &ids, &[], Order::Stored, sliding(2, 0));
    let stalled = a.stalled.expect("stalled");
    assert_eq!(stalled.trigger, Trigger::SlidingWindow);
    assert_eq!(stalled.backlog, 5);
    assert_eq!(stalled.backlog_invocations, 5);
    assert_eq!(stalled.prompt_then, None);
    // Answered, it is not stalled.
    let mut answer = raw(1.5, 1);
    answer.responses = Span { start: 0, len: 1 };
    answer.has_responses = true;
    events.insert(1, answer);
    let a = run_with(&events, &ids, &[], Order::Stored, sliding(2, 0));
    assert_eq!(a.stalled, None);
}

#[test]
fn an_event_of_another_scope_is_in_its_own_scope_s_prompt() {
    // A sliding-window summary (unscoped) over 1.0-2.1; an event of an
    // isolation scope stamped inside it, stored after it: google-adk
    // assembles each scope's prompt from that scope's events, so the root
    // summary does not hide it from its own scope's prompt (nor does the
    // root scope's prompt ever show it).
    let mut scoped = raw(1.5, 3);
    scoped.scope = Some(9);
    let events = [two_invocations(), vec![compaction(2.2, 1.0, 2.1), scoped]].concat();
    let a = run(&events, Order::Stored, sliding(2, 0));
    assert!(a.compactions[0].known);
    assert_eq!(a.hidden, vec![]);
    // The root scope's prompt: the summary.
    assert_eq!(a.prompt_size, 1);
    // A compaction of that scope over it hides it from its scope's prompt
    // only when that compaction was not handed it.
    let mut own = compaction(2.3, 1.4, 1.6);
    own.scope = Some(9);
    let events = [events, vec![own]].concat();
    let a = run(&events, Order::Stored, sliding(2, 0));
    assert_eq!(a.hidden.len(), 1);
    assert_eq!(a.hidden[0].position, 5);
    assert_eq!(a.hidden[0].compaction, Some(6));
}

/// `raw` authored by the user (symbol 50 in these tests).
fn asked(t: f64, inv: Sym) -> EventView {
    EventView {
        author: Some(50),
        ..raw(t, inv)
    }
}

fn run_as_users(events: &[EventView], order: Order, settings: Settings) -> Audit {
    let parts = vec![true; events.len()];
    let event_ids: Vec<Option<String>> = (0..events.len())
        .map(|i| Some(format!("e{i:03}")))
        .collect();
    let session = Session {
        events,
        ids: &[],
        has_parts: &parts,
        event_ids: &event_ids,
        records: &[],
        user: Some(50),
    };
    audit(session, |_| None, order, settings)
}

#[test]
fn a_resumed_invocation_s_copy_is_fetched_at_its_latest_run() {
    // Invocation 1 asks and answers (0, 1); invocation 2 does (2, 3);
    // invocation 1 is resumed (a response posted back: 4, its reply 5);
    // then a tail-retention summary of 0-4. Invocation 1's first run could
    // not hold 2 and 3, its resumed run (fetched at 4) holds them: they
    // were handed, nothing is hidden. (Fetched at invocation 1's first
    // event, its copy would leave 2 and 3 out, and the same selection's
    // bounds would read them as appended while summarizing.)
    let events = [
        asked(1.0, 1),
        raw(1.1, 1),
        asked(2.0, 2),
        raw(2.1, 2),
        asked(3.0, 1),
        raw(3.1, 1),
        compaction(3.2, 1.0, 3.0),
    ];
    let retention = Settings {
        sliding: None,
        retention: Some(1),
    };
    let a = run_as_users(&events, Order::Stored, retention);
    assert!(a.compactions[0].known);
    assert_eq!(a.compactions[0].handed, vec![0, 1, 2, 3, 4]);
    assert!(a.compactions[0].unseen.is_empty());
    assert!(a.hidden.is_empty(), "{:?}", a.hidden);
    assert!(a.undecidable.is_empty(), "{:?}", a.undecidable);
}

/// Invocation 1 asks (0) and makes a long-running call (1, call id 42),
/// which pauses it; invocation 2 asks and answers (2, 3); invocation 1 is
/// resumed by its id, without a user-authored event: the call's result (4,
/// the tool's own response) and its reply (5); then `more` and a
/// tail-retention summary of 0-4.
fn resumed_without_a_user_event(pause: bool, more: &[EventView]) -> Audit {
    use crate::core::event::Span;
    let mut call = raw(1.1, 1);
    call.calls = Span { start: 0, len: 1 };
    if pause {
        call.long_running = Span { start: 0, len: 1 };
    }
    let mut result = raw(3.0, 1);
    result.responses = Span { start: 0, len: 1 };
    result.has_responses = true;
    let mut events = vec![
        asked(1.0, 1),
        call,
        asked(2.0, 2),
        raw(2.1, 2),
        result,
        raw(3.1, 1),
    ];
    events.extend_from_slice(more);
    events.push(compaction(3.2, 1.0, 3.0));
    let parts = vec![true; events.len()];
    let event_ids: Vec<Option<String>> = (0..events.len())
        .map(|i| Some(format!("e{i:03}")))
        .collect();
    let session = Session {
        events: &events,
        ids: &[42],
        has_parts: &parts,
        event_ids: &event_ids,
        records: &[],
        user: Some(50),
    };
    let retention = Settings {
        sliding: None,
        retention: Some(1),
    };
    audit(session, |_| None, Order::Stored, retention)
}

#[test]
fn a_run_resumed_without_a_user_event_fetched_its_copy_where_it_resumed() {
    // Paused on the long-running call, invocation 1's first run ended
    // there; its resumed run fetched the session at 4, holding 2 and 3:
    // they were handed. (Its copy fetched at 0 reproduces the same bounds
    // without them, which read as appended while summarizing.)
    let a = resumed_without_a_user_event(true, &[]);
    let c = &a.compactions[0];
    assert!(c.known);
    assert_eq!(c.handed, vec![0, 1, 2, 3, 4]);
    assert!(c.unseen.is_empty() && c.alternatives.is_empty());
    assert!(a.hidden.is_empty(), "{:?}", a.hidden);
    assert!(a.undecidable.is_empty(), "{:?}", a.undecidable);
    // Without the pause, 2 and 3 are a concurrent invocation's, stored
    // while invocation 1's one run went on: its copy never held them.
    let a = resumed_without_a_user_event(false, &[]);
    assert_eq!(a.compactions[0].unseen, vec![2, 3]);
    let hidden: Vec<(usize, Cause)> = a.hidden.iter().map(|h| (h.position, h.cause)).collect();
    assert_eq!(
        hidden,
        vec![
            (2, Cause::AppendedWhileSummarizing),
            (3, Cause::AppendedWhileSummarizing)
        ]
    );
}

#[test]
fn a_resumed_run_s_fetch_point_unknown_leaves_events_undecidable() {
    // Invocation 3 asks (6) after invocation 1 resumed and before the
    // summary: invocation 1's resumed copy leaves it out, so it does not
    // settle the reading, and its first run's copy (fetched at 0, without
    // 2 and 3) reproduces the summary too. Whether 2 and 3 were handed
    // depends on where the copy was fetched: undecidable, not hidden.
    let a = resumed_without_a_user_event(true, &[asked(3.05, 3)]);
    let c = &a.compactions[0];
    assert_eq!(c.handed, vec![0, 1, 2, 3, 4]);
    assert_eq!(c.alternatives, vec![(vec![0, 1, 4], vec![])]);
    assert_eq!(c.ambiguity, Some(Ambiguity::Resumed));
    assert!(a.hidden.is_empty(), "{:?}", a.hidden);
    let undecided = |position| Undecidable {
        position,
        could_be: Finding::Hidden,
        compaction: 7,
        readings: 2,
        reason: Ambiguity::Resumed,
    };
    assert_eq!(a.undecidable, vec![undecided(2), undecided(3)]);
}

#[test]
fn readings_that_disagree_leave_an_event_undecidable() {
    // Invocations 1 (0, 1, 4, 5) and 2 (2, 3, 6) overlap: each one's copy
    // lacks the other's events stored after its own start. The summary's
    // bounds (1.0-2.1) reproduce over both copies (tail retention keeps
    // the last event of each): invocation 1's hands 0, 1, 4; invocation
    // 2's hands 0-3. The store does not say which invocation made it.
    let events = [
        asked(1.0, 1),
        raw(1.5, 1),
        asked(1.8, 2),
        raw(2.1, 2),
        raw(2.1, 1),
        raw(2.3, 1),
        raw(2.35, 2),
        compaction(2.4, 1.0, 2.1),
    ];
    let retention = Settings {
        sliding: None,
        retention: Some(1),
    };
    let a = run_as_users(&events, Order::Stored, retention);
    let c = &a.compactions[0];
    assert!(c.known);
    assert_eq!(c.handed, vec![0, 1, 2, 3]);
    assert_eq!(c.alternatives, vec![(vec![0, 1, 4], vec![])]);
    // 0 and 1 were handed under both readings; 2, 3 and 4 under one only:
    // neither hidden nor fine, but undecidable.
    assert!(a.hidden.is_empty(), "{:?}", a.hidden);
    let undecided = |position| Undecidable {
        position,
        could_be: Finding::Hidden,
        compaction: 7,
        readings: 2,
        reason: Ambiguity::Maker,
    };
    assert_eq!(
        a.undecidable,
        vec![undecided(2), undecided(3), undecided(4)]
    );
}

#[test]
fn a_call_put_back_by_call_recovery_is_duplicated() {
    use crate::core::event::Span;
    // Invocation 1's long-running call is answered at once by a
    // placeholder; the sliding window summarizes both with invocation 2.
    // The real result, stored after the summary, survives raw, so
    // google-adk's `_recover_compacted_function_calls` puts the call back
    // into the prompt: raw and in the summary's input.
    let ids = [42];
    let mut call = raw(1.0, 1);
    call.calls = Span { start: 0, len: 1 };
    call.long_running = Span { start: 0, len: 1 };
    let mut placeholder = raw(1.1, 1);
    placeholder.responses = Span { start: 0, len: 1 };
    placeholder.has_responses = true;
    let mut result = raw(3.0, 1);
    result.responses = Span { start: 0, len: 1 };
    result.has_responses = true;
    let events = [
        call,
        placeholder,
        raw(2.0, 2),
        raw(2.1, 2),
        compaction(2.2, 1.0, 2.1),
        result,
    ];
    let a = run_with(&events, &ids, &[], Order::Stored, sliding(2, 0));
    assert!(a.compactions[0].known);
    assert_eq!(a.compactions[0].handed, vec![0, 1, 2, 3]);
    assert_eq!(
        a.duplicated,
        vec![Duplicated {
            position: 0,
            compaction: 4
        }]
    );
    assert!(a.hidden.is_empty(), "{:?}", a.hidden);
    // The prompt: the summary, the call put back, the result.
    assert_eq!(a.prompt_size, 3);
}

/// `first_standing_for` restated directly: one flag per event for every
/// compaction (what each stands for under every reading and under some,
/// seeds stored before it included), then the first survivor holding each
/// event.
fn standing_by_flags(
    compactions: &[Replayed],
    index_of: &[usize],
    surviving: &[usize],
    n: usize,
) -> (Vec<Option<usize>>, Vec<Option<usize>>) {
    let mut all_in: Vec<Vec<bool>> = Vec::new();
    let mut any_in: Vec<Vec<bool>> = Vec::new();
    for r in compactions {
        let (mut all, mut any): (Option<Vec<bool>>, Vec<bool>) = (None, vec![false; n]);
        for (handed, seeds) in r.readings() {
            let mut mine = vec![false; n];
            for &h in handed {
                mine[h] = true;
                any[h] = true;
            }
            for &s in seeds {
                if let Some(theirs) = all_in.get(index_of[s]) {
                    for (m, &t) in mine.iter_mut().zip(theirs) {
                        *m |= t;
                    }
                }
                if let Some(theirs) = any_in.get(index_of[s]) {
                    for (m, &t) in any.iter_mut().zip(theirs) {
                        *m |= t;
                    }
                }
            }
            all = Some(match all {
                None => mine,
                Some(a) => a.into_iter().zip(mine).map(|(x, y)| x && y).collect(),
            });
        }
        all_in.push(all.unwrap_or_else(|| vec![false; n]));
        any_in.push(any);
    }
    let first = |input: &[Vec<bool>]| {
        let mut out = vec![None; n];
        for &s in surviving {
            if let Some(theirs) = input.get(index_of[s]) {
                for (p, &m) in theirs.iter().enumerate() {
                    if m && out[p].is_none() {
                        out[p] = Some(s);
                    }
                }
            }
        }
        out
    };
    (first(&all_in), first(&any_in))
}

proptest::proptest! {
    #[test]
    fn standing_matches_its_restatement_with_flags(
        // Per compaction: whether it is known, and up to three readings of
        // handed positions and seed choices (earlier compactions, or not).
        shape in proptest::collection::vec(
            (
                proptest::bool::ANY,
                proptest::collection::vec(
                    (
                        proptest::collection::vec(0usize..24, 0..6),
                        proptest::collection::vec(0usize..8, 0..3),
                    ),
                    1..4,
                ),
            ),
            1..8,
        ),
        surviving_picks in proptest::collection::vec(0usize..8, 0..5),
    ) {
        // Events 0..24 are raw; compaction k sits at position 24 + k.
        let n = 24 + shape.len();
        let mut index_of = vec![usize::MAX; n];
        let mut compactions = Vec::new();
        for (k, (known, readings)) in shape.iter().enumerate() {
            index_of[24 + k] = k;
            let mut readings = readings.iter().map(|(handed, seeds)| {
                // A seed is a compaction stored before this one, or a later
                // one (which the flags ignore too).
                let seeds = seeds.iter().map(|&z| 24 + z % shape.len()).collect::<Vec<_>>();
                (handed.clone(), seeds)
            });
            let (handed, seeds) = readings.next().expect("one reading at least");
            compactions.push(Replayed {
                position: 24 + k,
                trigger: None,
                known: *known,
                handed,
                seeds,
                selected_over: 24 + k,
                unseen: Vec::new(),
                alternatives: readings.collect(),
                ambiguity: None,
                record: RecordKind::Interval,
            });
        }
        let surviving: Vec<usize> = surviving_picks
            .iter()
            .map(|&k| 24 + k % shape.len())
            .collect();
        let (surely, maybe) = standing_by_flags(&compactions, &index_of, &surviving, n);
        proptest::prop_assert_eq!(
            first_standing_for(&compactions, &index_of, &surviving, n, true),
            surely
        );
        proptest::prop_assert_eq!(
            first_standing_for(&compactions, &index_of, &surviving, n, false),
            maybe
        );
    }
}

/// What an exact-mode compaction stands for, restated as the walk over
/// every event stored before it.
fn within_by_walk(events: &[EventView], x: &Extent) -> (Vec<usize>, Vec<usize>) {
    let (mut handed, mut seeds) = (Vec::new(), Vec::new());
    for (p, v) in events[..x.at].iter().enumerate() {
        match v.compaction.and_then(|c| c.bounds()) {
            Some((s, e)) if x.start <= s && e <= x.end => seeds.push(p),
            Some(_) => {}
            None if x.covers(p, v) => handed.push(p),
            None => {}
        }
    }
    (handed, seeds)
}

proptest::proptest! {
    #[test]
    fn exact_records_stand_for_what_the_walk_finds(
        shape in proptest::collection::vec(
            (
                proptest::sample::select(vec![0.0, -0.0, 1.0, 2.0, 2.5, 3.0, 4.0, f64::NAN]),
                proptest::option::of((
                    proptest::sample::select(vec![0.0, 1.0, 2.0, 3.0, f64::NAN]),
                    proptest::sample::select(vec![-0.0, 1.0, 2.0, 4.0, f64::NAN]),
                )),
                0u32..3,
            ),
            0..24,
        ),
        at in 0usize..26,
        start in proptest::sample::select(vec![-0.0, 0.0, 1.0, 2.0, f64::NAN]),
        end in proptest::sample::select(vec![0.0, 2.0, 2.5, 4.0, f64::NAN]),
        holes in proptest::collection::vec((0i64..5, 0u32..3), 0..3),
    ) {
        let events: Vec<EventView> = shape
            .iter()
            .map(|&(t, bounds, inv)| match bounds {
                Some((s, e)) => EventView::compacting(t, s, e),
                None => EventView {
                    invocation: Some(inv),
                    ..EventView::at(t)
                },
            })
            .collect();
        let holes = holes
            .iter()
            .map(|&(seconds, inv)| Hole { micros: seconds * 1_000_000, invocation: Some(inv) })
            .collect();
        let x = Extent::new(at.min(events.len()), start, end, holes);
        proptest::prop_assert_eq!(
            Stamped::new(&events).within(&events, &x),
            within_by_walk(&events, &x)
        );
    }
}
