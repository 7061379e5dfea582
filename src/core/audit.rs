//! The audit of a stored session: which events interval coverage hid from
//! every prompt without any summary standing for them, which it shows twice.
//!
//! google-adk records a compaction as an interval and hides every raw event
//! stamped inside it; what the summary was actually handed is not stored.
//! The audit learns it by replaying google-adk's window selection (the
//! parity engine: [`window::sliding_window`], [`window::token_threshold_selection`])
//! over the events stored before each compaction, loaded the way the store
//! loads them, and keeping the selection whose first and last timestamps
//! are the compaction's interval (google-adk's summarizer writes exactly
//! those). Where the store's last events before the compaction do not
//! reproduce it, shorter prefixes are tried: events stored after the
//! selection and before the compaction were appended while the summarizer
//! ran. A compaction written in exact mode says what it stands for itself
//! (its interval minus its holes, events stored before it).
//!
//! Then the prompt the session yields now (google-adk's
//! `_process_compaction_events` over the live events, or exact mode's
//! prompt where exact-mode records are stored) is compared with what the
//! surviving summaries stand for:
//! - **hidden**: a live event with parts, absent from the prompt and from
//!   every surviving summary's input;
//! - **duplicated**: an event raw in the prompt and inside a surviving
//!   summary's input.

use super::coverage::{self, Coverage};
use super::event::{EventView, Sym};
use super::exact::{Extent, Hole, Record};
use super::filter::{self, Item};
use super::rewind;
use super::window::{self, SlidingWindow};

/// How a store loads a session's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// As stored (the in-memory service, a `Session` export).
    Stored,
    /// By timestamp, ties in storage order (`SqliteSessionService`).
    Timestamp,
    /// By timestamp, ties by event id (`DatabaseSessionService`).
    TimestampId,
}

/// The compaction settings the replay assumes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settings {
    pub sliding: Option<SlidingWindow>,
    /// `event_retention_size` of tail retention.
    pub retention: Option<usize>,
}

/// Which of google-adk's entry points wrote a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    SlidingWindow,
    TokenThreshold,
}

/// What a compaction's record is.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordKind {
    /// google-adk's bare interval.
    Interval,
    /// An exact-mode record, read.
    Exact,
    /// An exact-mode record that does not validate (read as an interval).
    Malformed(String),
}

/// One stored compaction, replayed.
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    /// Its position (storage order).
    pub position: usize,
    /// The entry point whose selection reproduces it (`None`: none does,
    /// or it is an exact-mode compaction, which says what it stands for).
    pub trigger: Option<Trigger>,
    /// Whether what it was handed is known.
    pub known: bool,
    /// The raw events it was handed (positions, storage order).
    pub handed: Vec<usize>,
    /// The compaction events whose summaries it was handed (the rolling
    /// seed).
    pub seeds: Vec<usize>,
    /// Events stored before the selection was made: a prefix shorter than
    /// the events before the compaction when some were appended meanwhile.
    pub selected_over: usize,
    /// Events stored before the compaction that the selection did not see
    /// (another invocation's, appended while it ran), storage positions.
    pub unseen: Vec<usize>,
    pub record: RecordKind,
}

/// Why an event was hidden.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Stamped like an event the summary was handed, or on its interval's
    /// bound, and not handed itself.
    TiedTimestamp,
    /// Stored on the other side of a handed event than its timestamp says.
    OutOfOrderTimestamp,
    /// Of another isolation scope than the compaction.
    OtherIsolationScope,
    /// Stored after the summary's selection and before the summary.
    AppendedWhileSummarizing,
    /// Hidden by a compaction whose exact-mode record does not validate.
    MalformedRecord,
    /// None of the above (or a compaction the replay cannot reproduce).
    Unknown,
}

impl Cause {
    pub fn name(self) -> &'static str {
        match self {
            Cause::TiedTimestamp => "tied_timestamp",
            Cause::OutOfOrderTimestamp => "out_of_order_timestamp",
            Cause::OtherIsolationScope => "other_isolation_scope",
            Cause::AppendedWhileSummarizing => "appended_while_summarizing",
            Cause::MalformedRecord => "malformed_record",
            Cause::Unknown => "unknown",
        }
    }
}

/// A hidden event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hidden {
    pub position: usize,
    pub cause: Cause,
    /// The compaction whose interval hides it.
    pub compaction: Option<usize>,
}

/// An event shown raw and inside a summary's input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duplicated {
    pub position: usize,
    pub compaction: usize,
}

