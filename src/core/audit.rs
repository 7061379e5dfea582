//! The audit of a stored session: which events interval coverage hid from
//! every prompt without any summary standing for them, which it shows twice.
//!
//! google-adk records a compaction as an interval and hides every raw event
//! stamped inside it; what the summary was actually handed is not stored,
//! nor who made it (the compaction event's invocation id is a fresh one).
//! The audit learns it by replaying google-adk's window selection (the
//! parity engine, [`super::select`]) over the copy of the session each plausible maker held ([`super::replay`]),
//! keeping the selections whose first and last timestamps are the
//! compaction's interval (google-adk's summarizer writes exactly those).
//! Where no maker's copy reproduces it, the store right before it and then
//! shorter prefixes are tried: events stored after the selection and before
//! the compaction were appended while the summarizer ran. Every copy that
//! reproduces it is a reading. A compaction written in exact mode says
//! what it stands for itself (its interval minus its holes, events stored
//! before it).
//!
//! Then the prompt the session yields now for each isolation scope
//! (google-adk's `_process_compaction_events` over that scope's live
//! events, or exact mode's prompt where exact-mode records are stored) is
//! compared with what the scope's surviving summaries stand for:
//! - **hidden**: a live event with parts, absent from its scope's prompt
//!   and from every surviving summary's input under every reading;
//! - **duplicated**: an event raw in the prompt and inside a surviving
//!   summary's input under every reading;
//! - **undecidable**: either, under some readings only.

use super::coverage::{self, Coverage};
use super::event::{EventView, Sym};
use super::exact::{Extent, Hole, Record};
use super::filter::{self, Item};
use super::loading::{loaded, views_at};
use super::recover::{self, Recovered};
use super::replay::{readings_of, REPLAYED};
pub use super::replay::{Order, Session, Settings, Trigger};
use super::replay_tail::{Index, FIRST_TAIL};
use super::rewind;
use super::select::{self, settled, Complete};
use super::window;
use stamped::Stamped;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

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
    /// The other copies of the session that reproduce it too, where the
    /// store does not say which one the selection was made over: what each
    /// hands, `(handed, seeds)` (empty: one reading, the one above).
    pub alternatives: Vec<(Vec<usize>, Vec<usize>)>,
    /// Why there are several readings (`None`: one at most).
    pub ambiguity: Option<Ambiguity>,
    pub record: RecordKind,
}

/// Why the store does not say which copy of the session a compaction's
/// selection was made over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ambiguity {
    /// Several invocations' copies reproduce it: its maker is unknown.
    Maker,
    /// Its maker resumed after a pause without a user-authored event: its
    /// copy may have been fetched at any of the runs' starts, and several
    /// reproduce it.
    Resumed,
    /// No maker's copy reproduces it; several prefixes of the store do.
    Prefix,
    /// It has one reading, but rolls up an earlier summary that has several.
    Seed,
}

impl Ambiguity {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Ambiguity::Maker => "maker",
            Ambiguity::Resumed => "resumed",
            Ambiguity::Prefix => "prefix",
            Ambiguity::Seed => "seed",
        }
    }
}

impl Replayed {
    /// Every reading that reproduces it: `(handed, seeds)`, the first one
    /// first (none when it was not reproduced).
    fn readings(&self) -> impl Iterator<Item = (&[usize], &[usize])> {
        let first = self
            .known
            .then_some((self.handed.as_slice(), self.seeds.as_slice()));
        first.into_iter().chain(
            self.alternatives
                .iter()
                .map(|(h, s)| (h.as_slice(), s.as_slice())),
        )
    }
}

/// Why an event was hidden.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Stamped like an event the summary was handed, or on its interval's
    /// bound, and not handed itself.
    TiedTimestamp,
    /// Stored on the other side of a handed event than its timestamp says.
    OutOfOrderTimestamp,
    /// Stored after the summary's selection and before the summary.
    AppendedWhileSummarizing,
    /// Hidden by a compaction whose exact-mode record does not validate.
    MalformedRecord,
    /// None of the above (or a compaction the replay cannot reproduce).
    Unknown,
}

impl Cause {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Cause::TiedTimestamp => "tied_timestamp",
            Cause::OutOfOrderTimestamp => "out_of_order_timestamp",
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

/// What an undecidable event would be under some readings of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    Hidden,
    Duplicated,
}

