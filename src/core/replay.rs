//! Which selection made each stored compaction.
//!
//! google-adk stores a compaction as an interval, and neither what its
//! summarizer was handed nor who made it (the compaction event's
//! invocation id is a fresh one). The replay learns it by running
//! google-adk's window selection (the parity engine, [`select`], under
//! google-adk 2.13's rules) over
//! the copy of the session each plausible maker held, loaded the way the
//! store loads it, and keeping the selections whose first and last
//! timestamps are the compaction's interval (google-adk's summarizer writes
//! exactly those). Every copy that reproduces it is a reading; the audit
//! ([`super::audit`]) decides on what all readings agree.

use super::event::{EventView, Sym};
pub use super::loading::Order;
use super::loading::{loaded, views_at};
use super::replay_tail::Index;
use super::select::{self, settled, Complete, Rules};
use super::window::SlidingWindow;

/// google-adk 2.13's selections as the replay runs them: unpriced (a
/// stored compaction was summarized, whatever `_is_range_worth_compacting`
/// would say of it now).
pub(super) const REPLAYED: Rules = Rules {
    priced: false,
    ..Rules::LATEST
};

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

/// How far before a compaction the replay looks for the prefix its
/// selection was made over.
const MAX_LOOKBACK: usize = 64;

/// How many of the invocations stored last before a compaction are tried
/// as the one that made it.
const MAX_MAKERS: usize = 4;

/// How many of a maker's latest resumed runs (without a user-authored
/// event) are tried as the run that fetched its copy.
const MAX_RESUMES: usize = 8;

/// A copy of the session a selection may have been made over: the events
/// stored before `fetched` (what the maker's `get_session` returned, loaded
/// the store's way), then `own` (positions from `fetched` on, in storage
/// order: what the maker appended to its copy itself); `unseen` are the
/// other events stored from `fetched` to the compaction (appended by others
/// meanwhile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Copy {
    /// The invocation whose copy it is (`None`: a prefix of the store, no
    /// maker's).
    pub(super) maker: Option<Sym>,
    pub(super) fetched: usize,
    pub(super) own: Vec<usize>,
    pub(super) unseen: Vec<usize>,
}

/// The copy from the events stored at `b` on: those before `fetched`
/// loaded the store's way, then `own` (positions, and their views).
fn tail_of(s: &Session<'_>, copy: &Copy, order: Order, b: usize) -> (Vec<usize>, Vec<EventView>) {
    let stored: Vec<usize> = (b..copy.fetched).collect();
    let mut at = loaded(s.events, &stored, order, s.event_ids);
    at.extend_from_slice(&copy.own);
    let views = views_at(s.events, &at);
    (at, views)
}

/// A tail of the copy (see [`super::replay_tail`]) over which a selection
/// answers as over the whole copy, by `holds` (the trigger's own check at
/// a cut): the first tail moved back to the events it depends on, or
/// lengthened fourfold where a trigger's check fails, until the checks pass
/// or it is the whole copy.
fn tail_for(
    s: &Session<'_>,
    ix: &Index,
    copy: &Copy,
    order: Order,
    holds: impl Fn(usize, &[EventView]) -> bool,
) -> (Vec<usize>, Vec<EventView>) {
    let mut b = ix
        .first_tail
        .map_or(0, |first| copy.fetched.saturating_sub(first.max(1)));
    loop {
        let (at, views) = tail_of(s, copy, order, b);
        if b == 0 {
            return (at, views);
        }
        match ix.splits(b, copy.fetched, order, s.events, s.ids, &at) {
            Err(earlier) => b = earlier,
            Ok(()) if holds(b, &views) => return (at, views),
            Ok(()) => b = copy.fetched.saturating_sub((copy.fetched - b) * 4),
        }
    }
}

