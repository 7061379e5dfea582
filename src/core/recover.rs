//! Re-injection of compacted function calls (`_recover_compacted_function_calls`).

use super::error::CoreError;
use super::event::{EventView, Sym};
use super::hash::{FastMap, FastSet};

/// One element of the recovered history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovered {
    /// `events[i]`, kept in place.
    Kept(usize),
    /// `source[j]`, re-injected (a call event or a sibling response).
    Injected(usize),
}

/// Restores function-call events that compaction removed while a response
/// to them survived.
///
/// `events` is the filtered history, `source` the history before filtering;
/// both index into `ids`. Events are matched by `ident` (object identity), as
/// google-adk does. A response belongs to the latest call with its id that
/// precedes it in `source`. Returns `Ok(None)` when nothing is re-injected:
/// the caller then hands back `events` itself.
pub fn recover_compacted_function_calls(
    events: &[EventView],
    source: &[EventView],
    ids: &[Sym],
) -> Result<Option<Vec<Recovered>>, CoreError> {
    if !events.iter().any(|e| e.has_responses) {
        return Ok(None);
    }
    let present: FastSet<u64> = events.iter().map(|e| e.ident).collect();
    if !some_call_missing(events, source, ids, &present) {
        return Ok(None);
    }
    recover_missing(events, source, ids, &present)
}

/// What answering recovery on lists extended at their ends needs, after a
/// call that re-injected nothing: for every call id of the source, whether
/// the latest event calling it is present in the filtered list.
#[derive(Debug, Default)]
pub struct Calls {
    latest_present: FastMap<Sym, bool>,
}

impl Calls {
    /// For `source` where `present[j]` says whether `source[j]` is in the
    /// filtered list; `None` when a present response belongs to an absent
    /// call event (then something may be re-injected).
    pub fn of(source: &[EventView], present: &[bool], ids: &[Sym]) -> Option<Self> {
        let mut calls = Calls::default();
        calls.extend(source, present, ids).then_some(calls)
    }

    /// Whether recovery still re-injects nothing once `tail` is appended to
    /// the source and its events with `present[k]` to the filtered list
    /// (tail events that are not events of the source already): every
    /// response of a present tail event belongs to a present call event or
    /// to none, taking the tail's own calls in order (an event's calls
    /// before its responses, as [`some_call_missing`] does). Responses
    /// before the tail keep their latest calls, and presence before the
    /// tail is unchanged. Extends the state when it does.
    pub fn extend(&mut self, tail: &[EventView], present: &[bool], ids: &[Sym]) -> bool {
        let mut added: Vec<(Sym, Option<bool>)> = Vec::new();
        for (event, &p) in tail.iter().zip(present) {
            for &call_id in event.calls.of(ids) {
                let before = self.latest_present.insert(call_id, p);
                added.push((call_id, before));
            }
            if !p {
                continue;
            }
            let missing = event
                .responses
                .of(ids)
                .iter()
                .any(|r| self.latest_present.get(r) == Some(&false));
            if missing {
                // Undo, newest first, so the state is as before.
                for (call_id, before) in added.into_iter().rev() {
                    match before {
                        Some(b) => self.latest_present.insert(call_id, b),
                        None => self.latest_present.remove(&call_id),
                    };
                }
                return false;
            }
        }
        true
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        super::index::map_bytes(&self.latest_present)
    }
}

/// Whether recovery, which re-injected nothing on a source and its
/// filtered list (`calls` of that source, see [`Calls::of`]), again
/// re-injects nothing once `tail` is appended to the source and `listed` to
/// the filtered list (by `ident`): when the listed events are tail events
/// in tail order and [`Calls::extend`] accepts them. Returns which tail
/// events are listed (`calls` extended), or `None` (`calls` as it was).
pub fn extend_quiet(
    calls: &mut Calls,
    tail: &[EventView],
    listed: impl IntoIterator<Item = u64>,
    ids: &[Sym],
) -> Option<Vec<bool>> {
    let mut present = vec![false; tail.len()];
    let mut cursor = 0;
    for ident in listed {
        let k = tail[cursor..].iter().position(|v| v.ident == ident)?;
        present[cursor + k] = true;
        cursor += k + 1;
    }
    calls.extend(tail, &present, ids).then_some(present)
}

