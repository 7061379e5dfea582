//! Lean loading: which stored events a turn reads.
//!
//! A Runner turn hands the whole session to google-adk's passes, but once
//! compaction has summarized most of it, almost every stored event is one no
//! pass can see: a raw event whose timestamp a standing summary covers is
//! left out of every prompt, and nothing else looks at it. [`needed`] says
//! which events a turn must load so that every pass answers over the lean
//! list as it answers over the full one:
//!
//! - the prompt (`_get_contents`): every live raw event no summary covers
//!   (gaps included), the compactions that are not subsumed, what rewinds
//!   reach back to, and the sources of `_recover_compacted_function_calls`;
//! - the compaction after the turn: the sliding window from the start of its
//!   overlap, the token threshold's candidates, its rolling seed, and the
//!   events after the latest compaction (the latest prompt token count);
//! - the Runner's other passes, by what they look up: the latest event of
//!   each author that a backward lookup may stop at ([`mark`]), every event
//!   of a task scope, branch or node path (views other than the root's may
//!   show it), events the caller pins (abort events, transfers), events of
//!   the invocations under way;
//! - and, closed over function-call ids, every event that names an id a
//!   kept event names (the call a shown response belongs to, its sibling
//!   responses, long-running and pending markers, the call that opened a
//!   task scope).
//!
//! Only an unscoped, unbranched raw event is ever left out, and only when a
//! compaction every view shows (no scope, branch or node path) covers its
//! timestamp; `lean_tests` checks the answers against the full session on
//! generated sessions.

use super::event::{per_symbol, EventView, Span, Sym};
use super::filter::Coverage;
use super::hash::{FastMap, FastSet};
use super::ranges::compaction_ranges;
use super::rewind::apply_rewinds;
use super::select::Rules;
use super::window::{last_compaction_end, SlidingWindow};

/// Bits of [`Facts::marks`]: the backward lookups an event can end, each
/// per author (google-adk stops at the newest such event of an agent).
pub mod mark {
    /// An event `find_agent_to_run` may route by: not the user's, not an
    /// abort, no agent state, not a content-less error.
    pub const ROUTE: u8 = 1;
    /// Carries `cache_metadata` (the context cache's lookup).
    pub const CACHE: u8 = 2;
    /// Carries an interaction id (the Interactions API's lookup).
    pub const INTERACTION: u8 = 4;
}

/// What lean loading needs to know of an event besides its [`EventView`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Facts {
    /// A non-empty branch: views of other branches differ on it and the
    /// branch lookups read it, so it is always loaded.
    pub branched: bool,
    /// A non-empty branch or node path: a compaction so placed is left out
    /// of some views, so it covers nothing here and is always loaded.
    pub placed: bool,
    /// Loaded whatever the rules say (an abort event, a transfer).
    pub pinned: bool,
    /// [`mark`] bits.
    pub marks: u8,
    /// Function-call ids the event names outside its parts (the
    /// `<tool>@<id>` segments of its branch), in the refs arena.
    pub refs: Span,
}

/// What an event shows of the facts' fields, as a reader takes them from
/// a Python Event or a stored row ([`Facts::of`] makes the facts).
#[derive(Debug, Clone, Copy, Default)]
pub struct Shown {
    /// A non-empty branch.
    pub branch: bool,
    /// A non-empty `node_info.path`.
    pub path: bool,
    /// A truthy `error_code`.
    pub error: bool,
    /// `error_code` is google-adk's abort seal's (`INVOCATION_ABORTED`).
    pub aborted: bool,
    /// A truthy `error_code` and no content parts.
    pub content_less_error: bool,
    /// A truthy `actions.transfer_to_agent`.
    pub transfer: bool,
    /// `actions.agent_state` set or `actions.end_of_agent` truthy.
    pub state: bool,
    /// `author` is `"user"`.
    pub by_user: bool,
    /// `cache_metadata` set.
    pub cache: bool,
    /// A truthy `interaction_id`.
    pub interaction: bool,
}

/// `error_code` of the events google-adk writes to seal an aborted
/// invocation (`_abort_events._INVOCATION_ABORTED`).
pub const ABORTED: &str = "INVOCATION_ABORTED";

