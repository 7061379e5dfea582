//! Exact mode's decisions over a session: what the surviving compactions
//! cover, the prompt that leaves exactly that out, and the windows offered
//! to the summarizer, chosen by coverage rather than by position.
//!
//! The record format, the coverage check of one compaction and the hole
//! computation live in [`super::exact`]; this module composes them.

use super::event::{EventView, Sym};
use super::exact::{micros, Extent, Hole};
use super::filter::Item;
use super::hash::{FastMap, FastSet};
use super::subsume::survivors;

/// What a session's compactions cover, read in exact mode.
#[derive(Debug, Clone)]
pub struct Coverage {
    /// One per compaction event that can cover events (bounds and content),
    /// in position order.
    pub extents: Vec<Extent>,
    /// Indices into `extents` of the compactions not subsumed by another.
    pub survive: Vec<usize>,
    /// Per event: a raw event some surviving compaction covers.
    pub hidden: Vec<bool>,
}

impl Coverage {
    /// The coverage of `extents` (in position order) over `events`.
    pub fn new(events: &[EventView], extents: Vec<Extent>) -> Coverage {
        let (survive, hidden) = survivors(events, &extents);
        Coverage {
            extents,
            survive,
            hidden,
        }
    }

    /// Whether the event at `pos` is raw and no compaction covers it.
    #[inline]
    pub fn uncovered(&self, events: &[EventView], pos: usize) -> bool {
        events[pos].compaction.is_none() && !self.hidden[pos]
    }

    /// The extent of the compaction event at position `at`.
    pub fn extent_at(&self, at: usize) -> Option<&Extent> {
        // In position order (see `extents`).
        let k = self.extents.binary_search_by_key(&at, |x| x.at).ok()?;
        Some(&self.extents[k])
    }

    /// Positions of the surviving compaction events, in order.
    pub fn surviving_events(&self) -> Vec<usize> {
        self.survive.iter().map(|&k| self.extents[k].at).collect()
    }
}

/// The prompt of `events` in exact mode: every raw event no surviving
/// compaction covers, and every surviving summary, ordered as google-adk
/// orders them (by timestamp, a summary at its interval's end, ties by
/// position).
pub fn prompt(events: &[EventView], cov: &Coverage) -> Vec<Item> {
    let mut items: Vec<(f64, usize, Item)> = cov
        .survive
        .iter()
        .map(|&k| {
            let x = &cov.extents[k];
            (x.end, x.at, Item::Summary(x.at))
        })
        .collect();
    items.extend(
        (0..events.len())
            .filter(|&pos| cov.uncovered(events, pos))
            .map(|pos| (events[pos].timestamp, pos, Item::Raw(pos))),
    );
    items.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    items.into_iter().map(|(_, _, item)| item).collect()
}

