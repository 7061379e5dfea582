//! The part of a session a compaction's replay must read.
//!
//! Replaying a compaction runs google-adk's selection over a copy of the
//! session as its maker loaded it: every event stored before the maker's
//! fetch, in the store's loading order, then the maker's own. Run over
//! that whole copy for each of a long session's compactions, the audit is
//! quadratic in the session. A selection depends on the events before a
//! cut only through what this module checks, so the replay runs it over a
//! tail of the copy and lengthens the tail (geometrically, up to the whole
//! copy) until the checks show the head cannot change the answer:
//!
//! - the tail is a suffix of the loaded copy (its stored events all load
//!   after the head's);
//! - no invocation has events on both sides, and no rewind in the tail
//!   reaches an invocation of the head (the live events are the head's
//!   and the tail's, each computed alone);
//! - no call the tail makes is answered, protected as long-running or left
//!   pending in the head (the pairing trim's dead-call pass reads the whole
//!   session for those);
//! - the sliding window counts new invocations from a compaction in the
//!   tail, none of the head's is new, and the window does not start at the
//!   tail's first invocation (the overlap could reach into the head then);
//! - the token threshold's latest surviving compaction is in the tail, no
//!   compaction of the head contains it, and no raw event of the head is
//!   stamped after its end (or the head holds no compaction, nor a raw event
//!   stamped after 0.0).
//!
//! Each check reads per-position summaries of the head built once per
//! session ([`Index`]), so a replay costs its tail, not the session.

use super::event::{per_symbol, EventView, Sym};
use super::hash::FastMap;
use super::loading::Order;
use super::select;
use super::window::{self, SlidingWindow};

/// The tail a replay starts with (stored events before the fetch).
pub(super) const FIRST_TAIL: usize = 256;

/// What the checks read of the events stored before each position, and
/// where each invocation's events are: built once per session.
pub(super) struct Index {
    /// Per position `b` (`0..=n`): the largest timestamp stored before `b`
    /// as the loading sort compares them (`None`: no event).
    max_stamp: Vec<Option<f64>>,
    /// ... the largest timestamp of a raw (non-compaction) event (NaN
    /// ignored; `-inf`: none).
    max_raw: Vec<f64>,
    /// ... how many raw events.
    raws: Vec<u32>,
    /// ... whether a compaction with bounds is stored before `b`, and the
    /// largest non-NaN end of those (`-inf`: none).
    bounded: Vec<bool>,
    max_end: Vec<f64>,
    /// Per invocation symbol: the first position holding it.
    first_of: Vec<u32>,
    /// Per call id: the first position whose event answers it, protects it
    /// as long-running or leaves it pending.
    first_mention: FastMap<Sym, u32>,
    /// Per invocation symbol: the positions of its raw events, all of them
    /// and those authored by the user.
    raw_of: Vec<Vec<u32>>,
    user_of: Vec<Vec<u32>>,
    /// The tail a replay starts with (`None`: replays run over the whole
    /// copies, the restatement the tails are tested against).
    pub(super) first_tail: Option<usize>,
}

impl Index {
    /// The index of `events` (storage order), whose id spans index `ids`;
    /// `user` is the user author's symbol; replays start with tails of
    /// `first_tail` events (`None`: over the whole copies).
    pub(super) fn new(
        events: &[EventView],
        ids: &[Sym],
        user: Option<Sym>,
        first_tail: Option<usize>,
    ) -> Index {
        let n = events.len();
        let mut max_stamp = Vec::with_capacity(n + 1);
        let mut max_raw = Vec::with_capacity(n + 1);
        let mut raws = Vec::with_capacity(n + 1);
        let mut bounded = Vec::with_capacity(n + 1);
        let mut max_end = Vec::with_capacity(n + 1);
        let (mut stamp, mut raw, mut count, mut any, mut end) = (
            None::<f64>,
            f64::NEG_INFINITY,
            0u32,
            false,
            f64::NEG_INFINITY,
        );
        let invocations = events
            .iter()
            .flat_map(|e| e.invocation.into_iter().chain(e.rewind_before));
        let mut first_of = per_symbol(invocations.clone(), u32::MAX);
        let mut raw_of: Vec<Vec<u32>> = per_symbol(invocations, Vec::new());
        let mut user_of = raw_of.clone();
        let mut first_mention: FastMap<Sym, u32> = FastMap::default();
        for (p, e) in events.iter().enumerate() {
            max_stamp.push(stamp);
            max_raw.push(raw);
            raws.push(count);
            bounded.push(any);
            max_end.push(end);
            let t = e.timestamp;
            if stamp.is_none_or(|m| t.total_cmp(&m).is_gt()) {
                stamp = Some(t);
            }
            match e.compaction {
                None => {
                    count += 1;
                    if t > raw {
                        raw = t;
                    }
                }
                Some(c) => {
                    if let Some((_, e)) = c.bounds() {
                        any = true;
                        if e > end {
                            end = e;
                        }
                    }
                }
            }
            if let Some(inv) = e.invocation {
                let first = &mut first_of[inv as usize];
                *first = (*first).min(p as u32);
                if e.compaction.is_none() {
                    raw_of[inv as usize].push(p as u32);
                    if user.is_some() && e.author == user {
                        user_of[inv as usize].push(p as u32);
                    }
                }
            }
            let mentioned = e.responses.of(ids).iter();
            let mentioned = mentioned
                .chain(e.long_running.of(ids))
                .chain(e.pending.of(ids));
            for &id in mentioned {
                first_mention.entry(id).or_insert(p as u32);
            }
        }
        max_stamp.push(stamp);
        max_raw.push(raw);
        raws.push(count);
        bounded.push(any);
        max_end.push(end);
        Index {
            max_stamp,
            max_raw,
            raws,
            bounded,
            max_end,
            first_of,
            first_mention,
            raw_of,
            user_of,
            first_tail,
        }
    }