/// The function-call ids a branch names: the ids of its `<tool>@<id>`
/// segments.
pub fn branch_refs(branch: &str) -> impl Iterator<Item = &str> {
    branch
        .split('.')
        .filter_map(|segment| segment.split_once('@').map(|(_, id)| id))
        .filter(|id| !id.is_empty())
}

impl Facts {
    /// The facts of an event showing `shown`, its branch's refs at `refs`.
    pub fn of(shown: &Shown, refs: Span) -> Facts {
        let mut marks = 0;
        // `find_agent_to_run` passes over the user's events, abort seals,
        // agent state changes and content-less errors.
        if !(shown.by_user || shown.aborted || shown.state || shown.content_less_error) {
            marks |= mark::ROUTE;
        }
        if shown.cache {
            marks |= mark::CACHE;
        }
        if shown.interaction {
            marks |= mark::INTERACTION;
        }
        Facts {
            branched: shown.branch,
            placed: shown.branch || shown.path,
            pinned: shown.aborted || shown.error || shown.transfer,
            marks,
            refs,
        }
    }
}

/// The compaction settings of the app the turn runs (what the compaction
/// after the turn reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// The sliding window, when configured.
    pub window: Option<SlidingWindow>,
    /// The family's selection rules (which events a selection reads).
    pub rules: Rules,
}

impl Settings {
    /// The settings of an app whose `EventsCompactionConfig` has
    /// `compaction_interval` (a sliding window when positive) and
    /// `overlap_size`, under the family's `rules`.
    pub fn of(compaction_interval: Option<i64>, overlap_size: i64, rules: Rules) -> Settings {
        let window = match compaction_interval {
            Some(interval) if interval > 0 && overlap_size >= 0 => Some(SlidingWindow {
                interval: interval as usize,
                overlap: overlap_size as usize,
            }),
            _ => None,
        };
        Settings { window, rules }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            window: None,
            rules: Rules::LATEST,
        }
    }
}

/// The live events (past rewinds), the root view's (live and unscoped:
/// every prompt of an unscoped agent reads only these), and what the root
/// view's selections read (before 2.5 rewound events too, before 2.13
/// every scope's).
fn views_of(events: &[EventView], rules: Rules) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let live = apply_rewinds(events);
    let root: Vec<usize> = live
        .iter()
        .copied()
        .filter(|&i| events[i].scope.is_none())
        .collect();
    let all: Vec<usize>;
    let from = if rules.rewinds {
        &live
    } else {
        all = (0..events.len()).collect();
        &all
    };
    let selected = from
        .iter()
        .copied()
        .filter(|&i| !rules.scoped || events[i].scope.is_none())
        .collect();
    (live, root, selected)
}

/// The newest surviving compaction of `selected` (the token threshold's
/// rolling seed) and its end (0.0 without one).
fn surviving_end(events: &[EventView], selected: &[usize]) -> (Option<usize>, f64) {
    let views: Vec<EventView> = selected.iter().map(|&i| events[i]).collect();
    let latest = compaction_ranges(&views).last().map(|r| r.index);
    let end = latest
        .and_then(|at| views[at].compaction?.end)
        .unwrap_or(0.0);
    (latest.map(|at| selected[at]), end)
}

/// What is known of the turn before its session loads.
#[derive(Debug, Clone, Copy, Default)]
pub struct Turn<'a> {
    /// Invocations whose events are all loaded (those under way).
    pub underway: &'a [Sym],
    /// Function-call ids the turn's new message answers: every event naming
    /// one is loaded, with every event of the invocations that called it.
    pub answering: &'a [Sym],
}

/// What a lean list left out, as far as a later turn can reach back to it:
/// the ids and invocations its events name. A list that grew by a tail
/// naming none of them (and holding no rewind) has the same lean list as the
/// lean list grown by that tail ([`Dropped::admits`]), which is how a
/// session's lean list is kept up to date without reading what it dropped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dropped {
    ids: FastSet<Sym>,
    invocations: FastSet<Sym>,
    /// The end of the newest surviving compaction when the list was made
    /// lean: the token threshold's candidates are the events past it, and
    /// the sliding window counts from no earlier. A compaction ending no
    /// later reaches back.
    floor: f64,
}

