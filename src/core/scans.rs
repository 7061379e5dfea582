//! The per-event decisions google-adk's prompt assembly makes over every
//! event of a session on every turn (`_should_include_event_in_context` and
//! the helpers it calls), as functions of the facts the binding reads.
//!
//! Truthiness is the binding's business (it asks Python where a value is
//! not a plain `str`, `bool` or `None`); here every fact is already a bool
//! or a non-empty string.

/// What `_is_part_invisible` reads of one part, each as Python truthiness.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartFacts {
    /// `function_call` or `function_response`.
    pub call_or_response: bool,
    /// `thought_signature`.
    pub signature: bool,
    /// `tool_call` or `tool_response` (server-side tools).
    pub server_tool: bool,
    /// `thought`.
    pub thought: bool,
    /// `text`, `inline_data`, `file_data`, `executable_code` or
    /// `code_execution_result`.
    pub payload: bool,
}

/// Whether a part adds nothing the model sees: no call or response, no
/// signature, no server-side tool, and either a thought left out or no
/// payload at all.
pub fn part_invisible(part: PartFacts, include_thoughts: bool) -> bool {
    if part.call_or_response || part.signature || part.server_tool {
        return false;
    }
    (part.thought && !include_thoughts) || !part.payload
}

/// `_is_event_belongs_to_branch`: an agent on `current` sees an event on
/// `event` when either is missing (`None` or empty), when they are the same
/// dotted path, or when `current` lies below `event`'s path.
pub fn branch_visible(current: Option<&str>, event: Option<&str>) -> bool {
    let (Some(current), Some(event)) = (current, event) else {
        return true;
    };
    if current.is_empty() || event.is_empty() {
        return true;
    }
    // Segment-wise: `current` equal to `event`, or `event`'s segments then at
    // least one more (`a.b.c` below `a.b`, never `a.bc`).
    current == event || is_below(current, event)
}

/// Whether `path` lies strictly below `ancestor`, segment-wise (`a.b.c`
/// below `a.b`, never `a.bc`); both non-empty.
pub fn is_below(path: &str, ancestor: &str) -> bool {
    path.len() > ancestor.len()
        && path.starts_with(ancestor)
        && path.as_bytes()[ancestor.len()] == b'.'
}

/// What `InvocationContext._get_events(current_branch=True)` reads of one
/// event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BranchEvent<'a> {
    /// `author == 'user'`.
    pub by_user: bool,
    /// `branch` (`None` is `None`; an empty string is a branch).
    pub branch: Option<&'a str>,
    /// A user event whose function responses answer no call issued on the
    /// context's branch or below it (see [`answers_elsewhere`]).
    pub answers_elsewhere: bool,
}

/// Whether a call made on `branch` counts as issued on the context's branch
/// `own` or below it (plain prefix `own.`, as google-adk tests it).
pub fn on_branch(branch: &str, own: &str) -> bool {
    !branch.is_empty()
        && (branch == own
            || (branch.len() > own.len()
                && branch.starts_with(own)
                && branch.as_bytes()[own.len()] == b'.'))
}

/// Whether a user event's response ids (those not `None`) answer nothing
/// in `branch_calls`: some ids, none of them among the calls.
pub fn answers_elsewhere<'a>(
    response_ids: impl IntoIterator<Item = &'a str>,
    branch_calls: &std::collections::HashSet<String>,
) -> bool {
    let mut any = false;
    for id in response_ids {
        if branch_calls.contains(id) {
            return false;
        }
        any = true;
    }
    any
}

/// `_is_branch_match` of `_get_events(current_branch=True)` for a context
/// on branch `own` (no single-turn node path: the binding declines those).
pub fn branch_match(event: &BranchEvent<'_>, own: Option<&str>) -> bool {
    if !event.by_user {
        return event.branch == own;
    }
    if event.answers_elsewhere {
        return false;
    }
    match (event.branch, own) {
        (None, _) | (_, None) => true,
        (Some(branch), Some(own)) => {
            branch == own || (!own.is_empty() && !branch.is_empty() && is_below(branch, own))
        }
    }
}

/// What `_should_include_event_in_context` reads of one event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContextEvent<'a> {
    /// `isolation_scope` equals the agent's.
    pub same_scope: bool,
    /// `author == 'user'`.
    pub by_user: bool,
    /// `node_info.path`, when truthy.
    pub node_path: Option<&'a str>,
    /// `get_function_responses()` is non-empty; asked only when the user
    /// rule needs it (see [`user_rule_asks`]).
    pub has_responses: bool,
    /// `actions.compaction` is truthy.
    pub compaction: bool,
    /// `content`, `content.role` and `content.parts` are truthy and some
    /// part is visible (see [`part_invisible`]).
    pub visible_content: bool,
    /// `output_transcription` or `input_transcription` is truthy.
    pub transcribed: bool,
    /// `branch`, when truthy.
    pub branch: Option<&'a str>,
    /// A part calls, or answers, `adk_framework`, the credential request or
    /// the confirmation request.
    pub framework_call: bool,
}

/// Whether the user-event rule needs `has_responses`: a user event on a
/// node path other than the agent's (`None` reads as `""`).
pub fn user_rule_asks(event: &ContextEvent<'_>, node_path: Option<&str>) -> bool {
    event.by_user
        && event
            .node_path
            .is_some_and(|path| path != node_path.unwrap_or(""))
}