    /// The raw events of invocation `inv` (positions, ascending).
    pub(super) fn raw_of(&self, inv: Sym) -> &[u32] {
        self.raw_of.get(inv as usize).map_or(&[], |v| v.as_slice())
    }

    /// Those of them the user authored.
    pub(super) fn user_of(&self, inv: Sym) -> &[u32] {
        self.user_of.get(inv as usize).map_or(&[], |v| v.as_slice())
    }

    /// How many raw events are stored from `a` to `b` (exclusive).
    pub(super) fn raws_between(&self, a: usize, b: usize) -> usize {
        (self.raws[b] - self.raws[a]) as usize
    }

    fn first_of(&self, inv: Sym) -> usize {
        self.first_of
            .get(inv as usize)
            .map_or(usize::MAX, |&p| p as usize)
    }

    /// Whether the events stored before `b` leave every selection over the
    /// tail as over the whole copy, the triggers' own checks aside: `at` is
    /// the tail as loaded (positions), the events stored from `b` to
    /// `fetched` in the store's order, then the maker's own. `Err`: an
    /// earlier cut worth trying (the first event of an invocation or call
    /// the tail shares with the head, or the last cut whose head's stamps
    /// all sort before the tail's).
    pub(super) fn splits(
        &self,
        b: usize,
        fetched: usize,
        order: Order,
        events: &[EventView],
        ids: &[Sym],
        at: &[usize],
    ) -> Result<(), usize> {
        if b == 0 {
            return Ok(());
        }
        // A suffix of the loaded copy: the head's stamps all sort first.
        if order != Order::Stored && b < fetched {
            let first = events[at[0]].timestamp;
            let sorts_first = |m: &Option<f64>| {
                m.is_none_or(|head| match order {
                    Order::TimestampId => head.total_cmp(&first).is_lt(),
                    _ => head.total_cmp(&first).is_le(),
                })
            };
            if !sorts_first(&self.max_stamp[b]) {
                return Err(self.max_stamp[..b]
                    .partition_point(sorts_first)
                    .saturating_sub(1));
            }
        }
        // The earliest event of the head the tail depends on, and what
        // those events depend on in turn (a chain of overlapping
        // invocations is followed here, by storage position, not by one
        // retry per link).
        let depends = |p: usize| {
            let e = &events[p];
            let invocations = e.invocation.into_iter().chain(e.rewind_before);
            let calls = e.calls.of(ids).iter();
            let mentions = calls.filter_map(|id| self.first_mention.get(id).map(|&m| m as usize));
            invocations
                .map(|inv| self.first_of(inv))
                .chain(mentions)
                .min()
        };
        let mut earliest = at
            .iter()
            .filter_map(|&p| depends(p))
            .min()
            .unwrap_or(b)
            .min(b);
        let mut scanned = b;
        while earliest < scanned {
            let from = earliest;
            let deeper = (from..scanned).filter_map(depends).min();
            earliest = deeper.map_or(from, |d| d.min(from));
            scanned = from;
        }
        match earliest < b {
            true => Err(earliest),
            false => Ok(()),
        }
    }

    /// The sliding window's own check over a tail that [`Self::splits`] at
    /// `b`.
    pub(super) fn sliding_splits(&self, b: usize, views: &[EventView], cfg: SlidingWindow) -> bool {
        if b == 0 {
            return true;
        }
        let live = select::live(views, |e| e.scope.is_none());
        let Some(last_end) = window::last_compaction_end(views, &live) else {
            return false;
        };
        // An invocation's latest stamp is at least 0.0 (`max(0.0, ...)`).
        if self.raws[b] > 0 && self.max_raw[b].max(0.0) > last_end {
            return false;
        }
        let candidates = window::sliding_window_candidates(views, &live, cfg);
        let Some(&start) = candidates.first() else {
            return true;
        };
        let first = live
            .iter()
            .find(|&&i| views[i].invocation.is_some() && views[i].compaction.is_none());
        first.is_some_and(|&f| start > f)
    }

    /// The token threshold's own check in `scope` over a tail that
    /// [`Self::splits`] at `b`.
    pub(super) fn token_splits(&self, b: usize, views: &[EventView], scope: Option<Sym>) -> bool {
        if b == 0 {
            return true;
        }
        let scoped = select::live(views, |e| e.scope == scope);
        let latest = window::token_candidates(views, &scoped).latest;
        let last_end = match latest
            .and_then(|i| views[i].compaction)
            .and_then(|c| c.bounds())
        {
            // Not contained by a compaction of the head.
            Some((_, end)) if !self.max_end[b].ge(&end) => end,
            Some(_) => return false,
            None if self.bounded[b] => return false,
            None => 0.0,
        };
        !(self.raws[b] > 0 && self.max_raw[b] > last_end)
    }
}

#[cfg(test)]
#[path = "replay_tail_tests.rs"]
mod tests;
