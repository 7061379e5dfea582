//! The decisions of google-adk's per-turn scans for task agents over every
//! event of a session: `runners._find_active_task_scope` (which task scope a
//! new user message belongs to) and
//! `workflow._llm_agent_wrapper._find_unresolved_task_delegations` (which
//! task delegations of an agent still wait for their response), as
//! functions of the facts the binding reads.
//!
//! Every fact is already a bool or a string here: the binding checks each
//! value is of a kind whose Python comparison and truthiness these
//! reproduce (an exact `str`, `None`, a model), and declines otherwise.

use std::collections::{HashMap, HashSet};

/// What the first pass reads of one part of a scoped event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply<'a> {
    /// No function response, or one not named `finish_task`.
    Other,
    /// A `finish_task` function response, with the value of its response's
    /// `'result'` when that is a `str` (`None`: no response, no `'result'`
    /// key, or a value of a kind no `str` equals).
    Finish(Option<&'a str>),
}

/// Whether a part settles its event's scope: `None` to read on, `Some(closes)`
/// at the first `finish_task` response (google-adk stops at it whatever it
/// says), closing the scope when its result is the success or the error
/// result (a response carrying only `'error'`, a validation failure the
/// task agent will retry, does not).
pub fn reply_closes(reply: Reply<'_>, success: &str, error: &str) -> Option<bool> {
    match reply {
        Reply::Other => None,
        Reply::Finish(result) => Some(result.is_some_and(|r| r == success || r == error)),
    }
}

/// What `_find_active_task_scope` reads of one event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScopeEvent<'a> {
    /// `error_code` is the aborted-invocation code (`_is_abort_event`).
    pub aborted: bool,
    /// `invocation_id` (`None` only in a model built without validation).
    pub invocation: Option<&'a str>,
    /// `isolation_scope`, when truthy.
    pub scope: Option<&'a str>,
    /// A part settles the scope and closes it (see [`reply_closes`]); read
    /// only for scoped events.
    pub closes: bool,
    /// `actions.compaction` is truthy.
    pub compaction: bool,
}

