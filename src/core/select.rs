//! The two selections google-adk compacts by, each decided whole here: the
//! sliding window of `_run_compaction_for_sliding_window` and the token
//! threshold of `_run_compaction_for_token_threshold_config`, under a
//! family's [`Rules`]. A selection takes the events it reads (rewinds,
//! scopes), the window (`core::window`), the function-call pairing trim,
//! the latest prompt token count google-adk trusts, and the pricing
//! `_is_range_worth_compacting` reads; its answer is a [`Plan`] of
//! positions.
//!
//! A decision reads some fields of every event and others only where it
//! looks (the calls of the window, the usage counts its scan reaches). It
//! asks a [`Reader`] for those: the binding reads them from the Python
//! objects then (from the session index where it holds them); the audit
//! and the analysis pass [`Complete`], whose views hold every field.

use super::error::{guarded, CoreError};
use super::event::{EventView, Need, Sym};
use super::filter::{self, History, Item};
use super::ranges;
use super::rewind;
use super::window::{self, SlidingWindow};
use std::borrow::Cow;
use std::sync::Arc;

/// Where google-adk's families select differently (the Python profile's
/// flags, see `adk_fastcompact._families.Profile`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rules {
    /// Only unscoped events (sliding window) or the asked scope's (token
    /// threshold) are compacted, as in 2.13; before, every event.
    pub scoped: bool,
    /// The pairing trim retries past provably dead calls (2.12 on).
    pub dead_calls: bool,
    /// The selection is priced for `_is_range_worth_compacting` (2.12 on).
    pub priced: bool,
    /// The observed prompt token count is the agent's own, newer than the
    /// newest compaction (2.10 on); before, the newest of any event.
    pub own_counts: bool,
    /// Rewound invocations are left out first (2.5 on); before, every event.
    pub rewinds: bool,
    /// The pairing trim keeps the longest self-contained prefix (2.3 on);
    /// before, it truncates before pending calls and unresolved requests.
    pub self_contained: bool,
}

impl Rules {
    /// Each rule with its name, in declaration order.
    pub fn named(self) -> [(&'static str, bool); 6] {
        [
            ("scoped", self.scoped),
            ("dead_calls", self.dead_calls),
            ("priced", self.priced),
            ("own_counts", self.own_counts),
            ("rewinds", self.rewinds),
            ("self_contained", self.self_contained),
        ]
    }

    /// google-adk 2.13's rules, which exact mode and the audit follow.
    pub const LATEST: Rules = Rules {
        scoped: true,
        dead_calls: true,
        priced: true,
        own_counts: true,
        rewinds: true,
        self_contained: true,
    };
}

/// What a selection needs of every event before it looks closer.
pub const LIGHT: Need = Need {
    timestamp: true,
    compaction: true,
    rewind: true,
    invocation: true,
    parts: false,
    window: true,
    pairing: false,
    usage: false,
};

/// ... and of the events whose function calls it pairs.
const CALLS: Need = Need {
    parts: true,
    pairing: true,
    ..LIGHT
};

/// ... and of the events the token count's scan reaches.
const USAGE: Need = Need {
    usage: true,
    ..Need::NONE
};

/// The events of one call, and what is not yet known of them.
pub trait Reader {
    /// What a failed read is (the core's own refusals convert into it).
    type Error: From<CoreError>;
    /// The call's views, in the list's order.
    fn views(&self) -> &[EventView];
    /// The id arena their spans index.
    fn ids(&self) -> &[Sym];
    /// Completes the views at `at` with the fields of `need`.
    fn complete(&mut self, at: &[usize], need: Need) -> Result<(), Self::Error>;
    /// Runs `work`, pure Rust that asks the reader nothing (the binding
    /// releases the interpreter around it).
    fn detached<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        work()
    }
}

/// Views that hold every field already (the audit's, the analysis').
pub struct Complete<'a> {
    pub views: &'a [EventView],
    pub ids: &'a [Sym],
}

impl Reader for Complete<'_> {
    type Error = CoreError;

    fn views(&self) -> &[EventView] {
        self.views
    }

    fn ids(&self) -> &[Sym] {
        self.ids
    }

    fn complete(&mut self, _at: &[usize], _need: Need) -> Result<(), CoreError> {
        Ok(())
    }
}