/// Which of `candidates` may be summarized: events linked by a function-call
/// id (the call, its responses, a confirmation or auth request naming it)
/// form a group, and a group is summarized whole or not at all. A group is
/// kept raw when an id it opens (a call, a requested confirmation or auth)
/// has no resolving response in the group, or when it answers a call that
/// stays raw outside the candidates (`raw_elsewhere`), which would show the
/// model a call whose answer is gone. So a pending long-running call, one
/// awaiting confirmation, a dead call and anything sharing an id with them
/// stay raw, and everything else is summarized around them.
///
/// `forced` are candidates (positions) that must stay raw: their groups
/// are kept raw whole.
///
/// Returns one flag per candidate.
pub fn compactable(
    events: &[EventView],
    ids: &[Sym],
    candidates: &[usize],
    raw_elsewhere: &[usize],
    forced: &FastSet<usize>,
) -> Vec<bool> {
    let n = candidates.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut k: usize) -> usize {
        while parent[k] != k {
            parent[k] = parent[parent[k]];
            k = parent[k];
        }
        k
    }
    let mut first: FastMap<Sym, usize> = FastMap::default();
    for (k, &pos) in candidates.iter().enumerate() {
        let e = &events[pos];
        for &id in e
            .calls
            .of(ids)
            .iter()
            .chain(e.responses.of(ids))
            .chain(e.pending.of(ids))
        {
            match first.get(&id) {
                Some(&j) => {
                    let (a, b) = (root(&mut parent, j), root(&mut parent, k));
                    if a != b {
                        parent[a] = b;
                    }
                }
                None => {
                    first.insert(id, k);
                }
            }
        }
    }
    let mut open_outside: FastSet<Sym> = FastSet::default();
    for &pos in raw_elsewhere {
        let e = &events[pos];
        open_outside.extend(e.calls.of(ids).iter().chain(e.pending.of(ids)));
    }
    let mut opened: FastMap<usize, FastSet<Sym>> = FastMap::default();
    let mut resolved: FastMap<usize, FastSet<Sym>> = FastMap::default();
    let mut blocked: FastSet<usize> = FastSet::default();
    for (k, &pos) in candidates.iter().enumerate() {
        let e = &events[pos];
        let g = root(&mut parent, k);
        if forced.contains(&pos) {
            blocked.insert(g);
        }
        let pending = e.pending.of(ids);
        for &id in e.responses.of(ids) {
            if open_outside.contains(&id) {
                blocked.insert(g);
            }
            if !pending.contains(&id) {
                resolved.entry(g).or_default().insert(id);
            }
        }
        opened
            .entry(g)
            .or_default()
            .extend(e.calls.of(ids).iter().chain(pending));
    }
    for (g, open) in &opened {
        let done = resolved.get(g);
        if open.iter().any(|id| done.is_none_or(|d| !d.contains(id))) {
            blocked.insert(*g);
        }
    }
    (0..n)
        .map(|k| !blocked.contains(&root(&mut parent, k)))
        .collect()
}

/// The raw events no compaction covers, in stream order.
fn uncovered(events: &[EventView], cov: &Coverage) -> Vec<usize> {
    (0..events.len())
        .filter(|&pos| cov.uncovered(events, pos))
        .collect()
}

/// The distinct symbols of `syms` in the order first met.
fn first_seen(syms: impl Iterator<Item = Sym>) -> Vec<Sym> {
    let mut seen: FastSet<Sym> = FastSet::default();
    syms.filter(|&s| seen.insert(s)).collect()
}

/// Sliding-window selection in exact mode over `events` (already rewound
/// and scoped, as google-adk filters them): the positions to hand the
/// summarizer, in stream order, or `None` when it should not run.
///
/// Candidates are the raw events no compaction covers. The window fires once
/// `interval` distinct invocations have candidates that can be summarized
/// (a group kept raw by [`compactable`] does not count, so a pending call
/// cannot hold the trigger), and takes every summarizable candidate, plus
/// the covered events of the `overlap` invocations before the first of them
/// (re-summarized on purpose, as google-adk's overlap does).
pub fn sliding(
    events: &[EventView],
    ids: &[Sym],
    cov: &Coverage,
    interval: i64,
    overlap: i64,
) -> Option<Vec<usize>> {
    let candidates = uncovered(events, cov);
    let order = first_seen(
        events
            .iter()
            .filter(|e| e.compaction.is_none())
            .filter_map(|e| e.invocation),
    );
    settle(events, cov, &[], |forced| {
        let ok = compactable(events, ids, &candidates, &[], forced);
        let window = chosen(&candidates, &ok);
        let new = first_seen(window.iter().filter_map(|&pos| events[pos].invocation));
        if window.is_empty() || (new.len() as i64) < interval {
            return None;
        }
        let mut handed = window.clone();
        if let (Some(&first), true) = (new.first(), overlap > 0) {
            let at = order.iter().position(|&i| i == first).unwrap_or(0);
            let from = at.saturating_sub(usize::try_from(overlap).unwrap_or(usize::MAX));
            let earlier: FastSet<Sym> = order[from..at].iter().copied().collect();
            handed.extend((0..events.len()).filter(|&pos| {
                cov.hidden[pos] && events[pos].invocation.is_some_and(|i| earlier.contains(&i))
            }));
            handed.sort_unstable();
        }
        Some((window, handed))
    })
}

/// The candidates `ok` allows, in order.
fn chosen(candidates: &[usize], ok: &[bool]) -> Vec<usize> {
    candidates
        .iter()
        .zip(ok)
        .filter_map(|(&pos, &ok)| ok.then_some(pos))
        .collect()
}