/// Whether a response in `events` belongs to a call event that `events`
/// lacks: the only case in which anything is re-injected. Tracks only the
/// call ids `events` responds to, so the usual answer (no) costs one pass
/// over `source` with no map of every call.
fn some_call_missing(
    events: &[EventView],
    source: &[EventView],
    ids: &[Sym],
    present: &FastSet<u64>,
) -> bool {
    let wanted: FastSet<Sym> = events
        .iter()
        .flat_map(|e| e.responses.of(ids))
        .copied()
        .collect();
    if wanted.is_empty() {
        return false;
    }
    let mut latest_call: FastMap<Sym, usize> = FastMap::default();
    for (j, event) in source.iter().enumerate() {
        for &call_id in event.calls.of(ids) {
            if wanted.contains(&call_id) {
                latest_call.insert(call_id, j);
            }
        }
        if event.responses.len == 0 || !present.contains(&event.ident) {
            continue;
        }
        for response_id in event.responses.of(ids) {
            if let Some(&call_j) = latest_call.get(response_id) {
                if !present.contains(&source[call_j].ident) {
                    return true;
                }
            }
        }
    }
    false
}

/// [`recover_compacted_function_calls`] once [`some_call_missing`] said
/// yes: google-adk's full bookkeeping of calls, responses and siblings.
fn recover_missing(
    events: &[EventView],
    source: &[EventView],
    ids: &[Sym],
    present: &FastSet<u64>,
) -> Result<Option<Vec<Recovered>>, CoreError> {
    let mut latest_call_by_id: FastMap<Sym, usize> = FastMap::default();
    let mut call_by_response: FastMap<(u64, Sym), usize> = FastMap::default();
    let mut response_by_call: FastMap<(u64, Sym), usize> = FastMap::default();
    let mut surviving: FastSet<(u64, Sym)> = FastSet::default();
    for (j, event) in source.iter().enumerate() {
        for &call_id in event.calls.of(ids) {
            latest_call_by_id.insert(call_id, j);
        }
        for &response_id in event.responses.of(ids) {
            let Some(&call_j) = latest_call_by_id.get(&response_id) else {
                continue;
            };
            call_by_response.insert((event.ident, response_id), call_j);
            let call_key = (source[call_j].ident, response_id);
            if present.contains(&event.ident) {
                surviving.insert(call_key);
            }
            // The latest update of this call occurrence wins; ties keep the
            // earlier event in source order.
            if replaces(source, j, response_by_call.get(&call_key).copied())? {
                response_by_call.insert(call_key, j);
            }
        }
    }

    let mut out = Vec::with_capacity(events.len() + 4);
    let mut reinjected_calls: FastSet<u64> = FastSet::default();
    let mut reinjected_responses: FastSet<u64> = FastSet::default();
    for (i, event) in events.iter().enumerate() {
        for &response_id in event.responses.of(ids) {
            let Some(&call_j) = call_by_response.get(&(event.ident, response_id)) else {
                continue;
            };
            let call_ident = source[call_j].ident;
            if present.contains(&call_ident) || reinjected_calls.contains(&call_ident) {
                continue;
            }
            out.push(Recovered::Injected(call_j));
            reinjected_calls.insert(call_ident);
            for &sibling_id in source[call_j].calls.of(ids) {
                let key = (call_ident, sibling_id);
                if surviving.contains(&key) {
                    continue;
                }
                if let Some(&resp_j) = response_by_call.get(&key) {
                    if reinjected_responses.insert(source[resp_j].ident) {
                        out.push(Recovered::Injected(resp_j));
                    }
                }
            }
        }
        out.push(Recovered::Kept(i));
    }
    Ok(if reinjected_calls.is_empty() {
        None
    } else {
        Some(out)
    })
}