/// What google-adk would hand a summarizer over the copy, by each
/// configured entry point whose selection's interval is `(start, end)` in
/// `scope`: `(trigger, handed, seed)`, storage positions.
fn replay_at(
    s: &Session<'_>,
    ix: &Index,
    copy: &Copy,
    order: Order,
    settings: Settings,
    bounds: (f64, f64),
    scope: Option<Sym>,
) -> Option<(Trigger, Vec<usize>, Option<usize>)> {
    let ids = s.ids;
    if let (Some(cfg), None) = (settings.sliding, scope) {
        let (at, views) = tail_for(s, ix, copy, order, |b, v| ix.sliding_splits(b, v, cfg));
        let mut reader = Complete { views: &views, ids };
        let handed = settled(select::sliding(&mut reader, cfg, REPLAYED)).to_compact;
        if let (Some(&first), Some(&last)) = (handed.first(), handed.last()) {
            let (first, last) = (views[first as usize], views[last as usize]);
            if (first.timestamp, last.timestamp) == bounds {
                let handed = handed.iter().map(|&i| at[i as usize]).collect();
                return Some((Trigger::SlidingWindow, handed, None));
            }
        }
    }
    if let Some(retention) = settings.retention {
        let (at, views) = tail_for(s, ix, copy, order, |b, v| ix.token_splits(b, v, scope));
        let mut reader = Complete { views: &views, ids };
        let plan = settled(select::token(&mut reader, scope, None, retention, REPLAYED));
        let s = &plan.to_compact;
        if let (Some(&first), Some(&last)) = (s.first(), s.last()) {
            let (first, last) = (first as usize, last as usize);
            // The seed is set only where its start and summary are.
            let seed = plan.seed_from.map(|k| k as usize);
            let start = match seed.and_then(|k| views[k].compaction) {
                Some(c) => c.start,
                None => Some(views[first].timestamp),
            };
            if (start, Some(views[last].timestamp)) == (Some(bounds.0), Some(bounds.1)) {
                let handed = s.iter().map(|&i| at[i as usize]).collect();
                return Some((Trigger::TokenThreshold, handed, seed.map(|k| at[k])));
            }
        }
    }
    None
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
    /// The symbol of the author `"user"` (`None`: no event has it).
    pub user: Option<Sym>,
}

/// The copies of the session the invocations stored last before position
/// `k` may have held when one of them made the compaction there (the
/// compaction event's own invocation id is a fresh one: it does not tell).
///
/// A run of an invocation (one `run_async` call, a resumed one included)
/// fetches the session, appends the user's message first where it has one,
/// and from then on sees only what it appends itself: its copy holds the
/// events stored before its run's first event and its own events since,
/// and either no compaction stored since (another run wrote it) or every
/// one (it wrote them itself). A run starting with a user-authored event
/// is a new run; so may be one that resumes where the invocation's events
/// stop for another invocation's (`run_async(invocation_id=...)` appends no
/// user-authored event), or that may be the same run interleaved with a
/// concurrent one: the store does not say. So each maker's copies are
/// fetched at its latest user-authored event before `k` (its first event
/// where it has none) and at each later point where its events resume
/// after another's, the latest first. A run that appended nothing but the
/// user's message made no compaction (it called no model), so such an
/// invocation is no maker.
fn copies(s: &Session<'_>, ix: &Index, k: usize) -> Vec<Copy> {
    let events = s.events;
    let mut makers: Vec<Sym> = Vec::new();
    for q in (0..k).rev().take(MAX_LOOKBACK) {
        if let (Some(inv), None) = (events[q].invocation, events[q].compaction) {
            if !makers.contains(&inv) && makers.len() < MAX_MAKERS {
                makers.push(inv);
            }
        }
    }
    let mut out: Vec<Copy> = Vec::new();
    for maker in makers {
        let mine = |q: usize| events[q].invocation == Some(maker) && events[q].compaction.is_none();
        let by_user = |q: usize| s.user.is_some() && events[q].author == s.user;
        // Its latest user-authored event before `k`, else its first.
        let (raw, user) = (ix.raw_of(maker), ix.user_of(maker));
        let before = user.partition_point(|&q| (q as usize) < k);
        let Some(started) = before
            .checked_sub(1)
            .map(|j| user[j] as usize)
            .or_else(|| raw.first().map(|&q| q as usize).filter(|&q| q < k))
        else {
            continue;
        };
        // An event it appended itself from then on, the user's aside.
        let from = raw.partition_point(|&q| (q as usize) < started);
        if !raw[from..].iter().any(|&q| !by_user(q as usize)) {
            continue;
        }
        let upto = raw.partition_point(|&q| (q as usize) < k);
        let resumed = resumes(ix, events, &raw[from..upto]);
        for fetched in resumed.into_iter().rev().chain([started]) {
            for keep_compactions in [false, true] {
                let (mut own, mut unseen) = (Vec::new(), Vec::new());
                for q in fetched..k {
                    if mine(q) || keep_compactions && events[q].compaction.is_some() {
                        own.push(q);
                    } else {
                        unseen.push(q);
                    }
                }
                let copy = Copy {
                    maker: Some(maker),
                    fetched,
                    own,
                    unseen,
                };
                if !out.contains(&copy) {
                    out.push(copy);
                }
            }
        }
    }
    out
}