/// A selection made safe from its own holes' keys. A hole names an event by
/// invocation and microsecond, so it also names any event tied with it in
/// both: were such an event summarized, it would read as raw beside its
/// summary (and, its call summarized, split its pair). `select(forced)`
/// chooses `(window, handed)` (the uncovered events to summarize, and
/// everything handed to the summarizer) keeping `forced` raw with their
/// call groups; every window event that the holes of the resulting
/// compaction (seeded by `seeds`) would name is forced raw and the choice
/// made again, until none is. Each round keeps one more event raw, so it
/// ends. Returns `handed`.
fn settle(
    events: &[EventView],
    cov: &Coverage,
    seeds: &[usize],
    mut select: impl FnMut(&FastSet<usize>) -> Option<(Vec<usize>, Vec<usize>)>,
) -> Option<Vec<usize>> {
    let mut forced: FastSet<usize> = FastSet::default();
    loop {
        let (window, handed) = select(&forced)?;
        let named = named_by_holes(events, cov, &handed, seeds, &window);
        if named.is_empty() {
            return Some(handed);
        }
        forced.extend(named);
    }
}

/// The events of `window` that a hole of the compaction over `handed` and
/// `seeds` would name.
fn named_by_holes(
    events: &[EventView],
    cov: &Coverage,
    handed: &[usize],
    seeds: &[usize],
    window: &[usize],
) -> Vec<usize> {
    let Some((start, end)) = span(events, cov, handed, seeds) else {
        return Vec::new();
    };
    let found = holes_of(events, cov, start, end, handed, seeds);
    if found.is_empty() {
        return Vec::new();
    }
    let keys = Extent::new(
        events.len(),
        start,
        end,
        found
            .iter()
            .filter_map(|&p| {
                Some(Hole {
                    micros: micros(events[p].timestamp)?,
                    invocation: events[p].invocation,
                })
            })
            .collect(),
    );
    window
        .iter()
        .copied()
        .filter(|&p| keys.excludes(events[p].invocation, events[p].timestamp))
        .collect()
}

/// The holes ([`super::exact::holes`]) of a compaction over `[start, end]`
/// made from `handed` and `seeds`. When the seeds are every surviving
/// compaction (tail retention's rolling summary), an event some seed covers
/// is one a survivor hides (`Coverage::hidden`: what every compaction
/// covers is inside a survivor), read off in one pass instead of testing
/// every seed against every event.
fn holes_of(
    events: &[EventView],
    cov: &Coverage,
    start: f64,
    end: f64,
    handed: &[usize],
    seeds: &[usize],
) -> Vec<usize> {
    let mut mask = vec![false; events.len()];
    for &p in handed {
        mask[p] = true;
    }
    if !seeds.is_empty() && seeds == cov.surviving_events() {
        for (m, &hidden) in mask.iter_mut().zip(&cov.hidden) {
            *m |= hidden;
        }
    } else {
        for &p in seeds {
            mask[p] = true;
        }
    }
    super::exact::holes(events, &cov.extents, start, end, &mask)
}

/// The interval a compaction over `handed` seeded by `seeds` is made over:
/// from the earliest to the latest finite timestamp they stand for.
fn span(
    events: &[EventView],
    cov: &Coverage,
    handed: &[usize],
    seeds: &[usize],
) -> Option<(f64, f64)> {
    let bounds = handed
        .iter()
        .map(|&p| (events[p].timestamp, events[p].timestamp))
        .chain(
            seeds
                .iter()
                .filter_map(|&p| cov.extent_at(p))
                .map(|x| (x.start, x.end)),
        )
        .filter(|(a, b)| a.is_finite() && b.is_finite());
    bounds.fold(None, |acc: Option<(f64, f64)>, (a, b)| {
        Some(acc.map_or((a, b), |(s, e)| (s.min(a), e.max(b))))
    })
}

/// Tail-retention selection in exact mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenPlan {
    /// Raw events to summarize, in stream order.
    pub window: Vec<usize>,
    /// Surviving compaction events whose summaries seed the new one, in
    /// order: the new summary stands for all they cover, so they are all
    /// subsumed and one rolling summary reaches the model.
    pub seeds: Vec<usize>,
}