/// `_find_active_task_scope` on the live events' facts: the index of the
/// event whose `(isolation_scope, invocation_id)` google-adk returns, or
/// `None`.
///
/// A first pass collects the scopes a `finish_task` response closed and the
/// invocations that were aborted; walking backwards, the latest scoped
/// event that is no compaction, whose scope was not closed and whose
/// invocation was not aborted is the active task.
pub fn active_scope(events: &[ScopeEvent<'_>]) -> Option<usize> {
    let mut finished: HashSet<&str> = HashSet::new();
    let mut aborted: HashSet<Option<&str>> = HashSet::new();
    for event in events {
        if event.aborted {
            aborted.insert(event.invocation);
        }
        if let Some(scope) = event.scope {
            if event.closes {
                finished.insert(scope);
            }
        }
    }
    events.iter().rposition(|event| {
        !event.compaction
            && event.scope.is_some_and(|scope| {
                !finished.contains(scope) && !aborted.contains(&event.invocation)
            })
    })
}

/// Whether `_find_unresolved_task_delegations` reads an event of `author`
/// for `owner`: the owner's own events and the user's (`None` is equal to
/// `None` only, as in Python).
pub fn owner_reads(author: Option<&str>, owner: Option<&str>) -> bool {
    author == owner || author == Some("user")
}

/// Whether an event's calls count for the wanted isolation scope: any
/// event's when none is wanted, else only an event of exactly that scope.
pub fn call_in_scope(wanted: Option<&str>, scope: Option<&str>) -> bool {
    wanted.is_none() || scope == wanted
}

/// Whether google-adk asks `tools_dict` about a part's function call: the
/// event's calls are in scope, the part has a call, with a truthy `id` and
/// a `name` that is not `None`.
pub fn asks(in_scope: bool, call: bool, id_truthy: bool, named: bool) -> bool {
    in_scope && call && id_truthy && named
}

/// The task delegations left without a response, as google-adk returns
/// them: `delegations` are `(id, item)` in the order met, where a later
/// call with an id already met replaces the earlier one's item but keeps
/// its place (a `dict` assignment); `responses` are the ids of every
/// function response read. Returns the items whose id no response has.
pub fn unresolved<'a>(
    delegations: impl IntoIterator<Item = (&'a str, usize)>,
    responses: impl IntoIterator<Item = &'a str>,
) -> Vec<usize> {
    let mut order: Vec<usize> = Vec::new();
    let mut place: HashMap<&str, usize> = HashMap::new();
    for (id, item) in delegations {
        match place.get(id) {
            Some(&k) => order[k] = item,
            None => {
                place.insert(id, order.len());
                order.push(item);
            }
        }
    }
    if order.is_empty() {
        return order;
    }
    let mut answered = vec![false; order.len()];
    for id in responses {
        if let Some(&k) = place.get(id) {
            answered[k] = true;
        }
    }
    order
        .into_iter()
        .zip(answered)
        .filter_map(|(item, answered)| (!answered).then_some(item))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const OK: &str = "Task completed.";
    const FAILED: &str = "Task failed.";

    /// google-adk's two passes, written as its Python reads.
    fn reference_scope(events: &[ScopeEvent<'_>]) -> Option<usize> {
        let mut finished: Vec<&str> = vec![];
        let mut aborted: Vec<Option<&str>> = vec![];
        for e in events {
            if e.aborted {
                aborted.push(e.invocation);
            }
            let Some(scope) = e.scope else { continue };
            if e.closes {
                finished.push(scope);
            }
        }
        for (i, e) in events.iter().enumerate().rev() {
            if e.compaction {
                continue;
            }
            let Some(scope) = e.scope else { continue };
            if !finished.contains(&scope) && !aborted.contains(&e.invocation) {
                return Some(i);
            }
        }
        None
    }

    /// The dict comprehension over `fc_by_id`, written as Python does it.
    fn reference_unresolved(delegations: &[(&str, usize)], responses: &[&str]) -> Vec<usize> {
        let mut by_id: Vec<(&str, usize)> = vec![];
        for &(id, item) in delegations {
            match by_id.iter_mut().find(|(k, _)| *k == id) {
                Some(slot) => slot.1 = item,
                None => by_id.push((id, item)),
            }
        }
        by_id
            .into_iter()
            .filter(|(id, _)| !responses.contains(id))
            .map(|(_, item)| item)
            .collect()
    }

    #[test]
    fn replies() {
        assert_eq!(reply_closes(Reply::Other, OK, FAILED), None);
        assert_eq!(
            reply_closes(Reply::Finish(Some(OK)), OK, FAILED),
            Some(true)
        );
        assert_eq!(
            reply_closes(Reply::Finish(Some(FAILED)), OK, FAILED),
            Some(true)
        );
        assert_eq!(
            reply_closes(Reply::Finish(Some("other")), OK, FAILED),
            Some(false)
        );
        assert_eq!(reply_closes(Reply::Finish(None), OK, FAILED), Some(false));
    }

    #[test]
    fn scopes() {
        let scoped = |scope, invocation| ScopeEvent {
            scope: Some(scope),
            invocation: Some(invocation),
            ..Default::default()
        };
        assert_eq!(active_scope(&[]), None);
        assert_eq!(active_scope(&[ScopeEvent::default()]), None);
        let events = [scoped("a", "i1"), scoped("b", "i2"), ScopeEvent::default()];
        assert_eq!(active_scope(&events), Some(1));
        // A closing response anywhere closes its scope, before or after.
        let closed_b = ScopeEvent {
            closes: true,
            ..scoped("b", "i3")
        };
        assert_eq!(active_scope(&[events[0], closed_b, events[1]]), Some(0));
        // An aborted invocation closes every scope of it.
        let abort = ScopeEvent {
            aborted: true,
            invocation: Some("i2"),
            ..Default::default()
        };
        assert_eq!(active_scope(&[events[0], events[1], abort]), Some(0));
        // Compaction events are never the answer.
        let compaction = ScopeEvent {
            compaction: true,
            ..scoped("c", "i4")
        };
        assert_eq!(active_scope(&[events[0], compaction]), Some(0));
        assert_eq!(active_scope(&[compaction]), None);
    }

    #[test]
    fn owners_and_scopes() {
        assert!(owner_reads(Some("root"), Some("root")));
        assert!(owner_reads(Some("user"), Some("root")));
        assert!(!owner_reads(Some("helper"), Some("root")));
        assert!(!owner_reads(None, Some("root")));
        assert!(owner_reads(None, None));
        assert!(owner_reads(Some("user"), None));
        assert!(!owner_reads(Some("root"), None));
        assert!(call_in_scope(None, Some("s")));
        assert!(call_in_scope(None, None));
        assert!(call_in_scope(Some("s"), Some("s")));
        assert!(!call_in_scope(Some("s"), None));
        assert!(!call_in_scope(Some(""), None));
        assert!(call_in_scope(Some(""), Some("")));
        assert!(asks(true, true, true, true));
        assert!(!asks(false, true, true, true));
        assert!(!asks(true, true, false, true));
        assert!(!asks(true, true, true, false));
    }

    #[test]
    fn delegations() {
        assert_eq!(unresolved([], ["a"]), Vec::<usize>::new());
        assert_eq!(unresolved([("a", 0), ("b", 1)], ["a"]), vec![1]);
        // A reused id keeps its first place and takes the last call.
        assert_eq!(unresolved([("a", 0), ("b", 1), ("a", 2)], []), vec![2, 1]);
        assert_eq!(unresolved([("a", 0), ("b", 1), ("a", 2)], ["b"]), vec![2]);
    }

    fn scope_event() -> impl Strategy<Value = ScopeEvent<'static>> {
        (
            any::<bool>(),
            prop::option::weighted(0.9, prop::sample::select(vec!["i1", "i2", "i3", ""])),
            prop::option::of(prop::sample::select(vec!["s1", "s2", "s3"])),
            any::<bool>(),
            prop::bool::weighted(0.2),
        )
            .prop_map(
                |(aborted, invocation, scope, closes, compaction)| ScopeEvent {
                    aborted: aborted && invocation != Some("i1"),
                    invocation,
                    scope,
                    closes,
                    compaction,
                },
            )
    }

    proptest! {
        #[test]
        fn scope_matches_google_adks_passes(events in prop::collection::vec(scope_event(), 0..30)) {
            prop_assert_eq!(active_scope(&events), reference_scope(&events));
        }

        #[test]
        fn unresolved_matches_the_dict(
            ids in prop::collection::vec(prop::sample::select(vec!["a", "b", "c", "d"]), 0..12),
            responses in prop::collection::vec(prop::sample::select(vec!["a", "b", "c", "x"]), 0..6),
        ) {
            let delegations: Vec<(&str, usize)> =
                ids.iter().enumerate().map(|(k, &id)| (id, k)).collect();
            prop_assert_eq!(
                unresolved(delegations.iter().copied(), responses.iter().copied()),
                reference_unresolved(&delegations, &responses)
            );
        }
    }
}
