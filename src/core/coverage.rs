//! Exact mode's decisions over a session: what the surviving compactions
//! cover, the prompt that leaves exactly that out, and the windows offered
//! to the summarizer, chosen by coverage rather than by position.
//!
//! The record format, the coverage check of one compaction and the hole
//! computation live in [`super::exact`]; this module composes them.

use super::error::{guarded, CoreError};
use super::event::{EventView, Need, Sym};
use super::exact::{micros, ClockSkew, Extent, Hole, Key, Parsed, Record, RecordError};
use super::filter::Item;
use super::hash::{FastMap, FastSet};
use super::select::{live, Reader, LIGHT};
use super::subsume::survivors;
use std::sync::Arc;

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
    /// session still under way (its events not yet stored were made since);
    /// `skew` how far behind that clock another may stamp such an event.
    pub fn plain(
        &self,
        events: &[EventView],
        foreign: &[f64],
        ceiling: f64,
        skew: ClockSkew,
    ) -> Option<(f64, f64)> {
        let inside: Vec<f64> = foreign
            .iter()
            .copied()
            .filter(|&t| self.start <= t && t <= self.end)
            .collect();
        super::exact::plain_bounds(
            events,
            self.start,
            self.end,
            &self.holes,
            &inside,
            ceiling,
            skew,
        )
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

/// Records a call did not use: `(position of the compaction event, why)`.
pub type Problems = Vec<(usize, String)>;

/// What an exact-mode call asks of the session besides the views.
pub trait Records: Reader {
    /// The record of the compaction event at list position `at`, whose
    /// `EventCompaction` bounds are `bounds`.
    fn record(&mut self, at: usize, bounds: (f64, f64)) -> Result<Arc<Parsed>, Self::Error>;
    /// The symbol of a non-empty invocation id a record names.
    fn invocation(&mut self, id: &str) -> Result<Sym, Self::Error>;
}

/// What exact mode's prompt reads of every event (the invocation ids a
/// hole names are read only where a record has one, see [`extents`]).
pub const PROMPT: Need = Need {
    timestamp: true,
    compaction: true,
    ..Need::NONE
};

/// What an exact-mode selection reads of every event: what parity's reads
/// (rewinds, scope, coverage bounds, invocations) ...
pub const SELECT: Need = LIGHT;

/// ... and of the events no compaction covers (the candidates): the
/// function-call links that keep call groups whole.
const CALLS: Need = Need {
    parts: true,
    pairing: true,
    ..SELECT
};

/// The extents of the compaction events among the views at `at` (list
/// positions; an extent's `at` is its place in `at`): each one's record,
/// or its interval where it has none or one that is not used (reported).
/// A hole names an event by invocation: where a record has one and
/// `invocations` were not read, every view's is asked for.
pub fn extents<R: Records>(
    reader: &mut R,
    at: &[usize],
    invocations: bool,
) -> Result<(Vec<Extent>, Problems), R::Error> {
    let mut extents = Vec::new();
    let mut problems = Problems::new();
    for (k, &i) in at.iter().enumerate() {
        let Some((start, end)) = reader.views()[i].compaction.and_then(|c| c.bounds()) else {
            continue;
        };
        let parsed = reader.record(i, (start, end))?;
        let extent = match &*parsed {
            Some(Ok(r)) => {
                let mut holes = Vec::with_capacity(r.holes.len());
                for key in &r.holes {
                    let invocation = match key.invocation.is_empty() {
                        // The views intern only non-empty ids.
                        true => None,
                        false => Some(reader.invocation(&key.invocation)?),
                    };
                    holes.push(Hole {
                        micros: key.micros,
                        invocation,
                    });
                }
                Extent::new(k, r.start, r.end, holes)
            }
            // Without a record: the interval, as google-adk reads it, minus
            // the events stored after the compaction (exact mode's rule).
            Some(Err(why)) => {
                problems.push((k, why.clone()));
                Extent::new(k, start, end, Vec::new())
            }
            None => Extent::new(k, start, end, Vec::new()),
        };
        extents.push(extent);
    }
    if !invocations && extents.iter().any(|x| !x.holes.is_empty()) {
        reader.complete(
            at,
            Need {
                invocation: true,
                ..Need::NONE
            },
        )?;
    }
    Ok((extents, problems))
}

/// What the compactions of the whole list cover, for exact mode's prompt
/// (`need` what the views were read with).
pub fn session<R: Records>(reader: &mut R, need: Need) -> Result<(Coverage, Problems), R::Error> {
    let all: Vec<usize> = (0..reader.views().len()).collect();
    let (extents, problems) = extents(reader, &all, need.invocation)?;
    let views = reader.views();
    let coverage = reader.detached(|| guarded(|| Ok(Coverage::new(views, extents))))?;
    Ok((coverage, problems))
}

/// The last sort key of exact mode's prompt `items` over `events`: -inf
/// when it is empty (the prompt of a list extended by raw events stamped
/// in order from there on is the same prompt followed by them).
pub fn last_key(events: &[EventView], cov: &Coverage, items: &[Item]) -> f64 {
    match items.last() {
        None => f64::NEG_INFINITY,
        Some(&Item::Raw(p)) => events[p].timestamp,
        Some(&Item::Summary(at)) => cov.extent_at(at).map_or(f64::NAN, |x| x.end),
    }
}

/// The events an exact-mode selection in `scope` reads: the positions of
/// the rewound events (rewinds applied, as google-adk selects from them)
/// and of those in scope.
pub fn in_scope(views: &[EventView], scope: Option<Sym>) -> (Vec<usize>, Vec<usize>) {
    let rewound = live(views, |_| true);
    let scoped = rewound
        .iter()
        .copied()
        .filter(|&i| views[i].scope == scope)
        .collect();
    (rewound, scoped)
}

/// A coverage remembered for a prefix of the list: its length, the
/// coverage and the records it did not use.
pub type Prior = (usize, Arc<Coverage>, Problems);

/// What the compactions of the events in scope cover.
#[derive(Debug)]
pub struct Covered {
    /// The views of the events in scope (positions from here on are in the
    /// scoped list), with the function-call links of the candidates.
    pub views: Vec<EventView>,
    pub coverage: Coverage,
    pub problems: Problems,
    /// Whether it is `prior`'s coverage extended.
    pub extended: bool,
}

/// What the compactions of the events at `scoped` (of `rewound` live ones)
/// cover: `prior`'s coverage extended where the list is whole (no rewind,
/// every event in scope) and adds only raw events (stored after every
/// compaction, none is covered), else worked out from their records; then
/// the function-call links of the events no compaction covers (the
/// candidates) are read.
pub fn cover<R: Records>(
    reader: &mut R,
    rewound: usize,
    scoped: &[usize],
    prior: Option<Prior>,
) -> Result<Covered, R::Error> {
    let all = reader.views();
    let n = all.len();
    let whole = rewound == n && scoped.len() == n;
    let extended = prior.and_then(|(known, prior, problems)| {
        let raw = all.get(known..)?.iter().all(|v| v.compaction.is_none());
        (whole && raw && prior.hidden.len() == known).then(|| {
            let mut coverage = Coverage::clone(&prior);
            coverage.hidden.resize(n, false);
            (coverage, problems)
        })
    });
    let is_extended = extended.is_some();
    let (coverage, problems) = match extended {
        Some(found) => found,
        None => {
            let (extents, problems) = extents(reader, scoped, true)?;
            let all = reader.views();
            let views: Vec<EventView> = scoped.iter().map(|&i| all[i]).collect();
            let coverage = reader.detached(|| guarded(|| Ok(Coverage::new(&views, extents))))?;
            (coverage, problems)
        }
    };
    let all = reader.views();
    let candidates: Vec<usize> = scoped
        .iter()
        .enumerate()
        .filter(|&(k, &i)| all[i].compaction.is_none() && !coverage.hidden[k])
        .map(|(_, &i)| i)
        .collect();
    reader.complete(&candidates, CALLS)?;
    let all = reader.views();
    let views = scoped.iter().map(|&i| all[i]).collect();
    Ok(Covered {
        views,
        coverage,
        problems,
        extended: is_extended,
    })
}

/// Exact mode's sliding-window answer over the covered scope: the
/// positions to hand the summarizer (none when it should not run), which
/// of them a compaction already covers, and the earliest timestamp the
/// compaction can reach.
pub fn sliding_answer(
    c: &Covered,
    ids: &[Sym],
    interval: i64,
    overlap: i64,
) -> Result<(Vec<usize>, Vec<bool>, f64), CoreError> {
    let (views, cov) = (&c.views, &c.coverage);
    let handed = guarded(|| Ok(sliding(views, ids, cov, interval, overlap).unwrap_or_default()))?;
    let covered = handed.iter().map(|&p| cov.hidden[p]).collect();
    let since = earliest(views, cov, &handed, &[]);
    Ok((handed, covered, since))
}

/// Exact mode's tail-retention answer over the covered scope: the raw
/// events to summarize and the summaries seeding it (see [`token`]), and
/// the earliest timestamp the compaction can reach.
pub fn token_answer(
    c: &Covered,
    ids: &[Sym],
    retention: usize,
    floor: f64,
) -> Result<(Vec<usize>, Vec<usize>, f64), CoreError> {
    let (views, cov) = (&c.views, &c.coverage);
    let plan = guarded(|| Ok(token(views, ids, cov, retention, floor)))?;
    let (window, seeds) = plan.map(|p| (p.window, p.seeds)).unwrap_or_default();
    let since = earliest(views, cov, &window, &seeds);
    Ok((window, seeds, since))
}

/// The record to store with a compaction written over `w`, and the bounds
/// for its `EventCompaction`: the holes keyed by their invocations
/// (`holes`, in `w.holes`' order) and timestamps, plus the events of the
/// store that `events` lacks (`foreign`) inside the interval; the plain
/// bounds of [`Written::plain`], or inverted bounds that cover nothing
/// where none are safe for a plain reader (google-adk tests
/// `start <= end`, and the summary still reaches the prompt).
pub fn stored_record(
    events: &[EventView],
    w: &Written,
    holes: &[String],
    foreign: &[(String, f64)],
    ceiling: f64,
    skew: ClockSkew,
) -> Result<(Record, f64, f64), RecordError> {
    let mut keys: Vec<Key> = Vec::with_capacity(w.holes.len() + foreign.len());
    for (&p, invocation) in w.holes.iter().zip(holes) {
        keys.extend(Key::of(invocation, events[p].timestamp));
    }
    for (invocation, t) in foreign {
        if w.start <= *t && *t <= w.end {
            keys.extend(Key::of(invocation, *t));
        }
    }
    let foreign_ts: Vec<f64> = foreign.iter().map(|(_, t)| *t).collect();
    let (plain_start, plain_end) = w
        .plain(events, &foreign_ts, ceiling, skew)
        .unwrap_or((w.end, w.start - 1.0));
    let record = Record::new(w.start, w.end, keys, (plain_start, plain_end))?;
    Ok((record, plain_start, plain_end))
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
#[path = "coverage_tests.rs"]
mod tests;