/// Compaction configured and due, yet google-adk's selection hands
/// nothing: it will not fire until what blocks it (a call whose response
/// has not come) is gone, and the prompt grows meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stalled {
    /// The entry point that is due and cannot select.
    pub trigger: Trigger,
    /// Raw events after the last summary that it would compact.
    pub backlog: usize,
    /// Their invocations.
    pub backlog_invocations: usize,
    /// Items of the prompt right after the last compaction (the trend's
    /// start; `None` without a compaction).
    pub prompt_then: Option<usize>,
}

/// The audit of one session.
#[derive(Debug, Clone, PartialEq)]
pub struct Audit {
    pub compactions: Vec<Replayed>,
    pub hidden: Vec<Hidden>,
    pub duplicated: Vec<Duplicated>,
    pub stalled: Option<Stalled>,
    /// Items of the prompt the session yields now.
    pub prompt_size: usize,
    /// The prompt could not be built (google-adk's own sort would fail).
    pub prompt_error: Option<String>,
}

/// How far before a compaction the replay looks for the prefix its
/// selection was made over.
const MAX_LOOKBACK: usize = 64;

/// How many of the invocations stored last before a compaction are tried
/// as the one that made it.
const MAX_MAKERS: usize = 4;

/// The session as a store loads the stored events at `avail` (ascending
/// storage positions): positions in loading order. `event_ids` break
/// timestamp ties for [`Order::TimestampId`].
fn loaded(
    events: &[EventView],
    avail: &[usize],
    order: Order,
    event_ids: &[Option<String>],
) -> Vec<usize> {
    let mut at = avail.to_vec();
    match order {
        Order::Stored => {}
        Order::Timestamp => {
            at.sort_by(|&a, &b| events[a].timestamp.total_cmp(&events[b].timestamp));
        }
        Order::TimestampId => at.sort_by(|&a, &b| {
            events[a]
                .timestamp
                .total_cmp(&events[b].timestamp)
                .then_with(|| event_ids.get(a).cmp(&event_ids.get(b)))
        }),
    }
    at
}

/// The views at `at`, in that order.
fn views_at(events: &[EventView], at: &[usize]) -> Vec<EventView> {
    at.iter().map(|&i| events[i]).collect()
}

/// What google-adk would hand a summarizer over the stored events at
/// `avail`, by each configured entry point whose selection's interval is
/// `(start, end)` in `scope`: `(trigger, handed, seed)`, storage positions.
fn replay_at(
    s: &Session<'_>,
    avail: &[usize],
    order: Order,
    settings: Settings,
    bounds: (f64, f64),
    scope: Option<Sym>,
) -> Option<(Trigger, Vec<usize>, Option<usize>)> {
    let (events, ids) = (s.events, s.ids);
    let at = loaded(events, avail, order, s.event_ids);
    let views = views_at(events, &at);
    let live = rewind::apply_rewinds(&views);
    let back = |v: &[usize]| -> Vec<usize> { v.iter().map(|&i| at[i]).collect() };
    if let (Some(cfg), None) = (settings.sliding, scope) {
        let unscoped: Vec<usize> = live
            .iter()
            .copied()
            .filter(|&i| views[i].scope.is_none())
            .collect();
        let handed = window::sliding_window(&views, ids, &unscoped, cfg);
        if let (Some(&first), Some(&last)) = (handed.first(), handed.last()) {
            if (views[first].timestamp, views[last].timestamp) == bounds {
                return Some((Trigger::SlidingWindow, back(&handed), None));
            }
        }
    }
    if let Some(retention) = settings.retention {
        let scoped: Vec<usize> = live
            .iter()
            .copied()
            .filter(|&i| views[i].scope == scope)
            .collect();
        let s = window::token_threshold_selection(&views, ids, &scoped, retention);
        if let (Some(&first), Some(&last)) = (s.to_compact.first(), s.to_compact.last()) {
            let start = match s.seed_from.and_then(|k| views[k].compaction) {
                Some(c) if c.has_content && c.start.is_some() => c.start,
                _ => Some(views[first].timestamp),
            };
            let seed = s.seed_from.filter(|&k| {
                views[k]
                    .compaction
                    .is_some_and(|c| c.has_content && c.start.is_some())
            });
            if (start, Some(views[last].timestamp)) == (Some(bounds.0), Some(bounds.1)) {
                return Some((
                    Trigger::TokenThreshold,
                    back(&s.to_compact),
                    seed.map(|k| at[k]),
                ));
            }
        }
    }
    None
}