impl Dropped {
    /// Whether the lean list of the session grown by `tail` (with `turn`'s
    /// message) is that of its lean list grown by `tail`: the turn continues
    /// no invocation, no rewind in the tail and no compaction ending at or
    /// before the floor (they reach back), and the tail names no id or
    /// invocation of a left-out event.
    pub fn admits(
        &self,
        tail: &[EventView],
        facts: &[Facts],
        (ids, refs): (&[Sym], &[Sym]),
        turn: Turn<'_>,
    ) -> bool {
        let names = |sym: &Sym| self.ids.contains(sym);
        let runs = |sym: &Sym| self.invocations.contains(sym);
        // The sliding window counts from a compaction with a truthy end,
        // the token threshold from one with a range.
        let reaches_back = |e: &EventView| {
            let Some(c) = e.compaction else {
                return false;
            };
            let end = match (c.bounds(), c.end) {
                (Some((_, end)), _) => end,
                (None, Some(end)) if end != 0.0 => end,
                _ => return false,
            };
            end.partial_cmp(&self.floor) != Some(std::cmp::Ordering::Greater)
        };
        // A turn that continues an invocation (answers a call, resumes)
        // makes it new for the sliding window, which then reads from the
        // invocation before it on, left-out events included: decided over
        // the whole list.
        let continues = !turn.answering.is_empty() || !turn.underway.is_empty();
        !(continues
            || tail
                .iter()
                .any(|e| e.rewind_before.is_some() || reaches_back(e))
            || tail
                .iter()
                .zip(facts)
                .any(|(e, f)| named(e, f, (ids, refs)).any(|id| names(&id)))
            || tail.iter().filter_map(|e| e.invocation.as_ref()).any(runs)
            || turn.answering.iter().any(names)
            || turn.underway.iter().any(runs))
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        (self.ids.capacity() + self.invocations.capacity()) * 8
    }
}

/// [`needed`] with what it left out.
pub fn decide(
    events: &[EventView],
    facts: &[Facts],
    ids: &[Sym],
    refs: &[Sym],
    settings: &Settings,
    turn: Turn<'_>,
) -> (Vec<usize>, Dropped) {
    let (keep, floor) = pick(events, facts, (ids, refs), settings, turn);
    let mut dropped = Dropped {
        floor,
        ..Dropped::default()
    };
    let mut kept = keep.iter().copied().peekable();
    for (i, (e, f)) in events.iter().zip(facts).enumerate() {
        if kept.next_if_eq(&i).is_some() {
            continue;
        }
        dropped.ids.extend(named(e, f, (ids, refs)));
        dropped.invocations.extend(e.invocation);
    }
    (keep, dropped)
}

/// The lean decision on a list that grew since the last decision, made
/// from that decision alone: `events` holds the events it kept followed by
/// the `grown` new ones, and `dropped` what it left out. Positions
/// (ascending, into `events`) of the events the turn reads, `dropped`
/// extended by what this decision leaves out; `None` (and `dropped` as it
/// was) where the new events or the turn reach back to a left-out event
/// ([`Dropped::admits`]): decide over the whole list then.
pub fn decide_grown(
    events: &[EventView],
    facts: &[Facts],
    (ids, refs): (&[Sym], &[Sym]),
    grown: usize,
    dropped: &mut Dropped,
    settings: &Settings,
    turn: Turn<'_>,
) -> Option<Vec<usize>> {
    let from = events.len().checked_sub(grown)?;
    if !dropped.admits(&events[from..], &facts[from..], (ids, refs), turn) {
        return None;
    }
    let (keep, later) = decide(events, facts, ids, refs, settings, turn);
    dropped.merge(later);
    Some(keep)
}

impl Dropped {
    /// What both left out (`self` then `later`, made lean from `self`'s
    /// lean list grown by a tail it admitted): the later floor.
    pub fn merge(&mut self, later: Dropped) {
        self.ids.extend(later.ids);
        self.invocations.extend(later.invocations);
        self.floor = later.floor;
    }
}

