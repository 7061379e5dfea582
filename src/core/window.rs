//! Window selection: the sliding window (`_run_compaction_for_sliding_window`),
//! the token-threshold candidates (`_events_to_compact_for_token_threshold`,
//! `_safe_token_compaction_split_index`), and the function-call pairing trim
//! (`_longest_self_contained_prefix`, `_provably_dead_call_ids`).
//!
//! Every function takes `live`, the indices (into `events`) of the events the
//! decision looks at, in order: google-adk first drops rewound invocations
//! and events of other isolation scopes. Results are indices into `events`.

use super::event::{EventView, Sym};
use super::hash::{FastMap, FastSet};
use super::ranges::compaction_ranges;

/// Sliding-window parameters (`compaction_interval`, `overlap_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindow {
    /// New invocations needed to trigger (google-adk validates `> 0`).
    pub interval: usize,
    /// Earlier invocations the window reaches back (`>= 0`).
    pub overlap: usize,
}

/// Python's `max(current, candidate)`: the first argument unless the second
/// is strictly greater (so NaN never replaces, and a NaN first stays).
#[inline]
fn py_max(current: f64, candidate: f64) -> f64 {
    if candidate > current {
        candidate
    } else {
        current
    }
}

/// The end the sliding window counts new invocations from: that of the
/// latest compaction of `live` in stream order whose end is truthy (not
/// None, not 0.0; NaN is truthy), whatever its content (`None`: there is
/// none, and google-adk counts from 0.0).
pub fn last_compaction_end(events: &[EventView], live: &[usize]) -> Option<f64> {
    live.iter().rev().find_map(|&i| {
        events[i]
            .compaction
            .and_then(|c| c.end)
            .filter(|&e| e != 0.0)
    })
}

/// The window before the pairing trim: every non-compaction event from the
/// first event of the start invocation to the last of the end invocation.
/// Reads no function-call data, so callers can extract that for the window
/// alone.
pub fn sliding_window_candidates(
    events: &[EventView],
    live: &[usize],
    cfg: SlidingWindow,
) -> Vec<usize> {
    let last_end = last_compaction_end(events, live).unwrap_or(0.0);

    // Invocations in order of first appearance, with their latest timestamp
    // (and each one's place in `order`, by symbol).
    let mut order: Vec<Sym> = Vec::new();
    let mut latest: Vec<f64> = Vec::new();
    let mut place =
        super::event::per_symbol(live.iter().filter_map(|&i| events[i].invocation), u32::MAX);
    for &i in live {
        let e = &events[i];
        let (Some(inv), None) = (e.invocation, e.compaction) else {
            continue;
        };
        match place[inv as usize] {
            u32::MAX => {
                place[inv as usize] = order.len() as u32;
                order.push(inv);
                latest.push(py_max(0.0, e.timestamp));
            }
            k => latest[k as usize] = py_max(latest[k as usize], e.timestamp),
        }
    }
    let new: Vec<usize> = (0..order.len()).filter(|&k| latest[k] > last_end).collect();
    if new.len() < cfg.interval || new.is_empty() {
        return Vec::new();
    }
    let end_inv = order[*new.last().expect("non-empty")];
    let start_inv = order[new[0].saturating_sub(cfg.overlap)];

    let Some(last) = live
        .iter()
        .rposition(|&i| events[i].invocation == Some(end_inv))
    else {
        return Vec::new();
    };
    let Some(first) = live
        .iter()
        .position(|&i| events[i].invocation == Some(start_inv))
    else {
        return Vec::new();
    };
    let window: Vec<usize> = live
        .get(first..=last)
        .unwrap_or(&[])
        .iter()
        .copied()
        .filter(|&i| events[i].compaction.is_none())
        .collect();
    window
}

/// Length of the longest prefix of `window` that leaves no obligation open
/// (a function call, tool confirmation or auth request without its response).
///
/// When the strict pass stops short and `all` (the whole live session) is
/// given, a second pass ignores calls that [`provably_dead_call_ids`] shows
/// can never be answered, unless the strict prefix already ends at an
/// invocation boundary.
pub fn longest_self_contained_prefix(
    events: &[EventView],
    ids: &[Sym],
    window: &[usize],
    all: Option<&[usize]>,
) -> usize {
    let strict = pairing_pass(events, ids, window, &FastSet::default());
    if strict == window.len() {
        return strict;
    }
    let Some(all) = all else {
        return strict;
    };
    if strict > 0 && events[window[strict - 1]].invocation != events[window[strict]].invocation {
        return strict;
    }
    let newest = all
        .iter()
        .rev()
        .find(|&&i| events[i].invocation.is_some() && events[i].compaction.is_none())
        .and_then(|&i| events[i].invocation);
    let dead = provably_dead_call_ids(events, ids, window, all, newest);
    if dead.is_empty() {
        return strict;
    }
    strict.max(pairing_pass(events, ids, window, &dead))
}