/// google-adk 2.7 to 2.12's `_recover_compacted_function_calls`: calls are
/// matched to responses by id alone, not by occurrence.
///
/// A response id of `events` with no call of that id in `events` is
/// orphaned; the first source event calling an orphaned id is re-injected
/// before the first response to it, once for all of its call ids, with the
/// latest-stamped source response (ties: the later in source order) of
/// each of its call ids that `events` does not answer. `Ok(None)`: nothing
/// re-injected (the caller hands back `events` itself).
pub fn recover_by_id(
    events: &[EventView],
    source: &[EventView],
    ids: &[Sym],
) -> Result<Option<Vec<Recovered>>, CoreError> {
    let calls_present: FastSet<Sym> = events
        .iter()
        .flat_map(|e| e.calls.of(ids))
        .copied()
        .collect();
    let responses_present: FastSet<Sym> = events
        .iter()
        .flat_map(|e| e.responses.of(ids))
        .copied()
        .collect();
    let orphaned: FastSet<Sym> = responses_present
        .iter()
        .filter(|id| !calls_present.contains(id))
        .copied()
        .collect();
    if orphaned.is_empty() {
        return Ok(None);
    }
    let mut call_event_by_id: FastMap<Sym, usize> = FastMap::default();
    for (j, event) in source.iter().enumerate() {
        for &call_id in event.calls.of(ids) {
            if orphaned.contains(&call_id) {
                call_event_by_id.entry(call_id).or_insert(j);
            }
        }
    }
    if call_event_by_id.is_empty() {
        return Ok(None);
    }
    let mut response_event_by_id: FastMap<Sym, usize> = FastMap::default();
    for (j, event) in source.iter().enumerate() {
        for &response_id in event.responses.of(ids) {
            if replaces(source, j, response_event_by_id.get(&response_id).copied())? {
                response_event_by_id.insert(response_id, j);
            }
        }
    }
    let mut out = Vec::with_capacity(events.len() + 4);
    let mut reinjected: FastSet<Sym> = FastSet::default();
    for (i, event) in events.iter().enumerate() {
        for response_id in event.responses.of(ids) {
            let Some(&call_j) = call_event_by_id.get(response_id) else {
                continue;
            };
            if reinjected.contains(response_id) {
                continue;
            }
            out.push(Recovered::Injected(call_j));
            let siblings = source[call_j].calls.of(ids);
            reinjected.extend(siblings.iter().copied());
            for sibling_id in siblings {
                if responses_present.contains(sibling_id) {
                    continue;
                }
                if let Some(&resp_j) = response_event_by_id.get(sibling_id) {
                    out.push(Recovered::Injected(resp_j));
                }
            }
        }
        out.push(Recovered::Kept(i));
    }
    Ok(Some(out))
}