/// A plan over [`Complete`] views: such a selection fails only on a bug of
/// ours (a panic its guard caught), which stays a panic for the caller's
/// own guard.
pub fn settled(plan: Result<Plan, CoreError>) -> Plan {
    match plan {
        Ok(plan) => plan,
        Err(err) => panic!("{err}"),
    }
}

/// Events a selection takes: its answer names them by `u32` position.
pub const MAX_EVENTS: usize = u32::MAX as usize;

/// What a selection was asked besides its list (its answer depends on
/// nothing else; the binding remembers the last answer by it).
#[derive(Clone, Debug, PartialEq)]
pub enum Asked {
    /// The sliding window's interval and overlap, and the family's rules.
    Sliding {
        interval: usize,
        overlap: usize,
        rules: Rules,
    },
    /// The token threshold's isolation scope (`None` inside: every scope,
    /// as google-adk before 2.13 compacts), retention size and agent name
    /// (`str` or `None`, compared by value).
    Token {
        scope: Option<Option<Box<str>>>,
        retention: usize,
        agent: Option<Box<str>>,
        rules: Rules,
    },
}

/// A selection's answer as positions in its list.
#[derive(Debug, Default)]
pub struct Plan {
    /// The rewound events (token threshold; `None`: every event).
    pub rewound: Option<Vec<u32>>,
    /// The events handed out (`None`: every event).
    pub handed: Option<Vec<u32>>,
    /// The events to summarize (the token threshold's without its seed).
    pub to_compact: Vec<u32>,
    /// The latest prompt token count google-adk trusts (token threshold;
    /// `None`: it estimates one).
    pub count: Option<i64>,
    /// The compaction whose summary seeds the token threshold's.
    pub seed_from: Option<u32>,
    /// The pricing, when the family prices and there is something to
    /// compact.
    pub priced: Option<Priced>,
}

/// What appending the summary of a selection google-adk prices with (its
/// weightless summary) changes in the filtered history of the handed-out
/// events: the request contents removed and added, each a position and
/// whether it is a summary's.
#[derive(Debug)]
pub struct Priced {
    pub removed: Vec<(u32, bool)>,
    pub added: Vec<(u32, bool)>,
    /// The weightless summary's own (empty) content is added.
    pub weightless_added: bool,
    /// The latest surviving summary of the handed-out events.
    pub previous: Option<u32>,
    /// Summary Events google-adk builds while measuring.
    pub materialized: usize,
    /// The handed-out events' filtered history (`None` for a list too long
    /// for one, see [`History::of`]).
    pub history: Option<Arc<History>>,
}

impl Plan {
    /// Bytes held (the history counted whole, though handles may share it).
    pub fn memory_bytes(&self) -> usize {
        let positions = |v: &Option<Vec<u32>>| v.as_ref().map_or(0, |v| v.capacity() * 4);
        std::mem::size_of::<Self>()
            + positions(&self.rewound)
            + positions(&self.handed)
            + self.to_compact.capacity() * 4
            + self.priced.as_ref().map_or(0, |p| {
                (p.removed.capacity() + p.added.capacity()) * 8
                    + p.history.as_ref().map_or(0, |h| h.memory_bytes())
            })
    }
}

/// `_run_compaction_for_sliding_window`'s selection: the live events the
/// family reads, the window of `cfg` over them, trimmed to keep function
/// calls paired, and priced.
pub fn sliding<R: Reader>(
    reader: &mut R,
    cfg: SlidingWindow,
    rules: Rules,
) -> Result<Plan, R::Error> {
    let n = reader.views().len();
    let live = selected_from(reader.views(), rules, |e| {
        !rules.scoped || e.scope.is_none()
    });
    let candidates = guarded(|| {
        Ok(window::sliding_window_candidates(
            reader.views(),
            &live,
            cfg,
        ))
    })?;
    let mut full = vec![false; n];
    let keep = trim(reader, &mut full, &candidates, &live, rules)?;
    let to_compact = &candidates[..keep];
    let priced = match to_compact.is_empty() || !rules.priced {
        true => None,
        false => {
            let views = reader.views();
            let weightless = window::weightless_compaction(views, to_compact);
            Some(price(&subset(views, &live), &live, weightless)?)
        }
    };
    Ok(Plan {
        rewound: None,
        handed: positions(&live, n),
        to_compact: to_compact.iter().map(|&i| i as u32).collect(),
        count: None,
        seed_from: None,
        priced,
    })
}