/// An event whose fate the store cannot decide: a surviving summary
/// reproduces under several copies of the session (its maker unknown), and
/// it was handed the event under some of them and not under others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Undecidable {
    pub position: usize,
    /// Hidden (absent from the prompt) or duplicated (raw in it) where the
    /// summary was not, resp. was, handed it.
    pub could_be: Finding,
    /// The surviving compaction whose readings disagree.
    pub compaction: usize,
    /// How many readings reproduce that compaction.
    pub readings: usize,
    /// Why it has several (or, with one, a summary it rolls up has).
    pub reason: Ambiguity,
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
    pub undecidable: Vec<Undecidable>,
    pub stalled: Option<Stalled>,
    /// Items of the root scope's prompt the session yields now.
    pub prompt_size: usize,
    /// The prompt could not be built (google-adk's own sort would fail).
    pub prompt_error: Option<String>,
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

/// Audits one session: `intern` gives the symbol of an invocation id (for
/// a record's holes; `None` where no event has it, so no hole can name
/// one).
pub fn audit(
    session: Session<'_>,
    intern: impl FnMut(&str) -> Option<Sym>,
    order: Order,
    settings: Settings,
) -> Audit {
    audit_over(session, intern, order, settings, Some(FIRST_TAIL))
}

/// [`audit`], its replays run over tails of the makers' copies starting at
/// `first_tail` events, or over the whole copies (`None`: the restatement
/// the tails are tested against).
pub(super) fn audit_over(
    session: Session<'_>,
    mut intern: impl FnMut(&str) -> Option<Sym>,
    order: Order,
    settings: Settings,
    first_tail: Option<usize>,
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
    // Built when first needed: the replay's index by the first compaction
    // to replay, the stamps by the first exact-mode record.
    let mut ix: Option<Index> = None;
    let mut stamped: Option<Stamped> = None;
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
            alternatives: Vec::new(),
            ambiguity: None,
            record,
        };
        if let Some(Ok(record)) = &parsed[k] {
            // It says what it stands for: its interval minus its holes,
            // events stored before it.
            let x = extent(k, record, &mut intern);
            let stamped = stamped.get_or_insert_with(|| Stamped::new(events));
            (r.handed, r.seeds) = stamped.within(events, &x);
            r.known = true;
        } else {
            let ix = ix.get_or_insert_with(|| Index::new(events, ids, session.user, first_tail));
            let found = readings_of(&session, ix, k, order, settings, (start, end), e.scope);
            r.ambiguity = ambiguity(found.iter().map(|(.., copy)| (copy.maker, copy.fetched)));
            let mut found = found.into_iter();
            if let Some((trigger, handed, seeds, copy)) = found.next() {
                r.trigger = Some(trigger);
                r.handed = handed;
                r.seeds = seeds;
                r.selected_over = copy.own.last().map_or(copy.fetched, |&l| l + 1);
                r.unseen = copy.unseen;
                r.known = true;
                r.alternatives = found.map(|(_, h, z, _)| (h, z)).collect();
            }
        }
        index_of[k] = compactions.len();
        compactions.push(r);
    }
    // The prompts the session yields now, one per isolation scope: google-adk
    // assembles a scope's prompt from that scope's events alone (and
    // filters compaction over them), so a summary of one scope never hides
    // another scope's events, and no scope shows another's.
    let all: Vec<usize> = (0..n).collect();
    let at = loaded(events, &all, order, session.event_ids);
    let views = views_at(events, &at);
    let live = rewind::apply_rewinds(&views);
    let mut scopes: Vec<Option<Sym>> = Vec::new();
    for &i in &live {
        if !scopes.contains(&views[i].scope) {
            scopes.push(views[i].scope);
        }
    }
    let mut hidden = Vec::new();
    let mut duplicated = Vec::new();
    let mut undecidable = Vec::new();
    let mut prompt_size = 0;
    let mut prompt_error = None;
    for scope in scopes {
        // Positions in `views` of the scope's live events, in loading order.
        let mine: Vec<usize> = live
            .iter()
            .copied()
            .filter(|&i| views[i].scope == scope)
            .collect();
        let scoped = views_at(&views, &mine);
        let items: Result<Vec<Item>, String> = if exact_session {
            let extents: Vec<Extent> = mine
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
            let cov = Coverage::new(&scoped, extents);
            Ok(coverage::prompt(&scoped, &cov))
        } else {
            filter::process_compaction_events(&scoped).map_err(|e| e.to_string())
        };
        let (items, injected) = match items.and_then(|items| {
            let injected = recovered(&scoped, &items, ids)?;
            Ok((items, injected))
        }) {
            Ok(found) => found,
            Err(e) => {
                prompt_error.get_or_insert(e);
                continue;
            }
        };
        if scope.is_none() {
            prompt_size = items.len() + injected.len();
        }
        let to_stored = |q: usize| at[mine[q]];
        let mut raw_in_prompt = vec![false; n];
        let mut surviving: Vec<usize> = Vec::new();
        for item in &items {
            match *item {
                Item::Raw(q) => raw_in_prompt[to_stored(q)] = true,
                Item::Summary(q) => surviving.push(to_stored(q)),
            }
        }
        for &q in &injected {
            raw_in_prompt[to_stored(q)] = true;
        }
        let surely = first_standing_for(&compactions, &index_of, &surviving, n, true);
        let maybe = first_standing_for(&compactions, &index_of, &surviving, n, false);
        for &i in &mine {
            let p = at[i];
            if events[p].compaction.is_some() || !has_parts[p] {
                continue;
            }
            let undecided = |could_be, s: usize| {
                let c = &compactions[index_of[s]];
                Undecidable {
                    position: p,
                    could_be,
                    compaction: s,
                    readings: c.readings().count(),
                    reason: c.ambiguity.unwrap_or(Ambiguity::Seed),
                }
            };
            match (raw_in_prompt[p], surely[p], maybe[p]) {
                (true, Some(s), _) => duplicated.push(Duplicated {
                    position: p,
                    compaction: s,
                }),
                (true, None, Some(s)) => undecidable.push(undecided(Finding::Duplicated, s)),
                (false, None, Some(s)) => undecidable.push(undecided(Finding::Hidden, s)),
                (false, None, None) => {
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
    if prompt_error.is_some() {
        hidden.clear();
        duplicated.clear();
        undecidable.clear();
        prompt_size = 0;
    }
    let by_position = |a: &usize, b: &usize| a.cmp(b);
    hidden.sort_by(|a, b| by_position(&a.position, &b.position));
    duplicated.sort_by(|a, b| by_position(&a.position, &b.position));
    undecidable.sort_by(|a, b| by_position(&a.position, &b.position));
    let stalled = stall(ids, &views, &live, settings).map(|(trigger, backlog)| {
        let invocations: std::collections::BTreeSet<Sym> = backlog
            .iter()
            .filter_map(|&q| views[q].invocation)
            .collect();
        let prompt_then = compactions.last().and_then(|c| {
            let upto: Vec<usize> = (0..=c.position).collect();
            let at = loaded(events, &upto, order, session.event_ids);
            let v = views_at(events, &at);
            let live: Vec<usize> = rewind::apply_rewinds(&v)
                .into_iter()
                .filter(|&i| v[i].scope.is_none())
                .collect();
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
        undecidable,
        stalled,
        prompt_size,
        prompt_error,
    }
}

/// Why readings over the copies `(maker, fetched)` (`None`: a prefix of the
/// store, no maker's) are several: `None` when they are not.
fn ambiguity(copies: impl Iterator<Item = (Option<Sym>, usize)>) -> Option<Ambiguity> {
    let mut copies = copies.peekable();
    let (maker, fetched) = *copies.peek()?;
    let (mut several, mut one_maker, mut one_fetch) = (false, true, true);
    for (j, (m, f)) in copies.enumerate() {
        several = j > 0;
        one_maker &= m == maker;
        one_fetch &= f == fetched;
    }
    match (several, maker) {
        (false, _) => None,
        (true, None) => Some(Ambiguity::Prefix),
        // One maker, its copies fetched at different runs' starts.
        (true, Some(_)) if one_maker && !one_fetch => Some(Ambiguity::Resumed),
        // Different makers, or one whose copies differ by the compactions
        // stored since it fetched (whoever wrote them).
        (true, Some(_)) => Some(Ambiguity::Maker),
    }
}

/// Whether a configured entry point is due on the whole session (`views`,
/// loaded, `live` after rewinds) and selects nothing: the trigger and the
/// events it would consider (positions in `views`).
/// The events of `scoped` (a scope's live events, loaded) that google-adk's
/// `_recover_compacted_function_calls` puts back into the prompt `items`
/// raw: a function call compaction removed while a response to it survives
/// (a long-running call's result posted back after the call was
/// summarized), with its compacted sibling responses. `Err`: what
/// google-adk would raise.
fn recovered(scoped: &[EventView], items: &[Item], ids: &[Sym]) -> Result<Vec<usize>, String> {
    let prompt: Vec<EventView> = items
        .iter()
        .map(|item| match *item {
            Item::Raw(q) => scoped[q],
            // A summary is a new Event: an identity of its own (stored
            // events are identified by storage position), no calls or
            // responses.
            Item::Summary(q) => EventView {
                ident: u64::MAX - q as u64,
                timestamp: scoped[q].timestamp,
                ..EventView::default()
            },
        })
        .collect();
    let out = recover::recover_compacted_function_calls(&prompt, scoped, ids)
        .map_err(|e| e.to_string())?;
    Ok(out
        .into_iter()
        .flatten()
        .filter_map(|r| match r {
            Recovered::Injected(j) => Some(j),
            Recovered::Kept(_) => None,
        })
        .collect())
}

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
    let mut reader = Complete { views, ids };
    if let Some(cfg) = settings.sliding {
        let due = window::sliding_window_candidates(views, &unscoped, cfg);
        if !due.is_empty()
            && settled(select::sliding(&mut reader, cfg, REPLAYED))
                .to_compact
                .is_empty()
        {
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
            && settled(select::token(&mut reader, None, None, retention, REPLAYED))
                .to_compact
                .is_empty()
        {
            return Some((Trigger::TokenThreshold, c.candidates));
        }
    }
    None
}

/// For each of the `n` events, the first of `surviving` (compaction
/// positions, in prompt order) whose summary stands for it: under every
/// reading of each compaction on the way (`every`) or under some.
///
/// A compaction stands for the events it was handed and, through its seeds
/// (compactions stored before it), for theirs; under `every`, a compaction
/// with several readings stands for what all of them agree on. Walked from
/// each survivor in turn, a compaction already reached from an earlier one
/// through single readings stands for nothing that one did not: it is
/// walked once. Linear in the events and the readings, but for the
/// intersections of compactions with several readings, built where met.
fn first_standing_for(
    compactions: &[Replayed],
    index_of: &[usize],
    surviving: &[usize],
    n: usize,
    every: bool,
) -> Vec<Option<usize>> {
    let mut out: Vec<Option<usize>> = vec![None; n];
    let mut walked = vec![false; compactions.len()];
    let mut standing = Standing {
        compactions,
        index_of,
        memo: HashMap::new(),
    };
    let mut stack = Vec::new();
    for &s in surviving {
        let Some(&first) = index_of.get(s).filter(|&&c| c < compactions.len()) else {
            continue;
        };
        stack.push(first);
        while let Some(c) = stack.pop() {
            if std::mem::replace(&mut walked[c], true) {
                continue;
            }
            let r = &compactions[c];
            if every && r.readings().nth(1).is_some() {
                for &p in standing.every(c).iter() {
                    out[p].get_or_insert(s);
                }
                continue;
            }
            for (handed, seeds) in r.readings() {
                for &h in handed {
                    out[h].get_or_insert(s);
                }
                stack.extend(earlier(index_of, seeds, c));
            }
        }
    }
    out
}

/// The compactions (indices) of `seeds` stored before compaction `c`.
fn earlier<'a>(
    index_of: &'a [usize],
    seeds: &'a [usize],
    c: usize,
) -> impl Iterator<Item = usize> + 'a {
    seeds
        .iter()
        .filter_map(move |&z| index_of.get(z).copied().filter(|&k| k < c))
}

/// What compactions stand for under every reading, built and kept as met.
struct Standing<'a> {
    compactions: &'a [Replayed],
    index_of: &'a [usize],
    memo: HashMap<usize, Rc<Vec<usize>>>,
}

impl Standing<'_> {
    /// What compaction `c` stands for under every reading (sorted positions).
    fn every(&mut self, c: usize) -> Rc<Vec<usize>> {
        if let Some(found) = self.memo.get(&c) {
            return Rc::clone(found);
        }
        let compactions = self.compactions;
        let mut agreed: Option<Vec<usize>> = None;
        for (handed, seeds) in compactions[c].readings() {
            let mine = self.union(c, handed, seeds);
            agreed = Some(match agreed {
                None => mine,
                Some(so_far) => so_far
                    .into_iter()
                    .filter(|p| mine.binary_search(p).is_ok())
                    .collect(),
            });
        }
        let found = Rc::new(agreed.unwrap_or_default());
        self.memo.insert(c, Rc::clone(&found));
        found
    }

    /// `handed` and what the seeds stored before `c` stand for under every
    /// reading (sorted positions).
    fn union(&mut self, c: usize, handed: &[usize], seeds: &[usize]) -> Vec<usize> {
        let compactions = self.compactions;
        let mut out = handed.to_vec();
        let mut walked = HashSet::new();
        let mut stack: Vec<usize> = earlier(self.index_of, seeds, c).collect();
        while let Some(k) = stack.pop() {
            if !walked.insert(k) {
                continue;
            }
            let r = &compactions[k];
            if r.readings().nth(1).is_some() {
                out.extend(self.every(k).iter());
                continue;
            }
            for (handed, seeds) in r.readings() {
                out.extend_from_slice(handed);
                stack.extend(earlier(self.index_of, seeds, k));
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
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
    // Only its own scope's compactions can hide it (`surviving` are its
    // scope's already).
    let holds = |c: usize| {
        events[c].scope == events[p].scope
            && events[c]
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

#[path = "audit_stamped.rs"]
mod stamped;

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