/// Token-threshold (tail-retention) selection in exact mode over `events`
/// (rewound and scoped): the candidates are the raw events no compaction
/// covers; the last `retention` of them stay raw, and so do those from the
/// first one stamped at or after `floor` on (the earliest stamp an event
/// not yet stored may carry: a store that loads by timestamp puts such an
/// event before the compaction, so the interval must end below it); of the
/// rest every group [`compactable`] allows (the tail counts as raw
/// elsewhere, so a response kept in the tail keeps its call). Every
/// surviving summary seeds the new one. `None` when there is nothing to
/// summarize and at most one summary to roll.
pub fn token(
    events: &[EventView],
    ids: &[Sym],
    cov: &Coverage,
    retention: usize,
    floor: f64,
) -> Option<TokenPlan> {
    let candidates = uncovered(events, cov);
    let unstamped = candidates
        .iter()
        .position(|&p| events[p].timestamp >= floor)
        .unwrap_or(candidates.len());
    let split = candidates.len().saturating_sub(retention).min(unstamped);
    let (head, tail) = candidates.split_at(split);
    let seeds = cov.surviving_events();
    let window = settle(events, cov, &seeds, |forced| {
        let window = chosen(head, &compactable(events, ids, head, tail, forced));
        Some((window.clone(), window))
    })
    .unwrap_or_default();
    if window.is_empty() && seeds.len() < 2 {
        return None;
    }
    Some(TokenPlan { window, seeds })
}

/// The earliest timestamp a compaction over `handed` seeded by `seeds`
/// can reach (a seed's record can reach before the bounds its
/// `EventCompaction` carries), from which on a store is re-read for events
/// appended meanwhile; -inf when one of them is not a finite number (the
/// whole session is then re-read).
pub fn earliest(events: &[EventView], cov: &Coverage, handed: &[usize], seeds: &[usize]) -> f64 {
    let stamps = handed.iter().map(|&p| events[p].timestamp).chain(
        seeds
            .iter()
            .filter_map(|&p| cov.extent_at(p))
            .flat_map(|x| [x.start, x.end]),
    );
    stamps.fold(f64::INFINITY, |low, t| {
        if t.is_finite() {
            low.min(t)
        } else {
            f64::NEG_INFINITY
        }
    })
}

/// What a compaction written in exact mode records.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// The interval the summary was made over: from the earliest to the
    /// latest timestamp it stands for (its seeds' intervals included), so an
    /// interior event stamped past the last one is inside it, not left raw
    /// beside its summary.
    pub start: f64,
    /// See `start`.
    pub end: f64,
    /// Positions of the raw events inside the interval, stored before the
    /// compaction, that the summary does not stand in for.
    pub holes: Vec<usize>,
}

impl Written {
    /// The bounds for the compaction's `EventCompaction`
    /// ([`super::exact::plain_bounds`]), `None` when no bounds can hide
    /// anything safely. `foreign` are the timestamps of events of the store
    /// that `events` lacks (appended by another invocation; those inside the
    /// interval are holes too); `ceiling` the earliest timestamp an event
    /// stored after the compaction can carry: the writer's clock reading
    /// when it writes the record (every event made from then on is stamped
    /// at or after it) and the start of every other invocation of the
    /// session still under way (its events not yet stored were made since).
    pub fn plain(&self, events: &[EventView], foreign: &[f64], ceiling: f64) -> Option<(f64, f64)> {
        let inside: Vec<f64> = foreign
            .iter()
            .copied()
            .filter(|&t| self.start <= t && t <= self.end)
            .collect();
        super::exact::plain_bounds(events, self.start, self.end, &self.holes, &inside, ceiling)
    }
}

/// The record of a compaction about to be appended to `events`, made from
/// the events handed to the summarizer (`handed`, positions; covered ones
/// included) and the compaction events whose summaries seeded it (`seeds`),
/// decided by position, never by key. Events of the store that `events`
/// lacks (appended by another invocation) are named as holes by the caller;
/// they and the clock bound its plain bounds ([`Written::plain`]). `None`
/// when nothing handed has a finite timestamp.
pub fn write(
    events: &[EventView],
    cov: &Coverage,
    handed: &[usize],
    seeds: &[usize],
) -> Option<Written> {
    let (start, end) = span(events, cov, handed, seeds)?;
    let holes = holes_of(events, cov, start, end, handed, seeds);
    Some(Written { start, end, holes })
}