/// Where a maker's run may have resumed, of its raw events `mine` (storage
/// positions, ascending, from its latest run's start): each event that
/// follows another invocation's (a raw event stored between two of its
/// own) where its events since the run's start, or since the last such
/// point, paused it (a long-running call, a tool confirmation or credential
/// request: google-adk ends the run there, and `run_async(invocation_id=...)`
/// resumes it without a user-authored event). The latest
/// [`MAX_RESUMES`], ascending. Events of another invocation between two of
/// its own without a pause are a concurrent invocation's: the same run.
fn resumes(ix: &Index, events: &[EventView], mine: &[u32]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut paused = false;
    for (j, &q) in mine.iter().enumerate() {
        let q = q as usize;
        if j > 0 && paused && ix.raws_between(mine[j - 1] as usize + 1, q) > 0 {
            out.push(q);
            paused = false;
        }
        paused |= events[q].long_running.len > 0 || events[q].pending.len > 0;
    }
    let skip = out.len().saturating_sub(MAX_RESUMES);
    out.split_off(skip)
}

/// One way a compaction reproduces: `(trigger, handed, seeds, copy)`.
pub(super) type Reading = (Trigger, Vec<usize>, Vec<usize>, Copy);

/// The readings of the compaction at `k` over `(start, end)` in `scope`.
///
/// The makers' copies are tried first; the first that reproduces it is
/// the reading when it leaves nothing out (the store as the maker held it:
/// no other copy is plausible then). When it does leave events out, every
/// other maker's copy that reproduces it is a reading too. Only when none
/// does, the store as it stood right before the compaction is tried, then
/// every shorter prefix (a selection made there, the rest appended while
/// the summarizer ran), all that reproduce it being readings.
pub(super) fn readings_of(
    s: &Session<'_>,
    ix: &Index,
    k: usize,
    order: Order,
    settings: Settings,
    bounds: (f64, f64),
    scope: Option<Sym>,
) -> Vec<Reading> {
    let mut out: Vec<Reading> = Vec::new();
    let push = |out: &mut Vec<Reading>, copy: Copy| {
        if let Some((trigger, handed, seed)) =
            replay_at(s, ix, &copy, order, settings, bounds, scope)
        {
            let seeds: Vec<usize> = seed.into_iter().collect();
            if !out.iter().any(|(_, h, z, _)| *h == handed && *z == seeds) {
                out.push((trigger, handed, seeds, copy));
            }
        }
    };
    for copy in copies(s, ix, k) {
        push(&mut out, copy);
        if out.len() == 1 && out[0].3.unseen.is_empty() {
            return out;
        }
    }
    if !out.is_empty() {
        return out;
    }
    push(
        &mut out,
        Copy {
            maker: None,
            fetched: k,
            own: Vec::new(),
            unseen: Vec::new(),
        },
    );
    if !out.is_empty() {
        return out;
    }
    for p in (k.saturating_sub(MAX_LOOKBACK)..k).rev() {
        push(
            &mut out,
            Copy {
                maker: None,
                fetched: p,
                own: Vec::new(),
                unseen: (p..k).collect(),
            },
        );
    }
    out
}