/// `_run_compaction_for_token_threshold_config`'s selection before the
/// summarizer: the rewound events, those of `scope` (every one without
/// `scoped`), the latest prompt token count of `agent` (any agent without
/// `own_counts`), the candidates past the latest surviving compaction up to
/// the retained tail, trimmed to keep function calls paired, the rolling
/// summary's seed, and the pricing (the seed's start priced first, as
/// google-adk does).
pub fn token<R: Reader>(
    reader: &mut R,
    scope: Option<Sym>,
    agent: Option<Sym>,
    retention: usize,
    rules: Rules,
) -> Result<Plan, R::Error> {
    let n = reader.views().len();
    let rewound = selected_from(reader.views(), rules, |_| true);
    let scoped: Vec<usize> = match rules.scoped {
        true => {
            let views = reader.views();
            rewound
                .iter()
                .copied()
                .filter(|&i| views[i].scope == scope)
                .collect()
        }
        false => rewound.clone(),
    };
    let agent = agent.filter(|_| rules.own_counts);
    let count = latest_count(reader, &scoped, agent, rules.own_counts)?;
    let candidates = guarded(|| Ok(window::token_candidates(reader.views(), &scoped)))?;
    let mut full = vec![false; n];
    read_calls(reader, &mut full, &candidates.candidates)?;
    let window = guarded(|| {
        let (views, ids) = (reader.views(), reader.ids());
        Ok(window::token_window(views, ids, &candidates, retention).to_vec())
    })?;
    let keep = trim(reader, &mut full, &window, &scoped, rules)?;
    let views = reader.views();
    let selection = window::finish_token_selection(views, &candidates, &window[..keep]);
    let priced = match selection.to_compact.is_empty() || !rules.priced {
        true => None,
        false => {
            let seed_start = selection
                .seed_from
                .and_then(|i| views[i].compaction)
                .and_then(|c| c.start);
            let stamps = seed_start
                .into_iter()
                .chain(selection.to_compact.iter().map(|&i| views[i].timestamp));
            let weightless = window::weightless_over(stamps);
            Some(price(&subset(views, &scoped), &scoped, weightless)?)
        }
    };
    Ok(Plan {
        rewound: positions(&rewound, n),
        handed: positions(&scoped, n),
        to_compact: selection.to_compact.iter().map(|&i| i as u32).collect(),
        count,
        seed_from: selection.seed_from.map(|i| i as u32),
        priced,
    })
}

/// google-adk's `_latest_prompt_token_count` over `scoped` (see
/// [`window::latest_prompt_token_count`]), asking for usage counts and
/// authors only of the events its scan reaches, as google-adk reads them:
/// newest first, in blocks that double in size, never past the newest
/// compaction where `since_compaction` (2.10 on) stops the scan.
pub fn latest_count<R: Reader>(
    reader: &mut R,
    scoped: &[usize],
    agent: Option<Sym>,
    since_compaction: bool,
) -> Result<Option<i64>, R::Error> {
    // The scan stops at the newest compaction (or reads them all).
    let first = match since_compaction {
        true => {
            let views = reader.views();
            scoped
                .iter()
                .rposition(|&i| views[i].compaction.is_some())
                .unwrap_or(0)
        }
        false => 0,
    };
    let (mut end, mut block) = (scoped.len(), 32);
    while end > first {
        let start = end.saturating_sub(block).max(first);
        let views = reader.views();
        let todo: Vec<usize> = scoped[start..end]
            .iter()
            .copied()
            .filter(|&i| !since_compaction || views[i].compaction.is_none())
            .collect();
        reader.complete(&todo, USAGE)?;
        let views = reader.views();
        if let Some(count) =
            window::latest_prompt_token_count(views, &scoped[start..end], agent, since_compaction)
        {
            return Ok(Some(count));
        }
        (end, block) = (start, block * 2);
    }
    // Every block scanned, none counted (the oldest one ends at the
    // compaction, which stops the scan).
    Ok(None)
}

/// The live events of the session: rewinds applied, then only those `keep`s.
pub fn live(views: &[EventView], keep: impl Fn(&EventView) -> bool) -> Vec<usize> {
    rewind::apply_rewinds(views)
        .into_iter()
        .filter(|&i| keep(&views[i]))
        .collect()
}