/// The exact-mode record of each compaction event (`records`: position
/// and stored JSON), validated against its bounds.
fn read_records(
    events: &[EventView],
    records: &[(usize, serde_json::Value)],
) -> Vec<Option<Result<Record, String>>> {
    let mut out = vec![None; events.len()];
    for (pos, json) in records {
        let Some(bounds) = events
            .get(*pos)
            .and_then(|e| e.compaction)
            .and_then(|c| c.bounds())
        else {
            continue;
        };
        out[*pos] = Some(Record::from_value(json.clone(), bounds).map_err(|e| e.to_string()));
    }
    out
}

/// The extent of an exact-mode record at position `at`, its holes'
/// invocations interned by `intern` (`""`: none).
fn extent(at: usize, record: &Record, intern: &mut impl FnMut(&str) -> Option<Sym>) -> Extent {
    let holes = record
        .holes
        .iter()
        .map(|key| Hole {
            micros: key.micros,
            invocation: match key.invocation.as_str() {
                "" => None,
                text => intern(text),
            },
        })
        .collect();
    Extent::new(at, record.start, record.end, holes)
}

/// A stored session as the audit reads it.
#[derive(Clone, Copy)]
pub struct Session<'a> {
    /// The events in storage order.
    pub events: &'a [EventView],
    /// Their id arena.
    pub ids: &'a [Sym],
    /// Per event: its `content` holds parts (what a prompt would show).
    pub has_parts: &'a [bool],
    /// Per event: its `id`.
    pub event_ids: &'a [Option<String>],
    /// The exact-mode records stored: `(position, JSON)`.
    pub records: &'a [(usize, serde_json::Value)],
}