/// Length of the prefix of `window` google-adk 1.30 to 2.2 keeps: up to its
/// first event calling a pending id (called in `all`, answered nowhere in
/// `all`), then up to its first event with a tool confirmation or auth
/// request that no response later in `all` resolves (google-adk's
/// `_truncate_events_before_pending_function_call` and
/// `_truncate_events_before_hitl_signal`; `all` is the session google-adk
/// hands them).
pub fn truncated_prefix(
    events: &[EventView],
    ids: &[Sym],
    window: &[usize],
    all: &[usize],
) -> usize {
    let mut answered: FastSet<Sym> = FastSet::default();
    // Where each request is first seen, and the requests a later response
    // resolves (a response in the requesting event does not).
    let mut requested_at: FastMap<Sym, usize> = FastMap::default();
    let mut resolved: FastSet<Sym> = FastSet::default();
    for (at, &i) in all.iter().enumerate() {
        let e = &events[i];
        answered.extend(e.responses.of(ids));
        for &id in e.pending.of(ids) {
            requested_at.entry(id).or_insert(at);
        }
        for id in e.responses.of(ids) {
            if requested_at.get(id).is_some_and(|&first| at > first) {
                resolved.insert(*id);
            }
        }
    }
    // The window is part of `all`: a call it makes is pending when no
    // response anywhere answers it.
    let pending_call = |i: usize| {
        events[i]
            .calls
            .of(ids)
            .iter()
            .any(|id| !answered.contains(id))
    };
    let calls_end = window
        .iter()
        .position(|&i| pending_call(i))
        .unwrap_or(window.len());
    let unresolved = |i: usize| {
        events[i]
            .pending
            .of(ids)
            .iter()
            .any(|id| !resolved.contains(id))
    };
    window[..calls_end]
        .iter()
        .position(|&i| unresolved(i))
        .unwrap_or(calls_end)
}

/// The strict pass of [`longest_self_contained_prefix`], and whether its
/// answer is final without looking at the rest of the session (the second
/// pass needs every live event's calls and responses).
pub fn strict_prefix(events: &[EventView], ids: &[Sym], window: &[usize]) -> (usize, bool) {
    let strict = pairing_pass(events, ids, window, &FastSet::default());
    let settled = strict == window.len()
        || (strict > 0
            && events[window[strict - 1]].invocation != events[window[strict]].invocation);
    (strict, settled)
}

fn pairing_pass(events: &[EventView], ids: &[Sym], window: &[usize], dead: &FastSet<Sym>) -> usize {
    let mut open: FastSet<Sym> = FastSet::default();
    let mut safe = 0;
    for (k, &i) in window.iter().enumerate() {
        let e = &events[i];
        for id in e.responses.of(ids) {
            open.remove(id);
        }
        for &id in e.calls.of(ids).iter().chain(e.pending.of(ids)) {
            if !dead.contains(&id) {
                open.insert(id);
            }
        }
        if open.is_empty() {
            safe = k + 1;
        }
    }
    safe
}

/// Call ids opened in `window` that can never be answered: not protected as
/// a pending long-running / HITL call, answered by no resolved response
/// anywhere in `all`, and not opened by the newest invocation.
pub fn provably_dead_call_ids(
    events: &[EventView],
    ids: &[Sym],
    window: &[usize],
    all: &[usize],
    newest: Option<Sym>,
) -> FastSet<Sym> {
    let mut protected: FastSet<Sym> = FastSet::default();
    let mut answered: FastSet<Sym> = FastSet::default();
    for &i in all {
        let e = &events[i];
        let newest_or_unscoped = e.invocation.is_none() || e.invocation == newest;
        let hitl = e.hitl_calls.of(ids);
        for &id in e.long_running.of(ids) {
            if newest_or_unscoped || !hitl.contains(&id) {
                protected.insert(id);
            }
        }
        let pending = e.pending.of(ids);
        if newest_or_unscoped {
            protected.extend(pending.iter().copied());
        }
        for &id in e.responses.of(ids) {
            if !pending.contains(&id) {
                answered.insert(id);
            }
        }
    }
    let mut dead = FastSet::default();
    for &i in window {
        let e = &events[i];
        if newest.is_some() && e.invocation == newest {
            continue;
        }
        for &id in e.calls.of(ids) {
            if !protected.contains(&id) && !answered.contains(&id) {
                dead.insert(id);
            }
        }
    }
    dead
}

/// The compaction google-adk prices a range with before summarizing it
/// (`_removable_prompt_chars`): bounds `min` / `max` of the range's
/// timestamps as Python's builtins compute them (the first element wins
/// unless another compares strictly smaller / larger), with content.
pub fn weightless_compaction(events: &[EventView], range: &[usize]) -> Option<EventView> {
    weightless_over(range.iter().map(|&i| events[i].timestamp))
}