/// The last sort key of exact mode's [`prompt`] of some events once `tail`
/// follows them, when that prompt is the last one (whose last key is
/// `last`: `-inf` for an empty prompt) followed by the tail's events, raw,
/// in tail order: when every tail event is a raw event stamped in order
/// from `last` on. No compaction covers an event stored after it, so such
/// events are uncovered and sort last. `None` when that does not hold (or
/// `last` is NaN or `+inf`): the prompt must be computed.
pub fn extend_prompt(last: f64, tail: &[EventView]) -> Option<f64> {
    if !(last.is_finite() || last == f64::NEG_INFINITY) {
        return None;
    }
    tail.iter().try_fold(last, |last, v| {
        let in_order = v.compaction.is_none() && v.timestamp.is_finite() && v.timestamp >= last;
        in_order.then_some(v.timestamp)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::Span;
    use crate::core::exact::holes;

    /// Views plus the id arena their spans index.
    #[derive(Default)]
    struct Session {
        events: Vec<EventView>,
        ids: Vec<Sym>,
    }

    impl Session {
        fn span(&mut self, syms: &[Sym]) -> Span {
            let start = self.ids.len() as u32;
            self.ids.extend_from_slice(syms);
            Span {
                start,
                len: syms.len() as u32,
            }
        }

        fn raw(&mut self, t: f64, inv: u32) -> usize {
            self.events.push(EventView {
                timestamp: t,
                invocation: Some(inv),
                ..Default::default()
            });
            self.events.len() - 1
        }

        fn call(&mut self, t: f64, inv: u32, id: Sym) -> usize {
            let calls = self.span(&[id]);
            let pos = self.raw(t, inv);
            self.events[pos].calls = calls;
            pos
        }

        fn response(&mut self, t: f64, inv: u32, id: Sym) -> usize {
            let responses = self.span(&[id]);
            let pos = self.raw(t, inv);
            self.events[pos].responses = responses;
            self.events[pos].has_responses = true;
            pos
        }

        fn compaction(&mut self, t: f64, start: f64, end: f64) -> usize {
            self.events.push(EventView::compacting(t, start, end));
            self.events.len() - 1
        }

        fn cover(&self, extents: Vec<Extent>) -> Coverage {
            Coverage::new(&self.events, extents)
        }
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
        let cov = s.cover(Vec::new());
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
        let cov = s.cover(Vec::new());
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
        let cov = s.cover(Vec::new());
        let plan = token(&s.events, &s.ids, &cov, 1, f64::INFINITY).unwrap();
        assert_eq!(plan.window, vec![0]);
        // The same tie without a call: the tied event alone stays raw.
        let mut s = Session::default();
        s.raw(0.5, 1);
        s.raw(1.0, 1);
        s.raw(1.0, 1);
        let cov = s.cover(Vec::new());
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
        let cov = s.cover(Vec::new());
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
        let cov = s.cover(Vec::new());
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
        let cov = s.cover(vec![Extent::new(seed, 1.0, 2.0, Vec::new())]);
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
        let cov = s.cover(vec![
            Extent::new(seed, 1.0, 2.0, Vec::new()),
            Extent::new(at, w.start, w.end, vec![hole]),
        ]);
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
        let cov = s.cover(vec![
            Extent::new(a, 0.0, 4.0, vec![hole]),
            Extent::new(b, 5.0, 6.0, Vec::new()),
        ]);
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
        let cov = s.cover(vec![Extent::new(at, 0.0, 3.0, Vec::new())]);
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
        let cov = s.cover(Vec::new());
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
        let cov = s.cover(vec![Extent::new(at, 1.0, 3.0, vec![hole])]);
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
        let cov = s.cover(Vec::new());
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
        let cov = s.cover(vec![
            Extent::new(a, 1.0, 1.0, Vec::new()),
            Extent::new(b, 2.0, 2.0, Vec::new()),
        ]);
        let plan = token(&s.events, &s.ids, &cov, 0, f64::INFINITY).unwrap();
        assert_eq!(
            plan,
            TokenPlan {
                window: vec![],
                seeds: vec![a, b]
            }
        );
    }
}