/// `_should_include_event_in_context` on read facts.
pub fn include_in_context(
    event: &ContextEvent<'_>,
    current_branch: Option<&str>,
    node_path: Option<&str>,
) -> bool {
    if !event.same_scope {
        return false;
    }
    if user_rule_asks(event, node_path) && !event.has_responses {
        return false;
    }
    let empty = !event.compaction && !event.visible_content && !event.transcribed;
    !(empty || !branch_visible(current_branch, event.branch) || event.framework_call)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `_BranchPath` as google-adk defines it: segments split on `.`.
    fn reference_branch(current: Option<&str>, event: Option<&str>) -> bool {
        let (Some(c), Some(e)) = (current, event) else {
            return true;
        };
        if c.is_empty() || e.is_empty() {
            return true;
        }
        let c: Vec<&str> = c.split('.').collect();
        let e: Vec<&str> = e.split('.').collect();
        c == e || (c.len() > e.len() && c[..e.len()] == e[..])
    }

    #[test]
    fn branches() {
        assert!(branch_visible(None, Some("a")));
        assert!(branch_visible(Some(""), Some("a")));
        assert!(branch_visible(Some("a"), Some("")));
        assert!(branch_visible(Some("a.b"), Some("a.b")));
        assert!(branch_visible(Some("a.b.c"), Some("a.b")));
        assert!(!branch_visible(Some("a.bc"), Some("a.b")));
        assert!(!branch_visible(Some("a"), Some("a.b")));
        assert!(!branch_visible(Some("a.b"), Some("a.c")));
        // Empty segments are segments too.
        assert!(branch_visible(Some("a..b"), Some("a.")));
        assert!(branch_visible(Some("a."), Some("a")));
    }

    #[test]
    fn parts() {
        let thought = PartFacts {
            thought: true,
            payload: true,
            ..Default::default()
        };
        assert!(part_invisible(thought, false));
        assert!(!part_invisible(thought, true));
        let signed = PartFacts {
            signature: true,
            thought: true,
            ..Default::default()
        };
        assert!(!part_invisible(signed, false));
        assert!(part_invisible(PartFacts::default(), true));
        let call = PartFacts {
            call_or_response: true,
            thought: true,
            ..Default::default()
        };
        assert!(!part_invisible(call, false));
    }

    #[test]
    fn events() {
        let visible = ContextEvent {
            same_scope: true,
            visible_content: true,
            ..Default::default()
        };
        assert!(include_in_context(&visible, None, None));
        assert!(!include_in_context(
            &ContextEvent {
                same_scope: false,
                ..visible
            },
            None,
            None
        ));
        let compaction = ContextEvent {
            same_scope: true,
            compaction: true,
            ..Default::default()
        };
        assert!(include_in_context(&compaction, None, None));
        let user = ContextEvent {
            by_user: true,
            node_path: Some("wf@1"),
            ..visible
        };
        assert!(include_in_context(&user, None, Some("wf@1")));
        assert!(!include_in_context(&user, None, Some("wf@2")));
        assert!(!include_in_context(&user, None, None));
        assert!(include_in_context(
            &ContextEvent {
                has_responses: true,
                ..user
            },
            None,
            None
        ));
        assert!(!include_in_context(
            &ContextEvent {
                framework_call: true,
                ..visible
            },
            None,
            None
        ));
        assert!(!include_in_context(
            &ContextEvent {
                branch: Some("x.y"),
                ..visible
            },
            Some("x"),
            None
        ));
    }

    #[test]
    fn branch_matches() {
        let user = |branch| BranchEvent {
            by_user: true,
            branch,
            answers_elsewhere: false,
        };
        assert!(branch_match(&user(None), Some("a")));
        assert!(branch_match(&user(Some("x")), None));
        assert!(branch_match(&user(Some("a.b")), Some("a")));
        assert!(!branch_match(&user(Some("ab")), Some("a")));
        assert!(!branch_match(&user(Some("a")), Some("")));
        assert!(branch_match(&user(Some("")), Some("")));
        assert!(!branch_match(
            &BranchEvent {
                answers_elsewhere: true,
                ..user(None)
            },
            Some("a")
        ));
        let agent = BranchEvent {
            branch: Some("a.b"),
            ..Default::default()
        };
        assert!(!branch_match(&agent, Some("a")));
        assert!(branch_match(&agent, Some("a.b")));
        assert!(branch_match(&BranchEvent::default(), None));
        assert!(on_branch("a.b", "a") && on_branch("a", "a") && !on_branch("ab", "a"));
        assert!(!on_branch("", ""));
        let calls: std::collections::HashSet<String> = ["c1".to_owned()].into_iter().collect();
        assert!(!answers_elsewhere(["c2", "c1"], &calls));
        assert!(answers_elsewhere(["c2"], &calls));
        assert!(!answers_elsewhere([], &calls));
    }

    proptest! {
        #[test]
        fn branch_matches_segments(
            c in proptest::option::of("[ab.]{0,6}"),
            e in proptest::option::of("[ab.]{0,6}"),
        ) {
            prop_assert_eq!(
                branch_visible(c.as_deref(), e.as_deref()),
                reference_branch(c.as_deref(), e.as_deref())
            );
        }
    }
}
