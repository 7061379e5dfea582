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
            let replace = match response_by_call.get(&call_key) {
                None => true,
                Some(&existing) => {
                    let (new_ts, old_ts) = (event.timestamp, source[existing].timestamp);
                    if new_ts.is_nan() || old_ts.is_nan() {
                        let index = if new_ts.is_nan() { j } else { existing };
                        return Err(CoreError::UnorderedTimestamp { index });
                    }
                    new_ts >= old_ts
                }
            };
            if replace {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::Span;

    /// Builds views with calls/responses from (ident, ts, calls, responses).
    fn build(spec: &[(u64, f64, &[Sym], &[Sym])]) -> (Vec<EventView>, Vec<Sym>) {
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