/// Positions (ascending) of the events a turn reads, out of `events` in the
/// order the store loads them. `facts` has one entry per event; `ids` is the
/// arena of the views' spans and `refs` that of the facts'. Isolation
/// scopes, call ids and refs must be symbols of one interner (a scope names
/// the call that opened it).
pub fn needed(
    events: &[EventView],
    facts: &[Facts],
    ids: &[Sym],
    refs: &[Sym],
    settings: &Settings,
    turn: Turn<'_>,
) -> Vec<usize> {
    pick(events, facts, (ids, refs), settings, turn).0
}

/// [`needed`], and the end of the newest surviving compaction of what the
/// selections read (`Dropped`'s floor).
fn pick(
    events: &[EventView],
    facts: &[Facts],
    (ids, refs): (&[Sym], &[Sym]),
    settings: &Settings,
    turn: Turn<'_>,
) -> (Vec<usize>, f64) {
    let n = events.len();
    debug_assert_eq!(facts.len(), n);
    let mut keep = vec![false; n];
    let (live, root, selected) = views_of(events, settings.rules);
    let all: Vec<usize> = (0..n).collect();

    let resumed = resumed(events, ids, turn.answering);
    let underway: Vec<Sym> = turn.underway.iter().chain(&resumed).copied().collect();
    always(events, facts, &underway, &mut keep);
    rewind_targets(events, &mut keep);
    standing(events, facts, &root, &mut keep);
    if selected != root {
        standing(events, facts, &selected, &mut keep);
    }
    let floor = candidates(events, &selected, &mut keep);
    newest(events, facts, &live, &mut keep);
    newest(events, facts, &all, &mut keep);

    let cut = cut(events, (&root, &selected), settings, floor, &underway);
    keep[cut..].iter_mut().for_each(|k| *k = true);
    first_of_cut_invocations(events, &selected, cut, &mut keep);
    close_over_ids(events, facts, (ids, refs), turn.answering, &mut keep);

    ((0..n).filter(|&i| keep[i]).collect(), floor)
}

/// The invocations of the events calling one of `answering`.
fn resumed(events: &[EventView], ids: &[Sym], answering: &[Sym]) -> Vec<Sym> {
    if answering.is_empty() {
        return Vec::new();
    }
    let answering: FastSet<Sym> = answering.iter().copied().collect();
    events
        .iter()
        .filter(|e| e.calls.of(ids).iter().any(|id| answering.contains(id)))
        .filter_map(|e| e.invocation)
        .collect()
}

/// Events every view or pass may read whatever their time: scoped,
/// branched, placed compactions, pinned, rewinds, and those of the
/// invocations under way.
fn always(events: &[EventView], facts: &[Facts], underway: &[Sym], keep: &mut [bool]) {
    let underway: FastSet<Sym> = underway.iter().copied().collect();
    for (i, (e, f)) in events.iter().zip(facts).enumerate() {
        if e.scope.is_some()
            || f.branched
            || (f.placed && e.compaction.is_some())
            || f.pinned
            || e.rewind_before.is_some()
            || e.invocation.is_some_and(|inv| underway.contains(&inv))
        {
            keep[i] = true;
        }
    }
}

/// The first event of every invocation a rewind names: `_apply_rewinds`
/// walks back to it.
fn rewind_targets(events: &[EventView], keep: &mut [bool]) {
    if events.iter().all(|e| e.rewind_before.is_none()) {
        return;
    }
    let mut first = per_symbol(events.iter().filter_map(|e| e.invocation), usize::MAX);
    for (i, e) in events.iter().enumerate().rev() {
        if let Some(inv) = e.invocation {
            first[inv as usize] = i;
        }
    }
    for e in events {
        if let Some(&at) = e
            .rewind_before
            .and_then(|t| first.get(t as usize))
            .filter(|&&at| at != usize::MAX)
        {
            keep[at] = true;
        }
    }
}