/// [`weightless_compaction`] over explicit timestamps (google-adk's token
/// path prices the rolling-summary seed's timestamp first).
pub fn weightless_over(mut timestamps: impl Iterator<Item = f64>) -> Option<EventView> {
    let first = timestamps.next()?;
    let (mut lo, mut hi) = (first, first);
    for ts in timestamps {
        if ts < lo {
            lo = ts;
        }
        if ts > hi {
            hi = ts;
        }
    }
    Some(EventView {
        compaction: Some(super::event::CompactionView {
            start: Some(lo),
            end: Some(hi),
            has_content: true,
        }),
        ..Default::default()
    })
}

/// `_safe_token_compaction_split_index` over `candidates`.
pub fn safe_split_index(
    events: &[EventView],
    ids: &[Sym],
    candidates: &[usize],
    retention: usize,
) -> usize {
    let Some(initial) = candidates.len().checked_sub(retention).filter(|&s| s > 0) else {
        return 0;
    };
    let mut unmatched: FastSet<Sym> = FastSet::default();
    for k in (0..candidates.len()).rev() {
        let e = &events[candidates[k]];
        unmatched.extend(e.responses.of(ids).iter().copied());
        for id in e.calls.of(ids) {
            unmatched.remove(id);
        }
        if unmatched.is_empty() && k <= initial {
            return k;
        }
    }
    0
}

/// Token-threshold candidates of `_events_to_compact_for_token_threshold`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TokenSelection {
    /// Events to summarize after the pairing trim (empty: nothing to do).
    pub to_compact: Vec<usize>,
    /// The latest surviving compaction, whose summary google-adk prepends as
    /// the rolling seed when its start and content are set.
    pub seed_from: Option<usize>,
}

/// The first half of the token threshold's window: the candidates (live
/// non-compaction events after the latest surviving compaction's end) and
/// that compaction. Reads no function-call data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TokenCandidates {
    /// Candidate events, in order.
    pub candidates: Vec<usize>,
    /// The latest surviving compaction of `live`.
    pub latest: Option<usize>,
}

/// See [`TokenCandidates`].
pub fn token_candidates(events: &[EventView], live: &[usize]) -> TokenCandidates {
    let live_views: Vec<EventView> = live.iter().map(|&i| events[i]).collect();
    let latest = compaction_ranges(&live_views).last().map(|r| live[r.index]);
    let last_end = latest
        .and_then(|i| events[i].compaction)
        .and_then(|c| c.end)
        .unwrap_or(0.0);
    let candidates = live
        .iter()
        .copied()
        .filter(|&i| events[i].compaction.is_none() && events[i].timestamp > last_end)
        .collect();
    TokenCandidates { candidates, latest }
}

/// The candidates before the pairing trim: none when they do not exceed the
/// retention, all of them with retention 0, else up to the safe split.
/// Reads the function-call data of the candidates only.
pub fn token_window<'a>(
    events: &[EventView],
    ids: &[Sym],
    candidates: &'a TokenCandidates,
    retention: usize,
) -> &'a [usize] {
    let all = &candidates.candidates;
    if all.len() <= retention {
        return &[];
    }
    let split = if retention == 0 {
        all.len()
    } else {
        safe_split_index(events, ids, all, retention)
    };
    &all[..split]
}

/// The selection from the trimmed window, with the rolling-summary seed.
pub fn finish_token_selection(
    events: &[EventView],
    candidates: &TokenCandidates,
    to_compact: &[usize],
) -> TokenSelection {
    if to_compact.is_empty() {
        return TokenSelection::default();
    }
    let seed_from = candidates.latest.filter(|&i| {
        events[i]
            .compaction
            .is_some_and(|c| c.start.is_some() && c.has_content)
    });
    TokenSelection {
        to_compact: to_compact.to_vec(),
        seed_from,
    }
}

/// The latest prompt token count google-adk trusts: the newest usage count
/// of `agent` (any agent when `None`) among `live` events of the scope, not
/// looking past the newest compaction when `since_compaction` (2.10 on;
/// before, the newest count of any event). `None`: google-adk estimates
/// instead.
pub fn latest_prompt_token_count(
    events: &[EventView],
    scoped: &[usize],
    agent: Option<Sym>,
    since_compaction: bool,
) -> Option<i64> {
    for &i in scoped.iter().rev() {
        let e = &events[i];
        if since_compaction && e.compaction.is_some() {
            return None;
        }
        if let Some(count) = e.prompt_tokens {
            if agent.is_none() || e.author == agent {
                return Some(count);
            }
        }
    }
    None
}

#[cfg(test)]
#[path = "window_tests.rs"]
mod tests;