/// The events a selection reads: [`live`] where the family applies rewinds,
/// else every event `keep` admits.
fn selected_from(
    views: &[EventView],
    rules: Rules,
    keep: impl Fn(&EventView) -> bool,
) -> Vec<usize> {
    match rules.rewinds {
        true => live(views, keep),
        false => (0..views.len()).filter(|&i| keep(&views[i])).collect(),
    }
}

/// Completes the views at `indices` with their function-call data, once
/// each.
fn read_calls<R: Reader>(
    reader: &mut R,
    full: &mut [bool],
    indices: &[usize],
) -> Result<(), R::Error> {
    let todo: Vec<usize> = indices.iter().copied().filter(|&i| !full[i]).collect();
    reader.complete(&todo, CALLS)?;
    for i in todo {
        full[i] = true;
    }
    Ok(())
}

/// The pairing trim of `window`: the strict pass reads the window's calls;
/// only when its answer is not settled are the calls of all of `live` read
/// for google-adk's dead-call pass (2.12 on: `dead_calls`; before, the
/// strict pass is the answer). Before 2.3 (`self_contained` off), the
/// window is truncated before what the whole session leaves pending.
fn trim<R: Reader>(
    reader: &mut R,
    full: &mut [bool],
    window: &[usize],
    live: &[usize],
    rules: Rules,
) -> Result<usize, R::Error> {
    read_calls(reader, full, window)?;
    if !rules.self_contained {
        read_calls(reader, full, live)?;
        let (views, ids) = (reader.views(), reader.ids());
        return Ok(guarded(|| {
            Ok(window::truncated_prefix(views, ids, window, live))
        })?);
    }
    let (views, ids) = (reader.views(), reader.ids());
    let (strict, settled) = guarded(|| Ok(window::strict_prefix(views, ids, window)))?;
    if settled || !rules.dead_calls {
        return Ok(strict);
    }
    read_calls(reader, full, live)?;
    let (views, ids) = (reader.views(), reader.ids());
    Ok(guarded(|| {
        Ok(window::longest_self_contained_prefix(
            views,
            ids,
            window,
            Some(live),
        ))
    })?)
}

/// What google-adk's `_is_range_worth_compacting` measures, as presence
/// changes of the filtered history of the handed-out events (`handed`,
/// whose views are `views`) when the weightless summary of the range is
/// appended.
fn price(
    views: &[EventView],
    handed: &[usize],
    weightless: Option<EventView>,
) -> Result<Priced, CoreError> {
    let weightless = weightless.ok_or(CoreError::Internal("no weightless summary".into()))?;
    let history = guarded(|| History::of(views))?;
    let diff = match history.as_ref().and_then(|h| h.diff(weightless)) {
        Some(diff) => diff,
        None => guarded(|| filter::presence_diff(views, weightless))?,
    };
    let previous = ranges::compaction_ranges(views)
        .last()
        .map(|r| handed[r.index] as u32);
    // Positions in the list; the weightless summary (past the handed-out
    // events) is flagged instead.
    let parts = |items: &[Item]| -> Vec<(u32, bool)> {
        items
            .iter()
            .filter_map(|&item| {
                let (Item::Raw(k) | Item::Summary(k)) = item;
                let summary = matches!(item, Item::Summary(_));
                handed.get(k).map(|&i| (i as u32, summary))
            })
            .collect()
    };
    Ok(Priced {
        removed: parts(&diff.removed),
        added: parts(&diff.added),
        weightless_added: diff.added.contains(&Item::Summary(handed.len())),
        previous,
        materialized: diff.materialized,
        history: history.map(Arc::new),
    })
}

/// `idx` (increasing) as positions, `None` when it names every one of `n`.
fn positions(idx: &[usize], n: usize) -> Option<Vec<u32>> {
    (idx.len() != n).then(|| idx.iter().map(|&i| i as u32).collect())
}

/// The views of `idx` (increasing): `views` itself when `idx` names them all
/// (the live events are usually all of them: no rewind, one scope).
fn subset<'a>(views: &'a [EventView], idx: &[usize]) -> Cow<'a, [EventView]> {
    if idx.len() == views.len() {
        return Cow::Borrowed(views);
    }
    Cow::Owned(idx.iter().map(|&i| views[i]).collect())
}

#[cfg(test)]
#[path = "select_tests.rs"]
mod tests;