/// The compactions of `root` (a view's live events) that no other
/// subsumes, the newest one in stream order, and every raw event of `root`
/// that no compaction of it covers.
fn standing(events: &[EventView], facts: &[Facts], root: &[usize], keep: &mut [bool]) {
    // Compactions every root-view prompt shows: no branch or node path (a
    // raw event they cover is left out of every view that shows it).
    let shown: Vec<usize> = root
        .iter()
        .copied()
        .filter(|&i| events[i].compaction.is_some() && !facts[i].placed)
        .collect();
    let views: Vec<EventView> = shown.iter().map(|&i| events[i]).collect();
    for range in compaction_ranges(&views) {
        keep[shown[range.index]] = true;
    }
    let coverage = Coverage::new(views.iter().filter_map(|v| v.compaction?.bounds()));
    for &i in root {
        let e = &events[i];
        if e.compaction.is_none() && !coverage.covers(e.timestamp) {
            keep[i] = true;
        }
    }
    // The newest compaction, whatever it holds: the sliding window counts
    // from it and the prompt token count stops at it. It and what follows
    // are kept by the cut; here in case it is placed elsewhere.
    if let Some(&i) = root.iter().rev().find(|&&i| events[i].compaction.is_some()) {
        keep[i] = true;
    }
}

/// The token threshold's candidates among `selected` (every raw event past
/// the newest surviving compaction's end, covered or not), its rolling
/// seed, and the compaction the sliding window counts from; returns that
/// end.
fn candidates(events: &[EventView], selected: &[usize], keep: &mut [bool]) -> f64 {
    let (latest, end) = surviving_end(events, selected);
    if let Some(at) = latest {
        // The rolling seed.
        keep[at] = true;
    }
    // The compaction the sliding window counts from.
    if let Some(&i) = selected.iter().rev().find(|&&i| {
        events[i]
            .compaction
            .and_then(|c| c.end)
            .is_some_and(|end| end != 0.0)
    }) {
        keep[i] = true;
    }
    for &i in selected {
        let e = &events[i];
        if e.compaction.is_none() && e.timestamp > end {
            keep[i] = true;
        }
    }
    end
}

/// The newest event of each author for each lookup of [`mark`], and the
/// newest usage count of each author, among `at`.
fn newest(events: &[EventView], facts: &[Facts], at: &[usize], keep: &mut [bool]) {
    let mut seen: FastSet<(u8, Option<Sym>)> = FastSet::default();
    for &i in at.iter().rev() {
        let (e, f) = (&events[i], &facts[i]);
        let mut lookups = f.marks;
        if e.prompt_tokens.is_some() {
            lookups |= 0x80;
        }
        let mut bit = 1u8;
        while lookups != 0 {
            if lookups & bit != 0 {
                lookups &= !bit;
                if seen.insert((bit, e.author)) {
                    keep[i] = true;
                }
            }
            bit = bit.wrapping_shl(1);
        }
    }
}

/// The position from which every event is kept: the start of the sliding
/// window's overlap and the newest compaction (with everything after it).
fn cut(
    events: &[EventView],
    (root, selected): (&[usize], &[usize]),
    settings: &Settings,
    token_end: f64,
    continued: &[Sym],
) -> usize {
    let mut cut = events.len();
    for at in [root, selected] {
        if let Some(&i) = at.iter().rev().find(|&&i| events[i].compaction.is_some()) {
            cut = cut.min(i);
        }
    }
    if let Some(window) = settings.window {
        cut = cut.min(window_start(events, selected, window, token_end, continued));
    }
    cut
}