/// Whether the response `source[j]` takes the place of the one kept so far
/// (`existing`): google-adk keeps the latest stamped, a tie going to the
/// later in source order (`event.timestamp >= existing.timestamp`). A NaN
/// stamp has no such order: refused.
fn replaces(source: &[EventView], j: usize, existing: Option<usize>) -> Result<bool, CoreError> {
    let Some(existing) = existing else {
        return Ok(true);
    };
    let (new_ts, old_ts) = (source[j].timestamp, source[existing].timestamp);
    if new_ts.is_nan() || old_ts.is_nan() {
        let index = if new_ts.is_nan() { j } else { existing };
        return Err(CoreError::UnorderedTimestamp { index });
    }
    Ok(new_ts >= old_ts)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::core::event::Span;

    #[test]
    fn extending_a_quiet_recovery_takes_listed_tail_events_in_order() {
        // A call (id 1) answered later; the source's first event listed.
        let (source, ids) = build(&[(10, 1.0, &[], &[])]);
        let mut calls = Calls::of(&source, &[true], &ids).unwrap();
        let (tail, ids) = build(&[(11, 2.0, &[1], &[]), (12, 3.0, &[], &[1])]);
        // The response listed without its call: something is re-injected.
        assert_eq!(extend_quiet(&mut calls, &tail, [12], &ids), None);
        // Out of tail order, or not a tail event: declined.
        assert_eq!(extend_quiet(&mut calls, &tail, [12, 11], &ids), None);
        assert_eq!(extend_quiet(&mut calls, &tail, [10], &ids), None);
        // Both listed, in order: nothing re-injected.
        let present = extend_quiet(&mut calls, &tail, [11, 12], &ids);
        assert_eq!(present, Some(vec![true, true]));
        // Neither listed: the call is absent, its response too.
        let (more, ids) = build(&[(13, 4.0, &[2], &[]), (14, 5.0, &[], &[2])]);
        assert_eq!(
            extend_quiet(&mut calls, &more, [], &ids),
            Some(vec![false, false])
        );
    }

    /// Builds views with calls/responses from (ident, ts, calls, responses)
    /// (also the property tests' builder).
    pub(crate) fn build(spec: &[(u64, f64, &[Sym], &[Sym])]) -> (Vec<EventView>, Vec<Sym>) {
        let mut ids = Vec::new();
        let mut views = Vec::new();
        for &(ident, ts, calls, responses) in spec {
            let c = Span {
                start: ids.len() as u32,
                len: calls.len() as u32,
            };
            ids.extend_from_slice(calls);
            let r = Span {
                start: ids.len() as u32,
                len: responses.len() as u32,
            };
            ids.extend_from_slice(responses);
            views.push(EventView {
                ident,
                timestamp: ts,
                calls: c,
                responses: r,
                has_responses: !responses.is_empty(),
                ..Default::default()
            });
        }
        (views, ids)
    }

    #[test]
    fn nothing_to_recover_returns_none() {
        let (source, ids) = build(&[(1, 1.0, &[7], &[]), (2, 2.0, &[], &[7])]);
        let out = recover_compacted_function_calls(&source, &source, &ids).unwrap();
        assert_eq!(out, None);
    }

    #[test]
    fn compacted_call_is_reinjected_before_its_response() {
        // call(7) and a placeholder response were compacted; the resumed
        // response (ident 4) survives next to the summary (ident 9).
        let (all, ids) = build(&[
            (1, 1.0, &[7, 8], &[]),
            (2, 2.0, &[], &[7, 8]),
            (4, 4.0, &[], &[7]),
            (9, 3.0, &[], &[]),
        ]);
        let source = &all[..3];
        let events = [all[3], all[2]];
        let out = recover_compacted_function_calls(&events, source, &ids).unwrap();
        // The call comes back, then its sibling response for 8 (not for 7,
        // which survives as ident 4), then the surviving response.
        assert_eq!(
            out,
            Some(vec![
                Recovered::Kept(0),
                Recovered::Injected(0),
                Recovered::Injected(1),
                Recovered::Kept(1)
            ])
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// The "is a call missing" pre-check never changes the answer: it
        /// is what the full bookkeeping gives, on sources where the same
        /// object may appear twice and ids repeat.
        #[test]
        fn the_precheck_agrees_with_the_full_bookkeeping(
            spec in proptest::collection::vec((0u8..10, proptest::collection::vec(0u32..4, 0..3), proptest::collection::vec(0u32..4, 0..3)), 0..25),
            keep in proptest::collection::vec(proptest::bool::ANY, 25),
            objects in 1u64..30,
        ) {
            let calls: Vec<(u64, f64, &[Sym], &[Sym])> = spec
                .iter()
                .enumerate()
                .map(|(i, (t, c, r))| (i as u64 % objects, f64::from(*t), c.as_slice(), r.as_slice()))
                .collect();
            let (source, ids) = build(&calls);
            let events: Vec<EventView> = source.iter().zip(&keep).filter(|(_, k)| **k).map(|(e, _)| *e).collect();
            let present: FastSet<u64> = events.iter().map(|e| e.ident).collect();
            let full = recover_missing(&events, &source, &ids, &present).unwrap();
            let fast = recover_compacted_function_calls(&events, &source, &ids).unwrap();
            proptest::prop_assert_eq!(fast, full);
        }
    }

    #[test]
    fn by_id_reinjects_the_first_call_of_an_orphaned_id_with_missing_siblings() {
        // Two calls reuse id 7 (idents 1 and 3): by id, the first source
        // call comes back, with the latest response of its sibling 8.
        let (all, ids) = build(&[
            (1, 1.0, &[7, 8], &[]),
            (2, 2.0, &[], &[7, 8]),
            (3, 3.0, &[7], &[]),
            (4, 4.0, &[], &[7]),
            (9, 5.0, &[], &[]),
        ]);
        let source = &all[..4];
        let events = [all[4], all[3]];
        let out = recover_by_id(&events, source, &ids).unwrap();
        assert_eq!(
            out,
            Some(vec![
                Recovered::Kept(0),
                Recovered::Injected(0),
                Recovered::Injected(1),
                Recovered::Kept(1)
            ])
        );
        // google-adk 2.13 matches the response to its own call (ident 3).
        let occurrence = recover_compacted_function_calls(&events, source, &ids).unwrap();
        assert_eq!(
            occurrence,
            Some(vec![
                Recovered::Kept(0),
                Recovered::Injected(2),
                Recovered::Kept(1)
            ])
        );
    }

    #[test]
    fn by_id_answers_none_without_an_orphan_or_its_call() {
        let (all, ids) = build(&[
            (1, 1.0, &[7], &[]),
            (2, 2.0, &[], &[7]),
            (3, 3.0, &[], &[5]),
        ]);
        assert_eq!(recover_by_id(&all[..2], &all[..2], &ids).unwrap(), None);
        // Response 5 is orphaned but no source event calls it.
        assert_eq!(recover_by_id(&all[2..], &all, &ids).unwrap(), None);
    }

    #[test]
    fn by_id_refuses_a_nan_tie_break() {
        let (source, ids) = build(&[
            (1, 1.0, &[7], &[]),
            (2, f64::NAN, &[], &[7]),
            (3, 2.0, &[], &[7]),
        ]);
        assert!(recover_by_id(&[source[2]], &source, &ids).is_err());
    }

    #[test]
    fn nan_tie_break_is_refused() {
        let (source, ids) = build(&[
            (1, 1.0, &[7], &[]),
            (2, f64::NAN, &[], &[7]),
            (3, 2.0, &[], &[7]),
        ]);
        let events = [source[2]];
        assert!(recover_compacted_function_calls(&events, &source, &ids).is_err());
    }
}