/// The stored events an invocation's own copy of the session may have held
/// before position `k`: the events stored before its first one and its
/// own, and either no compaction stored since (another invocation wrote
/// it) or every one (it wrote them itself: a compaction event's invocation
/// id does not tell). Only copies that leave something out are given, each
/// with the positions it leaves out.
fn copies_of(events: &[EventView], k: usize, maker: Sym) -> Vec<(Vec<usize>, Vec<usize>)> {
    let Some(first) = events[..k].iter().position(|e| e.invocation == Some(maker)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for keep_compactions in [false, true] {
        let (mut held, mut left) = ((0..first).collect::<Vec<_>>(), Vec::new());
        for (q, e) in events.iter().enumerate().take(k).skip(first) {
            let kept = e.invocation == Some(maker) && e.compaction.is_none()
                || keep_compactions && e.compaction.is_some();
            if kept {
                held.push(q);
            } else {
                left.push(q);
            }
        }
        if !left.is_empty()
            && !out
                .iter()
                .any(|(h, _): &(Vec<usize>, Vec<usize>)| *h == held)
        {
            out.push((held, left));
        }
    }
    out
}

/// Audits one session: `intern` gives the symbol of an invocation id (for
/// a record's holes; `None` where no event has it, so no hole can name
/// one).
pub fn audit(
    session: Session<'_>,
    mut intern: impl FnMut(&str) -> Option<Sym>,
    order: Order,
    settings: Settings,
) -> Audit {
    let Session {
        events,
        ids,
        has_parts,
        records,
        ..
    } = session;
    let n = events.len();
    let parsed = read_records(events, records);
    let exact_session = parsed.iter().any(|r| matches!(r, Some(Ok(_))));
    // Each compaction, in storage order: what it stands for.
    let mut compactions: Vec<Replayed> = Vec::new();
    let mut index_of = vec![usize::MAX; n];
    for (k, e) in events.iter().enumerate() {
        let Some((start, end)) = e.compaction.and_then(|c| c.bounds()) else {
            continue;
        };
        let record = match &parsed[k] {
            None => RecordKind::Interval,
            Some(Ok(_)) => RecordKind::Exact,
            Some(Err(why)) => RecordKind::Malformed(why.clone()),
        };
        let mut r = Replayed {
            position: k,
            trigger: None,
            known: false,
            handed: Vec::new(),
            seeds: Vec::new(),
            selected_over: k,
            unseen: Vec::new(),
            record,
        };
        if let Some(Ok(record)) = &parsed[k] {
            // It says what it stands for: its interval minus its holes,
            // events stored before it.
            let x = extent(k, record, &mut intern);
            for (p, v) in events[..k].iter().enumerate() {
                match v.compaction.and_then(|c| c.bounds()) {
                    // A summary within its interval: rolled into it.
                    Some((s, e)) if x.start <= s && e <= x.end => r.seeds.push(p),
                    Some(_) => {}
                    None if x.covers(p, v) => r.handed.push(p),
                    None => {}
                }
            }
            r.known = true;
        } else {
            // What the selection saw: the copy the invocation that made it
            // held, without what others appended meanwhile (the
            // invocations stored last tried first; in a session with no
            // concurrent invocation there is no such copy); else the
            // session as stored before it; else a shorter prefix.
            let mut tries: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
            let mut makers: Vec<Sym> = Vec::new();
            for q in (0..k).rev().take(MAX_LOOKBACK) {
                if let (Some(inv), None) = (events[q].invocation, events[q].compaction) {
                    if !makers.contains(&inv) && makers.len() < MAX_MAKERS {
                        makers.push(inv);
                        tries.extend(copies_of(events, k, inv));
                    }
                }
            }
            tries.push(((0..k).collect(), Vec::new()));
            let lowest = k.saturating_sub(MAX_LOOKBACK);
            tries.extend(
                (lowest..k)
                    .rev()
                    .map(|p| ((0..p).collect(), (p..k).collect())),
            );
            for (avail, unseen) in tries {
                if let Some((trigger, handed, seed)) =
                    replay_at(&session, &avail, order, settings, (start, end), e.scope)
                {
                    r.trigger = Some(trigger);
                    r.handed = handed;
                    r.seeds = seed.into_iter().collect();
                    r.selected_over = avail.last().map_or(0, |&l| l + 1);
                    r.unseen = unseen;
                    r.known = true;
                    break;
                }
            }
        }
        index_of[k] = compactions.len();
        compactions.push(r);
    }
    // What each compaction stands for: its handed events and, through its
    // seeds, theirs (storage order: seeds come first).
    let mut input: Vec<Vec<bool>> = Vec::with_capacity(compactions.len());
    for r in &compactions {
        let mut mine = vec![false; n];
        for &h in &r.handed {
            mine[h] = true;
        }
        for &s in &r.seeds {
            if let Some(theirs) = input.get(index_of[s]) {
                for (m, &t) in mine.iter_mut().zip(theirs) {
                    *m |= t;
                }
            }
        }
        input.push(mine);
    }
    // The prompt the session yields now.
    let all: Vec<usize> = (0..n).collect();
    let at = loaded(events, &all, order, session.event_ids);
    let views = views_at(events, &at);
    let live = rewind::apply_rewinds(&views);
    let live_views = views_at(&views, &live);
    let items: Result<Vec<Item>, String> = if exact_session {
        let extents: Vec<Extent> = live
            .iter()
            .enumerate()
            .filter_map(|(q, &i)| {
                let k = at[i];
                let (start, end) = events[k].compaction.and_then(|c| c.bounds())?;
                Some(match &parsed[k] {
                    Some(Ok(record)) => extent(q, record, &mut intern),
                    _ => Extent::new(q, start, end, Vec::new()),
                })
            })
            .collect();
        let cov = Coverage::new(&live_views, extents);
        Ok(coverage::prompt(&live_views, &cov))
    } else {
        filter::process_compaction_events(&live_views).map_err(|e| e.to_string())
    };
    let to_stored = |q: usize| at[live[q]];
    let (items, prompt_error) = match items {
        Ok(items) => (items, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    let mut raw_in_prompt = vec![false; n];
    let mut surviving: Vec<usize> = Vec::new();
    for item in &items {
        match *item {
            Item::Raw(q) => raw_in_prompt[to_stored(q)] = true,
            Item::Summary(q) => surviving.push(to_stored(q)),
        }
    }
    let mut summarized: Vec<Option<usize>> = vec![None; n];
    for &s in &surviving {
        if let Some(mine) = input.get(index_of[s]) {
            for (p, &m) in mine.iter().enumerate() {
                if m && summarized[p].is_none() {
                    summarized[p] = Some(s);
                }
            }
        }
    }
    let mut hidden = Vec::new();
    let mut duplicated = Vec::new();
    if prompt_error.is_none() {
        for &i in &live {
            let p = at[i];
            if events[p].compaction.is_some() || !has_parts[p] {
                continue;
            }
            match (raw_in_prompt[p], summarized[p]) {
                (true, Some(s)) => duplicated.push(Duplicated {
                    position: p,
                    compaction: s,
                }),
                (false, None) => {
                    let (cause, by) = cause_of(events, &compactions, &surviving, &index_of, p);
                    hidden.push(Hidden {
                        position: p,
                        cause,
                        compaction: by,
                    });
                }
                _ => {}
            }
        }
    }
    let stalled = stall(ids, &views, &live, settings).map(|(trigger, backlog)| {
        let invocations: std::collections::BTreeSet<Sym> = backlog
            .iter()
            .filter_map(|&q| views[q].invocation)
            .collect();
        let prompt_then = compactions.last().and_then(|c| {
            let upto: Vec<usize> = (0..=c.position).collect();
            let at = loaded(events, &upto, order, session.event_ids);
            let v = views_at(events, &at);
            let live = rewind::apply_rewinds(&v);
            filter::process_compaction_events(&views_at(&v, &live))
                .ok()
                .map(|items| items.len())
        });
        Stalled {
            trigger,
            backlog: backlog.len(),
            backlog_invocations: invocations.len(),
            prompt_then,
        }
    });
    Audit {
        compactions,
        hidden,
        duplicated,
        stalled,
        prompt_size: items.len(),
        prompt_error,
    }
}

/// Whether a configured entry point is due on the whole session (`views`,
/// loaded, `live` after rewinds) and selects nothing: the trigger and the
/// events it would consider (positions in `views`).
fn stall(
    ids: &[Sym],
    views: &[EventView],
    live: &[usize],
    settings: Settings,
) -> Option<(Trigger, Vec<usize>)> {
    let unscoped: Vec<usize> = live
        .iter()
        .copied()
        .filter(|&i| views[i].scope.is_none())
        .collect();
    if let Some(cfg) = settings.sliding {
        let due = window::sliding_window_candidates(views, &unscoped, cfg);
        if !due.is_empty() && window::sliding_window(views, ids, &unscoped, cfg).is_empty() {
            let raw = due
                .into_iter()
                .filter(|&q| views[q].compaction.is_none())
                .collect();
            return Some((Trigger::SlidingWindow, raw));
        }
    }
    if let Some(retention) = settings.retention {
        let c = window::token_candidates(views, &unscoped);
        if c.candidates.len() > retention
            && window::token_threshold_selection(views, ids, &unscoped, retention)
                .to_compact
                .is_empty()
        {
            return Some((Trigger::TokenThreshold, c.candidates));
        }
    }
    None
}

/// Why the event at `p` is hidden, and by which surviving compaction.
fn cause_of(
    events: &[EventView],
    compactions: &[Replayed],
    surviving: &[usize],
    index_of: &[usize],
    p: usize,
) -> (Cause, Option<usize>) {
    let t = events[p].timestamp;
    let holds = |c: usize| {
        events[c]
            .compaction
            .and_then(|x| x.bounds())
            .is_some_and(|(s, e)| s <= t && t <= e)
    };
    // The surviving compaction whose interval hides it (a google-adk
    // reader hides it whenever stored).
    let Some(by) = surviving.iter().copied().find(|&c| holds(c)) else {
        return (Cause::Unknown, None);
    };
    // Where it was left out: the first compaction over it stored after it
    // (a rolling summary rolls that one on), else the first over it.
    let first = compactions
        .iter()
        .filter(|r| holds(r.position))
        .find(|r| r.position > p)
        .or_else(|| compactions.iter().find(|r| holds(r.position)));
    let r = first.unwrap_or(&compactions[index_of[by]]);
    let c = r.position;
    if matches!(r.record, RecordKind::Malformed(_)) {
        return (Cause::MalformedRecord, Some(by));
    }
    if !r.known {
        return (Cause::Unknown, Some(by));
    }
    if events[p].scope != events[c].scope {
        return (Cause::OtherIsolationScope, Some(by));
    }
    if r.unseen.contains(&p) {
        return (Cause::AppendedWhileSummarizing, Some(by));
    }
    let (start, end) = events[c]
        .compaction
        .and_then(|x| x.bounds())
        .unwrap_or((f64::NAN, f64::NAN));
    if t == start || t == end || r.handed.iter().any(|&h| events[h].timestamp == t) {
        return (Cause::TiedTimestamp, Some(by));
    }
    let disordered = r.handed.iter().any(|&h| {
        let th = events[h].timestamp;
        (h > p && th < t) || (h < p && th > t)
    });
    if disordered {
        return (Cause::OutOfOrderTimestamp, Some(by));
    }
    (Cause::Unknown, Some(by))
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