/// Where the sliding window after this turn can start, at the earliest.
///
/// The window counts invocations (in order of first appearance) whose
/// latest event is past the newest compaction's end, and starts `overlap`
/// invocations before the first of them. A compaction made during the turn
/// (the token threshold's, over events past its own bound) ends later than
/// both bounds, so counting from the smaller of the two bounds gives the
/// earliest start. An invocation the turn continues (a resumed one, or the
/// one whose call its message answers: google-adk appends the turn's
/// events to it) is new after the turn whatever its events' times. A NaN
/// bound keeps everything.
fn window_start(
    events: &[EventView],
    selected: &[usize],
    window: SlidingWindow,
    token_end: f64,
    continued: &[Sym],
) -> usize {
    let sliding_end = last_compaction_end(events, selected).unwrap_or(0.0);
    if sliding_end.is_nan() || token_end.is_nan() {
        return 0;
    }
    let bound = sliding_end.min(token_end);
    let mut order: Vec<(Sym, usize, f64)> = Vec::new();
    let mut place: FastMap<Sym, usize> = FastMap::default();
    for &i in selected {
        let e = &events[i];
        let (Some(inv), None) = (e.invocation, e.compaction) else {
            continue;
        };
        match place.get(&inv) {
            Some(&k) => {
                if e.timestamp > order[k].2 {
                    order[k].2 = e.timestamp;
                }
            }
            None => {
                place.insert(inv, order.len());
                order.push((inv, i, if e.timestamp > 0.0 { e.timestamp } else { 0.0 }));
            }
        }
    }
    let first_new = order
        .iter()
        .position(|&(inv, _, latest)| latest > bound || continued.contains(&inv))
        .unwrap_or(order.len());
    let start = first_new.saturating_sub(window.overlap);
    // The window opens at the start invocation's first event, a compaction
    // of it included (the order above skips compactions, the opening not),
    // and a later compaction can make any invocation from `start` on the
    // start one: the earliest first event among them.
    let mut from: FastSet<Sym> = order[start.min(order.len())..]
        .iter()
        .map(|&(inv, _, _)| inv)
        .collect();
    // A continued invocation with no live raw event yet (its calls rewound)
    // is ordered after all of them once the turn appends to it.
    from.extend(continued.iter().filter(|inv| !place.contains_key(inv)));
    selected
        .iter()
        .copied()
        .find(|&i| events[i].invocation.is_some_and(|inv| from.contains(&inv)))
        .unwrap_or(events.len())
}

/// The first event and the first raw event among `selected` of every
/// invocation with an event at or after `cut`: the window orders
/// invocations by their first raw event and opens at their first event.
fn first_of_cut_invocations(
    events: &[EventView],
    selected: &[usize],
    cut: usize,
    keep: &mut [bool],
) {
    let after: FastSet<Sym> = events[cut.min(events.len())..]
        .iter()
        .filter_map(|e| e.invocation)
        .collect();
    if after.is_empty() {
        return;
    }
    let mut seen: FastSet<(Sym, bool)> = FastSet::default();
    for &i in selected.iter().take_while(|&&i| i < cut) {
        let e = &events[i];
        if let Some(inv) = e.invocation.filter(|inv| after.contains(inv)) {
            let first = seen.insert((inv, false));
            let first_raw = e.compaction.is_none() && seen.insert((inv, true));
            if first || first_raw {
                keep[i] = true;
            }
        }
    }
}

/// The ids an event names: its calls, responses, long-running and pending
/// markers, its branch's refs and its scope.
fn named<'a>(
    e: &EventView,
    f: &Facts,
    (ids, refs): (&'a [Sym], &'a [Sym]),
) -> impl Iterator<Item = Sym> + 'a {
    let spans = [e.calls, e.responses, e.long_running, e.pending];
    spans
        .into_iter()
        .flat_map(move |s| s.of(ids).iter().copied())
        .chain(f.refs.of(refs).iter().copied())
        .chain(e.scope)
}

/// Keeps, until nothing changes, every event that names an id a kept event
/// (or the turn's new message) names.
fn close_over_ids(
    events: &[EventView],
    facts: &[Facts],
    ids: (&[Sym], &[Sym]),
    answering: &[Sym],
    keep: &mut [bool],
) {
    let mut holders: FastMap<Sym, Vec<usize>> = FastMap::default();
    for (i, (e, f)) in events.iter().zip(facts).enumerate() {
        if !keep[i] {
            for id in named(e, f, ids) {
                holders.entry(id).or_default().push(i);
            }
        }
    }
    if holders.is_empty() {
        return;
    }
    let mut todo: Vec<Sym> = answering.to_vec();
    let mut done: FastSet<Sym> = FastSet::default();
    for (i, (e, f)) in events.iter().zip(facts).enumerate() {
        if keep[i] {
            todo.extend(named(e, f, ids).filter(|id| holders.contains_key(id)));
        }
    }
    while let Some(id) = todo.pop() {
        if !done.insert(id) {
            continue;
        }
        for &i in holders.get(&id).map_or(&[][..], Vec::as_slice) {
            if !keep[i] {
                keep[i] = true;
                todo.extend(named(&events[i], &facts[i], ids).filter(|id| !done.contains(id)));
            }
        }
    }
}

#[cfg(test)]
#[path = "lean_tests.rs"]
mod tests;
